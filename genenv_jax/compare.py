"""The sweep report: per variant, mean ± standard deviation over seeds, and GenEnv minus each ablation with a CI.

  python -m genenv_jax.compare DIR [--baseline=VARIANT]

Reads DIR/runs/VARIANT_sSEED/summary.json (genenv_jax.sweep) and writes DIR/report.md, DIR/report.json and PNG plots
(matplotlib) DIR/report_*.png. Per variant:
  - final held-out accuracy (last evaluation) and later-half accuracy (mean of the later half of the evaluations),
    each as mean ± sample std (ddof=1) over seeds;
  - the p̂ trajectory (mean over seeds per logged step) and the fraction of the later half's steps with p̂ in the band
    |p̂ - α| <= k_min, and the verdict of summary_report rule (a) per seed;
  - the generated-difficulty trajectory;
  - final held-out accuracy per difficulty level.
GenEnv (`--baseline`) minus each ablation: the final evaluations' per-item `correct` scores, paired by seed and item
([seeds, items]), through `stats.paired_difference` (two-level bootstrap over seeds and items). The gap is "shown" only
when the 95% CI excludes 0 or the mean gap exceeds the seed spread (std over seeds of the per-seed gaps).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from absl import app, flags

from genenv_jax import cli
from genenv_jax.reporting import stats
from genenv_jax.reporting.summary_report import phenomena

TRAJECTORIES = {
  "p_hat_mean": "mean p̂ on generated tasks",
  "difficulty_mean": "generated-task difficulty",
  "band_frac": "fraction of tasks in the α band",
}


def load_runs(workdir: str) -> dict[str, dict[int, dict[str, Any]]]:
  """{variant: {seed: summary}} from DIR/runs/VARIANT_sSEED/summary.json; runs without a summary are left out."""
  root = os.path.join(workdir, "runs")
  if not os.path.isdir(root):
    raise FileNotFoundError(f"no runs/ under {workdir}: run genenv_jax.sweep with --workdir={workdir} first")
  out: dict[str, dict[int, dict[str, Any]]] = {}
  for name in sorted(os.listdir(root)):
    variant, sep, seed = name.rpartition("_s")
    path = os.path.join(root, name, "summary.json")
    if not sep or not seed.isdigit() or not os.path.exists(path):
      continue
    with open(path) as f:
      out.setdefault(variant, {})[int(seed)] = json.load(f)
  if not out:
    raise FileNotFoundError(f"no finished runs (runs/VARIANT_sSEED/summary.json) under {workdir}")
  return out


def _ms(values: Sequence[float]) -> dict[str, float]:
  m, s = stats.mean_std(values)
  return {"mean": m, "std": s, "n_seeds": len(values)}


def trajectory(summaries: Sequence[dict[str, Any]], key: str) -> dict[str, list[float]]:
  """Mean and std over seeds of a per-step figure at the steps that every seed logged."""
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
  seeds = sorted(by_seed)
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
  ph = [phenomena(r) for r in runs]
  if all("a_p_hat_into_band" in p for p in ph):
    out["late_in_band_frac"] = _ms([p["a_p_hat_into_band"]["late_in_band_frac"] for p in ph])
    out["p_hat_in_band_shown_seeds"] = sum(p["a_p_hat_into_band"]["holds"] for p in ph)
  out["trajectories"] = {k: trajectory(runs, k) for k in TRAJECTORIES}
  return out


def _final_correct(summary: dict[str, Any]) -> list[int] | None:
  ev = summary.get("evals", [])
  return ev[-1].get("correct") if ev else None


def paired_gaps(runs: dict[str, dict[int, dict[str, Any]]], baseline: str, n_boot: int = 2000) -> dict[str, Any]:
  """baseline minus each other variant on the seeds both ran, paired by item (module docstring)."""
  if baseline not in runs:
    raise ValueError(f"baseline variant {baseline!r} has no runs; variants found: {sorted(runs)}")
  out = {}
  for other in sorted(v for v in runs if v != baseline):
    seeds = sorted(set(runs[baseline]) & set(runs[other]))
    a = [_final_correct(runs[baseline][s]) for s in seeds]
    b = [_final_correct(runs[other][s]) for s in seeds]
    if not seeds or any(x is None for x in a + b) or len({len(x) for x in a + b}) != 1:
      out[other] = {"seeds": seeds, "verdict": "not shown", "test": "no paired per-item scores on common seeds"}
      continue
    d = stats.paired_difference(np.array(a), np.array(b), n_boot=n_boot)
    per_seed = [float(np.mean(x) - np.mean(y)) for x, y in zip(a, b)]
    spread = stats.mean_std(per_seed)[1]
    shown = d["mean"] > 0 and (d["lo"] > 0 or (len(seeds) > 1 and d["mean"] > spread))
    out[other] = {
      "seeds": seeds,
      "mean": d["mean"],
      "ci95": [d["lo"], d["hi"]],
      "per_seed": per_seed,
      "seed_std": spread,
      "verdict": "shown" if shown else "not shown",
      "test": "paired bootstrap 95% CI over seeds and items excludes 0, or mean gap > seed std",
    }
  return out


def _fmt(ms: dict[str, float] | None, digits: int = 3) -> str:
  return "–" if ms is None else f"{ms['mean']:.{digits}f} ± {ms['std']:.{digits}f}"


def markdown(report: dict[str, Any]) -> str:
  """report.md: the variant table, the paired gaps, and links to the plots."""
  lines = [
    f"# Sweep report: {report['workdir']}",
    "",
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
    f"## {report['baseline']} minus each ablation (final held-out accuracy)",
    "",
    "| ablation | seeds | gap | 95% CI | seed std | verdict |",
    "|---|---|---|---|---|---|",
  ]
  for v, g in report["gaps"].items():
    if "mean" in g:
      lines.append(
        f"| {v} | {len(g['seeds'])} | {g['mean']:+.3f} | [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}] | "
        f"{g['seed_std']:.3f} | {g['verdict']} |"
      )
    else:
      lines.append(f"| {v} | {len(g['seeds'])} | – | – | – | {g['verdict']} ({g['test']}) |")
  lines += ["", f"Test: {next(iter(report['gaps'].values()), {}).get('test', '')}", ""]
  lines += [f"![{name}]({os.path.basename(path)})" for name, path in report.get("plots", {}).items()]
  return "\n".join(lines) + "\n"


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
    paths[key] = os.path.join(workdir, f"report_{key}.png")
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


def build_report(workdir: str, baseline: str | None = None, n_boot: int = 2000) -> dict[str, Any]:
  """The report dict (report.json) of the sweep in `workdir`; baseline None = "coevolve" if it ran, else the first
  variant in name order."""
  runs = load_runs(workdir)
  baseline = baseline or ("coevolve" if "coevolve" in runs else min(runs))
  return {
    "workdir": workdir,
    "baseline": baseline,
    "variants": {v: variant_figures(by_seed) for v, by_seed in runs.items()},
    "gaps": paired_gaps(runs, baseline, n_boot) if len(runs) > 1 else {},
  }


def write_report(workdir: str, baseline: str | None = None, n_boot: int = 2000, plots: bool = True) -> str:
  """Writes report.json, report.md and the PNGs into `workdir`; returns the markdown."""
  report = build_report(workdir, baseline, n_boot)
  if plots:
    report["plots"] = plot(report, workdir)
  with open(os.path.join(workdir, "report.json"), "w") as f:
    json.dump(report, f, indent=1)
  text = markdown(report)
  with open(os.path.join(workdir, "report.md"), "w") as f:
    f.write(text)
  return text


def _define_flags() -> None:
  """Defines the command-line flags. Called only when this module runs as a program, so that importing it next to
  another program's module with flags of the same name (tests, tools) never collides in absl's global registry."""
  global _BASELINE
  _BASELINE = flags.DEFINE_string(
    "baseline",
    None,
    "the variant compared against every other (GenEnv); default "
    "coevolve if it ran, else the first variant in name order",
  )


def main(argv) -> None:
  if len(argv) != 2:
    raise app.UsageError("usage: python -m genenv_jax.compare DIR [--baseline=VARIANT]")
  print(write_report(os.path.expanduser(argv[1]), _BASELINE.value), flush=True)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.compare")
