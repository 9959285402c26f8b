"""Chunked log-probs and entropy against the unchunked computation; the policy at the sampling temperature."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from genenv_jax.models.config import ModelConfig
from genenv_jax.models.transformer import Transformer
from genenv_jax.rl.logprobs import chunked_token_logprobs, policy_temperature, response_logprobs
from genenv_jax.sampling import sampler as sampling

VOCAB = 37


def _inputs(b=3, r=11, e=8, v=VOCAB, seed=0):
  k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
  hidden = jax.random.normal(k1, (b, r, e), jnp.float32)
  head = jax.random.normal(k2, (e, v), jnp.float32)
  targets = jax.random.randint(k3, (b, r), 0, v)
  return hidden, head, targets


def _naive(hidden, head, targets, temperature):
  """The whole [B, R, V] at once, with numpy-free plain jnp: log_softmax(h W / T)[y] and -Σ p log p."""
  logits = (hidden @ head) / temperature
  logp_all = jax.nn.log_softmax(logits, -1)
  logp = jnp.take_along_axis(logp_all, targets[..., None], -1)[..., 0]
  return logp, -(jnp.exp(logp_all) * logp_all).sum(-1)


@pytest.mark.parametrize("chunk,temperature", [(1, 0.7), (4, 1.0), (4, 0.7), (11, 0.7), (64, 1.3)])
def test_chunked_matches_unchunked_values_and_gradients(chunk, temperature):
  hidden, head, targets = _inputs()
  w = jax.random.normal(jax.random.key(5), targets.shape)  # a random cotangent, so every position's gradient counts
  u = jax.random.normal(jax.random.key(6), targets.shape)

  def objective(fn):
    def f(h, hw):
      logp, ent = fn(h, hw)
      return (w * logp).sum() + (u * ent).sum()

    return jax.value_and_grad(f, argnums=(0, 1))

  def chunked(h, hw):
    return chunked_token_logprobs(
      h,
      hw,
      targets,
      temperature=temperature,  # noqa: E731
      chunk_size=chunk,
      with_entropy=True,
    )

  naive = lambda h, hw: _naive(h, hw, targets, temperature)  # noqa: E731
  got, want = chunked(hidden, head), naive(hidden, head)
  np.testing.assert_allclose(got[0], want[0], atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(got[1], want[1], atol=1e-5, rtol=1e-5)
  (val_c, grads_c), (val_n, grads_n) = jax.jit(objective(chunked))(hidden, head), objective(naive)(hidden, head)
  np.testing.assert_allclose(val_c, val_n, rtol=1e-5)
  for gc, gn in zip(grads_c, grads_n, strict=True):
    np.testing.assert_allclose(gc, gn, atol=1e-5, rtol=1e-5)


def test_entropy_only_when_asked_and_bad_chunk():
  hidden, head, targets = _inputs()
  assert chunked_token_logprobs(hidden, head, targets, chunk_size=4)[1] is None
  with pytest.raises(ValueError, match="chunk size must be positive"):
    chunked_token_logprobs(hidden, head, targets, chunk_size=0)
  with pytest.raises(ValueError, match="temperature must be >= 0"):
    policy_temperature(-0.5)
  assert policy_temperature(0.0) == 1.0 and policy_temperature(0.7) == 0.7


def test_chunked_backward_peak_is_one_chunk_of_logits():
  """The compiled fwd+bwd's temporaries grow with the chunk, [B, chunk, V], not with R: the full logits are 16 MiB."""
  b, r, e, v = 2, 256, 16, 8192
  hidden, head, targets = _inputs(b, r, e, v)

  def temp_bytes(chunk_size):
    def f(h, hw):
      return chunked_token_logprobs(
        h,
        hw,
        targets,
        chunk_size=chunk_size,  # noqa: E731
        with_entropy=True,
      )[0].sum()

    return jax.jit(jax.grad(f, argnums=(0, 1))).lower(hidden, head).compile().memory_analysis().temp_size_in_bytes

  full_logits = b * r * v * 4
  unchunked, chunk8, chunk32 = temp_bytes(r), temp_bytes(8), temp_bytes(32)
  assert unchunked >= full_logits  # the measure sees the [B, R, V] float32 logits when they exist
  assert chunk8 < full_logits / 4, (chunk8, unchunked)
  assert 3 * chunk8 < chunk32 < full_logits / 2, (chunk8, chunk32)  # linear in the chunk


def _model(vocab=53, seed=0):
  config = ModelConfig(
    vocab_size=vocab,
    hidden_size=32,
    intermediate_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
    max_position_embeddings=64,
  )
  return Transformer(config, rngs=nnx.Rngs(seed))


def _prompts(b=4, p=6, vocab=53):
  rng = np.random.RandomState(0)
  ids = rng.randint(3, vocab, size=(b, p)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, :2] = 0
  mask[3, :4] = 0
  return jnp.asarray(ids * mask), jnp.asarray(mask)


def test_response_logprobs_equals_full_forward_at_temperature():
  model = _model()
  ids, mask = _prompts()
  rng = np.random.RandomState(1)
  response = jnp.asarray(rng.randint(0, 53, size=(4, 9)).astype(np.int32))
  rmask = jnp.asarray((np.arange(9)[None] < np.array([9, 5, 1, 7])[:, None]).astype(np.int32))
  logits, _ = model(jnp.concatenate([ids, response], 1), jnp.concatenate([mask, rmask], 1))
  full = jax.nn.log_softmax(logits[:, ids.shape[1] - 1 : -1] / 0.6, -1)
  want = jnp.take_along_axis(full, response[..., None], -1)[..., 0] * rmask
  for chunk in (2, 4, 512):
    got, ent = response_logprobs(
      model, ids, mask, response, rmask, with_entropy=True, temperature=0.6, chunk_size=chunk
    )
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(ent, -(jnp.exp(full) * full).sum(-1), atol=1e-5)
    assert not np.asarray(got)[np.asarray(rmask) == 0].any()


@pytest.mark.parametrize("temperature", [0.7, 1.6])
def test_unchanged_policy_has_ratio_one_at_the_sampling_temperature(temperature):
  """The sampler's log-probs (the old policy) and response_logprobs (current / reference) are one definition."""
  model = _model(seed=2)
  ids, mask = _prompts()
  params = sampling.SamplingParams(max_new_tokens=12, temperature=temperature)
  graphdef, state = nnx.split(model)
  out = jax.jit(lambda s, k: sampling.sample(nnx.merge(graphdef, s), ids, mask, k, params))(state, jax.random.key(3))
  logp, _ = response_logprobs(model, ids, mask, out.tokens, out.mask, temperature=temperature, chunk_size=5)
  m = np.asarray(out.mask).astype(bool)
  ratio = np.exp(np.asarray(logp) - np.asarray(out.logprobs))[m]
  np.testing.assert_allclose(ratio, 1.0, atol=1e-4)
  # scoring at T = 1 instead (the defect this guards against) is far from 1 on the same tokens
  raw, _ = response_logprobs(model, ids, mask, out.tokens, out.mask)
  assert np.abs(np.exp(np.asarray(raw) - np.asarray(out.logprobs))[m] - 1).max() > 0.05
