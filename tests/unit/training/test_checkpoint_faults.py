"""A damaged checkpoint step is one warning line naming the step and the cause; orbax's output goes to the fault log.

Each kind of damage (random bytes in array files, a truncated or missing array file, a manifest or metadata file that
does not decode) is made on a copy of two saved steps; restoring the newest intact one must return the older step, warn
once, print nothing else (file descriptors 1 and 2, late reports of the failed reads included), and keep the full
error in the fault log."""

from __future__ import annotations

import gc
import glob
import logging
import re
import shutil
import time

import jax
import numpy as np
import pytest
from checkpoint_damage import bad_manifest, bad_metadata, missing, random_bytes, truncated

from genenv_jax.training import checkpoint_faults as F
from genenv_jax.training.checkpointing import Checkpointer, CheckpointError, abstract_of, fault_log_path


def make_state(seed: int) -> dict:
  """Arrays large enough (over orbax's 1 KiB inline limit) to live in the OCDBT data files."""
  keys = jax.random.split(jax.random.key(seed), 3)
  return {
    "w": jax.random.normal(keys[0], (64, 64)),
    "v": jax.random.normal(keys[1], (128, 32)),
    "u": jax.random.normal(keys[2], (48, 48)),
    "b": np.arange(8, dtype=np.float32) + seed,
  }


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  directory = tmp_path_factory.mktemp("saved") / "checkpoints"
  with Checkpointer(directory, save_every=1) as checkpointer:
    checkpointer.save(1, make_state(1), {"step": 1})
    checkpointer.save(2, make_state(2), {"step": 2})
  return directory


DAMAGE = {
  "random bytes": (random_bytes, r"array \S+ does not decode: ZSTD_decompressStream\(\) failed"),
  "truncated": (truncated, r"array file state/ocdbt.process_0/d/\w+ is truncated \(\d+ bytes, \d+ referenced\)"),
  "missing": (missing, r"array file state/ocdbt.process_0/d/\w+ is missing"),
  "bad manifest": (bad_manifest, r"state/manifest.ocdbt does not decode \(Encoded length"),
  "bad metadata": (bad_metadata, r"state/_METADATA is not valid JSON \(Expecting property name"),
  "bad json metadata": (
    lambda d: bad_metadata(d, "metadata/metadata"),
    r"metadata/metadata is not valid JSON \(Expecting property name",
  ),
}


def settle() -> None:
  """Lets tensorstore's threads deliver their late completions and the failed reads be collected."""
  for _ in range(3):
    gc.collect()
    time.sleep(0.1)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_each_kind_of_damage_is_one_line_naming_step_and_cause_and_nothing_else_is_printed(
  kind, saved, tmp_path, capfd
):
  damage, cause = DAMAGE[kind]
  directory = tmp_path / "run" / "checkpoints"
  shutil.copytree(saved, directory)
  damage(str(directory / "2"))
  capfd.readouterr()
  lines = []
  with Checkpointer(directory, save_every=1) as checkpointer:
    step, state, metadata = checkpointer.restore_newest_intact(abstract_of(make_state(0)), warn=lines.append)
    assert checkpointer.all_steps() == [1]  # the damaged step is set aside, so the run can write it again
  settle()
  out, err = capfd.readouterr()
  assert (out, err) == ("", ""), f"printed besides the warning:\n{out}{err}"[:3000]
  assert step == 1 and metadata == {"step": 1}
  for name, value in make_state(1).items():
    np.testing.assert_array_equal(np.asarray(state[name]), np.asarray(value))
  [line] = lines
  log = str(tmp_path / "run" / "logs" / "faults.log")
  assert line.startswith(f"checkpoint at step 2 in {directory} is damaged: ")
  assert line.endswith(f"trying an older one (full error in {log})")
  stated = line.split(" is damaged: ")[1].split("; moved to ")[0]
  assert len(stated) < 200 and "'driver'" not in line, stated
  assert re.search(cause, stated), stated
  text = open(log).read()
  # the fault's entry, headed "=== time checkpoint at step 2 in ..."; a late report of an earlier read in this process
  # (tensorstore's cleanup) may precede it, as the log is where such reports go
  assert re.search(rf"^=== .*checkpoint at step 2 in {re.escape(str(directory))}", text, re.M), text[:2000]
  assert "Traceback (most recent call last)" in text
  assert glob.glob(str(directory) + ".corrupt/2-*")


