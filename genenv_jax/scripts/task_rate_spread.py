"""How widely do a trained agent's per-task success rates spread within one difficulty level?

  python -m genenv_jax.scripts.task_rate_spread --workdir RUN [--samples 64] [--seed 0] [--shuffle_operands]

For every held-out task of RUN's domain, the agent of RUN's latest checkpoint answers `--samples` times at its
training temperature; the task's rate r is its fraction right. Per difficulty level it prints the mean and spread of
r, the share of tasks with r in [α - 0.15, α + 0.15], and the expected share whose G-rollout estimate p̂ (G = the
run's group size) lands in the α band:

    E_r[ P(|Binomial(G, r) / G - α| <= k_min) ]

That expectation, maximised over levels, is the most an env could reach on rule (a2) (the fraction of tasks in the
band) by choosing the level alone, writing that level's tasks at random. When it is well below 0.4, the rule needs
an env that also chooses *which* tasks of a level (their digits), which is what the issue's (a2) figure measures.

Then, for α = 0.3 ... 0.7, the level a band-chasing env is pulled toward (`settling_level`) and that level's mean
rate: the mean p̂ rule (a) would read there. An env that lags the agent sits below it.

The last column splits the spread: the share of a level's variance of r explained by the tasks' answers (on the
arithmetic domain, the value of the sum; `answer_explained`). Near 1, the agent's success on a task is mostly a
matter of which number it must write.

With --shuffle_operands (sums of single digits only) each answer sees its task's operands in a fresh random order:
the same sum, presented differently, so that a task's rate averages over its orderings. It measures how much of the
spread within a level comes from the order the digits happen to be written in.

The column "P(in band again)" asks how far choosing the tasks themselves can go. The `--samples` answers of a task
are cut into m = samples // G disjoint groups of G, each an independent G-rollout p̂. A task re-served unchanged
after its p̂ landed in the band lands there again with probability P(in band | in band before); over a level's
tasks, with k_i of task i's m groups in the band,

    P(in band again) = Σ_i k_i (k_i - 1) / ((m - 1) Σ_i k_i)

(every ordered pair of distinct groups, the first in the band). That is what an env gets on (a2) by replaying
exactly the tasks it saw in the band, to an agent that has not moved since: a reference for any env that learns
only from p̂, and one the agent lowers as it learns the tasks it is shown.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from absl import flags

from genenv_jax import cli


def band_probability(rate: np.ndarray, group_size: int, alpha: float, k_min: float) -> np.ndarray:
  """P(|k / G - α| <= k_min) for k ~ Binomial(G, rate), elementwise over `rate`."""
  ks = [k for k in range(group_size + 1) if abs(k / group_size - alpha) <= k_min + 1e-9]
  rate = np.asarray(rate, np.float64)
  return sum(math.comb(group_size, k) * rate**k * (1 - rate) ** (group_size - k) for k in ks)


def in_band_again(outcomes: np.ndarray, group_size: int, alpha: float, k_min: float) -> float:
  """P(a task's p̂ lands in the band | its p̂ on an independent group of G rollouts did), pooled over the rows of
  `outcomes` ([tasks, samples], 1 = right): Σ k (k - 1) / ((m - 1) Σ k) over m = samples // G disjoint groups, k a
  task's groups in the band (module docstring). NaN when no group lands in the band; needs samples >= 2 G."""
  groups = outcomes.shape[1] // group_size
  if groups < 2:
    raise ValueError(f"in_band_again needs at least 2 x G = {2 * group_size} samples per task, got {outcomes.shape[1]}")
  p_hat = outcomes[:, : groups * group_size].reshape(len(outcomes), groups, group_size).mean(axis=2)
  k = (np.abs(p_hat - alpha) <= k_min + 1e-9).sum(axis=1)
  return float((k * (k - 1)).sum() / ((groups - 1) * k.sum())) if k.sum() else float("nan")


def answer_explained(rate: np.ndarray, answers: np.ndarray) -> float:
  """The share of the variance of the rates `rate` [N] that the tasks' answers ([N] or [N, k] rows, the domain's
  spec) explain: 1 - (pooled within-answer variance) / (variance), each with one degree of freedom per group. Only
  answers held by two or more tasks enter the pooled variance. NaN when no answer repeats or the rates do not vary.

  1 means tasks with the same answer succeed equally often; near 0, the answer says nothing about the rate."""
  rate = np.asarray(rate, np.float64)
  groups = np.unique(np.asarray(answers).reshape(len(rate), -1), axis=0, return_inverse=True)[1].reshape(-1)
  within, dof = 0.0, 0
  for g in np.unique(groups):
    r = rate[groups == g]
    if len(r) >= 2:
      within += float(((r - r.mean()) ** 2).sum())
      dof += len(r) - 1
  total = float(rate.var(ddof=1)) if len(rate) >= 2 else 0.0
  if dof == 0 or total == 0:
    return float("nan")
  return 1.0 - (within / dof) / total


def level_table(
  difficulty: np.ndarray,
  outcomes: np.ndarray,
  group_size: int,
  alpha: float,
  k_min: float,
  answers: np.ndarray | None = None,
) -> list[dict[str, float]]:
  """Per level: tasks, mean and std of the rate r (each row of `outcomes` [tasks, samples] averaged), the share with
  |r - α| <= 0.15, E[P(p̂ in band)], P(in band again) (NaN with fewer than 2 G samples), and, given the tasks'
  `answers`, the share of the level's variance of r that they explain (`answer_explained`; NaN without them)."""
  outcomes = np.asarray(outcomes, np.float64)
  rate = outcomes.mean(axis=1)
  rows = []
  for level in sorted(set(difficulty.tolist())):
    at = difficulty == level
    r = rate[at]
    rows.append(
      dict(
        level=level,
        tasks=len(r),
        mean=float(r.mean()),
        std=float(r.std()),
        near_alpha=float(np.mean(np.abs(r - alpha) <= 0.15)),
        expected_in_band=float(band_probability(r, group_size, alpha, k_min).mean()),
        in_band_again=(
          in_band_again(outcomes[at], group_size, alpha, k_min) if outcomes.shape[1] >= 2 * group_size else float("nan")
        ),
        answer_explained=float("nan") if answers is None else answer_explained(r, np.asarray(answers)[at]),
      )
    )
  return rows


def settling_level(
  difficulty: np.ndarray, rate: np.ndarray, group_size: int, alpha: float, k_min: float
) -> dict[str, float]:
  """The level a band-chasing env is pulled toward, for a target α: the one whose tasks, written at random, put the
  largest expected share of G-rollout p̂ in |p̂ - α| <= k_min (band-filtered RWR, and GRPO on R_env, both move the
  env toward it). Its mean rate is the mean p̂ that rule (a) would read once the env got there. With coarse levels
  the same level wins over a range of α, and its mean rate need not lie within k_min of α.

  Returns {alpha, level, mean (of the level's rates), expected_in_band}."""
  rate = np.asarray(rate, np.float64)
  share = {
    level: float(band_probability(rate[difficulty == level], group_size, alpha, k_min).mean())
    for level in sorted(set(difficulty.tolist()))
  }
  level = max(share, key=share.get)
  return dict(alpha=alpha, level=level, mean=float(rate[difficulty == level].mean()), expected_in_band=share[level])


def shuffle_operands(prompt_ids: np.ndarray, digit_ids: Sequence[int], rng: np.random.Generator) -> np.ndarray:
  """Each row's digit tokens permuted among the row's digit positions: a sum of single digits, its operands in a
  random order (the same task, presented differently)."""
  out = np.array(prompt_ids, copy=True)
  for row in out:
    slots = np.flatnonzero(np.isin(row, digit_ids))
    row[slots] = row[rng.permutation(slots)]
  return out


def measure(workdir: str, samples: int, seed: int, shuffle: bool = False) -> tuple[np.ndarray, np.ndarray, dict]:
  """(difficulty [N], outcomes [N, samples] (1 = right), settings) on RUN's held-out tasks; with `shuffle`, every
  answer sees its task's operands in a fresh random order (sums of single digits only)."""
  import dataclasses  # pylint: disable=import-outside-toplevel

  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel

  from genenv_jax.evaluation.agents import restore_run  # pylint: disable=import-outside-toplevel
  from genenv_jax.sampling import sampler  # pylint: disable=import-outside-toplevel
  from genenv_jax.tasks.arithmetic.running import RunningSumDomain  # pylint: disable=import-outside-toplevel
  from genenv_jax.tasks.base import TaskBatch  # pylint: disable=import-outside-toplevel

  run, state, _ = restore_run(workdir)
  co = run.coevolution
  model = nnx.merge(co.agent_graphdef, state.agent)
  tasks = run.domain.heldout_tasks()
  fields = {f.name: np.repeat(tasks[f.name], samples, axis=0) for f in dataclasses.fields(TaskBatch)}
  if shuffle:
    domain = run.domain
    order_free = getattr(domain, "operators", None) == "+" and getattr(domain, "max_digits", None) == 1
    if not order_free or isinstance(domain, RunningSumDomain):  # running digits depend on the operands' order
      raise ValueError(
        "--shuffle_operands reorders the operands of sums of single digits answered by their value "
        f"(domain.operators = '+', domain.max_digits = 1, domain.answer = 'value'); {workdir}'s domain is not "
        "such a family"
      )
    digit_ids = domain.tokens.digit_ids
    fields["prompt_ids"] = shuffle_operands(fields["prompt_ids"], digit_ids, np.random.default_rng(seed))

  @jax.jit
  def rewards(batch, key):
    out = sampler.sample(model, batch.prompt_ids, batch.prompt_mask, key, co.settings.agent.sampling)
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
  outcomes = np.concatenate(right).reshape(-1, samples)
  s = co.settings
  return (
    tasks["difficulty"],
    outcomes,
    dict(
      group_size=s.agent.grpo.group_size,
      alpha=s.env.curriculum.alpha,
      k_min=s.env.curriculum.k_min,
      answers=tasks["spec"],
    ),
  )


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_string("workdir", None, "a finished arithmetic training run", flag_values=fv),
    flags.DEFINE_integer("samples", 64, "answers per held-out task", lower_bound=1, flag_values=fv),
    flags.DEFINE_integer("seed", 0, "seeds the sampling keys (and the operand orders)", flag_values=fv),
    flags.DEFINE_boolean(
      "shuffle_operands",
      False,
      "each answer sees its task's operands in a random order (sums of single digits only)",
      flag_values=fv,
    ),
  )
  flags.mark_flag_as_required("workdir", flag_values=fv)


