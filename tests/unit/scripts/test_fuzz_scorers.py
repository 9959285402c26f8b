"""A fast subset of `genenv_jax.scripts.fuzz_scorers`: every scorer and task parser on adversarial and random inputs
raises nothing and stays under its alarm; the fuzzer itself records exceptions, timeouts and the slowest call."""

import random
import time

import pytest

from genenv_jax import cli
from genenv_jax.scripts import fuzz_scorers

# 1 MB inputs that reach the deep rules of the default (official) BFCL decoder and the linear-time tag scans
BIG = ("unary_literal", "nested_list_literal", "open_parens", "newlines_then_text", "unclosed_answer", "java_array")


@pytest.fixture(scope="module")
def targets(shared_data):
  return fuzz_scorers.make_targets(shared_data)


def test_every_target_survives_mid_size_adversarial_and_random_inputs(targets):
  names = {name for name, _ in targets}
  for benchmark in ("api_bank", "bamboogle", "travelplanner", "bfcl[official]", "bfcl[lenient]"):
    assert any(n.startswith(benchmark + ".score") for n in names), benchmark
  for family in ("api_bank", "bfcl", "bamboogle", "travelplanner"):
    assert {f"{family}_tasks.parse", f"{family}_tasks.score"} <= names, family
  texts = list(fuzz_scorers.adversarial_texts(3_000).items())
  texts += list(fuzz_scorers.random_texts(random.Random(0), 60))
  report = fuzz_scorers.fuzz(targets, texts, timeout=5.0)
  assert report.calls == len(targets) * len(texts)
  assert not report.exceptions and not report.timeouts, (report.exceptions[:5], report.timeouts[:5])


def test_bfcl_and_bamboogle_scorers_on_1mb_inputs(targets):
  chosen = [t for t in targets if t[0].startswith(("bfcl[official]", "bamboogle"))]
  texts = fuzz_scorers.adversarial_texts(1_000_000)
  report = fuzz_scorers.fuzz(chosen, [(name, texts[name]) for name in BIG], timeout=10.0)
  assert report.calls == len(chosen) * len(BIG) and not report.exceptions and not report.timeouts, report.summary()


def test_fuzz_records_exceptions_timeouts_and_the_slowest_call():
  def raises(text):
    raise ValueError(f"bad {text[:3]}")

  def hangs(text):
    time.sleep(2.0)

  report = fuzz_scorers.fuzz([("ok", len), ("raises", raises), ("hangs", hangs)], [("a", "abcdef")], timeout=0.1)
  assert report.calls == 3
  assert report.exceptions == [("raises", "a", "ValueError: bad abc")]
  assert [t[:2] for t in report.timeouts] == [("hangs", "a")] and report.slowest[1:] == ("hangs", "a")
  assert 0.1 <= report.slowest[0] < 1.5  # the alarm cut the 2 s sleep
  merged = report.merge(fuzz_scorers.fuzz([("ok", len)], [("b", "x")], timeout=1.0))
  assert merged.calls == 4 and len(merged.exceptions) == 1 and merged.slowest[1] == "hangs"


def test_cli_runs_and_counts(shared_data, capsys):
  argv = ["--data_dir", str(shared_data), "--size", "500", "--mid_size", "0", "--random", "5", "--only", "bamboogle"]
  assert cli.call(fuzz_scorers, argv) == 0
  out = capsys.readouterr().out
  n_texts = len(fuzz_scorers.adversarial_texts(500)) + 5
  # bamboogle.score[test], bamboogle_tasks.parse, bamboogle_tasks.score
  assert out.startswith("3 targets\n") and f"total: {3 * n_texts} inputs, 0 exceptions, 0 timeouts" in out
  assert cli.call(fuzz_scorers, ["--size", "0"]) == 2
  assert capsys.readouterr().err == (
    "genenv_jax.scripts.fuzz_scorers: error: need --size >= 1, --mid_size >= 0, --random >= 0 and --timeout > 0\n"
  )
