"""What a compiled program communicates: the collectives of an optimised HLO module, by kind, with bytes and sources.

`collectives(text)` reads `compiled.as_text()` (XLA's optimised, SPMD-partitioned HLO: one device's program) and
returns one `HloCollective` per collective instruction:
  kind      all-reduce, all-gather, reduce-scatter, all-to-all or collective-permute (an async `-start` counts as its
            kind; its `-done` is not counted again);
  bytes     what one device receives per execution, by the ring volumes planning.analytic uses (Patarasuk & Yuan
            2009): all-gather (n-1)/n of the gathered array, reduce-scatter (n-1)/n of the array reduced,
            all-reduce 2(n-1)/n of the array, all-to-all (n-1)/n of the array, collective-permute the whole buffer
            (n = the replica group's size);
  executions how many times it runs in one call: the product of the trip counts of the while loops around it. A
            loop's trip count is read from its condition (`compare(counter, constant N), direction=LT`) and the step
            its body adds to the counter (XLA steps an unrolled loop's counter by 2): ceil(N / step); a loop that
            also stops early (the sampler's decode, which ends when every row is done) counts its bound, every row
            decoding its full budget, as planning.analytic does; a loop whose bound cannot be read counts once and
            is listed in `unknown_loops`;
  source    the innermost frame of the op's stack trace (file:line function) in the program's own code.
`summarise` totals them by kind. The Mosaic kernels (Pallas on TPU) are the `tpu_custom_call` custom calls.

Collective matmuls: XLA's TPU compiler may decompose an fsdp all-gather (or reduce-scatter) feeding a matmul into a
loop of collective-permutes that overlaps the matmul ("windowed einsum": loops named windowed_dot_general_body_ag and
_rs). Those permutes are the all-gather or reduce-scatter the sharding design calls for, moved in pieces; `role`
names the collective they implement, so they are compared with the analytic model's all-gathers and reduce-scatters.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter, defaultdict

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_ITEMSIZE = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4}
_ITEMSIZE |= {"s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "s4": 0.5, "u4": 0.5}
_ARRAY = re.compile(r"\b(pred|[subfc]\d+|bf16|f8e\w+)\[([\d,]*)\]")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s+([\w\-]+)\((.*)$")
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")


@dataclasses.dataclass(frozen=True)
class HloCollective:
  kind: str
  bytes: float  # received per device per execution (ring volume)
  buffer_bytes: int  # the array the op works on, per device
  group: int  # devices in one replica group
  executions: int  # times it runs per call of the program (loop trip counts multiplied)
  computation: str
  source: str  # innermost own-code frame, "file:line function", or the op_name where no frame is known

  @property
  def role(self) -> str:
    """The collective this op implements: its kind, or for a collective matmul's permute, all-gather or
    reduce-scatter."""
    if self.kind == "collective-permute" and "windowed_dot_general_body_ag" in self.computation:
      return "all-gather"
    if self.kind == "collective-permute" and "windowed_dot_general_body_rs" in self.computation:
      return "reduce-scatter"
    return self.kind


@dataclasses.dataclass(frozen=True)
class HloReport:
  collectives: tuple[HloCollective, ...]
  mosaic_kernels: int  # tpu_custom_call instructions (static count)
  unknown_loops: tuple[str, ...]  # while loops whose trip count could not be read (counted once)


def _array_bytes(type_text: str) -> list[float]:
  """Bytes of each array in an HLO type ('f32[4,8]{1,0}' or a tuple of them), in order."""
  out = []
  for dtype, dims in _ARRAY.findall(type_text):
    size = _ITEMSIZE.get(dtype, 1 if dtype.startswith("f8") else 4)
    out.append(size * math.prod(int(d) for d in dims.split(",") if d))
  return out


def _group_size(attrs: str, partitions: int) -> int:
  """The replica group size of a collective: explicit {{0,1},{2,3}}, iota [g,n]<=[...], or mesh[...] {'axes'}."""
  m = re.search(r"replica_groups=\{\{([\d,]*)\}", attrs)
  if m:
    return max(1, len([x for x in m.group(1).split(",") if x]))
  m = re.search(r"replica_groups=\[(\d+),(\d+)\]<=", attrs)
  if m:
    return int(m.group(2))
  m = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", attrs)
  if m:
    sizes = dict(re.findall(r"'([^']+)'=(\d+)", m.group(1)))
    axes = re.findall(r"'([^']+)'", m.group(2))
    return max(1, math.prod(int(sizes.get(a, 1)) for a in axes))
  m = re.search(r"source_target_pairs=\{(.*?)\}\}", attrs)
  if m:
    return 2
  return partitions


def _received(kind: str, buffer: float, n: int) -> float:
  if kind == "all-reduce":
    return 2.0 * buffer * (n - 1) / n
  if kind == "collective-permute":
    return float(buffer)
  return buffer * (n - 1) / n


def _buffer(kind: str, opcode: str, type_text: str) -> int:
  """The array the collective works on: the gathered result of an all-gather, the input of a reduce-scatter (the
  result times the group, applied by the caller), the buffer of the others. Async starts return tuples
  (operands, results, [u32 context]) whose data arrays come first."""
  sizes = _array_bytes(type_text)
  if opcode.endswith("-start"):
    sizes = _strip_context(type_text, sizes)
    half = max(1, len(sizes) // 2)
    operands, results = sizes[:half], sizes[half:] or sizes[:half]
    if kind == "all-gather":
      return int(sum(results))
    return int(sum(operands))
  return int(sum(sizes))


def _strip_context(type_text: str, sizes: list[float]) -> list[float]:
  """Drops the trailing u32[] context scalars of an async collective's tuple type."""
  arrays = _ARRAY.findall(type_text)
  while arrays and arrays[-1][0] == "u32" and arrays[-1][1] == "" and len(arrays) > 1:
    arrays.pop()
    sizes = sizes[:-1]
  return sizes


