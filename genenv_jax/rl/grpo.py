"""GRPO maths as small pure functions: group advantages, clipped surrogate, KL estimators, loss aggregation.

Losses know nothing of models: they take per-token log-probs, masks and rewards as arrays. Every function is
jittable with static shapes; string options (method, estimator, aggregation mode) must be static under jit.

Official agent defaults (GenEnv paper, Section 4 / Algorithm 1; docs/DESIGN.md, "The method"): G = 8 rollouts per
task, clip 0.2 (clip_low = clip_high = 0.2), low-variance k3 KL to the reference with coefficient 0.001, token-level
loss ("token-mean"), learning rate 1e-6 with AdamW. A run's values are `coevolution.settings.GrpoSettings` and
`OptimizerSettings`, which default to them.

Micro-batching (gradient accumulation) is exact because every aggregation returns (sum, denominator) where both are
sums over the sequences of the batch and the denominator does not depend on the parameters. Split a batch along its
batch axis into micro-batches k, compute (s_k, d_k) and grad_θ s_k for each; then
  loss = Σ_k s_k / Σ_k d_k,   grad = Σ_k grad_θ s_k / Σ_k d_k
equals the full-batch loss and gradient for every mode (see `finalize`). Do not divide per micro-batch.
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp

from genenv_jax import choices
from genenv_jax.choices import AdvantageEstimator, KlEstimator, LossAggregation

Array = jax.Array

# A group whose reward std is at or below this is treated as "all rewards equal": its advantage is exactly 0.
STD_TOL = 1e-6


# ----------------------------------------------------------------------------------------------- group statistics


def _group(rewards: Array, valid: Array | None, group_size: int | None) -> tuple[Array, Array]:
  """Reshape rewards to [num_groups, G] (flat [N] needs a static group_size) and broadcast `valid` to that shape.

  `valid` may be per sample (same shape as rewards) or per group ([num_groups]); None means all valid.
  """
  r = rewards.astype(jnp.float32)
  if group_size is not None:
    r = r.reshape(-1, group_size)
  if r.ndim < 2:
    raise ValueError(f"rewards must be [num_groups, G] or flat with group_size; got shape {rewards.shape}")
  if valid is None:
    m = jnp.ones(r.shape, dtype=bool)
  else:
    v = jnp.asarray(valid).astype(bool)
    if v.size == r.size:
      m = v.reshape(r.shape)
    elif v.shape == r.shape[:-1]:
      m = jnp.broadcast_to(v[..., None], r.shape)
    else:
      raise ValueError(f"valid shape {v.shape} fits neither rewards {rewards.shape} nor groups {r.shape[:-1]}")
  return r, m


def group_stats(rewards: Array, valid: Array | None = None, group_size: int | None = None) -> dict[str, Array]:
  """Masked per-group count n, mean μ and unbiased std σ (ddof = 1) over the last axis.

  n = Σ_i m_i,  μ = Σ_i m_i r_i / n,  σ = sqrt(Σ_i m_i (r_i - μ)² / (n - 1)),  σ = 0 when n < 2.
  Source: DeepSeekMath (Shao et al. 2024) Section 4.1.2 (group-normalised outcome reward); the ddof = 1 std follows
  the common torch.std convention. Returns grouped-shape arrays plus the grouped rewards and mask.
  """
  r, m = _group(rewards, valid, group_size)
  mf = m.astype(jnp.float32)
  n = mf.sum(-1)
  mean = (mf * r).sum(-1) / jnp.maximum(n, 1.0)
  var = (mf * (r - mean[..., None]) ** 2).sum(-1) / jnp.maximum(n - 1.0, 1.0)
  std = jnp.where(n >= 2, jnp.sqrt(var), 0.0)
  return {"r": r, "mask": m, "n": n, "mean": mean, "std": std, "zero_std": std <= STD_TOL}


def zero_std_fraction(rewards: Array, valid: Array | None = None, group_size: int | None = None) -> Array:
  """Fraction of groups (with ≥ 1 valid sample) whose rewards all agree: Σ_g [σ_g ≤ tol] / #groups.

  These groups carry no GRPO learning signal (DAPO dynamic sampling, Yu et al. 2025, motivates logging it).
  """
  s = group_stats(rewards, valid, group_size)
  has = s["n"] >= 1
  return jnp.sum(has & s["zero_std"]) / jnp.maximum(jnp.sum(has), 1)


# ---------------------------------------------------------------------------------------------------- advantages


def grpo_advantages(
  rewards: Array, valid: Array | None = None, group_size: int | None = None, eps: float = 1e-6
) -> Array:
  """GRPO advantage A_i = (r_i - μ_g) / (σ_g + ε), σ with ddof = 1; A_i = 0 if the group's σ ≤ tol or i is invalid.

  Source: DeepSeekMath (Shao et al. 2024) Section 4.1.2, outcome supervision. Output has the shape of `rewards`.
  """
  s = group_stats(rewards, valid, group_size)
  a = (s["r"] - s["mean"][..., None]) / (s["std"][..., None] + eps)
  a = jnp.where(s["mask"] & ~s["zero_std"][..., None], a, 0.0)
  return a.reshape(rewards.shape)


def rloo_advantages(
  rewards: Array, valid: Array | None = None, group_size: int | None = None, eps: float = 1e-6
) -> Array:
  """RLOO advantage A_i = r_i - (1 / (n - 1)) Σ_{j≠i} r_j = n / (n - 1) · (r_i - μ); 0 when n < 2 or i invalid.

  Source: Ahmadian et al. 2024 "Back to Basics" (REINFORCE leave-one-out), Kool et al. 2019. `eps` is unused
  (kept for a uniform registry signature).
  """
  del eps
  s = group_stats(rewards, valid, group_size)
  n = s["n"][..., None]
  a = n / jnp.maximum(n - 1.0, 1.0) * (s["r"] - s["mean"][..., None])
  a = jnp.where(s["mask"] & (n >= 2) & ~s["zero_std"][..., None], a, 0.0)
  return a.reshape(rewards.shape)


def drgrpo_advantages(
  rewards: Array, valid: Array | None = None, group_size: int | None = None, eps: float = 1e-6
) -> Array:
  """Dr. GRPO (mean-only) advantage A_i = r_i - μ_g, no std division; 0 for equal-reward groups and invalid i.

  Source: Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"), Section 3.2. `eps` is unused.
  """
  del eps
  s = group_stats(rewards, valid, group_size)
  a = s["r"] - s["mean"][..., None]
  a = jnp.where(s["mask"] & ~s["zero_std"][..., None], a, 0.0)
  return a.reshape(rewards.shape)


# each choice's implementation (genenv_jax.choices declares the options)
ADVANTAGE_ESTIMATORS: dict[str, Callable[..., Array]] = choices.dispatch(
  choices.ADVANTAGE_ESTIMATORS,
  {"grpo": grpo_advantages, "rloo": rloo_advantages, "drgrpo": drgrpo_advantages, "mean": drgrpo_advantages},
)


def compute_advantages(
  rewards: Array,
  valid: Array | None = None,
  group_size: int | None = None,
  method: AdvantageEstimator = "grpo",
  eps: float = 1e-6,
) -> tuple[Array, dict[str, Array]]:
  """Advantages by registry name ("grpo" | "rloo" | "drgrpo"/"mean") plus metrics {zero_std_frac, reward_mean}."""
  adv = ADVANTAGE_ESTIMATORS[method](rewards, valid, group_size, eps)
  s = group_stats(rewards, valid, group_size)
  mf = s["mask"].astype(jnp.float32)
  metrics = {
    "zero_std_frac": zero_std_fraction(rewards, valid, group_size),
    "reward_mean": (mf * s["r"]).sum() / jnp.maximum(mf.sum(), 1.0),
  }
  return adv, metrics


# ------------------------------------------------------------------------------------------------------ safe exp


def safe_exp(x: Array, x_max: float = 20.0) -> Array:
  """exp(x) for x <= x_max, continued by its tangent line beyond: e^{x_max} (1 + x - x_max). C¹, finite, monotone.

  Guards exp(log-ratio) against overflow without a clamp: a clamp's derivative is 0 beyond it, which silently drops
  the gradient of exactly the tokens whose ratio (or k3 KL) is most extreme; the tangent keeps a gradient of
  e^{x_max} > 0 there, and e^x itself (no approximation) wherever x <= x_max (e^20 = 4.9e8, far outside any clip
  range). Below, e^x -> 0 needs no guard.
  """
  x = x.astype(jnp.float32)
  capped = jnp.exp(jnp.minimum(x, x_max))
  return jnp.where(x > x_max, capped * (1.0 + (x - x_max)), capped)


# --------------------------------------------------------------------------------------------- clipped surrogate


def clipped_surrogate(
  logp_new: Array,
  logp_old: Array,
  advantages: Array,
  clip_low: float = 0.2,
  clip_high: float = 0.2,
  safe_exp_max: float = 20.0,
) -> tuple[Array, Array, Array]:
  """Per-token PPO clipped surrogate loss with separate lower/upper clip.

  ρ = exp(logp_new - logp_old),  L = -min(ρ A, clip(ρ, 1 - ε_lo, 1 + ε_hi) A).
  Sources: PPO (Schulman et al. 2017) eq. 7; GRPO per-token form DeepSeekMath (Shao et al. 2024) eq. 3; decoupled
  ε_lo / ε_hi is DAPO clip-higher (Yu et al. 2025, e.g. ε_hi = 0.28). exp is `safe_exp`: exact up to a log-ratio of
  `safe_exp_max`, linear beyond (no overflow, and the gradient is kept).
  `advantages` is per token ([B, L]) or per sequence ([B], broadcast over L); logp_old and A are stop-gradiented.
  Returns (loss [B, L], clipped [B, L] bool, ratio [B, L]); `clipped` marks tokens where the clipped branch is
  active (A > 0 and ρ > 1 + ε_hi, or A < 0 and ρ < 1 - ε_lo), i.e. the token gives no gradient.
  """
  adv = jax.lax.stop_gradient(advantages.astype(jnp.float32))
  if adv.ndim == logp_new.ndim - 1:
    adv = adv[..., None]
  ratio = safe_exp(logp_new - jax.lax.stop_gradient(logp_old), safe_exp_max)
  surr1 = ratio * adv
  surr2 = jnp.clip(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
  loss = -jnp.minimum(surr1, surr2)
  clipped = ((adv > 0) & (ratio > 1.0 + clip_high)) | ((adv < 0) & (ratio < 1.0 - clip_low))
  return loss, jnp.broadcast_to(clipped, loss.shape), ratio


# -------------------------------------------------------------------------------------------------- KL estimators


def kl_k1(logp: Array, logp_ref: Array, safe_exp_max: float = 20.0) -> Array:
  """k1 = log π(x) - log π_ref(x): unbiased estimate of KL(π ‖ π_ref) for x ~ π; can be negative per token.

  Source: Schulman 2020, "Approximating KL Divergence" (k1).
  """
  del safe_exp_max
  return logp - jax.lax.stop_gradient(logp_ref)


def kl_k2(logp: Array, logp_ref: Array, safe_exp_max: float = 20.0) -> Array:
  """k2 = ½ (log π(x) - log π_ref(x))² ≥ 0: low-variance, biased estimate of KL(π ‖ π_ref) for x ~ π.

  Source: Schulman 2020, "Approximating KL Divergence" (k2).
  """
  del safe_exp_max
  return 0.5 * (logp - jax.lax.stop_gradient(logp_ref)) ** 2


def kl_k3(logp: Array, logp_ref: Array, safe_exp_max: float = 20.0) -> Array:
  """k3 = exp(r) - r - 1 with r = log π_ref(x) - log π(x): unbiased, ≥ 0, estimate of KL(π ‖ π_ref).

  Direction: tokens x are sampled from the policy π, so E_π[k3] = E_π[π_ref/π] - E_π[log π_ref/π] - 1 = KL(π ‖ π_ref).
  Source: Schulman 2020 k3 estimator; used as the GRPO KL term in DeepSeekMath (Shao et al. 2024) eq. 4.
  exp is `safe_exp` (exact for r <= `safe_exp_max`, linear beyond): for r -> -∞, k3 ≈ -r - 1 is linear by itself;
  for r -> +∞ the tangent keeps k3 finite and its gradient ∂k3/∂log π = 1 - e^r nonzero (a ±c clamp zeroed it).
  """
  r = jax.lax.stop_gradient(logp_ref) - logp
  return safe_exp(r, safe_exp_max) - r - 1.0


KL_ESTIMATORS: dict[str, Callable[..., Array]] = choices.dispatch(
  choices.KL_ESTIMATORS, {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}
)


def kl_penalty(logp: Array, logp_ref: Array, estimator: KlEstimator = "k3", safe_exp_max: float = 20.0) -> Array:
  """Per-token KL(π ‖ π_ref) estimate by registry name ("k1" | "k2" | "k3"); see each estimator's docstring."""
  return KL_ESTIMATORS[estimator](logp, logp_ref, safe_exp_max)


