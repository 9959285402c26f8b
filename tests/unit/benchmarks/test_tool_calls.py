"""Tool-call parsing and formatting in the three syntaxes: JSON blocks, Python calls, API-Bank requests."""

import random

import pytest

from genenv_jax.benchmarks.parsing import source_scan
from genenv_jax.benchmarks.parsing.tool_calls import (
  ToolCall,
  format_api_request,
  format_json_tool_calls,
  format_python_calls,
  parse_api_request,
  parse_json_tool_calls,
  parse_python_calls,
  strip_reasoning,
  tool_call_blocks,
)

PARSERS = (parse_json_tool_calls, parse_python_calls, parse_api_request)


def _random_texts(n: int, seed: int = 0) -> list[str]:
  rng = random.Random(seed)
  texts = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))).decode("latin-1") for _ in range(n)]
  alphabet = "<>/[](){}'\",=:._- \nabcxyz0123456789tool_callAPI-Request"
  texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 60))) for _ in range(n)]
  return texts


# ------------------------------------------------------------------------------------------------ JSON blocks


def test_json_one_object_per_line_with_parameters_or_arguments():
  text = (
    '<think>plan</think>\n<tool_call>\n{"name": "a", "parameters": {"x": 1}}\n'
    '{"name": "b", "arguments": "{\\"y\\": [2, 3]}"}\n</tool_call>\n<response>ok</response>'
  )
  assert parse_json_tool_calls(text) == [ToolCall("a", {"x": 1}), ToolCall("b", {"y": [2, 3]})]


def test_json_list_block_and_multiple_blocks():
  text = (
    '<tool_call>[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "parameters": {}}]</tool_call>'
    '<tool_call>\n{"name": "c", "parameters": {"z": "q"}}\n</tool_call>'
  )
  assert [c.name for c in parse_json_tool_calls(text)] == ["a", "b", "c"]
  assert parse_json_tool_calls(text, last_only=True) == [ToolCall("c", {"z": "q"})]
  assert tool_call_blocks(text, last_only=True) == ['\n{"name": "c", "parameters": {"z": "q"}}\n']


def test_json_bad_lines_are_skipped_and_bad_objects_dropped():
  text = (
    '<tool_call>\n{"name": "a", "parameters": {"x": 1}}\nnot json\n{"name": "b", "parameters": [1]}\n'
    '{"parameters": {"x": 1}}\n{"name": "c", "arguments": "{bad"}\n</tool_call>'
  )
  assert parse_json_tool_calls(text) == [ToolCall("a", {"x": 1})]


@pytest.mark.parametrize(
  "text",
  [
    "",
    "no tags here",
    '{"name": "a", "parameters": {}}',  # no block at all
    '<tool_call>\n{"name": "a", "parameters": {"x": 1}}\n',  # unclosed tag
    '<tool_call>{"name": "a", "parameters": {"x": 1</tool_call>',  # truncated JSON
    "<tool_call></tool_call>",
    "<tool_call>\n[]\n</tool_call>",
    "<tool_call>42</tool_call>",
    '<tool_call>{"name": 3, "parameters": {}}</tool_call>',
    None,
    12,
  ],
)
def test_json_malformed_gives_no_call(text):
  assert parse_json_tool_calls(text) == []


def test_json_format_round_trip():
  calls = [ToolCall("Search Managers", {"name": "Alex Ferguson", "n": 3, "tags": ["a", "b"]}), ToolCall("g", {})]
  text = format_json_tool_calls(calls)
  assert text.startswith("<tool_call>\n") and text.endswith("\n</tool_call>")
  assert parse_json_tool_calls(text) == calls
  assert parse_json_tool_calls(format_json_tool_calls(calls, key="arguments")) == calls
  with pytest.raises(ValueError, match="key"):
    format_json_tool_calls(calls, key="args")


# ------------------------------------------------------------------------------------------------ Python calls


def test_python_calls_literals_nested_negative_dotted():
  text = "[math.factorial(number=5), f(a=-3, b=[1, {'k': -2.5}], c=(1, 2), d=True, e=None, s='x'), g()]"
  assert parse_python_calls(text) == [
    ToolCall("math.factorial", {"number": 5}),
    ToolCall("f", {"a": -3, "b": [1, {"k": -2.5}], "c": (1, 2), "d": True, "e": None, "s": "x"}),
    ToolCall("g", {}),
  ]


def test_python_call_without_brackets_fence_and_reasoning():
  assert parse_python_calls("spotify.play(artist='Taylor Swift', duration=20)") == [
    ToolCall("spotify.play", {"artist": "Taylor Swift", "duration": 20})
  ]
  assert parse_python_calls("```python\n[f(a=2**10, b=1e3)]\n```") == [ToolCall("f", {"a": 1024, "b": 1000.0})]
  assert parse_python_calls("<think>call f</think>\n[f(a=1)]") == [ToolCall("f", {"a": 1})]


def test_python_names_and_expressions_become_text_and_positional_args_are_recorded():
  assert parse_python_calls("[f(a=abc, b=math.pi, c=g(1), d=x[0])]") == [
    ToolCall("f", {"a": "abc", "b": "math.pi", "c": "g(1)", "d": "x[0]"})
  ]
  assert parse_python_calls("sort('final_report.pdf', reverse=True)") == [
    ToolCall("sort", {"reverse": True}, ("final_report.pdf",))
  ]


