"""TravelPlanner (Xie et al., 2024), sole-planning mode, on the 45 train queries: the `Benchmark` implementation.

Data, under `<data_dir>/travelplanner/`: `finetuning_data/std_travelplanner.jsonl` (per query: the sole-planning
system prompt, the user turn "Given Information: <reference information> Query: <query>", and the gold plan),
`database/train_ref_info.jsonl` (the same reference information as JSON; its flights are the only flights there are)
and the sandbox CSVs (`travelplanner.database`). The structured constraints of each query come from the transcribed
annotation file (`travelplanner.query`). Items: `travelplanner-train-{i}`, split "train". The 180 validation queries
(`postprocess/example_evaluation.jsonl`) cannot be scored end to end: their reference information (so their
flights) and structured constraints are not shipped, so `splits()` lists only "train".

Prompt: the shipped sole-planning system prompt plus `FORMAT_INSTRUCTION` (answer with the plan as JSON), then the
shipped user turn. Output: parsed by `travelplanner.plan.parse_plan`; no plan = not delivered.

Evaluation (`evaluation/eval.py` of OSU-NLP-Group/TravelPlanner), for N queries:
- a delivered plan gets the 8 commonsense checks (`travelplanner.checks`); the 5 hard checks
  (`travelplanner.hard`) run only when Complete Information and Within Sandbox both pass, otherwise none counts;
- Delivery Rate = delivered / N;
- Commonsense Micro = passed commonsense checks / (8 N);
- Commonsense Macro = plans with no failed commonsense check (and hard checks run) / N;
- Hard Micro = passed hard checks / sum over queries of (1 + local constraints set), the applicable checks (105 on
  train: eval.py's constant);
- Hard Macro = plans whose hard checks ran and none failed / N;
- Final Pass Rate = plans passing both / N;
- paper_score = the mean of the four micro/macro rates (the TravelPlanner figure GenEnv reports).
Per item: correct = passes all (final pass); score = passed checks / (8 + applicable hard checks).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import pathlib
from typing import Any, Mapping, Sequence

from genenv_jax.benchmarks.travelplanner.checks import COMMONSENSE_CHECKS, Plan, PlanContext, commonsense_verdicts
from genenv_jax.benchmarks.travelplanner.database import flights_from_reference, load_database, load_reference_infos
from genenv_jax.benchmarks.travelplanner.hard import HARD_CHECKS, hard_verdicts
from genenv_jax.benchmarks.travelplanner.plan import parse_plan, plan_to_text
from genenv_jax.benchmarks.travelplanner.query import TRAIN_CONSTRAINTS_PATH, TravelQuery, load_train_queries
from genenv_jax.tasks.benchmark import EvalItem, ItemResult

SPLIT = "train"
UNSCORABLE_SPLITS: Mapping[str, str] = {
  "validation": "its reference information (flights) and structured constraints are not shipped",
  "test": "its gold plans and constraints are hidden behind the official leaderboard",
}
SOLE_PLANNING_FILE = ("travelplanner", "finetuning_data", "std_travelplanner.jsonl")
GATING_CHECKS = ("complete_information", "within_sandbox")
HARD_TO_LOCAL_KEY: Mapping[str, str] = {
  "room_rule": "house rule",
  "cuisine": "cuisine",
  "room_type": "room type",
  "transportation": "transportation",
}

FORMAT_INSTRUCTION = "\n".join(
  [
    "Output format: give the whole plan as a JSON list inside one ```json fenced block, one object per day, with "
    "exactly these keys:",
    '"days" (1, 2, ...), "current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", '
    '"accommodation".',
    '- "current_city": the city of the day, or "from A to B" on a travel day.',
    '- "transportation": "Flight Number: F0123456, from A to B, Departure Time: 08:00, Arrival Time: 10:00", or '
    '"Self-driving, from A to B, duration: ..., distance: ..., cost: ...", or "Taxi, from A to B, duration: ..., '
    'distance: ..., cost: ...", or "-".',
    '- "breakfast", "lunch", "dinner", "accommodation": "Name, City" or "-".',
    '- "attraction": "Name, City;" for each attraction, every one ending with ";", or "-".',
    'Write "-" for anything unnecessary, e.g. after returning to the departure city. Write cities as in the given '
    'information (e.g. "Dallas(Texas)" or "Dallas").',
  ]
)


@dataclasses.dataclass(frozen=True)
class TravelPlannerGold:
  """The gold side of one item: the query constraints, the annotated plan, and the sandbox context the checks use."""

  query: TravelQuery
  plan: tuple[Mapping[str, Any], ...]
  context: PlanContext


def _read_sole_planning(data_dir: str | pathlib.Path) -> list[list[Mapping[str, str]]]:
  path = pathlib.Path(data_dir).joinpath(*SOLE_PLANNING_FILE)
  if not path.is_file():
    raise FileNotFoundError(f"TravelPlanner sole-planning train file not found: {path}")
  records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
  for i, record in enumerate(records):
    roles = [m.get("role") for m in record.get("messages", [])]
    if roles != ["system", "user", "assistant"]:
      raise ValueError(f"{path}: line {i + 1} has message roles {roles}, expected system, user, assistant")
  return [r["messages"] for r in records]


def evaluate_plan(ctx: PlanContext, plan: Plan | None) -> dict[str, Any]:
  """One plan's verdicts by the official flow (module docstring), as a JSON-friendly detail dict."""
  local = ctx.query.local_constraint
  applies = {name: name not in HARD_TO_LOCAL_KEY or local[HARD_TO_LOCAL_KEY[name]] is not None for name in HARD_CHECKS}
  detail: dict[str, Any] = {
    "delivered": plan is not None,
    "commonsense": None,
    "hard": None,
    "hard_applicable": sum(applies.values()),
    "hard_applies": applies,
    "commonsense_pass": False,
    "hard_pass": False,
    "failures": {},
  }
  if plan is None:
    return detail
  commonsense = commonsense_verdicts(ctx, plan)
  hard = hard_verdicts(ctx, plan) if all(commonsense[k].passed for k in GATING_CHECKS) else None
  detail["commonsense"] = {k: bool(v.passed) for k, v in commonsense.items()}
  detail["hard"] = None if hard is None else {k: v.passed for k, v in hard.items()}
  verdicts = {**commonsense, **(hard or {})}
  detail["failures"] = {k: v.reason for k, v in verdicts.items() if v.passed is False}
  detail["commonsense_pass"] = hard is not None and all(v.passed is not False for v in commonsense.values())
  detail["hard_pass"] = hard is not None and all(v.passed is not False for v in hard.values())
  return detail


