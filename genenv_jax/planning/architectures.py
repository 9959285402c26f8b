"""The models plan compiles: a known checkpoint's architecture by name (plan never opens a checkpoint), or a model
section's shape fields (coevolution.settings.ModelSettings), and the analytic Shape of a model. Named apart from
genenv_jax/models, whose decoder these describe."""

from __future__ import annotations

import dataclasses
import os

# Architectures of known checkpoints (from their config.json), so plan never needs the files.
KNOWN_MODELS = {
  "qwen2.5-0.5b": dict(
    vocab_size=151936,
    hidden_size=896,
    intermediate_size=4864,
    num_layers=24,
    num_heads=14,
    num_kv_heads=2,
    head_dim=64,
    tie_word_embeddings=True,
  ),
  "qwen2.5-1.5b": dict(
    vocab_size=151936,
    hidden_size=1536,
    intermediate_size=8960,
    num_layers=28,
    num_heads=12,
    num_kv_heads=2,
    head_dim=128,
    tie_word_embeddings=True,
  ),
  "qwen2.5-7b": dict(
    vocab_size=152064,
    hidden_size=3584,
    intermediate_size=18944,
    num_layers=28,
    num_heads=28,
    num_kv_heads=4,
    head_dim=128,
    tie_word_embeddings=False,
  ),
  # HuggingFaceTB/SmolLM2-135M-Instruct, a llama: no q/k/v bias, RoPE θ 1e5, eps 1e-5 (its config.json and GGUF agree)
  "smollm2-135m": dict(
    vocab_size=49152,
    hidden_size=576,
    intermediate_size=1536,
    num_layers=30,
    num_heads=9,
    num_kv_heads=3,
    head_dim=64,
    tie_word_embeddings=True,
    rope_theta=1e5,
    qkv_bias=False,
    max_position_embeddings=8192,
    rms_norm_eps=1e-5,
    architecture="LlamaForCausalLM",
  ),
}
_QWEN = dict(
  rope_theta=1e6, qkv_bias=True, max_position_embeddings=32768, rms_norm_eps=1e-6, architecture="Qwen2ForCausalLM"
)


def known_model_name(name: str) -> str | None:
  """'/ckpt/Qwen2.5-7B-Instruct' -> 'qwen2.5-7b' (the table key the basename starts with), else None."""
  base = os.path.basename(os.path.normpath(str(name))).lower()
  return next((k for k in sorted(KNOWN_MODELS, key=len, reverse=True) if base.startswith(k)), None)


def resolve_model(cfg, vocab_size: int, attention: str | None = None):
  """The ModelConfig plan compiles for one model (`cfg`: its coevolution.settings.ModelSettings): KNOWN_MODELS by
  `arch` or `hf_path`, else the shape fields (ModelSettings.model_config); the attention implementation is
  `attention` when given (plan --attention), else the setting's."""
  from genenv_jax.models.config import ModelConfig

  name = cfg.arch or cfg.hf_path
  if not name:
    mc = cfg.model_config(vocab_size)
  else:
    key = known_model_name(name)
    if key is None:
      raise ValueError(
        f"plan does not read checkpoints and does not know the architecture of {name!r} (known: "
        f"{', '.join(KNOWN_MODELS)}); set the model's arch field to one of those, or set hf_path='' "
        "and give the shape fields (hidden_size, intermediate_size, num_layers, ...)"
      )
    mc = ModelConfig(
      **{**_QWEN, **KNOWN_MODELS[key]}, param_dtype=cfg.dtype, dtype=cfg.dtype, remat=cfg.remat, attention=cfg.attention
    )
  return dataclasses.replace(mc, attention=attention) if attention else mc


def shape_of(mc, kv_cache: str = "auto"):
  """costs.Shape of a ModelConfig, with the KV cache kind its sampling uses."""
  import numpy as np

  from genenv_jax.models.config import to_dtype
  from genenv_jax.planning import costs

  head = mc.vocab_size * mc.hidden_size
  untied_head = 0 if mc.tie_word_embeddings else head
  body = mc.num_params - mc.vocab_size * mc.hidden_size - mc.hidden_size - untied_head
  return costs.Shape(
    body_params=body,
    head_params=head,
    layers=mc.num_layers,
    heads=mc.num_heads,
    head_dim=mc.head_dim,
    kv_heads=mc.num_kv_heads,
    param_bytes=mc.num_params * np.dtype(to_dtype(mc.param_dtype)).itemsize,
    hidden=mc.hidden_size,
    intermediate=mc.intermediate_size,
    dtype_bytes=np.dtype(to_dtype(mc.dtype)).itemsize,
    kv_cache=kv_cache,
  )
