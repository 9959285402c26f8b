"""BFCL's Java/JavaScript source decoding on tree-sitter (benchmarks.bfcl.source), and the agreement script's output
sets."""

import os
import random

import pytest
from absl import flags

from genenv_jax import cli
from genenv_jax.benchmarks.bfcl import official, source
from genenv_jax.benchmarks.parsing.tool_calls import ToolCall
from genenv_jax.scripts import bfcl_agreement
from genenv_jax.tasks.benchmark import EvalItem

# (language, output, what the official decoder returns; DECODE_ERROR where it raises). Each is what bfcl-eval
# 2026.3.23's `default_decode_ast_prompting` returns (test_fixtures_match_bfcl_eval_when_installed checks that).
DECODE_ERROR = "decode error"
DECODE_CASES = [
  # The five malformed shapes of issue 34: tree-sitter's error recovery leaves only MISSING nodes, so they decode.
  ("java", '[[A.f(a="x")]]', [{"A.f": {"a": "x"}}]),
  ("java", '[{}[f(a="x")]]', [{"f": {"a": "x"}}]),
  ("javascript", "[f(a='x',, b='y')]", [{"f": {"a": "x", "b": "y"}}]),
  ("javascript", "[f(, a='x')]", [{"f": {"a": "x"}}]),
  ("javascript", "[f(a='x', )]", [{"f": {"a": "x"}}]),
  # ... and their neighbours that recovery does not save (an ERROR node).
  ("java", '[[f(a="x")]]', DECODE_ERROR),
  ("java", '[f(a="x", )]', DECODE_ERROR),
  ("java", "[f(a='x')]", DECODE_ERROR),
  ("java", "[f(a+=1)]", DECODE_ERROR),
  # Java: the first invocation; statements after it are not read; values rendered by upstream's node walk.
  ("java", '[f(a="x"); g(b="y")]', [{"f": {"a": "x"}}]),
  (
    "java",
    '[A.b.c(x=List.of(1), y="s\\"q", z=String.class, w)]',
    [{"A.b.c": {"x": "List.of(1)", "y": 's\\"q', "z": "String.class", None: "w"}}],
  ),
  (
    "java",
    '[A.b(x=new int[]{1, 2}, y=new HashMap<String, Integer>() {{ put("a", 1); }}, z=-3L)]',
    [{"A.b": {"x": "new int[]{1,2}", "y": "new HashMap<String,Integer>()", "z": "-3L"}}],
  ),
  ("java", "[f(a=new int[3])]", DECODE_ERROR),  # no initializer: upstream raises on the missing node
  ("java", '[f(a="x", a="y")]', DECODE_ERROR),  # a repeated argument name
  ("java", "[int x = 1;]", {}),  # no call: {} (then not a call list)
  # JavaScript: the first top-level call statement; a list of calls is one sequence expression, so no call.
  ("javascript", '[f(a="x")\ng(b="y")]', [{"f": {"a": "x"}}]),
  ("javascript", "[x = 1; f(b=2)]", [{"f": {"b": "2"}}]),
  ("javascript", '[[f(a="x")]]', None),
  ("javascript", "[f(a=1), g(b=2)]", None),
  ("javascript", "[f(a=[1, 2], b=true, c, true)]", DECODE_ERROR),  # two positional arguments share the key None
  ("javascript", "[obj.f(a=[1, 2], b={k: 'v'}, c)]", [{"obj.f": {"a": "[1, 2]", "b": "{k: 'v'}", None: "c"}}]),
  ("javascript", "[f?.(a=1)]", [{"f": {}}]),  # the second child is `?.`, which holds no arguments
  ("javascript", "[f(a='x)]", DECODE_ERROR),
]


@pytest.mark.parametrize("language,output,expected", DECODE_CASES, ids=[c[1] for c in DECODE_CASES])
def test_official_source_decoding(language, output, expected):
  if expected == DECODE_ERROR:
    with pytest.raises(official.DecodeError):
      official.decode(output, language)
  else:
    assert official.decode(output, language) == expected


