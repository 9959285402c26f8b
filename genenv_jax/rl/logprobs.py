"""Per-token log-probabilities of a response under a model: the one place where RL meets the model.

The policy. A model with logits z samples at temperature T from π_T(v) = softmax(z / T)_v (T = 0, greedy decoding,
counts as T = 1, as in the sampler's log-probs). Every log-prob the RL losses compare, current, old (the sampler's)
and reference, is log π_T at the sampling temperature, so an unchanged policy has ratio exactly 1 (TRL's GRPOTrainer
and veRL divide the logits by the temperature the same way). Entropy is that of π_T too.

Positions. For a left-padded prompt p and a right-padded response r, the sequence is [p, r]; the hidden state at
position t predicts token t + 1, so log π(r_j | p, r_<j) = log_softmax(z[|p| - 1 + j] / T)[r_j]. Padding inside the
response is masked by the caller's response mask; the model's attention mask covers prompt and response padding alike.
Only the positions |p| - 1 .. go through the LM head.

Memory. The LM head runs over sequence chunks of `chunk_size` positions (`chunked_token_logprobs`): a `lax.map` over
chunks whose body is rematerialised, so the float32 logits peak at [rows, chunk, vocab] in the forward and the backward
pass alike, never [rows, R, vocab] (4.9 GB per 8,000-token row at Qwen2.5's 152,064 words). The results equal the
unchunked computation up to float rounding (tests/unit/rl/test_logprobs.py).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from genenv_jax.models.transformer import Transformer, dense
from genenv_jax.parallel.sharding import constrain
from genenv_jax.rl.grpo import token_entropy
from genenv_jax.sampling.sampler import limit_vocab

DEFAULT_CHUNK = 512


def policy_temperature(temperature: float) -> float:
  """The T of π_T = softmax(z / T) that a sampler at `temperature` draws from; greedy (0) scores as T = 1."""
  if temperature < 0:
    raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
  return float(temperature) if temperature > 0 else 1.0


def _head_logprobs(
  hidden: jax.Array, head: jax.Array, targets: jax.Array, temperature: float, with_entropy: bool, vocab_limit: int = 0
) -> tuple[jax.Array, jax.Array]:
  """log π_T(targets) and H(π_T) per position for hidden [B, C, E] through head [E, V]; float32 [B, C] each."""
  logits = constrain(dense(hidden, head).astype(jnp.float32), ("batch", "length", "vocab"))
  logits = limit_vocab(logits, vocab_limit)
  if temperature != 1.0:
    logits = logits / temperature
  logp = jnp.take_along_axis(jax.nn.log_softmax(logits, axis=-1), targets[..., None], axis=-1)[..., 0]
  entropy = token_entropy(logits) if with_entropy else jnp.zeros_like(logp)
  return logp, entropy


def chunked_token_logprobs(
  hidden: jax.Array,
  head: jax.Array,
  targets: jax.Array,
  *,
  temperature: float = 1.0,
  chunk_size: int = DEFAULT_CHUNK,
  with_entropy: bool = False,
  vocab_limit: int = 0,
) -> tuple[jax.Array, jax.Array | None]:
  """log π_T(targets) [B, R] and, when asked, H(π_T) [B, R] (else None), float32, from hidden [B, R, E] and head [E, V].

  log π_T(y_t) = (z_t / T)[y_t] - logsumexp(z_t / T) with z_t = hidden_t @ head;  H_t = -Σ_v π_T(v) log π_T(v).
  The R positions are split into ⌈R / chunk_size⌉ chunks (the last one padded) mapped with `lax.map`; each chunk's
  body is under `jax.checkpoint`, so its [B, chunk, V] logits are recomputed in the backward pass instead of stored.
  One chunk (R <= chunk_size) runs the plain computation, with nothing recomputed.
  """
  if chunk_size <= 0:
    raise ValueError(f"logprob chunk size must be positive, got {chunk_size}; set agent/env.logprob_chunk")
  temperature = policy_temperature(temperature)
  b, r, e = hidden.shape
  if r <= chunk_size:
    logp, entropy = _head_logprobs(hidden, head, targets, temperature, with_entropy, vocab_limit)
    return logp, (entropy if with_entropy else None)
  n = -(-r // chunk_size)
  pad = n * chunk_size - r
  h = jnp.pad(hidden, ((0, 0), (0, pad), (0, 0))).reshape(b, n, chunk_size, e).swapaxes(0, 1)
  t = jnp.pad(targets, ((0, 0), (0, pad))).reshape(b, n, chunk_size).swapaxes(0, 1)

  @functools.partial(jax.checkpoint, prevent_cse=False)  # inside lax.map's scan, CSE cannot undo the remat
  def one(xs):
    return _head_logprobs(xs[0], head, xs[1], temperature, with_entropy, vocab_limit)

  logp, entropy = jax.lax.map(one, (h, t))  # [n, B, chunk] each
  unchunk = lambda x: x.swapaxes(0, 1).reshape(b, n * chunk_size)[:, :r]  # noqa: E731
  return unchunk(logp), (unchunk(entropy) if with_entropy else None)


def response_logprobs(
  model: Transformer,
  prompt_ids: jax.Array,
  prompt_mask: jax.Array,
  response: jax.Array,
  response_mask: jax.Array,
  with_entropy: bool = False,
  *,
  temperature: float = 1.0,
  chunk_size: int = DEFAULT_CHUNK,
  vocab_limit: int = 0,
) -> tuple[jax.Array, jax.Array | None]:
  """log π_T(response tokens) [B, R] (float32, 0 where response_mask is 0), and H(π_T) [B, R] when asked (else None).

  `temperature` is the sampling temperature of the policy being scored (module docstring); `chunk_size` the number of
  response positions per LM-head chunk; `vocab_limit` the sampler's (ids past it have no mass; sampling.limit_vocab).
  """
  ids = jnp.concatenate([prompt_ids, response], axis=1)
  mask = jnp.concatenate([prompt_mask, response_mask], axis=1)
  p = prompt_ids.shape[1]
  hidden, _ = model.hidden_states(ids, mask, hidden_from=p - 1)  # only the positions that predict response tokens
  logp, entropy = chunked_token_logprobs(
    hidden[:, :-1, :],
    model.head_weight(),
    response,
    temperature=temperature,
    chunk_size=chunk_size,
    with_entropy=with_entropy,
    vocab_limit=vocab_limit,
  )
  return jnp.where(response_mask.astype(bool), logp, 0.0), entropy
