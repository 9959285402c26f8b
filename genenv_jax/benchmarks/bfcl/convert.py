"""Java / JavaScript argument text -> Python values, as BFCL's official checker converts them (`bfcl.official`).

Rules of bfcl-eval 2026.3.23 (`eval_checker/ast_eval/type_convertor/{java,js}_type_converter.py`), re-implemented
with their quirks, no code copied. Text that does not fit its declared type stays the string it was.

Java, by declared type: byte/short/integer `^-?\\d+$` -> int; long `^-?\\d+[lL]$` -> int; float
`^-?\\d+(\\.\\d+)?([eE][+-]?\\d+)?[fF]$` -> float; double (no suffix) -> float; boolean true/false; char and
String/any stay text (upstream's char pattern can never match). Array: the first `new T[]{...}` (up to the first
`}`), its elements split at every comma, each converted by the item type (a String element keeps its quotes).
ArrayList: `new ArrayList<T>(Arrays.asList(...))`, else `new ArrayList<T>() {{ add(..); }}`, else
`new ArrayList<T>()` -> []; elements split at commas, a String or char element loses its first and last character,
others converted by the item type. HashMap: `new HashMap<..>() {{ put("k", v); }}` -> dict (values read as literals),
`new HashMap<..>()` -> {}. Set, Hashtable, Queue and Stack raise NotImplementedError upstream (so here too).

JavaScript: String loses one pair of matching outer quotes; integer `^-?\\d+$`; float `^-?\\d+(\\.\\d+)?$`; Bigint
`^-?\\d+n$`; Boolean true/false; any stays text. array: a 2-D literal `[[..], [..]]` gives the comma-split rows
read as literals; else `[...]` / `new Array(...)` split at commas (elements converted by the item type, quoted ones
as strings); dict: `{k: v, ...}` split at the commas before a `key:`, values read as literals, nested arrays/dicts
recursively. A collection that cannot be read stays text.

Collections longer than MAX_COLLECTION characters stay text (a bound on the regex work; no real answer is near it).
"""

from __future__ import annotations

import re
from typing import Any

JAVA_TYPES: dict[str, type] = {
  "byte": int,
  "short": int,
  "integer": int,
  "float": float,
  "double": float,
  "long": int,
  "boolean": bool,
  "char": str,
  "Array": list,
  "ArrayList": list,
  "Set": set,
  "HashMap": dict,
  "Hashtable": dict,
  "Queue": list,
  "Stack": list,
  "String": str,
  "any": str,
}
JS_TYPES: dict[str, type] = {
  "String": str,
  "integer": int,
  "float": float,
  "Bigint": int,
  "Boolean": bool,
  "dict": dict,
  "array": list,
  "any": str,
}
MAX_COLLECTION = 2_000