def test_fixtures_match_bfcl_eval_when_installed():
  """DECODE_CASES against bfcl-eval's own decoder, where it is installed (BFCL_EVAL_REFERENCE, as in
  `genenv_jax.scripts.bfcl_agreement`'s docstring); skipped otherwise."""
  folder = os.environ.get("BFCL_EVAL_REFERENCE")
  if not folder:
    pytest.skip("BFCL_EVAL_REFERENCE is not set (a folder with bfcl-eval installed, see scripts/bfcl_agreement.py)")
  bfcl_agreement.load_reference(folder)  # puts the folder on sys.path, with the model-config stub
  from bfcl_eval.constants.enums import ReturnFormat  # pylint: disable=import-outside-toplevel
  from bfcl_eval.model_handler.utils import default_decode_ast_prompting  # pylint: disable=import-outside-toplevel

  formats = {"java": ReturnFormat.JAVA, "javascript": ReturnFormat.JAVASCRIPT}
  for language, output, expected in DECODE_CASES:
    try:
      decoded = default_decode_ast_prompting(output, formats[language])
    except Exception:  # noqa: BLE001 - any upstream exception is a failed decode
      decoded = DECODE_ERROR
    assert decoded == expected, output


def test_java_text_is_cut_at_byte_offsets_as_upstream_does():
  """Upstream slices the decoded string by tree-sitter's byte offsets, so text after a non-ASCII character shifts."""
  assert source.parse_java('f(a="é", b="xy")') == [{"f": {"a": 'é"', "=": 'y"'}}]
  assert source.parse_java('f(a="e", b="xy")') == [{"f": {"a": "e", "b": "xy"}}]
  assert source.parse_js('f(a="é", b="xy")') == [{"f": {"a": "é", "b": "xy"}}]  # JS decodes node bytes


def test_parse_tree_rejects_bad_input_with_clear_errors():
  with pytest.raises(ValueError, match="no source grammar for 'python'"):
    source.parse_tree("f()", "python")
  with pytest.raises(source.SourceSyntaxError, match="over the"):
    source.parse_java("f(a=" + "1" * source.MAX_SOURCE + ")")
  with pytest.raises(source.SourceSyntaxError, match="UTF-8"):
    source.parse_js("f(a='\ud800')")
  with pytest.raises(source.SourceSyntaxError, match="ERROR node"):
    source.parse_js("f(a=)")
  assert source.parse_tree("f(a=1)", "javascript").type == "program"


@pytest.mark.parametrize("language", ["java", "javascript"])
def test_character_edits_of_source_calls_decode_or_fail_cleanly(language):
  """Random edits never raise anything but DecodeError, and decode to what upstream can return."""
  text = '[Cache.get(keys="new String[]{\\"a\\", \\"b\\"}", ttl="5L"), Log.write(msg="it\'s", level=2)]'
  for _, output in bfcl_agreement.character_edits(text, random.Random(language), 400):
    try:
      decoded = official.decode(output, language)
    except official.DecodeError:
      continue
    assert decoded is None or isinstance(decoded, (list, dict)), (output, decoded)


# ------------------------------------------------------------------------------------------------ agreement sets


def test_malformed_variants_write_each_shape_quoted_and_bare():
  calls = [ToolCall("A.f", {"a": "x", "b": "new int[]{1}"}), ToolCall("g", {})]
  pairs = dict(bfcl_agreement.malformed_variants(calls))
  assert len(pairs) == 2 * len(bfcl_agreement.MALFORMED)
  assert pairs["malformed_double_brackets"] == '[[A.f(a="x", b="new int[]{1}"), g()]]'
  assert pairs["malformed_block_prefix_bare"] == "[{}[A.f(a=x, b=new int[]{1}), g()]]"
  assert pairs["malformed_double_comma"] == '[A.f(a="x",, b="new int[]{1}"), g()]'
  assert pairs["malformed_leading_comma"] == '[A.f(, a="x", b="new int[]{1}"), g(, )]'
  assert pairs["malformed_trailing_comma_bare"] == "[A.f(a=x, b=new int[]{1}, ), g(, )]"
  assert pairs["malformed_newline_calls"] == '[A.f(a="x", b="new int[]{1}")\ng()]'
  assert pairs["malformed_missing_close_paren"] == '[A.f(a="x", b="new int[]{1}"), g(]'


