"""Numbers whose digits follow a skewed distribution: the agent's extra warm-start data that cover atypical sums.

Why: the family's numbers have uniform digits, so a sum of single digits holds three or more zeros rarely, and an
agent warm-started on the seeds alone fails such sums (greedy accuracy 0.96-1.00 with 0-2 zeros, 0.00-0.12 with 7 or
more, on every unit measured). Trained to hold the agent's success rate in the α band, the env found that weakness on
some units and wrote `0+0+0`, `4+0+0+0+0+0+0` instead of longer sums (docs/EXPERIMENTS.md, "Env KL 0.2 with a
3,000-step agent warm start"). A pretrained LLM, which the warm start stands in for, has seen every digit pattern;
so with `warm_start.agent_skewed_tasks = N` the agent's warm start also trains on N tasks at the seeds' levels whose
digits each follow that task's own distribution w ~ Dirichlet(SKEW_CONCENTRATION · 1_10): runs of any one digit,
zeros among them, appear (E[w_0^3] = 0.015: 1.5% of three-digit sums are `0+0+0`, against 0.1% at uniform digits).
"""

from __future__ import annotations

import numpy as np

SKEW_CONCENTRATION = 0.3  # < 1: most of a task's digit mass on one to three digits


def digit_weights(rng: np.random.Generator) -> np.ndarray:
  """One task's digit distribution: w ~ Dirichlet(SKEW_CONCENTRATION · 1_10) over 0..9, float64 [10], sums to 1."""
  return rng.dirichlet(np.full(10, SKEW_CONCENTRATION))


def weighted_number(rng: np.random.Generator, digits: int, weights: np.ndarray) -> int:
  """A number of exactly `digits` digits, each drawn from `weights` over 0..9; a leading digit (digits > 1) from
  `weights` restricted to 1..9, or uniformly from 1..9 where `weights` puts no mass there."""
  if digits < 1:
    raise ValueError(f"a number has at least one digit, got digits={digits}")
  drawn = rng.choice(10, size=digits, p=weights)
  if digits > 1:
    lead = np.asarray(weights[1:], np.float64)
    lead = lead / lead.sum() if lead.sum() > 0 else np.full(9, 1 / 9)
    drawn[0] = 1 + rng.choice(9, p=lead)
  return int("".join(str(d) for d in drawn))
