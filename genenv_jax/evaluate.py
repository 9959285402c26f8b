"""CLI: evaluate a model (or a reference agent, or saved outputs) on one benchmark.

  python -m genenv_jax.evaluate --benchmark NAME (--model HF_DIR | --workdir RUN | --agent oracle|null |
                                --predictions FILE) [--split S] [--limit N] [--output results.jsonl] ...

NAME is one of `genenv_jax.benchmarks.registry.BENCHMARKS` (api_bank, bfcl, bamboogle, travelplanner, alfworld).
`--model` loads an HF Llama/Qwen2 directory (tokenizer from the same directory, or `--tokenizer`); `--workdir` the
agent of a training run at its latest checkpoint, with the run's tokenizer. Generation is our own sampler
(`genenv_jax.sampling.sampler.generate`), `--batch_size` prompts at a time, greedy unless `--temperature` > 0; see
`genenv_jax.evaluation.agents` for the prompt pipeline and for `--max_prompt_tokens` / `--overlong` (default: cut
overlong prompts from the left, and report how many were cut).

`--limit N` is passed to the benchmark's `load_items`: api_bank and bfcl apply it per split (level / category) when no
`--split` is given, the others to the whole list. `--predictions FILE` scores outputs made elsewhere: JSON lines
`{"id": ..., "output": "<model text>"}`. An id that is not among the loaded items is an error (use the `--split` and
`--limit` the predictions were made for); a loaded item with no line in the file is scored as the empty output and
counted in `missing_predictions`. The `--output` file (JSON lines: id, split, correct, score, detail, output) is
itself a valid predictions file.

Progress goes to stderr; the metrics table (`benchmark.aggregate`, and the benchmark's NOTE when it has one, e.g.
Bamboogle's "not comparable to the paper") to stdout. `--output` gets per-item rows; the metrics JSON goes to
`--metrics_output`, default `<output without suffix>.metrics.json`.

ALFWorld: the default is the step-level benchmark (teacher-forced next action). `--episodes` plays whole games
(`benchmarks.alfworld.episodes.run_episodes`, at most `--max_steps` actions, `--batch_size` games at once; split default
valid_unseen; `--limit` = number of games), the paper's success-rate metric; the oracle is the walkthrough policy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import sys
import tempfile
import time
from types import SimpleNamespace
from typing import Any, Iterable, Mapping, Sequence, TextIO

from absl import flags

from genenv_jax import cli, data
from genenv_jax.benchmarks.registry import benchmark_names, benchmark_note, make_benchmark
from genenv_jax.tasks.benchmark import EvalItem, ItemResult

COUNT_SUFFIXES = ("/n", "/correct")


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  answers = "What answers (exactly one of --model, --workdir, --agent, --predictions): "
  _FLAGS = (
    flags.DEFINE_string("benchmark", None, f"The benchmark, one of: {', '.join(benchmark_names())}.", flag_values=fv),
    flags.DEFINE_string(
      "split", None, "A split of the benchmark (BFCL: a category such as live_multiple); default all.", flag_values=fv
    ),
    flags.DEFINE_integer(
      "limit", None, "Items per split (api_bank, bfcl) or in all (see the module docstring).", flag_values=fv
    ),
    flags.DEFINE_string(
      "data_dir",
      None,
      f"Benchmark data (default: ${data.ENV_VAR}, else {data.default_data_dir()}); "
      "fill it with: python -m genenv_jax.data fetch NAME",
      flag_values=fv,
    ),
    flags.DEFINE_string(
      "model", None, answers + "an HF model directory (config.json + safetensors), or a .gguf file.", flag_values=fv
    ),
    flags.DEFINE_string(
      "workdir",
      None,
      answers + "a training run's workdir (summary.json + checkpoints/); its agent at the latest checkpoint.",
      flag_values=fv,
    ),
    flags.DEFINE_string("agent", None, answers + "a reference agent, oracle or null.", flag_values=fv),
    flags.DEFINE_string("predictions", None, answers + "JSON lines {id, output} to score.", flag_values=fv),
    flags.DEFINE_string(
      "tokenizer", None, "Model agent: tokenizer path (default: the --model directory's own).", flag_values=fv
    ),
    flags.DEFINE_string(
      "dtype", "float32", "Model agent: parameter dtype for --model (float32, bfloat16).", flag_values=fv
    ),
    flags.DEFINE_string(
      "mesh",
      None,
      "Model agent: device mesh for --model, e.g. data=1,fsdp=-1,tensor=1 (default: the first device).",
      flag_values=fv,
    ),
    flags.DEFINE_integer(
      "batch_size", 8, "Prompts generated at a time (ALFWorld --episodes: games played at once).", flag_values=fv
    ),
    flags.DEFINE_integer("max_new_tokens", 512, "Model agent: the response budget in tokens.", flag_values=fv),
    flags.DEFINE_float("temperature", 0.0, "Model agent: sampling temperature; 0 = greedy.", flag_values=fv),
    flags.DEFINE_integer("top_k", 0, "Model agent: sample among the k likeliest tokens; 0 = all.", flag_values=fv),
    flags.DEFINE_float("top_p", 1.0, "Model agent: nucleus sampling mass; 1 = all tokens.", flag_values=fv),
    flags.DEFINE_integer("seed", 0, "Model agent: the sampling seed.", flag_values=fv),
    flags.DEFINE_integer(
      "max_prompt_tokens",
      None,
      "Model agent: the prompt budget (default: the model's context length - --max_new_tokens).",
      flag_values=fv,
    ),
    flags.DEFINE_enum(
      "overlong",
      "truncate",
      ["truncate", "skip"],
      "Model agent, a prompt over the budget: keep its last tokens (truncate), or score it as the empty output (skip).",
      flag_values=fv,
    ),
    flags.DEFINE_boolean(
      "episodes", False, "ALFWorld: play whole games (success rate) instead of steps.", flag_values=fv
    ),
    flags.DEFINE_integer("max_steps", 50, "ALFWorld: actions per episode with --episodes.", flag_values=fv),
    flags.DEFINE_string(
      "cache_dir",
      None,
      "ALFWorld: walkthrough replay cache (default: benchmarks.alfworld.steps.default_cache_dir()).",
      flag_values=fv,
    ),
    flags.DEFINE_enum(
      "bfcl_mode",
      None,
      ["official", "lenient"],
      "BFCL: official (default): bfcl-eval's verdicts, comparable with the leaderboard; lenient: tolerant decoding "
      "(think spans, fences, JSON calls), the training reward's.",
      flag_values=fv,
    ),
    flags.DEFINE_string(
      "output", None, "Per-item results, JSON lines (itself a valid --predictions file).", flag_values=fv
    ),
    flags.DEFINE_string(
      "metrics_output", None, "The metrics JSON (default: <--output without suffix>.metrics.json).", flag_values=fv
    ),
    flags.DEFINE_boolean("quiet", False, "No progress lines on stderr.", flag_values=fv),
  )
  flags.mark_flag_as_required("benchmark", flag_values=fv)


# ---- inputs ----------------------------------------------------------------------------------------------------------


def read_predictions(path: str | pathlib.Path) -> dict[str, str]:
  """id -> output from a JSON lines file; ValueError naming the file and line of a malformed or repeated row."""
  path = pathlib.Path(path)
  if path.is_dir():
    raise ValueError(f"--predictions {path} is a directory; give the JSON lines file inside it")
  if not path.is_file():
    raise FileNotFoundError(f"--predictions file {path} does not exist")
  outputs: dict[str, str] = {}
  raw = path.read_bytes()
  try:
    text = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    line = raw[: e.start].count(b"\n") + 1
    raise ValueError(
      f"{path}:{line}: not UTF-8 (byte {raw[e.start]:#04x} at offset {e.start}); save it as UTF-8"
    ) from None
  for n, line in enumerate(text.splitlines(), 1):
    if not line.strip():
      continue
    try:
      row = json.loads(line)
    except ValueError as e:
      raise ValueError(f"{path}:{n}: not a JSON line ({e})") from None
    if not isinstance(row, dict) or "id" not in row or not isinstance(row.get("output"), str):
      raise ValueError(f"{path}:{n}: expected an object with \"id\" and a string \"output\", got {line[:80]!r}")
    key = str(row["id"])
    if key in outputs:
      raise ValueError(f"{path}:{n}: id {key!r} appears twice")
    outputs[key] = row["output"]
  return outputs


def match_predictions(items: Sequence[EvalItem], outputs: Mapping[str, str], source: str) -> tuple[list[str], int]:
  """Each item's output ("" when the file lacks it) and the number of items it lacks; unknown ids raise."""
  ids = {item.id for item in items}
  unknown = [k for k in outputs if k not in ids]
  if unknown:
    raise ValueError(
      f"{len(unknown)} id(s) in {source} are not among the {len(items)} loaded items, e.g. "
      f"{unknown[:5]}; pass the --benchmark, --split and --limit the predictions were made for"
    )
  return [outputs.get(item.id, "") for item in items], sum(1 for item in items if item.id not in outputs)


