"""Which prompts does a run's env write valid tasks from? Its valid-task rate per kind of prompt, from a checkpoint.

  python -m genenv_jax.scripts.env_validity --workdir RUN [--draws 4] [--seed 0]

The env of RUN's latest checkpoint writes `--draws` batches of tasks (the run's env batch: env.num_seeds prompts, K
samples each, at its sampling temperature) from three kinds of prompt,

    seed            a seed task of the domain; its p̂ shows as unknown
    generated       a generated task in D_env (one that passed the α band), showing its measured p̂, as in training
    generated, p̂ ?  the same tasks with their p̂ shown as unknown, as the env's warm start shows every prompt
                    (unless warm_start.env_p_hats = "all")

once with the initial env (the warm-started reference of the KL) and once with the trained env, and prints the share
of tasks the domain parses as valid. When a run's env writes invalid tasks, the table says whether its updates did
it (initial against trained, on the same prompts and keys) or its prompts did (seed against generated, measured
against unknown p̂). Both envs of one kind of prompt use the same sampling keys.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from absl import flags

from genenv_jax import cli

PROMPTS = ("seed", "generated", "generated, p̂ ?")
ENVS = ("initial", "trained")


def measure(workdir: str, draws: int, seed: int) -> tuple[dict[tuple[str, str], np.ndarray], dict[str, int]]:
  """({(prompt kind, env): valid flags [draws, tasks per draw]}, D_env's counts of seed and generated tasks). The
  generated kinds are absent when D_env holds no generated task."""
  import jax  # pylint: disable=import-outside-toplevel

  from genenv_jax.evaluation.agents import restore_run  # pylint: disable=import-outside-toplevel
  from genenv_jax.rl import pools  # pylint: disable=import-outside-toplevel

  run, state, _ = restore_run(workdir)
  co, pool = run.coevolution, state.env_pool
  s = co.settings
  counts = {"seed": int((pool.valid & pool.is_seed).sum()), "generated": int((pool.valid & ~pool.is_seed).sum())}
  generate = jax.jit(co.generate_tasks)
  params = {"initial": state.env_ref, "trained": state.env}
  out = {}
  for kind in PROMPTS:
    if not counts[kind.split(",")[0]]:
      continue
    mix = (1.0, 0.0, 0.0) if kind == "seed" else (0.0, 1.0, 1.0)  # (base, old, new): old and new = generated
    for env in ENVS:
      valid = []
      for d in range(draws):
        k_seed, k_env = jax.random.split(jax.random.key(seed * 100_003 + d))
        rows, _, _ = pools.sample(
          pool, k_seed, s.env.num_seeds, step=state.step, mix=mix, new_window=s.pools.new_window
        )
        known = rows["valid"] & ~rows["is_seed"] & (kind == "generated")
        _, _, tasks = generate(params[env], {**rows, "known": known}, k_env)
        valid.append(np.asarray(tasks.valid) & np.repeat(np.asarray(rows["valid"]), s.env.samples_per_seed))
      out[(kind, env)] = np.stack(valid)
  return out, counts


def table(cells: dict[tuple[str, str], np.ndarray]) -> list[str]:
  """Markdown rows, one per kind of prompt: the initial and the trained env's share of valid tasks."""
  lines = ["| prompts | initial env: valid | trained env: valid |", "|---|---|---|"]
  for kind in PROMPTS:
    if (kind, "initial") in cells:
      shares = [f"{cells[(kind, env)].mean():.3f} of {cells[(kind, env)].size}" for env in ENVS]
      lines.append(f"| {kind} | {shares[0]} | {shares[1]} |")
  return lines


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_string("workdir", None, "a training run with a checkpoint", flag_values=fv),
    flags.DEFINE_integer("draws", 4, "env batches per cell", lower_bound=1, flag_values=fv),
    flags.DEFINE_integer("seed", 0, "seeds the choice of prompts and the sampling keys", flag_values=fv),
  )
  flags.mark_flag_as_required("workdir", flag_values=fv)


def main(argv: Sequence[str]) -> None:
  """Prints the table. Through cli.run (or cli.call): a bad flag or a missing run is one `error:` line, exit 2."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  cells, counts = measure(args.workdir, args.draws, args.seed)
  print(f"{args.workdir}: D_env holds {counts['seed']} seed tasks and {counts['generated']} generated tasks")
  print("\n".join(table(cells)))
  if not counts["generated"]:
    print("no generated task has passed the band yet, so the env has only ever been prompted with seed tasks")


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.scripts.env_validity")