def _rate(numerator: float, denominator: float) -> float:
  return float(numerator / denominator) if denominator else 0.0


def travelplanner_metrics(details: Sequence[Mapping[str, Any]]) -> dict[str, float]:
  """The official headline rates (module docstring) over the detail dicts of `evaluate_plan`."""
  n = len(details)
  commonsense_passed = sum(sum(d["commonsense"].values()) for d in details if d["commonsense"] is not None)
  hard_passed = sum(sum(v is True for v in d["hard"].values()) for d in details if d["hard"] is not None)
  hard_total = sum(int(d["hard_applicable"]) for d in details)
  metrics = {
    "delivery_rate": _rate(sum(bool(d["delivered"]) for d in details), n),
    "commonsense_micro": _rate(commonsense_passed, len(COMMONSENSE_CHECKS) * n),
    "commonsense_macro": _rate(sum(bool(d["commonsense_pass"]) for d in details), n),
    "hard_micro": _rate(hard_passed, hard_total),
    "hard_macro": _rate(sum(bool(d["hard_pass"]) for d in details), n),
    "final_pass_rate": _rate(sum(bool(d["commonsense_pass"] and d["hard_pass"]) for d in details), n),
  }
  metrics["paper_score"] = (
    metrics["commonsense_micro"] + metrics["commonsense_macro"] + metrics["hard_micro"] + metrics["hard_macro"]
  ) / 4.0
  for name in COMMONSENSE_CHECKS:
    metrics[f"commonsense/{name}"] = _rate(sum(bool(d["commonsense"] and d["commonsense"][name]) for d in details), n)
  for name in HARD_CHECKS:
    passed = sum(bool(d["hard"] and d["hard"][name] is True) for d in details)
    metrics[f"hard/{name}"] = _rate(passed, sum(bool(d["hard_applies"][name]) for d in details))
  metrics["n"] = float(n)
  return metrics


