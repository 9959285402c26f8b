"""A flax.nnx decoder of the Llama / Qwen2 family, with a static-size KV cache for decoding.

Per layer (pre-norm, as in Llama, Touvron et al. 2023, and Qwen2, Yang et al. 2024):
  h = x + Attn(RMSNorm(x));  y = h + W_down(silu(W_gate RMSNorm(h)) * W_up RMSNorm(h))
RMSNorm(x) = x / sqrt(mean(x²) + eps) * g (Zhang & Sennrich 2019), computed in float32 as transformers does.
Attention is grouped-query (Ainslie et al. 2023): num_heads query heads share num_kv_heads key/value heads.
RoPE (Su et al. 2021) uses the "rotate half" layout of transformers' Llama/Qwen2 code.

Batches are left-padded. `attention_mask[b, t]` marks real tokens; the position of a real token is the number of real
tokens before it in its row, so a left-padded row gets the same positions as the unpadded one.

The KV cache is a dict of arrays: `layers` {`k`, `v`}, stacked like the layers' parameters, of shape
[L, B, num_kv_heads, S, head_dim] and updated in place (the scan over layers carries it), `mask` [B, S] (which
slots hold real tokens) and `index` (the next slot to write, the same for all rows). Every parameter is an nnx.Param
with `logical_axes` metadata; genenv_jax.parallel.sharding maps those onto the mesh.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from genenv_jax.models.attention import attention
from genenv_jax.models.config import ModelConfig, to_dtype
from genenv_jax.parallel.sharding import constrain

Cache = dict[str, Any]


def _param(rngs: nnx.Rngs, shape: tuple[int, ...], axes: tuple[str, ...], dtype: Any, std: float | None) -> nnx.Param:
  value = jnp.ones(shape, dtype) if std is None else std * jax.random.normal(rngs.params(), shape, dtype)
  return nnx.Param(value, logical_axes=axes)


def dense(x: jax.Array, w: jax.Array) -> jax.Array:
  """x [..., E] @ w [E, *out] -> [..., *out] as ONE 2-D matmul over the flattened leading dims.

  The same maths as an einsum; flat [N, E] x [E, F] operands keep XLA's CPU backward pass from adding batched-dot
  transposes (docs/EXPERIMENTS.md, "Costs behind implementation choices", has the speed-up).
  """
  lead, out = x.shape[:-1], w.shape[1:]
  y = x.reshape(-1, x.shape[-1]) @ w.reshape(w.shape[0], -1)
  return y.reshape(*lead, *out)


def project(module: nnx.Module, name: str, x: jax.Array, w: jax.Array) -> jax.Array:
  """`dense(x, w)` for the projection `name` of `module`, plus its LoRA adapter's term (α / r)·(x A) B when it has
  one (`module.<name>_lora`, models/lora.py); without one, exactly `dense(x, w)`."""
  y = dense(x, w)
  adapter = getattr(module, f"{name}_lora", None)
  return y if adapter is None else y + adapter(x).astype(y.dtype)


def rms_norm(x: jax.Array, scale: jax.Array, eps: float) -> jax.Array:
  """x / sqrt(mean(x², -1) + eps) * scale, in float32, cast back to x's dtype (transformers' LlamaRMSNorm)."""
  x32 = x.astype(jnp.float32)
  normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
  return (scale.astype(jnp.float32) * normed).astype(x.dtype)


def rope_inverse_frequencies(config: ModelConfig) -> jax.Array:
  """inv_freq_i = theta^(-2i/d), with optional linear or Llama-3 frequency scaling (transformers' rope_init_fns)."""
  d = config.head_dim
  inv_freq = 1.0 / (config.rope_theta ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d))
  scaling = config.rope_scaling
  if scaling is None:
    return inv_freq
  if scaling[0] == "linear":
    return inv_freq / scaling[1]
  if scaling[0] == "llama3":
    factor, low, high, original = scaling[1:]
    wavelen = 2 * math.pi / inv_freq
    low_wavelen, high_wavelen = original / low, original / high
    scaled = jnp.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return jnp.where(is_medium, smoothed, scaled)
  raise ValueError(f"unsupported rope_scaling {scaling!r}; supported: None, linear, llama3")


