"""Every CPU-runnable attention implementation against the naive reference: forward 1e-5, gradients 1e-4."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hf_models import TINY_CONFIGS, hf_logits, make_hf_model, save_hf_model
from test_model_parity import ATOL, left_padded_batch, masked_max_diff

import genenv_jax as gj
from genenv_jax.models import attention as attn
from genenv_jax.models.attention_blockwise import _visible_blocks, blockwise_attention
from genenv_jax.models.attention_cudnn import cudnn_attention
from genenv_jax.models.attention_splash import splash_attention
from genenv_jax.parallel.sharding import make_mesh

FWD_TOL, GRAD_TOL = 1e-5, 1e-4

# name -> f(q, k, v, key_mask) for prefill (query_offset 0, S == T). Small blocks so that several tiles are visited.
PREFILL = {
  "blockwise": functools.partial(blockwise_attention, block_q=4, block_k=3),
  "blockwise_default_blocks": blockwise_attention,
  "cudnn_rotation_xla": functools.partial(cudnn_attention, implementation="xla"),
  "splash_interpret": functools.partial(splash_attention, interpret=True),
}


def _inputs(b=3, t=13, n=4, kv=2, d=8, s=None, seed=0):
  rng = np.random.RandomState(seed)
  s = t if s is None else s
  q = jnp.asarray(rng.randn(b, t, n, d), jnp.float32)
  k, v = (jnp.asarray(rng.randn(b, kv, s, d), jnp.float32) for _ in range(2))
  return q, k, v, jnp.asarray(rng.randn(b, t, n, d), jnp.float32)


def _prefill_mask(b, t):
  """Row 0 full, row 1 left-padded, row 2 left-padded and right-padded (a prompt followed by a short response)."""
  mask = np.ones((b, t), bool)
  mask[1, :5] = False
  mask[2, :3] = False
  mask[2, -4:] = False
  return jnp.asarray(mask)


def _check(f, ref, q, k, v, r, rows):
  """Forward on rows that see a key and gradients of Σ out·r over those rows, f against ref."""

  def loss(g):
    return lambda q, k, v: jnp.sum(jnp.where(rows[:, :, None, None], g(q, k, v), 0.0) * r)

  got, want = f(q, k, v), ref(q, k, v)
  assert got.shape == want.shape and got.dtype == want.dtype
  assert np.all(np.isfinite(np.asarray(got)))
  fwd = float(jnp.max(jnp.abs(jnp.where(rows[:, :, None, None], got - want, 0.0))))
  assert fwd < FWD_TOL, fwd
  grads = zip(jax.grad(loss(f), (0, 1, 2))(q, k, v), jax.grad(loss(ref), (0, 1, 2))(q, k, v))
  largest = 0.0
  for name, (g, w) in zip("qkv", grads):
    diff = float(jnp.max(jnp.abs(g - w)))
    assert diff < GRAD_TOL, (name, diff)
    largest = max(largest, float(jnp.max(jnp.abs(w))))
  assert largest > 1e-3  # the comparison is not between zeros


@pytest.mark.parametrize("name", sorted(PREFILL))
@pytest.mark.parametrize("heads", [(4, 2), (4, 4), (4, 1)], ids=["gqa", "mha", "mqa"])
def test_prefill_matches_naive(name, heads):
  q, k, v, r = _inputs(n=heads[0], kv=heads[1])
  mask = _prefill_mask(*q.shape[:2])
  _check(
    lambda q, k, v: PREFILL[name](q, k, v, mask),
    lambda q, k, v: attn.naive_attention(q, k, v, mask, 0),
    q,
    k,
    v,
    r,
    mask,
  )


@pytest.mark.parametrize("name", sorted(PREFILL))
def test_all_padding_row_stays_finite(name):
  """A row with no real token (batch filler) must not emit NaN: the next layer multiplies its keys by zero weights."""
  q, k, v, _ = _inputs(b=2, t=6)
  mask = jnp.asarray([[False] * 6, [True] * 6])
  out = PREFILL[name](q, k, v, mask)
  assert np.all(np.isfinite(np.asarray(out)))
  np.testing.assert_allclose(out[1], attn.naive_attention(q, k, v, mask, 0)[1], atol=FWD_TOL)


@pytest.mark.parametrize("t,offset", [(1, 9), (1, 0), (3, 6), (5, 11)])
def test_cached_call_matches_naive_and_skips_unfilled_blocks(t, offset):
  """A chunk of t queries at cache slot `offset` over a 24-slot cache with kv_length = offset + t. Key blocks wholly
  past kv_length hold NaN: they must never be read (the decode cost grows with the filled length)."""
  s, block_k = 24, 4
  q, k, v, r = _inputs(t=t, s=s, seed=t + offset)
  mask = np.zeros((3, s), bool)
  mask[:, : offset + t] = True
  mask[1, : min(4, offset)] = False  # a left-padded prompt
  mask = jnp.asarray(mask)
  unread = -(-(offset + t) // block_k) * block_k

  def poison(x):
    return x.at[:, :, unread:].set(jnp.nan)

  def f(q, k, v):
    return blockwise_attention(
      q, poison(k), poison(v), mask, jnp.int32(offset), jnp.int32(offset + t), block_q=2, block_k=block_k
    )

  rows = jnp.ones((3, t), bool)
  _check(f, lambda q, k, v: attn.naive_attention(q, k, v, mask, offset), q, k, v, r, rows)


def test_causal_prefill_skips_blocks_above_the_diagonal():
  """Without kv_length, query block i reads key blocks up to its last slot only: later keys may be NaN."""
  q, k, v, r = _inputs(t=4, s=16)
  mask = jnp.ones((3, 16), bool)

  def poison(x):
    return x.at[:, :, 4:].set(jnp.nan)

  def f(q, k, v):
    return blockwise_attention(q, poison(k), poison(v), mask, 0, block_q=4, block_k=4)

  _check(f, lambda q, k, v: attn.naive_attention(q, k, v, mask, 0), q, k, v, r, jnp.ones((3, 4), bool))
  assert [int(_visible_blocks(jnp.int32(e), jnp.int32(16), 4, 4)) for e in (1, 4, 5, 16, 40)] == [1, 1, 2, 4, 4]
  assert int(_visible_blocks(jnp.int32(13), jnp.int32(6), 4, 4)) == 2  # kv_length bounds it too


def test_dispatch_and_fallbacks():
  q, k, v, _ = _inputs(d=8)
  mask = _prefill_mask(3, 13)
  want = attn.naive_attention(q, k, v, mask, 0)
  for name in ("blockwise", "auto", "cudnn", "splash"):
    # on CPU: auto -> blockwise; cudnn/splash with a traced offset (a cached call) fall back to blockwise
    got = attn.attention(q, k, v, mask, jnp.int32(0) if name in ("cudnn", "splash") else 0, implementation=name)
    np.testing.assert_allclose(np.asarray(got)[np.asarray(mask)], np.asarray(want)[np.asarray(mask)], atol=FWD_TOL)
  assert attn.resolve("auto", jnp.bfloat16, "tpu") == "splash"
  assert attn.resolve("auto", jnp.bfloat16, "gpu") == "cudnn"
  assert attn.resolve("auto", jnp.float32, "gpu") == "blockwise"
  assert attn.resolve("auto", jnp.float32, "cpu") == "blockwise"
  with pytest.raises(ValueError, match="unknown attention implementation 'flash'"):
    attn.attention(q, k, v, mask, implementation="flash")
  with pytest.raises(ValueError, match="ModelConfig.attention='flash' is unknown"):
    gj.ModelConfig(
      vocab_size=8,
      hidden_size=8,
      intermediate_size=8,
      num_layers=1,
      num_heads=2,
      num_kv_heads=1,
      head_dim=4,
      attention="flash",
    )
  assert (
    gj.ModelConfig(
      vocab_size=8, hidden_size=8, intermediate_size=8, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=4
    ).attention
    == "auto"
  )
  with pytest.raises(ValueError, match="GQA"):
    blockwise_attention(q, k[:, :1].repeat(3, axis=1), v[:, :1].repeat(3, axis=1), mask)


def _with_attention(model, implementation):
  """Sets `implementation` in the config of every module that holds one (the model is loaded with the default)."""
  for _, node in nnx.iter_graph(model):
    if isinstance(getattr(node, "config", None), gj.ModelConfig):
      node.config = dataclasses.replace(node.config, attention=implementation)
  return model


@pytest.mark.parametrize("implementation", ["blockwise", "cudnn", "splash", "auto"])
@pytest.mark.parametrize("config", ["llama_gqa2_untied", "qwen2_mha_untied_theta"])
def test_hf_logit_parity_with_each_implementation(implementation, config, tmp_path):
  """On CPU, cudnn runs its rotation adapter over jax.nn's XLA kernel and splash runs in the Pallas interpreter."""
  kind, overrides = TINY_CONFIGS[config]
  hf_model = make_hf_model(kind, **overrides)
  model = _with_attention(gj.load_hf(save_hf_model(hf_model, tmp_path)), implementation)
  ids, mask = left_padded_batch(hf_model.config.vocab_size)
  assert masked_max_diff(gj.forward(model, ids, mask), hf_logits(hf_model, ids, mask), mask) < ATOL