def main(argv: Sequence[str]) -> None:
  """Prints the tables. Through cli.run (or cli.call): a bad flag, a missing run or a run this cannot measure (a
  ValueError of `measure`) is one `error:` line, exit status 2."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  difficulty, outcomes, s = measure(args.workdir, args.samples, args.seed, args.shuffle_operands)
  rows = level_table(difficulty, outcomes, **s)
  print(
    f"{args.workdir}: {len(outcomes)} held-out tasks x {args.samples} answers"
    f"{' (operands in a random order per answer)' if args.shuffle_operands else ''}; G = {s['group_size']}, band "
    f"[{s['alpha'] - s['k_min']:.2f}, {s['alpha'] + s['k_min']:.2f}]"
  )
  print(
    "| level | tasks | mean r | std r | share with abs(r - α) <= 0.15 | expected share of p̂ in band "
    "| P(in band again when re-served) | share of the variance of r its answer explains |"
  )
  print("|---|---|---|---|---|---|---|---|")
  for r in rows:
    print(
      f"| {r['level']:.0f} | {r['tasks']} | {r['mean']:.3f} | {r['std']:.3f} | {r['near_alpha']:.2f} | "
      f"{r['expected_in_band']:.2f} | {r['in_band_again']:.2f} | {r['answer_explained']:.2f} |"
    )
  best = max(rows, key=lambda r: r["expected_in_band"])
  print(
    f"best level {best['level']:.0f}: an env writing only its tasks at random would see "
    f"{best['expected_in_band']:.2f} of them in the band"
  )
  rate = outcomes.mean(axis=1)
  for alpha in sorted({0.3, 0.4, 0.5, 0.6, 0.7, round(s["alpha"], 6)}):
    at = settling_level(difficulty, rate, s["group_size"], alpha, s["k_min"])
    where = "inside" if abs(at["mean"] - alpha) <= s["k_min"] + 1e-9 else "outside"
    print(
      f"α = {alpha:.2f}{' (the run)' if alpha == round(s['alpha'], 6) else ''}: a band-chasing env is pulled toward "
      f"level {at['level']:.0f}, mean rate {at['mean']:.3f} ({where} α ± {s['k_min']:g}), "
      f"{at['expected_in_band']:.2f} of its tasks in the band"
    )
  if args.samples < 2 * s["group_size"]:
    print(f"P(in band again) needs --samples >= {2 * s['group_size']} (2 x G)")
  else:
    again = [r["in_band_again"] for r in rows if not math.isnan(r["in_band_again"])]
    if not again:
      print("no task's p̂ landed in the band, so P(in band again) is undefined at every level")
      return
    print(
      f"an env re-serving, unchanged, each task whose p̂ landed in the band (agent frozen) would see "
      f"{min(again):.2f}-{max(again):.2f} of them in the band again, by level"
    )


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.scripts.task_rate_spread")
