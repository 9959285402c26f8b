"""The RL maths against an independent reference: the published formulas, written here again in float64 numpy.

Each reference follows its paper's formula directly (no shared code with genenv_jax.rl): GRPO / RLOO / Dr. GRPO
advantages (DeepSeekMath §4.1.2, Ahmadian et al. 2024, Liu et al. 2025 §3.2), the PPO clipped surrogate (Schulman et
al. 2017 eq. 7), Schulman's k1/k2/k3 KL estimators, the three loss normalisations (token-mean as DAPO, per-sequence
mean as DeepSeekMath eq. 3, Dr. GRPO's constant B · L_max), the policy's log-probs at the sampling temperature, and
GenEnv's curriculum (p̂, R_env = exp(-β (p̂ - α)²), the band, RWR weights ∝ exp(λ R_env), the weighted NLL + KL).
Gradients are the hand-derived derivatives of those formulas, checked against jax.grad of ours on random inputs.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from genenv_jax.coevolution.settings import CurriculumSettings
from genenv_jax.rl import curriculum, grpo
from genenv_jax.rl.logprobs import chunked_token_logprobs

RTOL, ATOL = 1e-5, 1e-6


# ---------------------------------------------------------------------------------------------- references (numpy)


def ref_advantages(r, valid, method, eps=1e-6, tol=1e-6):
  """r [G_groups, G], valid [G_groups, G] -> advantages; 0 for invalid samples and for groups whose rewards agree."""
  out = np.zeros_like(r)
  for g in range(r.shape[0]):
    idx = np.flatnonzero(valid[g])
    x = r[g, idx]
    n = len(x)
    std = x.std(ddof=1) if n >= 2 else 0.0
    if n == 0 or std <= tol:
      continue
    if method == "grpo":
      out[g, idx] = (x - x.mean()) / (std + eps)
    elif method == "rloo":  # r_i minus the mean of the others
      out[g, idx] = [x[i] - np.delete(x, i).mean() for i in range(n)]
    else:  # drgrpo: mean only
      out[g, idx] = x - x.mean()
  return out


def ref_log_softmax(z):
  z = z - z.max(-1, keepdims=True)
  return z - np.log(np.exp(z).sum(-1, keepdims=True))


def ref_per_token(lp, old, ref, adv, entropy, eps_lo, eps_hi, beta, estimator, c_h):
  """ℓ = -min(ρA, clip(ρ)A) + β KL - c_H H and ∂ℓ/∂lp, with ρ = exp(lp - old)."""
  rho = np.exp(lp - old)
  a = adv[:, None]
  unclipped, clipped = rho * a, np.clip(rho, 1 - eps_lo, 1 + eps_hi) * a
  pg = -np.minimum(unclipped, clipped)
  d_pg = np.where(unclipped <= clipped, -rho * a, 0.0)  # the clipped branch is flat in lp
  d = lp - ref
  if estimator == "k1":
    kl, d_kl = d, np.ones_like(d)
  elif estimator == "k2":
    kl, d_kl = 0.5 * d**2, d
  else:  # k3 = e^r - r - 1, r = ref - lp
    r = -d
    kl, d_kl = np.exp(r) - r - 1, 1 - np.exp(r)
  clip_active = ((a > 0) & (rho > 1 + eps_hi)) | ((a < 0) & (rho < 1 - eps_lo))
  return pg + beta * kl - c_h * entropy, d_pg + beta * d_kl, kl, clip_active


def ref_aggregate(per_token, grad_token, mask, mode, max_len):
  """(loss, ∂loss/∂lp) under each normalisation."""
  m = mask.astype(np.float64)
  if mode == "token-mean":
    return (per_token * m).sum() / m.sum(), grad_token * m / m.sum()
  if mode == "seq-mean-token-mean":
    n = m.sum(-1)
    has = n > 0
    per_seq = (per_token * m).sum(-1) / np.maximum(n, 1)
    return per_seq[has].mean(), grad_token * m / np.maximum(n, 1)[:, None] / has.sum()
  # Dr. GRPO: every row counts, masked or not, and every row is divided by the same L_max
  b = mask.shape[0]
  return (per_token * m).sum() / (b * max_len), grad_token * m / (b * max_len)


# ----------------------------------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("method", ["grpo", "rloo", "drgrpo"])
def test_advantages_match_reference(method):
  rng = np.random.RandomState(0)
  r = rng.binomial(1, 0.5, size=(12, 6)).astype(np.float64)
  r[3] = rng.rand(6)  # soft rewards
  r[4] = 1.0  # all equal: no signal
  valid = rng.rand(12, 6) > 0.2
  valid[5] = False  # an invalid task
  valid[6] = [True] + [False] * 5  # one valid sample
  got = grpo.compute_advantages(jnp.asarray(r, jnp.float32), jnp.asarray(valid), method=method)[0]
  np.testing.assert_allclose(got, ref_advantages(r, valid, method), rtol=RTOL, atol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.6, 1.5])
def test_logprobs_and_entropy_at_the_sampling_temperature_match_reference(temperature):
  rng = np.random.RandomState(1)
  hidden, head = rng.randn(3, 10, 8), rng.randn(8, 29)
  targets = rng.randint(0, 29, size=(3, 10))
  lp_all = ref_log_softmax(hidden @ head / temperature)
  want_lp = np.take_along_axis(lp_all, targets[..., None], -1)[..., 0]
  want_h = -(np.exp(lp_all) * lp_all).sum(-1)
  # ∂/∂hidden of Σ log π_T(y): (onehot(y) - π_T) W^T / T
  onehot = np.eye(29)[targets]
  want_dh = (onehot - np.exp(lp_all)) @ head.T / temperature

  def f(h):
    return chunked_token_logprobs(
      h,
      jnp.asarray(head, jnp.float32),
      jnp.asarray(targets),  # noqa: E731
      temperature=temperature,
      chunk_size=4,
      with_entropy=True,
    )

  lp, h = f(jnp.asarray(hidden, jnp.float32))
  np.testing.assert_allclose(lp, want_lp, rtol=RTOL, atol=1e-5)
  np.testing.assert_allclose(h, want_h, rtol=RTOL, atol=1e-5)
  np.testing.assert_allclose(
    jax.grad(lambda x: f(x)[0].sum())(jnp.asarray(hidden, jnp.float32)), want_dh, rtol=1e-4, atol=1e-5
  )


def _batch(seed, b=8, length=7):
  rng = np.random.RandomState(seed)
  lp = -rng.rand(b, length) * 3 - 0.05
  old = lp + rng.randn(b, length) * 0.3  # ratios on both sides of the clip range
  ref = lp + rng.randn(b, length) * 0.5
  adv = rng.randn(b)
  entropy = rng.rand(b, length) * 2
  lengths = np.array([7, 3, 0, 5, 1, 7, 0, 4])[:b]  # ragged, two invalid (fully masked) rows
  mask = np.arange(length)[None] < lengths[:, None]
  return lp, old, ref, adv, entropy, mask


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_grpo_loss_values_and_gradients_match_reference(mode, estimator):
  lp, old, ref, adv, entropy, mask = _batch(2)
  kw = dict(clip_low=0.2, clip_high=0.28, kl_coef=0.1, kl_estimator=estimator, entropy_coef=0.01, max_len=9)
  per_tok, d_tok, kl, clip_active = ref_per_token(lp, old, ref, adv, entropy, 0.2, 0.28, 0.1, estimator, 0.01)
  want_loss, want_grad = ref_aggregate(per_tok, d_tok, mask, mode, 9)
  assert 0 < clip_active[mask].mean() < 1  # the inputs exercise both branches

  def loss(x):
    s, d, metrics = grpo.grpo_loss(
      x,
      jnp.asarray(old, jnp.float32),
      jnp.asarray(ref, jnp.float32),
      jnp.asarray(adv, jnp.float32),
      jnp.asarray(mask),
      loss_agg_mode=mode,
      entropy=jnp.asarray(entropy, jnp.float32),
      **kw,
    )
    return grpo.finalize(s, d), metrics

  (got_loss, metrics), got_grad = jax.value_and_grad(loss, has_aux=True)(jnp.asarray(lp, jnp.float32))
  np.testing.assert_allclose(got_loss, want_loss, rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(got_grad, want_grad, rtol=1e-4, atol=ATOL)
  np.testing.assert_allclose(metrics["kl"], kl[mask].mean(), rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(metrics["clip_frac"], clip_active[mask].mean(), rtol=RTOL)


def test_dr_grpo_divisor_is_constant_under_invalid_rows():
  """Zeroing a row's mask (an invalid task) removes its terms but leaves the divisor B · L_max: the loss of the
  remaining rows is unchanged per token, as Dr. GRPO's 1/(G · MAX_TOKENS) prescribes."""
  lp, old, ref, adv, entropy, mask = _batch(3)
  per_tok, d_tok, _, _ = ref_per_token(lp, old, ref, adv, entropy, 0.2, 0.2, 0.0, "k3", 0.0)

  def ours(m):
    s, d, _ = grpo.grpo_loss(
      jnp.asarray(lp, jnp.float32),
      jnp.asarray(old, jnp.float32),
      None,
      jnp.asarray(adv, jnp.float32),
      jnp.asarray(m),
      loss_agg_mode="seq-mean-token-sum-norm",
      max_len=7,
    )
    return float(s), float(d)

  fewer = mask.copy()
  fewer[0] = False
  for m in (mask, fewer):
    s, d = ours(m)
    assert d == mask.shape[0] * 7
    np.testing.assert_allclose(s / d, ref_aggregate(per_tok, d_tok, m, "seq-mean-token-sum-norm", 7)[0], rtol=RTOL)


