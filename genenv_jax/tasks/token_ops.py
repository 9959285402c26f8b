"""Generic token operations of a task domain, jittable unless marked host: where a generation's content ends, packing
left-padded prompts from segments, and the success rate written into an env prompt.

Everything works on int32 token ids [B, L] with static shapes (masks, not lengths), so it runs inside the one jitted
co-evolution step. Nothing here raises on data.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

UNKNOWN_RATE = 11  # the row of a domain's rate spellings that writes "?" (rows 0..10 write 0.0 .. 1.0)


def content_end(tokens: jax.Array, mask: jax.Array, eos_ids: Sequence[int]) -> tuple[jax.Array, jax.Array]:
  """(length [B] int32, terminated [B] bool) of each row's content.

  Rule: the content is the tokens before the first position that is an EOS under mask 1, or has mask 0. A row with
  no such position (mask 1 everywhere, no EOS: the generation ran out of budget) is not terminated, so malformed.
  """
  is_eos = jnp.isin(tokens, jnp.asarray(eos_ids, jnp.int32))
  stop = (is_eos & (mask != 0)) | (mask == 0)
  terminated = jnp.any(stop, axis=-1)
  length = jnp.where(terminated, jnp.argmax(stop, axis=-1), tokens.shape[-1]).astype(jnp.int32)
  return length, terminated


def content_ids(tokens: np.ndarray, mask: np.ndarray, eos_ids: Sequence[int]) -> list[int] | None:
  """Host: the ids of one row's content (the `content_end` rule), or None when the row never terminates."""
  eos = set(int(i) for i in eos_ids)
  for i, (tok, m) in enumerate(zip(tokens.tolist(), mask.tolist())):
    if m == 0 or (tok in eos):
      return [int(t) for t in tokens[:i].tolist()]
  return None


def pack_left_padded(
  segments: Sequence[tuple[jax.Array, jax.Array]], width: int, pad_id: int
) -> tuple[jax.Array, jax.Array]:
  """Concatenates per-row segments and left-pads the result to `width`: (ids [B, width], mask [B, width]) int32.

  Each segment is (ids [B, W_s] or [W_s], lengths [B] or scalar): the first `length` ids of that row. Output column
  j holds token k = j - (width - total) of the concatenation; a concatenation longer than `width` keeps its last
  `width` tokens (the prompt's end, where generation starts). Pure gathers, static shapes.
  """
  batch = next(jnp.shape(ids)[0] for ids, _ in segments if jnp.ndim(ids) == 2)
  rows = []
  for ids, lens in segments:
    ids = jnp.asarray(ids, jnp.int32)
    ids = jnp.broadcast_to(ids, (batch, ids.shape[-1])) if ids.ndim == 1 else ids
    rows.append((ids, jnp.broadcast_to(jnp.asarray(lens, jnp.int32), (batch,))))
  total = sum(lens for _, lens in rows)
  k = jnp.arange(width)[None, :] - (width - total)[:, None]
  out = jnp.full((batch, width), pad_id, jnp.int32)
  offset = jnp.zeros((batch,), jnp.int32)
  for ids, lens in rows:
    local = k - offset[:, None]
    here = (local >= 0) & (local < lens[:, None])
    if ids.shape[-1]:
      picked = jnp.take_along_axis(ids, jnp.clip(local, 0, ids.shape[-1] - 1), axis=-1)
      out = jnp.where(here, picked, out)
    offset = offset + lens
  return out, (k >= 0).astype(jnp.int32)


def const(ids: Sequence[int]) -> tuple[jax.Array, int]:
  """A fixed segment for `pack_left_padded`."""
  return jnp.asarray(np.asarray(ids, np.int32).reshape(-1)), len(ids)


def rate_tenths(stats: dict[str, jax.Array] | None, batch: int) -> jax.Array:
  """[batch] int32: each seed's success rate p̂ (stats["p_hat"]) to the nearest tenth, 0..10, or UNKNOWN_RATE where
  it is NaN or negative, or for every row when stats holds no p̂: the rate an env prompt states beside its seed."""
  p_hat = stats.get("p_hat") if stats else None
  if p_hat is None:
    return jnp.full((batch,), UNKNOWN_RATE, jnp.int32)
  p_hat = jnp.asarray(p_hat, jnp.float32)
  tenths = jnp.clip(jnp.round(p_hat * jnp.float32(10)), 0, 10)
  return jnp.where(p_hat >= 0, tenths, UNKNOWN_RATE).astype(jnp.int32)  # NaN >= 0 is False
