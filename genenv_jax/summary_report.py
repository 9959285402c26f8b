"""The end-of-run report: do the paper's three co-evolution phenomena show in a run's summary.json?

GenEnv (arXiv 2512.19682) reports, and issue 3 asks the demo to show:
  (a) the mean agent success rate p̂ on generated tasks moves from where it starts into the α band
      |p̂ - α| <= k_min and stays there;
  (b) the difficulty of generated tasks rises as the agent improves;
  (c) the agent's held-out accuracy rises.

Rules (pure functions of the summary dict that `train.train` writes; nothing here reads arrays or files):
  start / end of a per-step figure = the mean over the first / last quarter of the logged steps (at least one row);
  (a) holds when the end mean is inside the band and at least `stay_frac` (default 3/4) of the logged steps in the
      last half have their p̂ inside it ("stays there"); `moved` says whether the start was outside the band;
  (b) holds when the end difficulty exceeds the start difficulty;
  (c) holds when the last evaluation beats the first AND the mean of the later half of the evaluations beats the
      first (one lucky evaluation is not a rise); the least-squares slope over all evaluations is reported too.
"""

from __future__ import annotations

from typing import Any, Sequence

STAY_FRAC = 0.75
STEP_FIGURES = {"p_hat_mean": "mean p̂ on generated tasks", "band_frac": "fraction of tasks in the α band",
                "difficulty_mean": "generated-task difficulty", "agent_reward": "agent reward (training tasks)",
                "invalid_frac": "invalid env tasks"}


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


def _band(summary: dict[str, Any]) -> tuple[float, float]:
  cur = summary.get("config", {}).get("env", {}).get("curriculum", {})
  return float(cur.get("alpha", 0.5)), float(cur.get("k_min", 0.1))


def phenomena(summary: dict[str, Any], stay_frac: float = STAY_FRAC) -> dict[str, Any]:
  """The three phenomena with their numbers (module docstring rules); a figure with no data is left out."""
  if not 0 < stay_frac <= 1:
    raise ValueError(f"stay_frac must be in (0, 1], got {stay_frac}")
  steps, evals = summary.get("steps", []), summary.get("evals", [])
  alpha, k_min = _band(summary)
  out: dict[str, Any] = {"window": "first vs last quarter of the logged steps", "alpha": alpha, "k_min": k_min}
  figures = {}
  for key in STEP_FIGURES:
    pair = quarter_means([r[key] for r in steps if key in r])
    if pair is not None:
      figures[key] = {"start": pair[0], "end": pair[1]}
  out["figures"] = figures

  p_hat = [r["p_hat_mean"] for r in steps if "p_hat_mean" in r]
  if p_hat:
    inside = lambda p: abs(p - alpha) <= k_min + 1e-9  # noqa: E731
    late = p_hat[len(p_hat) // 2:]
    late_frac = sum(inside(p) for p in late) / len(late)
    start, end = figures["p_hat_mean"]["start"], figures["p_hat_mean"]["end"]
    out["a_p_hat_into_band"] = {"start": start, "end": end, "band": [alpha - k_min, alpha + k_min],
                                "moved": not inside(start), "late_in_band_frac": late_frac,
                                "holds": inside(end) and late_frac >= stay_frac}
  if "difficulty_mean" in figures:
    d = figures["difficulty_mean"]
    out["b_difficulty_rises"] = {"start": d["start"], "end": d["end"], "holds": d["end"] > d["start"]}
  if evals:
    acc = [float(e["accuracy"]) for e in evals]
    later = acc[len(acc) // 2:] if len(acc) > 1 else acc
    later_mean = sum(later) / len(later)
    out["c_heldout_accuracy_rises"] = {
        "first": acc[0], "last": acc[-1], "later_half_mean": later_mean, "best": max(acc),
        "slope_per_100_steps": 100.0 * slope([float(e["step"]) for e in evals], acc),
        "steps": [int(e["step"]) for e in evals], "accuracy": acc,
        "holds": len(acc) > 1 and acc[-1] > acc[0] and later_mean > acc[0]}
  return out


def format_report(summary: dict[str, Any]) -> str:
  """The printed end-of-run summary: wall time, the three phenomena (each with yes/no) and the other figures."""
  ph = summary.get("phenomena") or phenomena(summary)
  yes = lambda d: "yes" if d["holds"] else "NO"  # noqa: E731
  lines = [f"finished at step {summary.get('final_step')} in {summary.get('wall_time_s', 0.0):.0f} s "
           f"(warm start {summary.get('warm_start', {}).get('seconds', 0.0):.0f} s)",
           f"the paper's three phenomena ({ph['window']}):"]
  a = ph.get("a_p_hat_into_band")
  if a:
    lo, hi = a["band"]
    lines.append(f"  (a) mean p̂ on generated tasks    {a['start']:.3f} -> {a['end']:.3f}   "
                 f"band [{lo:.2f}, {hi:.2f}]; {'started outside, ' if a['moved'] else 'started inside, '}"
                 f"in band at {100 * a['late_in_band_frac']:.0f}% of the later half's logged steps: {yes(a)}")
  b = ph.get("b_difficulty_rises")
  if b:
    lines.append(f"  (b) generated-task difficulty     {b['start']:.2f} -> {b['end']:.2f}   rises: {yes(b)}")
  c = ph.get("c_heldout_accuracy_rises")
  if c:
    trail = " ".join(f"{x:.3f}" for x in c["accuracy"])
    lines.append(f"  (c) held-out accuracy             {c['first']:.3f} -> {c['last']:.3f}   later-half mean "
                 f"{c['later_half_mean']:.3f}, slope {c['slope_per_100_steps']:+.3f}/100 steps: {yes(c)}")
    lines.append(f"      evaluations at steps {c['steps'][0]}..{c['steps'][-1]}: {trail}")
  others = [k for k in STEP_FIGURES if k not in ("p_hat_mean", "difficulty_mean") and k in ph["figures"]]
  for key in others:
    f = ph["figures"][key]
    lines.append(f"  {STEP_FIGURES[key]:<34} {f['start']:.3f} -> {f['end']:.3f}")
  return "\n".join(lines)