# -------------------------------------------------------------------------------------------------------- entropy


def token_entropy(logits: Array) -> Array:
  """Per-position entropy H = -Σ_v p_v log p_v of softmax(logits) over the last axis ([..., V] -> [...]).

  Safe for -inf (masked) logits: p_v = 0 terms contribute 0 with finite gradients. Standard definition (Shannon).
  """
  logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  p = jnp.exp(logp)
  safe = jnp.where(p > 0, logp, 0.0)
  return -jnp.sum(p * safe, axis=-1)


# ---------------------------------------------------------------------------------------------- loss aggregation


def _seq_parts(per_token: Array, mask: Array) -> tuple[Array, Array, Array]:
  m = mask.astype(jnp.float32)
  tok_sum = (per_token * m).sum(-1)
  n_tok = m.sum(-1)
  return tok_sum, n_tok, (n_tok > 0).astype(jnp.float32)


def agg_token_mean(per_token: Array, mask: Array, max_len: float | None = None) -> tuple[Array, Array]:
  """ "token-mean": loss = Σ_{b,t} m_bt ℓ_bt / Σ_{b,t} m_bt; returns (Σ m ℓ, Σ m).

  Token-level loss: DAPO (Yu et al. 2025) Section 3.3; the GenEnv official default.
  """
  del max_len
  m = mask.astype(jnp.float32)
  return (per_token * m).sum(), m.sum()


