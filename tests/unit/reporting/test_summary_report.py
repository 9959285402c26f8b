"""The end-of-run report (genenv_jax.reporting.summary_report): quarter means, the three phenomena's rules, the
printed text."""

import json

import numpy as np
import pytest

from genenv_jax.reporting.summary_report import (
  OLD_ROW_KEYS,
  accuracy_gain,
  format_report,
  parse_summary,
  phenomena,
  quarter_means,
  slope,
  window_gain,
)


def make_summary(p_hat, difficulty, accuracy, alpha=0.5, k_min=0.1, n=2000):
  steps = [
    {
      "step": 5 * (i + 1),
      "curriculum/p_hat_mean": p,
      "curriculum/band_frac": 0.1 * i,
      "curriculum/difficulty_mean": d,
      "agent/reward_mean": 0.5,
      "curriculum/invalid_frac": 0.0,
    }
    for i, (p, d) in enumerate(zip(p_hat, difficulty))
  ]
  evals = [{"step": 10 * i, "accuracy": a, "by_difficulty": {}, "n": n} for i, a in enumerate(accuracy)]
  return {
    "config": {"env": {"curriculum": {"alpha": alpha, "k_min": k_min}}},
    "steps": steps,
    "evals": evals,
    "final_step": 5 * len(steps),
    "wall_time_s": 12.0,
    "warm_start": {"seconds": 3.0},
  }


def test_quarter_means_and_slope():
  assert quarter_means([1, 2, 3, 4, 5, 6, 7, 8]) == (1.5, 7.5)
  assert quarter_means([4.0]) == (4.0, 4.0) and quarter_means([]) is None
  assert quarter_means([1, 2, 3]) == (1.0, 3.0)  # windows are at least one value
  assert slope([0, 1, 2], [1, 3, 5]) == pytest.approx(2.0)
  assert slope([1], [3]) == 0.0 and slope([2, 2], [1, 5]) == 0.0


def test_all_three_phenomena_hold():
  s = make_summary(
    p_hat=[0.8, 0.78, 0.7, 0.62, 0.55, 0.5, 0.52, 0.48],
    difficulty=[3, 3, 4, 5, 6, 6, 7, 7],
    accuracy=[0.5, 0.55, 0.6, 0.62, 0.64],
  )
  ph = phenomena(s)
  a, b, c = ph["a_p_hat_into_band"], ph["b_difficulty_rises"], ph["c_heldout_accuracy_rises"]
  assert a["start"] == pytest.approx(0.79) and a["end"] == pytest.approx(0.5) and a["moved"]
  assert a["late_in_band_frac"] == 1.0 and a["holds"] and a["band"] == pytest.approx([0.4, 0.6])
  assert (b["start"], b["end"], b["holds"]) == (3.0, 7.0, True)
  assert c["first"] == 0.5 and c["last"] == 0.64 and c["later_half_mean"] == pytest.approx(0.62) and c["holds"]
  assert c["slope_per_100_steps"] == pytest.approx(0.35, rel=1e-6)  # 0.0035 per step by least squares
  text = format_report(s)
  assert "(a) mean p̂" in text and "0.790 -> 0.500" in text and "held-out accuracy" in text
  assert "not shown" not in text and text.count(": shown") == 4 and "0.500 0.550 0.600 0.620 0.640" in text
  assert "binomial SE" in text and "test:" in text


def test_each_phenomenon_can_fail():
  leaves = make_summary(
    p_hat=[0.5, 0.5, 0.5, 0.5, 0.7, 0.72, 0.75, 0.8],
    difficulty=[5, 5, 5, 5, 4, 4, 3, 3],
    accuracy=[0.6, 0.5, 0.5, 0.61],
  )
  ph = phenomena(leaves)
  assert not ph["a_p_hat_into_band"]["holds"] and not ph["a_p_hat_into_band"]["moved"]
  assert not ph["b_difficulty_rises"]["holds"]
  assert not ph["c_heldout_accuracy_rises"]["holds"]  # last > first by luck, but the later half is below the first
  assert format_report(leaves).count("not shown") == 3
  # the end mean inside the band is not enough: the later half must mostly be inside too
  wobbly = make_summary(p_hat=[0.8, 0.8, 0.3, 0.9, 0.2, 0.8, 0.5, 0.5], difficulty=[1] * 8, accuracy=[0.5])
  ph = phenomena(wobbly)
  assert ph["a_p_hat_into_band"]["end"] == 0.5 and ph["a_p_hat_into_band"]["late_in_band_frac"] == 0.5
  assert not ph["a_p_hat_into_band"]["holds"]
  assert not ph["c_heldout_accuracy_rises"]["holds"]  # a single evaluation cannot rise


