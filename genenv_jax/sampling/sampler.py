"""Autoregressive sampling with static shapes: jitted prefill, then a `lax.while_loop` decode over a KV cache.

Shapes never depend on data: prompts are left-padded to a length bucket, the cache has prompt_bucket + max_new_tokens
slots, and finished rows keep emitting `pad_id` with mask 0 until every row is done or the budget is spent, so a new
prompt length or batch content does not recompile (the length-as-array idea of gemma's `_sampler_loop.py`).

The policy. Each token is drawn from π = softmax(`policy_logits`): the logits divided by the temperature T (T = 1 for
greedy), ids past `vocab_limit` removed, then top-k and top-p (`filter_logits`) keep a set K of tokens and π is
renormalised over K. The log-prob returned for each sampled token is log π of it, the distribution actually sampled
(vLLM's "processed_logprobs"), and rl.logprobs scores responses with the same function (`policy_logprobs`) from the
same frozen `SamplingParams`, so an unchanged policy has importance ratio exactly 1 with top-k or top-p on too.
Scoring the full tempered softmax instead would make the on-policy ratio the kept mass π_T(K) < 1 (TRL issue 6789;
NeMo-RL and prime-rl replay the truncation on the trainer side the same way).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from genenv_jax.models.runtime import mesh_context, model_mesh, place_batch
from genenv_jax.models.transformer import KV_CACHE_KINDS, Transformer, init_cache
from genenv_jax.parallel.sharding import gather_over_fsdp

DEFAULT_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


@dataclasses.dataclass(frozen=True)
class SamplingParams:
  """Static decoding settings (hashable: they are part of the compiled program)."""

  max_new_tokens: int
  temperature: float = 1.0  # 0 means greedy
  top_k: int = 0  # 0 disables
  top_p: float = 1.0  # 1 disables
  eos_ids: tuple[int, ...] = ()
  pad_id: int = 0
  prefill_rows: int = 0  # rows per prefill chunk in `sample` (0 = all at once); bounds the prefill's activations
  kv_cache: str = "auto"  # "auto" (the compute dtype) or "int8" (int8 with per-row, head and slot scales)
  vocab_limit: int = 0  # ids >= this (an embedding padded past the tokenizer, as Qwen2.5's) are never drawn; 0 = all

  def __post_init__(self):
    if self.max_new_tokens <= 0:
      raise ValueError(f"max_new_tokens must be positive, got {self.max_new_tokens}")
    if self.temperature < 0:
      raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
    if self.top_k < 0:
      raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
    if not 0.0 < self.top_p <= 1.0:
      raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
    if self.prefill_rows < 0:
      raise ValueError(f"prefill_rows must be >= 0 (0 = every row at once), got {self.prefill_rows}")
    if self.vocab_limit < 0:
      raise ValueError(f"vocab_limit must be >= 0 (0 = no limit), got {self.vocab_limit}")
    if self.kv_cache not in KV_CACHE_KINDS:
      raise ValueError(f"kv_cache must be one of {', '.join(KV_CACHE_KINDS)}, got {self.kv_cache!r}")


class SampleOutput(NamedTuple):
  tokens: jax.Array  # [B, N] int32, pad_id after a row finishes
  logprobs: jax.Array  # [B, N] float32, 0 where mask is 0
  mask: jax.Array  # [B, N] int32, 1 for generated tokens (the EOS included)


def limit_vocab(logits: jax.Array, vocab_limit: int) -> jax.Array:
  """The logits with ids >= vocab_limit set to the dtype's minimum, so that softmax gives them no mass: the policy is
  over the tokenizer's ids only, when the model's embedding is padded past them (Qwen2.5: 151,936 rows for 151,665
  ids). A no-op when vocab_limit is 0 or covers every logit. Used by the sampler and by rl.logprobs alike, so the
  sampled log-probs and the scored ones are of the same distribution."""
  if not 0 < vocab_limit < logits.shape[-1]:
    return logits
  keep = jnp.arange(logits.shape[-1]) < vocab_limit
  return jnp.where(keep, logits, jnp.finfo(logits.dtype).min)


def policy_temperature(temperature: float) -> float:
  """The T of π = softmax(z / T) that a sampler at `temperature` draws from; greedy (0) scores as T = 1."""
  if temperature < 0:
    raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
  return float(temperature) if temperature > 0 else 1.0


def filter_logits(logits: jax.Array, top_k: int, top_p: float) -> jax.Array:
  """Top-k, then nucleus top-p (Holtzman et al. 2020), over the last axis: logits outside the kept set K become the
  dtype's minimum (softmax gives them no mass; finite, so no NaN reaches a gradient), the kept ones are unchanged.

  Top-k keeps {v : z_v >= z_(k)}, z_(k) the k-th largest: every token tied with the k-th is kept, so K does not depend
  on the order of the ids. Top-p then keeps, in decreasing order of z, each token whose mass before it under the
  softmax over the top-k set is < p (the smallest prefix with mass >= p), and the ties of the last one. With top-k on,
  the nucleus is found among the k largest (ties beyond the k-th are equal to it, so they never move the cutoff) with
  the softmax normalised over the whole top-k set; without, among all ids (a full sort). K is a piecewise-constant
  function of the logits, computed under stop_gradient; the kept logits carry their gradient. top_k = 0, top_p = 1:
  the logits as they are.
  """
  if top_k < 0 or not 0.0 < top_p <= 1.0:
    raise ValueError(f"top_k must be >= 0 and top_p in (0, 1], got top_k={top_k}, top_p={top_p}")
  neg = jnp.finfo(logits.dtype).min
  z = jax.lax.stop_gradient(logits)
  keep, ranked = None, None
  if 0 < top_k < z.shape[-1]:
    ranked = jax.lax.top_k(z, top_k)[0]
    keep = z >= ranked[..., -1:]
  if top_p < 1.0:
    ranked = jnp.sort(z, axis=-1)[..., ::-1] if ranked is None else ranked
    top = z if keep is None else jnp.where(keep, z, neg)
    probs = jnp.exp(ranked - jax.nn.logsumexp(top, axis=-1, keepdims=True))
    mass_before = jnp.cumsum(probs, axis=-1) - probs
    cutoff = jnp.min(jnp.where(mass_before < top_p, ranked, jnp.inf), axis=-1, keepdims=True)
    keep = z >= cutoff if keep is None else keep & (z >= cutoff)
  return logits if keep is None else jnp.where(keep, logits, neg)


def _tempered_and_policy(logits: jax.Array, params: SamplingParams) -> tuple[jax.Array, jax.Array]:
  """(z / T over the first vocab_limit ids, its `filter_logits`), float32: the tempered logits and π's logits."""
  t = policy_temperature(params.temperature)
  z = logits.astype(jnp.float32)
  z = limit_vocab(z / t if t != 1.0 else z, params.vocab_limit)
  return z, filter_logits(z, params.top_k, params.top_p)