def agg_seq_mean_token_mean(per_token: Array, mask: Array, max_len: float | None = None) -> tuple[Array, Array]:
  """ "seq-mean-token-mean": loss = (1/S) Σ_b (Σ_t m_bt ℓ_bt / Σ_t m_bt) over the S sequences with ≥ 1 token.

  Returns (Σ_b mean_t ℓ_b, S). Original GRPO normalisation, DeepSeekMath (Shao et al. 2024) eq. 3 (1/G Σ_i 1/|o_i| Σ_t).
  """
  del max_len
  tok_sum, n_tok, has = _seq_parts(per_token, mask)
  return (has * tok_sum / jnp.maximum(n_tok, 1.0)).sum(), has.sum()


def agg_seq_mean_token_sum_norm(per_token: Array, mask: Array, max_len: float | None = None) -> tuple[Array, Array]:
  """ "seq-mean-token-sum-norm" (alias "seq-mean-token-scale"): loss = Σ_{b,t} m_bt ℓ_bt / (B · L_max), B all rows.

  Returns (Σ m ℓ, B · L_max). Dr. GRPO (Liu et al. 2025) Section 3.2: drop the 1/|o_i| length bias and divide by a
  constant, (1/G) Σ_i (1/MAX_TOKENS) Σ_t. The divisor counts every row, masked (invalid-task) rows too, so it does not
  depend on how many rows the batch's masks zero (it would change the step size from batch to batch). L_max must be
  the same for every micro-batch: pass the fixed generation length; None uses the padded length mask.shape[-1], which
  is the same across micro-batches split along the batch axis.
  """
  m = mask.astype(jnp.float32)
  scale = float(mask.shape[-1]) if max_len is None else float(max_len)
  rows = math.prod(mask.shape[:-1])
  return (per_token * m).sum(), jnp.asarray(rows * scale, jnp.float32)


