"""CLI: python -m genenv_jax.main --config=configs/default.py[:variant] --workdir=DIR [--config.key=value ...]

Overrides use ml_collections' config_flags (`--config.agent.optimizer.lr=1e-6`); an unknown key or a value of the
wrong type is rejected while the flags are parsed, before any work starts.
"""

from __future__ import annotations

import os

from absl import app, flags
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file (get_config(arg) style), e.g. "
                                          "configs/default.py or configs/default.py:smoke.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for checkpoints, TensorBoard events and summary.json "
                               "(a restart with the same workdir resumes).")
flags.mark_flags_as_required(["config", "workdir"])


def _first_last(rows: list[dict], key: str, window: int = 3) -> tuple[float, float] | None:
  values = [r[key] for r in rows if key in r]
  if not values:
    return None
  w = max(1, min(window, len(values) // 2 or 1))
  return sum(values[:w]) / w, sum(values[-w:]) / w


def format_summary(summary: dict) -> str:
  """The end-of-run report: where p̂, the band fraction, difficulty and held-out accuracy started and ended."""
  lines = [f"finished at step {summary.get('final_step')} in {summary.get('wall_time_s', 0.0):.0f} s"]
  labels = {"p_hat_mean": "mean p̂ on generated tasks", "band_frac": "fraction in the α band",
            "difficulty_mean": "generated-task difficulty", "agent_reward": "agent reward (training tasks)",
            "invalid_frac": "invalid env tasks"}
  for key, label in labels.items():
    pair = _first_last(summary.get("steps", []), key)
    if pair is not None:
      lines.append(f"  {label:<32} {pair[0]:.3f} -> {pair[1]:.3f}")
  evals = summary.get("evals", [])
  if evals:
    lines.append(f"  {'held-out accuracy':<32} {evals[0]['accuracy']:.3f} -> {evals[-1]['accuracy']:.3f} "
                 f"(steps {evals[0]['step']} -> {evals[-1]['step']})")
  return "\n".join(lines)


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  config = _CONFIG.value
  if config.get("distributed", False):
    from genenv_jax.sharding import initialize_distributed
    initialize_distributed()
  from genenv_jax import sharding
  from genenv_jax.train import train  # imported after flag parsing: bad flags fail before JAX starts
  workdir = os.path.expanduser(_WORKDIR.value)
  summary = train(config, workdir, log=lambda msg: print(msg, flush=True) if sharding.is_main_process() else None)
  if sharding.is_main_process():
    print(format_summary(summary), flush=True)
    print(f"summary: {os.path.join(workdir, 'summary.json')}; TensorBoard: tensorboard --logdir "
          f"{os.path.join(workdir, 'tensorboard')}", flush=True)


if __name__ == "__main__":
  app.run(main)