# The Java/JavaScript literal forms, upstream's patterns (`^...$` with `re.match`, so "5\n" is an integer); the lenient
# readers of `bfcl.lang` use them too, with `fullmatch` on stripped text.
INT = re.compile(r"^-?\d+$")
JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
JAVA_LONG = re.compile(r"^-?\d+[lL]$")
JS_FLOAT = re.compile(r"^-?\d+(\.\d+)?$")
JS_BIGINT = re.compile(r"^-?\d+n$")
_AS_LIST = re.compile(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)")
_ADD_BLOCK = re.compile(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", re.DOTALL)
_ADD = re.compile(r"add\((.+?)\)")
_EMPTY_LIST = re.compile(r"new\s+ArrayList<\w*>\(\)")
_ARRAY = re.compile(r"new\s+\w+\[\]\s*\{(.*?)\}")
_MAP_BLOCK = re.compile(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", re.DOTALL)
_PUT = re.compile(r"put\(\"(.*?)\",\s*(.*?)\)")
_EMPTY_MAP = re.compile(r"new\s+HashMap<.*?>\s*\(\)")
_JS_2D = re.compile(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)")
_JS_ARRAY = re.compile(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)")
_JS_ROW = re.compile(r"\[(.*?)\]")
_JS_DICT = re.compile(r"\{(.*?)\}")
_JS_PAIR = re.compile(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)")


def _quoted(text: str, quotes: str) -> bool:
  return any(text.startswith(q) and text.endswith(q) for q in quotes)


def _number_or_text(text: str) -> Any:
  try:
    return int(text)
  except ValueError:
    try:
      return float(text)
    except ValueError:
      return text


def java_literal(text: str) -> Any:
  """An untyped Java element: true/false, a "string", a long, an `f` float, else int, float or the text."""
  if text in ("true", "false"):
    return text == "true"
  if _quoted(text, '"'):
    return text[1:-1]
  if JAVA_LONG.match(text):
    return int(text[:-1])
  if JAVA_FLOAT.match(text):
    return float(re.sub(r"[fF]$", "", text))
  return _number_or_text(text)


def _java_element(text: str, item: str | None) -> Any:
  text = text.strip()
  if item in ("char", "String"):
    return text[1:-1]
  return to_java(text, item) if item else java_literal(text)


def to_java(text: str, kind: str, item: str | None = None) -> Any:
  """A Java source text converted by its declared type (module docstring)."""
  if kind not in JAVA_TYPES:
    raise ValueError(f"Unsupported type: {kind}")
  if kind in ("byte", "short", "integer"):
    return int(text) if INT.match(text) else str(text)
  if kind == "float":
    return float(re.sub(r"[fF]$", "", text)) if JAVA_FLOAT.match(text) else str(text)
  if kind == "double":
    return float(text) if JAVA_DOUBLE.match(text) else str(text)
  if kind == "long":
    return int(re.sub(r"[lL]$", "", text)) if JAVA_LONG.match(text) else str(text)
  if kind == "boolean":
    return text == "true" if text in ("true", "false") else str(text)
  if kind in ("Set", "Hashtable", "Queue", "Stack"):
    raise NotImplementedError(f"{kind} conversion is not implemented upstream")
  if kind in ("char", "String", "any"):
    return str(text)
  if len(text) > MAX_COLLECTION:
    return text
  if kind == "Array":
    match = _ARRAY.search(text)
    if not match:
      return text
    parts = [p.strip() for p in match.group(1).split(",") if p.strip()]
    return [to_java(p, item) if item else java_literal(p) for p in parts]
  if kind == "ArrayList":
    match = _AS_LIST.search(text)
    if match:
      return [_java_element(p, item) for p in match.group(1).split(",")]
    match = _ADD_BLOCK.search(text)
    if match:
      return [_java_element(p, item) for p in _ADD.findall(match.group(1))]
    return [] if _EMPTY_LIST.search(text) else text
  match = _MAP_BLOCK.search(text)  # HashMap
  if match:
    body = match.group(1)
    return {k: java_literal(v.strip()) for k, v in _PUT.findall(body)} if body.strip() else {}
  return {} if _EMPTY_MAP.search(text) else text


def js_literal(text: str) -> Any:
  """An untyped JavaScript element: true/false, a quoted string, else int, float or the text."""
  text = text.strip()
  if text in ("true", "false"):
    return text == "true"
  if _quoted(text, "\"'"):
    return text[1:-1]
  return _number_or_text(text)


def _js_array(code: str, item: str | None) -> Any:
  match = _JS_2D.match(code)
  if match:
    rows = []
    for k, row in enumerate(_JS_ROW.findall(match.group(0))):
      row = row.strip()
      if k == 0 and row.startswith("["):
        row = row[1:]
      rows.append([js_literal(e.strip()) for e in row.split(",")])
    return rows
  match = _JS_ARRAY.match(code)
  if not match:
    return code
  inner = match.group(1) if match.group(1) is not None else match.group(2)
  inner = (inner or "").strip()
  parts = inner.split(",") if inner else []
  if item:
    return [to_js(p.strip(), item) for p in parts]
  return [js_literal(p.strip()) for p in parts]


def _js_dict(code: str) -> Any:
  if code == "{}":
    return {}
  match = _JS_DICT.match(code)
  if not match:
    return code
  out = {}
  for key, value in _JS_PAIR.findall(match.group(1)):
    key, value = key.strip().strip("'\""), value.strip()
    if value.startswith("[") and value.endswith("]"):
      out[key] = _js_collection(value, "array")
    elif value.startswith("{") and value.endswith("}"):
      out[key] = _js_collection(value, "dict")
    else:
      out[key] = js_literal(value.strip("'\""))
  return out


def _js_collection(code: str, kind: str, item: str | None = None) -> Any:
  code = code.strip()
  if len(code) > MAX_COLLECTION:
    return code
  try:
    return _js_array(code, item) if kind == "array" else _js_dict(code)
  except Exception:  # noqa: BLE001 - upstream returns the text on any failure here
    return code


def to_js(text: str, kind: str, item: str | None = None) -> Any:
  """A JavaScript source text converted by its declared type (module docstring)."""
  if kind not in JS_TYPES:
    raise ValueError(f"Unsupported type: {kind}")
  if kind == "String":
    return text[1:-1] if _quoted(text, "\"'") else str(text)
  if kind == "integer":
    return int(text) if INT.match(text) else str(text)
  if kind == "float":
    return float(text) if JS_FLOAT.match(text) else str(text)
  if kind == "Bigint":
    return int(text[:-1]) if JS_BIGINT.match(text) else str(text)
  if kind == "Boolean":
    return text == "true" if text in ("true", "false") else str(text)
  if kind in ("dict", "array"):
    return _js_collection(text, kind, item)
  return str(text)


def convert(text: str, kind: str, language: str, item: str | None = None) -> Any:
  """`text` converted by `kind` under the language's rules ("java" or "javascript")."""
  return to_java(text, kind, item) if language == "java" else to_js(text, kind, item)