def test_the_verbose_resume_prints_the_full_error(saved, tmp_path, capfd):
  directory = tmp_path / "checkpoints"
  shutil.copytree(saved, directory)
  random_bytes(str(directory / "2"))
  lines = []
  with Checkpointer(directory, save_every=1) as checkpointer:
    assert checkpointer.restore_newest_intact(abstract_of(make_state(0)), warn=lines.append, verbose=True)[0] == 1
  settle()
  err = capfd.readouterr().err
  assert "Traceback (most recent call last)" in err and "ZSTD_decompressStream" in err
  assert len(lines) == 1


def test_no_intact_step_names_the_directory_and_the_fault_log(saved, tmp_path, capfd):
  directory = tmp_path / "checkpoints"
  shutil.copytree(saved, directory)
  missing(str(directory / "1"))
  truncated(str(directory / "2"))
  lines = []
  log = str(tmp_path / "faults.log")
  with Checkpointer(directory, save_every=1) as checkpointer:
    with pytest.raises(CheckpointError, match=rf"steps \[2, 1\] all failed to restore; details in {log}\)"):
      checkpointer.restore_newest_intact(abstract_of(make_state(0)), warn=lines.append, fault_log=log)
  settle()
  assert capfd.readouterr() == ("", "")
  assert [line.split(" is damaged: ")[1].split(" is ")[1][:7] for line in lines] == ["truncat", "missing"]
  assert open(log).read().count("=== ") == 2


def test_the_fault_log_lies_beside_the_checkpoint_directory():
  assert fault_log_path("/w/run/checkpoints") == "/w/run/logs/faults.log"
  assert fault_log_path("gs://bucket/run/checkpoints/") == "gs://bucket/run/logs/faults.log"


def test_error_reason_drops_the_tensorstore_spec():
  inner = ValueError(
    'FAILED_PRECONDITION: Error reading "agent.embed/0.0" in OCDBT database at local file "/c/4/state/": '
    "ZSTD_decompressStream() failed: Unknown frame descriptor; at byte 0 [tensorstore_spec='{\"driver\": \"file\"}']"
  )
  try:
    try:
      raise inner
    except ValueError as e:
      raise Exception("Encountered error while reading array index: (). See full TensorStore details: {...}") from e
  except Exception as outer:  # noqa: BLE001
    reason = F.error_reason(outer)
  assert reason == "array agent.embed/0.0 does not decode: ZSTD_decompressStream() failed: Unknown frame descriptor"
  assert F.error_reason(OSError("disk gone\n{'driver': 'file'}")) == "OSError: disk gone"


def test_an_intact_step_describes_as_the_error_reason(saved):
  assert F.describe_damage(str(saved / "2"), KeyError("x")) == "KeyError: 'x'"


def test_a_restore_that_succeeds_keeps_what_it_printed(saved, capfd, monkeypatch):
  real = Checkpointer.restore

  def restore(self, *args, **kwargs):
    logging.getLogger("orbax-test").warning("a warning of orbax's own")
    return real(self, *args, **kwargs)

  monkeypatch.setattr(Checkpointer, "restore", restore)
  with Checkpointer(saved, save_every=1) as checkpointer:
    assert checkpointer.restore_newest_intact(abstract_of(make_state(0)), warn=print)[0] == 2
  assert "a warning of orbax's own" in capfd.readouterr().err


def test_an_unretrieved_tensorstore_read_error_goes_to_the_fault_log_not_the_console(tmp_path, caplog):
  """asyncio reports the other arrays' failed reads of a damaged step when their tasks are collected, which may be
  after the restore attempt: those reports go to the fault log; any other asyncio error is still logged."""
  log = str(tmp_path / "faults.log")
  F.route_late_reports(log)
  try:
    asyncio_log = logging.getLogger("asyncio")
    for message in ('DATA_LOSS: Error opening "zarr" driver: Error reading "w/.zarray"', "a task's own bug"):
      try:
        raise ValueError(message)
      except ValueError:
        asyncio_log.error("Task exception was never retrieved", exc_info=True)
    shown = [str(r.exc_info[1]) for r in caplog.records if r.name == "asyncio"]
    assert shown == ["a task's own bug"]
    text = open(log).read()
    assert text.startswith("(late report) Task exception was never retrieved: ") and "DATA_LOSS" in text
  finally:
    F.route_late_reports(None)