def _stack_sources(text: str) -> dict[int, str]:
  """stack_frame_id -> 'file:line function' of its innermost frame outside jax, optax and flax (the module's
  FileNames / FunctionNames / FileLocations / StackFrames tables)."""
  tables: dict[str, dict[int, str]] = defaultdict(dict)
  section = None
  for line in text.splitlines():
    if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
      section = line
      continue
    if section is None:
      continue
    m = re.match(r"^(\d+) (.*)$", line)
    if not m:  # a table ends at the first line that is not one of its rows
      section = None
      continue
    tables[section][int(m.group(1))] = m.group(2)
  files = {k: v.strip('"') for k, v in tables["FileNames"].items()}
  functions = {k: v.strip('"') for k, v in tables["FunctionNames"].items()}
  locations = {}
  for k, v in tables["FileLocations"].items():
    f = re.search(r"file_name_id=(\d+)", v)
    fn = re.search(r"function_name_id=(\d+)", v)
    ln = re.search(r"\bline=(\d+)", v)
    if f and ln:
      locations[k] = (
        files.get(int(f.group(1)), "?"),
        int(ln.group(1)),
        functions.get(int(fn.group(1)) if fn else 0, ""),
      )
  frames = {}
  for k, v in tables["StackFrames"].items():
    loc = re.search(r"file_location_id=(\d+)", v)
    parent = re.search(r"parent_frame_id=(\d+)", v)
    frames[k] = (int(loc.group(1)) if loc else 0, int(parent.group(1)) if parent else 0)

  def own(path: str) -> bool:
    return not any(p in path for p in ("/site-packages/", "/jax/", "/optax/", "/flax/"))

  out = {}
  for k in frames:
    seen, frame, chosen = set(), k, None
    while frame and frame not in seen and frame in frames:
      seen.add(frame)
      loc_id, parent = frames[frame]
      if loc_id in locations and own(locations[loc_id][0]):
        chosen = locations[loc_id]
        break
      frame = parent
    if chosen:
      path, line, fn = chosen
      short = path.split("genenv_jax/", 1)[-1] if "genenv_jax/" in path else path.rsplit("/", 1)[-1]
      out[k] = f"{short}:{line} {fn}"
  return out


