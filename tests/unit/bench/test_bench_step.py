"""Smoke test of the step benchmark: the smoke config with tiny models (LoRA on, so both updates run), one repeat, the
torch side and the matmul peak in processes of their own; every figure finite and sane. Not a timing assertion.
--fast_compile (XLA's cheap CPU pipeline) keeps the compiles, most of the run, short."""

import math

import pytest
from conftest import json_result

pytest.importorskip("torch")
pytest.importorskip("transformers")

from genenv_jax import cli  # noqa: E402
from genenv_jax.bench import side_by_side, step  # noqa: E402
from genenv_jax.models.config import ModelConfig  # noqa: E402

ARGS = [
  "--config=smoke",
  "--tiny",
  "--set=agent.lora.enabled=True",
  "--repeats=1",
  "--warm_start=0",
  "--fast_compile",
  "--torch_threads=1",
  "--devices=1",
  "--update_rows=2",
  "--update_length=8",
  "--sample_batches=2",
  "--sample_prompt=4",
  "--sample_new=3",
  "--peak_size=256",
]
# figures that may be 0, negative or absent: differences of times, load, the warm start, flags
MAY_NOT_BE_POSITIVE = ("/other_s", "/stage_s/warm_start", "/warm_start_fraction", "/warm_start_steps", "/load_avg")
DIFFERENCES = ("/decode/", "/prefill/")


def _numbers(tree, path=""):
  """Every int/float leaf of a JSON-like tree as (path, value); bools are flags, not figures."""
  if isinstance(tree, dict):
    for k, v in tree.items():
      yield from _numbers(v, f"{path}/{k}")
  elif isinstance(tree, list):
    for i, v in enumerate(tree):
      yield from _numbers(v, f"{path}[{i}]")
  elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
    yield path, tree


def _rate(f, peak_bound=2.0):
  """A rated figure: positive tok/s and GFLOP/s, a share of the peak in (0, peak_bound]."""
  assert f["tok_s"] > 0 and f["gflop_s"] > 0, f
  assert 0 < f["peak_share"] <= peak_bound, f


def test_smoke_benchmark_reports_finite_positive_figures(capsys):
  assert cli.call(step, ARGS) == 0
  printed = capsys.readouterr().out
  assert "whole jitted step" in printed and "ours/torch" in printed and "side by side" in printed
  assert "LoRA's share" in printed
  result = json_result(printed)  # its one JSON line

  assert set(result["phases"]) == set(step.PHASES) | {"rollouts"}
  for name, f in result["phases"].items():
    for key in ("seconds", "tok_s", "tokens", "compile_s", "lower_s"):
      assert math.isfinite(f[key]) and f[key] > 0, (name, key, f[key])
  for key in ("seconds", "best_s", "tok_s", "compile_s"):
    assert math.isfinite(result["step"][key]) and result["step"][key] > 0, (key, result["step"][key])
  c = result["comparison"]
  assert c["ours_update"]["tok_s"] > 0 and c["torch_update"]["tok_s"] > 0 and c["ratio_update"] > 0

  s = result["side_by_side"]
  assert s["lora"] and s["threads"] == 1 and 0 < s["n_params"] <= s["torch_params"]
  assert s["peak"]["gflop_s"] > 0 and s["peak"]["size"] == 256
  assert s["peak"]["environment"]["OPENBLAS_CORETYPE"] is None  # unset in the peak's process
  u = s["update"]
  assert u["tokens"] == 16 and u["flops"] == 6 * s["n_params"] * 16
  for f in (u["ours"], u["ours_lora"], u["torch"], s["reference_forward"]["ours"], s["reference_forward"]["torch"]):
    _rate(f)
  assert u["ratio"] > 0 and u["lora_speedup"] > 0
  [row] = s["sampling"]
  assert row["batch"] == 2 and 0.0 <= row["agreement"]["token_fraction"] <= 1.0
  for side in ("ours", "torch"):
    _rate(row[side]["whole"])
    for part in ("prefill", "decode"):  # differences of two calls' medians: None when lost in noise
      assert row[side][part]["tok_s"] is None or row[side][part]["tok_s"] > 0, (side, part, row[side][part])
  for side in ("ours", "torch"):
    assert 0 < s["memory"][f"{side}_peak_rss_bytes"] < 16 * 2**30
  for path, value in _numbers(result):
    assert math.isfinite(value), (path, value)
    if not path.startswith(MAY_NOT_BE_POSITIVE) and not any(d in path for d in DIFFERENCES):
      assert value > 0, (path, value)


def test_flop_params_are_the_weights_every_token_multiplies():
  """SmolLM2-135M (tied embeddings): 134,515,008, its whole count; untied, the input embedding is left out."""
  shape = dict(
    vocab_size=49152, hidden_size=576, intermediate_size=1536, num_layers=30, num_heads=9, num_kv_heads=3, head_dim=64
  )
  tied = ModelConfig(**shape, tie_word_embeddings=True)
  assert side_by_side.flop_params(tied) == tied.num_params == 134_515_008
  untied = ModelConfig(**shape, tie_word_embeddings=False)
  assert side_by_side.flop_params(untied) == 134_515_008 == untied.num_params - 49152 * 576


@pytest.mark.parametrize(
  "argv, message",
  [
    (["--sample_new=1"], "--sample_new must be >= 2"),
    (["--update_length=1"], "--update_length >= 2"),
    (["--set=agent.nonexistent=1"], "the config has no setting 'agent.nonexistent'"),
  ],
)
def test_bad_shapes_and_overrides_are_one_error_line(argv, message, capsys):
  assert cli.call(step, ["--config=smoke", "--tiny", *argv]) == 2
  assert message in capsys.readouterr().err
