"""The sweep report (genenv_jax.compare) on synthetic run summaries: figures over seeds, paired gaps, files."""

import gzip
import json
import os

import numpy as np
import pytest

from genenv_jax import compare


def fake_summary(seed, acc_first, acc_last, p_hat, n=300, order_seed=100):
  rng = np.random.default_rng(seed)
  # the first k items of a per-seed order are correct at the end: the same order nests one variant's correct items
  # inside another's (a consistent gap); a different order_seed scatters them (item noise)
  order = np.random.default_rng(order_seed + seed).permutation(n)
  correct = np.zeros(n, int)
  correct[order[: round(acc_last * n)]] = 1
  steps = [
    {
      "step": t,
      "curriculum/p_hat_mean": p + 0.01 * rng.standard_normal(),
      "curriculum/difficulty_mean": 3 + 0.01 * t,
      "curriculum/band_frac": 0.2,
    }
    for t, p in zip(range(1, 9), p_hat)
  ]
  evals = [
    {"step": 0, "accuracy": acc_first, "n": n, "by_difficulty": {"2": acc_first, "3": acc_first}},
    {
      "step": 8,
      "accuracy": float(correct.mean()),
      "n": n,
      "correct": correct.tolist(),
      "by_difficulty": {"2": 0.9, "3": 0.5},
    },
  ]
  return {
    "config": {"total_steps": 8, "env": {"curriculum": {"alpha": 0.5, "k_min": 0.1}}},
    "steps": steps,
    "evals": evals,
    "final_step": 8,
  }


def write_runs(root, table):
  for (variant, seed), summary in table.items():
    d = root / "runs" / f"{variant}_s{seed}"
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(summary))


