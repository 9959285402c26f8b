"""Where a compiled program's time goes on XLA:CPU: the time of each thunk (one fusion, dot, copy or loop of the
compiled HLO) from a JAX profiler trace, beside the FLOPs of the matrix products it holds.

  python -m genenv_jax.bench.thunk_profile [--model=smollm2-135m] [--layers=6] [--rows=16] [--length=128] \
      [--what=update|forward] [--calls=2] [--top=40] [--trace_dir=DIR]

The program is the update bench.step measures (bench.side_by_side: forward + backward + AdamW on `rows` x `length`
tokens, full fine-tuning) or its reference forward, on a random model of a planning.architectures.KNOWN_MODELS shape
cut to `--layers` layers (the per-layer thunks run once a layer; the LM head's once per log-prob chunk). The JAX
profiler's trace names each thunk XLA:CPU runs after its HLO instruction; $XLA_FLAGS applies as set, so the same
command compares XLA options.

Each row: milliseconds a call, executions a call, and, for a thunk that multiplies matrices, its FLOPs a call
(2·M·N·K per product, counted from the HLO's shapes: `dot_flops`) and their rate. XLA's thunk executor runs
independent thunks at once on the same threads, so the rows' times can add up to more than the call's wall time, and
an overlapped product's rate reads below what it gets alone. A loop (`while`) row holds the thunks inside it.
"""

from __future__ import annotations

import collections
import glob
import gzip
import json
import math
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Sequence

from absl import flags

from genenv_jax import cli

_COMPUTATION = re.compile(r"^(?:ENTRY )?%(\S+) .*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = (\w+)\[([0-9,]*)\]")
_DOT = re.compile(r"^\s*(?:ROOT )?%(\S+) = \w+\[([0-9,]*)\]\S* dot\(%([^,\s)]+), %([^,\s)]+)\)")
_CALLS = re.compile(r"^\s*(?:ROOT )?%(\S+) = .*?\b(?:calls|body|to_apply)=%([^,\s}]+)")
_PARAMETER = re.compile(r"^\s*%?(\S+): (\w+)\[([0-9,]*)\]")


def _dims(text: str) -> list[int]:
  return [int(d) for d in text.split(",") if d]


def _computations(hlo_text: str) -> dict[str, list[str]]:
  """The HLO module's computations by name, each as its body's lines (fused computations included)."""
  out: dict[str, list[str]] = {}
  current = None
  for line in hlo_text.splitlines():
    match = _COMPUTATION.match(line)
    if match:
      current = match.group(1)
      out[current] = [line]
    elif current is not None:
      if line.startswith("}"):
        current = None
      else:
        out[current].append(line)
  return out


def _shapes(lines: list[str]) -> dict[str, list[int]]:
  """Every value's dimensions in one computation: its instructions' and its header's parameters'."""
  shapes = {}
  header = lines[0]
  inside = header[header.find("(") + 1 : header.rfind(") ->")] if ") ->" in header else ""
  for part in inside.split(", "):
    match = _PARAMETER.match(part.strip())
    if match:
      shapes[match.group(1)] = _dims(match.group(3))
  for line in lines[1:]:
    match = _INSTRUCTION.match(line)
    if match:
      shapes[match.group(1)] = _dims(match.group(3))
  return shapes


def instruction_names(hlo_text: str) -> set[str]:
  """Every instruction name of the compiled HLO `hlo_text` (the names its thunks carry in a trace)."""
  return {m.group(1) for line in hlo_text.splitlines() if (m := re.match(r"^\s*(?:ROOT )?%(\S+) = ", line))}


