"""The env-validity table (genenv_jax.scripts.env_validity) on hand-made cells."""

from __future__ import annotations

import numpy as np

from genenv_jax.scripts.env_validity import table


def test_one_row_per_kind_of_prompt_with_both_envs_shares():
  cells = {
    ("seed", "initial"): np.ones((2, 4), bool),
    ("seed", "trained"): np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool),
    ("generated", "initial"): np.array([[0, 1, 0, 1]], bool),
    ("generated", "trained"): np.zeros((1, 4), bool),
  }
  assert table(cells) == [
    "| prompts | initial env: valid | trained env: valid |",
    "|---|---|---|",
    "| seed | 1.000 of 8 | 0.875 of 8 |",
    "| generated | 0.500 of 4 | 0.000 of 4 |",
  ]
