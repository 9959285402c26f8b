"""MetricsWriter writes valid TensorBoard event files without TensorFlow; ProgressLine; flattening; remote staging."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from genenv_jax.training import metrics as M


def test_writer_scalars_histogram_text_roundtrip(tmp_path):
  logdir = tmp_path / "tb"
  with M.MetricsWriter(logdir, enabled=True) as w:
    w.scalars(1, {"loss": jnp.float32(0.5), "agent": {"reward": 0.25, "ok": True}, "name": "ignored"})
    w.scalars(2, {"loss": 0.125, "agent": {"reward": np.float64(0.75), "ok": False}})
    w.histogram(2, "p_hat", np.array([0.0, 0.5, 0.5, 1.0]), bins=4)
    w.text(3, "samples", [["task", "answer"], ["2+2", "4"]])
  assert M.read_tags(logdir) == {
    "scalars": ["agent/ok", "agent/reward", "loss"],
    "histograms": ["p_hat"],
    "text": ["samples"],
  }
  scalars = M.read_scalars(logdir)
  assert scalars["loss"] == [(1, 0.5), (2, 0.125)]
  assert scalars["agent/reward"] == [(1, 0.25), (2, 0.75)]
  assert scalars["agent/ok"] == [(1, 1.0), (2, 0.0)]
  ((step, hist),) = M.read_tensors(logdir, "histograms")["p_hat"]
  assert step == 2 and hist.shape == (4, 3)  # [left edge, right edge, count] per bucket
  np.testing.assert_array_equal(hist[:, 2], [1, 0, 2, 1])
  ((step, table),) = M.read_tensors(logdir, "text")["samples"]
  assert step == 3 and table.shape == (2, 2) and table[1, 1] == b"4"


def test_scalars_can_route_vectors_to_histograms(tmp_path):
  with M.MetricsWriter(tmp_path, enabled=True) as w:
    w.scalars(5, {"env": {"p_hat": jnp.arange(8.0) / 8, "r_env": 0.5}}, prefix="train", histograms=True, bins=8)
    w.scalars(6, {"env": {"p_hat": jnp.arange(8.0) / 8}})  # dropped: no scalars, histograms off
  tags = M.read_tags(tmp_path)
  assert tags == {"scalars": ["train/env/r_env"], "histograms": ["train/env/p_hat"]}
  ((step, hist),) = M.read_tensors(tmp_path, "histograms")["train/env/p_hat"]
  assert step == 5 and hist[:, 2].sum() == 8


def test_each_summary_carries_the_description_of_its_tag(tmp_path):
  described = {"loss": "the loss", "train/env/p_hat": "p̂ per task", "p_hat": "p̂ again", "samples": "a table"}
  with M.MetricsWriter(tmp_path, enabled=True, describe=described.get) as w:
    w.scalars(1, {"loss": 0.5, "other": 1.0})
    w.scalars(1, {"env": {"p_hat": jnp.arange(4.0)}}, prefix="train", histograms=True, bins=2)
    w.histogram(2, "p_hat", np.array([0.0, 1.0]), edges=[-0.5, 0.5, 1.5])
    w.text(3, "samples", "text")
  assert M.read_descriptions(tmp_path) == {**described, "other": ""}  # a tag it does not describe has none


def test_flatten_metrics():
  scalars, arrays = M.flatten_metrics(
    {"a": {"b": jnp.int32(3), "c": jnp.ones((1,)), "v": jnp.zeros((2, 3))}, "s": "text", "n": None, "f": 1.5},
    prefix="x",
  )
  assert scalars == {"x/a/b": 3.0, "x/a/c": 1.0, "x/f": 1.5}
  assert list(arrays) == ["x/a/v"] and arrays["x/a/v"].shape == (2, 3)
  assert all(type(v) is float for v in scalars.values())


def test_text_rejects_ragged_rows(tmp_path):
  with M.MetricsWriter(tmp_path, enabled=True) as w:
    with pytest.raises(ValueError, match="same number of cells"):
      w.text(0, "t", [["a", "b"], ["c"]])


def test_disabled_writer_is_a_noop(tmp_path):
  logdir = tmp_path / "other_process"
  w = M.MetricsWriter(logdir, enabled=False)
  w.scalars(0, {"x": 1.0})
  w.histogram(0, "h", [1.0, 2.0])
  w.text(0, "t", "hello")
  w.flush()
  w.close()
  assert not logdir.exists()


def test_closed_writer_raises(tmp_path):
  w = M.MetricsWriter(tmp_path, enabled=True)
  w.close()
  w.close()  # idempotent
  with pytest.raises(RuntimeError, match="closed"):
    w.scalars(1, {"x": 1.0})


def test_remote_logdir_is_staged_locally_and_synced(tmp_path):
  fsspec = pytest.importorskip("fsspec")
  remote = "memory://genenv_test/run1"
  with M.MetricsWriter(remote, local_dir=tmp_path / "stage", enabled=True) as w:
    w.scalars(7, {"loss": 2.0})
    w.flush()
    fs = fsspec.filesystem("memory")
    names = [os.path.basename(p) for p in fs.ls("/genenv_test/run1", detail=False)]
    assert len(names) == 1 and names[0].startswith("events.out.tfevents.")
    w.scalars(8, {"loss": 1.0})
  copy = tmp_path / "downloaded"
  copy.mkdir()
  fs.get_file(f"/genenv_test/run1/{names[0]}", str(copy / names[0]))
  assert M.read_scalars(copy)["loss"] == [(7, 2.0), (8, 1.0)]
  fs.rm("/genenv_test", recursive=True)


def test_unsupported_remote_scheme_warns_and_keeps_local_copy(tmp_path, caplog):
  with caplog.at_level("WARNING", logger="genenv_jax.training.metrics"):
    w = M.MetricsWriter("nosuchscheme://bucket/tb", local_dir=tmp_path, enabled=True)
  assert "rsync" in caplog.text and str(tmp_path) in caplog.text
  w.scalars(1, {"x": 3.0})
  assert w.sync() is False
  w.close()
  assert M.read_scalars(tmp_path)["x"] == [(1, 3.0)]


def test_writing_and_reading_work_with_tensorflow_unimportable(tmp_path):
  # sys.modules[name] = None makes `import tensorflow` raise ImportError, whether or not TF is installed.
  code = (
    "import sys; sys.modules['tensorflow'] = None; from genenv_jax.training import metrics as M; "
    "w = M.MetricsWriter(sys.argv[1], enabled=True); w.scalars(1, {'a': 1.0}); w.histogram(1, 'h', [1.0, 2.0]); "
    "w.text(1, 't', 'x'); w.close(); print(M.read_tags(sys.argv[1]), M.read_scalars(sys.argv[1]))"
  )
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  out = subprocess.run(
    [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
  )
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.strip().splitlines()[-1] == (
    "{'scalars': ['a'], 'histograms': ['h'], 'text': ['t']} {'a': [(1, 1.0)]}"
  )


class FakeClock:
  def __init__(self):
    self.now = 100.0

  def __call__(self) -> float:
    return self.now


def test_progress_line_rate_eta_and_metrics():
  clock, stream = FakeClock(), io.StringIO()
  progress = M.ProgressLine(
    100, every=10, keys=("loss", "agent/reward", "missing"), stream=stream, clock=clock, enabled=True
  )
  clock.now += 1.0
  assert progress.update(5, {"loss": 1.0}) is None  # not due: nothing printed
  clock.now += 4.0
  line = progress.update(10, {"loss": jnp.float32(0.5), "agent": {"reward": 0.25}})
  assert line == "step 10/100 (10.0%) | 2 steps/s | elapsed 0:00:05 | ETA 0:00:45 | loss 0.5 | agent/reward 0.25"
  clock.now += 3600.0
  line = progress.update(20)
  assert "0.00278 steps/s" in line and "ETA 8:00:00" in line and "elapsed 1:00:05" in line
  assert stream.getvalue().splitlines() == [
    "step 10/100 (10.0%) | 2 steps/s | elapsed 0:00:05 | ETA 0:00:45 | loss 0.5 | agent/reward 0.25",
    line,
  ]


def test_progress_line_last_step_and_resume():
  clock, stream = FakeClock(), io.StringIO()
  progress = M.ProgressLine(25, every=10, start_step=20, stream=stream, clock=clock, enabled=True)
  clock.now += 2.5
  assert progress.update(25) == "step 25/25 (100.0%) | 2 steps/s | elapsed 0:00:02 | ETA 0:00:00"
  silent = M.ProgressLine(25, every=1, stream=stream, clock=clock, enabled=False)
  assert silent.update(10) is None and len(stream.getvalue().splitlines()) == 1


def test_format_duration():
  assert M.format_duration(0) == "0:00:00"
  assert M.format_duration(3723.4) == "1:02:03"
  assert M.format_duration(90000) == "25:00:00"
  assert M.format_duration(float("nan")) == "--:--:--"
  assert M.format_duration(float("inf")) == "--:--:--"


def test_read_missing_logdir_raises(tmp_path):
  with pytest.raises(FileNotFoundError):
    M.read_scalars(tmp_path / "absent")