def apply_rope(x: jax.Array, positions: jax.Array, inv_freq: jax.Array) -> jax.Array:
  """Rotates x [B, T, H, D] by angle position * inv_freq: x*cos + rotate_half(x)*sin (rotate-half layout)."""
  angles = positions[:, :, None].astype(jnp.float32) * inv_freq[None, None, :]  # [B, T, D/2]
  angles = jnp.concatenate([angles, angles], axis=-1)[:, :, None, :]
  cos, sin = jnp.cos(angles), jnp.sin(angles)
  x32 = x.astype(jnp.float32)
  half = x.shape[-1] // 2
  rotated = jnp.concatenate([-x32[..., half:], x32[..., :half]], axis=-1)
  return (x32 * cos + rotated * sin).astype(x.dtype)


def positions_from_mask(attention_mask: jax.Array, offset: jax.Array | int = 0) -> jax.Array:
  """Position of each token = offset + number of real tokens before it in its row (0 at padding)."""
  mask = attention_mask.astype(jnp.int32)
  offset = jnp.asarray(offset, jnp.int32)
  offset = offset[:, None] if offset.ndim == 1 else offset
  return jnp.maximum(jnp.cumsum(mask, axis=1) - 1, 0) * mask + offset * mask


# What each remat policy keeps for the backward pass (models.config.remat_policy); None keeps only the layer's input.
REMAT_SAVES = {
  "full": None,
  "save_dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
  "save_all_dots": jax.checkpoint_policies.checkpoint_dots,
}