LOSS_AGGREGATIONS: dict[str, Callable[..., tuple[Array, Array]]] = choices.dispatch(
  choices.LOSS_AGGREGATIONS,
  {
    "token-mean": agg_token_mean,
    "seq-mean-token-mean": agg_seq_mean_token_mean,
    "seq-mean-token-sum-norm": agg_seq_mean_token_sum_norm,
    "seq-mean-token-scale": agg_seq_mean_token_sum_norm,
  },
)


def aggregate_loss(
  per_token: Array, mask: Array, mode: LossAggregation = "token-mean", max_len: float | None = None
) -> tuple[Array, Array]:
  """(sum, denominator) of a per-token loss [B, L] under mask [B, L] by registry mode; loss = sum / denominator."""
  return LOSS_AGGREGATIONS[mode](per_token, mask, max_len)


def finalize(total_sum: Array, total_denom: Array) -> Array:
  """loss = Σ_k s_k / Σ_k d_k, and 0 when the denominator is 0 (nothing valid); exact micro-batch combination."""
  ok = total_denom > 0
  return jnp.where(ok, total_sum / jnp.where(ok, total_denom, 1.0), 0.0)


def masked_mean(x: Array, mask: Array) -> Array:
  """Σ m x / Σ m (0 when Σ m = 0), for metrics."""
  m = jnp.broadcast_to(mask, x.shape).astype(jnp.float32)
  return (x * m).sum() / jnp.maximum(m.sum(), 1.0)


