"""Smoke test of the attention benchmark at tiny sizes: every figure finite and positive, blockwise memory linear.

Not a timing assertion: only the compiled memory (deterministic for a shape) is compared.
"""

import json
import math

import pytest

from genenv_jax.bench import attention as bench

ARGS = [
  "--lengths=64,256",
  "--heads=2",
  "--kv-heads=1",
  "--head-dim=8",
  "--block=32",
  "--repeats=1",
  "--cache=256",
  "--filled=40",
  "--decode-batch=2",
]


def test_tiny_benchmark_reports_figures_and_linear_blockwise_memory(capsys):
  result = bench.main(ARGS)
  printed = capsys.readouterr().out
  json_lines = [line for line in printed.splitlines() if line.startswith("JSON: ")]
  assert len(json_lines) == 1 and json.loads(json_lines[0][len("JSON: ") :]) == json.loads(json.dumps(result))
  assert set(result["training"]) == {"64", "256"}
  for row in result["training"].values():
    for figures in row.values():
      assert all(math.isfinite(x) and x > 0 for x in figures.values()), figures
  assert set(result["decode_ms"]) == {f"{n}_filled_{f}" for n in ("blockwise", "naive") for f in (40, 256)}
  assert all(math.isfinite(x) and x > 0 for x in result["decode_ms"].values())
  # T x4: naive's [T, T] scores grow x16; blockwise's tiles stay and its O(T) buffers grow at most x4
  assert result["temp_growth"]["naive"] > 10
  assert result["temp_growth"]["blockwise"] <= 4.0


def test_bad_arguments_are_named():
  with pytest.raises(SystemExit):
    bench.parse_args(["--heads=3", "--kv-heads=2"])
