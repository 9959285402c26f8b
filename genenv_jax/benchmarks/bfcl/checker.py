"""Our AST checker for BFCL: does a list of decoded calls match a category's possible answers?

The rules follow BFCL's `bfcl_eval/eval_checker/ast_eval/ast_checker.py` and the `bfcl_eval/data` README (facts
re-implemented here, not copied). Each check returns None when it passes, else a one-line error.

One call against one possible answer `{func_name: {param: [allowed values]}}` (`check_call`):
1. the call's name is the answer's name, and it has no positional arguments (BFCL's decoder drops them, so they never
   count; we reject the call);
2. every parameter the function doc marks `required` is given;
3. every given parameter is in the doc and in the answer ("unexpected parameter" otherwise);
4. its type matches the doc's: Python `string|any -> str, integer -> int, float -> float (an int is accepted),
   boolean -> bool, array|tuple -> list (a tuple is accepted for tuple), dict -> dict`; other declared types are not
   type-checked; bool is never an int. The elements of an array are checked against `items.type` (an int is
   accepted for float here too, as is any element type that the answer's own elements have). Java/JavaScript values
   are source text, converted first by `bfcl.lang.to_java` / `to_js`. When the answer's values are of another type
   than the doc's (a variable name given for a number), a value of the answer's type is accepted and compared exactly;
5. its value is one of the allowed values: strings are compared after `standardize` (lower case, no spaces or
   `,./-_*^`, single quotes as double quotes); lists element-wise in order (string elements standardised); dicts key
   by key against allowed-value lists, where a missing key needs `""` among its allowed values; numbers by value;
6. every answer parameter that is not given has `""` among its allowed values (optional).

Categories (`check_ast`): names containing "parallel" match all calls to all answers in any order (a one-to-one
assignment: BFCL assigns greedily in answer order, which can only reject more); "multiple" needs exactly one call and
checks it against the answer's function; other (simple) categories need exactly one call.

Multi-turn turns (`check_turn`): the gold is one exact call list per turn. Positional arguments are bound to
parameters in the doc's order (the order of the Python signatures), then the calls must match the gold calls one to
one in any order, each by the rules above with each gold value as the only allowed value. A parameter the gold
leaves out may be given only with the doc's default value, and a gold parameter whose value is the default may be
left out.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

from genenv_jax.benchmarks.bfcl.convert import JAVA_TYPES, JS_TYPES
from genenv_jax.benchmarks.bfcl.lang import to_java, to_js
from genenv_jax.benchmarks.parsing.tool_calls import ToolCall

PYTHON_TYPES: dict[str, type] = {
  "string": str,
  "integer": int,
  "float": float,
  "boolean": bool,
  "array": list,
  "tuple": list,
  "dict": dict,
  "any": str,
}
LANGUAGES = ("python", "java", "javascript")
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")

Answer = Mapping[str, Mapping[str, Sequence[Any]]]


def standardize(text: str) -> str:
  """BFCL string standardisation: drop spaces and `,./-_*^`, lower-case, single quotes -> double quotes."""
  return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def values_equal(a: Any, b: Any) -> bool:
  """Equality where a bool equals only a bool (Python has True == 1) and ints equal floats of the same value."""
  if isinstance(a, bool) or isinstance(b, bool):
    return type(a) is type(b) and a == b
  return a == b


def _as_allowed(value: Any) -> list[Any]:
  return list(value) if isinstance(value, list) else [value]


def match_dict(value: Any, allowed: Mapping[Any, Any]) -> bool:
  """A dict against one allowed dict of allowed-value lists: no unknown key, each value allowed, omissions optional."""
  if not isinstance(value, dict):
    return False
  for key, item in value.items():
    if key not in allowed or not match_allowed(item, _as_allowed(allowed[key])):
      return False
  return all(key in value or "" in _as_allowed(options) for key, options in allowed.items())


def match_one(value: Any, allowed: Any) -> bool:
  """`value` against one allowed value (standardised strings, ordered lists, dicts of allowed-value lists)."""
  if isinstance(allowed, str):
    return isinstance(value, str) and standardize(value) == standardize(allowed)
  if isinstance(allowed, list):
    if not isinstance(value, (list, tuple)) or len(value) != len(allowed):
      return False
    return all(match_dict(v, a) if isinstance(a, dict) else match_one(v, a) for v, a in zip(value, allowed))
  if isinstance(allowed, dict):
    return match_dict(value, allowed)
  return values_equal(value, allowed)


def match_allowed(value: Any, allowed: Sequence[Any]) -> bool:
  return any(match_one(value, a) for a in allowed)


def _gold_type(allowed: Sequence[Any]) -> type | None:
  for a in allowed:
    if a != "":
      return type(a)
  return None


def _elements_ok(value: list, nested: type, allowed: Sequence[Any]) -> bool:
  gold_types = {type(e) for a in allowed if isinstance(a, list) for e in a}
  return all(type(e) is nested or (nested is float and type(e) is int) or type(e) in gold_types for e in value)


def check_value(
  param: str, value: Any, allowed: Sequence[Any], expected: type | None, nested: type | None
) -> str | None:
  """Type rule 4 and value rule 5 of the module docstring for one parameter."""
  gold_type = _gold_type(allowed)
  is_variable = expected is not None and gold_type is not None and gold_type is not expected
  if expected is not None:
    if type(value) is expected:
      if nested is not None and expected is list and not is_variable and not _elements_ok(value, nested, allowed):
        return f"wrong element type in {param!r}: expected {nested.__name__} elements, got {value!r}"
    elif not (is_variable and type(value) is gold_type):
      return f"wrong type for {param!r}: expected {expected.__name__}, got {type(value).__name__} {value!r}"
  if is_variable:
    if not any(values_equal(value, a) for a in allowed):
      return f"wrong value for {param!r}: {value!r} not in {list(allowed)!r}"
    return None
  if not match_allowed(value, allowed):
    return f"wrong value for {param!r}: {value!r} not in {list(allowed)!r}"
  return None


def _item_type(prop: Mapping[str, Any]) -> str | None:
  items = prop.get("items")
  return items.get("type") if isinstance(items, Mapping) else None


def _typed(value: Any, prop: Mapping[str, Any], language: str) -> tuple[Any, type | None, type | None, str | None]:
  """(converted value, expected type, expected element type, error) for one argument by the language's rules."""
  kind, item = prop.get("type"), _item_type(prop)
  if language == "python":
    expected = PYTHON_TYPES.get(kind)
    nested = PYTHON_TYPES.get(item) if kind in ("array", "tuple") and item else None
    if kind == "tuple" and isinstance(value, tuple):
      value = list(value)
    if kind == "float" and type(value) is int:
      value = float(value)
    return value, expected, nested, None
  table, convert = (JAVA_TYPES, to_java) if language == "java" else (JS_TYPES, to_js)
  if not isinstance(value, str):
    return value, None, None, f"expected the {language} source text of a {kind} as a string, got {value!r}"
  expected = table.get(kind)
  nested = table.get(item) if expected is list and item else None
  return convert(value, kind, item), expected, nested, None


