"""Digests of the demo's numerics that agree on every x86 CPU: the warm-started state and the state after each of the
first co-evolution steps, computed under XLA:CPU's portable pipeline.

  python -m genenv_jax.scripts.numerics_digest [--config=configs/default.py[:VARIANT]] [--agent_steps=100]
      [--env_steps=20] [--steps=10] [--set=key=value ...]

Prints one JSON line: {"warm_start": sha, "steps": [sha after step 1, ..., after step N], "flags": XLA_FLAGS}.

Why. XLA's default CPU pipeline picks kernels by the CPU it runs on (YNNPACK's dot fusions, vector widths), so the
same commit trains to other bits on another machine: the demo's warm-started agent ended at an SFT loss of 0.099 on
an AVX2 host and at 0.044 with the same code capped to SSE4.2 (docs/EXPERIMENTS.md, "The demo across machines"). A
bit-exact guard against silent drift must not depend on the CPU, so this runs the demo's own code (its config, its
warm start `training.loop.warm_start`, its jitted step) under `cpu_pipeline.PORTABLE` + `CHEAPEST` on one CPU device,
in a process of its own: the flags are read when JAX starts its backends, so this module sets XLA_FLAGS before it
imports JAX, and refuses to run in a process that already started JAX with other flags.

The warm start is shortened (`--agent_steps`, `--env_steps`): the guard is for the code's numerics, which every SFT
step runs, not for the demo's 2,000 steps. `state_digest` hashes every leaf of the state (both models, both
references, both optimizers, the pools, the PRNG key) with its shape and dtype, so any change in any bit shows.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence

from absl import flags

from genenv_jax import cli
from genenv_jax.parallel import cpu_pipeline  # imports no jax

DIGEST_FLAGS = " ".join(
  [
    "--xla_force_host_platform_device_count=1",
    cpu_pipeline.as_xla_flags(cpu_pipeline.CHEAPEST),
    cpu_pipeline.as_xla_flags(cpu_pipeline.PORTABLE),
  ]
)
"""The XLA_FLAGS the digests are taken under: one CPU device, the cheapest compile, the portable numerics."""


def state_digest(state) -> str:
  """sha256 over the state's tree structure and every leaf's shape, dtype and bytes (host order)."""
  import jax
  import numpy as np

  leaves, treedef = jax.tree.flatten(state)
  h = hashlib.sha256(str(treedef).encode())
  for leaf in leaves:
    a = np.asarray(jax.device_get(leaf))
    h.update(f"{a.shape}{a.dtype}".encode())
    h.update(np.ascontiguousarray(a).tobytes())
  return h.hexdigest()


def digests(config, agent_steps: int, env_steps: int, steps: int) -> dict:
  """The warm-started state's digest and the digest after each of `steps` jitted steps, on one device."""
  import jax

  from genenv_jax.coevolution.build import build
  from genenv_jax.training.loop import warm_start

  config.warm_start.agent_steps = agent_steps
  config.warm_start.env_steps = env_steps
  run, state = build(config, devices=jax.devices()[:1])
  state = warm_start(run, state, config.seed, log=lambda *_: None)
  out = {"warm_start": state_digest(state), "steps": []}
  step = run.coevolution.jit_step(run.state_shardings)
  with jax.set_mesh(run.mesh):
    for _ in range(steps):
      state, _ = step(state)
      out["steps"].append(state_digest(state))
  return out


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_string("config", "configs/default.py", "the config file[:variant]", flag_values=fv),
    flags.DEFINE_integer("agent_steps", 100, "the agent's warm-start SFT steps", lower_bound=0, flag_values=fv),
    flags.DEFINE_integer("env_steps", 20, "the env's warm-start SFT steps", lower_bound=0, flag_values=fv),
    flags.DEFINE_integer("steps", 10, "co-evolution steps after the warm start", lower_bound=0, flag_values=fv),
    flags.DEFINE_multi_string("set", [], "a config override key=value (repeatable)", flag_values=fv),
  )


def main(argv: Sequence[str]) -> int:
  """Prints one JSON line. Through cli.run (or cli.call): a bad flag or override is one `error:` line, exit 2."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  if "jax" in sys.modules:
    import jax

    if jax._src.xla_bridge.backends_are_initialized() and os.environ.get("XLA_FLAGS") != DIGEST_FLAGS:
      raise RuntimeError("numerics_digest must run in a process of its own: JAX already started with other XLA_FLAGS")
  os.environ["XLA_FLAGS"] = DIGEST_FLAGS
  os.environ["JAX_PLATFORMS"] = "cpu"
  path, _, variant = args.config.partition(":")
  config = cli.config_module(path).get_config(variant)
  for assignment in args.set:
    cli.override(config, assignment)
  out = digests(config, args.agent_steps, args.env_steps, args.steps)
  out["flags"] = DIGEST_FLAGS
  print(json.dumps(out))
  return 0


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.scripts.numerics_digest")
