"""BFCL's official verdicts, reproduced: the default scoring mode of `bfcl.evaluator.BfclBenchmark` ("official").

The leaderboard's numbers come from bfcl-eval (2026.3.23): the prompting decoder `default_decode_ast_prompting` and
`ast_checker` for the AST categories, and "did the decoder find a call" for (ir)relevance
(`eval_checker/eval_runner.py`). This module re-implements those rules, quirks included, so that a BFCL number from this
project means what the leaderboard's does (the lenient decoder of `bfcl.evaluator.decode` + `bfcl.checker` is the other
mode, for training rewards). Facts re-implemented, no code copied. Agreement with the bfcl-eval package itself is
measured by `genenv_jax.scripts.bfcl_agreement`.

Decoding (`decode`): the output is stripped of backquotes, spaces and newlines at both ends, "[" and "]" are added
when missing; nothing else is removed (a `<think>` prefix, a fenced block with a language tag, a `<tool_call>` JSON
block or prose fail to decode). Python: the text, stripped of outer whitespace and single quotes, must parse as one
call or a list/tuple/set of calls. A call is `{name: {keyword: value}}`: the dotted name, keyword arguments only
(positional ones are dropped). Values: constants; a unary operator on a constant is its negation (`+1` reads -1);
lists, tuples, dicts; a bare name is its identifier; a call without keywords is its source text, with keywords a
nested `{name: {...}}`; a subscript its source text; arithmetic on literals is evaluated (here within size limits);
anything else (sets, attributes, comparisons, lambdas, ...) fails to decode. Java/JavaScript: `bfcl.source`, on the
tree-sitter grammars upstream uses. Bounds that upstream lacks, so that any output scores in linear time: text over
MAX_TEXT characters (far past any generation budget), Java/JavaScript parse trees deeper than `bfcl.source.MAX_DEPTH`,
and arithmetic whose result would pass _MAX_SIZE digits or elements do not decode (score 0); Python's parser itself
rejects nesting past its own limit.

Checking (`check`), by category name: "parallel" matches the calls to the answers greedily in answer order (each
answer takes the first unused call that passes); else "multiple" needs one call, checked against the answer's
function; else one call against the first function doc. One call against `{name: {param: [allowed]}}`: the name must
match; every required parameter given; every given parameter in the doc and the answer; the value converted (Java/JS:
from source text by declared type, `bfcl.convert`; Python: a tuple becomes a list for "tuple", an int a float for
"float" at the top level only) and type-checked (the doc's type, or the answer's own type, then compared exactly as
a "variable"); array elements type-checked one level deep, which passes whenever an allowed value is not a list (so
"" among them skips it); then strings compared after standardisation (no spaces or `,./-_*^`, lower case, ' as "),
lists element-wise (string elements standardised) where "" counts as the empty list (an empty list is accepted for an
optional list), dicts key by key, lists of dicts in order; other values by `in`; and every answer parameter not
given must allow "". Where bfcl-eval raises (an unknown declared type, a missing `items` type, a Set/Queue value),
the item scores 0, with the error named.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from typing import Any, Callable, Mapping, Sequence

from genenv_jax.benchmarks.bfcl import convert
from genenv_jax.benchmarks.bfcl.checker import PYTHON_TYPES  # BFCL's declared type names -> Python types
from genenv_jax.benchmarks.bfcl.source import SourceSyntaxError, parse_java, parse_js
from genenv_jax.benchmarks.parsing.tool_calls import ARITHMETIC_OPS

MAX_TEXT = 200_000
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")
_BIN_OPS: dict[type, Callable[[Any, Any], Any]] = {
  **ARITHMETIC_OPS,
  ast.LShift: operator.lshift,
  ast.RShift: operator.rshift,
  ast.BitOr: operator.or_,
  ast.BitXor: operator.xor,
  ast.BitAnd: operator.and_,
  ast.MatMult: operator.matmul,
}
_UNARY_OPS: dict[type, Callable[[Any], Any]] = {
  ast.USub: operator.neg,
  ast.UAdd: operator.pos,
  ast.Not: operator.not_,
  ast.Invert: operator.invert,
}
_MAX_SIZE = 1_000_000  # elements / digits an evaluated expression may produce


class DecodeError(ValueError):
  """The output is not call text for the official decoder."""


class OfficialCrash(Exception):
  """bfcl-eval raises on this input (upstream the run stops; here the item scores 0)."""


# ------------------------------------------------------------------------------------------------ decoding


def prompting_text(output: str) -> str:
  """The decoder's pre-processing: strip "`", "\\n" and " " at both ends, add "[" / "]" when missing."""
  text = output.strip("`\n ")
  if not text.startswith("["):
    text = "[" + text
  if not text.endswith("]"):
    text = text + "]"
  return text


