"""API-Bank (Li et al., 2023) in the protocol GenEnv follows (ToolRL's), plus tool-calling seed tasks for training.

Evaluation data: `<data_dir>/api_bank/level-{1,2,3}-api_processed.json` (qiancheng0/ToolRL `benchmarks/API-Bank/`),
399 + 67 + 131 = 597 records `{system, user, answer, other}`: `system` lists the tools and asks for a `<tool_call>`
block of JSON lines, `user` is the dialogue, `answer` the gold call (a list of one `{name, parameters}`, or the bare
object on level 2). Item id `level-{L}-{i}` (i = 0-based position in its file), split `level-{L}`, prompt = the
record's system and user messages as given.

Metric, ToolRL `benchmarks/API-Bank/generate.py` (extraction) and `evaluate.py` ("SOFT MATCH", the one it reports):
1. block = the text after the LAST `<tool_call>` and before the next `</tool_call>`: the whole output when there is no
   `<tool_call>` at all, the rest of the output when the block is not closed;
2. each line of the block that is valid JSON is one prediction (other lines are skipped; a JSON string is decoded
   once more; a JSON list on one line is one prediction, which cannot match);
3. a prediction without a "name" or a "parameters" key is taken as the parameters of a call to the gold function;
4. the item is correct when ANY prediction has the gold name and parameters `==` the gold parameters dict (the first
   gold call when there are several; every record here has one). Extra calls do not hurt.
`==` is exact: every key present and no extra key (an omitted optional parameter is wrong), string values match
case, spaces and punctuation exactly, and "30" != 30 (every gold value here is a string). `arguments` is not read
as `parameters`. Accuracy per level = correct / items; `overall/accuracy` = correct / 597 (the paper's k/597).

`strict_format=True` is a stricter variant for rewards: only the last CLOSED block counts, read by
`tool_calls.parse_json_tool_calls` (each prediction a `{name, parameters | arguments}` object), and rule 3 is off.

The training seeds (API-Bank's level-3 training API calls, `SEED_FILES`, never the evaluation set) are read by the
training task family, `api_bank/family.py`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
from typing import Any, Sequence

from genenv_jax.benchmarks.parsing.tool_calls import (
  ToolCall,
  format_json_tool_calls,
  parse_json_tool_calls,
)
from genenv_jax.tasks.benchmark import EvalItem, ItemResult

LEVELS = ("level-1", "level-2", "level-3")
SEED_FILES = {"api_bank_lv3_train": ("api_bank", "original_training", "lv3-api-train.json")}


def toolrl_block(text: str) -> str:
  """Rule 1: the text after the last `<tool_call>` up to the next `</tool_call>` (ToolRL's split-based extraction)."""
  return text.split("<tool_call>")[-1].split("</tool_call>")[0].strip() if isinstance(text, str) else ""


def toolrl_predictions(text: str) -> list[Any]:
  """Rule 2: the JSON value of each valid JSON line of the ToolRL block (strings decoded once more when valid)."""
  predictions = []
  for line in toolrl_block(text).split("\n"):
    if not line.strip():
      continue
    try:
      value = json.loads(line)
      if isinstance(value, str):
        value = json.loads(value)
    except (ValueError, RecursionError):
      continue
    predictions.append(value)
  return predictions


def toolrl_match(predictions: Sequence[Any], gold_name: str, gold_parameters: dict[str, Any]) -> int | None:
  """Rules 3-4: the index of the first prediction that matches the gold call, else None."""
  for i, predicted in enumerate(predictions):
    if not isinstance(predicted, dict):
      continue
    if "name" in predicted and "parameters" in predicted:
      name, parameters = predicted["name"], predicted["parameters"]
    else:
      name, parameters = gold_name, predicted
    if name == gold_name and parameters == gold_parameters:
      return i
  return None


def _gold_calls(answer: Any, where: str) -> list[dict[str, Any]]:
  calls = answer if isinstance(answer, list) else [answer]
  for call in calls:
    if not (isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("parameters"), dict)):
      raise ValueError(f"{where}: gold answer {answer!r} is not a {{name, parameters}} call or a list of them")
  if not calls:
    raise ValueError(f"{where}: gold answer is empty")
  return [{"name": c["name"], "parameters": dict(c["parameters"])} for c in calls]


def _check_limit(limit: int | None) -> None:
  if limit is not None and limit < 0:
    raise ValueError(f"limit must be >= 0 or None, got {limit}")


@dataclasses.dataclass(frozen=True)
class ApiBankBenchmark:
  """API-Bank levels 1-3 with ToolRL's tool-call metric (see the module docstring)."""

  strict_format: bool = False
  name: str = dataclasses.field(default="api_bank", init=False)

  def splits(self) -> Sequence[str]:
    return LEVELS

  def load_items(self, data_dir: str, split: str | None = None, limit: int | None = None) -> list[EvalItem]:
    """Items of one level (all three with `split=None`); `limit` caps the items of each level."""
    if split is not None and split not in LEVELS:
      raise ValueError(f"API-Bank has no split {split!r}; expected one of {LEVELS}")
    _check_limit(limit)
    items = []
    for level in (split,) if split else LEVELS:
      path = pathlib.Path(data_dir) / "api_bank" / f"{level}-api_processed.json"
      if not path.is_file():
        raise FileNotFoundError(f"API-Bank data not found at {path}")
      records = json.loads(path.read_text(encoding="utf-8"))
      for i, record in enumerate(records[:limit] if limit is not None else records):
        item_id = f"{level}-{i}"
        if (
          not isinstance(record, dict)
          or not isinstance(record.get("system"), str)
          or not isinstance(record.get("user"), str)
        ):
          raise ValueError(f"{path}: record {i} lacks string 'system'/'user' fields")
        messages = ({"role": "system", "content": record["system"]}, {"role": "user", "content": record["user"]})
        items.append(EvalItem(item_id, level, messages, _gold_calls(record.get("answer"), item_id)))
    return items

  def score(self, item: EvalItem, output: str) -> ItemResult:
    """1.0 when a predicted call equals the gold call by the module's rules (ToolRL's, or the strict variant)."""
    gold = item.gold[0]
    if self.strict_format:
      predictions = [
        {"name": c.name, "parameters": dict(c.arguments)} for c in parse_json_tool_calls(output, last_only=True)
      ]
    else:
      predictions = toolrl_predictions(output) if isinstance(output, str) else []
    matched = toolrl_match(predictions, gold["name"], gold["parameters"]) if predictions else None
    detail: dict[str, Any] = {"n_predictions": len(predictions)}
    if matched is None:
      detail["error"] = "no predicted call has the gold name and parameters" if predictions else "no call"
    return ItemResult(item.id, item.split, matched is not None, 0.0 if matched is None else 1.0, detail)

  def oracle_output(self, item: EvalItem) -> str:
    return format_json_tool_calls(ToolCall(c["name"], c["parameters"]) for c in item.gold)

  def aggregate(self, results: Sequence[ItemResult]) -> dict[str, float]:
    """Accuracy, correct count and item count per level and overall (correct / all items)."""
    metrics: dict[str, float] = {}
    groups: dict[str, list[ItemResult]] = collections.defaultdict(list)
    for r in results:
      groups[r.split].append(r)
    for split, chosen in sorted(groups.items()) + [("overall", list(results))]:
      correct = sum(1 for r in chosen if r.correct)
      metrics[f"{split}/accuracy"] = correct / len(chosen) if chosen else 0.0
      metrics[f"{split}/correct"] = float(correct)
      metrics[f"{split}/n"] = float(len(chosen))
    return metrics
