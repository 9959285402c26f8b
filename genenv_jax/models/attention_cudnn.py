"""GPU attention: cuDNN flash attention through jax.nn.dot_product_attention, adapted to left padding by rotation.

cuDNN's fused kernel takes causality (is_causal) and per-row end bounds (query_seq_lengths, key_value_seq_lengths),
not a start bound, so a left-padded row cannot be expressed directly. Each row is therefore rotated left by its
padding p_b = argmax(key_mask[b]) (the first real slot): real tokens then occupy slots [0, n_b) with
n_b = Σ key_mask[b], causality among them is unchanged (a shift preserves s <= t), and the end bounds n_b mask the
rotated-in padding. The output is rotated back by p_b. This is exact when each row's real tokens form one contiguous
run (left-padded prompt + response, right padding after it), which is how batches are built here; a row with holes in
its key_mask needs blockwise attention. Applies to prefill without a cache (query_offset 0, T == S).
cuDNN needs float16/bfloat16 inputs; `implementation` is passed through so CPU tests run the same rotation with "xla".
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _rotate(x: jax.Array, shift: jax.Array) -> jax.Array:
  """out[b, i] = x[b, (i + shift[b]) mod T] along axis 1."""
  t = x.shape[1]
  index = (jnp.arange(t)[None, :] + shift[:, None]) % t
  return jnp.take_along_axis(x, index.reshape(index.shape + (1,) * (x.ndim - 2)), axis=1)


def cudnn_attention(
  q: jax.Array, k: jax.Array, v: jax.Array, key_mask: jax.Array, *, implementation: str = "cudnn"
) -> jax.Array:
  """Causal self-attention without a cache: q [B,T,N,D], k, v [B,K,T,D] (contiguous real run per row) -> [B,T,N,D]."""
  t = q.shape[1]
  if k.shape[2] != t:
    raise ValueError(
      f"cudnn_attention is for prefill over the T={t} given tokens, got {k.shape[2]} key slots; "
      "decode through blockwise attention (models.attention.attention picks it)"
    )
  key_mask = key_mask.astype(bool)
  start = jnp.argmax(key_mask, axis=1).astype(jnp.int32)
  length = jnp.sum(key_mask, axis=1, dtype=jnp.int32)
  rotated = [_rotate(x, start) for x in (q, k.swapaxes(1, 2).astype(q.dtype), v.swapaxes(1, 2).astype(q.dtype))]
  out = jax.nn.dot_product_attention(
    *rotated, is_causal=True, query_seq_lengths=length, key_value_seq_lengths=length, implementation=implementation
  )
  return _rotate(out, -start)