def _dotted(func: ast.AST) -> str:
  parts = []
  while isinstance(func, ast.Attribute):
    parts.append(func.attr)
    func = func.value
  if isinstance(func, ast.Name):
    parts.append(func.id)
  return ".".join(reversed(parts))


def _call(node: ast.Call) -> dict[str, dict[Any, Any]]:
  arguments: dict[Any, Any] = {}
  for keyword in node.keywords:
    arguments[keyword.arg] = _value(keyword.value)
  return {_dotted(node.func): arguments}


def _check_size(value: Any) -> Any:
  if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * _MAX_SIZE:
    raise DecodeError("evaluated number too large")
  if isinstance(value, (str, bytes, list, tuple)) and len(value) > _MAX_SIZE:
    raise DecodeError("evaluated value too large")
  return value


def _evaluate(node: ast.AST) -> Any:
  """An arithmetic expression's value, as Python evaluates it, over literals only (names, calls: DecodeError)."""
  if isinstance(node, ast.Constant):
    return node.value
  if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
    items = [_evaluate(e) for e in node.elts]
    return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
  if isinstance(node, ast.Dict):
    if any(k is None for k in node.keys):
      raise DecodeError("dict unpacking")
    return {_evaluate(k): _evaluate(v) for k, v in zip(node.keys, node.values)}
  if isinstance(node, ast.UnaryOp):
    return _check_size(_UNARY_OPS[type(node.op)](_evaluate(node.operand)))
  if isinstance(node, ast.BinOp):
    left, right = _evaluate(node.left), _evaluate(node.right)
    op = type(node.op)
    if (
      op is ast.Pow
      and isinstance(left, (int, float))
      and isinstance(right, int)
      and right > 0
      and math.log2(abs(left) + 2) * right > 4 * _MAX_SIZE
    ):
      raise DecodeError("power too large")
    if op is ast.LShift and isinstance(right, int) and right > 4 * _MAX_SIZE:
      raise DecodeError("shift too large")
    if op is ast.Mult:
      for seq, count in ((left, right), (right, left)):
        if isinstance(seq, (str, bytes, list, tuple)) and isinstance(count, int) and len(seq) * count > _MAX_SIZE:
          raise DecodeError("repetition too large")
    return _check_size(_BIN_OPS[op](left, right))
  raise DecodeError(f"cannot evaluate {type(node).__name__}")


def _value(node: ast.AST) -> Any:
  """One argument value by the decoder's rules (module docstring)."""
  if isinstance(node, ast.Constant):
    return "..." if node.value is Ellipsis else node.value
  if isinstance(node, ast.UnaryOp):
    operand = node.operand
    if not isinstance(operand, ast.Constant):
      raise DecodeError("unary operator on a non-constant")
    return -operand.value  # TypeError for strings and None: caught by `decode_python`
  if isinstance(node, ast.List):
    return [_value(e) for e in node.elts]
  if isinstance(node, ast.Dict):
    if any(k is None for k in node.keys):
      raise DecodeError("dict unpacking")
    return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
  if isinstance(node, ast.BinOp):
    return _evaluate(node)
  if isinstance(node, ast.Name):
    return node.id
  if isinstance(node, ast.Call):
    return _call(node) if node.keywords else ast.unparse(node)
  if isinstance(node, ast.Tuple):
    return tuple(_value(e) for e in node.elts)
  if isinstance(node, ast.Subscript):
    return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
  raise DecodeError(f"unsupported value {type(node).__name__}")


def decode_python(text: str) -> list[dict[str, dict[Any, Any]]]:
  """Python call text (after `prompting_text`) -> `[{name: {keyword: value}}]`; DecodeError when it does not decode."""
  cleaned = text.strip().strip("'")
  if len(cleaned) > MAX_TEXT:
    raise DecodeError(f"output of {len(cleaned)} characters is over the {MAX_TEXT} limit")
  try:
    body = ast.parse(cleaned, mode="eval").body
    if isinstance(body, ast.Call):
      return [_call(body)]
    if not isinstance(body, (ast.List, ast.Tuple, ast.Set)):
      raise DecodeError(f"{type(body).__name__} is not a list of calls")
    if not all(isinstance(e, ast.Call) for e in body.elts):
      raise DecodeError("an element is not a call")
    return [_call(e) for e in body.elts]
  except (SyntaxError, ValueError, TypeError, ArithmeticError, MemoryError, RecursionError, KeyError) as e:
    if isinstance(e, DecodeError):
      raise
    raise DecodeError(f"{type(e).__name__}: {e}") from None


