"""The step with LoRA on both models (coevolution settings agent.lora / env.lora; models/lora.py): no reference copy
is kept, the optimizers hold the adapters' state alone, the base weights never move while the adapters learn (with
adapter dropout too), the warm start folds into the base, checkpoints resume exactly, bad settings are named."""

import jax
import numpy as np
import pytest
from coevolution_configs import tiny_config
from flax import nnx

from genenv_jax.coevolution.build import build
from genenv_jax.models import lora
from genenv_jax.training import checkpointing
from genenv_jax.training.config_checks import problems
from genenv_jax.training.loop import warm_start

LORA = {
  "agent.lora.enabled": True,
  "agent.lora.rank": 4,
  "agent.lora.alpha": 8.0,
  "agent.lora.dropout": 0.1,
  "env.lora.enabled": True,
  "env.lora.rank": 2,
  "env.lora.targets": ("q_proj", "v_proj"),
  "agent.grpo.entropy_coef": 0.01,  # every agent update moves the adapters, rewarded or not
  "agent.optimizer.lr": 1e-2,
  "agent.optimizer.warmup_steps": 0,  # step 1 moves B (A's gradient is 0 while B = 0), step 2 moves A too
}


def sizes(tree) -> int:
  return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


@pytest.fixture(scope="module")
def lora_run():
  run, state = build(tiny_config(**LORA), devices=jax.devices()[:1])
  initial = jax.device_get(state)
  step = run.coevolution.jit_step(run.state_shardings)
  with jax.set_mesh(run.mesh):
    for _ in range(2):
      state, metrics = step(state)
  return run, initial, state, step, jax.device_get(metrics)


def test_no_reference_copy_and_the_optimizers_hold_the_adapters_alone(lora_run):
  run, initial, state, _, _ = lora_run
  assert initial.agent_ref is None and initial.env_ref is None
  for params, opt in ((state.agent, state.agent_opt), (state.env, state.env_opt)):
    adapters, base = lora.partition(params)
    assert base is not None and sizes(adapters) < sizes(base) / 10
    # AdamW's two moments per adapter parameter, plus counts: nothing the size of a base weight
    assert 2 * sizes(adapters) <= sizes(opt) <= 2 * sizes(adapters) + 8
  env_adapters = lora.adapters_of(nnx.merge(run.coevolution.env_graphdef, state.env))
  assert sorted(env_adapters) == ["q_proj", "v_proj"] and env_adapters["q_proj"].b.shape[1] == 2


def test_the_base_never_moves_while_the_adapters_learn(lora_run):
  _, initial, state, step, metrics = lora_run
  assert step._cache_size() == 1
  assert np.isfinite(metrics["agent/kl_to_reference"]) and int(state.skipped_agent) == 0
  for who in ("agent", "env"):
    before, after = (lora.partition(getattr(s, who)) for s in (initial, state))
    for x, y in zip(jax.tree.leaves(before[1]), jax.tree.leaves(after[1])):
      np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  adapters = (jax.tree.leaves(lora.partition(s.agent)[0]) for s in (initial, state))
  assert all(bool(np.any(np.asarray(x) != np.asarray(y))) for x, y in zip(*adapters))


def test_checkpoints_resume_the_lora_state_exactly(lora_run, tmp_path):
  _, _, state, _, _ = lora_run
  ckpt = checkpointing.Checkpointer(tmp_path / "ckpt", save_every=1)
  assert ckpt.save(2, state, {"note": "lora"}, force=True)
  ckpt.close()
  fresh = checkpointing.Checkpointer(tmp_path / "ckpt", save_every=1)
  restored, _ = fresh.restore(None, checkpointing.abstract_of(state))
  fresh.close()
  a, ta = jax.tree.flatten(state)
  b, tb = jax.tree.flatten(restored)
  assert ta == tb and restored.agent_ref is None
  for x, y in zip(a, b):
    np.testing.assert_array_equal(np.asarray(jax.device_get(x)), np.asarray(jax.device_get(y)))


def test_the_warm_start_folds_into_the_base_and_the_adapters_restart():
  run, state = build(tiny_config(**LORA), devices=jax.devices()[:1])
  base_before = jax.device_get(lora.partition(state.agent)[1])
  state = warm_start(run, state, 0, log=lambda *_: None)
  assert state.agent_ref is None and state.env_ref is None
  agent = nnx.merge(run.coevolution.agent_graphdef, state.agent)
  assert all(not np.any(np.asarray(a.b[...])) for a in lora.adapters_of(agent).values())
  base_after = lora.partition(state.agent)[1]
  pairs = zip(jax.tree.leaves(base_before), jax.tree.leaves(base_after))
  assert any(np.any(np.asarray(x) != np.asarray(y)) for x, y in pairs)  # the warm start trained the base


def test_bad_lora_settings_are_named():
  found = problems(tiny_config(**{"agent.lora.rank": 0, "env.lora.targets": ("qproj",), "env.lora.dropout": 1.0}))
  text = "\n".join(found)
  assert "agent.lora.rank = 0: must be an integer >= 1" in text
  assert "env.lora.targets = ('qproj',): must be a non-empty list of distinct projections" in text
  assert "env.lora.dropout = 1.0: must be a number in [0, 1)" in text
