"""Sweeps (genenv_jax.sweep): the run plan, resumability, TensorBoard links, composable variants, one tiny real run."""

import json
import subprocess
import sys

import pytest
from conftest import PROJECT_ROOT

from genenv_jax import sweep

ROOT = str(PROJECT_ROOT)


def test_plan_and_bad_inputs(monkeypatch):
  specs = sweep.plan(["coevolve", "smoke+random"], ["0", "2"])
  assert [s.name for s in specs] == ["coevolve_s0", "coevolve_s2", "smoke+random_s0", "smoke+random_s2"]
  with pytest.raises(ValueError, match="integers"):
    sweep.plan(["coevolve"], ["x"])
  with pytest.raises(ValueError, match="duplicate"):
    sweep.plan(["random", "random"], [0])
  with pytest.raises(ValueError, match="non-empty names"):
    sweep.plan(["smoke:random"], [0])
  with pytest.raises(ValueError, match="--jobs"):
    sweep.sweep("configs/default.py", specs, "/nonexistent", jobs=0)
  assert sweep.format_eta(3725.4) == "1:02:05"
  monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
  cmd = sweep.command("configs/default.py", specs[2], "/w/runs/r", ["--config.total_steps=3"])
  assert cmd[1:] == [  # the runs share the sweep's warm starts and compilation cache
    "-m",
    "genenv_jax.main",
    "--config=configs/default.py:smoke+random",
    "--workdir=/w/runs/r",
    "--warm_start_reuse=/w/warm_starts",
    "--compile_cache=/w/compile_cache",
    "--config.seed=0",
    "--config.total_steps=3",
  ]
  monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/machine/cache")  # the machine's own cache wins
  assert not any(
    a.startswith("--compile_cache") for a in sweep.command("configs/default.py", specs[2], "/w/runs/r", [])
  )


def test_a_base_variant_in_config_prefixes_every_run_and_keeps_the_names():
  specs = sweep.plan(["coevolve", "random"], [1])
  assert sweep.split_config("configs/default.py:reads_p_hat") == ("configs/default.py", "reads_p_hat")
  assert sweep.split_config("configs/default.py") == ("configs/default.py", "")
  cmd = sweep.command("configs/default.py:reads_p_hat", specs[1], "/w/r", [])
  assert cmd[3] == "--config=configs/default.py:reads_p_hat+random" and specs[1].name == "random_s1"
  assert sweep.command("configs/default.py", specs[1], "/w/r", [])[3] == "--config=configs/default.py:random"
  # Overrides come last, so they win over the variant's own settings (random's env_seed_mix too).
  mix = "--config.pools.env_seed_mix=(0.0,0.0,1.0)"
  cmd = sweep.command("configs/default.py", specs[1], "/w/r", [mix])
  assert cmd[-1] == mix and cmd.index(mix) > cmd.index("--config=configs/default.py:random")
  sweep.check_configs(f"{ROOT}/configs/default.py:reads_p_hat", specs, [])  # reads_p_hat+coevolve, reads_p_hat+random
  with pytest.raises(SystemExit) as e:
    sweep.check_configs(f"{ROOT}/configs/default.py:bogus", specs, [])
  assert e.value.code == 2


def test_variants_compose():
  from configs.default import get_config

  c = get_config("smoke+random")
  assert c.total_steps == get_config("smoke").total_steps and not c.env.train
  assert get_config("coevolve").to_dict() == get_config("").to_dict()
  assert get_config("smoke+static").mode == "static"
  # GenEnv and GenEnv-Random are prompted alike (base seeds only) and differ only in whether the env is trained;
  # pooled draws GenEnv's prompts from D_env as well, and random_pooled is its untrained copy
  assert get_config("random").to_dict() == {**get_config("").to_dict(), "env": get_config("random").env.to_dict()}
  assert not get_config("random").env.train and tuple(get_config("").pools.env_seed_mix) == (1.0, 0.0, 0.0)
  pooled, random_pooled = get_config("pooled"), get_config("random_pooled")
  assert pooled.env.train and tuple(pooled.pools.env_seed_mix) == (0.25, 0.5, 0.25)
  assert not random_pooled.env.train and random_pooled.pools.to_dict() == pooled.pools.to_dict()
  assert get_config("pooled+random").pools.env_seed_mix == get_config("random").pools.env_seed_mix
  reads_untrained = get_config("reads_p_hat+random_pooled")  # keeps reads_p_hat's own D_env prompts
  assert not reads_untrained.env.train and tuple(reads_untrained.pools.env_seed_mix) == (0.0, 0.5, 0.5)
  # a variant composed before an ablation keeps its own settings where the ablation sets none
  reads = get_config("reads_p_hat+random")
  assert reads.pools.env_admits == "valid" and reads.warm_start.env_targets == "rate_directed" and not reads.env.train
  assert tuple(reads.pools.env_seed_mix) == (1.0, 0.0, 0.0) and reads.warm_start.env_steps == 600
  with pytest.raises(ValueError, match="unknown variant 'bogus'.*smoke\\+random"):
    get_config("smoke+bogus")


def test_is_finished(tmp_path):
  assert not sweep.is_finished(str(tmp_path))
  (tmp_path / "summary.json").write_text(json.dumps({"config": {"total_steps": 4}, "final_step": 2}))
  assert not sweep.is_finished(str(tmp_path))  # interrupted: resumes
  (tmp_path / "summary.json").write_text(json.dumps({"config": {"total_steps": 4}, "final_step": 4}))
  assert sweep.is_finished(str(tmp_path))
  (tmp_path / "summary.json").write_text("{not json")
  assert not sweep.is_finished(str(tmp_path))


def test_a_real_run_then_a_resumed_sweep_skips_it(tmp_path):
  tiny = [
    "--config.total_steps=1",
    "--config.warm_start.agent_steps=0",  # the sweep's bookkeeping is under test, not the run: no SFT to compile
    "--config.warm_start.env_steps=0",
    "--config.eval_every=1",
    "--config.checkpoint_every=1",
  ]
  args = [
    sys.executable,
    "-m",
    "genenv_jax.sweep",
    "--config=configs/default.py",
    "--variants=smoke+tiny",
    "--seeds=3",
    f"--workdir={tmp_path}",
    "--report",
    "--",
    *tiny,
  ]
  out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
  assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
  assert "[1/1] smoke+tiny_s3 done" in out.stdout and "ETA" in out.stdout
  summary = json.loads((tmp_path / "runs" / "smoke+tiny_s3" / "summary.json").read_text())
  assert summary["config"]["seed"] == 3 and summary["final_step"] == 1
  link = tmp_path / "tensorboard" / "smoke+tiny_s3"
  assert link.is_symlink() and any(link.iterdir())  # the run's event files, through the link
  assert (tmp_path / "report.md").exists() and "| smoke+tiny | 3 |" in (tmp_path / "report.md").read_text()
  again = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
  assert again.returncode == 0 and "1 already finished, 0 to run" in again.stdout
