"""Noise figures for verdicts: binomial standard errors, bootstrap confidence intervals, paired differences.

Pure NumPy functions; nothing here reads files. Sources: the binomial standard error sqrt(p (1 - p) / n) and the
percentile bootstrap (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13). A paired difference
resamples the same items (and seeds) for both arms, so the item-level noise they share cancels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Z_95 = 1.959963984540054


def binomial_se(p: float, n: int) -> float:
  """Standard error of a proportion p measured on n independent items: sqrt(p (1 - p) / n)."""
  if n <= 0:
    raise ValueError(f"binomial_se needs n >= 1 items, got n={n}")
  if not 0.0 <= p <= 1.0:
    raise ValueError(f"binomial_se needs a proportion p in [0, 1], got p={p}")
  return float(np.sqrt(p * (1.0 - p) / n))


def gain_se(p_first: float, p_last: float, n: int) -> float:
  """Standard error of p_last - p_first, two proportions on n items each, taken as independent:
  sqrt(p1 (1 - p1) / n + p2 (1 - p2) / n). Conservative for the same items (their covariance is positive)."""
  return float(np.hypot(binomial_se(p_first, n), binomial_se(p_last, n)))


def _as_matrix(x, name: str) -> np.ndarray:
  a = np.asarray(x, dtype=np.float64)
  if a.ndim == 1:
    a = a[None]
  if a.ndim != 2 or a.shape[1] == 0 or a.shape[0] == 0:
    raise ValueError(f"{name} must be per-item values shaped [items] or [seeds, items], got shape {a.shape}")
  return a


def bootstrap_ci(values, *, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
  """(mean, lo, hi): the mean of `values` ([items] or [seeds, items]) and its percentile-bootstrap CI.

  Each replicate resamples seeds with replacement, then items with replacement within each drawn seed (a two-level
  bootstrap), and takes the grand mean; lo/hi are the (1 - level)/2 and (1 + level)/2 quantiles of the replicates.
  """
  if not 0.0 < level < 1.0:
    raise ValueError(f"level must be in (0, 1), got {level}")
  if n_boot < 1:
    raise ValueError(f"n_boot must be >= 1, got {n_boot}")
  a = _as_matrix(values, "values")
  s, n = a.shape
  rng = np.random.default_rng(seed)
  seeds = rng.integers(0, s, size=(n_boot, s))
  items = rng.integers(0, n, size=(n_boot, s, n))
  reps = a[seeds[..., None], items].mean(axis=(1, 2))
  q = (1.0 - level) / 2.0
  lo, hi = np.quantile(reps, [q, 1.0 - q])
  return float(a.mean()), float(lo), float(hi)


def paired_difference(a, b, *, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> dict[str, float | bool]:
  """a - b on the same items (and seeds): mean, bootstrap CI, and whether the CI excludes 0.

  `a` and `b` are per-item scores shaped [items] or [seeds, items] with the same shape (item i of seed s is the same
  held-out item under both arms). The bootstrap resamples the paired differences a - b (`bootstrap_ci`).
  """
  x, y = _as_matrix(a, "a"), _as_matrix(b, "b")
  if x.shape != y.shape:
    raise ValueError(f"paired_difference needs a and b on the same items and seeds, got shapes {x.shape} and {y.shape}")
  mean, lo, hi = bootstrap_ci(x - y, n_boot=n_boot, level=level, seed=seed)
  return {"mean": mean, "lo": lo, "hi": hi, "level": level, "excludes_zero": bool(lo > 0.0 or hi < 0.0)}


def mean_std(values: Sequence[float]) -> tuple[float, float]:
  """(mean, sample standard deviation with ddof=1) over seeds; the std is 0.0 for a single value."""
  v = np.asarray(list(values), dtype=np.float64)
  if v.size == 0:
    raise ValueError("mean_std needs at least one value")
  return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0