def test_character_edits_are_small_seeded_and_named():
  text = "[f(a='x', b=2)]"
  first = bfcl_agreement.character_edits(text, random.Random(3), 300)
  assert first == bfcl_agreement.character_edits(text, random.Random(3), 300)
  assert first != bfcl_agreement.character_edits(text, random.Random(4), 300)
  assert {kind for kind, _ in first} == {"edit_insert", "edit_delete", "edit_replace", "edit_swap", "edit_multi"}
  for kind, edited in first:
    assert abs(len(edited) - len(text)) <= (3 if kind == "edit_multi" else 1)
    if kind in ("edit_replace", "edit_swap"):
      assert len(edited) == len(text) and sum(a != b for a, b in zip(edited, text)) <= 2
  from_empty = bfcl_agreement.character_edits("", random.Random(0), 50)
  assert {kind for kind, _ in from_empty} == {"edit_insert", "edit_multi"} and all(
    len(edited) == 1 for kind, edited in from_empty if kind == "edit_insert"
  )


def _java_item():
  doc = {
    "name": "Cache.get",
    "parameters": {"type": "dict", "properties": {"key": {"type": "String"}, "ttl": {"type": "long"}}, "required": []},
  }
  gold = {"category": "simple_java", "language": "java", "functions": [doc], "answers": [{"Cache.get": {"key": ["k"]}}]}
  return EvalItem("simple_java_0", "simple_java", (), gold)


def test_pair_sets_sizes_and_seeding():
  item = _java_item()
  rng = random.Random(0)
  pairs = bfcl_agreement.pair_sets(item, rng, 0, ["malformed", "edits"], edits=2, source_edits=7)
  counts = {s: sum(1 for p in pairs if p[0] == s) for s in bfcl_agreement.SETS}
  assert counts == {"perturb": 0, "malformed": 2 * len(bfcl_agreement.MALFORMED), "edits": 7}
  assert pairs == bfcl_agreement.pair_sets(item, random.Random(5), 0, ["malformed", "edits"], 2, 7)
  with_perturb = bfcl_agreement.pair_sets(item, rng, 0, list(bfcl_agreement.SETS), 2, 7)
  assert [p for p in with_perturb if p[0] != "perturb"] == pairs  # the other sets do not depend on the perturb set
  assert ("perturb", "oracle", "[Cache.get(key='k')]") in with_perturb
  edited = [output for pair_set, _, output in pairs if pair_set == "edits"]  # 4 of the oracle, 3 of its source form
  assert sum("'" in o for o in edited[:4]) >= 3 and sum('"' in o for o in edited[4:]) >= 2


def test_agreement_arguments_are_checked(capsys):
  """A bad flag is one `error:` line and exit status 2, before the reference or the data is looked for."""
  assert cli.call(bfcl_agreement, ["--sets", "perturb,typo"]) == 2
  assert "error: --sets: unknown sets ['typo']" in capsys.readouterr().err
  assert cli.call(bfcl_agreement, ["--categories", "simple_python,nope"]) == 2
  assert "error: --categories: unknown categories ['nope']" in capsys.readouterr().err
  assert cli.call(bfcl_agreement, ["--source_edits", "-1"]) == 2
  assert "error: flag --source_edits=-1" in capsys.readouterr().err
  defined = flags.FlagValues()
  bfcl_agreement._define_flags(defined)
  defined(["bfcl_agreement"])
  assert defined.sets.split(",") == list(bfcl_agreement.SETS) and defined.edits == 4 and defined.source_edits == 60