def policy_logits(logits: jax.Array, params: SamplingParams) -> jax.Array:
  """The logits of the policy π a sampler with `params` draws from: π = softmax of the result (module docstring)."""
  return _tempered_and_policy(logits, params)[1]


def _kept_logprob(tempered: jax.Array, policy: jax.Array, tokens: jax.Array) -> jax.Array:
  """log π(y) = z_y - logsumexp_{v ∈ K ∪ {y}} z_v: exact for y in K; a y outside K (another model's K, or the same
  model's K moved by float rounding at its edge) is scored over K widened by y alone, finite, rather than -∞."""
  z_y = jnp.take_along_axis(tempered, tokens[..., None], -1)[..., 0]
  kept = jnp.take_along_axis(policy, tokens[..., None], -1)[..., 0] == z_y
  lse = jax.nn.logsumexp(policy, axis=-1)
  return z_y - jnp.where(kept, lse, jnp.logaddexp(lse, z_y))


def policy_logprobs(logits: jax.Array, tokens: jax.Array, params: SamplingParams) -> tuple[jax.Array, jax.Array]:
  """(log π(tokens), π's logits) for logits [..., V] and tokens [...], π the policy a sampler with `params` draws from.

  log π(y) = z_y / T - logsumexp_{v ∈ K} z_v / T for y in K (K the kept set of `filter_logits`), the log-prob of the
  filtered, renormalised distribution; a y outside K is scored over K ∪ {y}. The gradient flows through z_y and the
  kept logits. The sampler's log-probs and rl.logprobs' are this one function, so they cannot disagree.
  """
  tempered, policy = _tempered_and_policy(logits, params)
  return _kept_logprob(tempered, policy, tokens), policy


def sample_token(logits: jax.Array, key: jax.Array, params: SamplingParams) -> tuple[jax.Array, jax.Array]:
  """Draws one token per row from [B, V] logits under π (`policy_logits`; greedy: its argmax); returns (token, log π
  of it), the log-prob `policy_logprobs` gives the same token."""
  tempered, policy = _tempered_and_policy(logits, params)
  if params.temperature == 0.0:
    token = jnp.argmax(policy, axis=-1)
  else:
    token = jax.random.categorical(key, policy, axis=-1)
  token = token.astype(jnp.int32)
  return token, _kept_logprob(tempered, policy, token)


