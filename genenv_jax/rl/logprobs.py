"""Per-token log-probabilities of a response under a model: the one place where RL meets the model.

The policy. A model with logits z samples from π = softmax(`sampler.policy_logits`): z / T at the sampling
temperature T (T = 0, greedy decoding, counts as T = 1), ids past the tokenizer's removed, then top-k / top-p keep a
set K and π is renormalised over it. Every log-prob the RL losses compare, current, old (the sampler's) and reference,
is log π from `sampler.policy_logprobs` with the sampler's own frozen `SamplingParams` (`policy=`), so an unchanged
policy has ratio exactly 1 with top-k or top-p on as well (TRL's GRPOTrainer and veRL divide the logits by the
temperature the same way; NeMo-RL and prime-rl replay the truncation on the trainer side). Entropy is that of π too.
A token outside K (the reference model's K, say) is scored over K ∪ {it}: finite, never -∞.

Positions. For a left-padded prompt p and a right-padded response r, the sequence is [p, r]; the hidden state at
position t predicts token t + 1, so log π(r_j | p, r_<j) = log_softmax(z[|p| - 1 + j] / T)[r_j]. Padding inside the
response is masked by the caller's response mask; the model's attention mask covers prompt and response padding alike.
Only the positions |p| - 1 .. go through the LM head.

Memory. The LM head runs in chunks (`chunked_token_logprobs`): a `lax.map` over chunks whose body is
rematerialised, so the float32 logits peak at one chunk's [rows, positions, vocab] in the forward and the backward pass
alike. A chunk holds at most `chunk_size` positions of a row (4.9 GB per 8,000-token row at Qwen2.5's 152,064 words
unchunked), and at most `max_chunk_logits` logits per batch shard, which splits the rows (`row_chunks`): many short
responses over a large vocabulary, 128 rows x 16 tokens x SmolLM2's 49,152 words, are 384 MiB a copy unsplit, and the
loss and its backward held about seven copies at once (docs/EXPERIMENTS.md, "The real model's step memory"). The
results equal the unchunked computation up to float rounding (tests/unit/rl/test_logprobs.py).

The entropy is only a metric when its loss coefficient is 0: `entropy_gradient=False` computes it outside the
gradient, so the backward pass holds none of its [rows, positions, vocab] softmax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from genenv_jax.models.transformer import Transformer, dense
from genenv_jax.parallel.sharding import batch_shards_in_context, constrain
from genenv_jax.rl.grpo import token_entropy
from genenv_jax.sampling.sampler import SamplingParams, policy_logprobs, policy_temperature

__all__ = [
  "DEFAULT_CHUNK",
  "MAX_CHUNK_LOGITS",
  "chunked_token_logprobs",
  "policy_temperature",
  "response_logprobs",
  "row_chunks",
  "scored_policy",
]

DEFAULT_CHUNK = 512
MAX_CHUNK_LOGITS = 2**24  # float32 logits per batch shard in one LM-head chunk: 64 MiB a copy


def scored_policy(
  policy: SamplingParams | None = None, temperature: float = 1.0, vocab_limit: int = 0
) -> SamplingParams:
  """The sampling settings whose π is scored: `policy`, the sampler's own `SamplingParams`, when given (then
  temperature and vocab_limit must be left at their defaults: the settings are passed once); else π at `temperature`
  over the first `vocab_limit` ids with no top-k / top-p (the plain softmax by default)."""
  if policy is None:
    return SamplingParams(max_new_tokens=1, temperature=float(temperature), vocab_limit=int(vocab_limit))
  if not isinstance(policy, SamplingParams):
    raise TypeError(f"policy must be a sampling.sampler.SamplingParams, got {type(policy).__name__}")
  if temperature != 1.0 or vocab_limit != 0:
    raise ValueError(
      f"pass the sampling settings once: policy={policy} already holds the temperature and vocab_limit, "
      f"got temperature={temperature}, vocab_limit={vocab_limit} beside it"
    )
  return policy


def _head_logprobs(
  hidden: jax.Array,
  head: jax.Array,
  targets: jax.Array,
  policy: SamplingParams,
  with_entropy: bool,
  entropy_gradient: bool = True,
) -> tuple[jax.Array, jax.Array]:
  """log π(targets) and H(π) per position for hidden [B, C, E] through head [E, V]; float32 [B, C] each. H carries no
  gradient unless `entropy_gradient`."""
  logits = constrain(dense(hidden, head).astype(jnp.float32), ("batch", "length", "vocab"))
  logp, policy_logits = policy_logprobs(logits, targets, policy)
  if not with_entropy:
    return logp, jnp.zeros_like(logp)
  return logp, token_entropy(policy_logits if entropy_gradient else jax.lax.stop_gradient(policy_logits))


def row_chunks(rows: int, positions: int, vocab: int, max_logits: int, shards: int = 1) -> int:
  """How many chunks the rows split into so that one chunk's logits on a batch shard, (rows / C / shards) x positions
  x vocab, are at most `max_logits`: the fewest C that divides each shard's rows (so every chunk keeps an equal share
  of rows on each shard, `chunked_token_logprobs`), else one row per shard per chunk. 1 when the rows do not split
  over `shards` (the batch is then replicated)."""
  if rows % shards:
    return 1
  local = rows // shards
  fits = [c for c in range(1, local + 1) if local % c == 0 and (local // c) * positions * vocab <= max_logits]
  return fits[0] if fits else local


def chunked_token_logprobs(
  hidden: jax.Array,
  head: jax.Array,
  targets: jax.Array,
  *,
  policy: SamplingParams | None = None,
  temperature: float = 1.0,
  chunk_size: int = DEFAULT_CHUNK,
  with_entropy: bool = False,
  vocab_limit: int = 0,
  entropy_gradient: bool = True,
  max_chunk_logits: int = MAX_CHUNK_LOGITS,
) -> tuple[jax.Array, jax.Array | None]:
  """log π(targets) [B, R] and, when asked, H(π) [B, R] (else None), float32, from hidden [B, R, E] and head [E, V].

  π is `scored_policy(policy, temperature, vocab_limit)`: log π(y_t) = z_t[y_t] / T - logsumexp_{v ∈ K_t} z_t[v] / T
  with z_t = hidden_t @ head and K_t the kept set of top-k / top-p (all ids without them); H_t = -Σ_v π(v) log π(v),
  outside the gradient unless `entropy_gradient`.
  The R positions are split into ⌈R / chunk_size⌉ chunks (the last one padded) and the B rows into C row chunks
  (`row_chunks` with `max_chunk_logits`; chunk c holds rows c, c + C, c + 2C, ..., so a batch sharded over devices
  keeps an equal share of every chunk on each); the C x ⌈R / chunk_size⌉ chunks are mapped with `lax.map`, each
  body under `jax.checkpoint`, so its logits are recomputed in the backward pass instead of stored. One chunk runs
  the plain computation, with nothing recomputed.
  """
  if chunk_size <= 0:
    raise ValueError(f"logprob chunk size must be positive, got {chunk_size}; set agent/env.logprob_chunk")
  policy = scored_policy(policy, temperature, vocab_limit)
  b, r, e = hidden.shape
  p = min(r, chunk_size)
  n = -(-r // p)
  c = row_chunks(b, p, head.shape[-1], max_chunk_logits, batch_shards_in_context(b))
  head_logprobs = functools.partial(
    _head_logprobs, policy=policy, with_entropy=with_entropy, entropy_gradient=entropy_gradient
  )
  if n == 1 and c == 1:
    logp, entropy = head_logprobs(hidden, head, targets)
    return logp, (entropy if with_entropy else None)
  pad = n * p - r

  def split(x):  # [B, R, ...] -> [C * n, B / C, p, ...]: chunk (i, j) = rows i, i + C, ... and positions j·p ..
    x = jnp.pad(x, ((0, 0), (0, pad)) + ((0, 0),) * (x.ndim - 2)).reshape(b // c, c, n, p, *x.shape[2:])
    return jnp.moveaxis(x, (1, 2), (0, 1)).reshape(c * n, b // c, p, *x.shape[4:])

  def merge(y):  # [C * n, B / C, p] -> [B, R]
    return jnp.moveaxis(y.reshape(c, n, b // c, p), 2, 0).reshape(b, n * p)[:, :r]

  @functools.partial(jax.checkpoint, prevent_cse=False)  # inside lax.map's scan, CSE cannot undo the remat
  def one(xs):
    return head_logprobs(xs[0], head, xs[1])

  logp, entropy = jax.lax.map(one, (split(hidden), split(targets)))  # [C * n, B / C, p] each
  return merge(logp), (merge(entropy) if with_entropy else None)


def response_logprobs(
  model: Transformer,
  prompt_ids: jax.Array,
  prompt_mask: jax.Array,
  response: jax.Array,
  response_mask: jax.Array,
  with_entropy: bool = False,
  *,
  policy: SamplingParams | None = None,
  temperature: float = 1.0,
  chunk_size: int = DEFAULT_CHUNK,
  vocab_limit: int = 0,
  entropy_gradient: bool = True,
) -> tuple[jax.Array, jax.Array | None]:
  """log π(response tokens) [B, R] (float32, 0 where response_mask is 0), and H(π) [B, R] when asked (else None).

  `policy` is the `SamplingParams` the response was sampled with (module docstring): pass it for every log-prob a
  loss compares with the sampler's. Without it, π is the softmax at `temperature` over the first `vocab_limit` ids
  (ids past it have no mass; sampler.limit_vocab), no top-k / top-p (`scored_policy`). `chunk_size` is the number
  of response positions per LM-head chunk. `entropy_gradient=False`: H is a metric only, outside the gradient (a
  loss whose entropy coefficient is 0), so the backward pass holds none of its softmax.
  """
  ids = jnp.concatenate([prompt_ids, response], axis=1)
  mask = jnp.concatenate([prompt_mask, response_mask], axis=1)
  p = prompt_ids.shape[1]
  hidden, _ = model.hidden_states(ids, mask, hidden_from=p - 1)  # only the positions that predict response tokens
  logp, entropy = chunked_token_logprobs(
    hidden[:, :-1, :],
    model.head_weight(),
    response,
    policy=scored_policy(policy, temperature, vocab_limit),
    chunk_size=chunk_size,
    with_entropy=with_entropy,
    entropy_gradient=entropy_gradient,
  )
  return jnp.where(response_mask.astype(bool), logp, 0.0), entropy
