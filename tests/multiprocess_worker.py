"""One process of the multi-process test (tests/integration/test_multiprocess.py): a short co-evolution run, then a
dump.

  python tests/multiprocess_worker.py --workdir=DIR --out=PREFIX --local-devices=4 [--verifier=host]
      [--restore-from=OTHER_WORKDIR]

The run is `genenv_jax.training.loop.train` on the test config (the smoke variant of configs/default.py, shrunk further:
tests/coevolution_configs.py), on a (data=-1) mesh over every device of every process. For a multi-process run the
caller sets JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID, as launch/ does on a pod, and the worker
starts JAX's distributed runtime through `sharding.maybe_initialize_distributed`, the same call as the CLI. With 4 fake
CPU devices per process, two processes see one mesh of 8 devices (gloo collectives between them).

After training, all processes restore the final checkpoint together and process 0 writes:
  PREFIX.npz          the restored CoevolutionState, every leaf gathered to the host (keys: pytree paths);
  PREFIX.summary.json the run's summary dict;
  PREFIX.restored.npz with --restore-from: another run's final checkpoint restored onto this run's mesh.
Every process writes PREFIX.process{i}.json: its index, device counts, whether it writes TensorBoard, and how many
rows the host-Python verifier scored on this process (with --verifier=host).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # tests/ (coevolution_configs) and the project root (configs)

from genenv_jax.parallel.cpu_pipeline import CHEAPEST, as_xla_flags  # noqa: E402 (imports no jax)


def parse_args(argv=None) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--workdir", required=True)
  p.add_argument("--out", required=True, help="prefix of the files this worker writes")
  p.add_argument("--local-devices", type=int, required=True, help="fake CPU devices in this process")
  p.add_argument("--verifier", choices=("jax", "host"), default="jax")
  p.add_argument("--total-steps", type=int, default=3)
  p.add_argument("--restore-from", default="", help="a workdir whose final checkpoint to restore and dump too")
  return p.parse_args(argv)


# As in tests/unit/coevolution/test_coevolution.py: Adam's eps raised so that last-bit differences between reduction
# orders stay last-bit in the parameters, and an entropy bonus so that the agent's update is non-zero before any
# reward. A large agent lr without warm-up makes the 3 steps move the agent measurably (~1e-4) beyond the
# comparison's tolerance.
COMPARABLE = {
  "agent.optimizer.eps": 1e-3,
  "env.optimizer.eps": 1e-3,
  "agent.grpo.entropy_coef": 0.01,
  "agent.optimizer.lr": 1e-2,
  "agent.optimizer.warmup_steps": 0,
}


def worker_config(verifier: str, total_steps: int):
  from coevolution_configs import tiny_config

  return tiny_config(
    total_steps=total_steps,
    eval_every=total_steps,
    log_every=1,
    checkpoint_every=1000,
    **COMPARABLE,
    **{"domain.verifier": verifier, "mesh.data": -1},
  )


def count_host_rows(counter: dict[str, int]) -> None:
  """Wraps the arithmetic domain's host functions so that each process counts the rows it scores itself."""
  from genenv_jax.tasks.arithmetic.domain import ArithmeticDomain

  for name in ("verify_host", "parse_env_output_host"):
    original = getattr(ArithmeticDomain, name)

    def wrapped(self, first, *rest, _original=original, _name=name):
      counter[_name] = counter.get(_name, 0) + int(len(first))
      counter[_name + "_calls"] = counter.get(_name + "_calls", 0) + 1
      return _original(self, first, *rest)

    setattr(ArithmeticDomain, name, wrapped)


def flat_host_state(state, mesh) -> dict:
  """{pytree path: numpy array} of the whole state, gathered across processes."""
  import jax

  from genenv_jax.parallel import sharding as shd

  host = shd.to_host(state, mesh)
  return {jax.tree_util.keystr(path): value for path, value in jax.tree_util.tree_flatten_with_path(host)[0]}


def main(argv=None) -> int:
  args = parse_args(argv)
  # XLA:CPU's cheapest pipeline: compiles in about a third of the default's time; every worker uses the same flags,
  # so the pair and the single process still run the same code.
  os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.local_devices} {as_xla_flags(CHEAPEST)}"
  os.environ["JAX_PLATFORMS"] = "cpu"
  import jax
  import numpy as np

  from genenv_jax.parallel import sharding as shd

  shd.maybe_initialize_distributed(False)  # multi-process when the environment says so (JAX_NUM_PROCESSES > 1)

  from genenv_jax.coevolution.build import build
  from genenv_jax.tasks.host_callback import wait_for_host_callbacks
  from genenv_jax.training.checkpointing import Checkpointer
  from genenv_jax.training.loop import train
  from genenv_jax.training.metrics import MetricsWriter

  counter: dict[str, int] = {}
  count_host_rows(counter)
  config = worker_config(args.verifier, args.total_steps)
  summary = train(config, args.workdir, log=lambda msg: print(msg, flush=True))

  run, target = build(config, abstract=True)  # shapes and shardings only
  with Checkpointer(os.path.join(args.workdir, "checkpoints"), save_every=1) as own:  # all processes together
    state, _ = own.restore(None, target)
  dumps = {"": flat_host_state(state, run.mesh)}
  if args.restore_from:
    with Checkpointer(os.path.join(args.restore_from, "checkpoints"), save_every=1) as other:
      dumps[".restored"] = flat_host_state(other.restore(None, target)[0], run.mesh)
  wait_for_host_callbacks(state)

  info = {
    "process_index": jax.process_index(),
    "process_count": jax.process_count(),
    "device_count": jax.device_count(),
    "local_device_count": jax.local_device_count(),
    "mesh": dict(run.mesh.shape),
    "host_rows": counter,
  }
  with MetricsWriter(os.path.join(args.workdir, "writer_probe")) as probe:  # enabled by default on process 0 only
    info["writer_enabled"] = probe.enabled
  with open(f"{args.out}.process{jax.process_index()}.json", "w") as f:
    json.dump(info, f)
  if jax.process_index() == 0:
    for suffix, values in dumps.items():
      np.savez(f"{args.out}{suffix}.npz", **values)
    with open(f"{args.out}.summary.json", "w") as f:
      json.dump(summary, f)
  return 0


if __name__ == "__main__":
  sys.exit(main())
