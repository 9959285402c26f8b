"""CLI: python -m genenv_jax.main --config=configs/default.py[:variant] --workdir=DIR [--config.key=value ...]

Multi-host: every host runs this same command. `--config.distributed=True` (or JAX_NUM_PROCESSES > 1 with
JAX_COORDINATOR_ADDRESS and JAX_PROCESS_ID in the environment) starts JAX's distributed runtime first; on Cloud TPU
pods the coordinator, process count and id are auto-detected. Only process 0 prints and writes summaries.

Overrides use ml_collections' config_flags (`--config.agent.optimizer.lr=1e-6`); an unknown key or a value of the
wrong type is rejected while the flags are parsed, before any work starts.
"""

from __future__ import annotations

import os

from absl import app, flags, logging
from ml_collections import config_flags

from genenv_jax import cli


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the command-line flags on `flag_values` (a test lists them on a fresh FlagValues). Called on absl's FLAGS
  only when this module runs as a program, so that importing it next to another program's module with flags of the
  same name (tests, tools) never collides in absl's global registry."""
  global _CONFIG, _WORKDIR, _COMPILE_CACHE, _WARM_START_REUSE
  _CONFIG = config_flags.DEFINE_config_file(
    "config",
    None,
    "Config file (get_config(arg) style), e.g. configs/default.py or configs/default.py:smoke.",
    lock_config=True,
    flag_values=flag_values,
  )
  _WORKDIR = flags.DEFINE_string(
    "workdir",
    None,
    "Directory for checkpoints, TensorBoard events and summary.json (a restart with the same workdir resumes).",
    flag_values=flag_values,
  )
  _COMPILE_CACHE = flags.DEFINE_string(
    "compile_cache",
    "",
    "Directory of JAX's persistent compilation cache, so that a restart does not compile the step again (default: "
    "$JAX_COMPILATION_CACHE_DIR where set, else WORKDIR/compile_cache; 'off' disables it).",
    flag_values=flag_values,
  )
  _WARM_START_REUSE = flags.DEFINE_string(
    "warm_start_reuse",
    "",
    "Directory of warm starts shared between runs (a sweep's variants of one seed): the run reads back the one kept "
    "under its fingerprint instead of computing it, else keeps its own there (genenv_jax.training.warm_start_reuse). "
    "Empty: off.",
    flag_values=flag_values,
  )
  flags.mark_flags_as_required(["config", "workdir"], flag_values=flag_values)


def format_summary(summary: dict) -> str:
  """The end-of-run report: the paper's three phenomena with their numbers (genenv_jax.reporting.summary_report)."""
  from genenv_jax.reporting.summary_report import format_report

  return format_report(summary)


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not flags.FLAGS["verbosity"].present:  # orbax logs every checkpoint step at INFO; keep the console to progress
    logging.set_verbosity(logging.WARNING)
  config = _CONFIG.value
  from genenv_jax.training.config_checks import validate

  validate(config)  # every bad value at once, before JAX starts or anything is built (cli: exit 2)
  from genenv_jax.coevolution.settings import from_config
  from genenv_jax.parallel import sharding

  # Before any JAX computation: config.distributed=True, or JAX_NUM_PROCESSES > 1 from the launch environment.
  sharding.maybe_initialize_distributed(from_config(config).distributed)
  from genenv_jax.training.loop import train  # imported after flag parsing: bad flags fail before JAX starts

  workdir = os.path.expanduser(_WORKDIR.value)
  if _COMPILE_CACHE.value != "off":
    from genenv_jax.parallel import compile_cache

    compile_cache.enable(compile_cache.directory_for(_COMPILE_CACHE.value, workdir))
  # Missing data (DataMissingError names the dataset, the file and the fetch command) and other user errors are
  # reported by cli.run as one `error:` line with exit status 2.
  summary = train(
    config,
    workdir,
    log=lambda msg: print(msg, flush=True) if sharding.is_main_process() else None,
    warm_start_reuse_dir=os.path.expanduser(_WARM_START_REUSE.value) or None,
  )
  if sharding.is_main_process():
    print(format_summary(summary), flush=True)
    print(
      f"summary: {os.path.join(workdir, 'summary.json')}; TensorBoard: tensorboard --logdir "
      f"{os.path.join(workdir, 'tensorboard')}",
      flush=True,
    )


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.main")