def test_splash_under_a_mesh_runs_in_shard_map():
  """Batch over data, key/value heads over tensor: each device's kernel sees whole sequences, so results match."""
  q, k, v, r = _inputs(b=2, n=4, kv=2)
  mask = _prefill_mask(3, 13)[1:]
  mesh = make_mesh({"data": 2, "fsdp": 1, "tensor": 2}, jax.devices()[:4])
  with jax.set_mesh(mesh):
    _check(
      jax.jit(lambda q, k, v: splash_attention(q, k, v, mask, interpret=True)),
      lambda q, k, v: attn.naive_attention(q, k, v, mask, 0),
      q,
      k,
      v,
      r,
      mask,
    )


def test_bfloat16_inputs_keep_their_dtype_and_track_float32():
  """bf16 q, k, v (a bf16 model): scores and softmax stay float32 inside, so blockwise is as close to the float32
  reference as naive in bf16 is."""
  q, k, v, _ = _inputs()
  mask = _prefill_mask(3, 13)
  rows = np.asarray(mask)
  want = np.asarray(attn.naive_attention(q, k, v, mask, 0))[rows]
  lo = [x.astype(jnp.bfloat16) for x in (q, k, v)]
  got = blockwise_attention(*lo, mask, block_q=4, block_k=3)
  assert got.dtype == jnp.bfloat16
  err = np.max(np.abs(np.asarray(got, np.float32)[rows] - want))
  err_naive = np.max(np.abs(np.asarray(attn.naive_attention(*lo, mask, 0), np.float32)[rows] - want))
  assert err < 2 * err_naive + 1e-3, (err, err_naive)