def parse_mesh(text: str) -> dict[str, int]:
  """ "data=1,fsdp=-1,tensor=1" -> {"data": 1, "fsdp": -1, "tensor": 1}."""
  try:
    return {k.strip(): int(v) for k, v in (part.split("=") for part in text.split(",") if part.strip())}
  except ValueError:
    raise ValueError(f"--mesh {text!r} must look like data=1,fsdp=-1,tensor=1") from None


def make_agent(args: SimpleNamespace, benchmark: Any) -> tuple[Any, dict[str, Any]]:
  """The agent the flags ask for, and what to record about it in the metrics file."""
  from genenv_jax.evaluation import agents  # pylint: disable=import-outside-toplevel (JAX starts only when needed)

  if args.agent:
    return agents.reference_agent(args.agent, benchmark), {"agent": args.agent}
  settings = agents.GenerationSettings(
    max_new_tokens=args.max_new_tokens,
    temperature=args.temperature,
    top_k=args.top_k,
    top_p=args.top_p,
    batch_size=args.batch_size,
    max_prompt_tokens=args.max_prompt_tokens,
    overlong=args.overlong,
    seed=args.seed,
  )
  if args.workdir:
    model, tokenizer, step = agents.load_workdir(args.workdir)
    about = {"agent": "model", "workdir": str(args.workdir), "checkpoint_step": step}
  else:
    tokenizer = agents.resolve_tokenizer(args.model, args.tokenizer)
    mesh = None
    if args.mesh:
      from genenv_jax.parallel.sharding import make_mesh  # pylint: disable=import-outside-toplevel

      mesh = make_mesh(parse_mesh(args.mesh))
    model = agents.load_model(args.model, dtype=args.dtype, mesh=mesh)
    about = {"agent": "model", "model": str(args.model)}
  agent = agents.ModelAgent(model, tokenizer, settings)
  about.update(tokenizer=str(tokenizer.path), prompt_budget=agent.prompt_budget, settings=dataclasses.asdict(settings))
  return agent, about