@dataclasses.dataclass(frozen=True)
class TravelPlannerBenchmark:
  """TravelPlanner sole planning on the train queries; `constraints_path` is the transcribed annotation file."""

  constraints_path: str | pathlib.Path = TRAIN_CONSTRAINTS_PATH
  name: str = dataclasses.field(default="travelplanner", init=False)

  def splits(self) -> Sequence[str]:
    return (SPLIT,)

  def load_items(self, data_dir: str, split: str | None = None, limit: int | None = None) -> list[EvalItem]:
    """The train queries as items; raises ValueError naming an unknown or unscorable split, or a bad limit."""
    if split in UNSCORABLE_SPLITS:
      raise ValueError(
        f"travelplanner split {split!r} cannot be scored here: {UNSCORABLE_SPLITS[split]}; use split {SPLIT!r}"
      )
    if split is not None and split != SPLIT:
      raise ValueError(f"travelplanner has no split {split!r}; its only split is {SPLIT!r}")
    if limit is not None and limit < 0:
      raise ValueError(f"limit must be >= 0 or None, got {limit}")
    conversations = _read_sole_planning(data_dir)
    references = load_reference_infos(data_dir)
    queries = load_train_queries(self.constraints_path)
    if not len(conversations) == len(references) == len(queries):
      raise ValueError(
        f"TravelPlanner train files disagree: {len(conversations)} prompts, {len(references)} "
        f"reference infos, {len(queries)} constraint annotations"
      )
    database = load_database(data_dir)
    count = len(queries) if limit is None else min(limit, len(queries))
    items = []
    for i in range(count):
      system, user, assistant = conversations[i]
      gold_plan = tuple(day for day in ast.literal_eval(assistant["content"]) if day)
      context = PlanContext(queries[i], database, flights_from_reference(references[i]))
      messages = (
        {"role": "system", "content": system["content"].rstrip() + "\n\n" + FORMAT_INSTRUCTION},
        {"role": "user", "content": user["content"]},
      )
      items.append(
        EvalItem(
          id=f"travelplanner-train-{i}",
          split=SPLIT,
          messages=messages,
          gold=TravelPlannerGold(queries[i], gold_plan, context),
        )
      )
    return items

  def score(self, item: EvalItem, output: str) -> ItemResult:
    """Parses the plan and runs the official checks; an unparseable output is not delivered and scores 0."""
    gold: TravelPlannerGold = item.gold
    detail = evaluate_plan(gold.context, parse_plan(output))
    detail["level"] = gold.query.level
    passed = (sum(detail["commonsense"].values()) if detail["commonsense"] else 0) + (
      sum(v is True for v in detail["hard"].values()) if detail["hard"] else 0
    )
    score = passed / (len(COMMONSENSE_CHECKS) + detail["hard_applicable"])
    correct = bool(detail["commonsense_pass"] and detail["hard_pass"])
    return ItemResult(item.id, item.split, correct, float(score), detail)

  def oracle_output(self, item: EvalItem) -> str:
    return plan_to_text([dict(day) for day in item.gold.plan])

  def aggregate(self, results: Sequence[ItemResult]) -> dict[str, float]:
    """The official rates per split ("train/...") and overall; raises ValueError for a result without details."""
    for r in results:
      if "hard_applicable" not in r.detail:
        raise ValueError(f"result {r.id!r} lacks TravelPlanner details; score it with TravelPlannerBenchmark.score")
    metrics: dict[str, float] = {}
    for split in sorted({r.split for r in results}):
      split_metrics = travelplanner_metrics([r.detail for r in results if r.split == split])
      metrics.update({f"{split}/{k}": v for k, v in split_metrics.items()})
    metrics.update(travelplanner_metrics([r.detail for r in results]))
    return metrics