def test_band_comes_from_the_config_and_bad_stay_frac():
  s = make_summary(p_hat=[0.3] * 4, difficulty=[1] * 4, accuracy=[0.5, 0.6], alpha=0.3, k_min=0.05)
  assert phenomena(s)["a_p_hat_into_band"]["holds"]
  assert phenomena({"steps": [], "evals": []})["figures"] == {}
  with pytest.raises(ValueError, match="stay_frac"):
    phenomena(s, stay_frac=0.0)


def test_a_gain_inside_the_noise_is_not_shown():
  # issue 13's run: 0.575 -> 0.584 on 320 items is +0.009, inside one binomial SE (about 0.039 for the difference)
  s = make_summary(p_hat=[0.5] * 8, difficulty=[5, 5, 5, 5, 5, 5, 5, 5], accuracy=[0.575, 0.58, 0.584], n=320)
  c = phenomena(s)["c_heldout_accuracy_rises"]
  assert c["gain"] == pytest.approx(0.009) and c["se"] == pytest.approx(0.039, abs=0.001)
  assert not c["beyond_2se"] and not c["holds"]
  assert "(c)" in format_report(s) and format_report(s).count("not shown") == 2  # (b) flat difficulty, (c)
  # the same gain on no item count cannot be shown at all
  assert not accuracy_gain({"accuracy": 0.5}, {"accuracy": 0.9})["significant"]


def test_paired_items_can_show_a_gain_that_the_binomial_se_misses():
  rng = np.random.default_rng(0)
  first = (rng.random(400) < 0.5).astype(int)
  last = first.copy()
  last[np.flatnonzero(first == 0)[:24]] = 1  # +0.06: 24 items flip to correct, none flip back
  g = accuracy_gain(
    {"accuracy": first.mean(), "n": 400, "correct": first.tolist()},
    {"accuracy": last.mean(), "n": 400, "correct": last.tolist()},
  )
  assert g["gain"] == pytest.approx(0.06) and not g["beyond_2se"]  # 2 SE is about 0.07
  assert g["ci_excludes_zero"] and g["significant"] and g["ci95"][0] > 0


def test_window_gain_noise():
  flat_noisy = [5, 1, 9, 5, 5, 3, 7, 6]
  w = window_gain(flat_noisy)
  assert w["window"] == 2 and w["gain"] == pytest.approx(3.5) and w["se"] > w["gain"] / 2
  s = make_summary(p_hat=[0.5] * 8, difficulty=flat_noisy, accuracy=[0.5, 0.5])
  assert not phenomena(s)["b_difficulty_rises"]["holds"]
  assert window_gain([]) is None
  short = make_summary(p_hat=[0.5] * 4, difficulty=[1, 2, 3, 4], accuracy=[0.5, 0.5])  # windows of one step
  assert not phenomena(short)["b_difficulty_rises"]["holds"]


def test_a2_needs_a_rise_beyond_the_noise_and_an_end_of_at_least_0_4():
  base = make_summary(p_hat=[0.5] * 8, difficulty=[3] * 8, accuracy=[0.5, 0.5])
  for row, v in zip(base["steps"], [0.2, 0.22, 0.3, 0.35, 0.4, 0.42, 0.45, 0.47]):
    row["curriculum/band_frac"] = v
  a2 = phenomena(base)["a2_tasks_in_band_rise"]
  assert a2["start"] == pytest.approx(0.21) and a2["end"] == pytest.approx(0.46) and a2["holds"]
  for row, v in zip(base["steps"], [0.2, 0.22, 0.3, 0.35, 0.3, 0.32, 0.35, 0.37]):  # rises, but ends below 0.4
    row["curriculum/band_frac"] = v
  assert not phenomena(base)["a2_tasks_in_band_rise"]["holds"]
  for row, v in zip(base["steps"], [0.1, 0.6, 0.2, 0.5, 0.6, 0.1, 0.5, 0.3]):  # ends above 0.4 inside its noise
    row["curriculum/band_frac"] = v
  a2 = phenomena(base)["a2_tasks_in_band_rise"]
  assert a2["end"] == pytest.approx(0.4) and a2["gain"] < 2 * a2["se"] and not a2["holds"]
  assert "(a2) tasks whose own p̂ is in band" in format_report(base) and "not shown" in format_report(base)


