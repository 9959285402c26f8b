"""The p̂ shown in the env's warm-start prompts (warm_start.env_p_hats): "unknown" only, or every k / G as well."""

from __future__ import annotations

import numpy as np
import pytest
from coevolution_configs import arithmetic_domain

from genenv_jax.coevolution.settings import CurriculumSettings, SettingsError, WarmStartSettings
from genenv_jax.training.warm_start import env_p_hat_values, sft_batches

ALL = WarmStartSettings(env_p_hats="all")


def _domain():
  return arithmetic_domain(
    min_operands=3, max_operands=6, max_digits=1, operators="+", bound=999, num_seeds=32, num_heldout=8
  )


def _rates(domain, prompt_ids, prompt_mask):
  texts = [domain.tokenizer.decode(ids[mask.astype(bool)].tolist()) for ids, mask in zip(prompt_ids, prompt_mask)]
  return [t.split("| rate ")[1].split(" |")[0] for t in texts]


def test_every_value_a_g_rollout_estimate_takes():
  assert env_p_hat_values(WarmStartSettings(), 4) == ()
  assert env_p_hat_values(ALL, 4) == (0.0, 0.25, 0.5, 0.75, 1.0)
  assert len(env_p_hat_values(ALL, 10)) == 11
  with pytest.raises(SettingsError, match="env_p_hats = 'some': must be one of 'unknown', 'all'"):
    WarmStartSettings(env_p_hats="some")


@pytest.mark.parametrize("env_targets", ["nearby", "variation"])
def test_each_pair_appears_once_per_shown_rate_with_its_target_and_the_unknown_copy_is_unchanged(env_targets):
  domain = _domain()
  plain = sft_batches(domain, "env", 5, WarmStartSettings(env_targets=env_targets), 2, CurriculumSettings())
  shown = sft_batches(
    domain, "env", 5, WarmStartSettings(env_targets=env_targets, env_p_hats="all"), 2, CurriculumSettings()
  )
  n = len(plain["prompt_ids"])
  assert n == 32 and all(len(v) == 4 * n for v in shown.values())
  # the first copy is the run without copies, bit for bit (a default run's warm start does not change)
  assert all(np.array_equal(shown[k][:n], plain[k]) for k in plain)
  rates = _rates(domain, shown["prompt_ids"], shown["prompt_mask"])
  assert rates == ["?"] * n + ["0.0"] * n + ["0.5"] * n + ["1.0"] * n
  # the same seeds and targets in every copy: only the rate differs
  strip = lambda i: domain.tokenizer.decode(shown["prompt_ids"][i][shown["prompt_mask"][i].astype(bool)].tolist())  # noqa: E731
  assert strip(0).split("| rate")[0] == strip(n).split("| rate")[0] == strip(3 * n).split("| rate")[0]
  assert all(
    np.array_equal(shown[k][:n], shown[k][c * n : (c + 1) * n]) for k in ("target", "target_mask") for c in (1, 2, 3)
  )


def test_rate_directed_partners_move_one_level_toward_the_band():
  from genenv_jax.training.warm_start import rate_directed_partners

  difficulty = np.asarray([2, 2, 3, 3, 4, 4, 6])
  rng = np.random.default_rng(0)
  for p_hat, step in ((0.9, 1), (0.6, 0), (0.5, 0), (0.4, 0), (0.2, -1)):
    partners = rate_directed_partners(difficulty, rng, p_hat, alpha=0.5, k_min=0.1)
    moved = difficulty[partners] - difficulty
    expected = np.where(np.isin(difficulty + step, difficulty), step, 0)  # no level 5, 1 or 7: stay on the level
    assert np.array_equal(moved, expected), (p_hat, moved)
  unknown = rate_directed_partners(difficulty, rng, -1.0, alpha=0.5, k_min=0.1)
  assert np.all(np.abs(difficulty[unknown] - difficulty) <= 1)


def test_rate_directed_targets_are_harder_above_the_band_and_easier_below_it():
  domain = _domain()
  with pytest.raises(SettingsError, match="set env_p_hats = 'all'"):
    WarmStartSettings(env_targets="rate_directed")
  shown = sft_batches(
    domain, "env", 5, WarmStartSettings(env_targets="rate_directed", env_p_hats="all"), 2, CurriculumSettings()
  )
  n = 32
  assert all(len(v) == 4 * n for v in shown.values())
  rates = _rates(domain, shown["prompt_ids"], shown["prompt_mask"])
  assert rates == ["?"] * n + ["0.0"] * n + ["0.5"] * n + ["1.0"] * n
  seeds = domain.seed_tasks()
  level = {tuple(ids[m.astype(bool)]): d for ids, m, d in zip(seeds["env_ids"], seeds["env_mask"], seeds["difficulty"])}
  target_level = np.asarray([level[tuple(t[m.astype(bool)])] for t, m in zip(shown["target"], shown["target_mask"])])
  d = np.tile(seeds["difficulty"], 4)
  below, inside, above = (slice(c * n, (c + 1) * n) for c in (1, 2, 3))
  assert np.all(target_level[inside] == d[inside])
  top, bottom = d.max(), d.min()
  assert np.all((target_level[above] == d[above] + 1) | (d[above] == top))
  assert np.all((target_level[below] == d[below] - 1) | (d[below] == bottom))
  assert (target_level[above] > d[above]).any() and (target_level[below] < d[below]).any()
