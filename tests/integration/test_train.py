"""The run around the step: exact resume, SIGTERM checkpointing, the CLI, TensorBoard tags, summary.json."""

import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
from coevolution_configs import tiny_config
from conftest import FAST_COMPILE_FLAGS, PROJECT_ROOT

from genenv_jax import cli
from genenv_jax.coevolution.build import build
from genenv_jax.training.checkpointing import Checkpointer
from genenv_jax.training.loop import train
from genenv_jax.training.metrics import read_scalars, read_tags

PROJECT = str(PROJECT_ROOT)


def final_state(workdir, config):
  _, target = build(config)
  state, _ = Checkpointer(os.path.join(workdir, "checkpoints"), save_every=1).restore(None, target)
  return state


def assert_states_equal(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def quiet(*_):
  pass


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory):
  config = tiny_config(total_steps=4, checkpoint_every=2, log_every=3)  # step 2: saved, not logged
  workdir = tmp_path_factory.mktemp("straight")
  summary = train(config, str(workdir), log=quiet)
  assert [r["step"] for r in summary["steps"]] == [1, 2, 3, 4]  # a row for every step, whatever log_every
  return config, workdir


def test_resume_gives_the_same_final_state_as_a_straight_run(tmp_path, straight_run):
  config, straight = straight_run
  train(tiny_config(total_steps=2, checkpoint_every=2), str(tmp_path / "resumed"), log=quiet)
  summary = train(tiny_config(total_steps=4, checkpoint_every=2), str(tmp_path / "resumed"), log=quiet)
  assert summary["final_step"] == 4
  assert [r["step"] for r in summary["steps"]] == [1, 2, 3, 4]
  assert_states_equal(final_state(straight, config), final_state(tmp_path / "resumed", config))  # log_every 3 vs 1