def check_call(doc: Mapping[str, Any] | None, call: ToolCall, answer: Answer, language: str = "python") -> str | None:
  """One call against one possible answer `{name: {param: [allowed]}}` (rules 1-6 of the module docstring)."""
  if language not in LANGUAGES:
    raise ValueError(f"unknown BFCL language {language!r}; expected one of {LANGUAGES}")
  ((name, allowed),) = answer.items()
  if doc is None:
    return f"no function doc for {name!r}"
  if call.name != name:
    return f"wrong function: expected {name!r}, got {call.name!r}"
  if call.positional:
    return f"positional arguments are not accepted in {call.name!r}"
  params = doc.get("parameters", {})
  props = params.get("properties", {})
  for param in params.get("required", []):
    if param not in call.arguments:
      return f"missing required parameter {param!r}"
  for param, value in call.arguments.items():
    if param not in props or param not in allowed:
      return f"unexpected parameter {param!r}"
    value, expected, nested, error = _typed(value, props[param], language)
    error = error or check_value(param, value, allowed[param], expected, nested)
    if error:
      return error
  for param, options in allowed.items():
    if param not in call.arguments and "" not in options:
      return f"missing parameter {param!r} (not optional)"
  return None


def _find(docs: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
  return next((d for d in docs if d.get("name") == name), None)


def match_unordered(n_gold: int, calls: Sequence[ToolCall], check: Callable[[int, ToolCall], str | None]) -> str | None:
  """One-to-one assignment of calls to gold entries (augmenting paths); None when every gold gets a passing call."""
  if len(calls) != n_gold:
    return f"wrong number of calls: expected {n_gold}, got {len(calls)}"
  errors: dict[tuple[int, int], str | None] = {
    (g, c): check(g, call) for g in range(n_gold) for c, call in enumerate(calls)
  }
  owner: dict[int, int] = {}

  def assign(g: int, seen: set[int]) -> bool:
    for c in range(len(calls)):
      if errors[(g, c)] is None and c not in seen:
        seen.add(c)
        if c not in owner or assign(owner[c], seen):
          owner[c] = g
          return True
    return False

  for g in range(n_gold):
    if not assign(g, set()):
      reasons = sorted(
        {e for (gg, _), e in errors.items() if gg == g and e}, key=lambda e: (e.startswith("wrong function"), len(e))
      )
      return f"no call matches gold call {g}: {reasons[0] if reasons else 'no candidates'}"
  return None


def check_ast(
  functions: Sequence[Mapping[str, Any]],
  calls: Sequence[ToolCall],
  answers: Sequence[Answer],
  language: str,
  category: str,
) -> str | None:
  """Decoded calls against a BFCL AST entry's possible answers, by category (see the module docstring)."""
  if "parallel" in category:
    return match_unordered(
      len(answers),
      calls,
      lambda g, call: check_call(_find(functions, next(iter(answers[g]))), call, answers[g], language),
    )
  if len(calls) != len(answers) or len(calls) != 1:
    return f"wrong number of calls: expected 1, got {len(calls)}"
  doc = _find(functions, next(iter(answers[0]))) if "multiple" in category else functions[0]
  return check_call(doc, calls[0], answers[0], language)


def bind_positional(call: ToolCall, doc: Mapping[str, Any] | None) -> ToolCall | None:
  """Positional arguments bound to the doc's parameters in order; None if there are too many or they collide."""
  if not call.positional:
    return call
  if doc is None:
    return None
  names = list(doc.get("parameters", {}).get("properties", {}))
  if len(call.positional) > len(names):
    return None
  bound = dict(zip(names, call.positional))
  if any(k in bound for k in call.arguments):
    return None
  return ToolCall(call.name, {**bound, **call.arguments})


def _turn_answer(gold: ToolCall, doc: Mapping[str, Any]) -> Answer:
  """A gold multi-turn call as a possible answer: its value, plus the doc default rules of the module docstring."""
  allowed: dict[str, list[Any]] = {}
  for param, prop in doc.get("parameters", {}).get("properties", {}).items():
    has_default = isinstance(prop, Mapping) and "default" in prop
    if param in gold.arguments:
      value = gold.arguments[param]
      allowed[param] = [value, ""] if has_default and match_one(value, prop["default"]) else [value]
    elif has_default:
      allowed[param] = ["", prop["default"]]
  for param, value in gold.arguments.items():
    allowed.setdefault(param, [value])
  return {gold.name: allowed}


def check_turn(
  docs: Mapping[str, Mapping[str, Any]], calls: Sequence[ToolCall], gold: Sequence[ToolCall]
) -> str | None:
  """One multi-turn turn: calls against the gold calls, order-free, by the module docstring's multi-turn rules."""
  bound_calls = []
  for call in calls:
    bound = bind_positional(call, docs.get(call.name))
    if bound is None:
      return f"cannot bind the positional arguments of {call.name!r}"
    bound_calls.append(bound)
  bound_gold = [bind_positional(g, docs.get(g.name)) for g in gold]
  if any(g is None or g.name not in docs for g in bound_gold):
    raise ValueError(f"gold calls {gold!r} do not fit their function docs")
  answers = [_turn_answer(g, docs[g.name]) for g in bound_gold]
  return match_unordered(
    len(answers), bound_calls, lambda g, call: check_call(docs[bound_gold[g].name], call, answers[g], "python")
  )
