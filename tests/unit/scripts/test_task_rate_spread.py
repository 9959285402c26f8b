"""The per-level spread of task success rates (genenv_jax.scripts.task_rate_spread), on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from genenv_jax.scripts.task_rate_spread import band_probability, level_table


def test_band_probability_by_hand():
  # G = 10: k in {4, 5, 6} passes |k/10 - 0.5| <= 0.1; (210 + 252 + 210) / 1024
  assert band_probability(np.array([0.5]), 10, 0.5, 0.1)[0] == pytest.approx(672 / 1024)
  # G = 8: only k = 4 passes (issue 13: "only p̂ = 0.5 passes")
  assert band_probability(np.array([0.5]), 8, 0.5, 0.1)[0] == pytest.approx(70 / 256)
  assert band_probability(np.array([0.0, 1.0]), 10, 0.5, 0.1).tolist() == [0.0, 0.0]


def test_level_table_separates_a_bimodal_level_from_a_tight_one():
  difficulty = np.array([3] * 4 + [7] * 4)
  rate = np.array([0.5, 0.5, 0.5, 0.5, 0.0, 1.0, 0.0, 1.0])  # same mean 0.5, one level all in the middle
  tight, bimodal = level_table(difficulty, rate, group_size=10, alpha=0.5, k_min=0.1)
  assert (tight["level"], tight["tasks"], tight["mean"], tight["std"]) == (3, 4, 0.5, 0.0)
  assert tight["near_alpha"] == 1.0 and tight["expected_in_band"] == pytest.approx(672 / 1024)
  assert (bimodal["mean"], bimodal["std"], bimodal["near_alpha"], bimodal["expected_in_band"]) == (0.5, 0.5, 0.0, 0.0)