def test_export_of_a_trained_agent_loads_in_transformers(tmp_path, straight_run):
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  import genenv_jax as gj
  from genenv_jax import cli, export
  from genenv_jax.evaluation.agents import load_workdir

  _, workdir = straight_run
  assert cli.call(export, ["--workdir", str(workdir), "--out", str(tmp_path / "hf")]) == 0
  assert (tmp_path / "hf" / "arith_spm.model").exists()
  model, _, step = load_workdir(workdir)
  assert step == 4
  reference = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
  ids = np.random.RandomState(0).randint(3, 500, size=(2, 7))
  with torch.no_grad():
    expected = reference(input_ids=torch.as_tensor(ids)).logits.numpy()
  np.testing.assert_allclose(np.asarray(gj.forward(model, ids)), expected, atol=1e-4)
  assert cli.call(export, ["--workdir", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")]) == 2


def test_export_refuses_a_non_empty_directory_and_replaces_it_whole_with_overwrite(tmp_path, straight_run, capsys):
  import genenv_jax as gj
  from genenv_jax import cli, export
  from genenv_jax.models import safetensors_io

  _, workdir = straight_run
  out = tmp_path / "hf"
  out.mkdir()
  stale_index = {"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}
  (out / safetensors_io.INDEX_FILE).write_text(json.dumps(stale_index))  # an older sharded export's index
  (out / "model-00002-of-00002.safetensors").write_bytes(b"stale")
  assert cli.call(export, ["--workdir", str(workdir), "--out", str(out)]) == 2
  assert "is not empty; pass --overwrite" in capsys.readouterr().err
  assert (out / "model-00002-of-00002.safetensors").read_bytes() == b"stale"  # refused: untouched
  assert cli.call(export, ["--workdir", str(workdir), "--out", str(out), "--overwrite"]) == 0
  assert sorted(p.name for p in out.glob("*.safetensors")) == ["model.safetensors"]
  assert not (out / safetensors_io.INDEX_FILE).exists()
  gj.load_hf(out)  # our own loader accepts it
  assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging or old copy left
  assert cli.call(export, ["--workdir", str(workdir), "--out", str(out / "config.json")]) == 2  # a file, not a dir


def run_cli(workdir, *overrides, timeout=600, **popen):
  cmd = [
    sys.executable,
    "-m",
    "genenv_jax.main",
    "--config=configs/default.py:smoke+tiny",
    f"--workdir={workdir}",
    "--config.warm_start.agent_steps=2",
    "--config.warm_start.env_steps=2",
    "--config.agent.grpo.group_size=4",
    *overrides,
  ]
  env = {
    **os.environ,
    "XLA_FLAGS": f"--xla_force_host_platform_device_count=2 {FAST_COMPILE_FLAGS}",
    "JAX_PLATFORMS": "cpu",
  }
  return subprocess.Popen(
    cmd, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen
  )


def test_cli_smoke_run_writes_events_checkpoint_and_summary(tmp_path):
  args = ("--config.total_steps=3", "--config.checkpoint_every=3", "--config.eval_every=3", "--config.log_every=2")
  proc = run_cli(tmp_path, *args)
  out, _ = proc.communicate(timeout=600)
  assert proc.returncode == 0, out[-3000:]
  assert "held-out accuracy" in out and "ETA" in out
  tags = read_tags(str(tmp_path / "tensorboard"))
  for tag in (  # logged at every step, whatever the models do (training/log_tags.py)
    "agent/reward_mean",
    "agent/kl_to_reference",
    "agent/groups_without_signal_frac",
    "agent/entropy",
    "agent/grad_norm_before_clip",
    "agent/grad_clipped_frac",
    "agent/lr",
    "curriculum/invalid_frac",
    "curriculum/band_low",
    "curriculum/band_high",
    "perf/step_s",
    "perf/agent_tokens_per_s",
    "perf/host_peak_memory_gib",
    "pool/train_size",
    "pool/env_size",
    "warm_start/agent_loss",
    "warm_start/env_loss",
    "eval/accuracy",
    "eval/accuracy_se",
  ):
    assert tag in tags["scalars"], tag
  assert {"curriculum/examples", "eval/by_difficulty", "run/config"} <= set(tags["text"])
  assert Checkpointer(tmp_path / "checkpoints", save_every=1).latest_step() == 3
  summary = json.loads((tmp_path / "summary.json").read_text())
  if any(r["curriculum/invalid_frac"] < 1 for r in summary["steps"]):  # histograms are over valid generated tasks only
    assert {"curriculum/p_hat", "curriculum/difficulty"} <= set(tags["histograms"])
  assert summary["config"]["total_steps"] == 3 and summary["wall_time_s"] > 0
  # each logged span's seconds per step (steps 2 and 3 logged) and the process's peak memory, printed at the end
  perf = summary["perf"]
  assert [s for s, _ in perf["step_s"]] == [2, 3] and all(sec > 0 for _, sec in perf["step_s"])
  assert 0.1 < perf["host_peak_memory_gib"] < 64 and "time and memory: a step" in out and "peak resident" in out
  # TensorBoard gets one step in log_every (and the last); summary.json, which the verdicts read, gets every step
  assert [s for s, _ in read_scalars(str(tmp_path / "tensorboard"))["agent/reward_mean"]] == [2, 3]
  assert [r["step"] for r in summary["steps"]] == [1, 2, 3]
  last = summary["steps"][-1]
  assert {"curriculum/invalid_frac", "agent/reward_mean"} <= set(last)  # the step's names, as in TensorBoard
  fresh = {"curriculum/p_hat_mean", "curriculum/band_frac", "curriculum/difficulty_mean"}  # need a valid task
  assert fresh <= set(last) if last["curriculum/invalid_frac"] < 1 else not fresh & set(last)
  assert "by_difficulty" in summary["evals"][-1]
  assert 0.0 <= summary["warm_start"]["heldout_accuracy_before"] <= 1.0 and "before the warm start" in out
  last = summary["evals"][-1]  # per-item scores pair evaluations item by item (stats.paired_difference)
  assert last["n"] == len(last["correct"]) > 0 and set(last["correct"]) <= {0, 1}
  assert sum(last["correct"]) / last["n"] == pytest.approx(last["accuracy"])


def test_sigterm_saves_a_checkpoint_and_exits_cleanly(tmp_path):
  proc = run_cli(tmp_path, "--config.total_steps=1000", "--config.checkpoint_every=1000")
  deadline = time.time() + 600
  summary_path = tmp_path / "summary.json"
  while time.time() < deadline and proc.poll() is None:
    if summary_path.exists() and json.loads(summary_path.read_text())["steps"]:
      break
    time.sleep(0.5)
  assert proc.poll() is None, proc.communicate()[0][-3000:]
  proc.send_signal(signal.SIGTERM)
  out, _ = proc.communicate(timeout=300)
  assert proc.returncode == 0, out[-3000:]
  assert "preemption signal" in out
  step = Checkpointer(tmp_path / "checkpoints", save_every=1).latest_step()
  assert step is not None and 1 <= step < 1000


def test_sigterm_during_the_warm_start_exits_cleanly_and_the_run_resumes(tmp_path):
  args = ("--config.total_steps=2", "--config.warm_start.agent_steps=400", "--config.warm_start.env_steps=2")
  proc = run_cli(tmp_path, *args)
  deadline, seen = time.time() + 600, ""
  while time.time() < deadline and "warm start agent" not in seen:
    line = proc.stdout.readline()
    if not line:
      break
    seen += line
  assert "warm start agent" in seen, seen[-3000:]
  proc.send_signal(signal.SIGTERM)
  out, _ = proc.communicate(timeout=300)
  assert proc.returncode == 0, (seen + out)[-3000:]
  assert "preemption signal during the warm start: saved its progress (agent phase" in out
  assert Checkpointer(tmp_path / "warm_start", save_every=1).latest_step() is not None
  proc = run_cli(tmp_path, *args)
  out, _ = proc.communicate(timeout=600)
  assert proc.returncode == 0, out[-3000:]
  assert "resuming the warm start: agent phase" in out and "finished at step 2" in out


def test_unknown_config_key_fails_before_any_work(tmp_path):
  proc = run_cli(tmp_path, "--config.agent.optimiser.lr=1e-3")
  out, _ = proc.communicate(timeout=120)
  assert proc.returncode != 0 and "optimiser" in out
  assert not (tmp_path / "checkpoints").exists()


def test_wrong_type_fails_before_any_work(tmp_path):
  proc = run_cli(tmp_path, "--config.total_steps=many")
  out, _ = proc.communicate(timeout=120)
  assert proc.returncode != 0 and "total_steps" in out
  assert not (tmp_path / "checkpoints").exists()


def test_unknown_variant_is_a_clear_error():
  from configs.default import get_config

  with pytest.raises(ValueError, match="unknown variant 'fast'"):
    get_config("fast")


def test_summary_records_leave_out_fresh_task_figures_when_every_env_task_is_invalid():
  from genenv_jax.training.loop import summary_record

  host = {
    "curriculum/p_hat_mean": np.float32(0.0),
    "curriculum/band_frac": np.float32(0.0),
    "curriculum/difficulty_mean": np.float32(0.0),
    "curriculum/invalid_frac": np.float32(1.0),
    "agent/reward_mean": np.float32(0.25),
    "agent/loss": np.float32(0.5),  # not a summary figure
  }
  assert summary_record(host) == {"curriculum/invalid_frac": 1.0, "agent/reward_mean": 0.25}
  host["curriculum/invalid_frac"] = np.float32(0.5)
  row = summary_record(host)
  assert row["curriculum/difficulty_mean"] == 0.0 and row["curriculum/p_hat_mean"] == 0.0


def test_env_warm_start_partners_are_nearby_in_difficulty_or_the_seed_itself_and_can_be_unbiased():
  from genenv_jax.training.warm_start import nearby_difficulty_partners

  difficulty = np.asarray([2, 2, 3, 5, 5, 9])
  rng = np.random.default_rng(0)
  partners = nearby_difficulty_partners(difficulty, rng)
  idx = np.arange(len(difficulty))
  assert np.all(np.abs(difficulty[partners] - difficulty) <= 1)
  assert np.all((partners != idx)[:5]) and partners[5] == 5  # the lone level-9 task has no neighbour
  assert np.array_equal(nearby_difficulty_partners(difficulty, rng, copy_frac=1.0), idx)
  many = np.repeat(difficulty, 200)
  copies = (nearby_difficulty_partners(many, rng, copy_frac=0.5) == np.arange(len(many)))[: 5 * 200].mean()
  assert 0.4 < copies < 0.6
  # seeds skewed toward easy levels (level k weighted 0.6**k, as the demo's): the partner is not skewed with them
  skewed = np.repeat(np.arange(2, 9), [int(4000 * 0.6**k) for k in range(7)])
  biased, unbiased = (nearby_difficulty_partners(skewed, rng, level_first=first) for first in (False, True))
  for level in range(3, 8):
    at = skewed == level
    assert (skewed[biased] - skewed)[at].mean() < -0.2  # uniform over the tasks: toward the more numerous level
    shift = (skewed[unbiased] - skewed)[at]
    assert abs(shift.mean()) < 0.1 and set(shift) == {-1, 0, 1}, (level, shift.mean())
  assert np.all(nearby_difficulty_partners(difficulty, rng, level_first=True)[5:] == 5)  # the lone level-9 task


def test_task_rate_spread_samples_the_trained_agent_on_every_heldout_task(straight_run, capsys):
  from genenv_jax.scripts import task_rate_spread

  config, workdir = straight_run
  difficulty, outcomes, settings = task_rate_spread.measure(str(workdir), samples=4, seed=0)
  assert outcomes.shape == (len(difficulty), 4) and len(difficulty) == config.domain.num_heldout
  assert set(np.unique(outcomes).tolist()) <= {0.0, 1.0}
  answers = settings.pop("answers")  # the held-out tasks' spec rows: the sums
  assert settings == dict(group_size=config.agent.grpo.group_size, alpha=0.5, k_min=0.1)
  assert answers.shape[0] == len(difficulty)
  assert np.array_equal(task_rate_spread.measure(str(workdir), samples=4, seed=0)[1], outcomes)  # deterministic
  assert cli.call(task_rate_spread, ["--workdir", str(workdir), "--samples", "2"]) == 0
  out = capsys.readouterr().out
  assert "| level | tasks |" in out and "best level" in out and "P(in band again) needs --samples >=" in out
  assert "α = 0.50 (the run): a band-chasing env is pulled toward level" in out
  assert "its answer explains |" in out
  assert cli.call(task_rate_spread, ["--workdir", str(workdir), "--samples", "2", "--shuffle_operands"]) == 0
  assert "(operands in a random order per answer)" in capsys.readouterr().out


def test_env_validity_compares_the_initial_and_trained_env_on_each_kind_of_prompt(straight_run, capsys):
  from genenv_jax.scripts import env_validity

  config, workdir = straight_run
  cells, counts = env_validity.measure(str(workdir), draws=2, seed=0)
  assert counts["seed"] == config.domain.num_seeds
  kinds = ["seed"] + (["generated", "generated, p̂ ?"] if counts["generated"] else [])
  assert sorted(cells) == sorted((k, e) for k in kinds for e in ("initial", "trained"))
  assert all(v.shape == (2, config.env.num_seeds * config.env.samples_per_seed) for v in cells.values())
  again, _ = env_validity.measure(str(workdir), draws=2, seed=0)
  assert all(np.array_equal(cells[k], again[k]) for k in cells)  # the same keys, the same tasks
  assert cli.call(env_validity, ["--workdir", str(workdir), "--draws", "1"]) == 0
  out = capsys.readouterr().out
  assert f"D_env holds {config.domain.num_seeds} seed tasks" in out and "| seed |" in out


def test_level_shifts_average_the_written_minus_the_seed_level_per_seed_level():
  from genenv_jax.scripts.env_tracking import level_shifts

  seed = np.asarray([3, 3, 3, 5, 5, 7])
  task = np.asarray([4, 2, 9, 5, 6, 0])
  valid = np.asarray([True, True, False, True, True, False])
  assert level_shifts(seed, task, valid) == {3: 0.0, 5: 0.5}  # (+1 - 1) / 2; the invalid ones are left out


def test_env_tracking_reports_both_envs_for_every_p_hat_shown(straight_run, capsys):
  from genenv_jax.scripts import env_tracking

  _, workdir = straight_run
  cells = env_tracking.measure(str(workdir), per_level=2, draws=1, seed=0)
  assert sorted(cells) == sorted((e, p) for e in env_tracking.ENVS for p in env_tracking.SHOWN)
  assert all(abs(v) <= 20 for shifts in cells.values() for v in shifts.values())
  assert cells == env_tracking.measure(str(workdir), per_level=2, draws=1, seed=0)  # the same keys, the same tasks
  assert cli.call(env_tracking, ["--workdir", str(workdir), "--per_level", "2", "--draws", "1"]) == 0
  out = capsys.readouterr().out
  assert "| env | p̂ shown |" in out and "| initial | ? |" in out and "| trained | 1.0 |" in out
  assert cli.call(env_tracking, ["--workdir", str(workdir), "--draws", "0"]) == 2
  assert "error: flag --draws=0" in capsys.readouterr().err
