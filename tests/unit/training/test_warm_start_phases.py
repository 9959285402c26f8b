"""The warm start trains the models a mode samples: both for co-evolution, the agent alone for plain GRPO (its env is
never sampled, so warming it would only cost time)."""

import jax
import numpy as np
import pytest
from coevolution_configs import tiny_config

from genenv_jax.coevolution.build import build
from genenv_jax.training.loop import warm_start


def changed(before, after) -> bool:
  return any(
    not np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(before), jax.tree.leaves(after))
  )


@pytest.mark.parametrize("mode, env_trained", [("coevolve", True), ("grpo", False)])
def test_the_env_is_warm_started_only_where_the_mode_samples_it(mode, env_trained):
  config = tiny_config(mode=mode)
  run, state = build(config)
  agent0, env0 = jax.tree.map(np.asarray, (state.agent, state.env))
  lines = []
  warmed = warm_start(run, state, config.seed, lines.append)
  assert changed(agent0, warmed.agent)
  assert changed(env0, warmed.env) == env_trained
  assert any(line.startswith("warm start env") for line in lines) == env_trained