# ---- running ---------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Progress:
  """A line on stderr at most every `every` seconds (and at the end): items done, rate, elapsed, ETA, accuracy."""

  name: str
  total: int
  stream: TextIO | None
  every: float = 2.0
  start: float = dataclasses.field(default_factory=time.monotonic)
  last: float = -1e9

  def update(self, done: int, correct: int, final: bool = False) -> None:
    from genenv_jax.training.metrics import format_duration  # pylint: disable=import-outside-toplevel

    now = time.monotonic()
    if self.stream is None or not (final or (done < self.total and now - self.last >= self.every)):
      return
    self.last = now
    elapsed = now - self.start
    rate = done / elapsed if elapsed > 0 else float("inf")
    eta = (self.total - done) / rate if 0 < rate < float("inf") else 0.0
    print(
      f"[{self.name}] {done}/{self.total} items ({100.0 * done / max(self.total, 1):.0f}%) | {rate:.2f} items/s | "
      f"elapsed {format_duration(elapsed)} | ETA {format_duration(eta)} | accuracy "
      f"{correct / max(done, 1):.3f}",
      file=self.stream,
      flush=True,
    )


def run_items(
  benchmark: Any, items: Sequence[EvalItem], respond, batch_size: int, progress: Progress
) -> tuple[list[ItemResult], list[Any]]:
  """Replies to and scores the items `batch_size` at a time; returns the results and the replies."""
  results: list[ItemResult] = []
  replies: list[Any] = []
  for start in range(0, len(items), batch_size):
    chunk = items[start : start + batch_size]
    got = respond(chunk)
    if len(got) != len(chunk):
      raise ValueError(f"the agent returned {len(got)} replies for {len(chunk)} items")
    replies += got
    results += [benchmark.score(item, reply.text) for item, reply in zip(chunk, got)]
    progress.update(len(results), sum(r.correct for r in results))
  progress.update(len(results), sum(r.correct for r in results), final=True)
  return results, replies