def prefill(
  model: Transformer, prompt_ids: jax.Array, prompt_mask: jax.Array, cache: dict, empty_cache: bool = True
) -> tuple[jax.Array, dict]:
  """Runs the prompt through the model into the cache; returns the last position's logits [B, V] and the cache.
  `empty_cache` (static): the cache holds nothing yet (init_cache's), so the prompt attends to its own keys."""
  logits, cache = model(prompt_ids, prompt_mask, cache=cache, logits_from=-1, empty_cache=empty_cache)
  return logits[:, -1, :], cache


def prefill_in_row_chunks(
  model: Transformer, prompt_ids: jax.Array, prompt_mask: jax.Array, cache_length: int, rows: int, kind: str = "auto"
) -> tuple[jax.Array, dict]:
  """`prefill` of `rows` rows at a time (a lax.scan over row chunks), so the prompt's activations peak at
  [rows, T, ...] instead of [B, T, ...]. Equal to one prefill of every row: rows never interact.

  Chunk c holds the rows c, c + C, c + 2C, ... (C = B / rows chunks), so with the batch sharded over devices every
  chunk keeps an equal share of rows on each device (a device's contiguous rows split evenly across the chunks),
  and no chunk is resharded. The cache of B rows is carried through the scan viewed as [L, B / C, C, ...]; chunk c
  writes its slice c of the unsharded C axis in place.
  """
  b, t = prompt_ids.shape
  if b % rows:
    raise ValueError(f"sampling.prefill_rows={rows} must divide the {b} rows sampled at once; pick a divisor of {b}")
  chunks = b // rows
  by_chunk = lambda x: x.reshape(rows, chunks, *x.shape[1:]).swapaxes(0, 1)  # noqa: E731  [B, ...] -> [C, rows, ...]
  by_row = lambda x: x.swapaxes(0, 1).reshape(b, *x.shape[2:])  # noqa: E731  [C, rows, ...] -> [B, ...]

  def one(layers, xs):
    ids, mask, chunk = xs
    logits, cache = prefill(model, ids, mask, init_cache(model.config, rows, cache_length, kind=kind))
    write = lambda full, part: jax.lax.dynamic_update_slice_in_dim(full, part[:, :, None], chunk, 2)  # noqa: E731
    return jax.tree.map(write, layers, cache["layers"]), (logits, cache["mask"])

  full = init_cache(model.config, b, cache_length, kind=kind)["layers"]  # [L, B, ...] viewed as [L, B / C, C, ...]
  layers, (logits, masks) = jax.lax.scan(
    one,
    jax.tree.map(lambda x: x.reshape(x.shape[0], rows, chunks, *x.shape[2:]), full),
    (by_chunk(prompt_ids), by_chunk(prompt_mask), jnp.arange(chunks)),
  )
  cache = {
    "layers": jax.tree.map(lambda x: x.reshape(x.shape[0], b, *x.shape[3:]), layers),
    "mask": by_row(masks),
    "index": jnp.asarray(t, jnp.int32),
  }
  return by_row(logits), cache


def decode(
  model: Transformer, last_logits: jax.Array, cache: dict, key: jax.Array, params: SamplingParams
) -> tuple[SampleOutput, dict]:
  """`lax.while_loop` decode: sample, write, feed the token back; stops when all rows hit an EOS or the budget.

  Returns the samples and the final cache (returning it lets a caller's donated cache buffers be reused in place).
  """
  b, n = last_logits.shape[0], params.max_new_tokens
  eos = jnp.asarray(params.eos_ids if params.eos_ids else (-1,), jnp.int32)

  def cond(carry):
    step, _, _, _, _, _, done, _ = carry
    return (step < n) & ~jnp.all(done)

  def body(carry):
    step, logits, cache, tokens, logprobs, mask, done, key = carry
    key, sub = jax.random.split(key)
    token, logprob = sample_token(logits, sub, params)
    live = ~done
    token = jnp.where(live, token, params.pad_id)
    tokens = tokens.at[:, step].set(token)
    logprobs = logprobs.at[:, step].set(jnp.where(live, logprob, 0.0))
    mask = mask.at[:, step].set(live.astype(jnp.int32))
    done = done | jnp.isin(token, eos)
    next_logits, cache = model(token[:, None], live[:, None].astype(jnp.int32), cache=cache)
    return step + 1, next_logits[:, -1, :], cache, tokens, logprobs, mask, done, key

  init = (
    jnp.zeros((), jnp.int32),
    last_logits,
    cache,
    jnp.full((b, n), params.pad_id, jnp.int32),
    jnp.zeros((b, n), jnp.float32),
    jnp.zeros((b, n), jnp.int32),
    jnp.zeros((b,), bool),
    key,
  )
  _, _, cache, tokens, logprobs, mask, _, _ = jax.lax.while_loop(cond, body, init)
  return SampleOutput(tokens, logprobs, mask), cache


def _gathered(model: Transformer) -> Transformer:
  graphdef, state = nnx.split(model)
  return nnx.merge(graphdef, gather_over_fsdp(state))


