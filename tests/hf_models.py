"""Tiny random transformers models (torch, CPU) saved with save_pretrained: the references for parity tests."""

from __future__ import annotations

import pathlib

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# name -> (architecture, config overrides). Together they cover GQA with 1 and several KV heads, tied and untied
# embeddings, Qwen2 q/k/v biases and non-default rope theta.
TINY_CONFIGS = {
  "llama_gqa2_untied": ("llama", dict(num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)),
  "llama_mqa_tied_theta": (
    "llama",
    dict(num_attention_heads=4, num_key_value_heads=1, tie_word_embeddings=True, rope_theta=500.0),
  ),
  "qwen2_gqa2_tied": ("qwen2", dict(num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)),
  "qwen2_mha_untied_theta": (
    "qwen2",
    dict(num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=False, rope_theta=1_000_000.0),
  ),
}


def make_hf_model(kind: str, seed: int = 0, **overrides):
  """A random transformers CausalLM (weights ~ N(0, 0.1²), biases included, so every parameter matters)."""
  base = dict(
    vocab_size=101,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-6,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
  )
  base.update(overrides)
  config_cls = transformers.LlamaConfig if kind == "llama" else transformers.Qwen2Config
  model_cls = transformers.LlamaForCausalLM if kind == "llama" else transformers.Qwen2ForCausalLM
  torch.manual_seed(seed)
  model = model_cls(config_cls(**base)).eval()
  with torch.no_grad():
    for p in model.parameters():
      p.normal_(0.0, 0.1)
  return model


def save_hf_model(model, directory: pathlib.Path) -> pathlib.Path:
  model.save_pretrained(directory)
  return directory


def hf_logits(model, input_ids, attention_mask):
  with torch.no_grad():
    return model(input_ids=torch.as_tensor(input_ids), attention_mask=torch.as_tensor(attention_mask)).logits.numpy()
