"""Smoke test of the attention benchmark at tiny sizes: every figure finite and positive, blockwise memory linear.

Not a timing assertion: only the compiled memory (deterministic for a shape) is compared.
"""

import math

from conftest import json_result

from genenv_jax import cli
from genenv_jax.bench import attention as bench

ARGS = [
  "--lengths=64,256",
  "--heads=2",
  "--kv_heads=1",
  "--head_dim=8",
  "--block=32",
  "--repeats=1",
  "--cache=256",
  "--filled=40",
  "--decode_batch_size=2",
]


def test_tiny_benchmark_reports_figures_and_linear_blockwise_memory(capsys):
  assert cli.call(bench, ARGS) == 0
  result = json_result(capsys.readouterr().out)  # its one JSON line
  assert set(result["training"]) == {"64", "256"}
  for row in result["training"].values():
    for figures in row.values():
      assert all(math.isfinite(x) and x > 0 for x in figures.values()), figures
  assert set(result["decode_ms"]) == {f"{n}_filled_{f}" for n in ("blockwise", "naive") for f in (40, 256)}
  assert all(math.isfinite(x) and x > 0 for x in result["decode_ms"].values())
  # T x4: naive's [T, T] scores grow x16; blockwise's tiles stay and its O(T) buffers grow at most x4
  assert result["temp_growth"]["naive"] > 10
  assert result["temp_growth"]["blockwise"] <= 4.0


def test_bad_arguments_are_named(capsys):
  assert cli.call(bench, ["--heads=3", "--kv_heads=2"]) == 2
  assert "--heads a multiple of --kv_heads" in capsys.readouterr().err
  assert cli.call(bench, ["--lengths=64,x"]) == 2
  assert "--lengths takes integers" in capsys.readouterr().err
