"""BFCL-style function calling as a training task family (the "bfcl" training domain).

Seeds: ToolRL's tool-calling training mix, `tool_calling_seed/rlla_sft.json` (ToolACE / Hammer / xLAM, 400 records;
never the BFCL evaluation data under `bfcl/`; a record whose user message occurs in any BFCL question is left out).
A record becomes one task when it has one user turn (its whitespace collapsed to single spaces, so the question is
one line) and a `<tool_call>` block of calls whose tools are all listed
with parameter types BFCL knows. Its tools become BFCL function docs: the name with every non-identifier character
replaced by "_", the description, `{"type": "dict", "properties": {p: {"type", "description"}}, "required": [the
parameters the gold calls give]}`, types mapped to BFCL's (string/str -> string, int/integer -> integer,
float/number/double -> float, bool/boolean -> boolean, array/list -> array, dict/object -> dict).

Env text format (one doc per line, the question, the gold calls in BFCL's Python syntax):
  Function: {"name": "get_weather", "description": "...", "parameters": {"type": "dict", "properties": {...},
             "required": [...]}}
  User: <question>
  Calls: [get_weather(city='Paris', unit='celsius')]

Parser rule (`parse`), checked by the domain with BFCL's own checker, never trusted from the env:
  * 1..8 `Function:` lines, then exactly one `User:` line (non-empty) and one `Calls:` line;
  * each doc is a JSON object with a (dotted) identifier name, unique, a string description and parameters
    `{"type": "dict", "properties": {name: {"type": one of bfcl.checker.PYTHON_TYPES, ...}}, "required": [...]}`
    with `required` a subset of the properties;
  * the calls parse with `tool_calls.parse_python_calls` into 1..4 calls without positional arguments, each of a
    listed function, and each call passes `bfcl.checker.check_call` against its own doc and the answer built from
    it (so required parameters are given, no undeclared parameter is, and every value has the declared type).
Gold text: canonical JSON `{"functions": [the called functions' docs, descriptions dropped], "answers": [{name:
{param: [value]} plus {param: [""]} for each optional parameter the call leaves out}]}`. Difficulty: the number of
calls plus the number of their arguments, over 2.

Agent prompt: BFCL's own prompting system message (`bfcl.prompts.build_messages`, style "bfcl", Python) and the
question. Score: `bfcl.evaluator.decode` of the output, then `bfcl.checker.check_ast` (category "multiple" for one gold
call, "parallel_multiple", order-free, for several), 1.0 when it passes, else 0.0.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
from typing import Any, Mapping

from genenv_jax.benchmarks.bfcl import evaluator
from genenv_jax.benchmarks.bfcl.checker import PYTHON_TYPES, check_ast, check_call
from genenv_jax.benchmarks.bfcl.prompts import build_messages, render_calls
from genenv_jax.benchmarks.parsing.source_scan import tag_contents
from genenv_jax.benchmarks.parsing.task_text import split_tool_task
from genenv_jax.benchmarks.parsing.tool_calls import (
  ToolCall,
  format_python_calls,
  parse_json_tool_calls,
  parse_python_calls,
)
from genenv_jax.tasks.text_domain import ParsedTask

MAX_FUNCTIONS, MAX_CALLS = 8, 4
SEED_FILE = ("tool_calling_seed", "rlla_sft.json")
TYPE_MAP = {
  "string": "string",
  "str": "string",
  "int": "integer",
  "integer": "integer",
  "float": "float",
  "number": "float",
  "double": "float",
  "bool": "boolean",
  "boolean": "boolean",
  "array": "array",
  "list": "array",
  "dict": "dict",
  "object": "dict",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_TOOL = re.compile(r"^\d+\. Name: (.+)\nDescription: (.*)\nParameters: (.*)$", re.MULTILINE)


def write_task(functions: list[dict[str, Any]], question: str, calls: list[ToolCall]) -> str:
  lines = [f"Function: {json.dumps(f, ensure_ascii=False)}" for f in functions]
  return "\n".join(lines + [f"User: {question}", f"Calls: {format_python_calls(calls)}"])


def _identifier(name: str) -> str:
  out = re.sub(r"[^A-Za-z0-9_]", "_", name.strip())
  return out if re.match(r"[A-Za-z_]", out) else "f_" + out


def _record_task(record: Mapping[str, Any]) -> str | None:
  """One rlla_sft record as an env text, or None when it is not a single-turn task with typed, listed calls."""
  users = tag_contents(record["input"], "<user>", "</user>")
  calls = parse_json_tool_calls(record["output"], last_only=True)
  if len(users) != 1 or not users[0].strip() or not 1 <= len(calls) <= MAX_CALLS:
    return None
  docs: dict[str, dict[str, Any]] = {}
  renamed: dict[str, str] = {}
  for name, description, params in _TOOL.findall(record["instruction"]):
    try:
      props = json.loads(params)
    except ValueError:
      return None
    if not isinstance(props, dict):
      return None
    properties = {}
    for key, prop in props.items():
      kind = prop.get("type") if isinstance(prop, dict) else None
      if not isinstance(kind, str) or kind.lower() not in TYPE_MAP or not _NAME.match(key):
        return None
      properties[key] = {"type": TYPE_MAP[kind.lower()], "description": str(prop.get("description", ""))}
    renamed[name.strip()] = _identifier(name)
    docs[renamed[name.strip()]] = {
      "name": renamed[name.strip()],
      "description": description.strip(),
      "parameters": {"type": "dict", "properties": properties, "required": []},
    }
  if not docs or len(docs) > MAX_FUNCTIONS or len(set(renamed.values())) != len(renamed):
    return None
  gold = []
  for call in calls:
    name = renamed.get(call.name.strip())
    if name is None:
      return None
    gold.append(ToolCall(name, dict(call.arguments)))
    required = docs[name]["parameters"]["required"]
    required.extend(k for k in call.arguments if k not in required)
  try:
    return write_task(list(docs.values()), " ".join(users[0].split()), gold)
  except ValueError:
    return None


def _bfcl_questions(data_dir: pathlib.Path) -> list[str]:
  """Every user message of every BFCL question file (the evaluation set, to keep seeds disjoint from it)."""
  out = []
  for path in sorted((data_dir / "bfcl").glob("BFCL_v4_*.json")):
    for row in evaluator._read_jsonl(path):  # noqa: SLF001 (the evaluator's own JSON-lines reader)
      for turn in row.get("question", []):
        for message in turn if isinstance(turn, list) else [turn]:
          if isinstance(message, dict) and message.get("role") == "user":
            out.append(str(message.get("content", "")))
  return out


def _check_doc(doc: Any) -> bool:
  if not (
    isinstance(doc, dict)
    and set(doc) == {"name", "description", "parameters"}
    and isinstance(doc["name"], str)
    and _NAME.match(doc["name"])
    and isinstance(doc["description"], str)
  ):
    return False
  params = doc["parameters"]
  if not (
    isinstance(params, dict)
    and params.get("type") == "dict"
    and isinstance(params.get("properties"), dict)
    and isinstance(params.get("required", []), list)
  ):
    return False
  props = params["properties"]
  return all(isinstance(p, dict) and p.get("type") in PYTHON_TYPES for p in props.values()) and all(
    isinstance(r, str) and r in props for r in params.get("required", [])
  )


def answer_of(call: ToolCall, doc: Mapping[str, Any]) -> dict[str, dict[str, list[Any]]]:
  """BFCL's possible-answer form of a gold call: its values, and "" (leave out) for every other parameter."""
  allowed = {k: [v] for k, v in call.arguments.items()}
  for param in doc["parameters"]["properties"]:
    allowed.setdefault(param, [""])
  return {call.name: allowed}