class Attention(nnx.Module):
  """Grouped-query self-attention with RoPE, optional q/k/v bias, and an optional KV cache."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, layers: int):
    self.config = config
    pd = to_dtype(config.param_dtype)
    h, d, nq, nkv, n = config.hidden_size, config.head_dim, config.num_heads, config.num_kv_heads, layers
    std = 1.0 / math.sqrt(h)
    self.q_proj = _param(rngs, (n, h, nq, d), ("layers", "embed", "q_heads", "head_dim"), pd, std)
    self.k_proj = _param(rngs, (n, h, nkv, d), ("layers", "embed", "kv_heads", "head_dim"), pd, std)
    self.v_proj = _param(rngs, (n, h, nkv, d), ("layers", "embed", "kv_heads", "head_dim"), pd, std)
    self.o_proj = _param(rngs, (n, nq, d, h), ("layers", "q_heads", "head_dim", "embed"), pd, 1.0 / math.sqrt(nq * d))
    if config.qkv_bias:
      self.q_bias = nnx.Param(jnp.zeros((n, nq, d), pd), logical_axes=("layers", "q_heads", "head_dim"))
      self.k_bias = nnx.Param(jnp.zeros((n, nkv, d), pd), logical_axes=("layers", "kv_heads", "head_dim"))
      self.v_bias = nnx.Param(jnp.zeros((n, nkv, d), pd), logical_axes=("layers", "kv_heads", "head_dim"))

  def __call__(
    self,
    x: jax.Array,
    positions: jax.Array,
    key_mask: jax.Array,
    inv_freq: jax.Array,
    cache: Cache | None,
    cache_index: jax.Array | None,
    layer: jax.Array | None,
  ) -> tuple[jax.Array, Cache | None]:
    """One layer's attention. With a cache (the whole stacked cache {"k", "v"}: [L, B, K, S, D], and this layer's
    index `layer`), the T new keys and values are written into slots [cache_index, cache_index + T) of the layer's row
    in place, and attention reads that row; the updated stacked cache is returned."""
    cfg = self.config
    dt = x.dtype
    q = project(self, "q_proj", x, self.q_proj[...].astype(dt))
    k = project(self, "k_proj", x, self.k_proj[...].astype(dt))
    v = project(self, "v_proj", x, self.v_proj[...].astype(dt))
    if cfg.qkv_bias:
      q, k, v = q + self.q_bias[...].astype(dt), k + self.k_bias[...].astype(dt), v + self.v_bias[...].astype(dt)
    q = apply_rope(q, positions, inv_freq)
    k = apply_rope(k, positions, inv_freq)
    q = constrain(q, ("batch", "length", "q_heads", "head_dim"))

    # keys and values are laid out [B, kv_heads, S, head_dim], the cache's own layout, so a decode step reads the
    # cache in place instead of transposing all of it.
    t = x.shape[1]
    k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    # A prefill into an empty cache (cache_index the Python int 0, key_mask the T new tokens' own) attends to its own
    # keys: the same softmax as reading them back from the cache, and a prefill-shaped call (splash on a TPU).
    own_keys = cache is None or (isinstance(cache_index, int) and cache_index == 0)
    if cache is not None:  # write only the new slots of this layer's row: the stacked cache is updated in place
      cache = write_cache(cache, {"k": k, "v": v}, layer, cache_index)
    if own_keys:
      keys, values = k, v
    else:  # read the layer's row back: every earlier slot and the new ones
      keys, values = (read_cache(cache, name, layer, dt) for name in "kv")

    out = attention(
      q,
      keys,
      values,
      key_mask,
      0 if own_keys else cache_index,
      kv_length=None if own_keys else cache_index + t,
      implementation=cfg.attention,
    ).reshape(x.shape[0], t, cfg.num_heads * cfg.head_dim)
    o_proj = self.o_proj[...].astype(dt).reshape(cfg.num_heads * cfg.head_dim, cfg.hidden_size)
    return project(self, "o_proj", out, o_proj), cache


class MLP(nnx.Module):
  """SwiGLU: W_down(silu(W_gate x) * W_up x) (Shazeer 2020)."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, layers: int):
    pd = to_dtype(config.param_dtype)
    h, f, n = config.hidden_size, config.intermediate_size, layers
    self.gate_proj = _param(rngs, (n, h, f), ("layers", "embed", "mlp"), pd, 1.0 / math.sqrt(h))
    self.up_proj = _param(rngs, (n, h, f), ("layers", "embed", "mlp"), pd, 1.0 / math.sqrt(h))
    self.down_proj = _param(rngs, (n, f, h), ("layers", "mlp", "embed"), pd, 1.0 / math.sqrt(f))

  def __call__(self, x: jax.Array) -> jax.Array:
    dt = x.dtype
    gate = jax.nn.silu(project(self, "gate_proj", x, self.gate_proj[...].astype(dt)))
    hidden = constrain(gate * project(self, "up_proj", x, self.up_proj[...].astype(dt)), ("batch", "length", "mlp"))
    return project(self, "down_proj", hidden, self.down_proj[...].astype(dt))


class Block(nnx.Module):
  """Pre-norm decoder layers, `layers` of them stacked along each parameter's leading "layers" axis.

  The stacked module is the parameter store; `__call__` runs ONE layer, on a module merged from one layer's slice of
  the stacked state (`Transformer.hidden_states` scans it over the layers).
  """

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, layers: int):
    pd = to_dtype(config.param_dtype)
    self.eps = config.rms_norm_eps
    norm_shape, norm_axes = (layers, config.hidden_size), ("layers", "norm")
    self.input_norm = nnx.Param(jnp.ones(norm_shape, pd), logical_axes=norm_axes)
    self.attn = Attention(config, rngs=rngs, layers=layers)
    self.post_attention_norm = nnx.Param(jnp.ones(norm_shape, pd), logical_axes=norm_axes)
    self.mlp = MLP(config, rngs=rngs, layers=layers)

  def __call__(self, x, positions, key_mask, inv_freq, cache=None, cache_index=None, layer=None):
    attn_out, cache = self.attn(
      rms_norm(x, self.input_norm[...], self.eps), positions, key_mask, inv_freq, cache, cache_index, layer
    )
    x = x + attn_out
    x = x + self.mlp(rms_norm(x, self.post_attention_norm[...], self.eps))
    return constrain(x, ("batch", "length", "embed")), cache


