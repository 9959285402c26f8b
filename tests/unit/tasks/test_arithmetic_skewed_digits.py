"""The agent's extra warm-start tasks with skewed digits (warm_start.agent_skewed_tasks): tasks.arithmetic.skewed_digits
and ArithmeticDomain.skewed_digit_tasks."""

from __future__ import annotations

import re

import numpy as np
import pytest
from coevolution_configs import arithmetic_domain

from genenv_jax.coevolution.settings import CurriculumSettings, WarmStartSettings
from genenv_jax.tasks.arithmetic.skewed_digits import digit_weights, weighted_number
from genenv_jax.training.warm_start import sft_batches


def _zero_share(texts: list[str]) -> float:
  digits = "".join(re.findall(r"[0-9]", "".join(texts)))
  return digits.count("0") / len(digits)


def test_a_number_has_its_digits_and_follows_its_weights():
  rng = np.random.default_rng(0)
  w = digit_weights(rng)
  assert w.shape == (10,) and (w >= 0).all() and abs(w.sum() - 1) < 1e-12
  only_zero, only_seven = np.eye(10)[0], np.eye(10)[7]
  assert weighted_number(rng, 1, only_zero) == 0
  assert weighted_number(rng, 4, only_seven) == 7777
  lead, *rest = str(weighted_number(rng, 3, only_zero))  # a leading digit cannot be 0: drawn from 1..9 instead
  assert lead in "123456789" and rest == ["0", "0"]
  assert all(len(str(weighted_number(rng, 5, digit_weights(rng)))) == 5 for _ in range(200))
  with pytest.raises(ValueError, match="at least one digit"):
    weighted_number(rng, 0, w)


def test_skewed_tasks_follow_the_seeds_levels_avoid_the_held_out_set_and_are_zero_heavier():
  domain = arithmetic_domain(
    min_operands=3, max_operands=8, max_digits=1, operators="+", bound=999, num_seeds=400, num_heldout=60
  )
  n = 500
  tasks = domain.skewed_digit_tasks(7, n)
  assert tasks["valid"].all() and len(tasks["difficulty"]) == n
  levels = domain.seed_level_sequence()
  assert list(np.asarray(tasks["difficulty"])) == [levels[i % len(levels)] for i in range(n)]
  tok = domain.tokenizer
  texts = [
    tok.decode([int(t) for t, m in zip(row, mask) if m][:-1]) for row, mask in zip(tasks["env_ids"], tasks["env_mask"])
  ]
  assert not set(texts) & set(domain.heldout_expressions())
  gold = [str(sum(int(d) for d in x.split("+"))) for x in texts]
  answers = [
    tok.decode([int(t) for t, m in zip(row, mask) if m][:-1])
    for row, mask in zip(tasks["answer_ids"], tasks["answer_mask"])
  ]
  assert answers == gold
  # uniform digits give a zero share near 0.1; per-task Dirichlet(0.3) weights put runs of zeros in many tasks
  assert abs(_zero_share(domain.seed_expressions()) - 0.1) < 0.03
  assert sum(x.count("0") >= 3 for x in texts) > 5 * sum(x.count("0") >= 3 for x in domain.seed_expressions()) * n / 400
  again, other = domain.skewed_digit_tasks(7, n), domain.skewed_digit_tasks(8, n)
  assert all(np.array_equal(tasks[k], again[k]) for k in tasks)
  assert not np.array_equal(tasks["env_ids"], other["env_ids"])


def test_the_agent_warm_start_adds_skewed_tasks_after_the_seeds_only_when_asked():
  domain = arithmetic_domain(
    min_operands=3, max_operands=6, max_digits=1, operators="+", bound=999, num_seeds=64, num_heldout=8
  )
  seeds = domain.seed_tasks()
  plain = sft_batches(domain, "agent", 3, WarmStartSettings(), 8, CurriculumSettings())
  assert np.array_equal(plain["prompt_ids"], seeds["prompt_ids"]) and np.array_equal(
    plain["target"], seeds["answer_ids"]
  )
  more = sft_batches(domain, "agent", 3, WarmStartSettings(agent_skewed_tasks=40), 8, CurriculumSettings())
  extra = domain.skewed_digit_tasks(3, 40)
  for key, field in (("prompt_ids", "prompt_ids"), ("prompt_mask", "prompt_mask"), ("target", "answer_ids")):
    assert np.array_equal(more[key], np.concatenate([seeds[field], extra[field]]))
  assert np.array_equal(more["target_mask"][64:], extra["answer_mask"])


def test_a_domain_without_skewed_tasks_is_refused_by_name():
  class Tools:
    name = "bfcl"

    def seed_tasks(self):
      return {}

  with pytest.raises(ValueError, match="'bfcl' domain cannot: set warm_start.agent_skewed_tasks = 0"):
    sft_batches(Tools(), "agent", 0, WarmStartSettings(agent_skewed_tasks=8), 8, CurriculumSettings())
