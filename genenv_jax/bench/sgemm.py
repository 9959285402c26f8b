"""This machine's measured float32 matmul peak: numpy's sgemm (OpenBLAS) on two N x N float32 matrices, the median of
--repeats timed calls after one warm-up, counted as 2·N³ FLOPs a call. bench.step divides every figure by it.

  python -m genenv_jax.bench.sgemm [--size=4096] [--repeats=5] [--threads=N]

Prints a line, then one line `JSON: {...}`: GFLOP/s (median and best), the seconds of each call, and the OpenBLAS
that ran (its kernel's core name, its build config and its thread count, read from the library numpy loaded).

Run it through `measure`, which starts it in a process of its own with OPENBLAS_NUM_THREADS = the thread count and
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed from its environment, that process only. Some machines of this
workplace set both, because older OpenBLAS builds compute wrong results or crash on their processors; they make a
current numpy pick a slower kernel (the env notes), so a peak measured under them is not the machine's. OpenBLAS reads
them when it loads, hence the process of its own; the tests and every other command keep them as they are.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import sys
import time
from typing import Any, Sequence

from absl import flags

from genenv_jax import cli
from genenv_jax.bench import timing

UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")  # removed from the measuring process's environment (docstring)


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_integer("size", 4096, "N of the N x N x N float32 matmul.", lower_bound=1, flag_values=fv),
    flags.DEFINE_integer("repeats", 5, "Timed calls, after one warm-up call.", lower_bound=1, flag_values=fv),
    flags.DEFINE_integer(
      "threads",
      0,
      "OpenBLAS threads (0: as OPENBLAS_NUM_THREADS says, else every core); set before numpy loads OpenBLAS.",
      lower_bound=0,
      flag_values=fv,
    ),
  )


def openblas() -> dict[str, Any]:
  """The loaded OpenBLAS's core name (the kernel it dispatched to), build config and thread count, read through its
  own C functions (threadpoolctl's way, without the dependency); {} when numpy loaded no OpenBLAS."""
  with open("/proc/self/maps") as f:
    paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line})
  out: dict[str, Any] = {}
  for path in paths:
    lib = ctypes.CDLL(path)
    for key, name, restype in (
      ("core", "get_corename", ctypes.c_char_p),
      ("config", "get_config", ctypes.c_char_p),
      ("threads", "get_num_threads", ctypes.c_int),
    ):
      for symbol in (f"openblas_{name}", f"openblas_{name}64_", f"scipy_openblas_{name}64_", f"scipy_openblas_{name}"):
        fn = getattr(lib, symbol, None)
        if fn is not None:
          fn.restype = restype
          value = fn()
          out[key] = value.decode() if isinstance(value, bytes) else value
          break
    if out:
      return {**out, "library": os.path.basename(path)}
  return out


def main(argv: Sequence[str]) -> None:
  """Times the matmul; prints a line and the `JSON: ...` line."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  if args.threads:
    if "numpy" in sys.modules:
      raise ValueError("--threads must be set before numpy loads (run this as a program, or through `measure`)")
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
  import numpy as np

  n = args.size
  rng = np.random.default_rng(0)
  a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
  a @ b  # the warm-up: OpenBLAS starts its threads
  times = []
  for _ in range(args.repeats):
    t0 = time.perf_counter()
    a @ b
    times.append(time.perf_counter() - t0)
  flop = 2.0 * n**3
  result = {
    "size": n,
    "repeats": args.repeats,
    "times": times,
    "gflop_s": flop / statistics.median(times) / 1e9,
    "best_gflop_s": flop / min(times) / 1e9,
    "numpy": np.__version__,
    "openblas": openblas(),
    "environment": {name: os.environ.get(name) for name in (*UNSET, "OPENBLAS_NUM_THREADS")},
  }
  print(f"float32 matmul {n}^3: {result['gflop_s']:.1f} GFLOP/s (median of {args.repeats}), {result['openblas']}")
  print(timing.JSON_PREFIX + json.dumps(result))


def measure(size: int, repeats: int, threads: int) -> dict[str, Any]:
  """This command's figures, run in a process of its own with `threads` OpenBLAS threads and OPENBLAS_CORETYPE and
  OPENBLAS_L2_SIZE unset there (module docstring), and the seconds that process took."""
  env = {k: v for k, v in os.environ.items() if k not in UNSET}
  env["OPENBLAS_NUM_THREADS"] = str(threads)
  result, wall = timing.run_json(
    "genenv_jax.bench.sgemm", [f"--size={size}", f"--repeats={repeats}", f"--threads={threads}"], env
  )
  return {**result, "wall_s": wall}


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.bench.sgemm")