def decode(output: str, language: str = "python") -> Any:
  """The official prompting decoder's result for `output` in `language` (python, java, javascript).

  Returns what upstream returns (a list of `{name: {param: value}}`, or for Java/JS possibly {} / None when no call is
  found); raises DecodeError where upstream raises.
  """
  if not isinstance(output, str):
    raise DecodeError(f"output is {type(output).__name__}, not str")
  text = prompting_text(output)
  if language == "python":
    return decode_python(text)
  try:
    return parse_java(text[1:-1]) if language == "java" else parse_js(text[1:-1])
  except SourceSyntaxError as e:
    raise DecodeError(str(e)) from None
  except RecursionError:  # a guard only: source.MAX_DEPTH keeps its walks below the stack limit
    raise DecodeError("source nests too deeply") from None


def is_call_list(decoded: Any) -> bool:
  """Upstream's format check: a list of one-key dicts whose value is a dict (`[]` passes)."""
  return isinstance(decoded, list) and all(
    type(item) is dict and len(item) == 1 and type(next(iter(item.values()))) is dict for item in decoded
  )


def makes_call(output: str) -> bool:
  """The (ir)relevance rule: the output decodes (as Python) to a non-empty call list that is not `[{}]`."""
  try:
    decoded = decode(output, "python")
  except DecodeError:
    return False
  return is_call_list(decoded) and len(decoded) > 0 and not (len(decoded) == 1 and len(decoded[0]) == 0)


# ------------------------------------------------------------------------------------------------ checking


def standardize(text: str) -> str:
  """Upstream's string standardisation: drop spaces and `,./-_*^`, lower case, ' -> "."""
  return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def _std(value: Any) -> Any:
  return standardize(value) if type(value) is str else value


def _answer_type(allowed: Sequence[Any]) -> type | None:
  return next((type(a) for a in allowed if a != ""), None)


def type_ok(value: Any, allowed: Sequence[Any], expected: type, nested: type | None) -> tuple[bool, bool]:
  """(passes, is_variable): the type rule of the module docstring for one value against its allowed values."""
  answer_type = _answer_type(allowed)
  is_variable = answer_type is not None and answer_type is not expected
  if type(value) is expected:
    if nested is None:
      return True, is_variable
    for option in allowed:
      if type(option) is not list or all(type_ok(v, option, nested, None)[0] for v in value):
        return True, is_variable
    return False, is_variable
  if answer_type is not None and type(value) is answer_type:
    return True, True
  return False, is_variable


def _options(allowed: Any) -> list[Any]:
  """Upstream's list-value options: each allowed value's elements (a string's characters; "" -> [])."""
  out = []
  for option in allowed:
    if isinstance(option, (str, list)):
      out.append([_std(e) for e in option])
    elif isinstance(option, dict):
      try:
        out.append([_std(option[j]) for j in range(len(option))])
      except KeyError as e:
        raise OfficialCrash(f"KeyError {e} in a list answer") from None
    else:
      raise OfficialCrash(f"TypeError: allowed list value {option!r} has no length")
  return out


def dict_ok(value: Mapping[Any, Any], allowed: Sequence[Any]) -> bool:
  """A dict value against allowed dicts of allowed-value lists (upstream's `dict_checker`)."""
  try:
    for option in allowed:
      if option == "":
        continue
      good = True
      for key, item in value.items():
        if key not in option or _std(item) not in [_std(a) for a in option[key]]:
          good = False
          break
      if good and all(key in value or "" in options for key, options in option.items()):
        return True
    return False
  except (TypeError, AttributeError) as e:
    raise OfficialCrash(f"{type(e).__name__} in a dict answer: {e}") from None


def list_of_dicts_ok(value: Sequence[Any], allowed: Sequence[Any]) -> bool:
  """A list of dicts against allowed lists of allowed dicts, in order (upstream's `list_dict_checker`)."""
  try:
    for option in allowed:
      if len(value) != len(option):
        continue
      if all(dict_ok(v, [o]) for v, o in zip(value, option)):
        return True
    return False
  except (TypeError, AttributeError) as e:
    raise OfficialCrash(f"{type(e).__name__} in a list-of-dicts answer: {e}") from None


