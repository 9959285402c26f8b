"""Test helpers: a tiny co-evolution config (the smoke variant with even smaller models and warm start), and the demo's
arithmetic domain on the shipped tokenizer."""

import ml_collections

from configs.default import get_config
from genenv_jax.models.tokenizer import load_tokenizer
from genenv_jax.tasks.arithmetic.domain import ArithmeticDomain


def tiny_config(**overrides) -> ml_collections.ConfigDict:
  c = get_config("smoke+tiny")
  c.warm_start.agent_steps = 3
  c.warm_start.env_steps = 3
  c.warm_start.batch_size = 16
  c.domain.num_seeds = 64
  c.domain.num_heldout = 16
  c.env.num_seeds = 8
  c.pools.num_replay = 8
  c.agent.grpo.group_size = 4
  c.total_steps = 3
  c.eval_every = 100
  c.checkpoint_every = 100
  with c.unlocked():
    for key, value in overrides.items():
      node = c
      *parents, leaf = key.split(".")
      for part in parents:
        node = node[part]
      node[leaf] = value
  return c


def arithmetic_domain(**overrides) -> ArithmeticDomain:
  """The demo's arithmetic domain on the shipped tokenizer, any field overridable."""
  return ArithmeticDomain(load_tokenizer(), **overrides)
