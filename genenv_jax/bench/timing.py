"""What the benchmarks share: timed compiles, blocking calls timed round-robin, figures from times (tok/s, GFLOP/s,
share of a peak), a process's peak resident memory, and a benchmark run in a process of its own that answers with
one `JSON: {...}` line.

Imports no JAX or torch at module level: the torch side of bench.step (bench.torch_side) and the matmul peak
(bench.sgemm) use it in processes that load neither JAX nor, for the peak, torch.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Mapping, Sequence

JSON_PREFIX = "JSON: "


def compile_timed(jitted, args: tuple, options: dict | None = None) -> tuple[Any, float, float]:
  """(compiled, trace+lower seconds, compile seconds) of `jitted.lower(*args).compile(options)`."""
  t0 = time.perf_counter()
  lowered = jitted.lower(*args)
  t1 = time.perf_counter()
  compiled = lowered.compile(compiler_options=options or None)
  return compiled, t1 - t0, time.perf_counter() - t1


def shardings(tree: Any) -> Any:
  """The sharding of every array of `tree`."""
  import jax

  return jax.tree.map(lambda x: x.sharding, tree)


def compile_jitted(
  fn: Callable, args: tuple, in_shardings: tuple, options: dict | None = None
) -> tuple[dict[str, Any], Any, Callable[[], Any]]:
  """Compiles `fn` with explicit input shardings (timed) and calls it once (the warm-up); returns the compile
  figures, that call's output and a blocking zero-argument call for the timing pass."""
  import jax

  compiled, lower_s, compile_s = compile_timed(jax.jit(fn, in_shardings=in_shardings), args, options)
  call = lambda: jax.block_until_ready(compiled(*args))  # noqa: E731
  return {"lower_s": lower_s, "compile_s": compile_s}, call(), call


def interleaved(calls: dict[str, Callable[[], Any]], repeats: int, warmup: bool = True) -> dict[str, list[float]]:
  """Times blocking calls round-robin (after a warm-up call each), so load drift on a shared machine hits all alike."""
  for call in calls.values() if warmup else ():
    call()
  times: dict[str, list[float]] = {name: [] for name in calls}
  for _ in range(repeats):
    for name, call in calls.items():
      t0 = time.perf_counter()
      call()
      times[name].append(time.perf_counter() - t0)
  return times


def figures(times: Sequence[float]) -> dict[str, Any]:
  """The median (`seconds`), the best and every one of a list of timed calls."""
  return {"seconds": statistics.median(times), "best_s": min(times), "times": list(times)}


def rated(seconds: float, tokens: float, flops: float, peak_gflop_s: float | None) -> dict[str, float | None]:
  """tok/s, GFLOP/s and the share of the peak (GFLOP/s over `peak_gflop_s`; None without a peak) of work that took
  `seconds`; None everywhere when `seconds` is not positive (a difference of times, lost in noise)."""
  if seconds <= 0:
    return {"tok_s": None, "gflop_s": None, "peak_share": None}
  gflop_s = flops / seconds / 1e9
  return {"tok_s": tokens / seconds, "gflop_s": gflop_s, "peak_share": gflop_s / peak_gflop_s if peak_gflop_s else None}


def peak_rss_bytes() -> int:
  """This process's peak resident memory: VmHWM of /proc/self/status, the high-water mark of its own address space
  (Linux). ru_maxrss would not do for a child process: Linux carries the parent's peak across fork and exec into it.
  Elsewhere, ru_maxrss (kilobytes on Linux, bytes on macOS)."""
  try:
    with open("/proc/self/status") as f:
      for line in f:
        if line.startswith("VmHWM:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return rss if sys.platform == "darwin" else rss * 1024


def run_json(module: str, argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float | None = None):
  """Runs `python -m MODULE ARGV...` in a process of its own and returns its `JSON: {...}` line, parsed, and its
  wall seconds; RuntimeError with the end of its output when it fails or prints no such line."""
  t0 = time.perf_counter()
  proc = subprocess.run(
    [sys.executable, "-m", module, *argv],
    env=dict(os.environ if env is None else env),
    capture_output=True,
    text=True,
    timeout=timeout,
  )
  lines = [x for x in proc.stdout.splitlines() if x.startswith(JSON_PREFIX)]
  if proc.returncode != 0 or len(lines) != 1:
    raise RuntimeError(
      f"python -m {module} {' '.join(argv)} exited {proc.returncode} with {len(lines)} JSON lines; its output ends:\n"
      + (proc.stdout + proc.stderr)[-3000:]
    )
  return json.loads(lines[0][len(JSON_PREFIX) :]), time.perf_counter() - t0
