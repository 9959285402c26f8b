"""Fuzzes every benchmark scorer and every task family's parser and scorer: exceptions, timeouts, slowest input.

Targets (`make_targets`): for each benchmark of `benchmarks.registry.BENCHMARKS`, `score(item, text)` on the first item
of each split (BFCL: of each category, in both BFCL modes; ALFWorld: a synthetic item, since loading plays games), and
for each training task family, `parse(text)` and `score(gold, text)` with the gold of its first seed (ALFWorld: a
written decision point). A scorer must return for any `str` and never raise.

Inputs: `adversarial_texts(size)` (about 1 MB each by default): unclosed, nested and repeated tags of every tag the
scorers read, a million `<`, NUL bytes, lone surrogates, deeply nested brackets and unary chains (`[[[[...`,
`- - - - 1`, which make `ast.literal_eval` raise MemoryError or recurse), long quotes, bare call prefixes, and each
of them inside the formats the parsers look for (code fences, `<tool_call>` blocks, `API-Request:` lines, `Calls:`
lines); the same again at `--mid_size` (10,000 characters: deep nesting that stays under the parsers' length caps, so
it reaches the recursive parsers that a 1 MB input skips); then `random_texts`: short strings drawn from the scorers'
syntax pieces, so most reach the deep rules.

Each call runs under a wall-clock alarm (`--timeout` seconds); a call over it counts as a timeout and the run goes
on. The report: inputs run, exceptions and timeouts (with the target and the input), and the slowest call.

  PYTHONPATH=$PWD python -m genenv_jax.scripts.fuzz_scorers [--data_dir DIR] [--size 1000000] [--mid_size 10000]
      [--random 4000] [--seed 0] [--timeout 10] [--only SUBSTRING]
Exit status: 0 when no call raised or timed out, 1 otherwise, 2 on a bad flag or missing data.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import random
import signal
import time
import traceback
from typing import Any, Callable, Iterable, Iterator, Sequence

from absl import flags

from genenv_jax import cli
from genenv_jax.data import resolve_data_dir
from genenv_jax.tasks.benchmark import EvalItem

Target = tuple[str, Callable[[str], Any]]

TAGS = ("answer", "think", "tool_call", "search", "result", "user", "functions", "TOOLCALL")
PIECES = (
  "[",
  "]",
  "(",
  ")",
  "{",
  "}",
  "<",
  ">",
  "'",
  '"',
  "\\",
  ",",
  "=",
  ":",
  ";",
  "-",
  "+",
  "*",
  "**",
  ".",
  " ",
  "\n",
  "\t",
  "\x00",
  "\ud800",
  "`",
  "```",
  "```python\n",
  "f",
  "get_weather",
  "city",
  "a",
  "1",
  "1.5",
  "1e308",
  "-1",
  "True",
  "None",
  "null",
  "true",
  "new int[]{",
  "new ArrayList<>(Arrays.asList(",
  "new HashMap<>() {{",
  "put(",
  "add(",
  "L",
  "f",
  "n",
  "lambda",
  "x",
  "Answer: ",
  "Action: ",
  "> ",
  "API-Request: [",
  "Calls: ",
  "User: ",
  "Function: ",
  '{"name": "f", "parameters": {',
  '"a": 1}',
  "Day 1:",
  "Current City: ",
  "Transportation: ",
  "Breakfast: ",
  "Attraction: ",
  "Lunch: ",
  "Dinner: ",
  "Accommodation: ",
  "from A to B",
  "Flight Number: F123",
  "Self-driving",
  "Taxi",
  "-",
  ", ",
) + tuple(f"{o}{t}>" for t in TAGS for o in ("<", "</"))


def _repeat(unit: str, size: int) -> str:
  return unit * max(1, size // max(1, len(unit)))


def adversarial_texts(size: int) -> dict[str, str]:
  """Named adversarial inputs of about `size` characters (module docstring)."""
  half = size // 2
  texts = {
    "lt_flood": _repeat("<", size),
    "nul_bytes": _repeat("\x00", size),
    "lone_surrogates": _repeat("\ud800a\udfff", size),
    "open_brackets": _repeat("[", size),
    "open_parens": _repeat("(", size),
    "open_braces": _repeat("{", size),
    "unary_chain": _repeat("- ", size) + "1",
    "not_chain": _repeat("not ", size) + "1",
    "quote_flood": _repeat("'", size),
    "dquote_flood": _repeat('"', size),
    "backslashes": _repeat("\\", size),
    "commas": _repeat(",", size),
    "equals": _repeat("a=", size),
    "call_prefixes": _repeat("f(", size),
    "call_list": "[" + _repeat("f(a=1), ", size) + "]",
    "nested_list_literal": "[f(a=" + "[" * half + "1" + "]" * half + ")]",
    "unary_literal": "[f(a=" + _repeat("-", half) + "1)]",
    "newlines": _repeat("\n", size),
    "newlines_then_text": _repeat("\n", size) + "x",
    "long_line": _repeat("x", size),
    "spaces_then_text": _repeat(" ", size) + "x",
    "answer_lines": _repeat("Answer: x\n", size),
    "action_lines": _repeat("Action: go to x\n> look\n", size),
    "api_requests": _repeat("API-Request: [f(a='1')]\n", size),
    "api_request_unclosed": "API-Request: [" + _repeat("f(a=[", half),
    "json_nested": '<tool_call>{"name": "f", "parameters": ' + "[" * half + "]" * half + "}</tool_call>",
    "fence_unclosed": "```python\n" + _repeat("[f(", half),
    "fence_flood": _repeat("```", size),
    "java_array": "[f(a=new int[]{" + _repeat("1, ", half) + "})]",
    "java_map": "[f(a=new HashMap<>() {{" + _repeat("put(\"k\", 1); ", half) + "}})]",
    "generic_flood": "[f(a=new ArrayList<" + _repeat("<", half) + ">())]",
    "plan_lines": _repeat("Day 1:\nCurrent City: from A to B\nTransportation: Flight F1, from A to B\n", size),
    "random_bytes": "".join(map(chr, random.Random(0).choices(range(1, 0x2FF), k=size))),
  }
  for tag in TAGS:
    texts[f"unclosed_{tag}"] = _repeat(f"<{tag}>x", size)
    texts[f"closing_{tag}"] = _repeat(f"</{tag}>x", size)
    depth = size // (2 * len(tag) + 5)
    texts[f"nested_{tag}"] = f"<{tag}>" * depth + "x" + f"</{tag}>" * depth
    texts[f"open_close_{tag}"] = _repeat(f"<{tag}></{tag}>", half) + _repeat(f"<{tag}>", half)
  return texts


def random_texts(rng: random.Random, n: int, max_pieces: int = 24) -> Iterator[tuple[str, str]]:
  """`n` (name, text) pairs joined from 1..max_pieces random `PIECES`."""
  for k in range(n):
    yield f"random-{k}", "".join(rng.choices(PIECES, k=rng.randint(1, max_pieces)))


# ------------------------------------------------------------------------------------------------ targets


def _first_per_split(benchmark: Any, data_dir: str) -> list[EvalItem]:
  items = []
  for split in benchmark.splits():
    items += benchmark.load_items(data_dir, split, 1)
  return items


def _benchmark_targets(data_dir: str) -> list[Target]:
  from genenv_jax.benchmarks.api_bank.evaluator import ApiBankBenchmark
  from genenv_jax.benchmarks.bamboogle.evaluator import BamboogleBenchmark
  from genenv_jax.benchmarks.bfcl.evaluator import MODES, BfclBenchmark
  from genenv_jax.benchmarks.travelplanner.evaluator import TravelPlannerBenchmark

  targets: list[Target] = []
  benchmarks = [
    ("api_bank", ApiBankBenchmark()),
    ("bamboogle", BamboogleBenchmark()),
    ("travelplanner", TravelPlannerBenchmark()),
  ]
  benchmarks += [(f"bfcl[{mode}]", BfclBenchmark(mode=mode)) for mode in MODES]
  for name, bench in benchmarks:
    for item in _first_per_split(bench, data_dir):
      targets.append((f"{name}.score[{item.split}]", lambda text, b=bench, i=item: b.score(i, text)))
  try:
    from genenv_jax.benchmarks.alfworld.evaluator import AlfworldStepBenchmark
  except ImportError:
    return targets
  alf = AlfworldStepBenchmark()
  item = EvalItem("synthetic", "valid_unseen", (), {"action": "go to desk 1", "admissible": ["go to desk 1", "look"]})
  targets.append(("alfworld.score", lambda text: alf.score(item, text)))
  return targets


def _family_targets(data_dir: pathlib.Path) -> list[Target]:
  from genenv_jax.benchmarks.api_bank.family import ApiBankTasks
  from genenv_jax.benchmarks.bamboogle.family import QaTasks
  from genenv_jax.benchmarks.bfcl.family import BfclTasks
  from genenv_jax.benchmarks.travelplanner.family import TravelPlannerTasks

  families: list[tuple[Any, str]] = []
  for family in (ApiBankTasks(), BfclTasks(), QaTasks(), TravelPlannerTasks(str(data_dir))):
    families.append((family, family.seed_texts(data_dir)[0]))
  try:
    from genenv_jax.benchmarks.alfworld.family import AlfworldTasks
  except ImportError:
    pass
  else:
    seed = (
      "Task: put a mug on the desk.\nRoom: You are in a room.\nObservation: You see a desk 1.\n"
      "Admissible: go to desk 1 | look\nAction: go to desk 1"
    )
    families.append((AlfworldTasks(), seed))
  targets: list[Target] = []
  for family, seed in families:
    parsed = family.parse(seed)
    if parsed is None:
      raise ValueError(f"{family.name}: its first seed text does not parse; fix the family before fuzzing it")
    targets.append((f"{family.name}_tasks.parse", family.parse))
    targets.append((f"{family.name}_tasks.score", lambda text, f=family, g=parsed.gold: f.score(g, text)))
  return targets


def make_targets(data_dir: str | pathlib.Path) -> list[Target]:
  """Every benchmark scorer and task-family parser/scorer (module docstring), on the data in `data_dir`."""
  return _benchmark_targets(str(data_dir)) + _family_targets(pathlib.Path(data_dir))


# ------------------------------------------------------------------------------------------------ running


class CallTimeout(Exception):
  """A fuzzed call ran past its alarm."""


@contextlib.contextmanager
def alarm(seconds: float):
  """Raises CallTimeout in the main thread after `seconds` of wall time (the regex engine checks signals too)."""

  def handler(signum, frame):
    raise CallTimeout(f"over {seconds} s")

  previous = signal.signal(signal.SIGALRM, handler)
  signal.setitimer(signal.ITIMER_REAL, seconds)
  try:
    yield
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@dataclasses.dataclass
class Report:
  """What a fuzz run found: counts, each failure as (target, input name, message), the slowest call."""

  calls: int = 0
  exceptions: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
  timeouts: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
  slowest: tuple[float, str, str] = (0.0, "", "")

  def merge(self, other: Report) -> Report:
    """Both reports' counts and failures; the slower of the two slowest calls."""
    return Report(
      self.calls + other.calls,
      self.exceptions + other.exceptions,
      self.timeouts + other.timeouts,
      max(self.slowest, other.slowest),
    )

  def summary(self) -> str:
    seconds, target, name = self.slowest
    return (
      f"{self.calls} calls: {len(self.exceptions)} exceptions, {len(self.timeouts)} timeouts; slowest "
      f"{seconds:.3f} s ({target} on {name})"
    )


