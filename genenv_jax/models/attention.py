"""Causal grouped-query attention behind one function; the implementation is a config choice.

softmax(q kᵀ / √d + mask) v (Vaswani et al. 2017), with num_heads query heads sharing num_kv_heads key/value heads
(GQA, Ainslie et al. 2023). The mask is built from two small arrays, never passed in as [T, S]:
  query t (at cache slot query_offset + t) sees key slot s  iff  s <= query_offset + t  and  key_mask[b, s].
Left-padded prompts, right-padded responses and a partly filled KV cache are all expressed by `key_mask`.

A query row that sees no key (a padding position) gets some finite output; callers never read it.

Implementations (ModelConfig.attention):
  naive      the reference below; materialises [B, H, T, S] float32 scores.
  blockwise  pure-JAX flash attention with a custom VJP (attention_blockwise); every backend; reads only the key
             blocks below kv_length and the causal diagonal.
  splash     TPU Pallas splash attention (attention_splash) for prefill; cached calls go to blockwise.
  cudnn      GPU cuDNN flash attention (attention_cudnn) for prefill; cached calls go to blockwise.
  auto       by the target platform (parallel.target: the mesh's devices, so an ahead-of-time compile for TPU devices
             on a CPU host gets TPU choices): TPU -> splash, GPU -> cudnn (blockwise for float32, which cuDNN's kernel
             does not take), CPU -> blockwise.
"Prefill" means a call without a cache: query_offset is the Python int 0, no kv_length, and S == T.
Asked for explicitly on another target platform, splash runs in the Pallas interpreter and cudnn's adapter runs
jax.nn's XLA kernel (both slow and quadratic in memory, for tests of the adapters on CPU).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from genenv_jax.models.attention_blockwise import blockwise_attention
from genenv_jax.models.attention_cudnn import cudnn_attention
from genenv_jax.models.attention_splash import splash_attention
from genenv_jax.parallel.target import target_platform

IMPLEMENTATIONS = ("naive", "blockwise", "splash", "cudnn", "auto")


def naive_attention(
  q: jax.Array, k: jax.Array, v: jax.Array, key_mask: jax.Array, query_offset: jax.Array | int
) -> jax.Array:
  """The reference: materialises the float32 scores [B, K, group, T, S]. q [B,T,N,D]; k, v [B,K,S,D]; -> [B,T,N,D]."""
  b, t, n, d = q.shape
  kv_heads, s = k.shape[1], k.shape[2]
  group = n // kv_heads
  qg = q.reshape(b, t, kv_heads, group, d)
  scores = jnp.einsum("btkgd,bksd->bkgts", qg, k.astype(q.dtype)).astype(jnp.float32) / math.sqrt(d)
  query_slots = query_offset + jnp.arange(t)
  allowed = (jnp.arange(s)[None, None, :] <= query_slots[None, :, None]) & key_mask[:, None, :].astype(bool)
  scores = jnp.where(allowed[:, None, None, :, :], scores, jnp.finfo(jnp.float32).min)
  probs = jax.nn.softmax(scores, axis=-1).astype(q.dtype)
  return jnp.einsum("bkgts,bksd->btkgd", probs, v.astype(q.dtype)).reshape(b, t, n, d)


def resolve(implementation: str, dtype=jnp.float32, backend: str | None = None) -> str:
  """The concrete implementation that `implementation` names on `backend` (default: the target platform)."""
  if implementation not in IMPLEMENTATIONS:
    raise ValueError(f"unknown attention implementation {implementation!r}; choose one of {IMPLEMENTATIONS}")
  if implementation != "auto":
    return implementation
  backend = backend or target_platform()
  if backend == "tpu":
    return "splash"
  if backend in ("gpu", "cuda", "rocm") and jnp.dtype(dtype) in (jnp.bfloat16, jnp.float16):
    return "cudnn"
  return "blockwise"


def attention(
  q: jax.Array,
  k: jax.Array,
  v: jax.Array,
  key_mask: jax.Array,
  query_offset: jax.Array | int = 0,
  *,
  kv_length: jax.Array | None = None,
  implementation: str = "naive",
) -> jax.Array:
  """Attention of q [B, T, N, D] over k, v [B, K, S, D] (the KV cache's layout) -> [B, T, N, D] in q's dtype.

  key_mask [B, S] marks slots holding real tokens; query_offset (an int32 scalar) is the cache slot of query 0;
  kv_length (optional int32 scalar) promises that no slot >= kv_length holds a key, so an implementation may stop
  reading there (decoding over a partly filled cache). Scores are scaled by 1/√D and softmaxed in float32.
  """
  platform = target_platform()
  implementation = resolve(implementation, q.dtype, platform)
  if implementation == "naive":
    return naive_attention(q, k, v, key_mask, query_offset)
  prefill = isinstance(query_offset, int) and query_offset == 0 and kv_length is None and k.shape[2] == q.shape[1]
  if implementation == "splash" and prefill:
    return splash_attention(q, k, v, key_mask, interpret=platform != "tpu")
  if implementation == "cudnn" and prefill:
    return cudnn_attention(q, k, v, key_mask, implementation="cudnn" if platform == "gpu" else "xla")
  return blockwise_attention(q, k, v, key_mask, query_offset, kv_length)
