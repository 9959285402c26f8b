"""The Berkeley Function Calling Leaderboard (BFCL v4) as a `Benchmark`: AST categories, relevance, long-context turns.

Data (`<data_dir>/bfcl/`, the `bfcl_eval/data` folder of PyPI `bfcl-eval==2026.3.23`): `BFCL_v4_<category>.json`
(JSON lines `{id, question: [[messages]], function: [docs]}`), `possible_answer/BFCL_v4_<category>.json`
(`{id, ground_truth}`) and, for multi-turn, `multi_turn_func_doc/<class file>.json`. Splits are the category names:

* AST (scored by `bfcl.checker.check_ast`): simple_python (400), simple_java (100), simple_javascript (50),
  multiple (200), parallel (200), parallel_multiple (200), live_simple (258), live_multiple (831 of upstream 1,053),
  live_parallel (16), live_parallel_multiple (24);
* relevance: irrelevance (240) and live_irrelevance (884) are correct when no call is made; live_relevance (16) when
  at least one call is made (its values are not checked);
* multi_turn_long_context: each of the 734 turns of the 200 entries is one item, id `<entry id>-turn-<k>`. Its
  prompt holds the docs of the entry's `involved_classes` (less its `excluded_function`s), the earlier turns' user
  messages and, as assistant messages, the earlier turns' gold calls; the reply is scored by
  `bfcl.checker.check_turn` (order-free, AST value rules). No functions are executed, so the long-context payloads
  that BFCL's executable backend injects are not part of these prompts. 3 turns have no gold call (the right reply
  makes none), so an agent that never calls scores 3/734 there.

Scoring modes (`mode`): "official" (the default) reproduces the verdicts of BFCL's own checker (bfcl-eval
2026.3.23: its prompting decoder and `ast_checker`, quirks included, see `bfcl.official`), so a reported number
means what the leaderboard's does; use it for every BFCL number you report. "lenient" is this project's tolerant
reading, for training rewards: `<think>` spans are removed; text with a `<tool_call>` holds JSON calls (all its
blocks; calls named "None" are dropped, as in ToolRL's BFCL handler); otherwise the BFCL syntax `[f(a=1), g(b='x')]`
is read (Python `ast` for Python categories, source-text values for Java/JavaScript, see `bfcl.lang`), code fences
and set literals included, and checked by `bfcl.checker` (positional arguments rejected, parallel calls matched one
to one, int for float also inside lists). Text that decodes to nothing is "no call". multi_turn_long_context has no
official AST verdict (upstream executes the calls); both modes score it by `bfcl.checker.check_turn` on the lenient
decoding.

Four live items cannot be passed by any output under BFCL's rules (upstream gold errors, listed in `UNSATISFIABLE`);
they stay in the set and score 0 for every agent, as upstream, so the oracle scores 100% on all other items.

Aggregation, as BFCL's leaderboard (`eval_runner_helper.py`): per category accuracy; `non_live/simple` = unweighted
mean of the simple_python/java/javascript accuracies; `non_live/overall` = unweighted mean of simple, multiple,
parallel, parallel_multiple; `live/overall` = correct / total over the four live AST categories (count-weighted);
`irrelevance/overall` = unweighted mean of irrelevance and live_irrelevance; `relevance/overall` = live_relevance.
Summaries use the categories present in the results. live_multiple holds 831 of the 1,053 upstream items, so live
numbers are close to, not the same as, the leaderboard's.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, Mapping, Sequence

from genenv_jax.benchmarks.bfcl import checker, official
from genenv_jax.benchmarks.bfcl.lang import java_source, js_source, parse_source_calls
from genenv_jax.benchmarks.bfcl.prompts import STYLES, build_messages, render_calls
from genenv_jax.benchmarks.parsing.tool_calls import (
  ToolCall,
  parse_json_tool_calls,
  parse_python_calls,
  strip_reasoning,
)
from genenv_jax.tasks.benchmark import EvalItem, ItemResult, Message

NON_LIVE_SIMPLE = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE_AST = NON_LIVE_SIMPLE + ("multiple", "parallel", "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
IRRELEVANCE = ("irrelevance", "live_irrelevance")
RELEVANCE = ("live_relevance",)
MULTI_TURN = ("multi_turn_long_context",)
MODES = ("official", "lenient")
CATEGORIES = NON_LIVE_AST + IRRELEVANCE[:1] + LIVE_AST + IRRELEVANCE[1:] + RELEVANCE + MULTI_TURN
UNSATISFIABLE = {  # item id -> why no output passes (possible_answer errors in bfcl-eval 2026.3.23)
  "live_simple_106-63-0": "required array parameters whose allowed-value lists are empty",
  "live_simple_112-68-0": "required array parameters whose allowed-value lists are empty",
  "live_multiple_862-181-3": "the answer gives 'journey_start_time', which Trains_1_FindTrains does not take",
  "live_multiple_964-207-0": "the answer names 'question'; the function requires 'statement'",
}
MULTI_TURN_CLASS_FILES = {  # bfcl_eval constants: involved class -> multi_turn_func_doc file
  "GorillaFileSystem": "gorilla_file_system.json",
  "MathAPI": "math_api.json",
  "MessageAPI": "message_api.json",
  "TwitterAPI": "posting_api.json",
  "TicketAPI": "ticket_api.json",
  "TradingBot": "trading_bot.json",
  "TravelAPI": "travel_booking.json",
  "VehicleControlAPI": "vehicle_control.json",
}


def category_language(category: str) -> str:
  """ "java" / "javascript" for the simple_java / simple_javascript categories, else "python"."""
  return {"simple_java": "java", "simple_javascript": "javascript"}.get(category, "python")


def decode(output: str, language: str = "python") -> list[ToolCall]:
  """The calls of a model output by the module's decoding rules; [] for no call or undecodable text."""
  text = strip_reasoning(output) if isinstance(output, str) else ""
  if "<tool_call>" in text:
    return [c for c in parse_json_tool_calls(text) if c.name.strip().lower() != "none"]
  return parse_python_calls(text) if language == "python" else parse_source_calls(text)


