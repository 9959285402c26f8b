"""Faults around a run and how it resumes (issue 14): a corrupt checkpoint, a changed config, SIGTERM in the warm
start, a failed checkpoint write, a read-only workdir and non-finite updates. Each ends in a clear error or in a
resumed run equal, bit for bit, to an uninterrupted one."""

import glob
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from checkpoint_damage import random_bytes
from coevolution_configs import tiny_config, tiny_flags

from genenv_jax.coevolution.build import build
from genenv_jax.training.checkpointing import Checkpointer, CheckpointError, ResumeError
from genenv_jax.training.loop import config_changes, train

CONFIG = dict(total_steps=4, checkpoint_every=2, max_checkpoints=3)


def final_state(workdir, config):
  _, target = build(config)
  with Checkpointer(os.path.join(workdir, "checkpoints"), save_every=1) as checkpointer:
    return checkpointer.restore(None, target)[0]


def assert_same(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory):
  """An uninterrupted run of CONFIG: its workdir, which tests copy and damage, and its final state."""
  workdir = tmp_path_factory.mktemp("straight")
  train(tiny_config(**CONFIG), str(workdir), log=lambda *_: None)
  return workdir, final_state(workdir, tiny_config(**CONFIG))


@pytest.fixture
def straight(straight_run):
  return straight_run[1]


def copy_run(run_dir: pathlib.Path, workdir: pathlib.Path) -> None:
  """A finished run's workdir copied into `workdir`, as training there would have left it."""
  shutil.copytree(run_dir, workdir, dirs_exist_ok=True)


def corrupt(workdir, step):
  for path in glob.glob(os.path.join(workdir, "checkpoints", str(step), "state", "**", "*"), recursive=True):
    if os.path.isfile(path) and "manifest" in os.path.basename(path):
      open(path, "wb").close()


def test_a_corrupt_latest_checkpoint_is_named_and_the_run_resumes_from_the_newest_intact(tmp_path, straight_run):
  straight = straight_run[1]
  copy_run(straight_run[0], tmp_path)
  corrupt(tmp_path, 4)
  lines = []
  summary = train(tiny_config(**CONFIG), str(tmp_path), log=lines.append)
  warnings = [line for line in lines if " is damaged: " in line]
  assert len(warnings) == 1 and "checkpoint at step 4" in warnings[0], lines
  assert "state/manifest.ocdbt" in warnings[0] and str(tmp_path / "logs" / "faults.log") in warnings[0]
  assert any("resumed from the checkpoint at step 2" in line for line in lines)
  assert summary["final_step"] == 4
  assert_same(final_state(tmp_path, tiny_config(**CONFIG)), straight)

  for step in Checkpointer(os.path.join(tmp_path, "checkpoints"), save_every=1).all_steps():
    corrupt(tmp_path, step)
  with pytest.raises(CheckpointError, match=r"no intact checkpoint in .*checkpoints.* give a new --workdir"):
    train(tiny_config(**CONFIG), str(tmp_path), log=lambda *_: None)


def test_the_cli_resumes_over_random_bytes_in_array_files_in_under_40_lines(tmp_path, straight_run):
  """The run of issue 34: random bytes over the three largest array files of the latest checkpoint printed 273,531
  characters (tensorstore specs, orbax's logging) before it resumed."""
  straight = straight_run[1]
  copy_run(straight_run[0], tmp_path)
  random_bytes(str(tmp_path / "checkpoints" / "4"))
  repo = pathlib.Path(__file__).resolve().parents[3]
  result = subprocess.run(
    [sys.executable, "-m", "genenv_jax.main", *tiny_flags(**CONFIG), f"--workdir={tmp_path}"],
    cwd=repo,
    env={**os.environ, "JAX_PLATFORMS": "cpu"},
    capture_output=True,
    text=True,
    timeout=600,
  )
  output = result.stdout + result.stderr
  lines = output.splitlines()
  assert result.returncode == 0, output[-3000:]
  assert len(lines) < 40 and "'driver'" not in output and "Traceback" not in output, output[:3000]
  [warning] = [line for line in lines if "is damaged" in line]
  assert warning.startswith(f"checkpoint at step 4 in {tmp_path}/checkpoints is damaged: array ")
  assert "does not decode: ZSTD_decompressStream() failed" in warning
  assert f"{tmp_path}/logs/faults.log" in warning
  assert f"resumed from the checkpoint at step 2 in {tmp_path}/checkpoints" in lines
  assert "Traceback (most recent call last)" in (tmp_path / "logs" / "faults.log").read_text()
  assert_same(final_state(tmp_path, tiny_config(**CONFIG)), straight)


@pytest.fixture(scope="module")
def two_step_run(tmp_path_factory):
  """A finished two-step run, checkpointed at step 2; tests resume copies of it with other configs."""
  workdir = tmp_path_factory.mktemp("two_steps")
  train(tiny_config(total_steps=2, checkpoint_every=2), str(workdir), log=lambda *_: None)
  return workdir


