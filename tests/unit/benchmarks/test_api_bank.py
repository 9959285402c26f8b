"""API-Bank with ToolRL's metric (real data from ../shared/data)."""

import json

import pytest

from genenv_jax.benchmarks.api_bank.evaluator import LEVELS, ApiBankBenchmark, toolrl_block
from genenv_jax.tasks.benchmark import EvalItem

BENCH = ApiBankBenchmark()
STRICT = ApiBankBenchmark(strict_format=True)
GOLD = [
  {
    "name": "ModifyRegistration",
    "parameters": {
      "appointment_id": "34567890",
      "new_appointment_date": "2023-03-26",
      "new_appointment_doctor": "Dr. Lee",
    },
  }
]
ITEM = EvalItem("level-1-0", "level-1", (), GOLD)


@pytest.fixture(scope="module")
def items(shared_data):
  return BENCH.load_items(str(shared_data))


def _block(*objs) -> str:
  return "<think>ok</think>\n<tool_call>\n" + "\n".join(json.dumps(o) for o in objs) + "\n</tool_call>"


def _with(**changes) -> dict:
  params = dict(GOLD[0]["parameters"])
  for k, v in changes.items():
    if v is None:
      params.pop(k)
    else:
      params[k] = v
  return {"name": "ModifyRegistration", "parameters": params}


# ------------------------------------------------------------------------------------------------ real data


def test_items_ids_splits_and_prompts(items, shared_data):
  assert len(items) == 597
  assert [sum(i.split == level for i in items) for level in LEVELS] == [399, 67, 131]
  assert items[0].id == "level-1-0" and items[399].id == "level-2-0" and items[-1].id == "level-3-130"
  raw = json.loads((shared_data / "api_bank" / "level-2-api_processed.json").read_text())
  item = items[399]
  assert [m["role"] for m in item.messages] == ["system", "user"]
  assert item.messages[0]["content"] == raw[0]["system"] and item.messages[1]["content"] == raw[0]["user"]
  assert item.gold == [raw[0]["answer"]]  # level 2 stores the bare object
  assert all(len(i.gold) == 1 for i in items)


def test_oracle_scores_all_597_and_null_agent_none(items):
  for bench in (BENCH, STRICT):
    oracle = bench.aggregate([bench.score(i, bench.oracle_output(i)) for i in items])
    assert oracle["overall/correct"] == 597 and oracle["overall/accuracy"] == 1.0
    assert oracle["level-1/n"] == 399 and oracle["level-2/n"] == 67 and oracle["level-3/n"] == 131
    null = bench.aggregate([bench.score(i, "") for i in items])
    assert null["overall/accuracy"] == 0.0 and null["level-3/accuracy"] == 0.0


def test_overall_is_correct_over_597(items):
  results = [BENCH.score(i, BENCH.oracle_output(i) if i.split == "level-2" else "") for i in items]
  metrics = BENCH.aggregate(results)
  assert metrics["overall/accuracy"] == pytest.approx(67 / 597)
  assert metrics["level-2/accuracy"] == 1.0 and metrics["level-1/accuracy"] == 0.0


def test_perturbing_one_gold_value_of_a_real_item_flips_it(items):
  item = items[450]
  gold = item.gold[0]
  assert BENCH.score(item, _block(gold)).correct
  key = next(iter(gold["parameters"]))
  wrong = {"name": gold["name"], "parameters": {**gold["parameters"], key: gold["parameters"][key] + "x"}}
  result = BENCH.score(item, _block(wrong))
  assert not result.correct and result.score == 0.0 and "error" in result.detail


def test_bad_split_and_limit(shared_data):
  with pytest.raises(ValueError, match="level-4"):
    BENCH.load_items(str(shared_data), split="level-4")
  with pytest.raises(ValueError, match="limit"):
    BENCH.load_items(str(shared_data), limit=-1)
  assert [i.id for i in BENCH.load_items(str(shared_data), split="level-3", limit=2)] == ["level-3-0", "level-3-1"]