def dot_flops(hlo_text: str) -> dict[str, int]:
  """FLOPs of one execution of each instruction of the compiled HLO `hlo_text` that multiplies matrices: a `dot`,
  2·prod(output dims)·prod(lhs contracting dims), or an instruction that calls computations holding dots (a fusion,
  a loop body, counted once per execution of the caller: a loop's row is per trip count unknown, so loops are left
  out). Names as XLA prints them, which are the thunk names of the trace."""
  computations = _computations(hlo_text)
  own: dict[str, int] = {}  # FLOPs of the dots directly inside each computation
  calls: dict[str, list[tuple[str, str]]] = {}
  per_instruction: dict[str, int] = {}
  for name, lines in computations.items():
    shapes = _shapes(lines)
    total = 0
    for line in lines[1:]:
      dot = _DOT.match(line)
      if dot:
        contracting = re.search(r"lhs_contracting_dims=\{([0-9,]*)\}", line)
        lhs = shapes.get(dot.group(3))
        if lhs is None or contracting is None:
          continue
        flops = 2 * math.prod(_dims(dot.group(2))) * math.prod(lhs[i] for i in _dims(contracting.group(1)))
        per_instruction[dot.group(1)] = flops
        total += flops
      called = _CALLS.match(line)
      if called and " while(" not in line:
        calls.setdefault(name, []).append((called.group(1), called.group(2)))
    own[name] = total

  def inside(computation: str, seen: frozenset = frozenset()) -> int:
    if computation in seen:
      return 0
    return own.get(computation, 0) + sum(inside(c, seen | {computation}) for _, c in calls.get(computation, ()))

  for caller in calls.values():
    for instruction, computation in caller:
      flops = inside(computation)
      if flops:
        per_instruction[instruction] = flops
  return per_instruction


def trace_durations(trace_dir: str) -> dict[str, tuple[float, int]]:
  """(total microseconds, executions) of every complete event name in the newest perfetto trace under `trace_dir`
  (`jax.profiler.trace(trace_dir, create_perfetto_trace=True)`)."""
  files = sorted(glob.glob(os.path.join(trace_dir, "**", "*.trace.json.gz"), recursive=True), key=os.path.getmtime)
  if not files:
    raise FileNotFoundError(f"no *.trace.json.gz under {trace_dir}: was it written by jax.profiler.trace(...)?")
  with gzip.open(files[-1]) as f:
    events = json.load(f)["traceEvents"]
  total: collections.Counter = collections.Counter()
  count: collections.Counter = collections.Counter()
  for event in events:
    if event.get("ph") == "X":
      total[event["name"]] += event.get("dur", 0)
      count[event["name"]] += 1
  return {name: (total[name], count[name]) for name in total}


@dataclass(frozen=True)
class Row:
  """One thunk: milliseconds and executions per call, FLOPs per call (0: no matrix product)."""

  name: str
  ms: float
  executions: float
  flops: float

  @property
  def gflops_per_s(self) -> float:
    return self.flops / self.ms / 1e6 if self.flops and self.ms else 0.0


def rows(durations: dict[str, tuple[float, int]], hlo_text: str, calls: int) -> list[Row]:
  """The traced thunks of the program `hlo_text` (events named after its instructions; the runtime's and Python's
  own spans left out), per call, longest first."""
  names, flops = instruction_names(hlo_text), dot_flops(hlo_text)
  out = []
  for name, (microseconds, executions) in durations.items():
    if name not in names:
      continue
    per_call = executions / calls
    out.append(Row(name, microseconds / 1e3 / calls, per_call, flops.get(name, 0) * per_call))
  return sorted(out, key=lambda r: -r.ms)


def format_rows(table: Sequence[Row], wall_ms: float, top: int) -> str:
  lines = [f"wall {wall_ms:.1f} ms a call; thunk times overlap (module docstring)", ""]
  lines.append(f"{'ms/call':>10} {'runs':>6} {'GFLOP':>8} {'GFLOP/s':>8}  thunk")
  for r in table[:top]:
    rate = f"{r.flops / 1e9:8.1f} {r.gflops_per_s:8.1f}" if r.flops else f"{'':8} {'':8}"
    lines.append(f"{r.ms:10.1f} {r.executions:6.0f} {rate}  {r.name}")
  flops = sum(r.flops for r in table)
  lines.append("")
  lines.append(f"matrix products: {flops / 1e9:.1f} GFLOP a call, {flops / wall_ms / 1e6:.1f} GFLOP/s of wall time")
  return "\n".join(lines)


