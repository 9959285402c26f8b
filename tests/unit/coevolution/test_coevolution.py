"""The jitted co-evolution step: one compilation, sharded == unsharded, host == JAX verifier, malformed env output."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from coevolution_configs import tiny_config

from genenv_jax.coevolution.build import build
from genenv_jax.coevolution.step import Coevolution, by_seed_source
from genenv_jax.sampling import sampler


def run_steps(config, num_steps, devices=None, coevolution_cls=None):
  run, state = build(config, devices=devices)
  co = run.coevolution
  if coevolution_cls is not None:
    co = coevolution_cls(
      co.agent_graphdef, co.env_graphdef, co.domain, co.agent_optimizer, co.env_optimizer, co.settings
    )
  step = co.jit_step(run.state_shardings)
  history = []
  with jax.set_mesh(run.mesh):
    for _ in range(num_steps):
      state, metrics = step(state)
      history.append(jax.device_get(metrics))
  return run, state, history, step


def scalar_metrics(history):
  return [{k: float(v) for k, v in m.items() if np.ndim(v) == 0} for m in history]


# Adam's eps is raised in these runs: with eps = 1e-8, parameters whose gradients are ~1e-9 get sign-like updates, so
# last-bit differences between shardings' reduction orders become lr-sized parameter differences. An entropy bonus
# makes every update non-zero even when no rollout of these untrained models earns a reward.
COMPARABLE = {"agent.optimizer.eps": 1e-3, "env.optimizer.eps": 1e-3, "agent.grpo.entropy_coef": 0.01}


@pytest.fixture(scope="module")
def one_device():
  return run_steps(tiny_config(**COMPARABLE), 3, devices=jax.devices()[:1])


@pytest.fixture(scope="module")
def mesh_222():
  return run_steps(tiny_config(**COMPARABLE, mesh=dict(data=2, fsdp=2, tensor=2)), 3)


def test_step_compiles_once_and_updates_everything(one_device):
  run, state, history, step = one_device
  assert step._cache_size() == 1
  assert int(state.step) == 3
  m = history[-1]
  for tag in (
    "agent/reward_mean",
    "agent/kl_to_reference",
    "agent/ppo_clip_frac",
    "agent/groups_without_signal_frac",
    "agent/entropy",
    "agent/grad_norm_before_clip",
    "curriculum/p_hat_mean",
    "curriculum/band_frac",
    "curriculum/invalid_frac",
    "curriculum/r_env_mean",
    "curriculum/difficulty_mean",
    "env/rwr_nll",
    "env/kl_to_initial",
    "env/update_kl",
    "env/kl_cap_scale",
    "pool/train_size",
  ):
    assert tag in m and np.isfinite(m[tag]), tag
  # parameters moved away from the (frozen) references
  delta = jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()), state.agent, state.agent_ref)
  assert max(jax.tree.leaves(delta)) > 0
  assert int(state.train_pool.valid.sum()) >= 64  # the seeds stay
  # the default prompts the env with base seeds only: a split by prompt source would repeat the means
  assert not any("_seeds" in tag for tag in history[0])


def test_the_step_names_its_metrics_as_tensorboard_shows_them(one_device):
  """The step's metric names are the tags (training/log_tags.py, which only picks which to write): every tag of an
  RWR co-evolution step is among the step's metrics, and every tag it writes has a description."""
  from genenv_jax.training import log_tags

  run, _, history, _ = one_device
  m, settings = history[-1], run.coevolution.settings
  split = {t for t in log_tags.FRESH_TASKS if "_from_" in t}  # only where the env is prompted from D_env too
  expected = {*log_tags.ALWAYS, *log_tags.ENV_WRITES, *(set(log_tags.FRESH_TASKS) - split), *log_tags.COUNTERS}
  expected |= set(log_tags.OFF_POLICY) | (set(log_tags.ENV_UPDATE) - {"env/pg_loss"}) | set(log_tags.HISTOGRAMS)
  assert sorted(expected - set(m)) == []
  assert {f"pool/{p}_{stat}" for p, stats in log_tags.POOL_STATS.items() for stat in stats} <= set(m)
  tags = log_tags.step_scalars(m, settings)
  assert [t for t in tags if log_tags.description(t) is None] == []
  # D_env's seeds are never measured and its generated tasks always are: its measured share is not a tag of its own
  assert float(m["pool/env_frac_evaluated"]) == pytest.approx(1 - float(m["pool/env_frac_seed"]))
  assert "pool/env_frac_evaluated" not in tags and "pool/env_frac_seed" in tags


