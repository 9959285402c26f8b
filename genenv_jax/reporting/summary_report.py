"""The end-of-run report: do the paper's three co-evolution phenomena show in a run's summary.json?

GenEnv (arXiv 2512.19682) reports, and issue 3 asks the demo to show:
  (a) the mean agent success rate p̂ on generated tasks moves from where it starts into the α band
      |p̂ - α| <= k_min and stays there;
  (b) the difficulty of generated tasks rises as the agent improves;
  (c) the agent's held-out accuracy rises.

Rules (pure functions of the summary dict that `train.train` writes; nothing here reads files). A step row's keys
are the step's metric names, the TensorBoard tags (training/log_tags.py); `parse_summary` reads a summary.json written
before they were (with `OLD_ROW_KEYS`). Each phenomenon is
"shown" only when it clears its noise (issue 13); otherwise "not shown", with the figures and the test:
  start / end of a per-step figure = the mean over the first / last quarter of the steps (summary.json has a row
      for every step; at least one row);
  (a) shown when the end mean is inside the band |p̂ - α| <= k_min and at least `stay_frac` (default 0.8) of the
      steps in the later half have their p̂ inside it ("stays there"); `moved` says whether it started outside;
      the later half's mean p̂ is also given apart for tasks written from base seeds and from generated ones (when
      the rows have them), to show which kind of env prompt holds it out of the band;
  (a2) the fraction of the env's tasks whose own p̂ lies in the band rises (end - start > 2 SE, as in (b)) and ends
      at `BAND_FRAC_MIN` (0.4) or more: the env writes tasks at the agent's frontier, not a mix of too-easy and
      too-hard ones whose mean p̂ happens to sit near α (with G = 10 a task whose true rate is 0.5 lands in the band
      about 66% of the time, the ceiling); comparing it with GenEnv-Random needs a sweep (genenv_jax.compare);
  (b) shown when end - start > 2 SE, SE = sqrt(var_start / w + var_end / w) over the two quarter windows of w >= 2
      steps (fewer than 8 steps give no noise estimate: not shown);
  (c) shown when the gain g = last - first held-out accuracy clears its noise: when the evaluations carry per-item
      `correct` scores, only when the paired bootstrap 95% CI of g over the items lies above 0
      (`stats.paired_difference`); the binomial 2 SE, SE = sqrt(p1 (1-p1) / n + p2 (1-p2) / n) on n items
      (`stats.gain_se`), is then reported beside it and does not decide (one test, not whichever passes); without
      per-item scores, when g > 2 SE; and the later-half mean is above the first (one lucky evaluation is not a
      rise). The least-squares slope over all evaluations is reported too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from genenv_jax.reporting import metric_table as mt
from genenv_jax.reporting import stats

STAY_FRAC = 0.8
N_SE = 2.0
BAND_FRAC_MIN = 0.4
STEP_FIGURES = mt.PLOTS  # the per-step figures the summary reports, each under its plot's title
# summary.json's step-row keys before they were the step's metric names (issue 33), old -> new: `parse_summary` reads
# an older run's file (a sweep report, a resumed run) under today's names.
OLD_ROW_KEYS = mt.OLD_ROW_KEYS


def parse_summary(text: str) -> dict[str, Any]:
  """A summary.json's dict with its step rows, and the figures of its saved phenomena, under today's names
  (`OLD_ROW_KEYS`), whichever version wrote it."""
  summary = json.loads(text)
  renamed = lambda row: {OLD_ROW_KEYS.get(k, k): v for k, v in row.items()}  # noqa: E731
  if "steps" in summary:
    summary["steps"] = [renamed(row) for row in summary["steps"]]
  if isinstance(summary.get("phenomena"), dict) and "figures" in summary["phenomena"]:
    summary["phenomena"]["figures"] = renamed(summary["phenomena"]["figures"])
  return summary


def quarter_means(values: Sequence[float]) -> tuple[float, float] | None:
  """(mean of the first quarter, mean of the last quarter) of `values`, each at least one value; None if empty."""
  values = [float(v) for v in values]
  if not values:
    return None
  w = max(1, len(values) // 4)
  return sum(values[:w]) / w, sum(values[-w:]) / w


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
  """Least-squares slope dy/dx; 0.0 for fewer than two distinct x."""
  n = len(xs)
  if n < 2:
    return 0.0
  mx, my = sum(xs) / n, sum(ys) / n
  sxx = sum((x - mx) ** 2 for x in xs)
  return 0.0 if sxx == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def window_gain(values: Sequence[float]) -> dict[str, float] | None:
  """End minus start quarter means of a per-step figure and its SE sqrt(var_start / w + var_end / w) (ddof=1)."""
  v = np.asarray([float(x) for x in values], dtype=np.float64)
  if v.size == 0:
    return None
  w = max(1, v.size // 4)
  first, last = v[:w], v[-w:]
  var = lambda x: float(x.var(ddof=1)) if x.size > 1 else 0.0  # noqa: E731
  se = float(np.sqrt(var(first) / w + var(last) / w))
  return {
    "start": float(first.mean()),
    "end": float(last.mean()),
    "gain": float(last.mean() - first.mean()),
    "se": se,
    "window": w,
  }


def accuracy_gain(first: dict[str, Any], last: dict[str, Any]) -> dict[str, Any]:
  """The held-out gain last - first with its noise (module docstring rule (c)); 'n' items per evaluation.

  `significant` is the paired CI's verdict when both evaluations carry per-item `correct` scores, else the 2 SE test's.
  """
  p1, p2 = float(first["accuracy"]), float(last["accuracy"])
  n = int(min(first.get("n", 0), last.get("n", 0)))
  out: dict[str, Any] = {"gain": p2 - p1, "n": n}
  test = "no item count recorded: no noise estimate, cannot be shown"
  if n > 0:
    out["se"] = stats.gain_se(p1, p2, n)
    out["beyond_2se"] = bool(out["gain"] > N_SE * out["se"])
    test = f"gain > {N_SE:g} binomial SE ({N_SE:g} x {out['se']:.3f} on n={n})"
  if "correct" in first and "correct" in last and len(first["correct"]) == len(last["correct"]) > 0:
    ci = stats.paired_difference(last["correct"], first["correct"], n_boot=1000)
    out["ci95"] = [ci["lo"], ci["hi"]]
    out["ci_excludes_zero"] = bool(ci["lo"] > 0)
    test = f"paired bootstrap 95% CI over items [{ci['lo']:+.3f}, {ci['hi']:+.3f}] above 0 (2 SE does not decide)"
  out["significant"] = bool(out["ci_excludes_zero"] if "ci95" in out else out.get("beyond_2se"))
  out["test"] = test
  return out


def _band(summary: dict[str, Any]) -> tuple[float, float] | None:
  """(α, k_min) of the run's saved settings (summary.json's config), never a default; None when it holds none."""
  cur = summary.get("config", {}).get("env", {}).get("curriculum", {})
  return (float(cur["alpha"]), float(cur["k_min"])) if "alpha" in cur and "k_min" in cur else None


def phenomena(summary: dict[str, Any], stay_frac: float = STAY_FRAC) -> dict[str, Any]:
  """The three phenomena with their numbers (module docstring rules); a figure with no data is left out."""
  if not 0 < stay_frac <= 1:
    raise ValueError(f"stay_frac must be in (0, 1], got {stay_frac}")
  steps, evals = summary.get("steps", []), summary.get("evals", [])
  band = _band(summary)
  out: dict[str, Any] = {"window": "first vs last quarter of the steps"}
  if band is not None:
    out["alpha"], out["k_min"] = alpha, k_min = band
  figures = {}
  for key in STEP_FIGURES:
    pair = quarter_means([r[key] for r in steps if key in r])
    if pair is not None:
      figures[key] = {"start": pair[0], "end": pair[1]}
  out["figures"] = figures

  p_hat = [r[mt.P_HAT_MEAN] for r in steps if mt.P_HAT_MEAN in r]
  if p_hat and band is not None:  # rule (a) needs the run's own band
    inside = lambda p: abs(p - alpha) <= k_min + 1e-9  # noqa: E731
    late = p_hat[len(p_hat) // 2 :]
    late_frac = sum(inside(p) for p in late) / len(late)
    start, end = figures[mt.P_HAT_MEAN]["start"], figures[mt.P_HAT_MEAN]["end"]
    out["a_p_hat_into_band"] = {
      "start": start,
      "end": end,
      "band": [alpha - k_min, alpha + k_min],
      "moved": not inside(start),
      "late_in_band_frac": late_frac,
      "stay_frac": stay_frac,
      "holds": inside(end) and late_frac >= stay_frac - 1e-9,
    }
    late_steps = steps[len(steps) // 2 :]
    for source in mt.SEED_SOURCES:
      key = mt.from_seeds(mt.P_HAT_MEAN, source)
      values = [r[key] for r in late_steps if key in r]
      if values:
        out["a_p_hat_into_band"][mt.from_seeds("late_mean", source)] = sum(values) / len(values)
  kept = window_gain([r[mt.BAND_FRAC] for r in steps if mt.BAND_FRAC in r])
  if kept is not None:
    enough = kept["window"] >= 2
    out["a2_tasks_in_band_rise"] = {
      **kept,
      "min_end": BAND_FRAC_MIN,
      "test": f"end - start > {N_SE:g} SE of the quarter-window means and end >= {BAND_FRAC_MIN:g}"
      if enough
      else "under 8 steps: no noise estimate, cannot be shown",
      "holds": enough and kept["gain"] > N_SE * kept["se"] and kept["end"] >= BAND_FRAC_MIN,
    }
  d = window_gain([r[mt.DIFFICULTY_MEAN] for r in steps if mt.DIFFICULTY_MEAN in r])
  if d is not None:
    enough = d["window"] >= 2  # a one-step window has no variance: no noise estimate, so no verdict
    out["b_difficulty_rises"] = {
      **d,
      "test": f"end - start > {N_SE:g} SE of the quarter-window means"
      if enough
      else "under 8 steps: no noise estimate, cannot be shown",
      "holds": enough and d["gain"] > N_SE * d["se"] and d["gain"] > 0,
    }
  if evals:
    acc = [float(e["accuracy"]) for e in evals]
    later = acc[len(acc) // 2 :] if len(acc) > 1 else acc
    later_mean = sum(later) / len(later)
    gain = (
      accuracy_gain(evals[0], evals[-1])
      if len(evals) > 1
      else {"significant": False, "test": "a single evaluation cannot rise"}
    )
    out["c_heldout_accuracy_rises"] = {
      "first": acc[0],
      "last": acc[-1],
      "later_half_mean": later_mean,
      "best": max(acc),
      "slope_per_100_steps": 100.0 * slope([float(e["step"]) for e in evals], acc),
      "steps": [int(e["step"]) for e in evals],
      "accuracy": acc,
      **gain,
      "holds": len(acc) > 1 and gain["significant"] and acc[-1] > acc[0] and later_mean > acc[0],
    }
  return out


def finished(summary: dict[str, Any]) -> bool:
  """Whether a run's summary.json is a finished run's: the loop writes `final_step` at the end, at or past the
  config's total_steps. A running run's summary (rewritten at every step) has none; a run stopped early (a
  preemption) ends below total_steps. The sweep starts again whatever is not finished, and the sweep report reads
  nothing else."""
  final, total = summary.get("final_step"), summary.get("config", {}).get("total_steps")
  return final is not None and total is not None and final >= total


def perf_line(summary: dict[str, Any]) -> str | None:
  """A step's time (median over the logged spans, and the first span's, which holds the compile) and the run's peak
  resident memory, from summary.json's `perf`; None for a run that recorded neither."""
  perf = summary.get("perf") or {}
  spans = [float(sec) for _, sec in perf.get("step_s", [])]
  parts = []
  if spans:
    parts.append(
      f"a step {float(np.median(spans)):.2f} s (median of {len(spans)} logged spans; the first, compile included, "
      f"{spans[0]:.2f} s)"
    )
  if perf.get("host_peak_memory_gib"):
    parts.append(f"peak resident memory {perf['host_peak_memory_gib']:.2f} GiB (the largest of the run's processes)")
  return "time and memory: " + "; ".join(parts) if parts else None


