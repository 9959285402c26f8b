"""Agreement of our BFCL verdicts with the official checker's (the bfcl-eval package), on three sets of outputs.

For every item of the 13 single-turn BFCL categories, three sets (--sets) of model-like outputs:

* perturb: `perturb` writes outputs from the item's gold calls: the oracle answer and its variants in format
  (`<think>` prefix, code fences, `<tool_call>` JSON, a JSON list, no brackets, one call a line, leading or trailing
  prose, spaces around `=`, JSON-spelled values, empty), in arguments (positional, dropped, extra, wrong values,
  int/float swaps, string case and spacing, tuples, set literals, empty lists, other allowed values, unary signs,
  arithmetic) and in calls (reordered, dropped, duplicated, renamed); for Java/JavaScript also quoting variants of
  the source text.
* malformed (Java/JavaScript items): the oracle calls in each MALFORMED shape, values quoted and bare: doubled list
  brackets, a `{}` block before the list, `,,` between arguments, a leading or trailing comma, `;` or line breaks
  between calls, a missing or extra `)`, an unclosed string, `:` for `=`, empty arguments, one list per call. These
  are where tree-sitter's error recovery decides (issue 34).
* edits: random character edits of the oracle output (`character_edits`: one to three inserts, deletes, replaces or
  swaps), --edits per Python item and --source_edits per Java/JavaScript item (half of those of the oracle calls with
  double-quoted values, the form upstream's Java parser reads).

Each (item, output) pair is scored by `bfcl.official.verdict` (our official mode), by the lenient mode
(`bfcl.evaluator.decode` + `bfcl.checker`) and by bfcl-eval itself: `default_decode_ast_prompting` +
`is_function_calling_format_output` + `ast_checker` for AST categories, and decode + `is_empty_output` for
(ir)relevance, as its per-item evaluation path does. An exception inside bfcl-eval counts as "wrong" (upstream the
evaluation run stops there).

The reference is bfcl-eval itself, installed into a folder of its own (it is not a dependency of this project; the
tree-sitter packages its Java/JavaScript decoder needs are, at the same pins), and imported from there with --reference:
  pip install --no-deps --target /tmp/bfcl_ref bfcl-eval==2026.3.23 tree_sitter==0.21.3 tree-sitter-java==0.21.0 \\
      tree-sitter-javascript==0.21.4 tenacity filelock
(`bfcl_eval.constants.model_config`, which imports every model handler, is replaced by a stub whose models do not
rename dotted functions, as the prompting models' configs say.)

  PYTHONPATH=$PWD python -m genenv_jax.scripts.bfcl_agreement --reference /tmp/bfcl_ref [--data_dir DIR]
      [--limit N] [--categories a,b] [--sets perturb,malformed,edits] [--edits 4] [--source_edits 60] [--seed 0]
      [--show 20] [--output pairs.jsonl]
Prints the agreement of each mode with the reference, overall and per set: per language, per kind, per language and
kind (malformed, edits) and per category (perturb), and the first disagreements of the official mode. Exit status 0
when the official mode agrees on at least --target (0.999) in every set.
"""

from __future__ import annotations

import collections
import contextlib
import json
import pathlib
import random
import sys
import types
import warnings
from typing import Any, Callable, Iterator, Sequence

from absl import flags

from genenv_jax import cli
from genenv_jax.benchmarks.bfcl import checker, evaluator, official
from genenv_jax.benchmarks.parsing.tool_calls import ToolCall, format_json_tool_calls, format_python_calls
from genenv_jax.data import require, resolve_data_dir
from genenv_jax.tasks.benchmark import EvalItem

CATEGORIES = tuple(c for c in evaluator.CATEGORIES if c not in evaluator.MULTI_TURN)
SETS = ("perturb", "malformed", "edits")
INSTALL = (
  "pip install --no-deps --target DIR bfcl-eval==2026.3.23 tree_sitter==0.21.3 tree-sitter-java==0.21.0 "
  "tree-sitter-javascript==0.21.4 tenacity filelock, then pass --reference DIR"
)


# ------------------------------------------------------------------------------------------------ reference


