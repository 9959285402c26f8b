"""Kill -9 at random moments, resume each time, and compare the final state with an uninterrupted run, bit for bit.

  python -m genenv_jax.scripts.kill_resume --kills 20 --workdir /tmp/kills [--seed 0] [--config.KEY=VALUE ...]

The run is `genenv_jax.main` on the smoke config, shrunk to one-layer models (the flags below; extra --config.*
arguments are passed through). First one uninterrupted run gives the reference and its wall time T. Then the same
run is started in a fresh workdir and killed with SIGKILL at a uniform random moment in [0, T) (start-up, warm start,
a step, a checkpoint write or an evaluation), restarted in the same workdir, killed again, ... until it finishes
before its kill moment; every array of its final checkpoint must equal the reference's. Rounds repeat in fresh
workdirs until `--kills` kills are spent. Prints each kill's moment and the phase the run's output
had reached, then the verdict; exits 1 if any array differs or a resumed run fails.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from typing import Sequence

from absl import flags

from genenv_jax import cli

SMOKE = [
  "--config=configs/default.py:smoke+tiny",
  "--config.warm_start.agent_steps=20",
  "--config.warm_start.env_steps=20",
  "--config.agent.grpo.group_size=4",
  "--config.env.num_seeds=4",
  "--config.pools.num_replay=4",
  "--config.total_steps=24",  # enough steps that random moments land in steps, checkpoint writes and evaluations
  "--config.checkpoint_every=2",
  "--config.eval_every=4",
]
_PASS_THROUGH = ("--config.",)  # cli hands these arguments to main unparsed: they go on to genenv_jax.main
PHASES = (
  ("finished at step", "done"),
  ("eval at step", "an evaluation or the step after it"),
  ("step ", "steps or a checkpoint write"),
  ("warm start", "warm start"),
)


def command(workdir: str, extra: Sequence[str]) -> list[str]:
  return [sys.executable, "-m", "genenv_jax.main", *SMOKE, f"--workdir={workdir}", *extra]


def phase_of(output: str) -> str:
  """The phase of the last line of the run's output that names one (start-up when none does)."""
  for line in reversed(output.splitlines()):
    for marker, name in PHASES:
      if line.startswith(marker):
        return name
  return "start-up"


def run(workdir: str, extra: Sequence[str], kill_after: float | None) -> tuple[int | None, str]:
  """Runs once; with kill_after, SIGKILLs it after that many seconds. Returns (exit code or None if killed, output)."""
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  proc = subprocess.Popen(command(workdir, extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
  try:
    out, _ = proc.communicate(timeout=kill_after)
    return proc.returncode, out
  except subprocess.TimeoutExpired:
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate()
    return None, out


def final_arrays(workdir: str, extra: Sequence[str]):
  """The leaves of the final checkpoint, restored onto the state the config builds."""
  import jax

  from configs.default import get_config
  from genenv_jax.coevolution.build import build
  from genenv_jax.training.checkpointing import Checkpointer

  config = get_config(SMOKE[0].split(":", 1)[1])  # the runs' own variant (smoke+tiny), not another's shapes
  for flag in [*SMOKE[1:], *extra]:
    key, value = flag.removeprefix("--config.").split("=", 1)
    node = config
    *parents, leaf = key.split(".")
    for part in parents:
      node = node[part]
    node[leaf] = type(node[leaf])(value)
  _, target = build(config)
  state, _ = Checkpointer(os.path.join(workdir, "checkpoints"), save_every=1).restore(None, target)
  return jax.tree.leaves(state)


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli). The
  --config.KEY=VALUE overrides are no flags of this command: cli passes them through to main (`_PASS_THROUGH`)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_integer(
      "kills", 20, "how many times to SIGKILL the run before it may finish", lower_bound=0, flag_values=fv
    ),
    flags.DEFINE_string("workdir", None, "a directory for the reference and the killed runs", flag_values=fv),
    flags.DEFINE_integer("seed", 0, "seeds the kill moments", flag_values=fv),
  )
  flags.mark_flag_as_required("workdir", flag_values=fv)


def main(argv: Sequence[str]) -> int:
  """Runs the rounds and prints the verdict (exit status 1 when a final state differs or a run fails). Through cli.run
  (or cli.call): a bad flag or an argument other than a --config.KEY=VALUE override is one `error:` line, exit 2."""
  args = cli.namespace(_FLAGS)
  extra = list(argv[1:])
  bad = [a for a in extra if not a.startswith("--config.")]
  if bad:
    raise ValueError(f"extra arguments must be --config.KEY=VALUE overrides, got {bad}")
  import numpy as np

  rng = random.Random(args.seed)
  reference = os.path.join(args.workdir, "reference")
  t0 = time.time()
  code, out = run(reference, extra, None)
  wall = time.time() - t0
  if code != 0:
    print(out[-3000:])
    print(f"kill_resume: the uninterrupted run failed (exit {code})", file=sys.stderr)
    return 1
  print(f"uninterrupted run: {wall:.1f} s")
  expected = final_arrays(reference, extra)
  kills, rounds, failures = 0, 0, 0
  while kills < args.kills or rounds == 0:  # a round: kill a fresh run until it finishes, then compare
    rounds += 1
    killed = os.path.join(args.workdir, f"killed-{rounds}")
    while True:
      moment = rng.uniform(0, wall) if kills < args.kills else None
      code, out = run(killed, extra, moment)
      if code is None:
        kills += 1
        print(f"kill {kills}/{args.kills} at {moment:.1f} s: during {phase_of(out)}", flush=True)
        continue
      if code != 0:
        print(out[-3000:])
        print(f"kill_resume: a resumed run failed (exit {code})", file=sys.stderr)
        return 1
      break
    same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(expected, final_arrays(killed, extra)))
    failures += not same
    print(
      f"round {rounds}: final state {'equal, bit for bit, to' if same else 'DIFFERENT from'} the uninterrupted run's"
    )
  print(f"{kills} kills in {rounds} rounds: {rounds - failures} of {rounds} final states equal the uninterrupted run's")
  return 0 if failures == 0 else 1


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.scripts.kill_resume", pass_through=_PASS_THROUGH)
