"""Chunked log-probs and entropy against the unchunked computation; the policy at the sampling temperature."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from genenv_jax.models.config import ModelConfig
from genenv_jax.models.transformer import Transformer
from genenv_jax.rl.logprobs import (
  chunked_token_logprobs,
  policy_temperature,
  response_logprobs,
  row_chunks,
  scored_policy,
)
from genenv_jax.sampling import sampler

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


def _weighted_value_and_grad(fn, w, u):
  """value_and_grad over (hidden, head) of Σ w·logp + Σ u·entropy for `fn(hidden, head) -> (logp, entropy)`: random
  cotangents, so every position's gradient counts."""

  def f(h, hw):
    logp, ent = fn(h, hw)
    return (w * logp).sum() + (u * ent).sum()

  return jax.value_and_grad(f, argnums=(0, 1))


@pytest.mark.parametrize("chunk,temperature", [(1, 0.7), (4, 1.0), (4, 0.7), (11, 0.7), (64, 1.3)])
def test_chunked_matches_unchunked_values_and_gradients(chunk, temperature):
  hidden, head, targets = _inputs()
  w = jax.random.normal(jax.random.key(5), targets.shape)  # a random cotangent, so every position's gradient counts
  u = jax.random.normal(jax.random.key(6), targets.shape)

  objective = lambda fn: _weighted_value_and_grad(fn, w, u)  # noqa: E731

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


def test_row_chunks_is_the_fewest_dividing_split_under_the_bound():
  assert row_chunks(128, 16, 49152, 2**24) == 8  # 16 rows x 16 positions x 49,152 = 12.6M logits a chunk
  assert row_chunks(128, 16, 49152, 2**30) == 1
  assert row_chunks(480, 4, 64, 2**24) == 1  # the tiny demo: one chunk, the plain computation
  assert row_chunks(12, 4, 10, 100) == 6  # 2 rows (80 logits) fit, 3 (120) do not; 5 does not divide 12
  assert row_chunks(12, 4, 10, 10) == 12  # not one row fits: one row a chunk
  assert row_chunks(32, 512, 152064, 2**24, shards=32) == 1  # one row per device: nothing to split
  assert row_chunks(64, 4, 1000, 8000, shards=4) == 8  # per shard: 16 rows -> 2 a chunk
  assert row_chunks(30, 4, 1000, 8000, shards=4) == 1  # rows that do not split over the shards are not split