def profile(compiled: Any, args: tuple, calls: int, trace_dir: str) -> tuple[list[Row], float]:
  """Runs `compiled(*args)` once to warm up, then `calls` times under the profiler; (rows, wall ms a call)."""
  import jax

  jax.block_until_ready(compiled(*args))
  start = time.perf_counter()
  with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
    for _ in range(calls):
      jax.block_until_ready(compiled(*args))
  wall_ms = (time.perf_counter() - start) * 1e3 / calls
  return rows(trace_durations(trace_dir), compiled.as_text(), calls), wall_ms


def program(model: str, layers: int, rows_: int, length: int, what: str, chunk: int) -> tuple[Any, tuple]:
  """The compiled update (or reference forward) of bench.side_by_side on a random `model` of `layers` layers, and
  its arguments."""
  import jax
  import optax
  from flax import nnx

  from genenv_jax.bench import side_by_side
  from genenv_jax.models.config import ModelConfig
  from genenv_jax.models.transformer import Transformer
  from genenv_jax.planning.architectures import KNOWN_MODELS
  from genenv_jax.rl.updates import gradient_step

  if model not in KNOWN_MODELS:
    raise ValueError(
      f"--model={model!r} is not a planning.architectures.KNOWN_MODELS name; choose one of {sorted(KNOWN_MODELS)}"
    )
  fields = {f for f in ModelConfig.__dataclass_fields__}
  shape = {k: v for k, v in KNOWN_MODELS[model].items() if k in fields}
  config = ModelConfig(**{**shape, "num_layers": layers or shape["num_layers"]})
  graphdef, params = nnx.split(Transformer(config, rngs=nnx.Rngs(0)))
  batch = jax.tree.map(jax.numpy.asarray, side_by_side.update_batch(rows_, length, config.vocab_size))
  loss = side_by_side.logprob_loss(graphdef, chunk)
  if what == "forward":
    fn, args = (lambda p, b: loss(p, b)[0]), (params, batch)
  else:
    optimizer = optax.adamw(1e-5)
    fn = lambda p, o, b: gradient_step(loss, optimizer, p, o, b)  # noqa: E731
    args = (params, optimizer.init(params), batch)
  return jax.jit(fn).lower(*args).compile(), args


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_string("model", "smollm2-135m", "A planning.architectures.KNOWN_MODELS shape.", flag_values=fv),
    flags.DEFINE_integer("layers", 6, "Layers of the model (0: the shape's own).", flag_values=fv),
    flags.DEFINE_integer("rows", 16, "Rows of the batch.", flag_values=fv),
    flags.DEFINE_integer("length", 128, "Tokens a row: a 1-token prompt and the response.", flag_values=fv),
    flags.DEFINE_enum("what", "update", ["update", "forward"], "The program profiled.", flag_values=fv),
    flags.DEFINE_integer("chunk", 512, "Response positions per LM-head chunk (rl.logprobs).", flag_values=fv),
    flags.DEFINE_integer("calls", 2, "Profiled calls (after one warm-up).", flag_values=fv),
    flags.DEFINE_integer("top", 40, "Rows printed.", flag_values=fv),
    flags.DEFINE_string(
      "trace_dir", "", "Where the trace goes (default: a fresh temporary directory).", flag_values=fv
    ),
  )


def main(argv: Sequence[str]) -> None:
  """Prints the thunk table of the chosen program."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  for name in ("layers", "rows", "length", "chunk", "calls", "top"):
    if getattr(args, name) < (0 if name == "layers" else 1):
      raise ValueError(f"--{name}={getattr(args, name)} must be {'>= 0' if name == 'layers' else 'positive'}")
  if args.length < 2:
    raise ValueError(f"--length={args.length} must be at least 2: a 1-token prompt and a response")
  import tempfile

  compiled, call_args = program(args.model, args.layers, args.rows, args.length, args.what, args.chunk)
  trace_dir = args.trace_dir or tempfile.mkdtemp(prefix="thunk_profile_")
  table, wall_ms = profile(compiled, call_args, args.calls, trace_dir)
  print(
    f"{args.what} of {args.model} at {args.layers or 'all'} layers, {args.rows} x {args.length} tokens; "
    f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; trace in {trace_dir}"
  )
  print(format_rows(table, wall_ms, args.top))


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.bench.thunk_profile")