def run_episodes_mode(
  args: SimpleNamespace, data_dir: pathlib.Path, stream: TextIO | None
) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, Any]]:
  """ALFWorld whole games: rows (id, split, correct = won, score, detail), the report summary, agent info."""
  from genenv_jax.benchmarks.alfworld import evaluator  # pylint: disable=import-outside-toplevel

  if args.predictions:
    raise ValueError("--predictions cannot be scored with --episodes: episodes need a live agent")
  split = evaluator.check_split(args.split or "valid_unseen")
  games = evaluator.list_games(data_dir, split)[: args.limit]
  if args.agent == "oracle":  # one game per run: the walkthrough oracle cannot tell apart twin games of a task
    runs = [(evaluator.walkthrough_policy([g], args.cache_dir), [g]) for g in games]
    about: dict[str, Any] = {"agent": "oracle"}
  elif args.agent == "null":
    runs, about = [(evaluator.null_policy, games)], {"agent": "null"}
  else:
    agent, about = make_agent(args, None)
    runs = [(agent.policy(), games)]
  turn = [0]

  def logged(policy):
    def play(batch):
      turn[0] += 1
      if stream is not None:
        print(f"[alfworld episodes] turn {turn[0]}: {len(batch)} game(s) playing", file=stream, flush=True)
      return policy(batch)

    return play

  started = time.monotonic()
  played = [
    e
    for policy, chunk in runs
    for e in evaluator.run_episodes(
      logged(policy), chunk, max_steps=args.max_steps, batch_size=args.batch_size
    ).episodes
  ]
  episodes = evaluator.EpisodeReport(tuple(played), args.max_steps, time.monotonic() - started)
  rows = [
    {
      "id": f"{split}/{e.game}",
      "split": split,
      "correct": bool(e.won),
      "score": float(e.won),
      "detail": {"steps": e.steps, "task_type": e.task_type},
      "output": "\n".join(e.actions),
    }
    for e in episodes.episodes
  ]
  return rows, episodes.summary(), {**about, "episodes": True, "max_steps": args.max_steps}


# ---- reporting -------------------------------------------------------------------------------------------------------


def format_table(metrics: Mapping[str, float]) -> str:
  """Two aligned columns; counts as integers, rates with 4 decimals."""
  width = max((len(k) for k in metrics), default=6)
  lines = [f"{'metric':<{width}}  value", f"{'-' * width}  ------"]
  for key, value in metrics.items():
    count = key in ("n", "max_steps") or key.endswith(COUNT_SUFFIXES)
    lines.append(f"{key:<{width}}  {int(value) if count else f'{value:.4f}'}")
  return "\n".join(lines)


def json_line(row: Mapping[str, Any]) -> str:
  """One JSON line; non-ASCII text stays readable, but a string JSON's UTF-8 cannot hold (a lone surrogate in a
  model's output) is written \\u-escaped, which json.loads reads back to the same string."""
  line = json.dumps(row, ensure_ascii=False, default=str)
  try:
    line.encode("utf-8")
  except UnicodeEncodeError:
    line = json.dumps(row, ensure_ascii=True, default=str)
  return line + "\n"


def write_atomically(path: pathlib.Path, text: Iterable[str]) -> None:
  """Writes `text` to a temporary file beside `path`, syncs it, then renames it over `path`: a failure at any point
  leaves the previous file as it was, never a truncated one."""
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  try:
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      for chunk in text:
        f.write(chunk)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(tmp)
    raise


def write_jsonl(path: pathlib.Path, rows: Sequence[Mapping[str, Any]]) -> None:
  write_atomically(path, (json_line(row) for row in rows))


def check_args(args: SimpleNamespace) -> None:
  """Flag combinations that are wrong before anything is loaded; ValueError naming the flag."""
  sources = [f for f in ("model", "workdir", "agent", "predictions") if getattr(args, f)]
  if len(sources) != 1:
    raise ValueError(
      "pass exactly one of --model, --workdir, --agent or --predictions"
      + (f" (got {', '.join('--' + s for s in sources)})" if sources else "")
    )
  if args.agent and args.agent not in ("oracle", "null"):
    raise ValueError(f"unknown --agent {args.agent!r}; choose oracle or null")
  if args.limit is not None and args.limit < 0:
    raise ValueError(f"--limit must be >= 0, got {args.limit}")
  if args.batch_size < 1:
    raise ValueError(f"--batch_size must be >= 1, got {args.batch_size}")
  for flag, given in (("--episodes", args.episodes), ("--cache_dir", args.cache_dir)):
    if given and args.benchmark != "alfworld":
      raise ValueError(f"{flag} is for --benchmark alfworld only, not {args.benchmark!r}")
  if args.bfcl_mode and args.benchmark != "bfcl":
    raise ValueError(f"--bfcl_mode is for --benchmark bfcl only, not {args.benchmark!r}")