class Transformer(nnx.Module):
  """The decoder: embed -> blocks -> RMSNorm -> LM head (tied to the embedding or not). Logits are float32."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    self.config = config
    pd = to_dtype(config.param_dtype)
    self.embed = _param(rngs, (config.vocab_size, config.hidden_size), ("vocab", "embed"), pd, 0.02)
    self.layers = Block(config, rngs=rngs, layers=config.num_layers)
    self.final_norm = nnx.Param(jnp.ones((config.hidden_size,), pd), logical_axes=("norm",))
    if not config.tie_word_embeddings:
      self.lm_head = _param(rngs, (config.hidden_size, config.vocab_size), ("embed", "vocab"), pd, 0.02)

  def __call__(
    self,
    input_ids: jax.Array,
    attention_mask: jax.Array,
    cache: Cache | None = None,
    positions: jax.Array | None = None,
    logits_from: int = 0,
    empty_cache: bool = False,
  ) -> tuple[jax.Array, Cache | None]:
    """Logits [B, T - logits_from, V] (float32) for positions logits_from.. (a static int; -1 = the last position
    only, as a prefill needs) and the updated cache. Skipping positions whose logits are unused skips their share of
    the [B, T, V] head, the largest activation of a small-model RL step.

    Without a cache, attention is causal over the T given tokens. With one, the T tokens are written at slots
    [index, index + T) and attend to every earlier real slot; positions continue from the real tokens in the cache.
    `empty_cache=True` promises a cache that holds nothing yet (a prefill's, fresh from init_cache): the T tokens
    then attend to their own keys directly, the same result, through the prefill kernel (splash on a TPU).
    """
    x, cache = self.hidden_states(
      input_ids, attention_mask, cache, positions, hidden_from=logits_from, empty_cache=empty_cache
    )
    logits = dense(x, self.head_weight())
    return constrain(logits.astype(jnp.float32), ("batch", "length", "vocab")), cache

  def use_attention(self, implementation: str) -> None:
    """Computes attention with `implementation` (models.attention.IMPLEMENTATIONS) from now on: a checkpoint loads
    with its config's "auto", and a run's `model.attention` setting applies to it this way."""
    self.config = dataclasses.replace(self.config, attention=implementation)
    self.layers.attn.config = self.config

  def head_weight(self) -> jax.Array:
    """The LM head [E, V] in the compute dtype (the embedding transposed when tied)."""
    dt = to_dtype(self.config.dtype)
    return self.embed[...].astype(dt).T if self.config.tie_word_embeddings else self.lm_head[...].astype(dt)

  def hidden_states(
    self,
    input_ids: jax.Array,
    attention_mask: jax.Array,
    cache: Cache | None = None,
    positions: jax.Array | None = None,
    hidden_from: int = 0,
    empty_cache: bool = False,
  ) -> tuple[jax.Array, Cache | None]:
    """The final-normed hidden states [B, T - hidden_from, E] (compute dtype) that the LM head reads, and the cache.

    logits = hidden_states(...) @ head_weight(); callers that chunk the head over the sequence (rl.logprobs) use the
    two halves directly.
    """
    cfg = self.config
    dt = to_dtype(cfg.dtype)
    attention_mask = attention_mask.astype(bool)
    if cache is None:
      key_mask, index = attention_mask, None
      if positions is None:
        positions = positions_from_mask(attention_mask)
    else:
      index = cache["index"]
      key_mask = jax.lax.dynamic_update_slice_in_dim(cache["mask"], attention_mask, index, 1)
      if positions is None:
        positions = positions_from_mask(attention_mask, jnp.sum(cache["mask"], axis=1))
    inv_freq = rope_inverse_frequencies(cfg)
    x = constrain(jnp.take(self.embed[...], input_ids, axis=0).astype(dt), ("batch", "length", "embed"))

    # One scan over the stacked layers: the compiled program holds one layer's body whatever the depth.
    graphdef, stacked = nnx.split(self.layers)

    if cache is None:

      def layer(x, layer_params):
        return nnx.merge(graphdef, layer_params)(x, positions, key_mask, inv_freq)[0], None

      if cfg.rematerializes:  # remat serves a backward pass; decoding has none
        layer = jax.checkpoint(layer, policy=REMAT_SAVES[cfg.remat], prevent_cse=False)
      x, _ = jax.lax.scan(layer, x, stacked)
    else:  # the stacked cache rides in the carry, so each layer updates its new slots in place (no per-step copy)
      # an empty cache: the layers attend to the T new tokens' own keys (Attention, Python int index 0)
      layer_mask, layer_index = (attention_mask, 0) if empty_cache else (key_mask, index)

      def layer(carry, xs):
        (x, layers_cache), (layer_params, i) = carry, xs
        return nnx.merge(graphdef, layer_params)(x, positions, layer_mask, inv_freq, layers_cache, layer_index, i), None

      (x, new_layers), _ = jax.lax.scan(layer, (x, cache["layers"]), (stacked, jnp.arange(cfg.num_layers)))

    if hidden_from:
      x = x[:, hidden_from:, :]
    x = rms_norm(x, self.final_norm[...], cfg.rms_norm_eps)
    if cache is None:
      return x, None
    return x, {"layers": new_layers, "mask": key_mask, "index": index + input_ids.shape[1]}


KV_CACHE_KINDS = ("auto", "int8")  # "auto": the compute dtype; "int8": int8 with a scale per row, head and slot


def init_cache(config: ModelConfig, batch_size: int, max_length: int, dtype: Any = None, kind: str = "auto") -> Cache:
  """An empty cache of `max_length` slots: k/v in the compute dtype unless `dtype` is given, or, with kind="int8",
  int8 k/v with float32 scales `k_scale`/`v_scale` [L, B, K, S] (`quantize_kv`)."""
  if kind not in KV_CACHE_KINDS:
    raise ValueError(f"unknown KV cache kind {kind!r}; choose one of {', '.join(KV_CACHE_KINDS)}")
  dtype = jnp.int8 if kind == "int8" else to_dtype(config.dtype) if dtype is None else dtype
  shape = (config.num_layers, batch_size, config.num_kv_heads, max_length, config.head_dim)
  layers = {"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)}  # stacked like the layers' parameters
  if kind == "int8":
    layers.update(k_scale=jnp.zeros(shape[:-1], jnp.float32), v_scale=jnp.zeros(shape[:-1], jnp.float32))
  return {"layers": layers, "mask": jnp.zeros((batch_size, max_length), bool), "index": jnp.zeros((), jnp.int32)}


def quantize_kv(x: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Symmetric int8 of each head's vector (the last axis): q = round(127 x / s), s = max|x| (absmax per row, head and
  slot, as vLLM's per-token-head KV quantisation); x ~= q * s / 127. Returns (q int8, s / 127 float32)."""
  x = x.astype(jnp.float32)
  scale = jnp.max(jnp.abs(x), axis=-1) / 127.0
  q = jnp.round(x / jnp.where(scale == 0, 1.0, scale)[..., None])
  return jnp.clip(q, -127, 127).astype(jnp.int8), scale


def write_cache(layers: Cache, new: dict[str, jax.Array], layer: jax.Array, index: jax.Array) -> Cache:
  """Writes new keys/values [B, K, T, D] into slots [index, index + T) of row `layer` of the stacked cache, in place
  (quantised first when the cache is int8)."""
  out = dict(layers)
  for name, x in new.items():
    if f"{name}_scale" in layers:
      x, scale = quantize_kv(x)
      out[f"{name}_scale"] = jax.lax.dynamic_update_slice(layers[f"{name}_scale"], scale[None], (layer, 0, 0, index))
    out[name] = jax.lax.dynamic_update_slice(layers[name], x[None].astype(layers[name].dtype), (layer, 0, 0, index, 0))
  return out


def read_cache(layers: Cache, name: str, layer: jax.Array, dtype: Any) -> jax.Array:
  """Row `layer` of the stacked cache's `name` ("k" or "v") [B, K, S, D] in `dtype`, dequantised when int8."""
  row = jax.lax.dynamic_index_in_dim(layers[name], layer, 0, keepdims=False)
  if f"{name}_scale" not in layers:
    return row.astype(dtype)
  scale = jax.lax.dynamic_index_in_dim(layers[f"{name}_scale"], layer, 0, keepdims=False)
  return (row.astype(jnp.float32) * scale[..., None]).astype(dtype)