def _spec_doc(doc: Mapping[str, Any]) -> dict[str, Any]:
  props = {
    k: {key: v[key] for key in ("type", "items") if key in v} for k, v in doc["parameters"]["properties"].items()
  }
  return {
    "name": doc["name"],
    "parameters": {"type": "dict", "properties": props, "required": list(doc["parameters"].get("required", []))},
  }


@dataclasses.dataclass(frozen=True)
class BfclTasks:
  """The BFCL family (module docstring)."""

  name: str = "bfcl"
  env_instruction: str = (
    "You write function-calling tasks. Write one or more lines 'Function: <JSON function doc with name, "
    "description and parameters {type: dict, properties, required}>', then one line 'User: <request>', then one "
    "line 'Calls: [func(arg=value, ...)]' with the correct calls in Python syntax. Nothing else."
  )

  def seed_texts(self, data_dir: pathlib.Path) -> list[str]:
    path = data_dir.joinpath(*SEED_FILE)
    if not path.is_file():
      raise FileNotFoundError(f"tool-calling seed data not found at {path}")
    questions = "\n".join(_bfcl_questions(data_dir))
    out = []
    for record in json.loads(path.read_text(encoding="utf-8")):
      text = _record_task(record)
      if text is not None and text.split("\nUser: ", 1)[1].split("\nCalls: ", 1)[0] not in questions:
        out.append(text)
    return out

  def parse(self, text: str) -> ParsedTask | None:
    parts = split_tool_task(text, "Function: ", "Calls: ", MAX_FUNCTIONS, _check_doc)
    if parts is None:
      return None
    docs, question, calls_text = parts
    calls = parse_python_calls(calls_text)
    if not 1 <= len(calls) <= MAX_CALLS:
      return None
    by_name = {d["name"]: d for d in docs}
    answers = []
    for call in calls:
      doc = by_name.get(call.name)
      if doc is None or call.positional:
        return None
      answer = answer_of(call, doc)
      if check_call(doc, call, answer, "python") is not None:
        return None
      answers.append(answer)
    called = [by_name[n] for n in dict.fromkeys(c.name for c in calls)]
    gold = json.dumps(
      {"functions": [_spec_doc(d) for d in called], "answers": answers}, sort_keys=True, ensure_ascii=False
    )
    messages = build_messages([{"role": "user", "content": question}], docs, "python", style="bfcl")
    return ParsedTask(tuple(messages), gold, (len(calls) + sum(len(c.arguments) for c in calls)) / 2.0)

  def oracle(self, gold: str) -> str | None:
    spec = json.loads(gold)
    calls = [
      ToolCall(name, {k: v[0] for k, v in allowed.items() if v != [""]})
      for answer in spec["answers"]
      for name, allowed in answer.items()
    ]
    return render_calls(calls, "bfcl")

  def score(self, gold: str, output: str) -> float:
    spec = json.loads(gold)
    answers = spec["answers"]
    category = "parallel_multiple" if len(answers) > 1 else "multiple"
    error = check_ast(spec["functions"], evaluator.decode(output, "python"), answers, "python", category)
    return 1.0 if error is None else 0.0