def load_reference(folder: str | None = None) -> Callable[[str, EvalItem], bool]:
  """bfcl-eval's per-item verdict as a function (output, item) -> correct, imported from `folder` (appended to
  sys.path) when given; ImportError naming the install line."""
  if folder:
    if not pathlib.Path(folder, "bfcl_eval").is_dir():
      raise ImportError(f"--reference {folder} holds no bfcl_eval package")
    sys.path.append(str(pathlib.Path(folder).resolve()))
  stub = types.ModuleType("bfcl_eval.constants.model_config")
  stub.MODEL_CONFIG_MAPPING = collections.defaultdict(lambda: types.SimpleNamespace(underscore_to_dot=False))
  sys.modules.setdefault("bfcl_eval.constants.model_config", stub)
  try:
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting
    from bfcl_eval.utils import is_empty_output, is_function_calling_format_output
  except ImportError as e:
    raise ImportError(f"the reference checker is not importable ({e}); install it with: {INSTALL}") from e
  formats = {
    "python": (Language.PYTHON, ReturnFormat.PYTHON),
    "java": (Language.JAVA, ReturnFormat.JAVA),
    "javascript": (Language.JAVASCRIPT, ReturnFormat.JAVASCRIPT),
  }

  def verdict(output: str, item: EvalItem) -> bool:
    category = item.gold["category"]
    if "relevance" in category:
      try:
        decoded = default_decode_ast_prompting(output, ReturnFormat.PYTHON)
        called = not is_empty_output(decoded)
      except Exception:  # noqa: BLE001 - a failed decode is "no call" upstream
        called = False
      return not called if "irrelevance" in category else called
    language, return_format = formats[item.gold["language"]]
    try:
      decoded = default_decode_ast_prompting(output, return_format)
    except Exception:  # noqa: BLE001
      return False
    if not is_function_calling_format_output(decoded):
      return False
    try:
      result = ast_checker(item.gold["functions"], decoded, item.gold["answers"], language, category, "reference")
    except Exception:  # noqa: BLE001 - upstream's run would stop; the item is not correct
      return False
    return bool(result["valid"])

  return verdict


# ------------------------------------------------------------------------------------------------ perturbations


def _render(calls: Sequence[ToolCall]) -> str:
  return format_python_calls(calls)


def _with(call: ToolCall, **changes: Any) -> ToolCall:
  return ToolCall(
    changes.get("name", call.name), changes.get("arguments", call.arguments), changes.get("positional", call.positional)
  )


def _vary_value(value: Any, rng: random.Random) -> list[tuple[str, Any]]:
  """(kind, variant) pairs for one argument value."""
  out: list[tuple[str, Any]] = []
  if isinstance(value, bool):
    out.append(("flip_bool", not value))
  elif isinstance(value, int):
    out += [("int_as_float", float(value)), ("wrong_number", value + 1)]
  elif isinstance(value, float):
    out += [("wrong_number", value + 1.5)]
    if value.is_integer():
      out.append(("float_as_int", int(value)))
  elif isinstance(value, str):
    out += [
      ("string_case", value.upper()),
      ("string_spacing", value.replace(" ", "  ") + "."),
      ("wrong_string", value + "x"),
    ]
    if value:
      out.append(("string_truncated", value[:-1]))
  elif isinstance(value, list):
    out += [("list_as_tuple", tuple(value)), ("empty_list", []), ("list_reversed", value[::-1])]
    if value and all(isinstance(v, float) and v.is_integer() for v in value):
      out.append(("list_floats_as_ints", [int(v) for v in value]))
    if value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
      out.append(("list_ints_as_floats", [float(v) for v in value]))
    if value:
      out.append(("list_dropped", value[:-1]))
  elif isinstance(value, dict) and value:
    key = next(iter(value))
    out += [
      ("dict_key_dropped", {k: v for k, v in value.items() if k != key}),
      ("dict_extra_key", {**value, "extra_key": "x"}),
    ]
    inner = _vary_value(value[key], rng)
    if inner:
      kind, variant = rng.choice(inner)
      out.append((f"dict_{kind}", {**value, key: variant}))
  return out


