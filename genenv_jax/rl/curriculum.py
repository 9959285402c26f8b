"""Environment-side curriculum maths: α-curriculum reward, band filter, RWR weights and the env objectives.

GenEnv (arXiv 2512.19682) Section 3 / Algorithm 1 (docs/DESIGN.md, "The method"; step 5 of its "Architecture: how data
flows"). Pure, jittable functions over arrays; string options (estimator, cap mode) must be static under jit.

The settings (α, β, k_min, λ, the success threshold, the env's KL terms) and their defaults are declared once, in
coevolution/settings.py (CurriculumSettings, EnvSettings, DomainSettings), with where each value comes from; the
functions here take them as arguments and default none of them.
"""

from __future__ import annotations

from typing import Protocol

import jax
import jax.numpy as jnp

from genenv_jax.choices import CAP_SCALE, CAP_SKIP, CAP_SQRT, KL_CAP_MODES, KlCapMode
from genenv_jax.rl import grpo

Array = jax.Array


# The env's objectives (EnvSettings.objective, declared in genenv_jax.choices; the step dispatches on them): rwr,
# reward-weighted regression on exp(λ R_env) (`rwr_weights`, `rwr_env_loss` here: GenEnv's); pg, GRPO on R_env, K
# samples per seed (`pg_env_loss`).


class Curriculum(Protocol):
  """The α-curriculum's settings as `curriculum_targets` reads them (coevolution.settings.CurriculumSettings)."""

  alpha: float  # the target success rate α
  beta: float  # the reward's sharpness β
  k_min: float  # the band's half-width
  rwr_lambda: float  # the RWR temperature λ


# Tolerance on the band edge: p̂ = k/G and α ± k_min are not exact in float32 (0.6 - 0.5 = 0.100000024). 1e-6 is
# far below the 1/G grid spacing for any realistic G, so it only decides exact-boundary ties, in favour of keeping.
BAND_TOL = 1e-6


# ------------------------------------------------------------------------------------------ success and reward


def alpha_curriculum_reward(p_hat: Array, alpha: float, beta: float) -> Array:
  """R_env = exp(-β (p̂ - α)²). GenEnv paper, Section 3 (α-curriculum reward)."""
  p = jnp.asarray(p_hat, jnp.float32)
  return jnp.exp(-beta * (p - alpha) ** 2)


def success_rate(rewards: Array, threshold: float, valid: Array | None = None) -> Array:
  """p̂_t = (1/G) Σ_g [r_tg ≥ threshold] for rewards [T, G]; 0 for invalid tasks (valid [T] bool, None = all valid).

  GenEnv paper, Section 3 / Algorithm 1 step 3 (p̂ = successes / G). Soft rewards (token F1) are thresholded.
  """
  r = jnp.asarray(rewards, jnp.float32)
  p = jnp.mean((r >= threshold).astype(jnp.float32), axis=-1)
  if valid is not None:
    p = jnp.where(jnp.asarray(valid, bool), p, 0.0)
  return p


def env_reward(p_hat: Array, valid: Array | None, alpha: float, beta: float) -> Array:
  """Env reward R_env = valid · exp(-β (p̂ - α)²): a task that does not parse (invalid) earns 0.

  GenEnv paper, Section 3, plus the rule that invalid tasks get nothing (docs/DESIGN.md, "The method"). 0 is the reward
  floor (R_env > 0 for every valid task), so in the policy-gradient env objective a parse failure is always worse than
  any valid sibling.
  """
  r = alpha_curriculum_reward(p_hat, alpha, beta)
  if valid is not None:
    r = jnp.where(jnp.asarray(valid, bool), r, 0.0)
  return r


def band_mask(
  p_hat: Array,
  alpha: float,
  k_min: float,
  valid: Array | None = None,
  tol: float = BAND_TOL,
) -> Array:
  """Keep mask |p̂ - α| ≤ k_min + tol (and valid). GenEnv paper, Section 3 (tasks with |p̂ - α| > k_min are dropped).

  `tol` (1e-6) absorbs float error at exact boundaries such as p̂ = 0.4, 0.6 with α = 0.5, k_min = 0.1; see BAND_TOL.
  Note (docs/DESIGN.md, "The method"): with G = 8 only p̂ = 0.5 passes; with G = 10, p̂ ∈ {0.4, 0.5, 0.6} pass.
  """
  p = jnp.asarray(p_hat, jnp.float32)
  keep = jnp.abs(p - alpha) <= k_min + tol
  if valid is not None:
    keep = keep & jnp.asarray(valid, bool)
  return keep


