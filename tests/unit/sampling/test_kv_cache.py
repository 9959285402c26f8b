"""The KV cache's kinds: the compute dtype ("auto") and int8 with a scale per row, head and slot."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from genenv_jax.models.config import ModelConfig
from genenv_jax.models.transformer import Transformer, init_cache, quantize_kv
from genenv_jax.sampling import sampler

CONFIG = dict(
  vocab_size=64, hidden_size=32, intermediate_size=48, num_layers=3, num_heads=4, num_kv_heads=2, head_dim=8
)


def test_quantize_kv_round_trip_error_is_within_half_a_step():
  x = jax.random.normal(jax.random.key(0), (3, 2, 5, 16)) * jnp.array([0.01, 1.0, 100.0])[:, None, None, None]
  q, scale = quantize_kv(x)
  assert q.dtype == jnp.int8 and scale.shape == x.shape[:-1]
  back = q.astype(jnp.float32) * scale[..., None]
  step = np.max(np.abs(np.asarray(x)), axis=-1, keepdims=True) / 127.0
  assert np.all(np.abs(np.asarray(back - x)) <= step / 2 + 1e-7)
  q0, s0 = quantize_kv(jnp.zeros((2, 4)))  # an all-zero vector (an unwritten slot) stays exactly zero
  assert not np.any(np.asarray(q0)) and not np.any(np.asarray(s0))


def test_int8_cache_holds_int8_and_its_scales():
  cache = init_cache(ModelConfig(**CONFIG), 2, 10, kind="int8")["layers"]
  assert cache["k"].dtype == jnp.int8 and cache["k"].shape == (3, 2, 2, 10, 8)
  assert cache["k_scale"].dtype == jnp.float32 and cache["k_scale"].shape == (3, 2, 2, 10)
  with pytest.raises(ValueError, match="unknown KV cache kind 'int4'"):
    init_cache(ModelConfig(**CONFIG), 2, 10, kind="int4")
  with pytest.raises(ValueError, match="kv_cache must be one of auto, int8"):
    sampler.SamplingParams(max_new_tokens=2, kv_cache="fp8")


def test_int8_cache_decoding_stays_close_to_the_full_forward():
  cfg = ModelConfig(**CONFIG)
  model = Transformer(cfg, rngs=nnx.Rngs(0))
  ids = jax.random.randint(jax.random.key(1), (2, 8), 1, 64)
  mask = jnp.ones_like(ids).at[0, :2].set(0)  # one left-padded row
  full, _ = model(ids, mask)
  cache = init_cache(cfg, 2, 10, kind="int8")
  _, cache = model(ids[:, :4], mask[:, :4], cache)
  steps = []
  for t in range(4, 8):
    logits, cache = model(ids[:, t : t + 1], mask[:, t : t + 1], cache)
    steps.append(logits[:, 0])
  err = np.abs(np.stack(steps, 1) - np.asarray(full[:, 4:]))
  spread = float(np.std(np.asarray(full[:, 4:])))
  assert err.max() < 0.1 * spread, (err.max(), spread)  # quantisation noise, well below the logits' spread
  assert err.max() > 0  # and it is really quantised


def test_greedy_generation_with_an_int8_cache_agrees_with_the_exact_cache():
  model = Transformer(ModelConfig(**CONFIG), rngs=nnx.Rngs(2))
  ids = np.asarray(jax.random.randint(jax.random.key(3), (4, 6), 1, 64))
  exact = sampler.generate(model, ids, max_new_tokens=12, temperature=0.0)
  int8 = sampler.generate(model, ids, max_new_tokens=12, temperature=0.0, kv_cache="int8")
  agree = np.asarray(exact.tokens) == np.asarray(int8.tokens)
  assert agree[:, :4].all() and agree.mean() >= 0.9, agree


def test_a_vocabulary_limit_is_never_drawn_and_scored_alike():
  """An embedding padded past the tokenizer (Qwen2.5) never yields a padding id, and the sampler's log-probs equal
  rl.logprobs' under the same limit (an unchanged policy has ratio 1)."""
  from genenv_jax.rl.logprobs import response_logprobs

  config = ModelConfig(**{**CONFIG, "vocab_size": 64})
  model = Transformer(config, rngs=nnx.Rngs(4))
  ids = np.asarray(jax.random.randint(jax.random.key(5), (4, 6), 1, 40))
  out = sampler.generate(model, ids, max_new_tokens=16, temperature=1.5, vocab_limit=40, key=jax.random.key(6))
  tokens = np.asarray(out.tokens)
  assert tokens.max() < 40
  unlimited = sampler.generate(model, ids, max_new_tokens=16, temperature=1.5, key=jax.random.key(6))
  assert np.asarray(unlimited.tokens).max() >= 40  # without the limit a random model draws padding ids
  mask = jnp.ones_like(ids)
  logp, _ = response_logprobs(model, ids, mask, out.tokens, out.mask, temperature=1.5, vocab_limit=40)
  np.testing.assert_allclose(np.asarray(logp), np.asarray(out.logprobs), atol=2e-5)
  assert sampler.limit_vocab(jnp.zeros((2, 8)), 0).min() == 0  # 0 = no limit
