"""The `smoke` config learns, so a broken build and a working one look different; its TensorBoard events hold no
phantom, dead or duplicate tags (training/log_tags.py).

Thresholds come from 5 seeds of `python -m genenv_jax.main --config=configs/default.py:smoke --config.seed=S`
(README, "Running a run"): held-out accuracy 0.000 before the warm start on every seed, 0.60-0.89 at the end; they
are set far inside that margin. A run whose gradients, sampler or verifier were broken stays near 0.
"""

import json
import os
import subprocess
import sys

import pytest
from conftest import FAST_COMPILE_FLAGS, PROJECT_ROOT
from event_checks import constant_zero_and_duplicate_tags

from genenv_jax.training.metrics import read_scalars, read_tags


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
  """The run as the thresholds' runs were made: the command, on one CPU device, with XLA's default pipeline (this run
  is bound by its steps, not by compiling; the session's cheap-compile flags would slow it)."""
  workdir = tmp_path_factory.mktemp("smoke")
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env["XLA_FLAGS"] = " ".join(
    f for f in env.get("XLA_FLAGS", "").replace(FAST_COMPILE_FLAGS, "").split() if "device_count" not in f
  )
  proc = subprocess.run(
    [sys.executable, "-m", "genenv_jax.main", "--config=configs/default.py:smoke", f"--workdir={workdir}"],
    cwd=PROJECT_ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
  return workdir, json.loads((workdir / "summary.json").read_text())


def test_smoke_learns(smoke_run):
  _, summary = smoke_run
  before = summary["warm_start"]["heldout_accuracy_before"]
  final = summary["evals"][-1]
  se = (final["accuracy"] * (1 - final["accuracy"]) / final["n"]) ** 0.5
  assert before <= 0.05
  assert final["accuracy"] >= 0.3 and final["accuracy"] - before > 4 * se
  assert max(r["curriculum/band_frac"] for r in summary["steps"]) > 0  # the agent met tasks at its frontier
  assert max(r["agent/reward_mean"] for r in summary["steps"]) > 0.2


def test_smoke_run_has_no_constant_zero_or_duplicate_tags(smoke_run):
  logdir = str(smoke_run[0] / "tensorboard")
  scalars = read_scalars(logdir)
  zero, dups = constant_zero_and_duplicate_tags(scalars)
  assert zero == [], f"tags that are 0 at every logged step: {zero}"
  assert dups == [], f"tags that repeat another tag: {dups}"
  assert "agent/kl_to_reference" in scalars and scalars["agent/kl_to_reference"][-1][1] > 0  # RL moved the agent
  tags = read_tags(logdir)
  assert {"curriculum/p_hat", "curriculum/difficulty"} <= set(tags["histograms"])
  assert {"curriculum/examples", "eval/by_difficulty", "run/config"} <= set(tags["text"])