def test_the_later_half_mean_p_hat_is_split_by_the_env_prompts_seed_source():
  s = make_summary(p_hat=[0.6] * 8, difficulty=[5] * 8, accuracy=[0.5])
  for i, row in enumerate(s["steps"]):
    row["curriculum/p_hat_mean_from_base_seeds"] = 0.9 if i < 6 else 0.7  # later half (rows 4-7): 0.9, 0.9, 0.7, 0.7
    if i != 7:  # a step with no task written from a generated seed has no figure
      row["curriculum/p_hat_mean_from_generated_seeds"] = 0.5
  a = phenomena(s)["a_p_hat_into_band"]
  assert a["late_mean_from_base_seeds"] == pytest.approx(0.8)
  assert a["late_mean_from_generated_seeds"] == pytest.approx(0.5)
  assert "later-half mean p̂: 0.800 on tasks written from base seeds, 0.500 on tasks written from generated ones" in (
    format_report(s)
  )
  assert "later-half mean p̂:" not in format_report(make_summary(p_hat=[0.6] * 8, difficulty=[5] * 8, accuracy=[0.5]))


def test_with_per_item_scores_the_paired_ci_alone_decides():
  """+0.075 on 400 items clears 2 binomial SE (about 0.070), but 200 items flip up and 170 flip back: the paired CI
  over the items reaches below 0, so the gain is not shown; the 2 SE figure is still reported."""
  first = np.zeros(400, int)
  first[:200] = 1
  last = np.ones(400, int)
  last[:170] = 0
  g = accuracy_gain(
    {"accuracy": first.mean(), "n": 400, "correct": first.tolist()},
    {"accuracy": last.mean(), "n": 400, "correct": last.tolist()},
  )
  assert g["gain"] == pytest.approx(0.075) and g["beyond_2se"] and g["se"] == pytest.approx(0.0351, abs=1e-3)
  assert g["ci95"][0] < 0 < g["ci95"][1] and not g["ci_excludes_zero"]
  assert not g["significant"] and "2 SE does not decide" in g["test"]
  # without per-item scores the 2 SE test is the only noise estimate, and it decides
  assert accuracy_gain({"accuracy": 0.5, "n": 400}, {"accuracy": 0.575, "n": 400})["significant"]


def test_a_summary_written_before_the_step_names_is_read_under_them():
  """summary.json rows used short names of their own until the step's metric names became the one name (issue 33);
  such a file, its saved phenomena too, reads as if written today."""
  today = make_summary(
    p_hat=[0.8, 0.7, 0.6, 0.5, 0.5, 0.5, 0.5, 0.5], difficulty=[3, 3, 4, 5, 6, 6, 7, 7], accuracy=[0.5]
  )
  for row in today["steps"]:
    row.update({"curriculum/p_hat_mean_from_base_seeds": 0.6, "curriculum/replay_p_hat_mean": 0.4})
  today["phenomena"] = phenomena(today)
  new_to_old = {new: old for old, new in OLD_ROW_KEYS.items()}
  old_rows = [{new_to_old.get(k, k): v for k, v in row.items()} for row in today["steps"]]
  assert set(old_rows[0]) == {
    "step",
    "p_hat_mean",
    "band_frac",
    "difficulty_mean",
    "agent_reward",
    "invalid_frac",
    "p_hat_mean_base_seeded",
    "replay_p_hat_mean",
  }
  old_figures = {new_to_old[k]: v for k, v in today["phenomena"]["figures"].items()}
  before = {**today, "steps": old_rows, "phenomena": {**today["phenomena"], "figures": old_figures}}
  read = parse_summary(json.dumps(before))
  assert read == json.loads(json.dumps(today))
  assert format_report(read) == format_report(today) and "agent reward (training tasks)" in format_report(read)
  assert parse_summary('{"config": {}}') == {"config": {}}  # nothing to rename


def test_the_perf_line_gives_the_median_step_the_first_span_and_the_peak_memory():
  from genenv_jax.reporting.summary_report import perf_line

  s = {"perf": {"step_s": [[5, 9.0], [10, 2.0], [15, 3.0], [20, 2.5]], "host_peak_memory_gib": 5.25}}
  line = perf_line(s)
  assert "a step 2.75 s (median of 4 logged spans; the first, compile included, 9.00 s)" in line
  assert "peak resident memory 5.25 GiB" in line
  assert perf_line({}) is None and perf_line({"perf": {"step_s": [], "host_peak_memory_gib": 0.0}}) is None
  assert "time and memory" in format_report({**s, "final_step": 20, "evals": [], "steps": []})


def test_a_run_is_finished_when_its_final_step_reaches_total_steps():
  from genenv_jax.reporting.summary_report import finished

  assert finished({"final_step": 8, "config": {"total_steps": 8}})
  assert not finished({"final_step": 5, "config": {"total_steps": 8}})  # stopped early (a preemption)
  assert not finished({"config": {"total_steps": 8}, "steps": [{"step": 3}]})  # still running: no final_step
  assert not finished({"final_step": 8})  # no saved config: nothing says it is done