def test_extreme_log_ratios_keep_their_gradient():
  """Beyond the safe-exp point (log-ratio 20) ours continues exp by its tangent: finite, below the convex reference,
  and with a gradient of the reference's sign and at least e^20 in size (a ±20 clamp gave exactly 0). Up to 20 it is
  the reference itself."""
  r = np.array([-40.0, -3.0, 0.5, 19.0, 25.0, 60.0])  # r = log π_ref - log π
  lp = np.full_like(r, -1.0)
  ref = lp + r
  want = np.exp(r) - r - 1
  want_grad = 1 - np.exp(r)  # ∂k3/∂lp
  got, got_grad = jax.vmap(jax.value_and_grad(lambda x, y: grpo.kl_k3(x, y)))(
    jnp.asarray(lp, jnp.float32), jnp.asarray(ref, jnp.float32)
  )
  got, got_grad = np.asarray(got, np.float64), np.asarray(got_grad, np.float64)
  exact = r <= 20
  np.testing.assert_allclose(got[exact], want[exact], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got_grad[exact], want_grad[exact], rtol=1e-5, atol=1e-5)
  assert np.isfinite(got).all() and np.isfinite(got_grad).all()
  assert (got[~exact] <= want[~exact]).all() and (got[~exact] > np.exp(20.0)).all()
  assert (np.sign(got_grad) == np.sign(want_grad)).all() and (got_grad[~exact] <= 1 - np.exp(20.0) * (1 - 1e-5)).all()
  # the ratio of the surrogate likewise: A < 0, log-ratio 30 (past the clip): -ρA is linear in lp with slope e^20 > 0
  g = jax.grad(lambda x: grpo.clipped_surrogate(x, jnp.zeros(1), -jnp.ones(1))[0].sum())(jnp.array([30.0]))
  np.testing.assert_allclose(g, [np.exp(20.0)], rtol=1e-5)


