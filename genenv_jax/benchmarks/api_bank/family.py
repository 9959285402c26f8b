"""API-Bank tool calling as a training task family (the "api_bank" training domain).

Seeds: API-Bank's level-3 TRAINING API calls, `api_bank/original_training/lv3-api-train.json` (907 records; never the
597 evaluation items of `api_bank/level-*-api_processed.json`; a record whose user utterance occurs in an evaluation
prompt is left out). Each record becomes one task: the APIs it shows (its ToolSearcher description and any API
description a ToolSearcher call returned in the dialogue, `input_parameters` read as parameters, response fields
dropped), the user's utterance (its TIME suffix kept) and the gold call of its `API-Request: [Name(k='v')]` output.
Records whose gold API is not among the shown APIs, or with an AI turn, are skipped.

Env text format (one JSON object per API line, then the utterance, then the gold call):
  API: {"name": "WeatherAPI", "description": "...", "parameters": {"location": {"type": "str", "description": "..."}}}
  User: <utterance>
  Call: {"name": "WeatherAPI", "parameters": {"location": "New York City"}}

Parser rule (`parse`), checked by the domain, never trusted from the env:
  * one or more `API:` lines first (at most 8), then exactly one `User:` line (non-empty) and one `Call:` line;
  * each API is a JSON object with a name matching [A-Za-z_][A-Za-z0-9_]*, unique among the APIs, a string
    description and a `parameters` object mapping names to objects with a string "type";
  * the call is a JSON object with exactly the keys name and parameters (`tool_calls.call_from_json`); its API
    must be one of the listed APIs; every parameter must be declared by that API; every value must be given: a
    non-empty string (API-Bank passes almost every argument as one), a number or boolean, or a non-empty list or
    object of such values; an API that declares parameters gets at least one.
Gold text: the call as canonical JSON (`{"name", "parameters"}`, sorted keys). Difficulty: the number of call
parameters plus the number of listed APIs (>= 1).

Agent prompt: a ToolRL-style system message listing the APIs ("N. Name / Description / Parameters") and asking for
one `<tool_call>` block of JSON lines, then the utterance. Score: `ApiBankBenchmark.score` (ToolRL's API-Bank metric:
a predicted call in the last `<tool_call>` block with the gold name and parameters `==` the gold), 1.0 or 0.0.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import pathlib
import re
from typing import Any

from genenv_jax.benchmarks.api_bank.evaluator import LEVELS, SEED_FILES, ApiBankBenchmark
from genenv_jax.benchmarks.parsing.task_text import split_tool_task
from genenv_jax.benchmarks.parsing.tool_calls import ToolCall, call_from_json, format_json_tool_calls, parse_api_request
from genenv_jax.tasks.benchmark import EvalItem
from genenv_jax.tasks.text_domain import ParsedTask

MAX_APIS = 8
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SCORER = ApiBankBenchmark()
SYSTEM_PROMPT = (
  "You are a helpful assistant that can call tools to serve the user.\n\n**Available Tools**\n{tools}\n\n"
  "**Output Format**\nAnswer with exactly one tool call inside one block:\n<tool_call>\n"
  '{{"name": "Tool name", "parameters": {{"Parameter name": "Parameter value"}}}}\n</tool_call>'
)


def write_task(apis: list[dict[str, Any]], user: str, call: dict[str, Any]) -> str:
  lines = [f"API: {json.dumps(api, ensure_ascii=False)}" for api in apis]
  return "\n".join(lines + [f"User: {user}", f"Call: {json.dumps(call, ensure_ascii=False)}"])


def _api(name: str, description: str, parameters: Any) -> dict[str, Any] | None:
  if not isinstance(parameters, dict):
    return None
  params = {
    k: {"type": str(v.get("type", "str")), "description": str(v.get("description", ""))}
    for k, v in parameters.items()
    if isinstance(v, dict)
  }
  return {"name": name, "description": description, "parameters": params}


def _record_task(record: dict[str, Any]) -> str | None:
  """One lv3 training record as an env text, or None when it does not make a self-contained single-call task."""
  lines = record["input"].split("\n")
  if any(line.startswith("AI:") for line in lines):
    return None
  apis: list[dict[str, Any]] = []
  first = json.loads(lines[0])
  apis.append(_api(first["apiCode"], first.get("description", ""), first.get("parameters")))
  user = next((line[len("User: ") :].strip() for line in lines if line.startswith("User: ")), "")
  for line in lines:
    if line.startswith("API-Request:") and "->{" in line:
      try:
        value = ast.literal_eval(line.split("->", 1)[1])
      except (ValueError, SyntaxError):
        continue
      if isinstance(value, dict) and "name" in value and "input_parameters" in value:
        apis.append(_api(str(value["name"]), str(value.get("description", "")), value["input_parameters"]))
  gold = parse_api_request(record["output"])
  if not user or len(gold) != 1 or any(a is None for a in apis):
    return None
  names = [a["name"] for a in apis]
  if gold[0].name not in names or len(set(names)) != len(names):
    return None
  return write_task(apis, user, {"name": gold[0].name, "parameters": dict(gold[0].arguments)})


def _eval_users(data_dir: pathlib.Path) -> list[str]:
  return [item.messages[-1]["content"] for level in LEVELS for item in _SCORER.load_items(str(data_dir), split=level)]


def _check_api(api: Any) -> bool:
  return (
    isinstance(api, dict)
    and set(api) == {"name", "description", "parameters"}
    and isinstance(api["name"], str)
    and bool(_NAME.match(api["name"]))
    and isinstance(api["description"], str)
    and isinstance(api["parameters"], dict)
    and all(isinstance(v, dict) and isinstance(v.get("type"), str) for v in api["parameters"].values())
  )


def _filled(value: Any) -> bool:
  """A given argument: a non-empty string, a number or boolean, or a non-empty list / object of such values."""
  if isinstance(value, str):
    return bool(value.strip())
  if isinstance(value, (bool, int, float)):
    return True
  if isinstance(value, list):
    return bool(value) and all(_filled(v) for v in value)
  if isinstance(value, dict):
    return bool(value) and all(_filled(v) for v in value.values())
  return False


def render_tools(apis: list[dict[str, Any]]) -> str:
  return "\n".join(
    f"{i}. Name: {a['name']}\nDescription: {a['description']}\nParameters: "
    f"{json.dumps(a['parameters'], ensure_ascii=False)}"
    for i, a in enumerate(apis, 1)
  )


@dataclasses.dataclass(frozen=True)
class ApiBankTasks:
  """The API-Bank family (module docstring)."""

  name: str = "api_bank"
  env_instruction: str = (
    "You write tool-use tasks for an assistant. Write one or more lines 'API: <JSON object with name, "
    "description, parameters>', then one line 'User: <request>', then one line 'Call: <JSON object with name "
    "and parameters>' giving the correct call of one listed API, with string values. Nothing else."
  )

  def seed_texts(self, data_dir: pathlib.Path) -> list[str]:
    path = data_dir.joinpath(*SEED_FILES["api_bank_lv3_train"])
    if not path.is_file():
      raise FileNotFoundError(f"API-Bank training data not found at {path}")
    records = json.loads(path.read_text(encoding="utf-8"))
    users = _eval_users(data_dir)
    out = []
    for record in records:
      text = _record_task(record)
      if text is None:
        continue
      utterance = text.split("\nUser: ", 1)[1].split("\nCall: ", 1)[0].split("TIME:")[0].strip()
      if not any(utterance in u for u in users):
        out.append(text)
    return out

  def parse(self, text: str) -> ParsedTask | None:
    parts = split_tool_task(text, "API: ", "Call: ", MAX_APIS, _check_api)
    if parts is None:
      return None
    apis, user, call_text = parts
    try:
      raw_call = json.loads(call_text)
    except (ValueError, RecursionError):
      return None
    call = call_from_json(raw_call)
    if call is None or not isinstance(raw_call.get("parameters"), dict) or set(raw_call) != {"name", "parameters"}:
      return None
    api = next((a for a in apis if a["name"] == call.name), None)
    if api is None or not set(call.arguments) <= set(api["parameters"]):
      return None
    if not all(_filled(v) for v in call.arguments.values()):
      return None
    if api["parameters"] and not call.arguments:
      return None
    messages = (
      {"role": "system", "content": SYSTEM_PROMPT.format(tools=render_tools(apis))},
      {"role": "user", "content": user},
    )
    gold = json.dumps({"name": call.name, "parameters": dict(call.arguments)}, sort_keys=True, ensure_ascii=False)
    return ParsedTask(messages, gold, float(len(call.arguments) + len(apis)))

  def oracle(self, gold: str) -> str | None:
    call = json.loads(gold)
    return format_json_tool_calls([ToolCall(call["name"], call["parameters"])])

  def score(self, gold: str, output: str) -> float:
    return _SCORER.score(EvalItem("generated", "train", (), [json.loads(gold)]), output).score
