"""Tests for genenv_jax.rl.grpo against hand-computed values (arithmetic in the comments)."""

import functools
import inspect
import math
from typing import get_args

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from genenv_jax import choices
from genenv_jax.rl import grpo

LN2 = math.log(2.0)


# ---------------------------------------------------------------------------------------------------- advantages

# Group A = [1, 0, 0, 0]: μ = 0.25, deviations [.75, -.25, -.25, -.25], var(ddof=1) = (.5625 + 3·.0625)/3 = .25, σ = .5
# Group B = [.5, 1, 0, .5]: μ = .5, deviations [0, .5, -.5, 0], var = .5/3 = 1/6, σ = .408248
TWO_GROUPS = np.array([[1.0, 0.0, 0.0, 0.0], [0.5, 1.0, 0.0, 0.5]], np.float32)


def test_grpo_two_groups():
  a = grpo.grpo_advantages(jnp.asarray(TWO_GROUPS))
  # A: [.75, -.25, -.25, -.25] / .5 = [1.5, -.5, -.5, -.5];  B: [0, .5, -.5, 0] / .408248 = [0, 1.224745, -1.224745, 0]
  want = [[1.5, -0.5, -0.5, -0.5], [0.0, 1.224745, -1.224745, 0.0]]
  np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6)


def test_rloo_two_groups():
  a = grpo.rloo_advantages(jnp.asarray(TWO_GROUPS))
  # A: r_0 - mean(0,0,0) = 1; r_1 - mean(1,0,0) = -1/3.  B: .5 - mean(1,0,.5) = 0; 1 - mean(.5,0,.5) = 2/3; 0 - 2/3.
  want = [[1.0, -1 / 3, -1 / 3, -1 / 3], [0.0, 2 / 3, -2 / 3, 0.0]]
  np.testing.assert_allclose(a, want, rtol=1e-6, atol=1e-7)


def test_drgrpo_two_groups():
  a = grpo.drgrpo_advantages(jnp.asarray(TWO_GROUPS))
  # r - μ, no std: A: [.75, -.25, -.25, -.25];  B: [0, .5, -.5, 0]
  np.testing.assert_allclose(a, [[0.75, -0.25, -0.25, -0.25], [0.0, 0.5, -0.5, 0.0]], atol=1e-7)
  np.testing.assert_allclose(grpo.ADVANTAGE_ESTIMATORS["mean"](jnp.asarray(TWO_GROUPS)), a)


@pytest.mark.parametrize("method", ["grpo", "rloo", "drgrpo"])
def test_all_equal_groups_zero_and_finite(method):
  # 0.3 is not exact in binary, so μ may differ from r by an ulp; the advantage must still be exactly 0.
  r = jnp.array([[0.3] * 8, [1.0] * 8, [0.0] * 8, [1, 0, 0, 0, 0, 0, 0, 0]], jnp.float32)
  a, metrics = grpo.compute_advantages(r, method=method)
  assert np.all(np.isfinite(a))
  np.testing.assert_array_equal(a[:3], 0.0)
  assert np.abs(a[3]).sum() > 0
  # 3 of 4 groups have zero std
  np.testing.assert_allclose(metrics["zero_std_frac"], 0.75)


def test_flat_rewards_with_group_size():
  a = grpo.grpo_advantages(jnp.asarray(TWO_GROUPS.reshape(-1)), group_size=4)
  assert a.shape == (8,)
  np.testing.assert_allclose(a, [1.5, -0.5, -0.5, -0.5, 0.0, 1.224745, -1.224745, 0.0], rtol=1e-5, atol=1e-6)


