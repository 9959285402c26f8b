import numpy as np
import pytest

from genenv_jax.reporting import stats


def test_binomial_se_and_gain_se():
  assert stats.binomial_se(0.5, 100) == pytest.approx(0.05)
  assert stats.binomial_se(0.0, 10) == 0.0
  assert stats.gain_se(0.5, 0.5, 100) == pytest.approx(0.05 * np.sqrt(2))
  with pytest.raises(ValueError, match="n >= 1"):
    stats.binomial_se(0.5, 0)
  with pytest.raises(ValueError, match="proportion"):
    stats.binomial_se(1.5, 10)


def test_bootstrap_ci_covers_the_mean_and_shrinks_with_more_items():
  rng = np.random.default_rng(1)
  small = (rng.random(100) < 0.6).astype(float)
  large = (rng.random(2000) < 0.6).astype(float)
  m, lo, hi = stats.bootstrap_ci(small, n_boot=500)
  assert lo <= m <= hi and lo > 0.4 and hi < 0.8
  _, lo2, hi2 = stats.bootstrap_ci(large, n_boot=500)
  assert hi2 - lo2 < (hi - lo) / 2  # width ~ 1/sqrt(n): 20x the items, about a 4.5x narrower interval
  # the bootstrap width matches the binomial SE: 95% CI about 2 * 1.96 SE wide
  se = stats.binomial_se(large.mean(), large.size)
  assert hi2 - lo2 == pytest.approx(2 * stats.Z_95 * se, rel=0.2)


def test_paired_difference_sees_a_real_gap_and_not_noise():
  rng = np.random.default_rng(2)
  base = (rng.random((3, 400)) < 0.5).astype(float)
  better = np.maximum(base, (rng.random((3, 400)) < 0.2).astype(float))  # flips ~10% of items to correct
  d = stats.paired_difference(better, base, n_boot=500)
  assert d["excludes_zero"] and d["lo"] > 0 and d["mean"] == pytest.approx((better - base).mean())
  same = stats.paired_difference(base, base[:, rng.permutation(400)], n_boot=500)
  assert not same["excludes_zero"] and same["lo"] < 0 < same["hi"]
  with pytest.raises(ValueError, match="same items"):
    stats.paired_difference(base, base[:, :10])
  with pytest.raises(ValueError, match="shaped"):
    stats.bootstrap_ci(np.zeros((2, 2, 2)))


def test_mean_std():
  assert stats.mean_std([1.0, 3.0]) == (2.0, pytest.approx(np.sqrt(2)))
  assert stats.mean_std([0.5]) == (0.5, 0.0)
  with pytest.raises(ValueError):
    stats.mean_std([])