@pytest.mark.parametrize(
  "chunk,max_logits", [(11, 2 * 11 * VOCAB), (4, 4 * VOCAB), (1, 1), (64, 3 * 11 * VOCAB - 1)], ids=str
)
@pytest.mark.parametrize("entropy_gradient", [True, False])
def test_row_chunked_matches_unchunked_values_and_gradients(chunk, max_logits, entropy_gradient):
  """Rows split by max_chunk_logits (alone or with position chunks) give the naive values and gradients; with
  entropy_gradient=False the entropy's values are the same and it adds nothing to the gradient."""
  hidden, head, targets = _inputs(b=6)
  w = jax.random.normal(jax.random.key(5), targets.shape)
  u = jax.random.normal(jax.random.key(6), targets.shape)

  grads = lambda fn: _weighted_value_and_grad(fn, w, u)  # noqa: E731

  def chunked(h, hw):
    return chunked_token_logprobs(
      h,
      hw,
      targets,
      temperature=0.7,
      chunk_size=chunk,
      with_entropy=True,
      entropy_gradient=entropy_gradient,
      max_chunk_logits=max_logits,
    )

  def naive(h, hw):
    logp, ent = _naive(h, hw, targets, 0.7)
    return logp, (ent if entropy_gradient else jax.lax.stop_gradient(ent))

  got, want = jax.jit(chunked)(hidden, head), naive(hidden, head)
  np.testing.assert_allclose(got[0], want[0], atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(got[1], want[1], atol=1e-5, rtol=1e-5)
  (val_c, grads_c), (val_n, grads_n) = jax.jit(grads(chunked))(hidden, head), grads(naive)(hidden, head)
  np.testing.assert_allclose(val_c, val_n, rtol=1e-5)
  for gc, gn in zip(grads_c, grads_n, strict=True):
    np.testing.assert_allclose(gc, gn, atol=1e-5, rtol=1e-5)


def test_entropy_as_a_metric_keeps_the_values_bit_for_bit():
  hidden, head, targets = _inputs(b=6)
  kw = dict(temperature=0.7, chunk_size=4, with_entropy=True)
  on = jax.jit(lambda h: chunked_token_logprobs(h, head, targets, **kw))(hidden)
  off = jax.jit(lambda h: chunked_token_logprobs(h, head, targets, entropy_gradient=False, **kw))(hidden)
  for a, b in zip(on, off, strict=True):
    np.testing.assert_array_equal(a, b)


def _loss_temp_bytes(hidden, head, targets, **kw):
  """The compiled forward + backward's temporaries of a GRPO-like loss over chunked_token_logprobs with entropy."""

  def f(h, hw):
    logp, ent = chunked_token_logprobs(h, hw, targets, with_entropy=True, **kw)
    return logp.sum() + 0.0 * ent.sum()

  return jax.jit(jax.grad(f, argnums=(0, 1))).lower(hidden, head).compile().memory_analysis().temp_size_in_bytes


def test_many_short_rows_peak_at_one_row_chunk_of_logits():
  """128 rows x 4 positions over 8,192 words, the shape of a GRPO batch of short answers over a large vocabulary:
  with max_chunk_logits the backward's temporaries are a few copies of one row chunk's logits (16 rows here), not of
  the batch's [B, R, V] (16 MiB), which the position chunks alone (R <= chunk_size: one chunk) left whole. The
  entropy as a metric holds less again."""
  b, r, e, v = 128, 4, 16, 8192
  hidden, head, targets = _inputs(b, r, e, v)
  full, rows16 = b * r * v * 4, 16 * r * v
  whole = _loss_temp_bytes(hidden, head, targets, max_chunk_logits=b * r * v)
  split = _loss_temp_bytes(hidden, head, targets, max_chunk_logits=rows16)
  metric = _loss_temp_bytes(hidden, head, targets, max_chunk_logits=rows16, entropy_gradient=False)
  assert whole >= 3 * full, whole  # the batch's logits, several copies at once
  small = 4 * (hidden.size + head.size) * 4  # gradients of the hidden states and the head, and their inputs
  assert split <= 5 * rows16 * 4 + small, (split, rows16 * 4)
  assert metric < 0.6 * split, (metric, split)  # the entropy's softmax is not kept for the backward


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
  params = sampler.SamplingParams(max_new_tokens=12, temperature=temperature)
  graphdef, state = nnx.split(model)
  out = jax.jit(lambda s, k: sampler.sample(nnx.merge(graphdef, s), ids, mask, k, params))(state, jax.random.key(3))
  logp, _ = response_logprobs(model, ids, mask, out.tokens, out.mask, temperature=temperature, chunk_size=5)
  m = np.asarray(out.mask).astype(bool)
  ratio = np.exp(np.asarray(logp) - np.asarray(out.logprobs))[m]
  np.testing.assert_allclose(ratio, 1.0, atol=1e-4)
  # scoring at T = 1 instead (the defect this guards against) is far from 1 on the same tokens
  raw, _ = response_logprobs(model, ids, mask, out.tokens, out.mask)
  assert np.abs(np.exp(np.asarray(raw) - np.asarray(out.logprobs))[m] - 1).max() > 0.05


def _filtered_logprobs(logits, params):
  """log π of every id by direct computation in float64: z / T, top-k keeping the ties of the k-th value, then the
  smallest prefix by decreasing z with mass >= top_p (and its ties), renormalised over the kept set; -inf outside."""
  z = np.asarray(logits, np.float64) / sampler.policy_temperature(params.temperature)
  out = np.full(z.shape, -np.inf)
  for idx in np.ndindex(z.shape[:-1]):
    row = z[idx]
    keep = row >= np.sort(row)[::-1][params.top_k - 1] if params.top_k else np.ones(row.shape, bool)
    if params.top_p < 1:
      p = np.where(keep, np.exp(row - row.max()), 0.0)
      p /= p.sum()
      order = np.argsort(-row, kind="stable")
      before = np.cumsum(p[order]) - p[order]
      keep &= row >= row[order][before < params.top_p].min()
    out[idx] = np.where(keep, row - np.log(np.exp(row[keep] - row.max()).sum()) - row.max(), -np.inf)
  return out


@pytest.mark.parametrize("top_k,top_p", [(5, 1.0), (0, 0.9), (5, 0.9)], ids=["top-k 5", "top-p 0.9", "both"])
def test_top_k_top_p_on_policy_update_has_ratio_one(top_k, top_p):
  """The sampler's log-probs and the training log-probs are both log π of the filtered, renormalised distribution
  that was sampled (checked against a direct computation), so a one-mini-batch GRPO update sees ratio 1."""
  from genenv_jax.rl import grpo
  from genenv_jax.rl.updates import make_optimizer, minibatch_updates

  model = _model(seed=2)
  ids, mask = _prompts()
  params = sampler.SamplingParams(max_new_tokens=12, temperature=0.8, top_k=top_k, top_p=top_p)
  graphdef, state = nnx.split(model)
  out = jax.jit(lambda s, k: sampler.sample(nnx.merge(graphdef, s), ids, mask, k, params))(state, jax.random.key(3))
  m = np.asarray(out.mask).astype(bool)
  logits, _ = model(jnp.concatenate([ids, out.tokens], 1), jnp.concatenate([mask, out.mask], 1))
  direct = _filtered_logprobs(logits[:, ids.shape[1] - 1 : -1], params)
  want = np.take_along_axis(direct, np.asarray(out.tokens)[..., None], -1)[..., 0]
  np.testing.assert_allclose(np.asarray(out.logprobs)[m], want[m], atol=1e-5)  # the sampler's: log π of the draw
  logp, _ = response_logprobs(model, ids, mask, out.tokens, out.mask, policy=params, chunk_size=5)
  np.testing.assert_allclose(np.asarray(logp)[m], want[m], atol=1e-5)

  def loss_fn(s, b):
    new, entropy = response_logprobs(
      nnx.merge(graphdef, s), ids, mask, b["tokens"], b["mask"], with_entropy=True, policy=params, chunk_size=5
    )
    return grpo.grpo_loss(new, b["logp_old"], None, b["adv"], b["mask"], entropy=entropy)

  batch = {"tokens": out.tokens, "mask": out.mask, "logp_old": out.logprobs, "adv": jnp.asarray([1.0, -1.0, 0.5, -0.5])}
  opt = make_optimizer(1e-3)
  _, _, metrics = minibatch_updates(loss_fn, opt, state, opt.init(state), batch, 1)
  assert abs(float(metrics["ratio_mean"]) - 1.0) < 1e-5 and abs(float(metrics["ratio_max"]) - 1.0) < 1e-5
  assert float(metrics["clip_frac"]) == 0.0 and int(metrics["skipped"]) == 0
  # scoring the unfiltered tempered softmax instead (the defect this guards against): ratio = kept mass, below 1
  raw, _ = response_logprobs(model, ids, mask, out.tokens, out.mask, temperature=0.8)
  assert np.exp(np.asarray(raw) - np.asarray(out.logprobs))[m].min() < 0.95


def test_scored_policy_takes_the_sampling_settings_once():
  params = sampler.SamplingParams(max_new_tokens=4, temperature=0.7, top_k=5)
  assert scored_policy(params) is params
  assert scored_policy(None, 0.7, 10) == sampler.SamplingParams(max_new_tokens=1, temperature=0.7, vocab_limit=10)
  with pytest.raises(ValueError, match="pass the sampling settings once"):
    scored_policy(params, temperature=0.7)
  with pytest.raises(TypeError, match="policy must be a sampling.sampler.SamplingParams"):
    scored_policy({"temperature": 0.7})
