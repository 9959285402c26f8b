"""Tool-call text <-> `ToolCall` values, in the three syntaxes the tool-calling benchmarks use.

Parsing (every parser returns `[]`, "no call", for malformed text and never raises):

* JSON blocks (ToolRL / Qwen style, `parse_json_tool_calls`): `<tool_call> ... </tool_call>` blocks, each holding one
  JSON object per line or one JSON list of objects. An object is `{"name": str, "parameters": {...}}`; `arguments` is
  accepted for `parameters`, and either may be a JSON-encoded string of the object. Only closed blocks count; lines
  that are not JSON are skipped (as ToolRL's `benchmarks/API-Bank/generate.py` does). `last_only=True` reads only the
  last closed block (the ToolRL API-Bank protocol).
* Python calls (BFCL prompting style, `parse_python_calls`): `[f(a=1, b='x'), math.factorial(n=5)]`, read with the
  `ast` module, never evaluated. Values are literals (numbers, strings, booleans, None, lists, tuples, dicts, sets as
  lists), negative numbers and numeric arithmetic (`2**10`, `-1.5e3`); as in BFCL's `ast_parse`, a bare name becomes
  its identifier string and any other expression (attribute, subscript, nested call, ...) its source text. Positional
  arguments are recorded in `ToolCall.positional`; whether they are allowed is the checker's rule.
* API-Bank requests (`parse_api_request`): `API-Request: [Name(k='v', k2='v2')]` (the brackets and the prefix are
  optional). API-Bank writes values quoted or bare (`location=New York`), so this is a tolerant scanner, not `ast`:
  scalars come back as strings (quotes removed), `[...]`/`{...}` literals as Python values when they parse.

Formatting (`format_json_tool_calls`, `format_python_calls`, `format_api_request`) renders calls back to each syntax;
the oracle agents use them, and each formatter's output parses back to the same calls.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import operator
import re
from typing import Any, Iterable, Mapping

from genenv_jax.benchmarks.parsing.source_scan import (
  bracket_end,
  keyword_pieces,
  remove_tag_blocks,
  safe_literal_eval,
  split_top_level,
  tag_contents,
  unquote,
)

_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)\n?```$", re.DOTALL)
_API_REQUEST = re.compile(r"API-Request:[ \t]*(.*)")
_REQUEST_CALL = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*\((.*)\)\s*$", re.DOTALL)
ARITHMETIC_OPS = {  # the binary operators a literal argument may use (BFCL's checker adds the bitwise ones)
  ast.Add: operator.add,
  ast.Sub: operator.sub,
  ast.Mult: operator.mul,
  ast.Div: operator.truediv,
  ast.FloorDiv: operator.floordiv,
  ast.Mod: operator.mod,
  ast.Pow: operator.pow,
}
_MAX_TEXT = 200_000  # longer outputs are not tool calls; guards ast against pathological input


@dataclasses.dataclass(frozen=True)
class ToolCall:
  """One function call: its (possibly dotted) name, keyword arguments and any positional arguments, in order."""

  name: str
  arguments: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  positional: tuple[Any, ...] = ()

  def to_json(self) -> dict[str, Any]:
    out: dict[str, Any] = {"name": self.name, "arguments": dict(self.arguments)}
    if self.positional:
      out["positional"] = list(self.positional)
    return out


class _Malformed(Exception):
  """Internal: the text is not a call in the syntax being parsed."""


def strip_reasoning(text: str) -> str:
  """Removes `<think>...</think>` spans and surrounding whitespace.

  An unclosed `<think>` hides the rest of the text; a `</think>` with no opening tag (chat templates that open the
  reasoning in the prompt) hides everything before it.
  """
  if not isinstance(text, str):
    return ""
  text = remove_tag_blocks(text, "<think>", "</think>", to_end=True)
  if "</think>" in text:
    text = text.rsplit("</think>", 1)[1]
  return text.strip()


# ------------------------------------------------------------------------------------------------ JSON blocks


def tool_call_blocks(text: str, last_only: bool = False) -> list[str]:
  """The contents of the closed `<tool_call>...</tool_call>` blocks of `text` (only the last with `last_only`)."""
  if not isinstance(text, str):
    return []
  blocks = tag_contents(text, "<tool_call>", "</tool_call>")
  return blocks[-1:] if last_only else blocks


def json_objects(block: str) -> list[Any]:
  """The JSON values of a block: the whole block if it is one JSON value (a list is flattened), else one per line.

  Lines that are not valid JSON are skipped (ToolRL reads a block line by line the same way).
  """
  stripped = block.strip()
  if not stripped:
    return []
  try:
    whole = json.loads(stripped)
  except (ValueError, RecursionError):
    whole = None
  else:
    return list(whole) if isinstance(whole, list) else [whole]
  values = []
  for line in stripped.splitlines():
    line = line.strip()
    if not line:
      continue
    try:
      value = json.loads(line)
    except (ValueError, RecursionError):
      continue
    values.extend(value if isinstance(value, list) else [value])
  return values


def call_from_json(obj: Any) -> ToolCall | None:
  """A `ToolCall` from `{"name", "parameters" | "arguments"}` (the arguments may be a JSON string); None if invalid."""
  if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"].strip():
    return None
  args = obj.get("parameters", obj.get("arguments", {}))
  if isinstance(args, str):
    try:
      args = json.loads(args) if args.strip() else {}
    except (ValueError, RecursionError):
      return None
  if args is None:
    args = {}
  if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
    return None
  return ToolCall(obj["name"].strip(), dict(args))


def parse_json_tool_calls(text: str, last_only: bool = False) -> list[ToolCall]:
  """All calls in the closed `<tool_call>` blocks of `text` (only the last block with `last_only`); invalid -> []."""
  if not isinstance(text, str) or len(text) > _MAX_TEXT:
    return []
  calls = []
  for block in tool_call_blocks(text, last_only):
    for obj in json_objects(block):
      call = call_from_json(obj)
      if call is not None:
        calls.append(call)
  return calls


def format_json_tool_calls(calls: Iterable[ToolCall], key: str = "parameters") -> str:
  """One `<tool_call>` block with one JSON object per line (ToolRL's output format); `key` names the arguments."""
  if key not in ("parameters", "arguments"):
    raise ValueError(f"key must be 'parameters' or 'arguments', got {key!r}")
  lines = [json.dumps({"name": c.name, key: dict(c.arguments)}, ensure_ascii=False) for c in calls]
  return "<tool_call>\n" + "\n".join(lines) + "\n</tool_call>"


# ------------------------------------------------------------------------------------------------ Python calls


def _dotted_name(node: ast.AST) -> str:
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if not isinstance(node, ast.Name):
    raise _Malformed("call target is not a (dotted) name")
  parts.append(node.id)
  return ".".join(reversed(parts))


def _number(value: Any) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def _literal(node: ast.AST) -> Any:
  """The value of one argument expression by the module's rules (see the module docstring)."""
  if isinstance(node, ast.Constant):
    return "..." if node.value is Ellipsis else node.value
  if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
    operand = _literal(node.operand)
    if not _number(operand):
      raise _Malformed("unary sign on a non-number")
    return -operand if isinstance(node.op, ast.USub) else operand
  if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC_OPS:
    left, right = _literal(node.left), _literal(node.right)
    if not (_number(left) and _number(right)):
      return ast.unparse(node)
    if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
      raise _Malformed("exponent too large")
    try:
      result = ARITHMETIC_OPS[type(node.op)](left, right)
    except (ArithmeticError, ValueError):
      raise _Malformed("arithmetic error") from None
    if isinstance(result, complex) or (isinstance(result, float) and not math.isfinite(result)):
      raise _Malformed("non-finite arithmetic")
    return result
  if isinstance(node, ast.List):
    return [_literal(e) for e in node.elts]
  if isinstance(node, ast.Tuple):
    return tuple(_literal(e) for e in node.elts)
  if isinstance(node, ast.Set):
    return [_literal(e) for e in node.elts]
  if isinstance(node, ast.Dict):
    if any(k is None for k in node.keys):
      raise _Malformed("dict unpacking")
    out = {}
    for k, v in zip(node.keys, node.values):
      key = _literal(k)
      if isinstance(key, (list, dict)):
        raise _Malformed("unhashable dict key")
      out[key] = _literal(v)
    return out
  if isinstance(node, ast.Name):
    return node.id
  if isinstance(node, ast.Starred):
    raise _Malformed("starred argument")
  return ast.unparse(node)


def _call(node: ast.AST) -> ToolCall:
  if not isinstance(node, ast.Call):
    raise _Malformed("element is not a call")
  arguments: dict[str, Any] = {}
  for kw in node.keywords:
    if kw.arg is None:
      raise _Malformed("**kwargs")
    if kw.arg in arguments:
      raise _Malformed(f"repeated keyword {kw.arg}")
    arguments[kw.arg] = _literal(kw.value)
  return ToolCall(_dotted_name(node.func), arguments, tuple(_literal(a) for a in node.args))


def strip_code_fence(text: str) -> str:
  """The inside of a markdown code fence (```lang ... ```) wrapping the whole text, else the text; stripped."""
  text = text.strip()
  match = _FENCE.match(text)
  return match.group(1).strip() if match else text


def parse_python_calls(text: str) -> list[ToolCall]:
  """Calls written as a Python list of calls, `[f(a=1), g()]` (a lone call, or no brackets, also reads).

  `<think>` spans and a surrounding markdown code fence are removed first; then, as BFCL's decoder does, stray
  backticks and whitespace are stripped and the list brackets added when missing. Anything else in the text makes it
  malformed: [] is returned.
  """
  if not isinstance(text, str) or len(text) > _MAX_TEXT:
    return []
  body = strip_code_fence(strip_reasoning(text)).strip("`\n ")
  if not body:
    return []
  if not body.startswith("["):
    body = "[" + body
  if not body.endswith("]"):
    body = body + "]"
  try:
    tree = ast.parse(body, mode="eval").body
    elements = tree.elts if isinstance(tree, (ast.List, ast.Tuple)) else [tree]
    return [_call(e) for e in elements]
  except (_Malformed, SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
    return []


def _value_source(value: Any) -> str:
  if isinstance(value, float) and not math.isfinite(value):
    raise ValueError(f"cannot render non-finite float {value!r} as a Python literal")
  if isinstance(value, dict):
    return "{" + ", ".join(f"{_value_source(k)}: {_value_source(v)}" for k, v in value.items()) + "}"
  if isinstance(value, list):
    return "[" + ", ".join(_value_source(v) for v in value) + "]"
  if isinstance(value, tuple):
    return "(" + ", ".join(_value_source(v) for v in value) + ("," if len(value) == 1 else "") + ")"
  if value is None or isinstance(value, (bool, int, float, str)):
    return repr(value)
  raise ValueError(f"cannot render {type(value).__name__} value {value!r} as a Python literal")


def format_python_call(call: ToolCall) -> str:
  """`name(p1, k=v, ...)` with Python literals (positional arguments first)."""
  args = [_value_source(v) for v in call.positional]
  args += [f"{k}={_value_source(v)}" for k, v in call.arguments.items()]
  return f"{call.name}({', '.join(args)})"


def format_python_calls(calls: Iterable[ToolCall]) -> str:
  """`[f(a=1), g(b='x')]`, BFCL's prompting output format."""
  return "[" + ", ".join(format_python_call(c) for c in calls) + "]"


# ------------------------------------------------------------------------------------------------ API-Bank requests


def _request_value(raw: str) -> Any:
  raw = raw.strip()
  quoted = unquote(raw)
  if quoted is not None:
    return quoted
  if raw[:1] in "[{":
    try:
      return safe_literal_eval(raw)
    except ValueError:
      return raw
  return raw


def _request_arguments(body: str) -> dict[str, Any]:
  """`k='v', k2=bare text, k3=[1, 2]` -> dict (see `keyword_pieces` and `_request_value`)."""
  return {key: _request_value(raw) for key, raw in keyword_pieces(body)}


def _request_segment(text: str) -> str:
  """The calls of one request: inside its leading `[...]` (text after the `]` ignored), else the whole text."""
  text = text.strip()
  if not text.startswith("["):
    return text
  end = bracket_end(text)
  return text[1:end] if end > 0 else text[1:]


def _request_calls(segment: str) -> list[ToolCall]:
  calls = []
  for piece in split_top_level(segment):
    match = _REQUEST_CALL.match(piece)
    if match is None:
      raise ValueError(f"not a call: {piece!r}")
    calls.append(ToolCall(match.group(1), _request_arguments(match.group(2))))
  return calls


def parse_api_request(text: str) -> list[ToolCall]:
  """The calls of `API-Request: [Name(k='v'), ...]` lines; without any such line, the whole text as one request."""
  if not isinstance(text, str) or len(text) > _MAX_TEXT:
    return []
  text = strip_reasoning(text)
  segments = [_request_segment(m.group(1)) for m in map(_API_REQUEST.search, text.splitlines()) if m]
  if not segments:
    segments = [_request_segment(strip_code_fence(text))]
  try:
    return [call for segment in segments for call in _request_calls(segment)]
  except ValueError:
    return []


def format_api_request(calls: Iterable[ToolCall]) -> str:
  """`API-Request: [Name(k='v', k2='v2')]`, one line per call (API-Bank's output format)."""
  lines = []
  for call in calls:
    args = ", ".join(f"{k}={_value_source(v)}" for k, v in call.arguments.items())
    lines.append(f"API-Request: [{call.name}({args})]")
  return "\n".join(lines)