def run_items_mode(
  args: SimpleNamespace, benchmark: Any, data_dir: pathlib.Path, stream: TextIO | None
) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, Any]]:
  """Items of the benchmark answered by the agent (or read from --predictions) and scored: rows, metrics, info."""
  items = benchmark.load_items(str(data_dir), args.split, args.limit)
  progress = Progress(args.benchmark, len(items), stream)
  if args.predictions:
    from genenv_jax.evaluation.agents import Reply  # pylint: disable=import-outside-toplevel

    outputs, missing = match_predictions(items, read_predictions(args.predictions), args.predictions)
    texts = iter(outputs)
    results, replies = run_items(
      benchmark, items, lambda chunk: [Reply(next(texts)) for _ in chunk], args.batch_size, progress
    )
    about = {"agent": "predictions", "predictions": str(args.predictions), "missing_predictions": missing}
  else:
    agent, about = make_agent(args, benchmark)
    results, replies = run_items(benchmark, items, agent.respond, args.batch_size, progress)
    if about["agent"] == "model":
      about.update(prompts_truncated=sum(r.truncated for r in replies), prompts_skipped=sum(r.skipped for r in replies))
  rows = []
  for result, reply in zip(results, replies):
    row = {**result.to_json(), "output": reply.text}
    row.update({k: True for k in ("truncated", "skipped") if getattr(reply, k)})
    rows.append(row)
  return rows, benchmark.aggregate(results), about


def report(args: SimpleNamespace, record: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], stdout: TextIO) -> None:
  """Prints the metrics table, the counts and the note; writes --output and the metrics JSON."""
  print(
    f"{args.benchmark}{' (episodes)' if args.episodes else ''}: {len(rows)} items, agent {record['agent']}", file=stdout
  )
  print(format_table(record["metrics"]), file=stdout)
  for key, label in (
    ("prompts_truncated", "prompts cut from the left to fit"),
    ("prompts_skipped", "overlong prompts skipped (scored as empty)"),
    ("missing_predictions", "items without a prediction (scored as empty)"),
  ):
    if record.get(key):
      print(f"{label}: {record[key]}", file=stdout)
  if record.get("note"):
    print(f"NOTE: {record['note']}", file=stdout)
  stdout.flush()  # the metrics are out before any file is written, whatever happens to the files
  failed = []
  metrics_path = args.metrics_output or (
    pathlib.Path(args.output).with_suffix(".metrics.json") if args.output else None
  )
  outputs = [(args.output, "per-item results", lambda p: write_jsonl(p, rows))] if args.output else []
  if metrics_path:
    outputs.append(
      (metrics_path, "metrics", lambda p: write_atomically(p, [json.dumps(record, indent=1, default=str)]))
    )
  for target, label, write in outputs:
    try:
      write(pathlib.Path(target))
      print(f"{label}: {target}", file=stdout)
    except OSError as e:
      failed.append(f"could not write the {label} to {target}: {e.strerror or e}")
  if failed:
    raise OutputError("; ".join(failed) + " (the metrics above are complete; any previous file is unchanged)")


def run_evaluation(args: SimpleNamespace, stdout: TextIO, stderr: TextIO | None) -> dict[str, Any]:
  """Runs the evaluation the flags describe; returns the metrics record (also written to the metrics file)."""
  check_args(args)
  options = {k: v for k, v in (("cache_dir", args.cache_dir), ("mode", args.bfcl_mode)) if v}
  benchmark = make_benchmark(args.benchmark, **options)
  # each benchmark's dataset has its name; DataMissingError (a FileNotFoundError) names the file and the fix
  data_dir = data.require(data.resolve_data_dir(args.data_dir), [args.benchmark])
  stream = None if args.quiet else stderr
  started = time.monotonic()
  if args.episodes:
    rows, metrics, about = run_episodes_mode(args, data_dir, stream)
    note = None  # episodic success is the paper's metric; the module NOTE is about step accuracy
  else:
    rows, metrics, about = run_items_mode(args, benchmark, data_dir, stream)
    note = benchmark_note(args.benchmark)
  record = {
    "benchmark": args.benchmark,
    "split": args.split,
    "limit": args.limit,
    "data_dir": str(data_dir),
    **({"bfcl_mode": benchmark.mode} if args.benchmark == "bfcl" else {}),
    **about,
    "n_items": len(rows),
    "seconds": round(time.monotonic() - started, 3),
    "metrics": metrics,
    "note": note,
  }
  report(args, record, rows, stdout)
  return record


class OutputError(OSError):
  """--output or --metrics_output could not be written (after the metrics were printed)."""


def main(argv: Sequence[str]) -> None:
  """Runs the evaluation the flags ask for. Through cli.run (or cli.call): exit status 2 with one `error:` line for a
  bad input, 1 when the results were computed and printed but a file could not be written (OutputError)."""
  cli.no_arguments(argv)
  try:
    run_evaluation(cli.namespace(_FLAGS), sys.stdout, sys.stderr)
  except ImportError as e:  # an optional dependency (the ALFWorld engine): its message says what to install
    raise ValueError(str(e)) from e


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.evaluate")
