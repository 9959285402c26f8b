"""Bamboogle benchmark and the SQuAD v1.1 QA metrics: oracle / null agents on the real data, hand-computed cases."""

from __future__ import annotations

import pytest

from genenv_jax.benchmarks.bamboogle.evaluator import (
  BamboogleBenchmark,
  extract_answer,
  extract_search_query,
  run_search_loop,
)
from genenv_jax.benchmarks.parsing import qa_metrics
from genenv_jax.tasks.benchmark import EvalItem


@pytest.fixture(scope="module")
def items(shared_data):
  return BamboogleBenchmark().load_items(str(shared_data))


def test_loads_all_125_items(items):
  assert len(items) == 125
  assert [it.id for it in items[:2]] == ["bamboogle-0", "bamboogle-1"]
  assert {it.split for it in items} == {"test"}
  assert items[0].messages[-1]["content"].startswith("Question: Who was president")
  assert items[74].gold == "George VI"  # the raw answer has a trailing newline


def test_oracle_scores_100_percent(items):
  bench = BamboogleBenchmark()
  results = [bench.score(it, bench.oracle_output(it)) for it in items]
  metrics = bench.aggregate(results)
  assert metrics["em"] == 1.0 and metrics["f1"] == 1.0
  assert metrics["test/em"] == 1.0 and metrics["n"] == 125.0


def test_null_agent_scores_zero(items):
  bench = BamboogleBenchmark()
  for output in ("", "   \n", "<answer></answer>"):
    metrics = bench.aggregate([bench.score(it, output) for it in items])
    assert metrics["em"] == 0.0 and metrics["f1"] == 0.0


def test_aggregate_flags_protocol_difference(items):
  metrics = BamboogleBenchmark().aggregate([])
  assert metrics["not_comparable_to_paper"] == 1.0 and metrics["closed_book"] == 1.0 and metrics["n"] == 0.0
  searching = BamboogleBenchmark(search_fn=lambda q: "")
  assert searching.aggregate([])["closed_book"] == 0.0
  assert "<search>" in searching.system_prompt()
  assert "<search>" not in items[0].messages[0]["content"]


def test_bad_split_and_limit(shared_data):
  bench = BamboogleBenchmark()
  with pytest.raises(ValueError, match="no split 'train'"):
    bench.load_items(str(shared_data), split="train")
  assert len(bench.load_items(str(shared_data), split="test", limit=3)) == 3
  with pytest.raises(FileNotFoundError, match="Bamboogle data not found"):
    bench.load_items("/nonexistent")


@pytest.mark.parametrize(
  "raw, normalised",
  [
    ("The Eiffel Tower!", "eiffel tower"),
    ("an apple, a pear and THE plum.", "apple pear and plum"),
    ("  James   Madison. ", "james madison"),
    ("Theatre", "theatre"),  # "the" only as a whole word
    ("U.S.A.", "usa"),
  ],
)
def test_normalisation(raw, normalised):
  assert qa_metrics.normalize_answer(raw) == normalised


def test_exact_match_and_f1_by_hand():
  assert qa_metrics.exact_match("The James Madison.", "james madison")
  assert not qa_metrics.exact_match("James Madison Jr", "james madison")
  # P = 2/3, R = 1 -> F1 = 2 * (2/3) / (5/3) = 0.8
  assert qa_metrics.token_f1("James Madison Jr", "james madison") == pytest.approx(0.8)
  # overlap {blue}: P = 1/2, R = 1/3 -> F1 = 2 * (1/6) / (5/6) = 0.4
  assert qa_metrics.token_f1("red blue", "blue green yellow") == pytest.approx(0.4)
  # multiset overlap: "new" counts once -> P = 2/3, R = 1
  assert qa_metrics.token_f1("new new york", "new york") == pytest.approx(0.8)
  assert qa_metrics.token_f1("", "anything") == 0.0
  assert qa_metrics.token_f1("the", "a") == 0.0  # both normalise to empty


@pytest.mark.parametrize(
  "output, answer",
  [
    ("Let me think. <answer>Titan IIIE</answer>", "Titan IIIE"),
    ("<answer>first</answer> then <answer> second </answer>", "second"),
    ("reasoning...\n<answer>Saturn V", "Saturn V"),  # generation stopped at the </answer> stop string
    ("Some reasoning.\nAnswer: **David Dinkins**\n", "David Dinkins"),
    ("Final answer: 1999", "1999"),
    ("blah\nblah\n\nJames Madison\n", "James Madison"),
    ("<search>q</search>\n<result>Answer: wrong</result>\nAnswer: right", "right"),
    ("", None),
    ("<answer>  </answer>", None),
  ],
)
def test_answer_extraction(output, answer):
  assert extract_answer(output) == answer


def test_partial_answer_scores_f1_not_em():
  bench = BamboogleBenchmark()
  item = EvalItem("bamboogle-x", "test", (), "James Madison")
  result = bench.score(item, "<answer>President James Madison</answer>")
  assert not result.correct and result.score == pytest.approx(0.8)
  assert result.detail["prediction"] == "President James Madison"
  assert bench.score(item, None).score == 0.0  # malformed output scores 0, never raises


def test_search_loop_protocol():
  seen_messages = []
  replies = iter(
    [
      "I should look it up. <search>Citibank founded year</search> ignored tail",
      "<search>US president 1812</search>",
      "<answer>James Madison</answer>",
    ]
  )

  def generate(messages):
    seen_messages.append(list(messages))
    return next(replies)

  queries = []

  def search(query):
    queries.append(query)
    return f"results for {query}"

  bench = BamboogleBenchmark(search_fn=search)
  item = EvalItem("bamboogle-x", "test", ({"role": "user", "content": "Question: q"},), "james madison")
  output = bench.respond(generate, item)
  assert queries == ["Citibank founded year", "US president 1812"]
  assert seen_messages[1][-2] == {
    "role": "assistant",
    "content": "I should look it up. <search>Citibank founded year</search>",
  }
  assert seen_messages[1][-1] == {"role": "user", "content": "<result>results for Citibank founded year</result>"}
  assert len(seen_messages[2]) == 5
  assert bench.score(item, output).correct
  assert extract_search_query("<answer>x</answer><search>late</search>") is None


def test_search_loop_stops_after_max_turns():
  calls = []

  def generate(messages):
    calls.append(len(messages))
    return "<search>again</search>"

  output = run_search_loop(generate, [{"role": "user", "content": "q"}], lambda q: "r", max_search_turns=2)
  assert calls == [1, 3, 5]  # two searches, then a final reply that is not followed up
  assert extract_answer(output) == "<search>again</search>"
  with pytest.raises(ValueError, match="max_search_turns"):
    run_search_loop(generate, [], lambda q: "", max_search_turns=-1)