def rwr_weights(r_env: Array, keep: Array, lam: float) -> Array:
  """RWR weights w_i = keep_i exp(λ R_i) / Σ_j keep_j exp(λ R_j); all zeros (no NaN) when nothing is kept.

  GenEnv paper, Section 3 (weight ∝ exp(λ R_env), λ = 1); reward-weighted regression, Peters & Schaal 2007.
  Computed with the max-subtraction trick over kept tasks; the weights carry no gradient.
  """
  keep = jnp.asarray(keep, bool)
  z = lam * jnp.asarray(r_env, jnp.float32)
  any_kept = jnp.any(keep)
  zmax = jnp.where(any_kept, jnp.max(jnp.where(keep, z, -jnp.inf)), 0.0)
  e = jnp.where(keep, jnp.exp(jnp.where(keep, z - zmax, 0.0)), 0.0)
  total = e.sum()
  w = jnp.where(total > 0, e / jnp.where(total > 0, total, 1.0), 0.0)
  return jax.lax.stop_gradient(w)


def curriculum_targets(
  rewards: Array, valid: Array | None, curriculum: Curriculum, threshold: float
) -> dict[str, Array]:
  """Algorithm 1 steps 3 and 5 in one call: agent rewards [T, G] -> {p_hat, r_env, keep, weights, metrics...}.

  p̂ = success_rate(rewards, threshold), R_env = env_reward (0 if invalid), keep = band_mask & valid,
  w = rwr_weights(R_env, keep, λ), with α, β, k_min, λ from `curriculum` (coevolution.settings.CurriculumSettings).
  Also returns band_frac (the valid tasks' fraction in the band) and the masked means of p̂ and R_env over valid
  tasks (for logging).
  """
  v = jnp.ones(rewards.shape[:-1], bool) if valid is None else jnp.asarray(valid, bool)
  c = curriculum
  p_hat = success_rate(rewards, threshold, v)
  r_env = env_reward(p_hat, v, c.alpha, c.beta)
  keep = band_mask(p_hat, c.alpha, c.k_min, v)
  vf = v.astype(jnp.float32)
  n_valid = jnp.maximum(vf.sum(), 1.0)
  return {
    "p_hat": p_hat,
    "r_env": r_env,
    "keep": keep,
    "weights": rwr_weights(r_env, keep, c.rwr_lambda),
    "band_frac": keep.astype(jnp.float32).sum() / n_valid,
    "valid_frac": vf.mean(),
    "p_hat_mean": (p_hat * vf).sum() / n_valid,
    "r_env_mean": (r_env * vf).sum() / n_valid,
  }


# -------------------------------------------------------------------------------------------------- KL cap


def kl_cap_scale(kl: Array, max_kl: float, mode: KlCapMode) -> Array:
  """Scale s ∈ [0, 1] for an update whose measured KL is `kl` (GenEnv paper, Section 3: cap on each update's KL).

  mode "skip":  s = 0 if kl > max_kl else 1.
  mode "scale": s = min(1, max_kl / kl) (s = 1 for kl ≤ 0).
  mode "sqrt":  s = min(1, sqrt(max_kl / kl)): KL grows ≈ quadratically in the step size for small steps, so this
                scaled step lands near max_kl, while "scale" lands near max_kl² / kl (more conservative).
  `kl` is typically the token-mean k3 KL of the env after a candidate update against the env before it, on the
  update's task tokens (or the KL to the initial env). The step applies θ ← θ_old + s (θ_candidate − θ_old)
  (`coevolution.step.Coevolution.env_update`).
  """
  kl = jnp.asarray(kl, jnp.float32)
  over = kl > max_kl
  ratio = max_kl / jnp.where(over, kl, 1.0)
  if mode == CAP_SKIP:
    return jnp.where(over, 0.0, 1.0)
  if mode == CAP_SCALE:
    return jnp.where(over, ratio, 1.0)
  if mode == CAP_SQRT:
    return jnp.where(over, jnp.sqrt(ratio), 1.0)
  raise ValueError(f"unknown kl cap mode {mode!r}; expected one of {', '.join(KL_CAP_MODES)}")


# -------------------------------------------------------------------------------------------------- RWR loss


def weighted_nll(env_logp: Array, mask: Array, weights: Array, length_norm: bool = True) -> tuple[Array, Array]:
  """Weighted NLL on the env's task tokens: (Σ_i w_i ℓ_i, Σ_i w_i [task i has tokens]).

  ℓ_i = mean_t(-log π_env(x_it)) if length_norm (default) else Σ_t -log π_env(x_it) (the exact RWR log-likelihood).
  GenEnv paper, Section 3 (weighted NLL); RWR, Peters & Schaal 2007. Shapes: env_logp, mask [T, L]; weights [T].
  The denominator Σ w_i is 1 for `rwr_weights` output (0 when nothing is kept, so the loss is 0) and makes the pair
  exact under micro-batching: split tasks into chunks, sum the chunks' sums and denominators, divide once.
  The per-task length mean keeps each kept task one RWR sample regardless of its length.
  """
  m = jnp.asarray(mask, jnp.float32)
  w = jax.lax.stop_gradient(jnp.asarray(weights, jnp.float32))
  tok_sum = (-env_logp * m).sum(-1)
  n_tok = m.sum(-1)
  per_task = tok_sum / jnp.maximum(n_tok, 1.0) if length_norm else tok_sum
  has = (n_tok > 0).astype(jnp.float32)
  return (w * has * per_task).sum(), (w * has).sum()