def sample(
  model: Transformer, prompt_ids: jax.Array, prompt_mask: jax.Array, key: jax.Array, params: SamplingParams
) -> SampleOutput:
  """Prefill plus decode in one traceable function, for use inside a larger jitted program (the co-evolution step).
  The weights are gathered over fsdp once, before both (`gather_over_fsdp`)."""
  model = _gathered(model)
  cache_length = prompt_ids.shape[1] + params.max_new_tokens
  if params.prefill_rows and params.prefill_rows < prompt_ids.shape[0]:
    last_logits, cache = prefill_in_row_chunks(
      model, prompt_ids, prompt_mask, cache_length, params.prefill_rows, params.kv_cache
    )
  else:
    cache = init_cache(model.config, prompt_ids.shape[0], cache_length, kind=params.kv_cache)
    last_logits, cache = prefill(model, prompt_ids, prompt_mask, cache)
  return decode(model, last_logits, cache, key, params)[0]


# ---- the eager entry point: buckets, validation, donated cache ------------------------------------------------------


@functools.partial(jax.jit, static_argnums=0, donate_argnums=4)
def _prefill_jit(graphdef, state, prompt_ids, prompt_mask, cache):
  return prefill(nnx.merge(graphdef, gather_over_fsdp(state)), prompt_ids, prompt_mask, cache)


@functools.partial(jax.jit, static_argnums=(0, 5), donate_argnums=3)
def _decode_jit(graphdef, state, last_logits, cache, key, params):
  return decode(nnx.merge(graphdef, gather_over_fsdp(state)), last_logits, cache, key, params)


def bucket_length(length: int, buckets: Sequence[int]) -> int:
  """The smallest bucket >= length (or length itself when it exceeds every bucket)."""
  return next((b for b in sorted(buckets) if b >= length), length)


def generate(
  model: Transformer,
  input_ids: Any,
  attention_mask: Any = None,
  *,
  max_new_tokens: int,
  temperature: float = 1.0,
  top_k: int = 0,
  top_p: float = 1.0,
  eos_ids: Sequence[int] = (),
  pad_id: int = 0,
  key: jax.Array | None = None,
  buckets: Sequence[int] = DEFAULT_BUCKETS,
  max_cache_length: int | None = None,
  kv_cache: str = "auto",
  vocab_limit: int = 0,
) -> SampleOutput:
  """Samples continuations of a left-padded prompt batch; deterministic for a given key.

  The prompt is left-padded further to a length bucket so that new lengths reuse compiled programs. Raises ValueError
  when prompt + generation would exceed max_cache_length (default: the model's max_position_embeddings).
  """
  params = SamplingParams(
    max_new_tokens=int(max_new_tokens),
    temperature=float(temperature),
    top_k=int(top_k),
    top_p=float(top_p),
    eos_ids=tuple(int(e) for e in eos_ids),
    pad_id=int(pad_id),
    kv_cache=kv_cache,
    vocab_limit=int(vocab_limit),
  )
  input_ids = np.asarray(input_ids, np.int32)
  if input_ids.ndim != 2:
    raise ValueError(f"input_ids must be [batch, length], got shape {input_ids.shape}")
  mask = np.ones_like(input_ids) if attention_mask is None else np.asarray(attention_mask, np.int32)
  if mask.shape != input_ids.shape:
    raise ValueError(f"attention_mask shape {mask.shape} != input_ids shape {input_ids.shape}")
  limit = int(max_cache_length or model.config.max_position_embeddings)
  length = input_ids.shape[1]
  if length + params.max_new_tokens > limit:
    raise ValueError(
      f"prompt length {length} + max_new_tokens {params.max_new_tokens} = "
      f"{length + params.max_new_tokens} exceeds the cache limit of {limit} tokens; shorten the prompt, "
      "lower max_new_tokens, or raise max_cache_length"
    )
  padded = min(bucket_length(length, buckets), limit - params.max_new_tokens)
  pad = padded - length
  input_ids = np.pad(input_ids, ((0, 0), (pad, 0)), constant_values=params.pad_id)
  mask = np.pad(mask, ((0, 0), (pad, 0)))
  key = jax.random.key(0) if key is None else key

  graphdef, state = nnx.split(model)
  mesh = model_mesh(state)
  ids, mask = place_batch((input_ids, mask), mesh)
  cache = init_cache(model.config, ids.shape[0], padded + params.max_new_tokens, kind=params.kv_cache)
  cache = place_batch(cache, mesh) if mesh is not None else cache
  with mesh_context(mesh):
    last_logits, cache = _prefill_jit(graphdef, state, ids, mask, cache)
    out, _ = _decode_jit(graphdef, state, last_logits, cache, key, params)
  return out