def _read_jsonl(path: pathlib.Path) -> list[dict[str, Any]]:
  if not path.is_file():
    raise FileNotFoundError(f"BFCL file not found: {path}")
  rows = []
  for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
    if line.strip():
      try:
        rows.append(json.loads(line))
      except ValueError as e:
        raise ValueError(f"{path}:{n}: not a JSON line ({e})") from None
  return rows


def _first_allowed(options: Any) -> tuple[bool, Any]:
  for option in options if isinstance(options, list) else [options]:
    if option != "":
      return True, option
  return False, None


def materialize(value: Any) -> Any:
  """A concrete value from an allowed value: nested `{key: [allowed]}` dicts take each key's first non-"" option."""
  if isinstance(value, dict):
    out = {}
    for key, options in value.items():
      present, option = _first_allowed(options)
      if present:
        out[key] = materialize(option)
    return out
  if isinstance(value, list):
    return [materialize(v) if isinstance(v, (dict, list)) else v for v in value]
  return value


def oracle_calls(
  functions: Sequence[Mapping[str, Any]], answers: Sequence[Mapping[str, Any]], language: str
) -> list[ToolCall]:
  """Gold calls for an AST entry: each parameter's first allowed non-"" value.

  A parameter is left out when "" (optional) is its only allowed value, or when it is optional and not in the doc
  (giving it would be an unexpected parameter); a required parameter whose only allowed value is "" gets "".
  """
  calls = []
  for answer in answers:
    ((name, allowed),) = answer.items()
    doc = next((d for d in functions if d.get("name") == name), {})
    props = doc.get("parameters", {}).get("properties", {})
    required = doc.get("parameters", {}).get("required", [])
    arguments = {}
    for param, options in allowed.items():
      present, option = _first_allowed(options)
      if (not present and param not in required) or (param not in props and "" in options):
        continue
      value = materialize(option) if present else ""
      prop = props.get(param, {})
      item = prop.get("items", {}).get("type") if isinstance(prop.get("items"), dict) else None
      if language == "java":
        value = java_source(value, prop.get("type", "any"), item)
      elif language == "javascript":
        value = js_source(value, prop.get("type", "any"), item)
      arguments[param] = value
    calls.append(ToolCall(name, arguments))
  return calls


def _multi_turn_docs(class_docs: Mapping[str, list[dict[str, Any]]], entry: Mapping[str, Any]) -> list[dict[str, Any]]:
  """The docs of the entry's involved classes, less its excluded functions."""
  docs = []
  for cls in entry.get("involved_classes", []):
    if cls not in class_docs:
      raise ValueError(f"{entry['id']}: unknown involved class {cls!r}; known: {sorted(class_docs)}")
    docs += class_docs[cls]
  excluded = set(entry.get("excluded_function", []))
  return [d for d in docs if d["name"] not in excluded]