@pytest.mark.parametrize(
  "text",
  [
    "",
    "I cannot help with that.",
    "[f(a=1, b=",
    "[f(a=1), g(",
    "f(a=1))",
    "[1, 2]",
    "[f(**kwargs)]",
    "[f(a=1, a=2)]",
    "[f(*args)]",
    "[f(a=9**9**9)]",
    "[(lambda: 1)()]",
    "[f(a=1)] trailing words",
    None,
  ],
)
def test_python_malformed_gives_no_call(text):
  assert parse_python_calls(text) == []


def test_python_format_round_trip():
  calls = [
    ToolCall("f", {"a": 1, "b": "it's \"q\"", "c": [1.5, {"k": None}], "d": (1,), "e": -2}),
    ToolCall("m.g", {}),
    ToolCall("cd", {}, ("docs",)),
  ]
  text = format_python_calls(calls)
  assert text.startswith("[f(") and parse_python_calls(text) == calls
  assert format_python_calls([]) == "[]" and parse_python_calls("[]") == []


# ------------------------------------------------------------------------------------------------ API-Bank requests


def test_api_request_quoted_bare_and_lists():
  assert parse_api_request("API-Request: [ToolSearcher(keywords='healthcare provider')]") == [
    ToolCall("ToolSearcher", {"keywords": "healthcare provider"})
  ]
  assert parse_api_request("API-Request: [A(location=San Francisco, CA, who=Macy's, n=30, l=[1, 'b'])]") == [
    ToolCall("A", {"location": "San Francisco, CA", "who": "Macy's", "n": "30", "l": [1, "b"]})
  ]
  assert parse_api_request('API-Request: PharmacyLocator(location="New York")') == [
    ToolCall("PharmacyLocator", {"location": "New York"})
  ]
  assert parse_api_request("[GetTime()]") == [ToolCall("GetTime", {})]


def test_api_request_several_calls_and_trailing_text():
  text = "thinking...\nAPI-Request: [R(value1=80, value2=600), R(value1='90', value2=800)]->{'result': 1}"
  assert parse_api_request(text) == [
    ToolCall("R", {"value1": "80", "value2": "600"}),
    ToolCall("R", {"value1": "90", "value2": "800"}),
  ]


@pytest.mark.parametrize(
  "text",
  [
    "",
    "hello",
    "API-Request: [A(x='1)]",
    "API-Request: [A(=2)]",
    "API-Request: [A(x=",
    "API-Request: []",
    "API-Request: [A(x=1) B(y=2)]",
    None,
  ],
)
def test_api_request_malformed_gives_no_call(text):
  assert parse_api_request(text) == []


def test_api_request_format_round_trip():
  calls = [ToolCall("A", {"x": "New York", "y": "it's", "z": ["a", "b"]}), ToolCall("B", {})]
  text = format_api_request(calls)
  assert text.splitlines()[0] == "API-Request: [A(x='New York', y=\"it's\", z=['a', 'b'])]"
  assert parse_api_request(text) == calls


# ------------------------------------------------------------------------------------------------ shared


@pytest.mark.parametrize("parser", PARSERS)
def test_random_bytes_and_truncations_never_raise(parser):
  valid = {
    parse_json_tool_calls: '<tool_call>\n{"name": "a", "parameters": {"x": [1, "y"]}}\n</tool_call>',
    parse_python_calls: "[f(a=1, b='x'), g(c=[1, {'d': 2}])]",
    parse_api_request: "API-Request: [A(x='1', y=[1, 2])]",
  }[parser]
  texts = _random_texts(150) + [valid[:i] for i in range(len(valid))]
  for text in texts:
    result = parser(text)
    assert isinstance(result, list) and all(isinstance(c, ToolCall) for c in result)
  for text in _random_texts(50, seed=1):
    assert parser(text) == []
  # a truncation gives no call, or (Python: BFCL adds a missing closing "]") only the calls it holds whole
  full = parser(valid)
  for i in range(len(valid) - 1):
    calls = parser(valid[:i])
    assert calls == [] if parser is not parse_python_calls else calls == full[: len(calls)]
  assert parser(valid[: valid.index(")" if parser is not parse_json_tool_calls else "}")]) == []


def test_strip_reasoning():
  assert strip_reasoning("<think>a</think> b <think>c</think>d") == "b d"
  assert strip_reasoning("reasoning only</think>\n[f()]") == "[f()]"
  assert strip_reasoning("<think>never closed [f()]") == ""


def test_source_scan_splits_outside_strings_and_brackets():
  assert source_scan.split_top_level("a, 'b, c', [d, e], f(g, h)") == ["a", " 'b, c'", " [d, e]", " f(g, h)"]
  assert source_scan.keyword_pieces("x=new HashMap<String, Object>(), y=San Francisco, CA") == [
    ("x", "new HashMap<String, Object>()"),
    ("y", "San Francisco, CA"),
  ]
  assert source_scan.unquote("'it\\'s'") == "it's" and source_scan.unquote("abc") is None
  assert source_scan.bracket_end("[a(b)] tail") == 5 and source_scan.bracket_end("[a(b] ") == -1
  with pytest.raises(ValueError, match="unbalanced"):
    source_scan.split_top_level("a)")
