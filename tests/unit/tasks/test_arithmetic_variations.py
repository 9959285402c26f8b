"""Local variations of arithmetic tasks (the env's warm-start targets with warm_start.env_targets = "variation")."""

from __future__ import annotations

import re

import numpy as np
import pytest
from coevolution_configs import arithmetic_domain

from genenv_jax.coevolution.settings import CurriculumSettings, WarmStartSettings
from genenv_jax.tasks.arithmetic import host
from genenv_jax.tasks.arithmetic.variations import variation
from genenv_jax.training.warm_start import sft_batches


def _edit_distance_in_numbers(a: str, b: str) -> int:
  """Levenshtein distance between the two expressions' number lists."""
  x, y = re.findall(r"[0-9]+", a), re.findall(r"[0-9]+", b)
  d = np.arange(len(y) + 1)
  for i in range(1, len(x) + 1):
    prev, d[0] = d.copy(), i
    for j in range(1, len(y) + 1):
      d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (x[i - 1] != y[j - 1]))
  return int(d[-1])


def test_single_digit_sums_change_by_one_edit_and_at_most_one_level():
  bounds = dict(min_operands=3, max_operands=6, max_digits=1, bound=999, operators="+")
  rng = np.random.default_rng(0)
  kinds = {-1: 0, 0: 0, 1: 0}
  for text in ["1+2+3", "9+9+9+9+9+9", "4+0+7+2"] * 100:
    out = variation(text, rng, **bounds)
    expr = host.evaluate_text(out, 6, 1, 999, "+", 3)
    assert expr is not None, out
    delta = host.difficulty_of(expr) - host.difficulty_of(host.evaluate_text(text, 6, 1, 999, "+", 3))
    kinds[delta] += 1
    assert _edit_distance_in_numbers(text, out) <= 1
  # every kind of edit occurs; the grammar's ends forbid deleting from 3 numbers and inserting into 6
  assert min(kinds.values()) > 30, kinds


def test_mixed_operators_stay_in_the_grammar_and_fall_back_to_the_seed():
  rng = np.random.default_rng(1)
  for text in ["12*3-45", "7-8+9", "100*9*9"]:
    for _ in range(50):
      out = variation(text, rng, min_operands=2, max_operands=4, max_digits=3, bound=999, operators="+-*")
      assert host.evaluate_text(out, 4, 3, 999, "+-*", 2) is not None, (text, out)
  # no draw left: the seed itself comes back
  assert variation(
    "12*3-45", rng, min_operands=2, max_operands=4, max_digits=3, bound=999, operators="+-*", tries=0
  ) == ("12*3-45")


def test_env_warm_start_pairs_a_seed_with_its_variation_deterministically():
  domain = arithmetic_domain(
    min_operands=3, max_operands=6, max_digits=1, operators="+", bound=999, num_seeds=64, num_heldout=8
  )
  a = sft_batches(domain, "env", 3, WarmStartSettings(env_targets="variation"), 8, CurriculumSettings())
  b = sft_batches(domain, "env", 3, WarmStartSettings(env_targets="variation"), 8, CurriculumSettings())
  assert all(np.array_equal(a[k], b[k]) for k in a)
  tok, seeds = domain.tokenizer, domain.seed_expressions()
  targets = [
    tok.decode([int(t) for t, m in zip(row, mask) if m][:-1]) for row, mask in zip(a["target"], a["target_mask"])
  ]
  assert all(_edit_distance_in_numbers(s, t) <= 1 for s, t in zip(seeds, targets))
  assert sum(s != t for s, t in zip(seeds, targets)) > 0.9 * len(seeds)
  prompts = [
    tok.decode([int(t) for t, m in zip(row, mask) if m]) for row, mask in zip(a["prompt_ids"], a["prompt_mask"])
  ]
  assert all(p.endswith(f"Seed: {s} | rate ? | New task:") for p, s in zip(prompts, seeds))


def test_unknown_env_targets_and_domains_without_variations_are_refused():
  domain = arithmetic_domain()
  with pytest.raises(ValueError, match="env_targets = 'copy'"):  # the settings check it
    sft_batches(domain, "env", 0, WarmStartSettings(env_targets="copy"), 8, CurriculumSettings())

  class NoEdits:
    name = "bfcl"

    def seed_tasks(self):
      return {}

  with pytest.raises(ValueError, match="'bfcl' domain cannot"):
    sft_batches(NoEdits(), "env", 0, WarmStartSettings(env_targets="variation"), 8, CurriculumSettings())
