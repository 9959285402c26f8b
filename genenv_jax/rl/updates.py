"""One optimizer update from a (sum, denominator) loss, over mini-batches in a `lax.scan`, skipping non-finite steps.

Losses here return (sum, denominator) pairs (tunix's convention), so a batch split into M mini-batches gives the exact
full-batch gradient: g = Σ_m ∇sum_m / Σ_m denom_m. With `num_updates` > 1 the batch is split into that many
consecutive mini-batches and each takes its own optimizer step (PPO-style epochs of one pass), as in GRPO's
mini-batch updates. A step whose loss or gradient is not finite, or whose mini-batch holds no valid token, leaves
parameters and optimizer state unchanged and is counted in `skipped` (robustness: a bad batch never corrupts the state,
and an empty one never moves it: AdamW would otherwise step on its momentum and weight decay with a zero gradient).

What counts as empty: a denominator <= 0 (token-mean, seq-mean-token-mean, a weighted NLL with no weight), or, for a
loss whose denominator is a constant (Dr. GRPO's B · L_max, `grpo.agg_seq_mean_token_sum_norm`), a `num_tokens`
metric of 0 (`grpo.grpo_loss` reports it, under every aggregation; a loss whose denominator is a constant must).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

LossFn = Callable[[Any, Any], tuple[jax.Array, jax.Array, dict[str, jax.Array]]]  # (params, batch) -> sum, denom, m

NUM_TOKENS = "num_tokens"  # the loss metric that counts a mini-batch's valid tokens (module docstring)


def has_tokens(denom: jax.Array, metrics: dict[str, jax.Array]) -> jax.Array:
  """Whether a mini-batch gives anything to learn from: denominator > 0 and, when the loss reports it, at least one
  valid token (`NUM_TOKENS`; the denominator of Dr. GRPO's aggregation is > 0 even with none)."""
  ok = denom > 0
  return ok & (metrics[NUM_TOKENS] > 0) if NUM_TOKENS in metrics else ok


def make_optimizer(
  lr: float,
  weight_decay: float = 0.0,
  max_grad_norm: float = 1.0,
  b1: float = 0.9,
  b2: float = 0.999,
  eps: float = 1e-8,
  warmup_steps: int = 0,
  decay_steps: int = 0,
) -> optax.GradientTransformation:
  """AdamW (Loshchilov & Hutter 2019) after global-norm clipping, with optional linear warm-up and cosine decay
  (`learning_rate_schedule`)."""
  chain = [optax.clip_by_global_norm(max_grad_norm)] if max_grad_norm > 0 else []
  schedule = learning_rate_schedule(lr, warmup_steps, decay_steps)
  return optax.chain(*chain, optax.adamw(schedule, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay))


def learning_rate_schedule(lr: float, warmup_steps: int = 0, decay_steps: int = 0) -> optax.ScalarOrSchedule:
  """The learning rate after n optimizer updates, with w = warmup_steps and d = decay_steps:

    lr · n / w                                   for n < w (the linear warm-up),
    lr · (1 + cos(π · min(n - w, d) / d)) / 2     for n >= w, where d > 0 (cosine decay to 0: Loshchilov & Hutter
                                                  2017, SGDR, one cycle without restarts),
    lr                                           for n >= w, where d = 0 (a constant rate: the default).

  A constant lr without warm-up or decay. The decay ends at 0 after w + d updates, and stays there."""
  warmup = optax.linear_schedule(0.0, lr, warmup_steps) if warmup_steps > 0 else None
  if decay_steps <= 0:
    return warmup or lr
  decay = optax.cosine_decay_schedule(lr, decay_steps, alpha=0.0)
  return optax.join_schedules([warmup, decay], [warmup_steps]) if warmup else decay


def applied_updates(opt_state: Any) -> int:
  """How many updates an optimizer state of `make_optimizer` has applied (AdamW's count; skipped steps leave it)."""

  def read(x):  # a replicated scalar; on a multi-host mesh each process reads its own copy
    return int(x.addressable_data(0)) if isinstance(x, jax.Array) else int(x)

  counts = [read(x) for _, x in optax.tree_utils.tree_get_all_with_path(opt_state, "count")]
  if not counts:
    raise ValueError("the optimizer state holds no update count (not a make_optimizer state?)")
  return max(counts)


def last_learning_rate(opt_state: Any, lr: float, warmup_steps: int = 0, decay_steps: int = 0) -> float:
  """The learning rate of the newest update this optimizer state applied (`learning_rate_schedule` at n - 1; the
  first update's when none has been applied)."""
  schedule = learning_rate_schedule(lr, warmup_steps, decay_steps)
  return float(schedule(max(applied_updates(opt_state) - 1, 0))) if callable(schedule) else float(schedule)


def _split(batch: Any, num: int) -> Any:
  def one(x):
    if x.shape[0] % num:
      raise ValueError(f"a batch of {x.shape[0]} rows does not split into {num} mini-batches")
    return x.reshape(num, x.shape[0] // num, *x.shape[1:])

  return jax.tree.map(one, batch)


def _all_finite(tree: Any) -> jax.Array:
  return jnp.all(jnp.asarray([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]))


def gradient_step(
  loss_fn: LossFn,
  optimizer: optax.GradientTransformation,
  params: Any,
  opt_state: Any,
  batch: Any,
  scale: jax.Array | float = 1.0,
  max_grad_norm: float = 0.0,
) -> tuple[Any, Any, dict[str, jax.Array]]:
  """grad of sum/denom at params, one optimizer update scaled by `scale`, skipped when anything is non-finite.

  The step is kept only when loss, gradient and update are finite and the mini-batch has a valid token
  (`has_tokens`); otherwise parameters and optimizer state (AdamW's moments and count) are returned unchanged.
  Metrics: loss, grad_norm (before the optimizer's clipping), update_norm, skipped (1 when the step was not kept: not
  finite, or empty), empty (1 when the mini-batch had no valid token), and grad_clipped (1 when grad_norm >
  `max_grad_norm`, the optimizer's clip threshold; 0 when it is 0, i.e. no clipping).
  """
  (total, (denom, metrics)), grads = jax.value_and_grad(
    lambda p: (lambda s, d, m: (s, (d, m)))(*loss_fn(p, batch)), has_aux=True
  )(params)
  safe_denom = jnp.maximum(denom, 1e-8)
  # in the parameters' dtype: a float32 denominator would promote bfloat16 gradients, and with them the AdamW
  # moments, so the optimizer state would change dtype (a lax.scan carry mismatch in minibatch_updates)
  grads = jax.tree.map(lambda g, p: (g / safe_denom).astype(p.dtype), grads, params)
  loss = total / safe_denom
  updates, new_opt = optimizer.update(grads, opt_state, params)
  updates = jax.tree.map(lambda u: (u * scale).astype(u.dtype), updates)
  new_params = optax.apply_updates(params, updates)
  learns = has_tokens(denom, metrics)
  ok = jnp.isfinite(loss) & _all_finite(grads) & _all_finite(updates) & learns
  keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)  # noqa: E731
  grad_norm = jnp.where(ok, optax.tree.norm(grads), 0.0)
  metrics = {
    **metrics,
    "loss": jnp.where(jnp.isfinite(loss), loss, 0.0),
    "grad_norm": grad_norm,
    "grad_clipped": ((grad_norm > max_grad_norm) & (max_grad_norm > 0)).astype(jnp.float32),
    "update_norm": jnp.where(ok, optax.tree.norm(updates), 0.0),
    "skipped": (~ok).astype(jnp.int32),
    "empty": (~learns).astype(jnp.int32),
  }
  return keep(new_params, params), keep(new_opt, opt_state), metrics


def minibatch_updates(
  loss_fn: LossFn,
  optimizer: optax.GradientTransformation,
  params: Any,
  opt_state: Any,
  batch: Any,
  num_updates: int,
  constants: Any = None,
  prepare: Callable[[Any, Any], Any] | None = None,
  max_grad_norm: float = 0.0,
) -> tuple[Any, Any, dict[str, jax.Array]]:
  """`num_updates` consecutive optimizer steps over equal slices of `batch` in a lax.scan; metrics averaged (so
  grad_clipped becomes the fraction of the updates whose gradient was clipped; `gradient_step`), except skipped and
  empty, which are counted.

  `prepare(constants, chunk) -> chunk`, when given, runs first in each mini-batch, outside the gradient, e.g. the
  reference policy's log-probs of that mini-batch, so their activations never span the whole batch. `constants` (a
  pytree of arrays, e.g. the reference parameters) enters the scan as an argument of its body (in the carry,
  unchanged), never by closure: an nnx module merged from closed-over state inside the scan and under remat raises
  nnx's TraceContextError.
  """
  chunks = _split(batch, num_updates)

  def body(carry, chunk):
    p, o, c = carry
    if prepare is not None:
      chunk = jax.lax.stop_gradient(prepare(c, chunk))
    p, o, m = gradient_step(loss_fn, optimizer, p, o, chunk, max_grad_norm=max_grad_norm)
    return (p, o, c), m

  (params, opt_state, _), metrics = jax.lax.scan(body, (params, opt_state, constants), chunks)
  summary = {k: (v.sum() if k in ("skipped", "empty") else v.mean()) for k, v in metrics.items()}
  return params, opt_state, summary