def test_by_seed_source_averages_each_kind_of_prompt_over_its_valid_tasks():
  p_hat = jnp.asarray([0.9, 0.7, 0.5, 0.3, 0.1])
  valid = jnp.asarray([True, True, True, False, True])
  from_base = jnp.asarray([True, True, False, False, False])
  out = {k: float(v) for k, v in by_seed_source({"p_hat_mean": p_hat}, valid, from_base).items()}
  assert out["p_hat_mean_from_base_seeds"] == pytest.approx(0.8)  # (0.9 + 0.7) / 2
  assert out["p_hat_mean_from_generated_seeds"] == pytest.approx(0.3)  # (0.5 + 0.1) / 2: the invalid 0.3 is left out
  none_base = by_seed_source({"p_hat_mean": p_hat}, valid, jnp.zeros(5, bool))
  assert np.isnan(float(none_base["p_hat_mean_from_base_seeds"]))


@pytest.mark.parametrize("mesh", ["8x1x1", "2x2x2"])
def test_sharded_step_matches_one_device(mesh, one_device, mesh_222):
  _, ref_state, ref_history, _ = one_device
  if mesh == "2x2x2":
    _, state, history, step = mesh_222
  else:
    _, state, history, step = run_steps(tiny_config(**COMPARABLE, mesh=dict(data=8, fsdp=1, tensor=1)), 3)
  assert step._cache_size() == 1
  for ours, ref in zip(scalar_metrics(history), scalar_metrics(ref_history)):
    for key, value in ref.items():
      np.testing.assert_allclose(ours[key], value, rtol=1e-3, atol=1e-4, err_msg=key)
  for name in ("agent", "env"):
    jax.tree.map(
      lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5),
      getattr(state, name),
      getattr(ref_state, name),
    )


def test_optimizer_moments_are_sharded_like_their_parameters(mesh_222):
  """AdamW's mu and nu take each parameter's sharding (not replicated on every device), before and after steps."""
  _, state, _, _ = mesh_222
  params = {jax.tree_util.keystr(p): x.sharding for p, x in jax.tree_util.tree_leaves_with_path(state.agent)}
  sharded = [s for s in params.values() if not s.is_fully_replicated]
  assert sharded, "the 2x2x2 mesh should shard some agent parameters"
  moments = [
    x
    for p, x in jax.tree_util.tree_leaves_with_path(state.agent_opt)
    if any(jax.tree_util.keystr(p).endswith(k) for k in params)
  ]
  assert len(moments) == 2 * len(params)  # mu and nu
  for path, x in jax.tree_util.tree_leaves_with_path(state.agent_opt):
    key = next((k for k in params if jax.tree_util.keystr(path).endswith(k)), None)
    if key is not None:
      assert x.sharding.is_equivalent_to(params[key], x.ndim), jax.tree_util.keystr(path)


def test_host_verifier_on_a_mesh_gives_identical_rewards_inside_the_step(mesh_222):
  """The host-Python twin, entered through pure_callback in shard_map over all 8 devices, equals the JAX verifier."""
  _, _, jax_history, _ = mesh_222
  config = tiny_config(**COMPARABLE, mesh=dict(data=2, fsdp=2, tensor=2), **{"domain.verifier": "host"})
  _, _, host_history, _ = run_steps(config, 3)
  for key in (
    "agent/reward_mean",
    "agent/accuracy",
    "curriculum/p_hat_mean",
    "curriculum/invalid_frac",
    "curriculum/difficulty_mean",
    "curriculum/replay_p_hat_mean",
  ):
    assert [float(m[key]) for m in host_history] == [float(m[key]) for m in jax_history], key


