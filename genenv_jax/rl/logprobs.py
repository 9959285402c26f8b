"""Per-token log-probabilities of a response under a model: the one place where RL meets the model.

For a left-padded prompt p and a right-padded response r, the sequence is [p, r]; the logit at position t predicts
token t + 1, so log π(r_j | p, r_<j) = log_softmax(logits[|p| - 1 + j])[r_j]. Padding inside the response is masked
by the caller's response mask; the model's attention mask covers prompt and response padding alike. Only the
positions |p| - 1 .. go through the LM head.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from genenv_jax.models.transformer import Transformer
from genenv_jax.rl.grpo import token_entropy


def response_logprobs(model: Transformer, prompt_ids: jax.Array, prompt_mask: jax.Array, response: jax.Array,
                      response_mask: jax.Array, with_entropy: bool = False) -> tuple[jax.Array, jax.Array | None]:
  """log π(response tokens) [B, R] (float32), and the per-token entropy [B, R] when asked (else None)."""
  ids = jnp.concatenate([prompt_ids, response], axis=1)
  mask = jnp.concatenate([prompt_mask, response_mask], axis=1)
  p = prompt_ids.shape[1]
  logits, _ = model(ids, mask, logits_from=p - 1)  # the head only at the positions that predict response tokens
  logits = logits[:, :-1, :]
  logp_all = jax.nn.log_softmax(logits, axis=-1)
  logp = jnp.take_along_axis(logp_all, response[..., None], axis=-1)[..., 0]
  logp = jnp.where(response_mask.astype(bool), logp, 0.0)
  return logp, (token_entropy(logits) if with_entropy else None)