def test_valid_per_group_and_per_sample():
  r = jnp.array([[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0]])
  a = grpo.grpo_advantages(r, valid=jnp.array([True, False]))
  np.testing.assert_allclose(a[0], [1.5, -0.5, -0.5, -0.5], rtol=1e-5)
  np.testing.assert_array_equal(a[1], 0.0)
  # only the valid group counts, and it has nonzero std -> 0 / 1
  np.testing.assert_allclose(grpo.zero_std_fraction(r, valid=jnp.array([True, False])), 0.0)
  # Per-sample: [1, 0, 0, (5 invalid)] -> stats over [1, 0, 0]: μ = 1/3, var = (4/9 + 1/9 + 1/9)/2 = 1/3,
  # σ = .57735; A = [(2/3)/.57735, (-1/3)/.57735, same, 0] = [1.154701, -.577350, -.577350, 0]
  r2 = jnp.array([[1.0, 0.0, 0.0, 5.0]])
  a2 = grpo.grpo_advantages(r2, valid=jnp.array([[True, True, True, False]]))
  np.testing.assert_allclose(a2, [[1.154701, -0.577350, -0.577350, 0.0]], rtol=1e-5)
  # RLOO per-sample: 3/2 · [2/3, -1/3, -1/3] = [1, -.5, -.5]
  a3 = grpo.rloo_advantages(r2, valid=jnp.array([[True, True, True, False]]))
  np.testing.assert_allclose(a3, [[1.0, -0.5, -0.5, 0.0]], rtol=1e-6)


def test_single_valid_sample_gives_zero():
  a = grpo.grpo_advantages(jnp.array([[1.0, 0.0]]), valid=jnp.array([[True, False]]))
  np.testing.assert_array_equal(a, 0.0)


# --------------------------------------------------------------------------------------------- clipped surrogate


def _surr(ratios, adv, **kw):
  logp_old = jnp.zeros(len(ratios))
  logp_new = jnp.log(jnp.asarray(ratios, jnp.float32))
  return grpo.clipped_surrogate(logp_new, logp_old, jnp.full(len(ratios), adv, jnp.float32), **kw)


def test_clip_positive_advantage():
  # A = +1, clip [0.8, 1.2]: loss = -min(ρ, clip(ρ)):
  # ρ=1.5 -> -min(1.5, 1.2) = -1.2 (clipped); ρ=.5 -> -min(.5, .8) = -.5 (not clipped); 1.1 -> -1.1; .9 -> -.9
  loss, clipped, ratio = _surr([1.5, 0.5, 1.1, 0.9], 1.0)
  np.testing.assert_allclose(loss, [-1.2, -0.5, -1.1, -0.9], rtol=1e-6)
  np.testing.assert_array_equal(clipped, [True, False, False, False])
  np.testing.assert_allclose(ratio, [1.5, 0.5, 1.1, 0.9], rtol=1e-6)


def test_clip_negative_advantage():
  # A = -1: loss = -min(-ρ, -clip(ρ)) = max(ρ, clip(ρ)):
  # ρ=1.5 -> max(1.5, 1.2) = 1.5 (not clipped); ρ=.5 -> max(.5, .8) = .8 (clipped); 1.1 -> 1.1; .9 -> .9
  loss, clipped, _ = _surr([1.5, 0.5, 1.1, 0.9], -1.0)
  np.testing.assert_allclose(loss, [1.5, 0.8, 1.1, 0.9], rtol=1e-6)
  np.testing.assert_array_equal(clipped, [False, True, False, False])


def test_clip_gradients():
  # d/dlogp of -ρA = -ρA on unclipped tokens, 0 on clipped ones. A=+1, ρ=[1.5, .5] -> grads [0, -.5]
  def f(logp_new):
    return grpo.clipped_surrogate(logp_new, jnp.zeros(2), jnp.ones(2))[0].sum()

  g = jax.grad(f)(jnp.log(jnp.array([1.5, 0.5])))
  np.testing.assert_allclose(g, [0.0, -0.5], rtol=1e-6, atol=1e-7)


def test_clip_higher_dapo():
  # ρ = 1.25, A = 1: default clip_high .2 -> -1.2 (clipped); DAPO clip_high .28 -> -1.25 (inside the range)
  loss, clipped, _ = _surr([1.25], 1.0)
  np.testing.assert_allclose(loss, [-1.2], rtol=1e-6)
  assert bool(clipped[0])
  loss, clipped, _ = _surr([1.25], 1.0, clip_high=0.28)
  np.testing.assert_allclose(loss, [-1.25], rtol=1e-6)
  assert not bool(clipped[0])
  # lower clip unaffected by clip_high: ρ=.5, A=-1 -> max(.5, .8) = .8
  loss, _, _ = _surr([0.5], -1.0, clip_high=0.28)
  np.testing.assert_allclose(loss, [0.8], rtol=1e-6)


