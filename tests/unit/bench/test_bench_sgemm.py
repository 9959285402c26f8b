"""The matmul peak runs in a process of its own, with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed there alone."""

import os

from genenv_jax.bench import sgemm


def test_the_peak_runs_without_the_openblas_overrides_and_with_the_given_threads(monkeypatch):
  monkeypatch.setenv("OPENBLAS_CORETYPE", "Sandybridge")
  monkeypatch.setenv("OPENBLAS_L2_SIZE", "512000")
  result = sgemm.measure(size=128, repeats=3, threads=1)
  assert result["environment"] == {"OPENBLAS_CORETYPE": None, "OPENBLAS_L2_SIZE": None, "OPENBLAS_NUM_THREADS": "1"}
  assert os.environ["OPENBLAS_CORETYPE"] == "Sandybridge"  # this process keeps them
  assert len(result["times"]) == 3 and result["gflop_s"] > 0 and result["best_gflop_s"] >= result["gflop_s"]
  if result["openblas"]:  # numpy's wheels bundle OpenBLAS: its kernel and thread count are read from the library
    assert result["openblas"]["core"] and result["openblas"]["threads"] == 1