def _python_variants(calls: list[ToolCall], item: EvalItem, rng: random.Random) -> Iterator[tuple[str, str]]:
  text = _render(calls)
  yield "oracle", text
  yield "think_prefix", "<think>I should call the function.</think>\n" + text
  yield "fence_python", "```python\n" + text + "\n```"
  yield "fence_plain", "```\n" + text + "\n```"
  yield "tool_call_json", format_json_tool_calls(calls)
  yield "no_brackets", text[1:-1]
  yield "quoted", "'" + text + "'"
  yield "trailing_prose", text + "\nThis calls the function."
  yield "set_literal", "{" + text[1:-1] + "}"
  yield "tuple_of_calls", "(" + text[1:-1] + ",)"
  yield "leading_prose", "Sure, here is the call: " + text
  yield "json_list", json.dumps([{c.name: dict(c.arguments)} for c in calls])
  yield "newline_separated", "\n".join(format_python_calls([c]) for c in calls)
  yield "keyword_spaces", text.replace("=", " = ")
  yield (
    "json_values",
    "["
    + ", ".join(f"{c.name}(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in c.arguments.items()) + ")" for c in calls)
    + "]",
  )
  if calls:
    first = calls[0]
    yield "wrong_name", _render([_with(first, name=first.name + "_x")] + calls[1:])
    yield "extra_param", _render([_with(first, arguments={**first.arguments, "unexpected": 1})] + calls[1:])
    yield "duplicated_call", _render(calls + [first])
    if len(calls) > 1:
      yield "reordered", _render(calls[::-1])
      yield "dropped_call", _render(calls[:-1])
    if first.arguments:
      keys = list(first.arguments)
      key = rng.choice(keys)
      rest = {k: v for k, v in first.arguments.items() if k != key}
      yield "dropped_param", _render([_with(first, arguments=rest)] + calls[1:])
      yield "positional", _render([_with(first, arguments=rest, positional=(first.arguments[key],))] + calls[1:])
      for kind, variant in _vary_value(first.arguments[key], rng):
        yield kind, _render([_with(first, arguments={**first.arguments, key: variant})] + calls[1:])
      value = first.arguments[key]
      if isinstance(value, (int, float)) and not isinstance(value, bool):
        source = _render([_with(first, arguments={**first.arguments, key: "\x00"})] + calls[1:])
        yield "unary_plus", source.replace("'\\x00'", f"+{abs(value)!r}")
        yield "arithmetic", source.replace("'\\x00'", f"({value!r} * 1)")
      if isinstance(value, list) and value:
        source = _render([_with(first, arguments={**first.arguments, key: "\x00"})] + calls[1:])
        yield "list_as_set", source.replace("'\\x00'", "{" + ", ".join(repr(v) for v in value) + "}")
      answers = item.gold.get("answers") or []
      for answer in answers:
        allowed = next(iter(answer.values())) if next(iter(answer)) == first.name else {}
        options = [o for o in allowed.get(key, []) if o != "" and o != value]
        if options:
          yield (
            "other_allowed",
            _render([_with(first, arguments={**first.arguments, key: rng.choice(options)})] + calls[1:]),
          )
          break
        if "" in allowed.get(key, []) and isinstance(value, list):
          yield "optional_as_empty_list", _render([_with(first, arguments={**first.arguments, key: []})] + calls[1:])
          break


def _source_render(
  calls: Sequence[ToolCall], values: Callable[[Any], str], lead: str = "", sep: str = ", ", trail: str = ""
) -> str:
  """`[f(<lead>k=<values(v)><sep>...<trail>), ...]`: Java/JS call text with the values and the separators given."""
  return (
    "["
    + ", ".join(
      f"{c.name}({lead}" + sep.join(f"{k}={values(v)}" for k, v in c.arguments.items()) + f"{trail})" for c in calls
    )
    + "]"
  )


def _quoted_source(value: Any) -> str:
  return json.dumps(value) if isinstance(value, str) else repr(value)


def _bare_source(value: Any) -> str:
  return value if isinstance(value, str) and value else repr(value)