# ------------------------------------------------------------------------------------------------ the metric's rules


def test_exact_match_is_correct_and_key_order_is_free():
  assert BENCH.score(ITEM, _block(GOLD[0])).correct
  reordered = {"name": "ModifyRegistration", "parameters": dict(reversed(list(GOLD[0]["parameters"].items())))}
  assert BENCH.score(ITEM, _block(reordered)).correct


@pytest.mark.parametrize(
  "prediction",
  [
    _with(appointment_id=34567890),  # wrong type: the gold value is the string "34567890"
    _with(new_appointment_doctor="Dr. Kim"),  # wrong value
    _with(appointment_id=None),  # missing required parameter
    _with(note="urgent"),  # extra parameter
    _with(new_appointment_doctor="dr lee"),  # differs only in case and punctuation: exact match fails
    _with(new_appointment_doctor="Dr. Lee "),  # trailing space
    {"name": "modifyregistration", "parameters": GOLD[0]["parameters"]},  # wrong name (case)
  ],
)
def test_any_difference_is_incorrect(prediction):
  assert not BENCH.score(ITEM, _block(prediction)).correct
  assert not STRICT.score(ITEM, _block(prediction)).correct


def test_missing_optional_parameter_is_incorrect_under_exact_dict_equality():
  gold = [{"name": "QueryMeeting", "parameters": {"user_name": "John", "date": ""}}]
  item = EvalItem("level-3-0", "level-3", (), gold)
  assert not BENCH.score(item, _block({"name": "QueryMeeting", "parameters": {"user_name": "John"}})).correct


def test_extra_and_permuted_calls_are_allowed_any_match_wins():
  other = {"name": "QueryHealthData", "parameters": {"user_id": "J1"}}
  assert BENCH.score(ITEM, _block(other, GOLD[0])).correct
  assert BENCH.score(ITEM, _block(GOLD[0], other)).correct
  assert not BENCH.score(ITEM, _block(other)).correct


def test_only_the_last_block_counts():
  text = _block(GOLD[0]) + "\n" + _block({"name": "QueryHealthData", "parameters": {}})
  assert not BENCH.score(ITEM, text).correct and not STRICT.score(ITEM, text).correct
  assert BENCH.score(ITEM, _block({"name": "X", "parameters": {}}) + _block(GOLD[0])).correct


def test_toolrl_extraction_quirks_and_the_strict_variant():
  line = json.dumps(GOLD[0])
  no_tags, unclosed = f"Sure.\n{line}", f"<tool_call>\n{line}\n"
  bare_params = _block(GOLD[0]["parameters"])  # no name/parameters keys: taken as the parameters
  arguments_key = _block({"name": GOLD[0]["name"], "arguments": GOLD[0]["parameters"]})
  junk_lines = "<tool_call>\nnot json\n" + line + "\n{broken\n</tool_call>"
  assert toolrl_block(unclosed) == line and toolrl_block(no_tags) == no_tags
  for text, toolrl, strict in [
    (no_tags, True, False),
    (unclosed, True, False),
    (bare_params, True, False),
    (arguments_key, False, True),
    (junk_lines, True, True),
  ]:
    assert BENCH.score(ITEM, text).correct is toolrl, text
    assert STRICT.score(ITEM, text).correct is strict, text


@pytest.mark.parametrize(
  "output",
  [
    "",
    "<tool_call>",
    "<tool_call>\n{\"name\": \"ModifyRegistration\", \"param",
    "\x00\xff<tool_call>\x01</tool_call>",
    "[ModifyRegistration()]",
    None,
    7,
  ],
)
def test_malformed_output_scores_zero_without_raising(output):
  for bench in (BENCH, STRICT):
    result = bench.score(ITEM, output)
    assert not result.correct and result.score == 0.0
