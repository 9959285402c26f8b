"""The text layout that the tool-calling task families' env writes, split into its parts (never raises).

    <tool prefix>{JSON description of one tool}      1..max_tools lines, distinct "name"s
    User: <the user's request>
    <answer prefix><the expected call(s)>

API-Bank writes `API: ` / `Call: `, BFCL `Function: ` / `Calls: ` (benchmarks/api_bank/family.py,
benchmarks/bfcl/family.py); each family checks the tool descriptions and the answer by its own rules.
"""

from __future__ import annotations

import json
from typing import Any, Callable


def split_tool_task(
  text: Any, tool_prefix: str, answer_prefix: str, max_tools: int, check_tool: Callable[[Any], bool]
) -> tuple[list[dict], str, str] | None:
  """(tool descriptions, the user's request, the answer text) of a task in the layout above, or None when the text
  is not in it: a line out of place, more than `max_tools` tools, a description that is not JSON or fails
  `check_tool`, two tools of one name, or an empty request."""
  if not isinstance(text, str):
    return None
  lines = text.strip().split("\n")
  if len(lines) < 3 or not lines[-2].startswith("User: ") or not lines[-1].startswith(answer_prefix):
    return None
  if len(lines) - 2 > max_tools or not all(line.startswith(tool_prefix) for line in lines[:-2]):
    return None
  try:
    tools = [json.loads(line[len(tool_prefix) :]) for line in lines[:-2]]
  except (ValueError, RecursionError):
    return None
  if not all(check_tool(t) for t in tools) or len({t["name"] for t in tools}) != len(tools):
    return None
  user = lines[-2][len("User: ") :].strip()
  if not user:
    return None
  return tools, user, lines[-1][len(answer_prefix) :]