def _gold_turn_calls(calls: Sequence[str], docs: Mapping[str, Mapping[str, Any]], where: str) -> list[ToolCall]:
  parsed = []
  for source in calls:
    found = parse_python_calls(source)
    bound = checker.bind_positional(found[0], docs.get(found[0].name)) if len(found) == 1 else None
    if bound is None or bound.name not in docs:
      raise ValueError(f"{where}: gold call {source!r} does not parse against the entry's function docs")
    parsed.append(bound)
  return parsed


@dataclasses.dataclass(frozen=True)
class BfclBenchmark:
  """BFCL v4 AST, relevance and per-turn long-context categories (see the module docstring)."""

  prompt_style: str = "bfcl"
  mode: str = "official"
  name: str = dataclasses.field(default="bfcl", init=False)

  def __post_init__(self):
    if self.prompt_style not in STYLES:
      raise ValueError(f"unknown prompt_style {self.prompt_style!r}; expected one of {STYLES}")
    if self.mode not in MODES:
      raise ValueError(
        f"unknown BFCL mode {self.mode!r}; expected one of {MODES} (official: leaderboard-comparable "
        "verdicts; lenient: tolerant decoding for training rewards)"
      )

  def splits(self) -> Sequence[str]:
    return CATEGORIES

  def load_items(self, data_dir: str, split: str | None = None, limit: int | None = None) -> list[EvalItem]:
    """Items of one category (all with `split=None`); `limit` caps the items of each category."""
    if split is not None and split not in CATEGORIES:
      raise ValueError(f"BFCL has no category {split!r}; expected one of {CATEGORIES}")
    if limit is not None and limit < 0:
      raise ValueError(f"limit must be >= 0 or None, got {limit}")
    root = pathlib.Path(data_dir)
    items = []
    for category in (split,) if split else CATEGORIES:
      load = self._multi_turn_items if category in MULTI_TURN else self._single_turn_items
      items += load(root, category, limit)
    return items

  def _single_turn_items(self, root: pathlib.Path, category: str, limit: int | None) -> list[EvalItem]:
    entries = _read_jsonl(root / "bfcl" / f"BFCL_v4_{category}.json")[:limit]
    answers: dict[str, Any] = {}
    if category in NON_LIVE_AST + LIVE_AST:
      answers = {
        a["id"]: a["ground_truth"] for a in _read_jsonl(root / "bfcl" / "possible_answer" / f"BFCL_v4_{category}.json")
      }
    language = category_language(category)
    items = []
    for entry in entries:
      if len(entry.get("question", [])) != 1:
        raise ValueError(f"{entry.get('id')}: single-turn BFCL entries hold exactly one turn")
      gold: dict[str, Any] = {"category": category, "language": language, "functions": entry["function"]}
      if answers:
        if entry["id"] not in answers:
          raise ValueError(f"{entry['id']}: no possible answer in possible_answer/BFCL_v4_{category}.json")
        gold["answers"] = answers[entry["id"]]
      messages = build_messages(entry["question"][0], entry["function"], language, self.prompt_style)
      items.append(EvalItem(id=entry["id"], split=category, messages=messages, gold=gold))
    return items

  def _multi_turn_items(self, root: pathlib.Path, category: str, limit: int | None) -> list[EvalItem]:
    entries = _read_jsonl(root / "bfcl" / f"BFCL_v4_{category}.json")
    answers = {
      a["id"]: a["ground_truth"] for a in _read_jsonl(root / "bfcl" / "possible_answer" / f"BFCL_v4_{category}.json")
    }
    doc_dir = root / "bfcl" / "multi_turn_func_doc"
    class_docs = {cls: _read_jsonl(doc_dir / name) for cls, name in MULTI_TURN_CLASS_FILES.items()}
    items: list[EvalItem] = []
    for entry in entries:
      turns, gold_turns = entry["question"], answers.get(entry["id"])
      if gold_turns is None or len(gold_turns) != len(turns):
        raise ValueError(f"{entry['id']}: ground truth has no entry or a different number of turns")
      functions = _multi_turn_docs(class_docs, entry)
      docs = {d["name"]: d for d in functions}
      dialogue: list[Message] = []
      for k, (turn, gold_calls) in enumerate(zip(turns, gold_turns)):
        if limit is not None and len(items) >= limit:
          return items
        item_id = f"{entry['id']}-turn-{k}"
        parsed = _gold_turn_calls(gold_calls, docs, item_id)
        dialogue += [{"role": m["role"], "content": m["content"]} for m in turn]
        messages = build_messages(dialogue, functions, "python", self.prompt_style, multi_turn=True)
        gold = {"category": category, "language": "python", "functions": functions, "calls": list(gold_calls)}
        items.append(EvalItem(id=item_id, split=category, messages=messages, gold=gold))
        dialogue.append({"role": "assistant", "content": render_calls(parsed, self.prompt_style)})
    return items

  def score(self, item: EvalItem, output: str) -> ItemResult:
    """Correct when the output passes the category's rule in the benchmark's mode; the detail names the failed rule."""
    category, language = item.gold["category"], item.gold["language"]
    if self.mode == "official" and category not in MULTI_TURN:
      error = official.verdict(output, item.gold["functions"], item.gold.get("answers"), language, category)
      detail = {"mode": "official", **({"error": error} if error else {})}
      return ItemResult(item.id, item.split, error is None, 0.0 if error else 1.0, detail)
    calls = decode(output, language)
    detail: dict[str, Any] = {"mode": self.mode, "n_calls": len(calls)}
    try:
      if category in IRRELEVANCE:
        error = None if not calls else "made a call where none applies"
      elif category in RELEVANCE:
        error = None if calls else "made no call"
      elif category in MULTI_TURN:
        docs = {d["name"]: d for d in item.gold["functions"]}
        gold = _gold_turn_calls(item.gold["calls"], docs, item.id)
        error = checker.check_turn(docs, calls, gold)
      else:
        error = checker.check_ast(item.gold["functions"], calls, item.gold["answers"], language, category)
    except (TypeError, ValueError, KeyError, RecursionError) as e:
      error = f"checker could not score the output: {type(e).__name__}: {e}"
    if error:
      detail["error"] = error
    return ItemResult(item.id, item.split, error is None, 0.0 if error else 1.0, detail)

  def oracle_output(self, item: EvalItem) -> str:
    """The gold calls in the prompt style's syntax (first allowed values; no call for irrelevance)."""
    category = item.gold["category"]
    if category in IRRELEVANCE:
      return "I cannot answer this with the given functions."
    if category in RELEVANCE:
      doc = item.gold["functions"][0]
      required = doc.get("parameters", {}).get("required", [])
      calls = [ToolCall(doc["name"], {p: "x" for p in required})]
    elif category in MULTI_TURN:
      docs = {d["name"]: d for d in item.gold["functions"]}
      calls = _gold_turn_calls(item.gold["calls"], docs, item.id)
    else:
      calls = oracle_calls(item.gold["functions"], item.gold["answers"], item.gold["language"])
    return render_calls(calls, self.prompt_style)

  def aggregate(self, results: Sequence[ItemResult]) -> dict[str, float]:
    """Per-category accuracy and count, and BFCL's summaries (see the module docstring)."""
    metrics: dict[str, float] = {}
    acc: dict[str, float] = {}
    counts: dict[str, tuple[int, int]] = {}
    for split in sorted({r.split for r in results}):
      chosen = [r for r in results if r.split == split]
      correct = sum(1 for r in chosen if r.correct)
      counts[split] = (correct, len(chosen))
      acc[split] = correct / len(chosen)
      metrics[f"{split}/accuracy"] = acc[split]
      metrics[f"{split}/n"] = float(len(chosen))

    def mean(values: list[float]) -> float | None:
      return sum(values) / len(values) if values else None

    simple = mean([acc[c] for c in NON_LIVE_SIMPLE if c in acc])
    non_live = [simple] if simple is not None else []
    summaries = {
      "non_live/simple": simple,
      "non_live/overall": mean(non_live + [acc[c] for c in NON_LIVE_AST[3:] if c in acc]),
      "irrelevance/overall": mean([acc[c] for c in IRRELEVANCE if c in acc]),
      "relevance/overall": acc.get("live_relevance"),
    }
    live = [counts[c] for c in LIVE_AST if c in counts]
    if live:
      summaries["live/overall"] = sum(c for c, _ in live) / sum(n for _, n in live)
    metrics.update({k: float(v) for k, v in summaries.items() if v is not None})
    return metrics