def test_resuming_with_a_changed_config_is_refused_with_a_diff_unless_allowed(tmp_path, two_step_run):
  copy_run(two_step_run, tmp_path)
  changed = tiny_config(total_steps=3, checkpoint_every=2, seed=7, **{"agent.optimizer.lr": 1e-3})
  with pytest.raises(ResumeError) as e:
    train(changed, str(tmp_path), log=lambda *_: None)
  message = str(e.value)
  assert "agent.optimizer.lr: 0.0001 -> 0.001" in message and "seed: 0 -> 7" in message
  assert "total_steps" not in message  # an allowed change is not listed as refused
  assert "--config.allow_config_change=true" in message

  allowed = tiny_config(total_steps=3, checkpoint_every=2, seed=7, allow_config_change=True)
  summary = train(allowed, str(tmp_path), log=lambda *_: None)
  assert summary["final_step"] == 3
  [record] = summary["config_changes"]
  assert record["from_step"] == 2 and record["changes"]["seed"] == {"saved": 0, "now": 7}
  assert json.loads((tmp_path / "summary.json").read_text())["config_changes"] == summary["config_changes"]


def test_a_key_added_later_reads_as_its_old_behaviour_in_a_saved_config():
  config = tiny_config()
  saved = json.loads(config.to_json_best_effort())
  del saved["domain"]["answer"]  # a run saved before the key existed
  assert config_changes(saved, config) == {}
  config.domain.answer = "running"
  assert config_changes(saved, config) == {"domain.answer": ("value", "running")}


def test_a_shape_change_on_resume_is_one_clear_sentence(tmp_path, two_step_run):
  copy_run(two_step_run, tmp_path)
  wider = tiny_config(total_steps=3, allow_config_change=True, **{"agent.model.intermediate_size": 48})
  with pytest.raises(ResumeError, match=r"holds a state of other shapes .* start a new --workdir") as e:
    train(wider, str(tmp_path), log=lambda *_: None)
  assert len(str(e.value)) < 600  # one sentence, not an orbax dump


@pytest.mark.parametrize("when", ["warm start agent: 1/3", "warm start agent: 3/3", "warm start env: 2/3"])
def test_sigterm_during_the_warm_start_saves_its_progress_and_the_run_resumes_exactly(tmp_path, straight, when):
  fired = []

  def log(line):
    if line.startswith(when) and not fired:
      fired.append(line)
      os.kill(os.getpid(), signal.SIGTERM)  # the run's PreemptionGuard turns it into a stop at the next poll

  summary = train(tiny_config(**CONFIG), str(tmp_path), log=log)
  assert fired and summary["preempted"] == "warm start"
  assert not (tmp_path / "checkpoints").exists() or not os.listdir(tmp_path / "checkpoints")
  lines = []
  summary = train(tiny_config(**CONFIG), str(tmp_path), log=lines.append)
  assert any(line.startswith("resuming the warm start") for line in lines), lines
  assert summary["final_step"] == 4 and "preempted" not in summary
  assert_same(final_state(tmp_path, tiny_config(**CONFIG)), straight)


def test_a_failed_checkpoint_write_stops_with_a_clear_error_and_the_previous_one_resumes(
  tmp_path, straight, monkeypatch
):
  real_save = ocp.CheckpointManager.save

  def save(self, step, *args, **kwargs):
    if step == 4:
      raise OSError(28, "No space left on device")
    return real_save(self, step, *args, **kwargs)

  monkeypatch.setattr(ocp.CheckpointManager, "save", save)
  with pytest.raises(OSError, match=r"could not write the checkpoint at step 4 .* No space left on device") as e:
    train(tiny_config(**CONFIG), str(tmp_path), log=lambda *_: None)
  assert "The checkpoint at step 2 is intact" in str(e.value)
  monkeypatch.setattr(ocp.CheckpointManager, "save", real_save)
  assert train(tiny_config(**CONFIG), str(tmp_path), log=lambda *_: None)["final_step"] == 4
  assert_same(final_state(tmp_path, tiny_config(**CONFIG)), straight)


def test_an_unwritable_workdir_fails_before_anything_is_built(tmp_path, monkeypatch):
  import genenv_jax.training.loop as loop

  blocker = tmp_path / "a-file"
  blocker.write_text("")
  built = []
  monkeypatch.setattr(loop, "build", lambda *a, **k: built.append(1))
  with pytest.raises(PermissionError, match=r"the workdir .*a-file/run is not writable .* choose a writable"):
    train(tiny_config(), str(blocker / "run"), log=lambda *_: None)

  def read_only(*_args, **_kwargs):
    raise PermissionError(13, "Permission denied")

  monkeypatch.setattr(loop.tempfile, "NamedTemporaryFile", read_only)  # as on a read-only mount (root ignores chmod)
  with pytest.raises(PermissionError, match="Permission denied"):
    train(tiny_config(), str(tmp_path / "ro"), log=lambda *_: None)
  assert built == []


def test_non_finite_updates_are_skipped_counted_and_reported(tmp_path, monkeypatch):
  from genenv_jax.rl import grpo
  from genenv_jax.training.metrics import read_tags

  real = grpo.grpo_loss

  def poisoned(*args, **kwargs):  # the test hook: every agent loss is NaN
    total, denom, metrics = real(*args, **kwargs)
    return total * np.nan, denom, metrics

  monkeypatch.setattr(grpo, "grpo_loss", poisoned)
  config = tiny_config(total_steps=3, log_every=1)
  summary = train(config, str(tmp_path), log=lambda *_: None)
  assert summary["skipped_updates"]["agent"] == 3 * config.agent.grpo.minibatches
  state = final_state(tmp_path, config)
  assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(state.agent))
  assert "agent/skipped_updates" in read_tags(str(tmp_path / "tensorboard"))["scalars"]