def test_safe_exp_ratio_keeps_finite_and_its_gradient():
  # log-ratio 100, past the tangent point 20: ρ = e^20 (1 + 80) = 81 e^20 (finite); A = -1 -> loss = max(ρ, 1.2) = ρ,
  # and ∂loss/∂logp_new = e^20 (the tangent's slope), where a ±20 clamp gave 0
  f = lambda lp: grpo.clipped_surrogate(lp, jnp.array([0.0]), jnp.array([-1.0]))  # noqa: E731
  loss, _, ratio = f(jnp.array([100.0]))
  np.testing.assert_allclose(ratio, [81 * math.exp(20.0)], rtol=1e-5)
  np.testing.assert_allclose(loss, [81 * math.exp(20.0)], rtol=1e-5)
  g = jax.grad(lambda lp: f(lp)[0].sum())(jnp.array([100.0]))
  np.testing.assert_allclose(g, [math.exp(20.0)], rtol=1e-5)
  # below the tangent point it is exp itself
  np.testing.assert_allclose(
    grpo.safe_exp(jnp.array([-30.0, 0.0, 3.0, 20.0])), np.exp([-30.0, 0.0, 3.0, 20.0]), rtol=1e-6
  )


def test_sequence_advantages_broadcast():
  # advantages [B] broadcast over L: ρ = 1 everywhere -> loss = -A per token
  loss, clipped, _ = grpo.clipped_surrogate(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.array([2.0, -1.0]))
  np.testing.assert_allclose(loss, [[-2.0] * 3, [1.0] * 3])
  assert clipped.shape == (2, 3) and not clipped.any()


# -------------------------------------------------------------------------------------------------- KL estimators


def test_kl_estimators_on_numbers():
  logp = jnp.log(jnp.array([0.5, 0.25, 0.3]))
  ref = jnp.log(jnp.array([0.25, 0.5, 0.3]))
  # token 0: logp - ref = ln2: k1 = .693147, k2 = .5·ln2² = .240227,
  #   k3 = e^{-ln2} + ln2 - 1 = .5 + .693147 - 1 = .193147
  # token 1: logp - ref = -ln2: k1 = -.693147, k2 = .240227, k3 = e^{ln2} - ln2 - 1 = 2 - .693147 - 1 = .306853
  # token 2: equal -> all 0
  np.testing.assert_allclose(grpo.kl_k1(logp, ref), [LN2, -LN2, 0.0], atol=1e-6)
  np.testing.assert_allclose(grpo.kl_k2(logp, ref), [0.5 * LN2**2, 0.5 * LN2**2, 0.0], atol=1e-6)
  np.testing.assert_allclose(grpo.kl_k3(logp, ref), [0.5 + LN2 - 1, 2 - LN2 - 1, 0.0], atol=1e-6)
  np.testing.assert_allclose(grpo.kl_penalty(logp, ref, "k3"), grpo.kl_k3(logp, ref))


def test_k3_nonnegative_and_direction():
  x = jax.random.normal(jax.random.key(0), (2, 64)) * 3
  assert np.all(np.asarray(grpo.kl_k3(x[0], x[1])) >= 0)
  # Direction: E_{x~π}[k] = KL(π ‖ π_ref), exactly, for k1 and k3. π = [.9, .1], ref = [.5, .5]:
  # KL(π‖ref) = .9 ln1.8 + .1 ln.2 = .529007 - .160944 = .368064, whereas KL(ref‖π) = .5 ln(.5/.9) + .5 ln5 = .510826
  pi, ref = jnp.array([0.9, 0.1]), jnp.array([0.5, 0.5])
  for est in ("k1", "k3"):
    e = jnp.sum(pi * grpo.kl_penalty(jnp.log(pi), jnp.log(ref), est))
    np.testing.assert_allclose(e, 0.9 * math.log(1.8) + 0.1 * math.log(0.2), rtol=1e-5)


# -------------------------------------------------------------------------------------------------------- entropy


