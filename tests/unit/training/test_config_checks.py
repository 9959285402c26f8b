"""Config validation before any work (genenv_jax.training.config_checks): every bad value listed at once, exit 2."""

import os
import subprocess
import sys

import pytest
from conftest import PROJECT_ROOT

from configs import default, qwen2_5_7b, tools
from genenv_jax.training import config_checks
from genenv_jax.training.config_checks import ConfigError, problems, validate

SHIPPED = (
  [("default", v) for v in ("", *default.VARIANTS, "smoke+random", "smoke+pg")]
  + [("tools", v) for v in tools.LENGTHS]
  + [("tools", f"{v}+demo") for v in ("api_bank", "bfcl")]
  + [("qwen2_5_7b", v) for v in ("", *qwen2_5_7b.SLICES, "api_bank", "bfcl,v6e-64")]
)


@pytest.mark.parametrize("module,variant", SHIPPED)
def test_every_shipped_config_variant_is_valid(module, variant):
  config = {"default": default, "tools": tools, "qwen2_5_7b": qwen2_5_7b}[module].get_config(variant)
  assert problems(config) == []


@pytest.mark.parametrize(
  "key,value,expected",
  [
    ("agent.optimizer.lr", -1e-4, "agent.optimizer.lr = -0.0001: must be a number > 0"),
    ("env.curriculum.alpha", 1.5, "env.curriculum.alpha = 1.5: must be a number in [0, 1]"),
    ("total_steps", 0, "total_steps = 0: must be an integer >= 1"),
    ("eval_every", 0, "eval_every = 0: must be an integer >= 1"),
    ("agent.grpo.kl_estimator", "k9", "agent.grpo.kl_estimator = 'k9': must be one of 'k1', 'k2', 'k3'"),
    ("agent.grpo.group_size", 1, "agent.grpo.group_size = 1: must be an integer >= 2"),
    ("env.curriculum.k_min", 0.6, "the band [-0.1, 1.1] must lie inside [0, 1]"),
    ("agent.grpo.minibatches", 7, "agent.grpo.minibatches = 7: must divide the agent's 480 rows per step"),
    ("env.kl_cap_mode", "clip", "env.kl_cap_mode = 'clip': must be one of 'skip', 'scale', 'sqrt'"),
    ("agent.sampling.top_p", 0.0, "agent.sampling: top_p must be in (0, 1], got 0.0"),  # the sampler checks it
    ("env.model.remat", "some", "env.model.remat = 'some': must be true, false or one of none, full"),
    ("agent.sampling.kv_cache", "int4", "agent.sampling: kv_cache must be one of auto, int8, got 'int4'"),
    ("pools.replay_mix", (0.5, 0.6, 0.0), "pools.replay_mix = (0.5, 0.6, 0.0): must be non-negative fractions"),
    ("mesh.fsdp", 0, "mesh.fsdp = 0: must be an integer >= 1, or -1"),
    ("mode", "ppo", "mode = 'ppo': must be one of 'coevolve', 'static', 'grpo'"),
    ("warm_start.env_copy_frac", 1.5, "warm_start.env_copy_frac = 1.5: must be a number in [0, 1]"),
    ("warm_start.agent_skewed_tasks", -1, "warm_start.agent_skewed_tasks = -1: must be an integer >= 0"),
    ("agent.optimizer.decay_steps", -5, "agent.optimizer.decay_steps = -5: must be an integer >= 0"),
    (
      "warm_start.env_targets",
      "copy",
      "warm_start.env_targets = 'copy': must be one of 'nearby', 'nearby_level', 'variation', 'rate_directed'",
    ),
    ("pools.env_admits", "all", "pools.env_admits = 'all': must be one of 'band', 'valid'"),
    ("warm_start.env_p_hats", "some", "warm_start.env_p_hats = 'some': must be one of 'unknown', 'all'"),
  ],
)
def test_each_bad_value_is_named_with_what_is_allowed(key, value, expected):
  config = default.get_config("")
  node = config
  *parents, leaf = key.split(".")
  for part in parents:
    node = node[part]
  node[leaf] = value
  found = problems(config)
  assert len(found) == 1 and expected in found[0], found