class MalformedEnv(Coevolution):
  """The env's samples replaced by malformed outputs: random ids, empty (EOS first), no EOS (overflow)."""

  def generate_tasks(self, env_params, seeds, key):
    prompts, out, _ = super().generate_tasks(env_params, seeds, key)
    n, length = out.tokens.shape
    eos = self.settings.env.sampling.eos_ids[0]
    random_ids = jax.random.randint(jax.random.key(7), (n, length), 0, 512)
    kind = jnp.arange(n) % 3
    tokens = jnp.where((kind == 0)[:, None], random_ids, jnp.where((kind == 1)[:, None], eos, 5))
    tokens = jnp.where((kind == 0)[:, None] & (tokens == eos), 4, tokens)  # random rows never stop
    mask = jnp.where((kind == 1)[:, None], (jnp.arange(length) == 0)[None, :], True).astype(jnp.int32)
    out = sampler.SampleOutput(tokens.astype(jnp.int32), out.logprobs, mask)
    return prompts, out, self.domain.parse_env_output(out.tokens, out.mask)


def test_malformed_env_output_is_counted_and_never_crashes():
  _, state, history, _ = run_steps(tiny_config(), 2, devices=jax.devices()[:1], coevolution_cls=MalformedEnv)
  for m in history:
    assert float(m["curriculum/invalid_frac"]) == 1.0
    assert float(m["curriculum/band_frac"]) == 0.0
    assert np.isfinite(float(m["agent/loss"]))
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state.agent) + jax.tree.leaves(state.env))
  # nothing invalid joined the pools: only the seeds
  assert int(state.train_pool.valid.sum()) == 64 and int(state.env_pool.valid.sum()) == 64


def agent_lr(lr: float) -> type:
  """A Coevolution whose agent learns at `lr`, which the settings refuse (0, NaN): swapped in after them."""
  from genenv_jax.rl.updates import make_optimizer

  class AgentLearningRate(Coevolution):
    def __init__(self, agent_graphdef, env_graphdef, domain, _, env_optimizer, settings):
      optimizer = make_optimizer(lr, 0.0, 1.0, eps=1e-8, warmup_steps=10)
      super().__init__(agent_graphdef, env_graphdef, domain, optimizer, env_optimizer, settings)

  return AgentLearningRate


def test_non_finite_update_is_skipped_and_counted():
  config = tiny_config(mode="grpo")  # replayed seeds: every mini-batch learns
  _, state, history, _ = run_steps(config, 2, devices=jax.devices()[:1], coevolution_cls=agent_lr(float("nan")))
  assert int(state.skipped_agent) == 2 * config.agent.grpo.minibatches
  ref = build(config, devices=jax.devices()[:1])[1]
  jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), state.agent, ref.agent)


@pytest.mark.parametrize(
  "overrides",
  [
    {"mode": "grpo"},
    {"env.train": False},
    {"env.objective": "pg", "env.samples_per_seed": 2, "env.num_seeds": 4},
    {"pools.replay_weighting": "level_learnability"},
  ],
  ids=["grpo", "random", "pg", "replay_learnability"],
)
def test_ablations_run(overrides):
  _, state, history, _ = run_steps(tiny_config(**overrides), 2, devices=jax.devices()[:1])
  assert int(state.step) == 2
  if overrides.get("mode") == "grpo":
    assert "curriculum/p_hat_mean" not in history[-1]
  if overrides.get("env.train") is False:
    ref = build(tiny_config(**overrides), devices=jax.devices()[:1])[1]
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), state.env, ref.env)
  if overrides.get("env.objective") == "pg":
    assert np.isfinite(float(history[-1]["env/loss"])) and "env/pg_loss" in history[-1]  # log_tags.ENV_UPDATE
  if "pools.replay_weighting" in overrides:  # replayed tasks were drawn and measured under the level weights
    assert int(np.asarray(state.train_pool.last_eval).max()) >= 0


def test_bad_settings_are_rejected():
  with pytest.raises(ValueError, match="mode = 'nonsense': must be one of 'coevolve', 'static', 'grpo'"):
    build(tiny_config(mode="nonsense"), devices=jax.devices()[:1])
  with pytest.raises(ValueError, match="env.samples_per_seed = 1: the 'pg' objective needs >= 2"):
    build(tiny_config(**{"env.objective": "pg"}), devices=jax.devices()[:1])


