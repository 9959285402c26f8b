"""summary.json's step rows: the step's metric names (those of TensorBoard), and a file written before them (its rows
under short names of their own) still resumes."""

import json

import numpy as np

from configs.default import get_config
from genenv_jax.training import log_tags
from genenv_jax.training.loop import PROGRESS_KEYS, SUMMARY_KEYS, Summary, _reported, summary_record


def test_summary_rows_and_the_progress_line_use_the_tensorboard_tags():
  for name in SUMMARY_KEYS + PROGRESS_KEYS:
    assert log_tags.description(name) is not None, name  # a tag TensorBoard shows, under the same name
  host = {name: np.float32(0.5) for name in SUMMARY_KEYS}
  assert summary_record(host) == {name: 0.5 for name in SUMMARY_KEYS}
  host["curriculum/invalid_frac"] = np.float32(1.0)  # no valid env task: no fresh-task figure, as in TensorBoard
  row = summary_record(host)
  assert not set(row) & set(log_tags.FRESH_TASKS) and row["agent/reward_mean"] == 0.5
  assert not _reported("curriculum/p_hat_mean", row) and _reported("agent/reward_mean", row)
  assert _reported("agent/entropy", row)  # not a summary figure: the progress line shows what the step gives


def test_a_run_resumes_over_a_summary_written_before_the_step_names(tmp_path):
  path = tmp_path / "summary.json"
  old = {
    "config": {},
    "steps": [
      {"step": 1, "p_hat_mean": 0.5, "band_frac": 0.25, "invalid_frac": 0.0, "agent_reward": 0.4},
      {"step": 2, "p_hat_mean_base_seeded": 0.6, "p_hat_mean_pool_seeded": 0.3, "replay_p_hat_mean": 0.7},
      {"step": 3, "p_hat_mean": 0.1},
    ],
    "evals": [{"step": 0, "accuracy": 0.1}, {"step": 3, "accuracy": 0.2}],
    "wall_time_s": 5.0,
  }
  path.write_text(json.dumps(old))
  summary = Summary(str(path), get_config("smoke"), resume_step=2)  # the checkpoint at step 2: step 3 is dropped
  assert summary.data["steps"] == [
    {
      "step": 1,
      "curriculum/p_hat_mean": 0.5,
      "curriculum/band_frac": 0.25,
      "curriculum/invalid_frac": 0.0,
      "agent/reward_mean": 0.4,
    },
    {
      "step": 2,
      "curriculum/p_hat_mean_from_base_seeds": 0.6,
      "curriculum/p_hat_mean_from_generated_seeds": 0.3,
      "curriculum/replay_p_hat_mean": 0.7,
    },
  ]
  assert summary.data["evals"] == [{"step": 0, "accuracy": 0.1}] and summary.data["wall_time_s"] == 5.0
  summary.data["steps"].append({"step": 3, **summary_record({"curriculum/p_hat_mean": np.float32(0.75)})})
  summary.write()
  rows = json.loads(path.read_text())["steps"]  # one set of names in the file from now on
  assert all(set(r) <= {"step", *SUMMARY_KEYS} for r in rows) and rows[-1] == {"step": 3, "curriculum/p_hat_mean": 0.75}


def test_a_resumed_run_keeps_the_perf_figures_of_the_steps_it_keeps(tmp_path):
  """summary.json's `perf`: the spans up to the checkpoint resumed from are kept, later ones dropped (their steps run
  again), and the peak memory of the earlier process stays until a larger one replaces it at the end."""
  path = tmp_path / "summary.json"
  old = {"steps": [], "evals": [], "perf": {"step_s": [[5, 2.0], [10, 1.0], [15, 1.5]], "host_peak_memory_gib": 3.5}}
  path.write_text(json.dumps(old))
  summary = Summary(str(path), get_config("smoke"), resume_step=10)
  assert summary.data["perf"] == {"step_s": [[5, 2.0], [10, 1.0]], "host_peak_memory_gib": 3.5}
  fresh = Summary(str(tmp_path / "new.json"), get_config("smoke"), resume_step=None)
  assert fresh.data["perf"] == {"step_s": [], "host_peak_memory_gib": 0.0}
