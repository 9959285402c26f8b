"""TPU attention: Pallas splash attention (jax.experimental.pallas.ops.tpu.splash_attention), adapted to our masks.

Splash computes softmax(q kᵀ + mask) v tile by tile on the TPU's MXU and skips tiles that its static block mask marks
empty (the upper triangle of a causal mask). Our masks reach it as:
  causality  -> a static CausalMask((T, T)) per query head (prefill only: query_offset == 0 and T == S);
  key_mask   -> SegmentIds(q=key_mask, kv=key_mask): a real token (id 1) sees only real tokens, a padding slot (id 0)
                sees only padding slots, so left-padded prompts and right-padded responses never mix with real rows.
GQA uses the MQA kernel: the `group` query heads of one key/value head share its K/V without repetition, vmapped over
batch and key/value heads. Splash applies no 1/√D, so q is pre-scaled. Sequences are zero-padded to a multiple of the
128-token tile (the padded slots get segment id 0).
Under a mesh (`jax.set_mesh`), the single-device kernel runs inside shard_map, split over batch (data, fsdp) and
key/value heads (tensor) as the logical sharding rules place them; attention never crosses those splits.

Why splash and not tokamax (evaluated first, the team notes "JAX building blocks", §1): tokamax 0.0.12's public
dot_product_attention has no segment ids and only end bounds (key_value_seq_lengths), so left padding needs a dense
[B,1,1,S] boolean mask (or a private Mask(k_start=...)); it also adds a dependency (qwix, pydantic, ...). Splash ships
with jax, takes segment ids, and runs under interpret mode on CPU, where tests check it against the naive reference.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu import splash_attention as splash

from genenv_jax.parallel.sharding import MESH_AXES, logical_to_spec

TILE = 128


def _kernel(length: int, group: int, interpret: bool):
  """Built per trace (it holds arrays, so it must not outlive one): the causal block mask for `group` query heads."""
  mask = splash.MultiHeadMask([splash.CausalMask((length, length))] * group)
  return splash.make_splash_mqa_single_device(mask, block_sizes=splash.BlockSizes.get_default(), interpret=interpret)


def _local(qg, k, v, segment_ids, interpret):
  """qg [B,K,G,T,D] (pre-scaled), k, v [B,K,T,D], segment_ids [B,T] int32 -> [B,K,G,T,D] on one device."""
  kernel = _kernel(qg.shape[3], qg.shape[2], interpret)

  def one(q1, k1, v1, seg):
    return kernel(q1, k1, v1, segment_ids=splash.SegmentIds(q=seg, kv=seg))

  return jax.vmap(jax.vmap(one, in_axes=(0, 0, 0, None)))(qg, k, v, segment_ids)


def splash_attention(
  q: jax.Array, k: jax.Array, v: jax.Array, key_mask: jax.Array, *, interpret: bool = False
) -> jax.Array:
  """Causal self-attention without a cache (query_offset 0, T == S): q [B,T,N,D], k, v [B,K,T,D] -> [B,T,N,D].

  interpret=True runs the Pallas interpreter (CPU tests); on TPU leave it False.
  """
  b, t, n, d = q.shape
  kh = k.shape[1]
  if k.shape[2] != t:
    raise ValueError(
      f"splash_attention is for prefill over the T={t} given tokens, got {k.shape[2]} key slots; "
      "decode through blockwise attention (models.attention.attention picks it)"
    )
  extra = -t % TILE

  def pad(x, axis):
    return jnp.pad(x, [(0, extra if i == axis else 0) for i in range(x.ndim)])

  qg = pad((q / math.sqrt(d)).reshape(b, t, kh, n // kh, d).transpose(0, 2, 3, 1, 4), 3)
  k, v = pad(k.astype(q.dtype), 2), pad(v.astype(q.dtype), 2)
  segment_ids = pad(key_mask.astype(jnp.int32), 1)
  local = functools.partial(_local, interpret=interpret)
  mesh = jax.sharding.get_abstract_mesh()
  if not mesh.empty and set(MESH_AXES) <= set(mesh.axis_names):
    q_spec = logical_to_spec(("batch", "kv_heads", None, None, None), qg.shape, mesh)
    kv_spec = logical_to_spec(("batch", "kv_heads", None, None), k.shape, mesh)
    seg_spec = jax.sharding.PartitionSpec(q_spec[0], None)
    local = jax.shard_map(
      local, mesh=mesh, in_specs=(q_spec, kv_spec, kv_spec, seg_spec), out_specs=q_spec, check_vma=False
    )
  out = local(qg, k, v, segment_ids)
  return out[:, :, :, :t].transpose(0, 3, 1, 2, 4).reshape(b, t, n, d)