def test_report_figures_gaps_and_files(tmp_path):
  inband, off = [0.7, 0.6, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [0.9] * 8
  table = {}
  for s in range(3):
    table[("coevolve", s)] = fake_summary(s, 0.5, 0.70 + 0.01 * s, inband)
    table[("random", s)] = fake_summary(s, 0.5, 0.60 + 0.01 * s, off)
    # a gap inside the noise: other items, a gap that changes sign over seeds
    table[("static", s)] = fake_summary(s, 0.5, 0.70 + 0.01 * s + (0.01, -0.01, 0.005)[s], off, order_seed=7)
    table[("random_pooled", s)] = fake_summary(s, 0.5, 0.80 + 0.01 * s, off)  # ahead of GenEnv on every seed
  write_runs(tmp_path, table)
  text = compare.write_report(str(tmp_path), n_boot=300)
  rep = json.loads((tmp_path / "report.json").read_text())
  co = rep["variants"]["coevolve"]
  assert co["seeds"] == [0, 1, 2]
  assert co["final_accuracy"]["mean"] == pytest.approx(0.71, abs=0.002)
  assert co["final_accuracy"]["std"] == pytest.approx(0.01, abs=0.002)
  assert co["later_half_accuracy"]["mean"] == pytest.approx(co["final_accuracy"]["mean"])  # 2 evals: the last
  assert co["p_hat_in_band_shown_seeds"] == 3 and rep["variants"]["random"]["p_hat_in_band_shown_seeds"] == 0
  assert co["final_accuracy_by_difficulty"]["2"]["mean"] == pytest.approx(0.9)
  assert co["trajectories"]["curriculum/p_hat_mean"]["steps"] == list(range(1, 9))
  g = rep["gaps"]
  assert g["random"]["mean"] == pytest.approx(0.10, abs=0.002) and g["random"]["ci95"][0] > 0
  assert g["random"]["verdict"] == "shown"
  assert g["static"]["verdict"] == "not shown" and g["static"]["ci95"][0] < 0 < g["static"]["ci95"][1]
  assert g["random_pooled"]["mean"] == pytest.approx(-0.10, abs=0.002) and g["random_pooled"]["ci95"][1] < 0
  assert g["random_pooled"]["verdict"] == "not shown: reversed, random_pooled ahead beyond the noise"
  assert "| random | 3 | +0.100" in text and "not shown" in text
  for name in (
    "report.md",
    "report_p_hat_mean.png",
    "report_difficulty_mean.png",
    "report_band_frac.png",
    "report_accuracy_by_difficulty.png",
  ):
    assert (tmp_path / name).stat().st_size > 0, name


def test_a_gzipped_summary_reads_as_the_plain_one(tmp_path):
  """A sweep kept packed (summary.json.gz) loads as its plain form does, and a plain summary.json beside one wins."""
  table = {("coevolve", s): fake_summary(s, 0.5, 0.7, [0.5] * 8) for s in range(2)}
  write_runs(tmp_path / "plain", table)
  write_runs(tmp_path / "packed", table)
  for s in range(2):
    d = tmp_path / "packed" / "runs" / f"coevolve_s{s}"
    with gzip.open(d / "summary.json.gz", "wt") as f:
      f.write((d / "summary.json").read_text())
    (d / "summary.json").unlink()
  assert compare.load_runs(str(tmp_path / "packed")) == compare.load_runs(str(tmp_path / "plain"))
  with gzip.open(tmp_path / "packed" / "runs" / "coevolve_s0" / "summary.json.gz", "wt") as f:
    f.write("not json")
  (tmp_path / "packed" / "runs" / "coevolve_s0" / "summary.json").write_text(json.dumps(table[("coevolve", 0)]))
  assert (
    compare.load_runs(str(tmp_path / "packed"))["coevolve"][0]
    == compare.load_runs(str(tmp_path / "plain"))["coevolve"][0]
  )


def test_runs_written_before_the_step_names_read_the_same(tmp_path):
  """A summary.json from before the step's metric names (issue 33: `p_hat_mean`, `band_frac`, ... in its rows) is read
  under today's names (summary_report.OLD_ROW_KEYS): the report is the same as on today's files."""
  from genenv_jax.reporting.summary_report import OLD_ROW_KEYS

  today = {
    (v, s): fake_summary(s, 0.5, acc + 0.01 * s, [0.6, 0.5] * 4)
    for v, acc in (("coevolve", 0.7), ("random", 0.6))
    for s in range(2)
  }
  new_to_old = {new: old for old, new in OLD_ROW_KEYS.items()}
  before = {
    key: {**summary, "steps": [{new_to_old.get(k, k): v for k, v in row.items()} for row in summary["steps"]]}
    for key, summary in today.items()
  }
  assert "band_frac" in before[("coevolve", 0)]["steps"][0]
  write_runs(tmp_path / "today", today)
  write_runs(tmp_path / "before", before)
  assert compare.load_runs(str(tmp_path / "before")) == compare.load_runs(str(tmp_path / "today"))
  old, new = (compare.build_report(str(tmp_path / d), n_boot=50)["variants"] for d in ("before", "today"))
  assert old == new and new["coevolve"]["band_frac_last_quarter"]["mean"] == pytest.approx(0.2)


def test_missing_scores_and_bad_inputs(tmp_path):
  s = fake_summary(0, 0.5, 0.7, [0.5] * 8)
  del s["evals"][-1]["correct"]
  write_runs(tmp_path, {("coevolve", 0): s, ("grpo", 0): fake_summary(0, 0.5, 0.6, [0.5] * 8)})
  rep = compare.build_report(str(tmp_path), n_boot=100)
  assert rep["gaps"]["grpo"]["verdict"] == "not shown" and "no paired" in rep["gaps"]["grpo"]["test"]
  with pytest.raises(ValueError, match="baseline variant 'nope'"):
    compare.build_report(str(tmp_path), baseline="nope")
  with pytest.raises(FileNotFoundError, match="run genenv_jax.sweep"):
    compare.load_runs(os.path.join(str(tmp_path), "empty"))


def test_later_half_scores_band_windows_and_the_claimed_order(tmp_path):
  s = fake_summary(0, 0.5, 0.7, [0.5] * 8)
  last = s["evals"][-1]
  s["evals"] += [{**last, "step": 9, "correct": [1 - c for c in last["correct"]]}, {**last, "step": 10}]
  half = compare.item_scores(s, "later_half")  # the later 2 of the 3 scored evaluations: each item right once
  assert set(half) == {0.5} and compare.item_scores(s, "final") == [float(c) for c in s["evals"][-1]["correct"]]
  with pytest.raises(ValueError, match="window"):
    compare.item_scores(s, "best")
  steps = [{"step": t, "curriculum/band_frac": v} for t, v in enumerate([0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4], 1)]
  assert compare._windows({"steps": steps}, "curriculum/band_frac") == pytest.approx((0.1, 0.35, 0.4))
  table = {}
  for seed in range(3):
    table[("coevolve", seed)] = fake_summary(seed, 0.5, 0.80 + 0.01 * seed, [0.5] * 8)
    table[("random", seed)] = fake_summary(seed, 0.5, 0.70 + 0.01 * seed, [0.5] * 8)
    table[("static", seed)] = fake_summary(seed, 0.5, 0.70 + 0.01 * seed + (0.01, -0.01, 0.005)[seed], [0.5] * 8, 7)
  write_runs(tmp_path, table)
  rep = compare.build_report(str(tmp_path), n_boot=200)
  chain = {(o["better"], o["worse"]): o["verdict"] for o in rep["ordering"]}
  assert chain == {("coevolve", "random"): "shown", ("random", "static"): "not shown"}
  assert rep["variants"]["coevolve"]["band_frac_later_half"]["mean"] == pytest.approx(0.2)
  assert "The claimed order" in compare.markdown(rep)


def test_a2_against_random_needs_every_seed_and_twice_random():
  variants = {
    "coevolve": {"seeds": [0, 1], "band_frac_last_quarter": {"mean": 0.45}, "tasks_in_band_shown_seeds": 2},
    "random": {"seeds": [0, 1], "band_frac_last_quarter": {"mean": 0.2}},
  }
  assert compare.tasks_in_band_vs_random(variants)["verdict"] == "shown"
  variants["random"]["band_frac_last_quarter"]["mean"] = 0.25  # less than twice
  assert compare.tasks_in_band_vs_random(variants)["verdict"] == "not shown"
  variants["random"]["band_frac_last_quarter"]["mean"] = 0.1
  variants["coevolve"]["tasks_in_band_shown_seeds"] = 1  # one seed misses rule (a2)
  assert compare.tasks_in_band_vs_random(variants)["verdict"] == "not shown"
  assert compare.tasks_in_band_vs_random({"coevolve": variants["coevolve"]}) is None


@pytest.mark.parametrize("sign", [1, -1], ids=["ahead", "behind"])
def test_a_gap_whose_ci_straddles_zero_is_not_shown_whatever_the_seed_spread(tmp_path, sign):
  """Two seeds with the same +-0.01 gap each (seed std 0, the gap far above it) but on scattered items (a CI about
  +-0.05 wide): the CI decides, so "not shown", neither way; the seed std is still reported."""
  table = {}
  for seed in range(2):
    table[("coevolve", seed)] = fake_summary(seed, 0.5, 0.70 + sign * 0.01, [0.5] * 8)
    table[("random", seed)] = fake_summary(seed, 0.5, 0.70, [0.5] * 8, order_seed=7)
  write_runs(tmp_path, table)
  rep = compare.build_report(str(tmp_path), n_boot=400)
  for g in (rep["gaps"]["random"], rep["gaps_later_half"]["random"], rep["ordering"][0]):
    assert g["mean"] == pytest.approx(sign * 0.01, abs=1e-9) and g["per_seed"] == pytest.approx([sign * 0.01] * 2)
    assert g["seed_std"] == pytest.approx(0.0, abs=1e-9) and abs(g["mean"]) > g["seed_std"]
    assert g["ci95"][0] < 0 < g["ci95"][1]
    assert g["verdict"] == "not shown", g
    assert "seed std does not decide" in g["test"]


def test_several_sweep_directories_pool_into_units_and_count_b_c_and_forgetting(tmp_path):
  """Two sweep directories (the same seeds under two ISAs): each run is a unit DIRNAME/sSEED, gaps pair by unit over
  both, rules (b) and (c) are counted per variant, and a run ending more than 2 binomial SE below its start is named."""
  for isa, shift in (("avx2", 0.0), ("sse", 0.005)):
    table = {}
    for seed in (0, 2, 10):
      table[("coevolve", seed)] = fake_summary(seed, 0.5, 0.70 + shift + 0.01 * seed / 10, [0.5] * 8)
      table[("random", seed)] = fake_summary(seed, 0.5, 0.60 + shift, [0.5] * 8)
    # one GenEnv run forgets: 0.5 -> 0.40 on 300 items is 3.5 SE (SE = sqrt(0.25 / 300) = 0.029) below its start
    if isa == "sse":
      table[("coevolve", 2)] = fake_summary(2, 0.5, 0.40, [0.5] * 8)
    write_runs(tmp_path / isa, table)
  dirs = [str(tmp_path / "avx2"), str(tmp_path / "sse")]
  runs = compare.load_runs(dirs)
  assert sorted(runs["coevolve"], key=compare.unit_order) == [
    "avx2/s0", "avx2/s2", "avx2/s10", "sse/s0", "sse/s2", "sse/s10"
  ]  # fmt: skip
  text = compare.write_report(dirs, n_boot=200, plots=False, out=str(tmp_path / "both"))
  rep = json.loads((tmp_path / "both" / "report.json").read_text())
  co = rep["variants"]["coevolve"]
  assert co["seeds"] == ["avx2/s0", "avx2/s2", "avx2/s10", "sse/s0", "sse/s2", "sse/s10"]
  assert co["ends_below_start"] == ["sse/s2"] and rep["variants"]["random"]["ends_below_start"] == []
  # (b): the fake difficulty rises on every run; (c): 0.5 -> 0.7 on 300 items is beyond 2 SE, 0.5 -> 0.4 is not
  assert (co["b_shown_seeds"], co["c_shown_seeds"], co["bc_shown_seeds"]) == (6, 5, 5)
  assert rep["gaps"]["random"]["seeds"] == co["seeds"] and len(rep["gaps"]["random"]["per_seed"]) == 6
  assert "| coevolve | 6 | 6 | 5 | 5 | 1: sse/s2 |" in text
  assert compare.ends_below_start({"evals": [{"accuracy": 0.5, "n": 300}]}) is None  # one evaluation


def test_several_directories_need_distinct_names_and_an_output(tmp_path):
  for d in ("a/sweep", "b/sweep"):
    write_runs(tmp_path / d, {("coevolve", 0): fake_summary(0, 0.5, 0.7, [0.5] * 8)})
  with pytest.raises(ValueError, match="distinct base names"):
    compare.load_runs([str(tmp_path / "a/sweep"), str(tmp_path / "b/sweep")])
  with pytest.raises(ValueError, match="--out=DIR"):
    compare.write_report([str(tmp_path / "a/sweep"), str(tmp_path / "b/sweep")])


def test_a_run_still_going_or_stopped_early_is_left_out(tmp_path):
  """summary.json is rewritten at every step: a running run's (no final_step) or a preempted one's (final_step below
  total_steps) is no result, and the report leaves it out."""
  running = fake_summary(1, 0.5, 0.2, [0.5] * 8)
  del running["final_step"]
  stopped = {**fake_summary(2, 0.5, 0.2, [0.5] * 8), "final_step": 5}
  write_runs(
    tmp_path,
    {("coevolve", 0): fake_summary(0, 0.5, 0.7, [0.5] * 8), ("coevolve", 1): running, ("coevolve", 2): stopped},
  )
  assert list(compare.load_runs(str(tmp_path))["coevolve"]) == [0]


def _with_eval_at(summary, step, correct):
  """summary with one more per-item evaluation at `step`, inserted in step order."""
  ev = {"step": step, "accuracy": float(np.mean(correct)), "n": len(correct), "correct": list(correct)}
  summary["evals"] = sorted(summary["evals"] + [ev], key=lambda e: e["step"])
  return summary


def test_gap_at_each_evaluation_says_when_it_appears(tmp_path):
  table = {}
  for s in range(3):
    co = fake_summary(s, 0.5, 0.70, [0.5] * 8)
    rnd = fake_summary(s, 0.5, 0.60, [0.9] * 8)
    same = fake_summary(s, 0.5, 0.60, [0.5] * 8)["evals"][-1]["correct"]  # step 4: both score the same items
    table[("coevolve", s)] = _with_eval_at(co, 4, same)
    table[("random", s)] = _with_eval_at(rnd, 4, same)
  table[("random", 0)] = _with_eval_at(table[("random", 0)], 6, same)  # a step the other runs lack: left out
  write_runs(tmp_path, table)
  text = compare.write_report(str(tmp_path), n_boot=300, plots=False)
  rows = json.loads((tmp_path / "report.json").read_text())["gaps_by_step"]["random"]
  assert [r["step"] for r in rows] == [4, 8]  # step 0 (the shared start) and step 6 (not in every run) left out
  assert rows[0]["mean"] == 0 and rows[0]["verdict"] == "not shown"
  assert rows[1]["mean"] == pytest.approx(0.10, abs=0.002) and rows[1]["verdict"] == "shown"
  assert "at each evaluation" in text and "| random | 8 | 3 | +0.100" in text
  assert compare.item_scores(table[("random", 0)], 6) == [float(c) for c in same]
  assert compare.item_scores(table[("random", 1)], 6) is None
  with pytest.raises(ValueError, match="an evaluation step"):
    compare.item_scores(table[("random", 1)], "middle")


def test_cost_of_the_runs_from_their_perf_records(tmp_path):
  table = {}
  for s in range(2):
    co = fake_summary(s, 0.5, 0.7, [0.5] * 8)
    # a compiling first span and a resumed run's second compile: the median per step ignores both
    co["perf"] = {
      "step_s": [[1, 60.0], [2, 10.0 + s], [3, 10.0 + s], [4, 45.0], [5, 10.0 + s]],
      "host_peak_memory_gib": 6.5,
    }
    co["wall_time_s"], co["warm_start"] = 1200.0 + 60 * s, {"seconds": 500.0}
    table[("coevolve", s)] = co
    table[("random", s)] = fake_summary(s, 0.5, 0.6, [0.9] * 8)  # an older run: no perf record
  write_runs(tmp_path, table)
  text = compare.write_report(str(tmp_path), n_boot=200, plots=False)
  variants = json.loads((tmp_path / "report.json").read_text())["variants"]
  assert variants["coevolve"]["step_seconds"]["mean"] == pytest.approx(10.5)
  assert variants["coevolve"]["wall_time_s"]["mean"] == pytest.approx(1230.0)
  assert variants["coevolve"]["host_peak_memory_gib"]["mean"] == pytest.approx(6.5)
  assert "step_seconds" not in variants["random"] and "wall_time_s" not in variants["random"]
  assert "| coevolve | 10.5 ± 0.7 | 20.5 ± 0.7 | 500 ± 0 | 6.50 ± 0.00 |" in text
  assert "| random | " not in text.split("What the runs cost")[1].split("\n\n")[1]
