"""Blockwise (flash-style) causal GQA attention in pure JAX: online softmax forward, FlashAttention-2 backward.

Forward (Milakov & Gimelshein 2018; Dao et al. 2022, Alg. 1): per query block, stream over key blocks j keeping a
running max m, normaliser l and accumulator a,
  m' = max(m, rowmax(S_j)),  l' = e^{m - m'} l + Σ_s e^{S_j - m'},  a' = e^{m - m'} a + e^{S_j - m'} V_j,
so O = a / l and the row's logsumexp L = m + log l are all that is kept.
Backward (Dao 2023, FlashAttention-2, Alg. 2): recompute P_j = exp(S_j - L) per block from the saved L, with
D = rowsum(dO ∘ O): dV_j += P_jᵀ dO, dS_j = P_j ∘ (dO V_jᵀ - D), dQ += dS_j K_j / √d, dK_j += dS_jᵀ Q / √d.
Neither pass materialises [B, H, T, S]: the largest temporary is one [B, H, block_q, block_k] score tile.

Block skipping: query block i (slots query_offset + [i·bq, (i+1)·bq)) reads only key blocks
j < ceil(min(query_offset + (i+1)·bq, kv_length) / bk). The trip count is a traced value (a while loop), so one decode
step over a large static cache costs in proportion to the filled length kv_length, and causal prefill skips the
upper triangle. GQA: each of the K key/value heads serves its `group` query heads by reshaping q, never by
repeating K/V. Masking follows genenv_jax.models.attention: slot s is visible to query t iff
s <= query_offset + t and key_mask[b, s]. A query row that sees no key returns zeros.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

_NEG = float(jnp.finfo(jnp.float32).min)


def _visible_blocks(last_slot_exclusive: jax.Array, kv_length: jax.Array, block_k: int, num_blocks: int) -> jax.Array:
  """How many leading key blocks hold a slot < min(last_slot_exclusive, kv_length)."""
  bound = jnp.minimum(last_slot_exclusive, kv_length)
  return jnp.clip((bound + block_k - 1) // block_k, 0, num_blocks)


def _tile(qi, kj, key_mask_j, q_slots, k_start, block_k, scale):
  """Scaled float32 scores [B,K,G,bq,bk] of one tile and its visibility mask (broadcastable to it)."""
  scores = jnp.einsum("bkgqd,bksd->bkgqs", qi, kj, preferred_element_type=jnp.float32) * scale
  causal = (k_start + jnp.arange(block_k))[None, :] <= q_slots[:, None]
  allowed = causal[None, None, None] & key_mask_j[:, None, None, None, :]
  return scores, allowed


def _slice(x, start, size, axis):
  return jax.lax.dynamic_slice_in_dim(x, start, size, axis=axis)


def _forward(qg, k, v, key_mask, query_offset, kv_length, block_q, block_k):
  """qg [B,K,G,T,D], k, v [B,K,S,D] (T, S multiples of the blocks) -> (out [B,K,G,T,D] in qg's dtype, lse [B,K,G,T])."""
  b, kh, g, t, d = qg.shape
  num_k = k.shape[2] // block_k
  scale = 1.0 / math.sqrt(d)

  def q_block(i, carry):
    out, lse = carry
    qi = _slice(qg, i * block_q, block_q, 3)
    q_slots = query_offset + i * block_q + jnp.arange(block_q)

    def k_block(j, c):
      m, denom, acc = c
      scores, allowed = _tile(
        qi,
        _slice(k, j * block_k, block_k, 2),
        _slice(key_mask, j * block_k, block_k, 1),
        q_slots,
        j * block_k,
        block_k,
        scale,
      )
      scores = jnp.where(allowed, scores, _NEG)
      m_new = jnp.maximum(m, scores.max(-1))
      p = jnp.where(allowed, jnp.exp(scores - m_new[..., None]), 0.0)
      correction = jnp.exp(m - m_new)
      pv = jnp.einsum(
        "bkgqs,bksd->bkgqd", p.astype(v.dtype), _slice(v, j * block_k, block_k, 2), preferred_element_type=jnp.float32
      )
      return m_new, denom * correction + p.sum(-1), acc * correction[..., None] + pv

    init = (
      jnp.full((b, kh, g, block_q), _NEG, jnp.float32),
      jnp.zeros((b, kh, g, block_q), jnp.float32),
      jnp.zeros((b, kh, g, block_q, d), jnp.float32),
    )
    trips = _visible_blocks(query_offset + (i + 1) * block_q, kv_length, block_k, num_k)
    m, denom, acc = jax.lax.fori_loop(0, trips, k_block, init)
    seen = denom > 0
    o = acc / jnp.where(seen, denom, 1.0)[..., None]
    lse_i = jnp.where(seen, m + jnp.log(jnp.where(seen, denom, 1.0)), jnp.inf)  # inf: P = exp(S - inf) = 0 in backward
    out = jax.lax.dynamic_update_slice_in_dim(out, o.astype(out.dtype), i * block_q, axis=3)
    return out, jax.lax.dynamic_update_slice_in_dim(lse, lse_i, i * block_q, axis=3)

  init = (jnp.zeros(qg.shape, qg.dtype), jnp.zeros((b, kh, g, t), jnp.float32))
  return jax.lax.fori_loop(0, t // block_q, q_block, init)


@functools.partial(jax.custom_vjp, nondiff_argnums=(6, 7))
def _flash(qg, k, v, key_mask, query_offset, kv_length, block_q, block_k):
  return _forward(qg, k, v, key_mask, query_offset, kv_length, block_q, block_k)[0]


def _flash_fwd(qg, k, v, key_mask, query_offset, kv_length, block_q, block_k):
  out, lse = _forward(qg, k, v, key_mask, query_offset, kv_length, block_q, block_k)
  return out, (qg, k, v, key_mask, query_offset, kv_length, out, lse)


def _flash_bwd(block_q, block_k, res, d_out):
  qg, k, v, key_mask, query_offset, kv_length, out, lse = res
  t, d = qg.shape[3:]
  num_k = k.shape[2] // block_k
  scale = 1.0 / math.sqrt(d)
  delta = jnp.sum(d_out.astype(jnp.float32) * out.astype(jnp.float32), axis=-1)  # D = rowsum(dO ∘ O)

  def q_block(i, carry):
    dq, dk, dv = carry
    qi = _slice(qg, i * block_q, block_q, 3)
    doi = _slice(d_out, i * block_q, block_q, 3)
    lse_i, delta_i = _slice(lse, i * block_q, block_q, 3), _slice(delta, i * block_q, block_q, 3)
    q_slots = query_offset + i * block_q + jnp.arange(block_q)

    def k_block(j, c):
      dqi, dk, dv = c
      kj, vj = _slice(k, j * block_k, block_k, 2), _slice(v, j * block_k, block_k, 2)
      scores, allowed = _tile(qi, kj, _slice(key_mask, j * block_k, block_k, 1), q_slots, j * block_k, block_k, scale)
      p = jnp.where(allowed, jnp.exp(scores - lse_i[..., None]), 0.0)
      dp = jnp.einsum("bkgqd,bksd->bkgqs", doi, vj, preferred_element_type=jnp.float32)
      ds = p * (dp - delta_i[..., None]) * scale
      dv_j = jnp.einsum("bkgqs,bkgqd->bksd", p, doi.astype(jnp.float32))
      dk_j = jnp.einsum("bkgqs,bkgqd->bksd", ds, qi.astype(jnp.float32))
      dqi = dqi + jnp.einsum("bkgqs,bksd->bkgqd", ds, kj.astype(jnp.float32))
      dk = jax.lax.dynamic_update_slice_in_dim(dk, _slice(dk, j * block_k, block_k, 2) + dk_j, j * block_k, axis=2)
      dv = jax.lax.dynamic_update_slice_in_dim(dv, _slice(dv, j * block_k, block_k, 2) + dv_j, j * block_k, axis=2)
      return dqi, dk, dv

    trips = _visible_blocks(query_offset + (i + 1) * block_q, kv_length, block_k, num_k)
    dqi, dk, dv = jax.lax.fori_loop(0, trips, k_block, (jnp.zeros(qi.shape, jnp.float32), dk, dv))
    return jax.lax.dynamic_update_slice_in_dim(dq, dqi.astype(dq.dtype), i * block_q, axis=3), dk, dv

  init = (jnp.zeros(qg.shape, qg.dtype), jnp.zeros(k.shape, jnp.float32), jnp.zeros(v.shape, jnp.float32))
  dq, dk, dv = jax.lax.fori_loop(0, t // block_q, q_block, init)
  return dq, dk.astype(k.dtype), dv.astype(v.dtype), None, None, None


_flash.defvjp(_flash_fwd, _flash_bwd)


def _pad_to(x: jax.Array, axis: int, multiple: int, value=0) -> jax.Array:
  extra = -x.shape[axis] % multiple
  if not extra:
    return x
  widths = [(0, 0)] * x.ndim
  widths[axis] = (0, extra)
  return jnp.pad(x, widths, constant_values=value)


def blockwise_attention(
  q: jax.Array,
  k: jax.Array,
  v: jax.Array,
  key_mask: jax.Array,
  query_offset: jax.Array | int = 0,
  kv_length: jax.Array | int | None = None,
  *,
  block_q: int = 512,
  block_k: int = 512,
) -> jax.Array:
  """Flash-style attention, q [B,T,N,D] over k, v [B,K,S,D] -> [B,T,N,D]; the contract of models.attention.attention.

  block_q / block_k are the tile sizes (clipped to T and S; T and S are zero-padded up to a multiple, the padded key
  slots masked off). kv_length bounds the key blocks read (None: all S slots).
  """
  b, t, n, d = q.shape
  kh, s = k.shape[1], k.shape[2]
  if block_q <= 0 or block_k <= 0:
    raise ValueError(f"block_q={block_q} and block_k={block_k} must be positive")
  if n % kh:
    raise ValueError(f"{n} query heads do not split into groups over {kh} key/value heads (GQA needs a multiple)")
  block_q, block_k = min(block_q, t), min(block_k, s)
  qg = _pad_to(q.reshape(b, t, kh, n // kh, d).transpose(0, 2, 3, 1, 4), 3, block_q)
  k, v = _pad_to(k.astype(q.dtype), 2, block_k), _pad_to(v.astype(q.dtype), 2, block_k)
  key_mask = _pad_to(key_mask.astype(bool), 1, block_k, False)
  query_offset = jnp.asarray(query_offset, jnp.int32)
  kv_length = jnp.asarray(s if kv_length is None else kv_length, jnp.int32)
  out = _flash(qg, k, v, key_mask, query_offset, kv_length, block_q, block_k)
  return out[:, :, :, :t].transpose(0, 3, 1, 2, 4).reshape(b, t, n, d)