# ------------------------------------------------------------------------------------------------------ GRPO loss


def grpo_loss(
  logp_new: Array,
  logp_old: Array,
  logp_ref: Array | None,
  advantages: Array,
  mask: Array,
  *,
  clip_low: float = 0.2,
  clip_high: float = 0.2,
  safe_exp_max: float = 20.0,
  kl_coef: float = 0.001,
  kl_estimator: str = "k3",
  entropy: Array | None = None,
  entropy_coef: float = 0.0,
  loss_agg_mode: str = "token-mean",
  max_len: float | None = None,
) -> tuple[Array, Array, dict[str, Array]]:
  """GRPO objective per token, aggregated: ℓ_bt = L^clip_bt + β_KL · KL_bt - c_H · H_bt.

  L^clip is `clipped_surrogate`, KL is `kl_penalty(logp_new, logp_ref, kl_estimator)` (skipped when logp_ref is None
  or kl_coef = 0), H is the given per-token entropy [B, L] (e.g. `token_entropy(logits)`; skipped when None).
  Source: DeepSeekMath (Shao et al. 2024) eq. 3 (KL inside the loss, k3); entropy bonus as in PPO (Schulman et al.
  2017) eq. 9. Defaults are the GenEnv official ones (module docstring). Shapes: log-probs and mask [B, L]; advantages
  [B] or [B, L]. Returns (sum, denominator, metrics) with loss = finalize(sum, denominator); metrics are masked token
  means over this batch: pg_loss, kl, clip_frac, ratio_mean, ratio_max, entropy, adv_mean, num_tokens.
  """
  mask = mask.astype(bool)
  pg, clipped, ratio = clipped_surrogate(logp_new, logp_old, advantages, clip_low, clip_high, safe_exp_max)
  per_token = pg
  if logp_ref is not None and not (isinstance(kl_coef, (int, float)) and kl_coef == 0):
    kl = kl_penalty(logp_new, logp_ref, kl_estimator, safe_exp_max)
    per_token = per_token + kl_coef * kl
  else:
    kl = jnp.zeros_like(pg)
  if entropy is not None:
    per_token = per_token - entropy_coef * entropy
  total, denom = aggregate_loss(per_token, mask, loss_agg_mode, max_len)
  adv = advantages if advantages.ndim == mask.ndim else advantages[..., None]
  metrics = {
    "pg_loss": masked_mean(pg, mask),
    "kl": masked_mean(kl, mask),
    "clip_frac": masked_mean(clipped.astype(jnp.float32), mask),
    "ratio_mean": masked_mean(ratio, mask),
    "ratio_max": jnp.max(jnp.where(mask, ratio, 0.0)),
    "entropy": masked_mean(entropy, mask) if entropy is not None else jnp.zeros(()),
    "adv_mean": masked_mean(jnp.broadcast_to(adv, mask.shape).astype(jnp.float32), mask),
    "num_tokens": mask.sum().astype(jnp.float32),
  }
  return total, denom, metrics
