"""The decoder's hyper-parameters: one frozen dataclass for the Llama / Qwen2 / Qwen2.5 family."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

from genenv_jax.models.attention import IMPLEMENTATIONS

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


REMAT_POLICIES = ("none", "full", "save_dots", "save_all_dots")


def remat_policy(value: Any) -> str:
  """A remat setting as a policy name: True -> 'full', False / None / '' -> 'none', a policy name -> itself.

  none: keep every activation for the backward pass; full: keep only each layer's input and recompute the layer;
  save_dots: keep the matmul outputs without batch dimensions (jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
  and recompute the rest; save_all_dots: keep every matmul output (checkpoint_dots).
  """
  if value is True:
    return "full"
  if value is False or value is None or value == "":
    return "none"
  if isinstance(value, str) and value in REMAT_POLICIES:
    return value
  raise ValueError(f"unknown remat policy {value!r}; choose one of {', '.join(REMAT_POLICIES)} (or a bool)")


def to_dtype(name: Any) -> Any:
  """'float32' | 'bfloat16' | 'float16' (or a jnp dtype) -> jnp dtype, with a clear error otherwise."""
  if not isinstance(name, str):
    return jnp.dtype(name)
  if name not in DTYPES:
    raise ValueError(f"unsupported dtype {name!r}; use one of {sorted(DTYPES)}")
  return DTYPES[name]


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Shapes and numerics of a Llama/Qwen2 decoder.

  rope_scaling is None (plain RoPE), ("linear", factor) or
  ("llama3", factor, low_freq_factor, high_freq_factor, original_max_position_embeddings).
  """

  vocab_size: int
  hidden_size: int
  intermediate_size: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  rope_theta: float = 10000.0
  rope_scaling: tuple | None = None
  rms_norm_eps: float = 1e-6
  qkv_bias: bool = False
  tie_word_embeddings: bool = False
  max_position_embeddings: int = 4096
  param_dtype: str = "float32"
  dtype: str = "float32"
  remat: str = "none"  # REMAT_POLICIES; True / False are read as "full" / "none"
  attention: str = "auto"  # genenv_jax.models.attention.IMPLEMENTATIONS; auto: TPU splash, GPU cudnn, CPU blockwise
  architecture: str = "LlamaForCausalLM"
  source_hf_config: str = ""  # the loaded config.json (JSON text), carried through to export

  def __post_init__(self):
    for name in (
      "vocab_size",
      "hidden_size",
      "intermediate_size",
      "num_layers",
      "num_heads",
      "num_kv_heads",
      "head_dim",
    ):
      if int(getattr(self, name)) <= 0:
        raise ValueError(f"ModelConfig.{name} must be positive, got {getattr(self, name)}")
    if self.num_heads % self.num_kv_heads:
      raise ValueError(f"num_heads={self.num_heads} must be a multiple of num_kv_heads={self.num_kv_heads} (GQA)")
    if self.head_dim % 2:
      raise ValueError(f"head_dim={self.head_dim} must be even for rotary embeddings")
    object.__setattr__(self, "remat", remat_policy(self.remat))
    to_dtype(self.param_dtype)
    to_dtype(self.dtype)
    if self.attention not in IMPLEMENTATIONS:
      raise ValueError(f"ModelConfig.attention={self.attention!r} is unknown; choose one of {IMPLEMENTATIONS}")

  @property
  def rematerializes(self) -> bool:
    """Whether the backward pass recomputes part of each layer's forward."""
    return self.remat != "none"

  @property
  def num_params(self) -> int:
    """Parameter count (embedding and head counted once when tied)."""
    h, f, d = self.hidden_size, self.intermediate_size, self.head_dim
    attn = h * d * (self.num_heads * 2 + self.num_kv_heads * 2)
    if self.qkv_bias:
      attn += d * (self.num_heads + 2 * self.num_kv_heads)
    per_layer = attn + 3 * h * f + 2 * h
    head = 0 if self.tie_word_embeddings else self.vocab_size * h
    return self.vocab_size * h + self.num_layers * per_layer + h + head
