"""Smoke test of the step benchmark: the smoke config with tiny models, one repeat; every figure finite and positive.

Not a timing assertion. --fast_compile (XLA's cheap CPU pipeline) keeps the compiles, most of the run, short.
"""

import math

import pytest
from conftest import json_result

pytest.importorskip("torch")
pytest.importorskip("transformers")

from genenv_jax import cli  # noqa: E402
from genenv_jax.bench import step  # noqa: E402

ARGS = [
  "--config=smoke",
  "--tiny",
  "--repeats=1",
  "--warm_start=0",
  "--fast_compile",
  "--torch_threads=1",
  "--devices=1",
]


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


def test_smoke_benchmark_reports_finite_positive_figures(capsys):
  assert cli.call(step, ARGS) == 0
  printed = capsys.readouterr().out
  assert "whole jitted step" in printed and "ours/torch" in printed
  result = json_result(printed)  # its one JSON line

  assert set(result["phases"]) == set(step.PHASES) | {"rollouts"}
  for name, f in result["phases"].items():
    for key in ("seconds", "tok_s", "tokens", "compile_s", "lower_s"):
      assert math.isfinite(f[key]) and f[key] > 0, (name, key, f[key])
  for key in ("seconds", "best_s", "tok_s", "compile_s"):
    assert math.isfinite(result["step"][key]) and result["step"][key] > 0, (key, result["step"][key])
  c = result["comparison"]
  for key in ("step", "update"):
    for side in ("ours", "torch"):
      assert math.isfinite(c[f"{side}_{key}"]["tok_s"]) and c[f"{side}_{key}"]["tok_s"] > 0, (side, key)
    assert math.isfinite(c[f"ratio_{key}"]) and c[f"ratio_{key}"] > 0, (key, c[f"ratio_{key}"])
  skip = ("/other_s", "/stage_s/warm_start", "/warm_start_fraction", "/warm_start_steps", "/load_avg")  # may be 0 / < 0
  for path, value in _numbers(result):
    assert math.isfinite(value), (path, value)
    if not path.startswith(skip):
      assert value > 0, (path, value)