def test_token_entropy():
  logits = jnp.array([[0.0, 0.0, 0.0, 0.0], [math.log(0.5), math.log(0.25), math.log(0.25), -jnp.inf]])
  # uniform over 4: ln4 = 1.386294;  [.5, .25, .25, 0]: .5 ln2 + 2·.25 ln4 = .346574 + .693147 = 1.039721
  np.testing.assert_allclose(grpo.token_entropy(logits), [math.log(4), 1.5 * LN2], rtol=1e-6)
  g = jax.grad(lambda z: grpo.token_entropy(z).sum())(logits)
  assert np.all(np.isfinite(g))
  np.testing.assert_allclose(g[0], 0.0, atol=1e-6)  # the uniform distribution is the entropy maximum


# ---------------------------------------------------------------------------------------------- loss aggregation

# Masked positions hold 100 so a masking bug shows.
PER_TOKEN = jnp.array([[1, 2, 3, 4], [5, 6, 100, 100], [7, 100, 100, 100], [100, 100, 100, 100]], jnp.float32)
MASK = jnp.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], bool)


def test_agg_token_mean():
  # (1+2+3+4+5+6+7, 7) = (28, 7) -> 4
  s, d = grpo.aggregate_loss(PER_TOKEN, MASK, "token-mean")
  np.testing.assert_allclose([s, d], [28.0, 7.0])


def test_agg_seq_mean_token_mean():
  # per-seq means 2.5, 5.5, 7 (empty row not counted): (15, 3) -> 5
  s, d = grpo.aggregate_loss(PER_TOKEN, MASK, "seq-mean-token-mean")
  np.testing.assert_allclose([s, d], [15.0, 3.0])


@pytest.mark.parametrize("mode", ["seq-mean-token-sum-norm", "seq-mean-token-scale"])
def test_agg_seq_mean_token_sum_norm(mode):
  # Dr. GRPO: Σ m ℓ = 28 over a constant B · L_max = 4 rows (the empty row counts) · 4 (padded length) = 16
  s, d = grpo.aggregate_loss(PER_TOKEN, MASK, mode)
  np.testing.assert_allclose([s, d], [28.0, 16.0])
  # fixed L_max = 8: 4 · 8 = 32
  s, d = grpo.aggregate_loss(PER_TOKEN, MASK, mode, max_len=8)
  np.testing.assert_allclose([s, d], [28.0, 32.0])
  # the divisor does not move when a row's mask is zeroed (an invalid task): 28 - 7 over the same 32
  s, d = grpo.aggregate_loss(PER_TOKEN, MASK.at[2].set(False), mode, max_len=8)
  np.testing.assert_allclose([s, d], [21.0, 32.0])


def test_finalize_zero_denominator():
  np.testing.assert_allclose(grpo.finalize(jnp.array(3.0), jnp.array(0.0)), 0.0)
  np.testing.assert_allclose(grpo.finalize(jnp.array(28.0), jnp.array(7.0)), 4.0)


def _toy_batch(b=8, t=6, d=3, v=5):
  ks = jax.random.split(jax.random.key(1), 6)
  x = jax.random.normal(ks[0], (b, t, d))
  tokens = jax.random.randint(ks[1], (b, t), 0, v)
  lengths = jnp.array([6, 1, 3, 0, 5, 2, 6, 4])[:b]  # ragged, one empty row
  mask = jnp.arange(t)[None, :] < lengths[:, None]
  logp_old = jax.random.normal(ks[2], (b, t)) * 0.3 - 1.5
  logp_ref = jax.random.normal(ks[3], (b, t)) * 0.3 - 1.5
  adv = jax.random.normal(ks[4], (b,))
  w = jax.random.normal(ks[5], (d, v))
  return x, tokens, mask, logp_old, logp_ref, adv, w


def _loss_parts(w, x, tokens, mask, logp_old, logp_ref, adv, mode):
  """Toy 'model': logits = x W; logp of the taken tokens; GRPO loss with KL and entropy."""
  logits = x @ w
  logp = jnp.take_along_axis(jax.nn.log_softmax(logits), tokens[..., None], -1)[..., 0]
  s, d, _ = grpo.grpo_loss(
    logp,
    logp_old,
    logp_ref,
    adv,
    mask,
    kl_coef=0.1,
    entropy=grpo.token_entropy(logits),
    entropy_coef=0.01,
    loss_agg_mode=mode,
    max_len=6,
  )
  return s, d