def fuzz(targets: Sequence[Target], texts: Iterable[tuple[str, str]], timeout: float) -> Report:
  """Runs every target on every (name, text); never raises on a target's failure (it goes into the report)."""
  report = Report()
  for name, text in texts:
    for target, fn in targets:
      start = time.perf_counter()
      try:
        with alarm(timeout):
          fn(text)
      except CallTimeout as e:
        report.timeouts.append((target, name, str(e)))
      except Exception as e:  # noqa: BLE001 - recording any exception is the point
        report.exceptions.append((target, name, "".join(traceback.format_exception_only(e)).strip()[:300]))
      elapsed = time.perf_counter() - start
      report.calls += 1
      if elapsed > report.slowest[0]:
        report.slowest = (elapsed, target, name)
  return report


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_string("data_dir", "", "the benchmark data (default: genenv_jax.data's resolver)", flag_values=fv),
    flags.DEFINE_integer("size", 1_000_000, "characters of each adversarial input", flag_values=fv),
    flags.DEFINE_integer(
      "mid_size",
      10_000,
      "the adversarial inputs again at this size (0: not): deep but under the parsers' length caps",
      flag_values=fv,
    ),
    flags.DEFINE_integer("random", 4000, "random short inputs (each runs on every target)", flag_values=fv),
    flags.DEFINE_integer("seed", 0, "seeds the random short inputs", flag_values=fv),
    flags.DEFINE_float("timeout", 10.0, "seconds one call may take before it is a timeout", flag_values=fv),
    flags.DEFINE_string("only", None, "run only the targets whose name contains this", flag_values=fv),
  )