def _convert(value: Any, prop: Mapping[str, Any], language: str) -> tuple[Any, type, type | None, str | None]:
  """(value, expected type, nested type, error) after the language's conversion; OfficialCrash where upstream raises."""
  try:
    kind = prop["type"]
    if language == "python":
      expected = PYTHON_TYPES[kind]
      nested = PYTHON_TYPES[prop["items"]["type"]] if kind in ("array", "tuple") else None
    else:
      table = convert.JAVA_TYPES if language == "java" else convert.JS_TYPES
      expected = table[kind]
      if type(value) is not str:
        return value, expected, None, f"expected the {language} source text as a string, got {value!r}"
      nested = None
      if kind in ("Array", "ArrayList", "array"):
        item = prop["items"]["type"]
        nested = table[item]
        value = convert.convert(value, kind, language, item)
      else:
        value = convert.convert(value, kind, language)
  except (KeyError, TypeError, NotImplementedError, ValueError) as e:
    raise OfficialCrash(f"{type(e).__name__}: {e}") from None
  if kind == "tuple" and type(value) is tuple:
    value = list(value)
  if language == "python" and kind == "float" and type(value) is int:
    value = float(value)
  return value, expected, nested, None


def check_call(
  doc: Mapping[str, Any] | None, call: Mapping[Any, Any], answer: Mapping[str, Any], language: str
) -> str | None:
  """One decoded call `{name: {param: value}}` against one possible answer; None when it passes, else the reason."""
  if doc is None:
    raise OfficialCrash("the answer's function has no doc (TypeError upstream)")
  allowed_by_param = next(iter(answer.values()))
  try:
    name, props, required = doc["name"], doc["parameters"]["properties"], doc["parameters"]["required"]
  except (KeyError, TypeError) as e:
    raise OfficialCrash(f"function doc lacks {e}") from None
  if name not in call:
    return f"function {name!r} not in the output"
  params = call[name]
  for param in required:
    if param not in params:
      return f"missing required parameter {param!r}"
  for param, value in params.items():
    if param not in props or param not in allowed_by_param:
      return f"unexpected parameter {param!r}"
    allowed = allowed_by_param[param]
    value, expected, nested, error = _convert(value, props[param], language)
    if error:
      return error
    passes, is_variable = type_ok(value, allowed, expected, nested)
    if not passes:
      return f"wrong type for {param!r}: {value!r}"
    if not is_variable:
      if expected is dict:
        ok = dict_ok(value, allowed)
      elif expected is list and nested is dict:
        ok = list_of_dicts_ok(value, allowed)
      elif expected is str:
        ok = standardize(value) in [standardize(a) for a in allowed if type(a) is str]
      elif expected is list:
        ok = [_std(v) for v in value] in _options(allowed)
      else:
        ok = value in allowed
    else:
      ok = value in allowed
    if not ok:
      return f"wrong value for {param!r}: {value!r} not in {list(allowed)!r}"
  for param, options in allowed_by_param.items():
    if param not in params and "" not in options:
      return f"parameter {param!r} not given and not optional"
  return None


def _doc(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
  return next((f for f in functions if f["name"] == name), None)


def check(
  functions: Sequence[Mapping[str, Any]],
  decoded: Sequence[Mapping[Any, Any]],
  answers: Sequence[Any],
  language: str,
  category: str,
) -> str | None:
  """Decoded calls against an AST entry's possible answers by category (module docstring); None when correct."""
  if "parallel" in category:
    if len(decoded) != len(answers):
      return f"wrong number of calls: expected {len(answers)}, got {len(decoded)}"
    used: set[int] = set()
    for g, answer in enumerate(answers):
      doc = _doc(functions, next(iter(answer)))
      error = "no candidate"
      for c, call in enumerate(decoded):
        if c in used:
          continue
        error = check_call(doc, call, answer, language)
        if error is None:
          used.add(c)
          break
      if error is not None:
        return f"no call matches answer {g}: {error}"
    return None
  if "multiple" in category:
    if len(decoded) != len(answers):
      return f"wrong number of calls: expected {len(answers)}, got {len(decoded)}"
    return check_call(_doc(functions, next(iter(answers[0]))), decoded[0], answers[0], language)
  if len(decoded) != 1:
    return f"wrong number of calls: expected 1, got {len(decoded)}"
  return check_call(functions[0], decoded[0], answers[0], language)


def verdict(
  output: str, functions: Sequence[Mapping[str, Any]], answers: Sequence[Any] | None, language: str, category: str
) -> str | None:
  """The official verdict on one output of one BFCL item: None when correct, else the reason (never raises)."""
  if "relevance" in category:
    called = makes_call(output)
    if "irrelevance" in category:
      return "made a call where none applies" if called else None
    return None if called else "made no call"
  try:
    decoded = decode(output, language)
  except DecodeError as e:
    return f"does not decode: {e}"
  if not is_call_list(decoded):
    return "decoded output is not a list of calls"
  try:
    return check(functions, decoded, answers or [], language, category)
  except OfficialCrash as e:
    return f"bfcl-eval raises here ({e}); scored 0"
  except RecursionError:
    return "value nests too deeply to check"