def rwr_env_loss(
  env_logp: Array,
  mask: Array,
  weights: Array,
  env_logp_ref: Array | None = None,
  *,
  kl_coef: float,
  kl_estimator: str = "k3",
  length_norm: bool = True,
  safe_exp_max: float = 20.0,
) -> tuple[Array, Array, dict[str, Array]]:
  """RWR env loss: Σ_i w_i [ℓ_i + β_env · KL_i] / Σ_i w_i, with KL_i the token-mean KL(π_env ‖ π_env,init) on task i.

  GenEnv paper, Section 3 (weighted NLL with a KL penalty to the initial env); KL estimators from `grpo` (Schulman
  2020). The KL is weighted by the same w_i so that (sum, denom) share one denominator and stay micro-batch exact; it
  restrains the env exactly on the tasks it is being pulled toward. weights come from `rwr_weights`.
  Returns (sum, denom, metrics): nll (weighted), kl (weighted), kl_all (token-mean over all masked tokens; feed it
  or a post-update KL to `kl_cap_scale`), weight_max, num_kept.
  """
  m = jnp.asarray(mask, bool)
  mf = m.astype(jnp.float32)
  w = jax.lax.stop_gradient(jnp.asarray(weights, jnp.float32))
  nll_sum, denom = weighted_nll(env_logp, m, w, length_norm)
  if env_logp_ref is not None and not (isinstance(kl_coef, (int, float)) and kl_coef == 0):
    kl_tok = grpo.kl_penalty(env_logp, env_logp_ref, kl_estimator, safe_exp_max)
  else:
    kl_tok = jnp.zeros_like(env_logp)
  n_tok = mf.sum(-1)
  has = (n_tok > 0).astype(jnp.float32)
  kl_task = (kl_tok * mf).sum(-1) / jnp.maximum(n_tok, 1.0)
  kl_sum = (w * has * kl_task).sum()
  total = nll_sum + kl_coef * kl_sum
  metrics = {
    "nll": grpo.finalize(nll_sum, denom),
    "kl": grpo.finalize(kl_sum, denom),
    "kl_all": grpo.masked_mean(kl_tok, m),
    "weight_max": jnp.max(w),
    "num_kept": jnp.sum(w > 0).astype(jnp.float32),
  }
  return total, denom, metrics


# ----------------------------------------------------------------------------------------- policy-gradient env


def pg_env_loss(
  env_logp_new: Array,
  env_logp_old: Array,
  env_logp_ref: Array | None,
  r_env: Array,
  mask: Array,
  samples_per_seed: int,
  sample_valid: Array | None = None,
  *,
  advantage_estimator: str = "grpo",
  clip_low: float,
  clip_high: float,
  safe_exp_max: float = 20.0,
  kl_coef: float,
  kl_estimator: str = "k3",
  loss_agg_mode: str = "token-mean",
  max_len: float | None = None,
) -> tuple[Array, Array, dict[str, Array]]:
  """Policy-gradient env objective: GRPO on R_env, grouped by seed task (offered beside RWR: docs/DESIGN.md, "The
  method").

  K = samples_per_seed env generations per seed task form a group: A_i = advantage(R_env grouped [S, K]) (GRPO
  DeepSeekMath eq. 3 by default), then `grpo.grpo_loss` (clipped surrogate + kl_coef · KL to the initial env) on the
  env's task tokens. Shapes: env log-probs and mask [S·K, L] (seed-major); r_env [S·K] or [S, K].
  Pass parse failures through `env_reward` (R_env = 0) and keep them valid here, so they get negative advantage;
  `sample_valid` [S·K] is only for padding slots that hold no generation (their advantage is 0).
  Returns (sum, denom, metrics) with grpo_loss metrics plus zero_std_frac and r_env_mean.
  """
  r = jnp.asarray(r_env, jnp.float32).reshape(-1)
  adv, adv_metrics = grpo.compute_advantages(r, sample_valid, samples_per_seed, advantage_estimator)
  m = jnp.asarray(mask, bool)
  if sample_valid is not None:
    m = m & jnp.asarray(sample_valid, bool).reshape(-1)[:, None]
  total, denom, metrics = grpo.grpo_loss(
    env_logp_new,
    env_logp_old,
    env_logp_ref,
    adv,
    m,
    clip_low=clip_low,
    clip_high=clip_high,
    safe_exp_max=safe_exp_max,
    kl_coef=kl_coef,
    kl_estimator=kl_estimator,
    loss_agg_mode=loss_agg_mode,
    max_len=max_len,
  )
  metrics = {**metrics, "zero_std_frac": adv_metrics["zero_std_frac"], "r_env_mean": adv_metrics["reward_mean"]}
  return total, denom, metrics
