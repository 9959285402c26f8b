"""Test helpers: a tiny co-evolution config (the smoke variant with even smaller models and warm start), and the demo's
arithmetic domain on the shipped tokenizer."""

import ml_collections

from configs.default import get_config
from genenv_jax.models.tokenizer import load_tokenizer
from genenv_jax.tasks.arithmetic.domain import ArithmeticDomain

# What tiny_config changes in the smoke+tiny variant.
TINY = {
  "warm_start.agent_steps": 3,
  "warm_start.env_steps": 3,
  "warm_start.batch_size": 16,
  "domain.num_seeds": 64,
  "domain.num_heldout": 16,
  "env.num_seeds": 8,
  "pools.num_replay": 8,
  "agent.grpo.group_size": 4,
  "total_steps": 3,
  "eval_every": 100,
  "checkpoint_every": 100,
}


def tiny_config(**overrides) -> ml_collections.ConfigDict:
  c = get_config("smoke+tiny")
  with c.unlocked():
    for key, value in {**TINY, **overrides}.items():
      node = c
      *parents, leaf = key.split(".")
      for part in parents:
        node = node[part]
      node[leaf] = value
  return c


def tiny_flags(**overrides) -> list[str]:
  """The command-line flags of `python -m genenv_jax.main` that build tiny_config(**overrides)."""
  return ["--config=configs/default.py:smoke+tiny", *(f"--config.{k}={v}" for k, v in {**TINY, **overrides}.items())]


def arithmetic_domain(**overrides) -> ArithmeticDomain:
  """The demo's arithmetic domain on the shipped tokenizer, any field overridable."""
  return ArithmeticDomain(load_tokenizer(), **overrides)