def test_every_bad_value_is_listed_at_once():
  config = default.get_config("smoke")
  config.agent.optimizer.lr = -1.0
  config.env.curriculum.alpha = 1.5
  config.total_steps = 0
  config.agent.grpo.kl_estimator = "k9"
  with pytest.raises(ConfigError) as e:
    validate(config)
  message = str(e.value)
  assert message.startswith("invalid config (4 bad values")
  for key in ("agent.optimizer.lr", "env.curriculum.alpha", "total_steps", "agent.grpo.kl_estimator"):
    assert key in message


def test_an_hf_checkpoint_brings_its_own_shape():
  config = default.get_config("")
  config.agent.model.hf_path = "/some/checkpoint"
  config.agent.model.num_heads = 3  # not a multiple of num_kv_heads, but the checkpoint's config.json rules
  assert problems(config) == []


def test_seed_variations_only_where_the_domain_can_edit_its_seeds():
  from configs import tools

  config = default.get_config("")
  config.warm_start.env_targets = "variation"
  assert problems(config) == []
  config = tools.get_config("bfcl")
  config.warm_start.env_targets = "variation"
  assert problems(config) == [
    "warm_start.env_targets = 'variation': only the arithmetic domain can edit its seeds, not 'bfcl'; use 'nearby'"
  ]


def test_rate_directed_env_targets_need_every_p_hat_shown():
  config = default.get_config("")
  config.warm_start.env_targets = "rate_directed"
  assert problems(config) == [
    "warm_start.env_targets = 'rate_directed' directs each env target by the p̂ its prompt shows: set "
    "warm_start.env_p_hats = 'all'"
  ]
  config.warm_start.env_p_hats = "some"  # a bad value is named once, by its own check
  assert problems(config) == ["warm_start.env_p_hats = 'some': must be one of 'unknown', 'all'"]
  config.warm_start.env_p_hats = "all"
  assert problems(config) == []


def test_choice_lists_come_from_the_registries_the_code_dispatches_on():
  from genenv_jax.rl.grpo import KL_ESTIMATORS, LOSS_AGGREGATIONS

  config = default.get_config("")
  for name in KL_ESTIMATORS:
    config.agent.grpo.kl_estimator = name
    assert problems(config) == []
  for name in LOSS_AGGREGATIONS:
    config.agent.grpo.loss_agg = name
    assert problems(config) == []
  from genenv_jax.coevolution.settings import MODES  # the tree declares the choices the step dispatches on

  assert not hasattr(config_checks, "MODES")
  for name in MODES:
    config.mode = name
    assert problems(config) == []


def test_main_exits_2_before_any_work_on_a_bad_config(tmp_path):
  workdir = tmp_path / "run"
  proc = subprocess.run(
    [
      sys.executable,
      "-m",
      "genenv_jax.main",
      "--config=configs/default.py:smoke",
      f"--workdir={workdir}",
      "--config.agent.optimizer.lr=-1.0",
      "--config.env.curriculum.alpha=1.5",
    ],
    cwd=PROJECT_ROOT,
    env={**os.environ, "JAX_PLATFORMS": "cpu"},
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 2, proc.stderr
  assert "agent.optimizer.lr = -1.0" in proc.stderr and "env.curriculum.alpha = 1.5" in proc.stderr
  assert "Traceback" not in proc.stderr
  assert not workdir.exists()  # nothing built, nothing written


@pytest.mark.parametrize("base", ["", "smoke"])
def test_the_pg_variant_keeps_the_env_tasks_per_step_in_groups_of_four(base):
  plain = default.get_config(base)
  pg = default.get_config(f"{base}+pg" if base else "pg")
  assert pg.env.objective == "pg" and pg.env.samples_per_seed == 4
  assert pg.env.num_seeds * pg.env.samples_per_seed == plain.env.num_seeds * plain.env.samples_per_seed