def _computations(text: str) -> tuple[dict[str, list[str]], str]:
  """name -> its instruction lines, and the entry computation's name."""
  comps: dict[str, list[str]] = {}
  entry, current = "", None
  for line in text.splitlines():
    if current is None:
      m = _COMPUTATION.match(line)
      if m and not line.startswith("HloModule"):
        current = m.group(2)
        comps[current] = []
        if m.group(1):
          entry = current
      continue
    if line.strip() == "}":
      current = None
      continue
    comps[current].append(line)
  return comps, entry


def _constants(lines: list[str]) -> dict[str, int]:
  """name -> value of the integer scalar constants among `lines`."""
  out = {}
  for line in lines:
    m = _INSTR.match(line)
    if m and m.group(3) == "constant":
      c = re.match(r"(-?\d+)\)", m.group(4))
      if c:
        out[m.group(1)] = int(c.group(1))
  return out


def _tuple_index(lines: list[str], name: str) -> int | None:
  """The tuple index of `name` where it is a get-tuple-element of the computation's parameter."""
  for line in lines:
    m = _INSTR.match(line)
    if m and m.group(1) == name and m.group(3) == "get-tuple-element":
      k = re.search(r"index=(\d+)", line)
      return int(k.group(1)) if k else None
  return None


def _operands(rest: str) -> list[str]:
  return re.findall(r"%([\w.\-]+)", rest.split(")")[0])


def _counter_step(body: list[str], counter: int) -> int:
  """What the loop body adds to tuple element `counter`: the constant c of the `add(counter, c)` that the body's ROOT
  tuple returns at that position (1 where it is not such an add)."""
  lines = {m.group(1): m for line in body if (m := _INSTR.match(line))}
  root = next((m for line in body if line.lstrip().startswith("ROOT") and (m := _INSTR.match(line))), None)
  if root is None or root.group(3) != "tuple":
    return 1
  outputs = re.findall(r"%([\w.\-]+)", root.group(4))
  nxt = lines.get(outputs[counter]) if counter < len(outputs) else None
  if nxt is None or nxt.group(3) != "add":
    return 1
  constants = _constants(body)
  ops = _operands(nxt.group(4))
  steps = [constants[o] for o in ops if o in constants]
  if steps and steps[0] > 0 and any(_tuple_index(body, o) == counter for o in ops):
    return steps[0]
  return 1


