"""The held-out evaluation's record: every item counts in exactly one level, including half-level difficulties."""

import numpy as np

from genenv_jax.training.loop import heldout_record


def test_half_level_difficulties_each_count_once_in_their_integer_level():
  # BFCL scores difficulty (calls + arguments) / 2: 1.0 and 1.5 are both level 1; before, the 1.5 items replaced the
  # 1.0 items under the key "1" and the counts summed to fewer than n.
  correct = np.array([1, 0, 1, 1, 0, 0, 1, 0])
  difficulty = np.array([1.0, 1.0, 1.5, 1.5, 1.5, 2.0, 2.5, 3.0], np.float32)
  r = heldout_record(correct, difficulty)
  assert r["n"] == 8 and sum(r["n_by_difficulty"].values()) == 8
  assert r["n_by_difficulty"] == {"1": 5, "2": 2, "3": 1}
  assert r["by_difficulty"] == {"1": 3 / 5, "2": 1 / 2, "3": 0.0}
  assert r["accuracy"] == 4 / 8
  assert r["correct"] == [1, 0, 1, 1, 0, 0, 1, 0]


def test_integer_difficulties_keep_their_keys():
  r = heldout_record(np.array([True, False, True]), np.array([2.0, 11.0, 2.0]))
  assert r["by_difficulty"] == {"2": 1.0, "11": 0.0} and r["n_by_difficulty"] == {"2": 2, "11": 1}