def format_report(summary: dict[str, Any]) -> str:
  """The printed end-of-run summary: wall time, the three phenomena (each "shown" / "not shown" with its test)."""
  ph = summary.get("phenomena") or phenomena(summary)
  yes = lambda d: "shown" if d["holds"] else "not shown"  # noqa: E731
  lines = [
    f"finished at step {summary.get('final_step')} in {summary.get('wall_time_s', 0.0):.0f} s "
    f"(warm start {summary.get('warm_start', {}).get('seconds', 0.0):.0f} s)",
  ]
  perf = perf_line(summary)
  lines += [perf] if perf else []
  lines.append(f"the paper's three phenomena ({ph['window']}):")
  a = ph.get("a_p_hat_into_band")
  if a:
    lo, hi = a["band"]
    lines.append(
      f"  (a) mean p̂ on generated tasks    {a['start']:.3f} -> {a['end']:.3f}   "
      f"band [{lo:.2f}, {hi:.2f}]; {'started outside, ' if a['moved'] else 'started inside, '}"
      f"in band at {100 * a['late_in_band_frac']:.0f}% of the later half's steps "
      f"(test: end in band and >= {100 * a.get('stay_frac', STAY_FRAC):.0f}%): {yes(a)}"
    )
    sources = [
      f"{a[k]:.3f} on tasks written from {name}"
      for k, name in (("late_mean_from_base_seeds", "base seeds"), ("late_mean_from_generated_seeds", "generated ones"))
      if k in a
    ]
    if sources:
      lines.append(f"      later-half mean p̂: {', '.join(sources)}")
  a2 = ph.get("a2_tasks_in_band_rise")
  if a2:
    lines.append(
      f"  (a2) tasks whose own p̂ is in band {a2['start']:.3f} -> {a2['end']:.3f}   SE {a2['se']:.3f} "
      f"(test: {a2['test']}): {yes(a2)}"
    )
  b = ph.get("b_difficulty_rises")
  if b:
    se = f"{b['se']:.2f}" if "se" in b else "?"
    lines.append(
      f"  (b) generated-task difficulty     {b['start']:.2f} -> {b['end']:.2f}   SE {se} "
      f"(test: {b.get('test', 'end > start')}): {yes(b)}"
    )
  c = ph.get("c_heldout_accuracy_rises")
  if c:
    trail = " ".join(f"{x:.3f}" for x in c["accuracy"])
    lines.append(
      f"  (c) held-out accuracy             {c['first']:.3f} -> {c['last']:.3f}   later-half mean "
      f"{c['later_half_mean']:.3f}, slope {c['slope_per_100_steps']:+.3f}/100 steps "
      f"(test: {c.get('test', 'none')}): {yes(c)}"
    )
    lines.append(f"      evaluations at steps {c['steps'][0]}..{c['steps'][-1]}: {trail}")
  shown = (mt.P_HAT_MEAN, mt.BAND_FRAC, mt.DIFFICULTY_MEAN)  # (a), (a2), (b) above
  others = [k for k in STEP_FIGURES if k not in shown and k in ph["figures"]]
  for key in others:
    f = ph["figures"][key]
    lines.append(f"  {STEP_FIGURES[key]:<34} {f['start']:.3f} -> {f['end']:.3f}")
  return "\n".join(lines)