def test_reference_per_minibatch_under_remat_at_the_sampling_temperature():
  """The agent's reference log-probs run per mini-batch inside the update (the reference parameters enter the scan as
  an argument: under nnx remat, closing over them raised TraceContextError), the log-probs in LM-head chunks, at
  T = 0.7. With a zero learning rate the policy never moves, so every ratio is 1 and the KL to the reference 0: the
  sampler's log-probs and the update's are one definition. Replayed seed tasks only (mode grpo), so that every
  mini-batch has tokens (the metrics are means over mini-batches)."""
  config = tiny_config(
    **{
      "mode": "grpo",
      "agent.model.remat": "save_dots",
      "agent.grpo.minibatches": 2,
      "agent.sampling.temperature": 0.7,
      "agent.logprob_chunk": 2,
    }
  )
  _, state, history, _ = run_steps(config, 1, devices=jax.devices()[:1], coevolution_cls=agent_lr(0.0))
  m = history[0]
  assert float(m["agent/num_tokens"]) > 0
  np.testing.assert_allclose(float(m["agent/ratio_mean"]), 1.0, atol=1e-5)  # T = 1 scoring gives 1.00013 here
  np.testing.assert_allclose(float(m["agent/ratio_max"]), 1.0, atol=1e-4)
  np.testing.assert_allclose(float(m["agent/kl_to_reference"]), 0.0, atol=1e-6)
  assert float(m["agent/ppo_clip_frac"]) == 0.0


class CopyingEnv(Coevolution):
  """The env's samples replaced by its seeds' own task text: every env task is valid."""

  def generate_tasks(self, env_params, seeds, key):
    prompts, out, _ = super().generate_tasks(env_params, seeds, key)
    length = out.tokens.shape[1]
    width = min(length, seeds["env_ids"].shape[1])
    tokens = jnp.zeros_like(out.tokens).at[:, :width].set(seeds["env_ids"][:, :width].astype(out.tokens.dtype))
    mask = jnp.zeros_like(out.mask).at[:, :width].set(seeds["env_mask"][:, :width].astype(out.mask.dtype))
    out = sampler.SampleOutput(tokens, out.logprobs, mask)
    return prompts, out, self.domain.parse_env_output(out.tokens, out.mask)


@pytest.mark.parametrize("admits", ["band", "valid"])
def test_d_env_admits_the_tasks_kept_in_the_band_or_every_valid_one(admits):
  config = tiny_config(**{"pools.env_admits": admits, "pools.env_seed_mix": (0.25, 0.5, 0.25)})
  _, state, history, _ = run_steps(config, 1, devices=jax.devices()[:1], coevolution_cls=CopyingEnv)
  m = history[0]
  assert float(m["curriculum/invalid_frac"]) == 0.0  # the copied seeds all parse
  # prompts may come from D_env, so p̂ and difficulty are split by prompt source; at step 0 D_env holds base seeds only
  assert float(m["curriculum/p_hat_mean_from_base_seeds"]) == pytest.approx(float(m["curriculum/p_hat_mean"]))
  assert float(m["curriculum/difficulty_mean_from_base_seeds"]) == pytest.approx(float(m["curriculum/difficulty_mean"]))
  assert np.isnan(float(m["curriculum/p_hat_mean_from_generated_seeds"]))
  fresh = config.env.num_seeds
  kept = round(float(m["curriculum/band_frac"]) * fresh)
  generated = int(state.env_pool.valid.sum()) - config.domain.num_seeds
  assert generated == (kept if admits == "band" else fresh)
  assert int(state.train_pool.valid.sum()) - config.domain.num_seeds == fresh  # D_train takes every valid task


def test_examples_are_spread_over_p_hat_from_lowest_to_highest():
  from genenv_jax.coevolution.step import examples_across_p_hat

  p_hat = jnp.asarray([0.5, 0.1, 0.9, 0.3, 0.7, 0.0, 1.0, 0.2])
  valid = jnp.asarray([True, True, True, True, True, False, True, True])
  picked = np.asarray(p_hat[examples_across_p_hat(p_hat, valid, 4)])
  np.testing.assert_allclose(picked, [0.1, 0.3, 0.7, 1.0])  # lowest valid, highest, evenly between; never the invalid
  few = examples_across_p_hat(p_hat, jnp.arange(8) < 2, 4)  # two valid: both, then invalid ones
  assert set(np.asarray(few[:2]).tolist()) == {0, 1} and len(few) == 4
