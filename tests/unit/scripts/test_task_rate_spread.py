"""The per-level spread of task success rates (genenv_jax.scripts.task_rate_spread), on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from genenv_jax.scripts.task_rate_spread import (
  answer_explained,
  band_probability,
  in_band_again,
  level_table,
  settling_level,
  shuffle_operands,
)


def test_band_probability_by_hand():
  # G = 10: k in {4, 5, 6} passes |k/10 - 0.5| <= 0.1; (210 + 252 + 210) / 1024
  assert band_probability(np.array([0.5]), 10, 0.5, 0.1)[0] == pytest.approx(672 / 1024)
  # G = 8: only k = 4 passes (issue 13: "only p̂ = 0.5 passes")
  assert band_probability(np.array([0.5]), 8, 0.5, 0.1)[0] == pytest.approx(70 / 256)
  assert band_probability(np.array([0.0, 1.0]), 10, 0.5, 0.1).tolist() == [0.0, 0.0]


def test_level_table_separates_a_bimodal_level_from_a_tight_one():
  difficulty = np.array([3] * 4 + [7] * 4)
  half = np.tile([1, 0], 10)  # 20 answers, 5 of every 10 right: every group's p̂ is 0.5
  outcomes = np.stack([half] * 4 + [np.zeros(20), np.ones(20)] * 2)  # same mean 0.5, one level all in the middle
  tight, bimodal = level_table(difficulty, outcomes, group_size=10, alpha=0.5, k_min=0.1)
  assert (tight["level"], tight["tasks"], tight["mean"], tight["std"]) == (3, 4, 0.5, 0.0)
  assert tight["near_alpha"] == 1.0 and tight["expected_in_band"] == pytest.approx(672 / 1024)
  assert tight["in_band_again"] == 1.0
  assert (bimodal["mean"], bimodal["std"], bimodal["near_alpha"], bimodal["expected_in_band"]) == (0.5, 0.5, 0.0, 0.0)
  assert np.isnan(bimodal["in_band_again"])  # no group ever landed in the band
  assert np.isnan(level_table(difficulty, outcomes[:, :19], 10, 0.5, 0.1)[0]["in_band_again"])  # < 2 G samples


def test_in_band_again_by_hand():
  # G = 2, band {0.5}. Task A's three groups: p̂ 0.5, 0.5, 1 (k = 2); task B's: 1, 0, 0.5 (k = 1).
  # Ordered pairs of distinct groups whose first is in the band: A (0,1) (0,2) (1,0) (1,2), B (2,0) (2,1);
  # the second is in the band for A's (0,1) and (1,0) only: 2 / 6.
  outcomes = np.array([[1, 0, 0, 1, 1, 1], [1, 1, 0, 0, 1, 0]])
  assert in_band_again(outcomes, group_size=2, alpha=0.5, k_min=0.0) == pytest.approx(1 / 3)
  assert in_band_again(outcomes[:, :5], group_size=2, alpha=0.5, k_min=0.0) == 1.0  # 2 groups: only A's pair
  with pytest.raises(ValueError, match="at least 2 x G = 4 samples"):
    in_band_again(outcomes[:, :3], group_size=2, alpha=0.5, k_min=0.0)


def test_the_env_settles_on_the_level_with_the_most_tasks_in_the_band_whatever_its_mean():
  # level 5: all-or-nothing tasks (mean 0.5, none ever in the band); level 6: every task's rate 0.65
  difficulty = np.array([5] * 4 + [6] * 4)
  rate = np.array([0.0, 1.0, 0.0, 1.0] + [0.65] * 4)
  at = settling_level(difficulty, rate, group_size=10, alpha=0.5, k_min=0.1)
  assert (at["level"], at["mean"]) == (6, pytest.approx(0.65))  # mean 0.65: outside α ± 0.1, yet the best level
  assert at["expected_in_band"] == pytest.approx(band_probability(np.array([0.65]), 10, 0.5, 0.1)[0])
  assert settling_level(difficulty, rate, 10, 0.3, 0.1)["level"] == 6  # the same level for another α
  # a level whose rates all sit at α wins over it
  tight = settling_level(np.array([6, 7]), np.array([0.65, 0.5]), 10, 0.5, 0.1)
  assert (tight["level"], tight["mean"]) == (7, 0.5)


def test_shuffle_operands_keeps_each_rows_digits_and_everything_else():
  digit_ids = tuple(range(10, 20))  # digit d is id 10 + d; 1 is '+', 0 is pad
  row = np.array([0, 0, 5, 13, 1, 17, 1, 17, 1, 19, 6])  # pad pad "C" 3 + 7 + 7 + 9 "="
  rows = np.stack([row] * 200)
  out = shuffle_operands(rows, digit_ids, np.random.default_rng(0))
  assert out.shape == rows.shape and (rows == np.stack([row] * 200)).all()  # the input is not modified
  slots = np.isin(row, digit_ids)
  assert (out[:, ~slots] == row[~slots]).all()
  assert all(sorted(r[slots].tolist()) == [13, 17, 17, 19] for r in out)
  assert len({tuple(r) for r in out}) == 12  # 4! / 2! orderings, every one drawn


def test_answer_explained_by_hand():
  # Answers 5, 5, 7, 7, 9: groups {0.2, 0.4} and {0.6, 1.0} (9 is alone, so outside the pooled variance).
  rate = np.array([0.2, 0.4, 0.6, 1.0, 0.5])
  within = ((0.1**2 + 0.1**2) + (0.2**2 + 0.2**2)) / 2  # one degree of freedom per group
  want = 1 - within / rate.var(ddof=1)
  assert answer_explained(rate, np.array([5, 5, 7, 7, 9])) == pytest.approx(want)
  assert answer_explained(rate, np.array([[5], [5], [7], [7], [9]])) == pytest.approx(want)  # spec rows
  assert answer_explained(np.array([0.1, 0.1, 0.9, 0.9]), np.array([1, 1, 2, 2])) == 1.0
  assert np.isnan(answer_explained(rate, np.arange(5)))  # no answer repeats
  assert np.isnan(answer_explained(np.full(4, 0.5), np.array([1, 1, 2, 2])))  # nothing to explain
  table = level_table(np.array([3] * 5), np.repeat(rate[:, None], 10, axis=1), 10, 0.5, 0.1, np.array([5, 5, 7, 7, 9]))
  assert table[0]["answer_explained"] == pytest.approx(want)
  assert np.isnan(
    level_table(np.array([3] * 5), np.repeat(rate[:, None], 10, axis=1), 10, 0.5, 0.1)[0]["answer_explained"]
  )
