"""The static ablation's round (`Coevolution.static_round`): the env writes tasks once from D_env's seeds, and its
valid ones join D_train as generated tasks; the step counter stays, the rng moves on, D_env keeps its tasks. Every
pool row comes from one builder, `pool_rows`."""

import jax
import jax.numpy as jnp
import numpy as np
from coevolution_configs import tiny_config

from genenv_jax.coevolution.build import build, task_rows
from genenv_jax.coevolution.step import POOL_FIELDS
from genenv_jax.sampling import sampler as sampling


def copying(generate_tasks):
  """`generate_tasks` with the env's samples replaced by its seeds' own task text: every env task is valid."""

  def generate(env_params, seeds, key):
    prompts, out, _ = generate_tasks(env_params, seeds, key)
    width = min(out.tokens.shape[1], seeds["env_ids"].shape[1])
    tokens = jnp.zeros_like(out.tokens).at[:, :width].set(seeds["env_ids"][:, :width].astype(out.tokens.dtype))
    mask = jnp.zeros_like(out.mask).at[:, :width].set(seeds["env_mask"][:, :width].astype(out.mask.dtype))
    return (
      prompts,
      sampling.SampleOutput(tokens, out.logprobs, mask),
      generate_tasks.__self__.domain.parse_env_output(tokens, mask),
    )

  return generate


def test_a_static_round_adds_the_valid_env_tasks_to_d_train_only():
  run, state = build(tiny_config(mode="static"))
  co = run.coevolution
  co.generate_tasks = copying(co.generate_tasks)
  before = jax.tree.map(np.asarray, state)
  with jax.set_mesh(run.mesh):
    after = jax.tree.map(np.asarray, jax.jit(co.static_round)(state))
  generated = after.train_pool.valid & ~after.train_pool.is_seed
  assert generated.sum() == after.train_pool.num_inserted - before.train_pool.num_inserted == co.settings.env.num_seeds
  assert (after.train_pool.inserted_at[generated] == before.step).all() and after.step == before.step
  assert not np.array_equal(after.rng, before.rng)
  seeds = before.env_pool.tasks
  for row in np.nonzero(generated)[0]:  # a copied seed: each field is its seed's, in its place
    match = (seeds["prompt_ids"] == after.train_pool.tasks["prompt_ids"][row]).all(-1) & before.env_pool.valid
    assert match.any()
    for k in POOL_FIELDS:
      assert np.array_equal(after.train_pool.tasks[k][row], seeds[k][np.argmax(match)]), k
  for k in POOL_FIELDS:  # D_env is drawn from, not written to
    assert np.array_equal(after.env_pool.tasks[k], before.env_pool.tasks[k])


def test_the_seed_pools_rows_are_the_pool_fields_of_the_domains_seeds():
  run, _ = build(tiny_config())
  seeds = run.domain.seed_tasks()
  rows = task_rows(seeds)
  assert tuple(rows) == POOL_FIELDS and all(rows[k] is seeds[k] for k in POOL_FIELDS)
