"""Smoke test of the sampler benchmark: --tiny mode runs both frameworks and reports finite positive figures."""

import math

import pytest
from conftest import json_result

pytest.importorskip("torch")
pytest.importorskip("transformers")

from genenv_jax import cli  # noqa: E402
from genenv_jax.bench import sampler  # noqa: E402


def test_tiny_benchmark_reports_finite_positive_figures(capsys):
  assert cli.call(sampler, ["--tiny"]) == 0
  printed = capsys.readouterr().out
  assert "tokens agree" in printed and "ratio" in printed
  result = json_result(printed)  # its one JSON line
  rows = result["rows"]
  assert [(r["config"], r["batch"]) for r in rows] == [("tiny", b) for b in sampler.TINY["batch_sizes"]]
  for r in rows:
    for name in ("ours_tok_s", "hf_tok_s", "ratio", "ours_tok_s_median", "hf_tok_s_median"):
      assert math.isfinite(r[name]) and r[name] > 0, (name, r[name])
    assert r["params"] > 0 and math.isfinite(r["ours_compile_s"]) and r["ours_compile_s"] >= 0
    for name in ("decode_ours_tok_s", "decode_hf_tok_s", "decode_ratio"):  # a difference of times: None if noise
      assert r[name] is None or (math.isfinite(r[name]) and r[name] > 0), (name, r[name])
    assert 0.0 <= r["agreement"]["token_fraction"] <= 1.0


def test_long_budget_mode_reports_rates_and_per_step_times_per_cache_kind(capsys):
  assert cli.call(sampler, ["--long", "--tiny"]) == 0
  printed = capsys.readouterr().out
  result = json_result(printed)
  assert "step ms" in printed and result["mode"] == "long"
  rows = result["rows"]
  assert [r["kv_cache"] for r in rows] == ["auto", "int8"]
  for r in rows:
    assert list(r["seconds"]) == ["8", "16"] and list(r["step_ms"]) == ["0-8", "8-16"]
    assert all(math.isfinite(v) and v > 0 for v in r["tok_s"].values())
    assert all(math.isfinite(v) for v in r["step_ms"].values())
    assert 0.0 <= r["agreement_with_auto"]["token_fraction"] <= 1.0
