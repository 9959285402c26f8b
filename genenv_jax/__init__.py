"""genenv_jax: JAX/TPU-native GenEnv (arXiv 2512.19682), co-evolution of an LLM agent and an environment simulator."""

from genenv_jax.models.config import ModelConfig
from genenv_jax.models.hf import load_hf, read_hf_config, save_hf
from genenv_jax.models.runtime import forward
from genenv_jax.models.transformer import Transformer
from genenv_jax.parallel.sharding import make_mesh
from genenv_jax.sampling.sampler import SampleOutput, SamplingParams, generate

__all__ = [
  "ModelConfig",
  "SampleOutput",
  "SamplingParams",
  "Transformer",
  "forward",
  "generate",
  "load_hf",
  "make_mesh",
  "read_hf_config",
  "save_hf",
]
