"""genenv_jax: JAX/TPU-native GenEnv (arXiv 2512.19682), co-evolution of an LLM agent and an environment simulator.

The names below are the model API (README, "The model API"). They load on first use (a module `__getattr__`, PEP 562),
so importing a low room (`genenv_jax.data`, `genenv_jax.parallel`) or running `python -m genenv_jax.data` loads
neither the decoder nor flax: the import graph at run time is the one docs/DESIGN.md draws.
"""

from __future__ import annotations

import importlib

# name -> the module that defines it
_EXPORTS = {
  "ModelConfig": "genenv_jax.models.config",
  "SampleOutput": "genenv_jax.sampling.sampler",
  "SamplingParams": "genenv_jax.sampling.sampler",
  "Transformer": "genenv_jax.models.transformer",
  "forward": "genenv_jax.models.runtime",
  "generate": "genenv_jax.sampling.sampler",
  "load_hf": "genenv_jax.models.hf",
  "make_mesh": "genenv_jax.parallel.sharding",
  "read_hf_config": "genenv_jax.models.hf",
  "save_hf": "genenv_jax.models.hf",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
  module = _EXPORTS.get(name)
  if module is None:
    raise AttributeError(f"module 'genenv_jax' has no attribute {name!r}")
  value = getattr(importlib.import_module(module), name)
  globals()[name] = value  # later lookups skip this function
  return value


def __dir__() -> list[str]:
  return sorted(set(globals()) | set(_EXPORTS))