def _source_variants(calls: list[ToolCall], rng: random.Random) -> Iterator[tuple[str, str]]:
  """Java/JavaScript: the values are source text; vary how it is quoted."""
  yield "source_double_quotes", _source_render(calls, _quoted_source)
  yield "source_bare", _source_render(calls, _bare_source)
  yield "source_escaped_quotes", _source_render(calls, lambda v: '"' + str(v).replace('"', '\\"') + '"')
  yield "source_single_line_call", _source_render(calls, repr).strip("[]")
  if calls and calls[0].arguments:
    key = rng.choice(list(calls[0].arguments))
    value = calls[0].arguments[key]
    if isinstance(value, str) and value.startswith("new ") and "{" in value:
      yield (
        "source_spaced",
        _source_render(calls, lambda v: repr(v.replace("{", "{ ").replace("}", " }") if v == value else v)),
      )


# Malformed Java/JavaScript call lists: (kind, output from the quoted rendering). The first five are shapes that
# tree-sitter's error recovery accepts or rejects where a hand-written parser may differ (issue 34).
MALFORMED: dict[str, Callable[[Sequence[ToolCall], Callable[[Any], str]], str]] = {
  "double_brackets": lambda calls, values: "[" + _source_render(calls, values) + "]",
  "block_prefix": lambda calls, values: "[{}" + _source_render(calls, values) + "]",
  "double_comma": lambda calls, values: _source_render(calls, values, sep=",, "),
  "leading_comma": lambda calls, values: _source_render(calls, values, lead=", "),
  "trailing_comma": lambda calls, values: _source_render(calls, values, trail=", "),
  "semicolons": lambda calls, values: _source_render(calls, values).replace("), ", "); ").replace(")]", ");]"),
  "newline_calls": lambda calls, values: _source_render(calls, values).replace("), ", ")\n"),
  "missing_close_paren": lambda calls, values: _source_render(calls, values)[:-2] + "]",
  "extra_close_paren": lambda calls, values: _source_render(calls, values)[:-1] + ")]",
  "unclosed_string": lambda calls, values: _source_render(calls, values)[:-3] + ")]",
  "colon_for_equals": lambda calls, values: _source_render(calls, values).replace("=", ": ", 1),
  "empty_argument_list": lambda calls, values: _source_render(calls, values, lead=",", sep=",", trail=","),
  "nested_call_list": lambda calls, values: "[" + ", ".join(_source_render([c], values) for c in calls) + "]",
}


def malformed_variants(calls: Sequence[ToolCall]) -> Iterator[tuple[str, str]]:
  """(kind, output): each MALFORMED shape of the calls, with the values quoted and bare."""
  for shape, make in MALFORMED.items():
    yield f"malformed_{shape}", make(calls, _quoted_source)
    yield f"malformed_{shape}_bare", make(calls, _bare_source)


EDIT_CHARACTERS = "()[]{},;:=.'\"`\\ \n\t-+0123456789abcxyzLfn_$<>@#/*"


def character_edits(text: str, rng: random.Random, count: int) -> list[tuple[str, str]]:
  """`count` (kind, edited text) pairs: one to three random character edits (insert, delete, replace, swap of
  neighbours) of `text`; inserted characters come from EDIT_CHARACTERS or from the text itself."""
  out = []
  for _ in range(count):
    edited, ops = text, []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
      op = rng.choice(("insert", "delete", "replace", "swap")[: 1 + 2 * bool(edited) + (len(edited) > 1)])
      i = rng.randrange(len(edited) + {"insert": 1, "swap": -1}.get(op, 0))
      char = rng.choice(EDIT_CHARACTERS if rng.random() < 0.5 or not text else text)
      if op == "insert":
        edited = edited[:i] + char + edited[i:]
      elif op == "delete":
        edited = edited[:i] + edited[i + 1 :]
      elif op == "replace":
        edited = edited[:i] + char + edited[i + 1 :]
      else:
        edited = edited[:i] + edited[i + 1] + edited[i] + edited[i + 2 :]
      ops.append(op)
    out.append((f"edit_{ops[0]}" if len(ops) == 1 else "edit_multi", edited))
  return out