def _trip_count(cond: list[str], body: list[str]) -> int | None:
  """The trip count of a loop `i < N` whose body adds a constant step to i (XLA unrolls some loops, the collective
  matmuls' by two, and steps their counter by 2): ceil(N / step), the counter starting at 0. None where no such
  bound is found."""
  constants = _constants(cond)
  bound = counter = None
  for line in cond:
    m = _INSTR.match(line)
    if m and m.group(3) == "compare" and "direction=LT" in line:
      ops = _operands(m.group(4))
      limits = [constants[o] for o in ops if o in constants]
      others = [o for o in ops if o not in constants]
      if limits and (bound is None or limits[0] > bound):
        bound = limits[0]
        counter = _tuple_index(cond, others[0]) if others else None
  if bound is None:
    return None
  step = _counter_step(body, counter) if counter is not None else 1
  return -(-bound // step)


def _multiplicities(comps: dict[str, list[str]], entry: str) -> tuple[dict[str, int], list[str]]:
  """How many times each computation runs per call of the entry (while bodies multiply by their trip count; fusions,
  calls and branches by 1), and the loops whose trip count could not be read."""
  mult: dict[str, int] = defaultdict(int)
  unknown: list[str] = []
  mult[entry] = 1
  order = [entry]
  seen = {entry}
  while order:
    name = order.pop(0)
    for line in comps.get(name, []):
      m = _INSTR.match(line)
      if not m:
        continue
      opcode, rest = m.group(3), m.group(4)
      callees: list[tuple[str, int]] = []
      if opcode == "while":
        body = re.search(r"body=%?([\w.\-]+)", rest)
        cond = re.search(r"condition=%?([\w.\-]+)", rest)
        trips = (
          _trip_count(comps.get(cond.group(1), []), comps.get(body.group(1), []) if body else []) if cond else None
        )
        if trips is None:
          unknown.append(m.group(1))
        if body:
          callees.append((body.group(1), trips or 1))
        if cond:
          callees.append((cond.group(1), (trips or 1) + 1))
      else:
        for attr in ("calls", "to_apply", "branch_computations", "called_computations"):
          for group in re.findall(rf"{attr}=\{{?([^}},]*(?:,\s*%[\w.\-]+)*)\}}?", rest):
            callees += [(c, 1) for c in re.findall(r"%?([\w.\-]+)", group) if c in comps]
      for callee, k in callees:
        mult[callee] += mult[name] * k
        if callee not in seen:
          seen.add(callee)
          order.append(callee)
  return mult, unknown


def analyse(text: str) -> HloReport:
  """The collectives and Mosaic kernels of an optimised HLO module's text (`compiled.as_text()`)."""
  partitions = int(m.group(1)) if (m := re.search(r"num_partitions=(\d+)", text)) else 1
  sources = _stack_sources(text)
  comps, entry = _computations(text)
  mult, unknown = _multiplicities(comps, entry)
  found, mosaic = [], 0
  for name, lines in comps.items():
    for line in lines:
      m = _INSTR.match(line)
      if not m:
        continue
      type_text, opcode, rest = m.group(2), m.group(3), m.group(4)
      if opcode == "custom-call" and 'custom_call_target="tpu_custom_call"' in rest:
        mosaic += 1
      kind = opcode[: -len("-start")] if opcode.endswith("-start") else opcode
      if kind not in KINDS:
        continue
      n = _group_size(rest, partitions)
      buffer = _buffer(kind, opcode, type_text)
      if kind == "reduce-scatter":
        buffer *= n
      frame = re.search(r"stack_frame_id=(\d+)", rest)
      op_name = re.search(r'op_name="([^"]*)"', rest)
      source = sources.get(int(frame.group(1)), "") if frame else ""
      found.append(
        HloCollective(
          kind=kind,
          bytes=_received(kind, buffer, n),
          buffer_bytes=buffer,
          group=n,
          executions=max(1, mult.get(name, 1)),
          computation=name,
          source=source or (op_name.group(1) if op_name else ""),
        )
      )
  return HloReport(tuple(found), mosaic, tuple(unknown))


def summarise(report: HloReport) -> dict[str, dict[str, float]]:
  """Per kind: `ops` (instructions in the program), `executions` (per call, loops unrolled) and `bytes` (received per
  device per call); `role_bytes`: the bytes of the collectives that implement this kind, collective matmuls' permutes
  counted as the all-gather or reduce-scatter they move (the figure to set beside the analytic model's)."""
  out = {k: {"ops": 0, "executions": 0, "bytes": 0.0, "role_bytes": 0.0} for k in KINDS}
  for c in report.collectives:
    out[c.kind]["ops"] += 1
    out[c.kind]["executions"] += c.executions
    out[c.kind]["bytes"] += c.bytes * c.executions
    out[c.role]["role_bytes"] += c.bytes * c.executions
  return out


def by_source(report: HloReport, kinds=KINDS) -> list[tuple[str, str, int, float]]:
  """(kind, source, executions, bytes per call) of the given kinds, grouped by source, most bytes first."""
  acc: Counter = Counter()
  execs: Counter = Counter()
  for c in report.collectives:
    if c.kind in kinds:
      kind = c.kind if c.role == c.kind else f"{c.kind} ({c.role} matmul)"
      acc[(kind, c.source)] += c.bytes * c.executions
      execs[(kind, c.source)] += c.executions
  return sorted(((k, s, execs[(k, s)], b) for (k, s), b in acc.items()), key=lambda r: -r[3])
