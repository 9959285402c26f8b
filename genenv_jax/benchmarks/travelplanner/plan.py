"""Reading a TravelPlanner plan out of model output.

A plan is a non-empty list of day objects in the format of the benchmark's annotated plans (the gold plans of
`finetuning_data/std_travelplanner.jsonl`): keys "days", "current_city", "transportation", "breakfast", "attraction",
"lunch", "dinner", "accommodation", values as in the gold plans ('-' for nothing). `parse_plan` looks, in order, at:
1. fenced code blocks (```json ... ``` or ``` ... ```) holding a '[' or '{', last first, at most the last 64;
2. every '[' in the text, decoding one JSON value from there (`json.JSONDecoder.raw_decode`), first first;
3. the span from the first '[' to the last ']' as a Python literal (`source_scan.safe_literal_eval`), the format the
   gold plans ship in (single-quoted strings).
The first candidate that is a non-empty list of dicts (or a dict whose "plan" is one) is the plan. Anything else
returns None: the plan is not delivered (the official evaluator's `if tested_plan['plan']`), which scores 0.
Values are kept as given (the checks fail, never raise, on ill-typed fields).
"""

from __future__ import annotations

import json
import re
from typing import Any

from genenv_jax.benchmarks.parsing.source_scan import safe_literal_eval

_FENCE = re.compile(r"```[ \t]*(?:json|python|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_BRACKET_STARTS = 64
_MAX_FENCED_BLOCKS = 64  # the last ones: a plan is in the final answer; bounds the work on adversarial text


def _as_plan(value: Any) -> list[dict[str, Any]] | None:
  if isinstance(value, dict) and "plan" in value:
    value = value["plan"]
  if isinstance(value, list) and value and all(isinstance(day, dict) for day in value):
    return value
  return None


def _decode(text: str) -> Any:
  text = text.strip()
  try:
    return json.loads(text)
  except (ValueError, RecursionError):
    pass
  try:
    return safe_literal_eval(text)
  except ValueError:
    return None


def parse_plan(output: str) -> list[dict[str, Any]] | None:
  """The plan in a model output by the module's rules, or None when no plan can be read."""
  if not isinstance(output, str) or not output.strip():
    return None
  blocks = [b for b in _FENCE.findall(output) if "[" in b or "{" in b][-_MAX_FENCED_BLOCKS:]
  for block in reversed(blocks):
    plan = _as_plan(_decode(block))
    if plan is not None:
      return plan
  decoder = json.JSONDecoder()
  starts = [m.start() for m in re.finditer(r"\[", output)][:_MAX_BRACKET_STARTS]
  for start in starts:
    try:
      value, _ = decoder.raw_decode(output, start)
    except (ValueError, RecursionError):
      continue
    plan = _as_plan(value)
    if plan is not None:
      return plan
  if starts and "]" in output:
    return _as_plan(_decode(output[starts[0] : output.rindex("]") + 1]))
  return None


def plan_to_text(plan: list[dict[str, Any]]) -> str:
  """A plan as the output format the prompt asks for: a ```json fenced block holding the list of day objects."""
  return "```json\n" + json.dumps(plan, indent=1, ensure_ascii=False) + "\n```"
