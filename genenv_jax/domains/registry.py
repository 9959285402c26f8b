"""Domain names -> constructors, for configs (`config.domain.name`)."""

from __future__ import annotations

import ml_collections

from genenv_jax.domains.base import Domain
from genenv_jax.tokenizer import Tokenizer


def build_domain(cfg: ml_collections.ConfigDict, tokenizer: Tokenizer, seed: int) -> Domain:
  """Builds the training domain named by cfg.name with the remaining cfg fields as its settings."""
  name = cfg.name
  if name == "arithmetic":
    from genenv_jax.domains.arithmetic import ArithmeticDomain
    settings = {k: v for k, v in cfg.items() if k not in ("name", "success_threshold")}
    return ArithmeticDomain(tokenizer, seed=seed, **settings)
  raise ValueError(f"unknown domain {name!r}; available training domains: arithmetic")
