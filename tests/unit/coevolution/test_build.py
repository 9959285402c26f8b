"""One builder, two modes: `build(config, abstract=True)` (what plan compiles for) describes exactly the state that
`build(config)` (what training runs) allocates: the same tree, shapes, dtypes and shardings, with nothing allocated."""

import jax
import pytest
from coevolution_configs import tiny_config

from genenv_jax.coevolution.build import build


@pytest.mark.parametrize("mesh", [dict(data=-1, fsdp=1, tensor=1), dict(data=2, fsdp=2, tensor=2)], ids=str)
def test_abstract_build_is_the_real_build_without_arrays(mesh):
  config = tiny_config(mesh=mesh)
  run, state = build(config)
  abstract_run, shaped = build(config, abstract=True)
  real_leaves, real_tree = jax.tree.flatten(state)
  shaped_leaves, shaped_tree = jax.tree.flatten(shaped)
  assert real_tree == shaped_tree
  assert all(isinstance(x, jax.ShapeDtypeStruct) for x in shaped_leaves)  # nothing allocated
  for real, abstract in zip(real_leaves, shaped_leaves):
    assert (real.shape, real.dtype) == (abstract.shape, abstract.dtype)
    assert real.sharding.is_equivalent_to(abstract.sharding, real.ndim), (real.sharding, abstract.sharding)
  assert jax.tree.structure(run.state_shardings) == jax.tree.structure(abstract_run.state_shardings)
  assert run.heldout.prompt_ids.shape == abstract_run.heldout.prompt_ids.shape


def test_abstract_build_checks_the_vocabulary_too():
  from genenv_jax.coevolution.settings import from_config

  config = tiny_config()
  small = from_config(config).agent.model.model_config(8)  # 8 ids: fewer than the tokenizer's
  with pytest.raises(ValueError, match="agent model's vocabulary \\(8\\) is smaller than the tokenizer's"):
    build(config, abstract=True, agent_model=small)


@pytest.mark.parametrize("field", ["train_capacity", "env_capacity"])
def test_a_pool_too_small_for_the_seed_tasks_is_refused(field):
  config = tiny_config()
  seeds = config.domain.num_seeds
  config.pools[field] = seeds  # room for the seeds, none for a generated task
  with pytest.raises(ValueError, match=f"pools.{field} = {seeds}: the pool starts with the domain's {seeds} seed"):
    build(config, abstract=True)
  config.pools.keep_seeds = False  # generated tasks may then replace seeds: allowed
  build(config, abstract=True)
  config.pools[field] = seeds - 1
  with pytest.raises(ValueError, match=f"set it above {seeds}"):
    build(config, abstract=True)


def test_a_configs_attention_setting_reaches_the_step(monkeypatch):
  """model.attention (coevolution.settings.ModelSettings) is what the traced step's attention calls use, per model."""
  from genenv_jax.models import transformer

  config = tiny_config()
  config.agent.model.attention = "naive"
  config.env.model.attention = "blockwise"
  run, state = build(config, abstract=True)
  seen = set()
  original = transformer.attention

  def recording(*args, implementation, **kwargs):
    seen.add(implementation)
    return original(*args, implementation=implementation, **kwargs)

  monkeypatch.setattr(transformer, "attention", recording)
  with jax.set_mesh(run.mesh):
    run.coevolution.jit_step(run.state_shardings).trace(state)
  assert seen == {"naive", "blockwise"}
