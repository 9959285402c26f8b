"""One warm start shared by the runs that would compute the same one: a sweep's variants of one seed.

A sweep's GenEnv, GenEnv-Random and Static runs of one seed start from the same warm start: the same models, seeds,
SFT batches and steps, and differ only in what comes after (whether the env is trained, what the pools replay). On a
CPU the warm start is a third of a demo run (docs/EXPERIMENTS.md), so a sweep computes it once per seed and the other
variants read it back (`python -m genenv_jax.main --warm_start_reuse=DIR`; `genenv_jax.sweep` passes DIR/warm_starts).

A warm start is kept under the fingerprint of everything that decides its bits:
  - the config, less the keys the warm start never reads (IGNORED: the schedule, the pools, whether the env is
    trained, the mode beyond whether the env is warmed at all);
  - the code: a digest of every .py file of the package, so that a changed program never reads an old warm start;
  - the arithmetic: jax's and jaxlib's versions, XLA_FLAGS (another ISA rounds otherwise) and the devices.
Two runs with the same fingerprint compute bit-identical warm starts on this machine, so reading one back changes no
figure of the run (tests/unit/training/test_warm_start_reuse.py checks a reused run against a fresh one). Any other
difference misses, and the run warms up itself and keeps its own. Local directories only, on one process.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import pathlib
import shutil
import tempfile
from typing import Any, NamedTuple

import jax
import ml_collections

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1]  # genenv_jax/

# Config keys (dotted) that the warm start does not read: the run's schedule and checkpoints, what the step does after
# the warm start (env.train, the pools, both models' RL updates: GRPO's settings but the group size G, which fixes
# the p̂ values the env's warm start shows; the env's loss, KL and prompts per step; both optimizers, the SFT's being
# warm_start.lr), and the mode, of which only "is the env warmed" (not plain GRPO) matters. So a screen of an update
# setting reads back the warm start its sweep kept.
IGNORED = (
  "total_steps",
  "checkpoint_every",
  "eval_every",
  "log_every",
  "max_checkpoints",
  "allow_config_change",
  "mode",
  "env.train",
  "pools",
  *(f"agent.grpo.{key}" for key in ("advantage", "clip_low", "clip_high", "kl_coef", "kl_estimator", "entropy_coef")),
  "agent.grpo.loss_agg",
  "agent.grpo.minibatches",
  "agent.optimizer",
  *(f"env.{key}" for key in ("objective", "num_seeds", "samples_per_seed", "kl_coef", "max_kl", "kl_cap_mode")),
  "env.optimizer",
)


def _drop(tree: dict[str, Any], dotted: str) -> None:
  *parents, leaf = dotted.split(".")
  for key in parents:
    tree = tree.get(key, {})
  tree.pop(leaf, None)


def source_digest(package_dir: pathlib.Path | None = None) -> str:
  """sha256 over the relative path and bytes of every .py file of the package (sorted): the code's identity."""
  root = pathlib.Path(package_dir or PACKAGE_DIR)
  h = hashlib.sha256()
  for path in sorted(root.rglob("*.py")):
    h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
  return h.hexdigest()


def fingerprint(config: ml_collections.ConfigDict, env_warmed: bool) -> str:
  """The key of the warm start `config` computes (module docstring); `env_warmed`: whether the mode warms the env."""
  tree = json.loads(config.to_json_best_effort())
  for key in IGNORED:
    _drop(tree, key)
  facts = {
    "config": tree,
    "env_warmed": env_warmed,
    "source": source_digest(),
    "jax": jax.__version__,
    "jaxlib": importlib.metadata.version("jaxlib"),
    "xla_flags": os.environ.get("XLA_FLAGS", ""),
    "devices": [str(d.device_kind) for d in jax.devices()],
  }
  return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:24]


class Entry(NamedTuple):
  """Where a run's warm start is kept: the shared directory and the run's fingerprint."""

  directory: str
  key: str


def entry_dir(directory: str, key: str) -> str:
  return os.path.join(os.path.abspath(os.path.expanduser(directory)), key)


def check_usable(directory: str) -> None:
  """Raises ValueError where reuse cannot work: a remote path, or a run over several processes."""
  if "://" in directory:
    raise ValueError(f"--warm_start_reuse needs a local directory, got {directory!r}")
  if jax.process_count() > 1:
    raise ValueError(
      f"--warm_start_reuse works on one process; this run has {jax.process_count()} (leave the flag out on a pod)"
    )


def load(directory: str, key: str, models: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
  """(models, about) kept under `key`, restored onto the shapes and shardings of `models`; None if none is kept."""
  from genenv_jax.training.checkpointing import Checkpointer

  path = entry_dir(directory, key)
  if not os.path.isdir(path):
    return None
  with Checkpointer(path, save_every=1, max_to_keep=1, async_save=False) as kept:
    saved, meta = kept.restore(kept.latest_step(), {"models": models})
  return saved["models"], meta.get("about", {})


def save(directory: str, key: str, models: dict[str, Any], about: dict[str, Any]) -> str:
  """Keeps `models` and `about` (JSON) under `key`, written beside it and renamed into place, so that a reader never
  sees half an entry and two runs finishing the same warm start at once keep one. Returns the entry's directory."""
  from genenv_jax.training.checkpointing import Checkpointer

  path = entry_dir(directory, key)
  if os.path.isdir(path):
    return path
  os.makedirs(os.path.dirname(path), exist_ok=True)
  scratch = tempfile.mkdtemp(prefix=f".{key}.", dir=os.path.dirname(path))
  try:
    with Checkpointer(os.path.join(scratch, "entry"), save_every=1, max_to_keep=1, async_save=False) as kept:
      kept.save(0, {"models": models}, {"about": about}, force=True)
      kept.wait()
    try:
      os.rename(os.path.join(scratch, "entry"), path)
    except OSError:  # another run kept the same warm start first: the two are the same bits
      if not os.path.isdir(path):
        raise
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
  return path
