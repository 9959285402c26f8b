"""Tests for genenv_jax.rl.curriculum against hand-computed values (arithmetic in the comments)."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from genenv_jax.coevolution.settings import CurriculumSettings, DomainSettings
from genenv_jax.rl import curriculum as cur
from genenv_jax.rl import grpo

C = CurriculumSettings()  # the defaults: α 0.5, β 10, k_min 0.1, λ 1
T = DomainSettings().success_threshold  # 0.5
CLIP = dict(clip_low=0.2, clip_high=0.2)

LN2 = math.log(2.0)


def _grid_rewards(g: int) -> jnp.ndarray:
  """Row k (k = 0..G) has k successes out of G, so p̂ runs over the exact grid k/G."""
  return (jnp.arange(g)[None, :] < jnp.arange(g + 1)[:, None]).astype(jnp.float32)


# ---------------------------------------------------------------------------------------------- reward, success


def test_alpha_curriculum_reward():
  # β = 10, α = .5: R(.5) = 1; R(0) = R(1) = exp(-10·.25) = exp(-2.5) = .082085; R(.375) = exp(-10·.015625) = .855345
  r = cur.alpha_curriculum_reward(jnp.array([0.0, 0.5, 1.0, 0.375]), C.alpha, C.beta)
  np.testing.assert_allclose(r, [math.exp(-2.5), 1.0, math.exp(-2.5), math.exp(-0.15625)], rtol=1e-6)
  # β = 4: R(0) = exp(-1) = .367879; α = .25: R(.25) = 1
  np.testing.assert_allclose(cur.alpha_curriculum_reward(0.0, C.alpha, beta=4.0), math.exp(-1.0), rtol=1e-6)
  np.testing.assert_allclose(cur.alpha_curriculum_reward(0.25, alpha=0.25, beta=C.beta), 1.0)


def test_success_rate_thresholds_and_masks():
  rewards = jnp.array([[1.0, 0.0, 1.0, 1.0], [0.6, 0.4, 0.5, 0.49], [1.0, 1.0, 1.0, 1.0]])
  # row 0: 3/4; row 1 with threshold .5: .6 yes, .4 no, .5 yes (≥), .49 no -> 2/4; row 2: 4/4
  np.testing.assert_allclose(cur.success_rate(rewards, T), [0.75, 0.5, 1.0])
  # strict threshold 1.0: row 1 -> 0/4
  np.testing.assert_allclose(cur.success_rate(rewards, threshold=1.0), [0.75, 0.0, 1.0])
  np.testing.assert_allclose(cur.success_rate(rewards, T, valid=jnp.array([True, True, False])), [0.75, 0.5, 0.0])


def test_env_reward_zero_for_invalid():
  # p̂ = .5 valid -> 1; p̂ = .5 invalid -> 0; p̂ = 0 valid -> exp(-2.5)
  r = cur.env_reward(jnp.array([0.5, 0.5, 0.0]), jnp.array([True, False, True]), C.alpha, C.beta)
  np.testing.assert_allclose(r, [1.0, 0.0, math.exp(-2.5)], rtol=1e-6)


# ---------------------------------------------------------------------------------------------------- band filter


def test_band_g8_only_half_passes():
  # G = 8: p̂ ∈ {0, .125, ..., 1}; |3/8 - .5| = .125 > .1, so only 4/8 passes
  keep = cur.band_mask(cur.success_rate(_grid_rewards(8), T), C.alpha, C.k_min)
  np.testing.assert_array_equal(keep, [k == 4 for k in range(9)])


def test_band_g10_three_pass():
  # G = 10: |4/10 - .5| = |6/10 - .5| = .1 ≤ .1 pass (with tolerance), |3/10 - .5| = .2 fails
  keep = cur.band_mask(cur.success_rate(_grid_rewards(10), T), C.alpha, C.k_min)
  np.testing.assert_array_equal(keep, [k in (4, 5, 6) for k in range(11)])


def test_band_tolerance_is_needed():
  # In float32, .6 - .5 = .100000024 > .1: without the tolerance the exact boundary p̂ = .6 would be dropped.
  p = cur.success_rate(_grid_rewards(10), T)
  keep_no_tol = cur.band_mask(p, C.alpha, C.k_min, tol=0.0)
  assert not bool(keep_no_tol[6])
  assert bool(cur.band_mask(p, C.alpha, C.k_min)[6])


def test_band_valid_mask_and_wider_band():
  p = jnp.array([0.5, 0.5, 0.25])
  np.testing.assert_array_equal(
    cur.band_mask(p, C.alpha, C.k_min, valid=jnp.array([True, False, True])), [True, False, False]
  )
  # k_min .25: |.25 - .5| = .25 passes
  np.testing.assert_array_equal(cur.band_mask(p, C.alpha, k_min=0.25), [True, True, True])


# ---------------------------------------------------------------------------------------------------- RWR weights


def test_rwr_weights_hand():
  r = jnp.array([1.0, 0.9, 0.5, 0.2])
  keep = jnp.array([True, True, False, False])
  # w0 = e^1 / (e^1 + e^.9) = 1 / (1 + e^-.1) = .524979; w1 = .475021; dropped -> 0
  w = cur.rwr_weights(r, keep, C.rwr_lambda)
  np.testing.assert_allclose(w, [0.524979, 0.475021, 0.0, 0.0], rtol=1e-5)
  np.testing.assert_allclose(w.sum(), 1.0, rtol=1e-6)
  # λ = 0 -> uniform over kept: [.5, .5, 0, 0]
  np.testing.assert_allclose(cur.rwr_weights(r, keep, lam=0.0), [0.5, 0.5, 0.0, 0.0])
  # λ = 2: 1 / (1 + e^-.2) = .549834
  np.testing.assert_allclose(cur.rwr_weights(r, keep, lam=2.0)[0], 0.549834, rtol=1e-5)


def test_rwr_weights_none_kept_and_large():
  w = cur.rwr_weights(jnp.array([1.0, 0.5]), jnp.array([False, False]), C.rwr_lambda)
  np.testing.assert_array_equal(w, [0.0, 0.0])
  # λR = 1000 would overflow exp without the max shift: equal kept rewards -> [.5, 0, .5]
  w = cur.rwr_weights(jnp.array([1.0, 1.0, 1.0]), jnp.array([True, False, True]), lam=1000.0)
  np.testing.assert_allclose(w, [0.5, 0.0, 0.5])


def test_curriculum_targets_g10():
  # 11 tasks over the G = 10 grid; task 5 (p̂ = .5) invalid. kept: p̂ = .4, .6 (R = exp(-10·.01) = exp(-.1) each).
  # weights: equal, .5 each; band_frac = 2 / 10 valid tasks = .2
  valid = jnp.arange(11) != 5
  out = cur.curriculum_targets(_grid_rewards(10), valid, C, T)
  np.testing.assert_array_equal(out["keep"], [k in (4, 6) for k in range(11)])
  np.testing.assert_allclose(out["weights"][jnp.array([4, 6])], [0.5, 0.5], rtol=1e-6)
  np.testing.assert_allclose(out["weights"].sum(), 1.0, rtol=1e-6)
  np.testing.assert_allclose(out["r_env"][4], math.exp(-0.1), rtol=1e-5)
  np.testing.assert_allclose(out["r_env"][5], 0.0)
  np.testing.assert_allclose(out["band_frac"], 0.2, rtol=1e-6)
  # p̂ mean over valid: (0+.1+...+1 - .5) / 10 = (5.5 - .5) / 10 = .5
  np.testing.assert_allclose(out["p_hat_mean"], 0.5, rtol=1e-6)


# ------------------------------------------------------------------------------------------------------- KL cap


@pytest.mark.parametrize(
  "kl,skip,scale,sqrt",
  [
    (0.02, 1.0, 1.0, 1.0),  # under the cap
    (0.05, 1.0, 1.0, 1.0),  # at the cap: not "> max_kl"
    (0.1, 0.0, 0.5, 0.707107),  # .05/.1 = .5, sqrt(.5) = .707107
    (0.2, 0.0, 0.25, 0.5),  # .05/.2 = .25, sqrt = .5
    (0.0, 1.0, 1.0, 1.0),
  ],
)
def test_kl_cap_scale(kl, skip, scale, sqrt):
  np.testing.assert_allclose(cur.kl_cap_scale(kl, 0.05, "skip"), skip)
  np.testing.assert_allclose(cur.kl_cap_scale(kl, 0.05, "scale"), scale, rtol=1e-6)
  np.testing.assert_allclose(cur.kl_cap_scale(kl, 0.05, "sqrt"), sqrt, rtol=1e-6)


def test_kl_cap_bad_mode():
  with pytest.raises(ValueError, match="unknown kl cap mode"):
    cur.kl_cap_scale(0.1, 0.05, "clip")


# ----------------------------------------------------------------------------------------------------- RWR loss


def test_weighted_nll_hand():
  logp = jnp.array([[-1.0, -3.0], [-5.0, -99.0]])
  mask = jnp.array([[True, True], [True, False]])
  w = jnp.array([0.25, 0.75])
  # length-normalised: task means 2 and 5: .25·2 + .75·5 = 4.25, denom .25 + .75 = 1
  np.testing.assert_allclose(cur.weighted_nll(logp, mask, w), [4.25, 1.0])
  # token sums 4 and 5: .25·4 + .75·5 = 4.75
  np.testing.assert_allclose(cur.weighted_nll(logp, mask, w, length_norm=False), [4.75, 1.0])
  # micro-batch split per task: (.5, .25) + (3.75, .75) -> 4.25 / 1
  s0, d0 = cur.weighted_nll(logp[:1], mask[:1], w[:1])
  s1, d1 = cur.weighted_nll(logp[1:], mask[1:], w[1:])
  np.testing.assert_allclose([s0, d0, s1, d1], [0.5, 0.25, 3.75, 0.75])
  np.testing.assert_allclose(grpo.finalize(s0 + s1, d0 + d1), 4.25)


def test_rwr_env_loss_with_kl():
  logp = jnp.log(jnp.full((2, 2), 0.5))
  ref = jnp.log(jnp.array([[0.25, 0.25], [0.5, 0.5]]))
  w = jnp.array([0.25, 0.75])
  # nll per task = ln2 = .693147; KL (k3): task 0 = .5 + ln2 - 1 = .193147 per token, task 1 = 0.
  # sum = ln2 + .1·(.25·.193147) = .693147 + .004829 = .697976, denom 1; kl metric (weighted) = .048287;
  # kl_all (token mean over 4 tokens) = 2·.193147 / 4 = .096574
  k3 = 0.5 + LN2 - 1
  s, d, m = cur.rwr_env_loss(logp, jnp.ones((2, 2), bool), w, ref, kl_coef=0.1)
  np.testing.assert_allclose([s, d], [LN2 + 0.1 * 0.25 * k3, 1.0], rtol=1e-6)
  np.testing.assert_allclose(m["nll"], LN2, rtol=1e-6)
  np.testing.assert_allclose(m["kl"], 0.25 * k3, rtol=1e-5)
  np.testing.assert_allclose(m["kl_all"], k3 / 2, rtol=1e-5)
  np.testing.assert_allclose(m["num_kept"], 2.0)


def test_rwr_env_loss_none_kept_no_nan():
  logp = jnp.log(jnp.full((3, 2), 0.5))
  w = cur.rwr_weights(jnp.ones(3), jnp.zeros(3, bool), C.rwr_lambda)

  def loss(lp):
    s, d, _ = cur.rwr_env_loss(lp, jnp.ones((3, 2), bool), w, jnp.log(jnp.full((3, 2), 0.25)), kl_coef=0.001)
    return grpo.finalize(s, d)

  val, g = jax.value_and_grad(loss)(logp)
  np.testing.assert_allclose(val, 0.0)
  np.testing.assert_array_equal(g, 0.0)
  assert np.all(np.isfinite(g))


def test_rwr_env_loss_gradient_direction():
  # d/dlogp_it of Σ_i w_i mean_t(-logp_it) = -w_i / n_i (no KL): w = [.25, .75], n = [2, 1] -> [-.125, -.125], [-.75, 0]
  w = jnp.array([0.25, 0.75])
  mask = jnp.array([[True, True], [True, False]])
  g = jax.grad(lambda lp: cur.rwr_env_loss(lp, mask, w, kl_coef=0.001)[0])(jnp.full((2, 2), -1.0))
  np.testing.assert_allclose(g, [[-0.125, -0.125], [-0.75, 0.0]])


# ------------------------------------------------------------------------------------------------ PG env loss


def test_pg_env_loss_advantages():
  # 3 seeds × K = 4 env samples, 1 token each, on-policy (ρ = 1) so d sum / d logp_i = -A_i.
  # seed 0: R all .5 -> A = 0.  seed 1: R = [1, 0, 0, 0] -> A = [1.5, -.5, -.5, -.5] (σ = .5).
  # seed 2: three valid tasks at p̂ = α (R_env = 1) and one parse failure (env_reward -> 0): R = [1, 1, 1, 0],
  # μ = .75, deviations [.25, .25, .25, -.75], var = (3·.0625 + .5625)/3 = .25, σ = .5 -> A = [.5, .5, .5, -1.5]
  r_env = jnp.concatenate(
    [
      jnp.full(4, 0.5),
      jnp.array([1.0, 0.0, 0.0, 0.0]),
      cur.env_reward(jnp.full(4, 0.5), jnp.array([True, True, True, False]), C.alpha, C.beta),
    ]
  )
  mask = jnp.ones((12, 1), bool)

  def total(lp):
    return cur.pg_env_loss(lp, lp, None, r_env, mask, samples_per_seed=4, kl_coef=0.0, **CLIP)

  lp = jnp.full((12, 1), -2.0)
  s, d, m = total(lp)
  g = jax.grad(lambda x: total(x)[0])(lp)[:, 0]
  want_adv = np.array([0, 0, 0, 0, 1.5, -0.5, -0.5, -0.5, 0.5, 0.5, 0.5, -1.5])
  np.testing.assert_allclose(g, -want_adv, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(d, 12.0)
  np.testing.assert_allclose(m["zero_std_frac"], 1 / 3, rtol=1e-6)


def test_pg_env_loss_padding_slots():
  # seed with K = 4 where slot 3 is padding (no generation): stats over [1, 0, 0] -> A = [1.154701, -.57735, -.57735]
  r = jnp.array([1.0, 0.0, 0.0, 7.0])
  sv = jnp.array([True, True, True, False])
  lp = jnp.zeros((4, 2))
  g = jax.grad(lambda x: cur.pg_env_loss(x, x, None, r, jnp.ones((4, 2), bool), 4, sv, kl_coef=0.0, **CLIP)[0])(lp)
  # two tokens per sequence, grad per token = -A
  np.testing.assert_allclose(g[:, 0], [-1.154701, 0.57735, 0.57735, 0.0], rtol=1e-5)
  s, d, _ = cur.pg_env_loss(lp, lp, None, r, jnp.ones((4, 2), bool), 4, sv, kl_coef=0.001, **CLIP)
  np.testing.assert_allclose(d, 6.0)  # padding slot's 2 tokens are masked out


# ------------------------------------------------------------------------------------------------------------ jit


def test_everything_jits():
  rewards = _grid_rewards(10)
  valid = jnp.arange(11) != 5
  eager = cur.curriculum_targets(rewards, valid, C, T)
  jitted = jax.jit(cur.curriculum_targets, static_argnums=(2, 3))(rewards, valid, C, T)
  for k in ("p_hat", "r_env", "keep", "weights", "band_frac"):
    np.testing.assert_allclose(jitted[k], eager[k], rtol=1e-6)
  np.testing.assert_allclose(
    jax.jit(cur.kl_cap_scale, static_argnames="mode")(0.1, 0.05, mode="sqrt"), 0.707107, rtol=1e-6
  )
  logp = jnp.log(jnp.full((2, 2), 0.5))
  ref = jnp.log(jnp.array([[0.25, 0.25], [0.5, 0.5]]))
  w = jnp.array([0.25, 0.75])
  f = functools.partial(cur.rwr_env_loss, kl_coef=0.1)
  np.testing.assert_allclose(
    jax.jit(f)(logp, jnp.ones((2, 2), bool), w, ref)[0], f(logp, jnp.ones((2, 2), bool), w, ref)[0], rtol=1e-6
  )
  r = jnp.array([1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5])
  pg = jax.jit(cur.pg_env_loss, static_argnames=("samples_per_seed",))
  zeros = jnp.zeros((8, 3))
  out = pg(zeros, zeros, zeros, r, jnp.ones((8, 3), bool), samples_per_seed=4, kl_coef=0.001, **CLIP)
  np.testing.assert_allclose(out[2]["zero_std_frac"], 0.5)
  # on-policy with ref = policy: loss = -mean(A) over tokens; GRPO advantages sum to 0 in each group -> 0
  np.testing.assert_allclose(grpo.finalize(out[0], out[1]), 0.0, atol=1e-6)