def _irrelevance_calls(item: EvalItem) -> list[ToolCall]:
  if not item.gold["functions"]:
    return [ToolCall("lookup", {"query": "x"})]
  doc = item.gold["functions"][0]
  required = doc.get("parameters", {}).get("required", [])
  return [ToolCall(doc["name"], {p: "x" for p in required})]


def _item_calls(item: EvalItem) -> list[ToolCall]:
  """The calls the oracle makes for an AST item (for (ir)relevance, a call to the first function)."""
  if item.gold["category"] in evaluator.IRRELEVANCE + evaluator.RELEVANCE:
    return _irrelevance_calls(item)
  return evaluator.oracle_calls(item.gold["functions"], item.gold["answers"], item.gold["language"])


def perturb(item: EvalItem, rng: random.Random) -> list[tuple[str, str]]:
  """(kind, output) pairs for one item (module docstring)."""
  category, language = item.gold["category"], item.gold["language"]
  calls = _item_calls(item)
  pairs = list(_python_variants(calls, item, rng))
  if category in evaluator.IRRELEVANCE + evaluator.RELEVANCE:
    return pairs + [
      ("prose", "I cannot answer this with the given functions."),
      ("empty", ""),
      ("empty_list", "[]"),
      ("empty_call", f"[{calls[0].name}()]"),
    ]
  if language != "python":
    pairs += list(_source_variants(calls, rng))
  return pairs + [("prose", "I cannot answer this with the given functions."), ("empty", "")]