@pytest.mark.parametrize("lam,beta_env", [(1.0, 0.001), (3.0, 0.2)])
def test_curriculum_and_rwr_loss_match_reference(lam, beta_env):
  rng = np.random.RandomState(4)
  t, g, length = 12, 10, 6
  rewards = rng.rand(t, g) ** rng.choice([0.5, 1, 3], size=(t, 1))  # spread the success rates
  valid = rng.rand(t) > 0.15
  alpha, beta, k_min, thr = 0.5, 10.0, 0.1, 0.5
  p_hat = np.where(valid, (rewards >= thr).mean(-1), 0.0)
  r_env = np.where(valid, np.exp(-beta * (p_hat - alpha) ** 2), 0.0)
  keep = valid & (np.abs(p_hat - alpha) <= k_min + 1e-9)
  assert 0 < keep.sum() < valid.sum()
  w = np.where(keep, np.exp(lam * r_env), 0.0)
  w = w / w.sum()
  settings = CurriculumSettings(alpha=alpha, beta=beta, k_min=k_min, rwr_lambda=lam)
  cur = curriculum.curriculum_targets(jnp.asarray(rewards, jnp.float32), jnp.asarray(valid), settings, thr)
  np.testing.assert_allclose(cur["p_hat"], p_hat, rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(cur["r_env"], r_env, rtol=RTOL, atol=ATOL)
  np.testing.assert_array_equal(cur["keep"], keep)
  np.testing.assert_allclose(cur["weights"], w, rtol=RTOL, atol=ATOL)

  # RWR env loss: Σ_i w_i [mean_t(-log π) + β_env mean_t k3] / Σ_i w_i over tasks with tokens, and its gradient
  lp = -rng.rand(t, length) * 4
  ref = lp + rng.randn(t, length) * 0.4
  mask = np.arange(length)[None] < rng.randint(0, length + 1, size=(t, 1))
  m = mask.astype(np.float64)
  n = m.sum(-1)
  has = n > 0
  k3 = np.exp(ref - lp) - (ref - lp) - 1
  per_task = ((-lp + beta_env * k3) * m).sum(-1) / np.maximum(n, 1)
  denom = (w * has).sum()
  want = (w * has * per_task).sum() / denom
  want_grad = (w * has / np.maximum(n, 1) / denom)[:, None] * m * (-1 + beta_env * (1 - np.exp(ref - lp)))

  def loss(x):
    s, d, _ = curriculum.rwr_env_loss(
      x, jnp.asarray(mask), cur["weights"], jnp.asarray(ref, jnp.float32), kl_coef=beta_env
    )
    return grpo.finalize(s, d)

  got, got_grad = jax.value_and_grad(loss)(jnp.asarray(lp, jnp.float32))
  np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(got_grad, want_grad, rtol=1e-4, atol=ATOL)
