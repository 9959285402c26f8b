"""The sweep report: per variant, mean ± standard deviation over seeds, and GenEnv minus each ablation with a CI.

  python -m genenv_jax.compare DIR [--baseline=VARIANT]
  python -m genenv_jax.compare DIR1 DIR2 ... --out=DIR [--baseline=VARIANT]

Reads DIR/runs/VARIANT_sSEED/summary.json (genenv_jax.sweep; or summary.json.gz, a sweep kept packed) of the
finished runs (summary_report.finished) and writes DIR/report.md, DIR/report.json and PNG plots (matplotlib)
DIR/report_*.png. With several sweep directories (the same seeds under two XLA ISAs, say, each a stand-in for another
machine), every run is one unit named
`DIRNAME/sSEED` (DIRNAME the directory's base name, which must differ between them), units pair across variants by
that name, and the report goes to --out. Per variant:
  - final held-out accuracy (last evaluation) and later-half accuracy (mean of the later half of the evaluations),
    each as mean ± sample std (ddof=1) over seeds;
  - the p̂ trajectory (mean over seeds per step) and the fraction of the later half's steps with p̂ in the band
    |p̂ - α| <= k_min, and the verdict of summary_report rule (a) per seed;
  - the generated-difficulty trajectory;
  - final held-out accuracy per difficulty level.
  - the fraction of the env's tasks whose own p̂ is in the band, over the first quarter, the later half and the last
    quarter of the steps, and the generated difficulty (first and last quarter).
  - on how many units rules (b) and (c) of summary_report hold, each and both, and how many runs end with held-out
    accuracy more than 2 binomial SE, 2·sqrt(p₀(1 - p₀)/n), below their first evaluation p₀ (the forgetting check).
  - what the runs cost, where every run recorded it: seconds per step (the median of summary.json's logged spans),
    wall time per run, the warm start's seconds and the peak resident memory (`cost_figures`).
GenEnv (`--baseline`) minus each ablation: per-item scores paired by seed and item ([seeds, items]), through
`stats.paired_difference` (two-level bootstrap over seeds and items), on the final evaluation's 0/1 scores and on
each item's mean score over the later half of the evaluations. The gap is "shown" only when its paired 95% CI (the
two-level bootstrap: seeds, then items within each seed) lies above 0. The seed spread (std over seeds of the per-seed
gaps) is reported beside it and does not decide: with two or three seeds it is itself noise, so "the gap exceeds the
seed std" calls gaps shown whose CI reaches below 0. The claimed order GenEnv > GenEnv-Random > Static is tested link
by link the same way, on the later-half scores. A gap whose CI lies below 0 says so ("not shown: reversed, ABLATION
ahead beyond the noise"). The same gap at each evaluation step that every run of both variants has (`gaps_by_step`)
says at what budget a gap appears and whether it holds once it has; each step is a test of its own, so one step's
"shown" among many can be chance (about 1 in 20 where there is no gap).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from absl import app, flags

from genenv_jax import cli
from genenv_jax.reporting import metric_table as mt
from genenv_jax.reporting import stats
from genenv_jax.reporting.summary_report import finished, parse_summary, phenomena

TRAJECTORIES = mt.FRESH_PLOTS  # summary.json row keys (the step's metric names) -> plot title: the env's tasks


Unit = int | str  # a seed (one sweep directory), or "DIRNAME/sSEED" (several)


def load_runs(workdirs: str | Sequence[str]) -> dict[str, dict[Unit, dict[str, Any]]]:
  """{variant: {unit: summary}} from DIR/runs/VARIANT_sSEED/summary.json (`parse_summary`: an older run's rows under
  today's names); runs without a summary, or not finished (summary_report.finished), are left out. One directory:
  units are the seeds; several: "DIRNAME/sSEED" (module docstring)."""
  if isinstance(workdirs, str):
    return _load_dir(workdirs)
  names = [os.path.basename(os.path.normpath(d)) for d in workdirs]
  if len(set(names)) != len(names):
    raise ValueError(f"sweep directories must have distinct base names (they name the units), got {list(workdirs)}")
  out: dict[str, dict[Unit, dict[str, Any]]] = {}
  for name, d in zip(names, workdirs):
    for variant, by_seed in _load_dir(d).items():
      out.setdefault(variant, {}).update({f"{name}/s{seed}": r for seed, r in by_seed.items()})
  return out


def unit_order(unit: Unit) -> tuple[str, int]:
  """Sort key of a unit: by directory name, then by seed as a number ("x/s2" before "x/s10")."""
  name, _, seed = str(unit).rpartition("/s")
  return name, int(seed)


def _load_dir(workdir: str) -> dict[str, dict[Unit, dict[str, Any]]]:
  root = os.path.join(workdir, "runs")
  if not os.path.isdir(root):
    raise FileNotFoundError(f"no runs/ under {workdir}: run genenv_jax.sweep with --workdir={workdir} first")
  out: dict[str, dict[Unit, dict[str, Any]]] = {}
  for name in sorted(os.listdir(root)):
    variant, sep, seed = name.rpartition("_s")
    if not sep or not seed.isdigit():
      continue
    text = _summary_text(os.path.join(root, name))
    if text is None:
      continue
    summary = parse_summary(text)
    if finished(summary):
      out.setdefault(variant, {})[int(seed)] = summary
  if not out:
    raise FileNotFoundError(f"no finished runs (runs/VARIANT_sSEED/summary.json) under {workdir}")
  return out


def _summary_text(run_dir: str) -> str | None:
  """The text of a run's summary.json, or of summary.json.gz where only that is kept (a sweep kept in the repository:
  a demo run's summary is 200 KB raw, 16 KB gzipped); None when the run has neither."""
  path = os.path.join(run_dir, "summary.json")
  if os.path.exists(path):
    with open(path) as f:
      return f.read()
  if os.path.exists(path + ".gz"):
    with gzip.open(path + ".gz", "rt") as f:
      return f.read()
  return None


def _ms(values: Sequence[float]) -> dict[str, float]:
  m, s = stats.mean_std(values)
  return {"mean": m, "std": s, "n_seeds": len(values)}


def trajectory(summaries: Sequence[dict[str, Any]], key: str) -> dict[str, list[float]]:
  """Mean and std over seeds of a per-step figure at the steps that every seed recorded."""
  per = [{int(r["step"]): float(r[key]) for r in s.get("steps", []) if key in r} for s in summaries]
  steps = sorted(set.intersection(*(set(p) for p in per))) if per else []
  vals = np.array([[p[t] for t in steps] for p in per]) if steps else np.zeros((0, 0))
  return {
    "steps": steps,
    "mean": vals.mean(0).tolist() if steps else [],
    "std": vals.std(0, ddof=1).tolist() if steps and len(per) > 1 else [0.0] * len(steps),
  }


def variant_figures(by_seed: dict[int, dict[str, Any]]) -> dict[str, Any]:
  """The per-variant block of the report (module docstring)."""
  seeds = sorted(by_seed, key=unit_order)
  runs = [by_seed[s] for s in seeds]
  out: dict[str, Any] = {"seeds": seeds}
  evals = [r.get("evals", []) for r in runs]
  if all(evals):
    accs = [[float(e["accuracy"]) for e in ev] for ev in evals]
    out["final_accuracy"] = _ms([a[-1] for a in accs])
    out["first_accuracy"] = _ms([a[0] for a in accs])
    out["later_half_accuracy"] = _ms([float(np.mean(a[len(a) // 2 :])) for a in accs])
    levels = sorted({d for ev in evals for d in ev[-1].get("by_difficulty", {})}, key=lambda d: int(d))
    out["final_accuracy_by_difficulty"] = {
      d: _ms([ev[-1]["by_difficulty"][d] for ev in evals if d in ev[-1].get("by_difficulty", {})]) for d in levels
    }
  band = [_windows(r, mt.BAND_FRAC) for r in runs]
  if all(band):
    out["band_frac_first_quarter"] = _ms([b[0] for b in band])
    out["band_frac_later_half"] = _ms([b[1] for b in band])
    out["band_frac_last_quarter"] = _ms([b[2] for b in band])
  difficulty = [_windows(r, mt.DIFFICULTY_MEAN) for r in runs]
  if all(difficulty):
    out["difficulty_first_quarter"] = _ms([d[0] for d in difficulty])
    out["difficulty_last_quarter"] = _ms([d[2] for d in difficulty])
  ph = [phenomena(r) for r in runs]
  if all("a_p_hat_into_band" in p for p in ph):
    out["late_in_band_frac"] = _ms([p["a_p_hat_into_band"]["late_in_band_frac"] for p in ph])
    out["p_hat_in_band_shown_seeds"] = sum(p["a_p_hat_into_band"]["holds"] for p in ph)
  if all("a2_tasks_in_band_rise" in p for p in ph):
    out["tasks_in_band_shown_seeds"] = sum(p["a2_tasks_in_band_rise"]["holds"] for p in ph)
  if all("b_difficulty_rises" in p and "c_heldout_accuracy_rises" in p for p in ph):
    b = [bool(p["b_difficulty_rises"]["holds"]) for p in ph]
    c = [bool(p["c_heldout_accuracy_rises"]["holds"]) for p in ph]
    out["b_shown_seeds"], out["c_shown_seeds"] = sum(b), sum(c)
    out["bc_shown_seeds"] = sum(x and y for x, y in zip(b, c))
  drops = [ends_below_start(r) for r in runs]
  if all(d is not None for d in drops):
    out["ends_below_start"] = [u for u, d in zip(seeds, drops) if d]
  out.update(cost_figures(runs))
  out["trajectories"] = {k: trajectory(runs, k) for k in TRAJECTORIES}
  return out


def step_seconds(summary: dict[str, Any]) -> float | None:
  """Median wall seconds per co-evolution step over the run's logged spans (summary.json's `perf.step_s`, each span's
  seconds per step: the jitted step and its rows, not evaluations or checkpoints); the median, so that the spans that
  compiled (the first, and the first after a resume) do not count. None for a run that recorded none."""
  spans = [float(seconds) for _, seconds in summary.get("perf", {}).get("step_s", [])]
  return float(np.median(spans)) if spans else None


def cost_figures(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
  """What a variant's runs cost, each as mean ± std over its runs, where every run recorded it: seconds per step
  (`step_seconds`), the run's wall time (warm start, steps, evaluations and checkpoints; a warm start read back from
  another run counts seconds), the warm start's own seconds, and the peak resident memory of the run's process."""
  out: dict[str, Any] = {}
  figures = {
    "step_seconds": [step_seconds(r) for r in runs],
    "wall_time_s": [r.get("wall_time_s") for r in runs],
    "warm_start_s": [r.get("warm_start", {}).get("seconds") for r in runs],
    "host_peak_memory_gib": [r.get("perf", {}).get("host_peak_memory_gib") or None for r in runs],
  }
  for key, values in figures.items():
    if values and all(v is not None for v in values):
      out[key] = _ms([float(v) for v in values])
  return out


def ends_below_start(summary: dict[str, Any], n_se: float = 2.0) -> bool | None:
  """Whether the run's last held-out accuracy lies more than `n_se` binomial SE, sqrt(p₀(1 - p₀)/n), below its first
  p₀ (n the items of the first evaluation); None without two evaluations or an item count."""
  evals = summary.get("evals", [])
  if len(evals) < 2 or not evals[0].get("n"):
    return None
  p0, p1, n = float(evals[0]["accuracy"]), float(evals[-1]["accuracy"]), int(evals[0]["n"])
  return bool(p0 - p1 > n_se * float(np.sqrt(p0 * (1.0 - p0) / n)))


def _windows(summary: dict[str, Any], key: str) -> tuple[float, float, float] | None:
  """Mean of a per-step figure over the first quarter, the later half and the last quarter of the steps."""
  values = [float(r[key]) for r in summary.get("steps", []) if key in r]
  if len(values) < 4:
    return None
  n = len(values)
  return float(np.mean(values[: n // 4])), float(np.mean(values[n // 2 :])), float(np.mean(values[-(n // 4) :]))


def item_scores(summary: dict[str, Any], window: str | int = "final") -> list[float] | None:
  """Per held-out item: its 0/1 score at the last evaluation ("final"), at the evaluation of step `window` (an int;
  None when the run has none there), or its mean score over the later half of the evaluations ("later_half": several
  evaluations of one run, so less of the evaluation's own noise)."""
  ev = [e for e in summary.get("evals", []) if e.get("correct") is not None]
  if not ev:
    return None
  if isinstance(window, int) and not isinstance(window, bool):
    at = [e for e in ev if e.get("step") == window]
    return [float(c) for c in at[-1]["correct"]] if at else None
  if window == "final":
    return [float(c) for c in ev[-1]["correct"]]
  if window != "later_half":
    raise ValueError(f"window must be 'final', 'later_half' or an evaluation step (int), got {window!r}")
  late = ev[len(ev) // 2 :]
  if len({len(e["correct"]) for e in late}) != 1:
    return None
  return np.mean([e["correct"] for e in late], axis=0).tolist()


def paired_gap(
  runs: dict[str, dict[Unit, dict[str, Any]]], a: str, b: str, n_boot: int = 2000, window: str | int = "final"
) -> dict[str, Any]:
  """Variant a minus variant b on the seeds both ran, paired by seed and item (module docstring)."""
  seeds = sorted(set(runs[a]) & set(runs[b]), key=unit_order)
  x = [item_scores(runs[a][s], window) for s in seeds]
  y = [item_scores(runs[b][s], window) for s in seeds]
  if not seeds or any(v is None for v in x + y) or len({len(v) for v in x + y}) != 1:
    return {"seeds": seeds, "verdict": "not shown", "test": "no paired per-item scores on common seeds"}
  d = stats.paired_difference(np.array(x), np.array(y), n_boot=n_boot)
  per_seed = [float(np.mean(u) - np.mean(v)) for u, v in zip(x, y)]
  spread = stats.mean_std(per_seed)[1]
  if d["lo"] > 0:
    verdict = "shown"
  elif d["hi"] < 0:
    verdict = f"not shown: reversed, {b} ahead beyond the noise"
  else:
    verdict = "not shown"
  return {
    "seeds": seeds,
    "mean": d["mean"],
    "ci95": [d["lo"], d["hi"]],
    "per_seed": per_seed,
    "seed_std": spread,
    "verdict": verdict,
    "test": "paired two-level bootstrap 95% CI (seeds, then items) excludes 0; the seed std does not decide",
  }


ORDER = ("coevolve", "random", "static")  # GenEnv's claim: each beats the next (docs/DESIGN.md, "The method")


def ordering(runs: dict[str, dict[Unit, dict[str, Any]]], n_boot: int = 2000) -> list[dict[str, Any]]:
  """The claimed chain GenEnv > GenEnv-Random > Static, link by link, on the later-half item scores."""
  present = [v for v in ORDER if v in runs]
  return [
    {"better": a, "worse": b, **paired_gap(runs, a, b, n_boot, "later_half")} for a, b in zip(present, present[1:])
  ]


def paired_gaps(
  runs: dict[str, dict[Unit, dict[str, Any]]], baseline: str, n_boot: int = 2000, window: str = "final"
) -> dict[str, Any]:
  """baseline minus each other variant on the seeds both ran, paired by item (module docstring)."""
  if baseline not in runs:
    raise ValueError(f"baseline variant {baseline!r} has no runs; variants found: {sorted(runs)}")
  return {
    other: paired_gap(runs, baseline, other, n_boot, window) for other in sorted(v for v in runs if v != baseline)
  }


def eval_steps(summaries: Sequence[dict[str, Any]]) -> list[int]:
  """The evaluation steps with per-item scores that every one of `summaries` has, in order."""
  sets = [{e["step"] for e in s.get("evals", []) if e.get("correct") is not None} for s in summaries]
  return sorted(set.intersection(*sets)) if sets else []


def gaps_by_step(
  runs: dict[str, dict[Unit, dict[str, Any]]], baseline: str, n_boot: int = 2000
) -> dict[str, list[dict[str, Any]]]:
  """baseline minus each other variant at each evaluation step that every run of both has, step 0 left out (both
  start from the same warm start there): paired_gap on that evaluation's 0/1 scores, a row per step."""
  out = {}
  for other in sorted(v for v in runs if v != baseline):
    seeds = set(runs[baseline]) & set(runs[other])
    steps = eval_steps([runs[v][s] for v in (baseline, other) for s in seeds])
    out[other] = [{"step": st, **paired_gap(runs, baseline, other, n_boot, st)} for st in steps if st > 0]
  return out


def _fmt(ms: dict[str, float] | None, digits: int = 3) -> str:
  return "–" if ms is None else f"{ms['mean']:.{digits}f} ± {ms['std']:.{digits}f}"


def _gap_row(name: str, g: dict[str, Any]) -> str:
  if "mean" not in g:
    return f"| {name} | {len(g['seeds'])} | – | – | – | {g['verdict']} ({g['test']}) |"
  return (
    f"| {name} | {len(g['seeds'])} | {g['mean']:+.3f} | [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}] | "
    f"{g['seed_std']:.3f} | {g['verdict']} |"
  )


def markdown(report: dict[str, Any]) -> str:
  """report.md: the variant tables, the paired gaps, and links to the plots."""
  lines = [f"# Sweep report: {report['workdir']}", ""] + _variant_tables(report) + _gap_sections(report)
  lines += ["", f"Test: {next(iter(report['gaps'].values()), {}).get('test', '')}", ""]
  lines += [f"![{name}]({os.path.basename(path)})" for name, path in report.get("plots", {}).items()]
  return "\n".join(lines) + "\n"


def _variant_tables(report: dict[str, Any]) -> list[str]:
  """The per-variant tables of report.md: accuracy, tasks in band and difficulty, (b)/(c), and cost."""
  lines = [
    "Mean ± sample std over seeds. Later half = mean of the later half of the held-out evaluations.",
    "",
    "| variant | seeds | first acc | final acc | later-half acc | p̂ in band (later half) | (a) shown on |",
    "|---|---|---|---|---|---|---|",
  ]
  for v, f in report["variants"].items():
    shown = f"{f['p_hat_in_band_shown_seeds']}/{len(f['seeds'])} seeds" if "p_hat_in_band_shown_seeds" in f else "–"
    lines.append(
      f"| {v} | {','.join(map(str, f['seeds']))} | {_fmt(f.get('first_accuracy'))} | "
      f"{_fmt(f.get('final_accuracy'))} | {_fmt(f.get('later_half_accuracy'))} | "
      f"{_fmt(f.get('late_in_band_frac'), 2)} | {shown} |"
    )
  lines += [
    "",
    "Fraction of the env's tasks whose own p̂ lies in the band (per step, then averaged over a window), and the",
    "generated difficulty:",
    "",
    "| variant | tasks in band, first quarter | later half | last quarter | difficulty, first -> last quarter |",
    "|---|---|---|---|---|",
  ]
  for v, f in report["variants"].items():
    if "band_frac_later_half" in f:
      lines.append(
        f"| {v} | {_fmt(f['band_frac_first_quarter'], 2)} | {_fmt(f['band_frac_later_half'], 2)} | "
        f"{_fmt(f['band_frac_last_quarter'], 2)} | {_fmt(f.get('difficulty_first_quarter'), 2)} -> "
        f"{_fmt(f.get('difficulty_last_quarter'), 2)} |"
      )
  if any("bc_shown_seeds" in f for f in report["variants"].values()):
    lines += [
      "",
      "Rules (b) and (c) of the end-of-run summary, and the runs that end more than 2 SE below their first evaluation:",
      "",
      "| variant | runs | (b) shown | (c) shown | both | ends > 2 SE below its start |",
      "|---|---|---|---|---|---|",
    ]
    for v, f in report["variants"].items():
      if "bc_shown_seeds" in f:
        below = f.get("ends_below_start")
        names = ", ".join(f"s{u}" if isinstance(u, int) else u for u in below or ())
        below_text = "–" if below is None else (f"{len(below)}: {names}" if below else "0")
        lines.append(
          f"| {v} | {len(f['seeds'])} | {f['b_shown_seeds']} | {f['c_shown_seeds']} | {f['bc_shown_seeds']} | "
          f"{below_text} |"
        )
  if any("step_seconds" in f for f in report["variants"].values()):
    lines += [
      "",
      "What the runs cost (seconds per step: the median over the logged spans, evaluations and checkpoints apart; the",
      "wall time includes the warm start, and a warm start read back from another run takes seconds):",
      "",
      "| variant | seconds per step | wall time per run (min) | warm start (s) | peak resident memory (GiB) |",
      "|---|---|---|---|---|",
    ]
    for v, f in report["variants"].items():
      if "step_seconds" in f:
        wall = f.get("wall_time_s")
        wall_min = None if wall is None else {**wall, "mean": wall["mean"] / 60, "std": wall["std"] / 60}
        lines.append(
          f"| {v} | {_fmt(f['step_seconds'], 1)} | {_fmt(wall_min, 1)} | {_fmt(f.get('warm_start_s'), 0)} | "
          f"{_fmt(f.get('host_peak_memory_gib'), 2)} |"
        )
  vs = report.get("tasks_in_band_vs_random")
  if vs:
    lines += [
      "",
      f"(a2) GenEnv {vs['coevolve']:.2f} vs GenEnv-Random {vs['random']:.2f} in the last quarter (ratio "
      f"{vs['ratio']:.2f}; test: {vs['test']}): {vs['verdict']}",
    ]
  return lines


def _gap_sections(report: dict[str, Any]) -> list[str]:
  """The paired-gap sections of report.md: against each ablation, the claimed order, and gaps by step."""
  lines = []
  for key, title in (("gaps", "final held-out accuracy"), ("gaps_later_half", "later-half held-out accuracy")):
    lines += [
      "",
      f"## {report['baseline']} minus each ablation ({title})",
      "",
      "| ablation | seeds | gap | 95% CI | seed std | verdict |",
      "|---|---|---|---|---|---|",
    ]
    lines += [_gap_row(v, g) for v, g in report.get(key, {}).items()]
  if report.get("ordering"):
    lines += [
      "",
      "## The claimed order, link by link (later-half held-out accuracy)",
      "",
      "| better | worse | seeds | gap | 95% CI | seed std | verdict |",
      "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {o['better']} " + _gap_row(o["worse"], o) for o in report["ordering"]]
  by_step = {v: rows for v, rows in report.get("gaps_by_step", {}).items() if rows}
  if by_step:
    lines += [
      "",
      f"## {report['baseline']} minus each ablation at each evaluation (when a gap appears, and whether it holds)",
      "",
      "Each row is a test of its own: where there is no gap, about 1 row in 20 is 'shown' by chance, so a gap counts",
      "where it holds from some step on, not where one row clears 0.",
      "",
      "| ablation | step | seeds | gap | 95% CI | seed std | verdict |",
      "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {v} " + _gap_row(str(r["step"]), r) for v, rows in by_step.items() for r in rows]
  return lines


def plot(report: dict[str, Any], workdir: str) -> dict[str, str]:
  """PNG plots (trajectories and per-level accuracy), mean over seeds with a ±std band; returns {name: path}."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  paths = {}
  for key, title in TRAJECTORIES.items():
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for v, f in report["variants"].items():
      t = f["trajectories"][key]
      if t["steps"]:
        m, s = np.array(t["mean"]), np.array(t["std"])
        ax.plot(t["steps"], m, label=v)
        ax.fill_between(t["steps"], m - s, m + s, alpha=0.2)
    ax.set(title=title, xlabel="step")
    ax.legend(fontsize=8)
    paths[key] = os.path.join(workdir, f"report_{key.rsplit('/', 1)[-1]}.png")  # report_band_frac.png, ...
    fig.tight_layout()
    fig.savefig(paths[key], dpi=100)
    plt.close(fig)
  fig, ax = plt.subplots(figsize=(6, 3.5))
  for v, f in report["variants"].items():
    lv = f.get("final_accuracy_by_difficulty", {})
    if lv:
      ax.errorbar(
        [int(d) for d in lv],
        [x["mean"] for x in lv.values()],
        yerr=[x["std"] for x in lv.values()],
        label=v,
        marker="o",
        capsize=2,
      )
  ax.set(title="final held-out accuracy per difficulty level", xlabel="difficulty", ylabel="accuracy")
  ax.legend(fontsize=8)
  paths["accuracy_by_difficulty"] = os.path.join(workdir, "report_accuracy_by_difficulty.png")
  fig.tight_layout()
  fig.savefig(paths["accuracy_by_difficulty"], dpi=100)
  plt.close(fig)
  return paths


def build_report(workdir: str | Sequence[str], baseline: str | None = None, n_boot: int = 2000) -> dict[str, Any]:
  """The report dict (report.json) of the sweep in `workdir` (or of several, pooled: module docstring); baseline None =
  "coevolve" if it ran, else the first variant in name order."""
  runs = load_runs(workdir)
  baseline = baseline or ("coevolve" if "coevolve" in runs else min(runs))
  report = {
    "workdir": workdir if isinstance(workdir, str) else ", ".join(workdir),
    "baseline": baseline,
    "variants": {v: variant_figures(by_seed) for v, by_seed in runs.items()},
    "gaps": paired_gaps(runs, baseline, n_boot) if len(runs) > 1 else {},
    "gaps_later_half": paired_gaps(runs, baseline, n_boot, "later_half") if len(runs) > 1 else {},
    "ordering": ordering(runs, n_boot),
    "gaps_by_step": gaps_by_step(runs, baseline, n_boot) if len(runs) > 1 else {},
  }
  report["tasks_in_band_vs_random"] = tasks_in_band_vs_random(report["variants"])
  return report


def tasks_in_band_vs_random(variants: dict[str, Any]) -> dict[str, Any] | None:
  """(a2) across variants: GenEnv's last-quarter fraction of tasks in the band against GenEnv-Random's. Shown when
  GenEnv's rule (a2) holds on every seed (a rise beyond the noise, ending at 0.4 or more) and its mean is at least
  twice GenEnv-Random's."""
  co, rnd = variants.get("coevolve", {}), variants.get("random", {})
  if "band_frac_last_quarter" not in co or "band_frac_last_quarter" not in rnd:
    return None
  a, b = co["band_frac_last_quarter"]["mean"], rnd["band_frac_last_quarter"]["mean"]
  every_seed = co.get("tasks_in_band_shown_seeds") == len(co["seeds"])
  return {
    "coevolve": a,
    "random": b,
    "ratio": a / b if b > 0 else float("inf"),
    "verdict": "shown" if every_seed and a >= 2 * b else "not shown",
    "test": "rule (a2) on every GenEnv seed, and GenEnv's last-quarter mean >= 2 x GenEnv-Random's",
  }


def write_report(
  workdir: str | Sequence[str], baseline: str | None = None, n_boot: int = 2000, plots: bool = True, out: str = ""
) -> str:
  """Writes report.json, report.md and the PNGs into `out` (default: `workdir`, which must then be one directory);
  returns the markdown."""
  if not out:
    if not isinstance(workdir, str):
      raise ValueError("a report of several sweep directories needs --out=DIR, the directory it is written to")
    out = workdir
  report = build_report(workdir, baseline, n_boot)
  os.makedirs(out, exist_ok=True)
  if plots:
    report["plots"] = plot(report, out)
  with open(os.path.join(out, "report.json"), "w") as f:
    json.dump(report, f, indent=1)
  text = markdown(report)
  with open(os.path.join(out, "report.md"), "w") as f:
    f.write(text)
  return text


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the command-line flags on `flag_values` (a test lists them on a fresh FlagValues). Called on absl's FLAGS
  only when this module runs as a program, so that importing it next to another program's module with flags of the
  same name (tests, tools) never collides in absl's global registry."""
  global _BASELINE, _OUT
  _OUT = flags.DEFINE_string(
    "out",
    "",
    "where the report is written (default: DIR itself); required with several sweep directories",
    flag_values=flag_values,
  )
  _BASELINE = flags.DEFINE_string(
    "baseline",
    None,
    "the variant compared against every other (GenEnv); default "
    "coevolve if it ran, else the first variant in name order",
    flag_values=flag_values,
  )


def main(argv) -> None:
  if len(argv) < 2:
    raise app.UsageError("usage: python -m genenv_jax.compare DIR [DIR ...] [--out=DIR] [--baseline=VARIANT]")
  dirs = [os.path.expanduser(d) for d in argv[1:]]
  if len(dirs) > 1 and not _OUT.value:
    raise app.UsageError("several sweep directories are pooled into one report: name where it goes with --out=DIR")
  out = os.path.expanduser(_OUT.value)
  print(write_report(dirs[0] if len(dirs) == 1 else dirs, _BASELINE.value, out=out), flush=True)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.compare")
