"""How far does a run's env move from its seed's difficulty, and does the p̂ its prompt shows steer it?

  python -m genenv_jax.scripts.env_tracking --workdir RUN [--per_level 16] [--draws 4] [--seed 0]

From `--per_level` seed tasks of each difficulty level (drawn from the domain's seeds), the env of RUN's latest
checkpoint writes `--draws` tasks per seed at its sampling temperature, once per p̂ shown in the prompt (unknown, as
for a base seed, and 0.0, 0.2, 0.5, 0.8, 1.0, as for a generated task of D_env), with the initial env (the
warm-started reference of the KL) and with the trained env. Per seed level and p̂ it prints the mean shift

    Δ = difficulty of the valid written task - difficulty of its seed

An env that tracks its seed writes Δ near 0 from every level. An env that reads p̂ writes Δ > 0 where the agent
solves the seed often (p̂ above the α band) and Δ < 0 where it rarely does, which is what a curriculum needs from
it when its seeds go stale as the agent learns (docs/EXPERIMENTS.md, "What the default shows"). A cell is blank
when no written task was valid. Both envs use the same sampling keys.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from absl import flags

from genenv_jax import cli

SHOWN = (-1.0, 0.0, 0.2, 0.5, 0.8, 1.0)  # p̂ in the env prompt; -1 = unknown
ENVS = ("initial", "trained")


def level_shifts(seed_level: np.ndarray, task_level: np.ndarray, valid: np.ndarray) -> dict[int, float]:
  """{seed level: mean (task level - seed level) over the valid tasks written from seeds of that level}; a level
  with no valid task is absent."""
  seed_level, task_level, valid = (np.asarray(x) for x in (seed_level, task_level, valid))
  out = {}
  for level in np.unique(seed_level):
    at = (seed_level == level) & valid.astype(bool)
    if at.any():
      out[int(level)] = float((task_level[at] - seed_level[at]).mean())
  return out


def measure(workdir: str, per_level: int, draws: int, seed: int) -> dict[tuple[str, float], dict[int, float]]:
  """{(env, p̂ shown): level_shifts(...)} for RUN's initial and trained env."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel

  from genenv_jax.evaluation.agents import restore_run  # pylint: disable=import-outside-toplevel

  run, state, _ = restore_run(workdir)
  co = run.coevolution
  seeds = run.domain.seed_tasks()
  level = np.asarray(seeds["difficulty"])
  rng = np.random.default_rng(seed)
  picked = np.concatenate([rng.choice(np.nonzero(level == d)[0], per_level) for d in np.unique(level)])
  rows = {k: jnp.asarray(np.asarray(v)[picked]) for k, v in seeds.items()}
  generate = jax.jit(co.generate_tasks)
  k = co.settings.env.samples_per_seed
  out = {}
  for env, params in (("initial", state.env_ref), ("trained", state.env)):
    for shown in SHOWN:
      prompts = {**rows, "known": jnp.full(len(picked), shown >= 0), "p_hat": jnp.full(len(picked), shown, jnp.float32)}
      written, valid = [], []
      for d in range(draws):
        _, _, tasks = generate(params, prompts, jax.random.key(seed * 100_003 + d))
        written.append(np.asarray(tasks.difficulty))
        valid.append(np.asarray(tasks.valid))
      out[(env, shown)] = level_shifts(
        np.tile(np.repeat(level[picked], k), draws), np.concatenate(written), np.concatenate(valid)
      )
  return out


def table(cells: dict[tuple[str, float], dict[int, float]]) -> list[str]:
  """Markdown rows, one per env and p̂ shown, one column per seed level: the mean shift Δ."""
  levels = sorted({lv for shifts in cells.values() for lv in shifts})
  lines = [
    "| env | p̂ shown | " + " | ".join(f"from level {lv}" for lv in levels) + " |",
    "|---|---|" + "---|" * len(levels),
  ]
  for (env, shown), shifts in cells.items():
    values = " | ".join(f"{shifts[lv]:+.2f}" if lv in shifts else "" for lv in levels)
    lines.append(f"| {env} | {'?' if shown < 0 else f'{shown:.1f}'} | {values} |")
  return lines


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_string("workdir", None, "a training run with a checkpoint", flag_values=fv),
    flags.DEFINE_integer("per_level", 16, "seed tasks per difficulty level", lower_bound=1, flag_values=fv),
    flags.DEFINE_integer("draws", 4, "tasks written per seed and p̂ shown", lower_bound=1, flag_values=fv),
    flags.DEFINE_integer("seed", 0, "seeds the choice of seed tasks and the sampling keys", flag_values=fv),
  )
  flags.mark_flag_as_required("workdir", flag_values=fv)


def main(argv: Sequence[str]) -> None:
  """Prints the table. Through cli.run (or cli.call): a bad flag or a missing run is one `error:` line, exit 2."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  print(f"{args.workdir}: mean difficulty of the env's valid tasks minus its seed's, per seed level")
  print("\n".join(table(measure(args.workdir, args.per_level, args.draws, args.seed))))


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.scripts.env_tracking")