def pair_sets(
  item: EvalItem, rng: random.Random, seed: int, sets: Sequence[str], edits: int, source_edits: int
) -> list[tuple[str, str, str]]:
  """(set, kind, output) for one item: the perturbation set (drawing from `rng`, shared by all items as before), the
  malformed Java/JS set and the character-edit set (`edits` edits of the oracle output per Python item;
  `source_edits` per Java/JS item, half of them of the oracle output and half of its double-quoted source form, which
  upstream's Java parser accepts more often; drawn from a generator seeded by (seed, item id))."""
  out: list[tuple[str, str, str]] = []
  language = item.gold["language"]
  if "perturb" in sets:
    out += [("perturb", k, o) for k, o in perturb(item, rng)]
  calls = _item_calls(item)
  if "malformed" in sets and language != "python":
    out += [("malformed", k, o) for k, o in malformed_variants(calls)]
  if "edits" in sets:
    count = edits if language == "python" else source_edits
    rng = random.Random(f"{seed}:{item.id}:edits")
    bases = [_render(calls)] + ([_source_render(calls, _quoted_source)] if language != "python" else [])
    for j, base in enumerate(bases):
      out += [("edits", k, o) for k, o in character_edits(base, rng, count // len(bases) + (j < count % len(bases)))]
  return out


def lenient_correct(output: str, item: EvalItem) -> bool:
  category, language = item.gold["category"], item.gold["language"]
  calls = evaluator.decode(output, language)
  if category in evaluator.IRRELEVANCE:
    return not calls
  if category in evaluator.RELEVANCE:
    return bool(calls)
  try:
    return checker.check_ast(item.gold["functions"], calls, item.gold["answers"], language, category) is None
  except (TypeError, ValueError, KeyError, RecursionError):
    return False


def official_correct(output: str, item: EvalItem) -> bool:
  gold = item.gold
  return official.verdict(output, gold["functions"], gold.get("answers"), gold["language"], gold["category"]) is None


# ------------------------------------------------------------------------------------------------ main


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_string(
      "data_dir", None, "the benchmark data holding bfcl/ (default: genenv_jax.data's resolver)", flag_values=fv
    ),
    flags.DEFINE_string(
      "reference", None, "a folder with bfcl-eval installed (pip install --target; module docstring)", flag_values=fv
    ),
    flags.DEFINE_integer("limit", None, "items per category (default: all)", flag_values=fv),
    flags.DEFINE_string("categories", ",".join(CATEGORIES), "comma-separated BFCL categories", flag_values=fv),
    flags.DEFINE_integer("seed", 0, "seeds the perturbed and edited outputs", flag_values=fv),
    flags.DEFINE_integer("show", 20, "disagreements of the official mode to print", flag_values=fv),
    flags.DEFINE_float("target", 0.999, "agreement the official mode must reach (exit 1 below)", flag_values=fv),
    flags.DEFINE_string(
      "output", None, "write every pair (id, set, kind, output, verdicts) as JSON lines", flag_values=fv
    ),
    flags.DEFINE_string("sets", ",".join(SETS), f"comma-separated pair sets, of {', '.join(SETS)}", flag_values=fv),
    flags.DEFINE_integer("edits", 4, "character-edited oracle outputs per Python item", lower_bound=0, flag_values=fv),
    flags.DEFINE_integer(
      "source_edits", 60, "character-edited oracle outputs per Java/JS item", lower_bound=0, flag_values=fv
    ),
  )


def main(argv: Sequence[str]) -> int:
  """Measures and prints the agreement. Through cli.run (or cli.call): a bad flag, a reference that does not import
  or missing data is one `error:` line, exit status 2."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  sets = args.sets.split(",")
  unknown = [s for s in sets if s not in SETS]
  if unknown or not args.sets:
    raise ValueError(f"--sets: unknown sets {unknown}; choose from {', '.join(SETS)}")
  categories = [c for c in args.categories.split(",") if c]
  unknown = [c for c in categories if c not in CATEGORIES]
  if unknown:
    raise ValueError(f"--categories: unknown categories {unknown}; choose from {', '.join(CATEGORIES)}")
  warnings.simplefilter("ignore", SyntaxWarning)  # Python's parser warns on edited outputs such as `[f(a=1x)]`
  try:
    reference = load_reference(args.reference)
  except ImportError as e:
    raise ValueError(str(e)) from e
  rng = random.Random(args.seed)
  bench = evaluator.BfclBenchmark()
  counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  shown = 0
  data_dir = str(require(resolve_data_dir(args.data_dir), ["bfcl"]))
  with contextlib.ExitStack() as stack:
    out = stack.enter_context(open(args.output, "w", encoding="utf-8")) if args.output else None
    for category in categories:
      for item in bench.load_items(data_dir, category, args.limit):
        language = item.gold["language"]
        for pair_set, kind, output in pair_sets(item, rng, args.seed, sets, args.edits, args.source_edits):
          ref = reference(output, item)
          ours, lenient = official_correct(output, item), lenient_correct(output, item)
          keys = ["all", f"set:{pair_set}", f"set:{pair_set} lang:{language}", f"set:{pair_set} kind:{kind}"]
          keys.append(
            f"set:{pair_set} category:{category}"
            if pair_set == "perturb"
            else f"set:{pair_set} lang:{language} kind:{kind}"
          )
          for key in keys:
            counts[key].update(n=1, official=ours == ref, lenient=lenient == ref, reference_correct=ref)
          if ours != ref and shown < args.show:
            shown += 1
            print(f"DISAGREE {item.id} [{pair_set}/{kind}] reference={ref} ours={ours}: {output[:300]!r}")
          if out:
            record = {"id": item.id, "set": pair_set, "kind": kind, "output": output}
            out.write(json.dumps({**record, "reference": ref, "official": ours, "lenient": lenient}) + "\n")
  for key in sorted(counts, key=lambda k: (k != "all", k)):
    c = counts[key]
    print(
      f"{key:64s} n={c['n']:6d}  official {c['official'] / c['n']:8.4%}  lenient {c['lenient'] / c['n']:8.4%}"
      f"  (reference correct {c['reference_correct'] / c['n']:.1%})"
    )
  total = counts["all"]
  print(
    f"official mode agrees with bfcl-eval on {total['official']}/{total['n']} pairs "
    f"({total['official'] / max(1, total['n']):.3%}); lenient mode on {total['lenient']}/{total['n']} "
    f"({total['lenient'] / max(1, total['n']):.3%})"
  )
  agreement = min(
    (counts[f"set:{s}"]["official"] / counts[f"set:{s}"]["n"] for s in sets if counts[f"set:{s}"]["n"]), default=1.0
  )
  return 0 if agreement >= args.target else 1


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.scripts.bfcl_agreement")
