"""How widely do a trained agent's per-task success rates spread within one difficulty level?

  python -m genenv_jax.scripts.task_rate_spread --workdir RUN [--samples 64] [--seed 0]

For every held-out task of RUN's domain, the agent of RUN's latest checkpoint answers `--samples` times at its
training temperature; the task's rate r is its fraction right. Per difficulty level it prints the mean and spread of
r, the share of tasks with r in [α - 0.15, α + 0.15], and the expected share whose G-rollout estimate p̂ (G = the
run's group size) lands in the α band:

    E_r[ P(|Binomial(G, r) / G - α| <= k_min) ]

That expectation, maximised over levels, is the most an env could reach on rule (a2) (the fraction of tasks in the
band) by choosing the level alone, writing that level's tasks at random. When it is well below 0.4, the rule needs
an env that also chooses *which* tasks of a level (their digits), which is what the issue's (a2) figure measures.
"""

from __future__ import annotations

import argparse
import math
from typing import Sequence

import numpy as np


def band_probability(rate: np.ndarray, group_size: int, alpha: float, k_min: float) -> np.ndarray:
  """P(|k / G - α| <= k_min) for k ~ Binomial(G, rate), elementwise over `rate`."""
  ks = [k for k in range(group_size + 1) if abs(k / group_size - alpha) <= k_min + 1e-9]
  rate = np.asarray(rate, np.float64)
  return sum(math.comb(group_size, k) * rate**k * (1 - rate) ** (group_size - k) for k in ks)


def level_table(
  difficulty: np.ndarray, rate: np.ndarray, group_size: int, alpha: float, k_min: float
) -> list[dict[str, float]]:
  """Per level: tasks, mean and std of r, the share with |r - α| <= 0.15, and E[P(p̂ in band)]."""
  rows = []
  for level in sorted(set(difficulty.tolist())):
    r = rate[difficulty == level]
    rows.append(
      dict(
        level=level,
        tasks=len(r),
        mean=float(r.mean()),
        std=float(r.std()),
        near_alpha=float(np.mean(np.abs(r - alpha) <= 0.15)),
        expected_in_band=float(band_probability(r, group_size, alpha, k_min).mean()),
      )
    )
  return rows


def measure(workdir: str, samples: int, seed: int) -> tuple[np.ndarray, np.ndarray, dict]:
  """(difficulty [N], rate [N], settings) on RUN's held-out tasks."""
  import dataclasses  # pylint: disable=import-outside-toplevel

  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel

  from genenv_jax.evaluation.agents import restore_run  # pylint: disable=import-outside-toplevel
  from genenv_jax.sampling import sampler  # pylint: disable=import-outside-toplevel
  from genenv_jax.tasks.base import TaskBatch  # pylint: disable=import-outside-toplevel

  run, state, _ = restore_run(workdir)
  co = run.coevolution
  model = nnx.merge(co.agent_graphdef, state.agent)
  tasks = run.domain.heldout_tasks()
  fields = {f.name: np.repeat(tasks[f.name], samples, axis=0) for f in dataclasses.fields(TaskBatch)}

  @jax.jit
  def rewards(batch, key):
    out = sampler.sample(model, batch.prompt_ids, batch.prompt_mask, key, co.settings.agent_sampling)
    return run.domain.verify(batch, out.tokens, out.mask)

  chunk = 64 * samples
  right = []
  key = jax.random.key(seed)
  for start in range(0, len(fields["valid"]), chunk):
    part = {k: v[start : start + chunk] for k, v in fields.items()}
    pad = chunk - len(part["valid"])
    part = {k: np.concatenate([v, np.repeat(v[-1:], pad, axis=0)]) if pad else v for k, v in part.items()}
    key, sub = jax.random.split(key)
    right.append(np.asarray(rewards(TaskBatch(**{k: jnp.asarray(v) for k, v in part.items()}), sub))[: chunk - pad])
  rate = np.concatenate(right).reshape(-1, samples).mean(axis=1)
  s = co.settings
  return tasks["difficulty"], rate, dict(group_size=s.group_size, alpha=s.alpha, k_min=s.k_min)


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True, help="a finished arithmetic training run")
  parser.add_argument("--samples", type=int, default=64, help="answers per held-out task")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if args.samples < 1:
    parser.error(f"--samples must be >= 1, got {args.samples}")
  difficulty, rate, s = measure(args.workdir, args.samples, args.seed)
  rows = level_table(difficulty, rate, **s)
  print(
    f"{args.workdir}: {len(rate)} held-out tasks x {args.samples} answers; G = {s['group_size']}, band "
    f"[{s['alpha'] - s['k_min']:.2f}, {s['alpha'] + s['k_min']:.2f}]"
  )
  print("| level | tasks | mean r | std r | share with abs(r - α) <= 0.15 | expected share of p̂ in band |")
  print("|---|---|---|---|---|---|")
  for r in rows:
    print(
      f"| {r['level']:.0f} | {r['tasks']} | {r['mean']:.3f} | {r['std']:.3f} | {r['near_alpha']:.2f} | "
      f"{r['expected_in_band']:.2f} |"
    )
  best = max(rows, key=lambda r: r["expected_in_band"])
  print(
    f"best level {best['level']:.0f}: an env writing only its tasks at random would see "
    f"{best['expected_in_band']:.2f} of them in the band"
  )


if __name__ == "__main__":
  main()