def main(argv: Sequence[str]) -> int:
  """Fuzzes and prints the report. Through cli.run (or cli.call): a bad flag or missing data is one `error:` line,
  exit status 2."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  if args.size < 1 or args.mid_size < 0 or args.random < 0 or args.timeout <= 0:
    raise ValueError("need --size >= 1, --mid_size >= 0, --random >= 0 and --timeout > 0")
  args.data_dir = str(resolve_data_dir(args.data_dir or None))
  if not pathlib.Path(args.data_dir).is_dir():
    raise FileNotFoundError(
      f"data directory {args.data_dir} does not exist; pass --data_dir (fetch it with "
      "`python -m genenv_jax.data fetch`)"
    )
  targets = [t for t in make_targets(args.data_dir) if not args.only or args.only in t[0]]
  print(f"{len(targets)} targets", flush=True)
  big = Report()
  for size in (args.size, args.mid_size):
    if size > 0:
      report = fuzz(targets, adversarial_texts(size).items(), args.timeout)
      print(f"adversarial ({size} chars): {report.summary()}", flush=True)
      big = big.merge(report)
  small = fuzz(targets, random_texts(random.Random(args.seed), args.random), args.timeout)
  print(f"random: {small.summary()}", flush=True)
  for kind, rows in (("exception", big.exceptions + small.exceptions), ("timeout", big.timeouts + small.timeouts)):
    for target, name, message in rows[:50]:
      print(f"{kind}: {target} on {name}: {message}")
  total = big.calls + small.calls
  failures = len(big.exceptions + small.exceptions + big.timeouts + small.timeouts)
  print(
    f"total: {total} inputs, {len(big.exceptions + small.exceptions)} exceptions, "
    f"{len(big.timeouts + small.timeouts)} timeouts, slowest {max(big.slowest, small.slowest)[0]:.3f} s"
  )
  return 1 if failures else 0


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.scripts.fuzz_scorers")
