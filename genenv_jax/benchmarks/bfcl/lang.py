"""BFCL's Java and JavaScript categories: calls whose argument values are source text, converted by declared type.

Rules (BFCL `bfcl_eval/eval_checker/ast_eval/type_convertor/{java,js}_type_converter.py`, `constants/type_mappings.py`
and the java/js parsers in `model_handler/parser/`; facts re-implemented here, not copied):

* The prompt tells the model every Java/JS parameter is "in string representation", so each argument value is the
  source text of a Java/JS expression, `f(id="42L", ids="new long[]{1L, 2L}", name="abc")` (a bare source value,
  `f(flag=true)`, reads the same: `parse_source_calls` keeps each value's text and only drops the quotes of a value
  that is one whole string literal). A value that is not a string is a type error.
* The text is converted by the parameter's declared type. Java: byte/short/integer `-?\\d+` -> int; long `-?\\d+L` ->
  int; float `...f` -> float; double (no suffix) -> float; boolean `true|false`; String/any/char -> the text;
  Array `new T[]{...}`, ArrayList `new ArrayList<>(Arrays.asList(...))` or `new ArrayList<>() {{ add(x); }}` -> list;
  HashMap `new HashMap<>() {{ put("k", v); }}` -> dict. JavaScript: String (quotes stripped), integer, float
  `-?\\d+(\\.\\d+)?`, Bigint `...n`, Boolean, array and dict (object) literals. Text that does not fit its type stays a
  string, so the checker then reports a type error unless the gold itself is that string (a variable name).
* Collection elements are converted by the declared item type; elements whose item type is missing or `any` are read
  as literals (quoted -> string, true/false, numbers, else the raw text). Departures from the upstream converters,
  where those are buggy: string elements of `new String[]{...}` lose their quotes (upstream keeps them, so no output
  could match), `any` elements are read as literals (upstream keeps their text, so `[42, true]` golds could not
  match), a `char` loses its single quotes, and commas inside string elements do not split them.

`java_source` / `js_source` render a gold value back to source text that converts to it (the oracle agent's output).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from genenv_jax.benchmarks.bfcl.convert import (  # one declaration of the types and literal forms, both modes
  INT,
  JAVA_DOUBLE,
  JAVA_FLOAT,
  JAVA_LONG,
  JS_BIGINT,
  JS_FLOAT,
)
from genenv_jax.benchmarks.parsing.source_scan import keyword_pieces, split_top_level, top_level_indices, unquote
from genenv_jax.benchmarks.parsing.tool_calls import ToolCall, strip_code_fence, strip_reasoning

JAVA_ARRAY_ELEMENT = {
  "String": "String",
  "char": "char",
  "integer": "int",
  "long": "long",
  "boolean": "boolean",
  "float": "float",
  "double": "double",
  "byte": "byte",
  "short": "short",
}

_CALL = re.compile(r"^\s*([A-Za-z_$][\w.$]*)\s*\((.*)\)\s*$", re.DOTALL)
_NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_JAVA_ARRAY = re.compile(r"^new\s+[\w.$<>]+\s*\[\s*\]\s*\{(.*)\}$", re.DOTALL)
_JAVA_AS_LIST = re.compile(r"^(?:Arrays\.asList|List\.of)\s*\((.*)\)$", re.DOTALL)
_JAVA_NEW_AS_LIST = re.compile(
  r"^new\s+ArrayList\s*(?:<[^()]*>)?\s*\(\s*(?:Arrays\.asList|List\.of)\s*\((.*)\)\s*\)$", re.DOTALL
)
_JAVA_NEW_EMPTY = re.compile(r"^new\s+(?:ArrayList|HashMap)\s*(?:<[^()]*>)?\s*\(\s*\)$")
_JAVA_INIT_BLOCK = re.compile(
  r"^new\s+(?:ArrayList|HashMap)\s*(?:<[^()]*>)?\s*\(\s*\)\s*\{\s*\{(.*)\}\s*\}$", re.DOTALL
)
_STATEMENT = re.compile(r"^\s*(add|put)\s*\((.*)\)\s*$", re.DOTALL)


# ------------------------------------------------------------------------------------------------ parsing


def parse_source_calls(text: str) -> list[ToolCall]:
  """`[Cls.method(k=<source>, ...), ...]` -> calls whose values are source text; malformed -> [] (never raises)."""
  if not isinstance(text, str) or len(text) > 200_000:
    return []
  body = strip_code_fence(strip_reasoning(text)).strip("`\n ")
  if body.startswith("[") and body.endswith("]"):
    body = body[1:-1]
  if not body.strip():
    return []
  try:
    calls = []
    for piece in split_top_level(body):
      match = _CALL.match(piece)
      if match is None:
        return []
      arguments = {}
      for key, raw in keyword_pieces(match.group(2)):
        quoted = unquote(raw)
        arguments[key] = quoted if quoted is not None else raw
      calls.append(ToolCall(match.group(1), arguments))
    return calls
  except ValueError:
    return []


def _literal(text: str) -> Any:
  """A Java/JS literal by its own form: quoted -> str, true/false, null, number (Java L/f suffixes), else raw text."""
  text = text.strip()
  quoted = unquote(text)
  if quoted is not None:
    return quoted
  if text in ("true", "false"):
    return text == "true"
  if text in ("null", "undefined"):
    return None
  if JAVA_LONG.fullmatch(text) or JS_BIGINT.fullmatch(text):
    return int(text[:-1])
  if JAVA_FLOAT.fullmatch(text):
    return float(text[:-1])
  if INT.fullmatch(text):
    return int(text)
  if _NUMBER.fullmatch(text):
    return float(text)
  return text


def _elements(inner: str) -> list[str]:
  return [e for e in split_top_level(inner) if e.strip()]


# ------------------------------------------------------------------------------------------------ Java


def _java_element(text: str, item_type: str | None) -> Any:
  if item_type in (None, "any", "Object"):
    return _literal(text)
  if item_type in ("String", "char"):
    quoted = unquote(text)
    return quoted if quoted is not None else text.strip()
  return to_java(text, item_type)


def _java_statements(block: str, verb: str) -> list[str]:
  args = []
  for statement in split_top_level(block, sep=";"):
    if not statement.strip():
      continue
    match = _STATEMENT.match(statement)
    if match is None or match.group(1) != verb:
      raise ValueError(f"unexpected statement {statement!r}")
    args.append(match.group(2))
  return args


def to_java(text: Any, java_type: str, item_type: str | None = None) -> Any:
  """The value a Java source text stands for under its declared type; text that does not fit stays a string."""
  if not isinstance(text, str):
    return text
  t = text.strip()
  try:
    if java_type in ("byte", "short", "integer"):
      return int(t) if INT.fullmatch(t) else t
    if java_type == "long":
      return int(t[:-1]) if JAVA_LONG.fullmatch(t) else t
    if java_type == "float":
      return float(t[:-1]) if JAVA_FLOAT.fullmatch(t) else t
    if java_type == "double":
      return float(t) if JAVA_DOUBLE.fullmatch(t) else t
    if java_type == "boolean":
      return t == "true" if t in ("true", "false") else t
    if java_type == "char":
      quoted = unquote(t)
      return quoted if quoted is not None and t[0] == "'" else t
    if java_type == "Array":
      match = _JAVA_ARRAY.match(t)
      return [_java_element(e, item_type) for e in _elements(match.group(1))] if match else t
    if java_type == "ArrayList":
      if _JAVA_NEW_EMPTY.match(t):
        return []
      match = _JAVA_NEW_AS_LIST.match(t) or _JAVA_AS_LIST.match(t)
      if match:
        return [_java_element(e, item_type) for e in _elements(match.group(1))]
      match = _JAVA_INIT_BLOCK.match(t)
      return [_java_element(a, item_type) for a in _java_statements(match.group(1), "add")] if match else t
    if java_type == "HashMap":
      if _JAVA_NEW_EMPTY.match(t):
        return {}
      match = _JAVA_INIT_BLOCK.match(t)
      if not match:
        return t
      out = {}
      for args in _java_statements(match.group(1), "put"):
        pair = split_top_level(args)
        if len(pair) != 2:
          raise ValueError(f"put() takes 2 arguments: {args!r}")
        out[_literal(pair[0])] = _literal(pair[1])
      return out
  except ValueError:
    return t
  return t


def _decimal(value: float) -> str:
  text = repr(float(value))
  if "e" in text or "E" in text:
    text = f"{float(value):.20f}".rstrip("0")
    text = text + "0" if text.endswith(".") else text
  return text


def _java_literal_source(value: Any) -> str:
  if isinstance(value, bool):
    return "true" if value else "false"
  if isinstance(value, str):
    return json.dumps(value, ensure_ascii=False)
  if isinstance(value, float):
    return _decimal(value)
  if isinstance(value, int):
    return str(value)
  if value is None:
    return "null"
  raise ValueError(f"no Java literal for {type(value).__name__} value {value!r}")


def _java_element_source(value: Any, item_type: str | None) -> str:
  if item_type in (None, "any", "Object", "String"):
    return _java_literal_source(value)
  if item_type == "char":
    return "'" + str(value) + "'"
  return java_source(value, item_type)


def java_source(value: Any, java_type: str, item_type: str | None = None) -> str:
  """Java source text that `to_java(text, java_type, item_type)` reads back as `value` (a string stays as given)."""
  if isinstance(value, str):
    return value
  if isinstance(value, bool):
    return "true" if value else "false"
  if java_type in ("byte", "short", "integer") and isinstance(value, int):
    return str(value)
  if java_type == "long" and isinstance(value, int):
    return f"{value}L"
  if java_type == "float" and isinstance(value, (int, float)):
    return _decimal(value) + "f"
  if java_type == "double" and isinstance(value, (int, float)):
    return _decimal(value)
  if java_type == "Array" and isinstance(value, list):
    element = JAVA_ARRAY_ELEMENT.get(item_type or "", "Object")
    return f"new {element}[]{{" + ", ".join(_java_element_source(v, item_type) for v in value) + "}"
  if java_type == "ArrayList" and isinstance(value, list):
    if not value:
      return "new ArrayList<>()"
    return "new ArrayList<>(Arrays.asList(" + ", ".join(_java_element_source(v, item_type) for v in value) + "))"
  if java_type == "HashMap" and isinstance(value, dict):
    puts = " ".join(f"put({_java_literal_source(k)}, {_java_literal_source(v)});" for k, v in value.items())
    return "new HashMap<String, Object>() {{ " + puts + " }}" if puts else "new HashMap<>()"
  return _java_literal_source(value)


# ------------------------------------------------------------------------------------------------ JavaScript


def _js_value(text: str) -> Any:
  """A JS literal: strings, numbers, true/false/null, `[...]`, `new Array(...)`, `{k: v}`; other text stays raw."""
  t = text.strip()
  if t.startswith("[") and t.endswith("]"):
    return [_js_value(e) for e in _elements(t[1:-1])]
  if t.startswith("new Array(") and t.endswith(")"):
    return [_js_value(e) for e in _elements(t[len("new Array(") : -1])]
  if t.startswith("{") and t.endswith("}"):
    out = {}
    for entry in _elements(t[1:-1]):
      colons = top_level_indices(entry, sep=":")
      if not colons:
        raise ValueError(f"object entry without ':' in {entry!r}")
      key = entry[: colons[0]].strip()
      quoted = unquote(key)
      out[quoted if quoted is not None else key] = _js_value(entry[colons[0] + 1 :])
    return out
  return _literal(t)


def _js_coerce(value: Any, item_type: str | None) -> Any:
  if item_type == "float" and isinstance(value, int) and not isinstance(value, bool):
    return float(value)
  return value


def to_js(text: Any, js_type: str, item_type: str | None = None) -> Any:
  """The value a JavaScript source text stands for under its declared type; text that does not fit stays a string."""
  if not isinstance(text, str):
    return text
  t = text.strip()
  if js_type == "String":
    quoted = unquote(t)
    return quoted if quoted is not None else t
  if js_type == "integer":
    return int(t) if INT.fullmatch(t) else t
  if js_type == "float":
    return float(t) if JS_FLOAT.fullmatch(t) else t
  if js_type == "Bigint":
    return int(t[:-1]) if JS_BIGINT.fullmatch(t) else t
  if js_type == "Boolean":
    return t == "true" if t in ("true", "false") else t
  if js_type in ("array", "dict"):
    try:
      value = _js_value(t)
    except ValueError:
      return t
    if js_type == "array" and isinstance(value, list):
      return [_js_coerce(v, item_type) for v in value]
    if js_type == "dict" and isinstance(value, dict):
      return value
  return t


def _js_literal_source(value: Any) -> str:
  if isinstance(value, list):
    return "[" + ", ".join(_js_literal_source(v) for v in value) + "]"
  if isinstance(value, dict):
    return "{" + ", ".join(f"{json.dumps(str(k))}: {_js_literal_source(v)}" for k, v in value.items()) + "}"
  if isinstance(value, float) and not math.isfinite(value):
    raise ValueError(f"no JavaScript literal for {value!r}")
  return _java_literal_source(value)


def js_source(value: Any, js_type: str, item_type: str | None = None) -> str:
  """JavaScript source text that `to_js(text, js_type, item_type)` reads back as `value` (a string stays as given)."""
  if isinstance(value, str):
    return value
  if js_type == "Bigint" and isinstance(value, int) and not isinstance(value, bool):
    return f"{value}n"
  if js_type == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
    return _decimal(value)
  return _js_literal_source(value)