@pytest.mark.parametrize("mode", list(grpo.LOSS_AGGREGATIONS))
@pytest.mark.parametrize("num_micro", [2, 4])
def test_microbatch_accumulation_exact(mode, num_micro):
  x, tokens, mask, logp_old, logp_ref, adv, w = _toy_batch()
  full_s, full_d = _loss_parts(w, x, tokens, mask, logp_old, logp_ref, adv, mode)
  full_loss = grpo.finalize(full_s, full_d)
  full_grad = jax.grad(lambda w_: grpo.finalize(*_loss_parts(w_, x, tokens, mask, logp_old, logp_ref, adv, mode)))(w)
  # micro-batches: accumulate sums, denominators and grad(sum); divide once at the end
  tot_s, tot_d, tot_g = 0.0, 0.0, jnp.zeros_like(w)
  for idx in np.split(np.arange(8), num_micro):
    args = (x[idx], tokens[idx], mask[idx], logp_old[idx], logp_ref[idx], adv[idx], mode)
    (s, d), g = jax.value_and_grad(lambda w_: _loss_parts(w_, *args), has_aux=True)(w)
    tot_s, tot_d, tot_g = tot_s + s, tot_d + d, tot_g + g
  np.testing.assert_allclose(tot_d, full_d, rtol=1e-6)
  np.testing.assert_allclose(grpo.finalize(tot_s, tot_d), full_loss, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(tot_g / tot_d, full_grad, rtol=1e-4, atol=1e-6)
  assert float(jnp.abs(full_grad).sum()) > 0


def test_microbatch_naive_mean_of_means_differs():
  # Sanity: averaging per-micro-batch token means is NOT the full token mean on a ragged mask, so the test above can
  # fail. Rows {0,1} / {2}: (10+11)/6 = 3.5 and 7/1 = 7 -> naive 5.25, but the exact token mean is 28/7 = 4.
  s1, d1 = grpo.aggregate_loss(PER_TOKEN[:2], MASK[:2])
  s2, d2 = grpo.aggregate_loss(PER_TOKEN[2:3], MASK[2:3])
  np.testing.assert_allclose(0.5 * (s1 / d1 + s2 / d2), 5.25)
  np.testing.assert_allclose((s1 + s2) / (d1 + d2), 4.0)


# ------------------------------------------------------------------------------------------------------ GRPO loss


def test_grpo_loss_hand_example():
  # One sequence, 2 tokens; on-policy (ρ = 1): pg per token = -A = -2.
  # KL: logp = ln .5, ref = ln .25 -> k3 = .193147 per token; kl_coef .001 -> +.000193147.
  # entropy [1, 3], coef .1 -> -.1, -.3.  sum = 2·(-2) + 2·.000193147 - .4 = -4.399614, denom 2
  logp = jnp.log(jnp.array([[0.5, 0.5]]))
  ref = jnp.log(jnp.array([[0.25, 0.25]]))
  s, d, m = grpo.grpo_loss(
    logp, logp, ref, jnp.array([2.0]), jnp.ones((1, 2), bool), entropy=jnp.array([[1.0, 3.0]]), entropy_coef=0.1
  )
  k3 = 0.5 + LN2 - 1
  np.testing.assert_allclose([s, d], [-4.0 + 2 * 0.001 * k3 - 0.4, 2.0], rtol=1e-6)
  np.testing.assert_allclose(m["kl"], k3, rtol=1e-5)
  np.testing.assert_allclose(m["entropy"], 2.0)
  np.testing.assert_allclose(m["pg_loss"], -2.0)
  np.testing.assert_allclose(m["ratio_mean"], 1.0)
  np.testing.assert_allclose(m["clip_frac"], 0.0)
  np.testing.assert_allclose(m["num_tokens"], 2.0)


def test_grpo_loss_clip_fraction_metric():
  # 4 tokens, ρ = [1.5, .5, 1.1, 1.0], A = +1: only ρ = 1.5 is clipped; last token masked out.
  # clip_frac over the 3 valid tokens = 1/3; ratio_mean = (1.5+.5+1.1)/3 = 1.033333; ratio_max = 1.5
  logp_new = jnp.log(jnp.array([[1.5, 0.5, 1.1, 1.0]]))
  _, d, m = grpo.grpo_loss(logp_new, jnp.zeros((1, 4)), None, jnp.array([1.0]), jnp.array([[True, True, True, False]]))
  np.testing.assert_allclose(m["clip_frac"], 1 / 3, rtol=1e-6)
  np.testing.assert_allclose(m["ratio_mean"], 3.1 / 3, rtol=1e-6)
  np.testing.assert_allclose(m["ratio_max"], 1.5, rtol=1e-6)
  np.testing.assert_allclose(m["kl"], 0.0)
  np.testing.assert_allclose(d, 3.0)


# ------------------------------------------------------------------------------------------------------------ jit


def test_everything_jits():
  adv_fn = jax.jit(grpo.compute_advantages, static_argnames=("group_size", "method"))
  a, met = adv_fn(jnp.asarray(TWO_GROUPS.reshape(-1)), None, group_size=4, method="grpo")
  np.testing.assert_allclose(a, grpo.grpo_advantages(jnp.asarray(TWO_GROUPS)).reshape(-1), rtol=1e-6)
  np.testing.assert_allclose(met["zero_std_frac"], 0.0)
  x, tokens, mask, logp_old, logp_ref, adv, w = _toy_batch()
  logp = jnp.take_along_axis(jax.nn.log_softmax(x @ w), tokens[..., None], -1)[..., 0]
  for mode in grpo.LOSS_AGGREGATIONS:
    f = functools.partial(grpo.grpo_loss, loss_agg_mode=mode, kl_estimator="k3")
    eager = f(logp, logp_old, logp_ref, adv, mask)
    jitted = jax.jit(f)(logp, logp_old, logp_ref, adv, mask)
    np.testing.assert_allclose(jitted[0], eager[0], rtol=1e-5)
    np.testing.assert_allclose(jitted[1], eager[1])
    np.testing.assert_allclose(jitted[2]["clip_frac"], eager[2]["clip_frac"])
  np.testing.assert_allclose(jax.jit(grpo.token_entropy)(x @ w), grpo.token_entropy(x @ w), rtol=1e-6)
  # coefficients may be traced (e.g. a schedule): kl_coef = .1 traced equals the static value
  traced = jax.jit(lambda c: grpo.grpo_loss(logp, logp_old, logp_ref, adv, mask, kl_coef=c)[0])(jnp.float32(0.1))
  np.testing.assert_allclose(traced, grpo.grpo_loss(logp, logp_old, logp_ref, adv, mask, kl_coef=0.1)[0], rtol=1e-5)


def test_official_defaults():
  """The GenEnv official agent defaults (the module docstring) are the loss's and the settings tree's defaults."""
  from genenv_jax.coevolution.settings import GrpoSettings, OptimizerSettings

  official = (8, 0.2, 0.2, 0.001, "k3", "token-mean")  # G, clip low / high, KL coefficient, estimator, aggregation
  s = GrpoSettings()
  assert (s.group_size, s.clip_low, s.clip_high, s.kl_coef, s.kl_estimator, s.loss_agg) == official
  assert OptimizerSettings().lr == 1e-6
  loss = inspect.signature(grpo.grpo_loss).parameters
  keys = ("clip_low", "clip_high", "kl_coef", "kl_estimator", "loss_agg_mode")
  assert tuple(loss[k].default for k in keys) == official[1:]


def test_the_dispatch_tables_hold_the_declared_choices():
  """rl.grpo's tables are keyed on genenv_jax.choices, which the settings offer (importing them loads no rl module)."""
  assert tuple(grpo.ADVANTAGE_ESTIMATORS) == choices.ADVANTAGE_ESTIMATORS == get_args(choices.AdvantageEstimator)
  assert tuple(grpo.KL_ESTIMATORS) == choices.KL_ESTIMATORS
  assert tuple(grpo.LOSS_AGGREGATIONS) == choices.LOSS_AGGREGATIONS
  with pytest.raises(ValueError, match="not the declared choices"):
    choices.dispatch(("k1", "k2"), {"k1": grpo.kl_k1})
