"""What a run logs to TensorBoard: the step's metrics as tags named for what they measure, grouped by topic.

One tag per measured quantity, under six topics:
  curriculum/  the env's fresh tasks as the agent meets them: mean p̂, the fraction in the α band (and the band's
               limits, to draw beside p̂), R_env, invalid and all-or-nothing fractions, generated difficulty, mean p̂
               and difficulty apart for tasks written from base seeds and from generated ones; the replayed tasks'
               p̂ and difficulty; histograms of p̂ (one bin per k/G) and of difficulty (one per level).
  agent/       the GRPO update: reward, policy-gradient loss, KL to the reference, entropy, groups without signal,
               response length, gradient norm before clipping and the fraction of updates clipped, update norm,
               learning rate. The importance ratio and PPO clip fraction only with several mini-batches: with one,
               every update is on-policy, so the ratio is 1 and nothing is clipped by construction.
  env/         the env update (RWR or GRPO on R_env): its loss terms, KL to the initial env, the update's own KL and
               the cap's scale, gradient and update norms, learning rate, output length. Logged only at steps where
               the env was updated: a step that kept no task in the band has no env loss, not a loss of 0.
  pool/        D_train and (when an env writes tasks) D_env: size, share of seeds, of evaluated tasks, staleness.
  eval/        held-out accuracy with its binomial standard error, and per difficulty (training/loop.py).
  perf/        seconds per step by loop phase (the jitted step, evaluation, checkpoint, logging, adding up to the wall
               time per step), averaged over the steps since the last logged one; tokens/s, memory.
Not logged: values that are another tag in a different unit (pool fill = size / capacity, token counts beside
lengths), exact duplicates for exact-match rewards (the agent's success rate is its mean reward), the advantages'
mean (0 by construction), the KL over all env tokens (≈ the kept tasks' KL), and the skipped-update counters while
they are 0 (summary.json holds them; once non-zero they are logged).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from genenv_jax.coevolution.settings import Settings

# step metric -> tag, for metrics logged whenever the step produces them
_ALWAYS = {
  "agent/reward_mean": "agent/reward_mean",
  "agent/pg_loss": "agent/pg_loss",
  "agent/kl": "agent/kl_to_reference",
  "agent/entropy": "agent/entropy",
  "agent/zero_std_frac": "agent/groups_without_signal_frac",
  "agent/response_len": "agent/response_len",
  "agent/grad_norm": "agent/grad_norm_before_clip",
  "agent/grad_clipped": "agent/grad_clipped_frac",
  "agent/update_norm": "agent/update_norm",
  "replay/p_hat_mean": "curriculum/replay_p_hat_mean",
  "replay/difficulty_mean": "curriculum/replay_difficulty_mean",
}
_OFF_POLICY = {  # the agent's importance ratio: meaningful only when a batch takes several updates
  "agent/ratio_mean": "agent/ratio_mean",
  "agent/ratio_max": "agent/ratio_max",
  "agent/clip_frac": "agent/ppo_clip_frac",
}
_FRESH_TASKS = {  # the env's tasks of this step; needs at least one valid task
  "env/p_hat_mean": "curriculum/p_hat_mean",
  "env/band_frac": "curriculum/band_frac",
  "env/r_env_mean": "curriculum/r_env_mean",
  "env/p_hat_0_or_1_frac": "curriculum/p_hat_0_or_1_frac",
  "env/difficulty_mean": "curriculum/difficulty_mean",
  "env/difficulty_std": "curriculum/difficulty_std",
  "env/difficulty_max": "curriculum/difficulty_max",
  # the same tasks split by the env prompt's seed: a base seed task, or a generated task from D_env (each left out
  # when no valid task of that kind was written this step)
  "env/p_hat_mean_base_seeded": "curriculum/p_hat_mean_from_base_seeds",
  "env/p_hat_mean_pool_seeded": "curriculum/p_hat_mean_from_generated_seeds",
  "env/difficulty_mean_base_seeded": "curriculum/difficulty_mean_from_base_seeds",
  "env/difficulty_mean_pool_seeded": "curriculum/difficulty_mean_from_generated_seeds",
}
_ENV_WRITES = {  # whenever the env wrote tasks
  "env/invalid_frac": "curriculum/invalid_frac",
  "env/output_len": "env/output_len",
}
_ENV_UPDATE = {  # only at steps with an env update
  "env/nll": "env/rwr_nll",
  "env/pg_loss": "env/pg_loss",
  "env/kl": "env/kl_to_initial",
  "env/weight_max": "env/rwr_weight_max",
  "env/grad_norm": "env/grad_norm_before_clip",
  "env/grad_clipped": "env/grad_clipped_frac",
  "env/update_norm": "env/update_norm",
  "env/update_kl": "env/update_kl",
  "env/cap_scale": "env/kl_cap_scale",
}
_POOL_STATS = (
  "size",
  "frac_seed",
  "frac_evaluated",
  "mean_staleness",
  "mean_times_sampled",
  "mean_p_hat",
  "mean_difficulty",
)
_COUNTERS = {"counters/skipped_agent": "agent/skipped_updates", "counters/skipped_env": "env/skipped_updates"}

# the curriculum chart: mean p̂ over the α band, shaded (TensorBoard's custom-scalars margin chart)
P_HAT_CHART = {"value": "curriculum/p_hat_mean", "lower": "curriculum/band_low", "upper": "curriculum/band_high"}


def env_updated(metrics: Mapping[str, Any], settings: Settings) -> bool:
  """Whether this step updated the env: RWR needs a kept task (one in the band); GRPO on R_env, a valid task."""
  if not (settings.num_fresh and settings.env.train) or "env/grad_norm" not in metrics:
    return False
  if settings.env.objective == "rwr":
    return float(metrics.get("env/num_kept", 0.0)) > 0
  return float(metrics.get("env/invalid_frac", 1.0)) < 1.0


def step_scalars(metrics: Mapping[str, Any], settings: Settings) -> dict[str, float]:
  """The TensorBoard scalars of one step's host metrics (module docstring); values that do not exist at this step
  (no env update, no valid env task, an env-less variant) are left out rather than written as 0."""

  def pick(table: Mapping[str, str]) -> dict[str, float]:
    return {tag: float(metrics[name]) for name, tag in table.items() if name in metrics}

  out = pick(_ALWAYS)
  if settings.agent.grpo.minibatches > 1:
    out.update(pick(_OFF_POLICY))
  if settings.num_fresh:
    out.update(pick(_ENV_WRITES))
    if float(metrics.get("env/invalid_frac", 1.0)) < 1.0:
      out.update(pick(_FRESH_TASKS))
    out["curriculum/band_low"], out["curriculum/band_high"] = settings.env.curriculum.band
  if env_updated(metrics, settings):
    out.update(pick(_ENV_UPDATE))
  pools = ("train", "env") if settings.num_fresh else ("train",)
  for pool in pools:
    evaluated = float(metrics.get(f"pool/{pool}_frac_evaluated", 0.0)) > 0
    for stat in _POOL_STATS:
      name = f"pool/{pool}_{stat}"
      if name in metrics and (evaluated or stat != "mean_p_hat"):  # a mean p̂ needs an evaluated task
        out[name] = float(metrics[name])
  for name, tag in _COUNTERS.items():
    if float(metrics.get(name, 0.0)) > 0:
      out[tag] = float(metrics[name])
  return {k: v for k, v in out.items() if math.isfinite(v)}


def aligned_bin_edges(values: np.ndarray, grid: float) -> np.ndarray:
  """Histogram edges centred on multiples of `grid` (k/G for p̂, 1 for integer difficulty), so that each attainable
  value has its own bin and nothing falls between two."""
  lo = math.floor(float(np.min(values)) / grid + 1e-6)
  hi = math.ceil(float(np.max(values)) / grid - 1e-6)
  return (np.arange(lo, hi + 2) - 0.5) * grid


def step_histograms(metrics: Mapping[str, Any], settings: Settings) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  """{tag: (values, bin edges)} of the valid fresh tasks' p̂ and difficulty."""
  out = {}
  for name, tag, grid in (
    ("hist/p_hat", "curriculum/p_hat", 1.0 / settings.agent.grpo.group_size),
    ("hist/difficulty", "curriculum/difficulty", 1.0),
  ):
    if name in metrics:
      values = np.asarray(metrics[name], np.float64)
      values = values[values >= 0]  # invalid tasks are marked -1
      if values.size:
        out[tag] = (values, aligned_bin_edges(values, grid))
  return out


def examples_table(
  metrics: Mapping[str, Any], tokenizer: Any, domain: Any, success_threshold: float
) -> list[list[str]] | None:
  """The step's example tasks (spread over p̂ from the lowest to the highest: `step.examples_across_p_hat`) as table
  rows: task, env text ("(replayed)" for a task drawn from D_train), gold answer, difficulty, p̂, the first rollout,
  its reward, and whether it counts as a success (✓ / ✗); invalid env output is shown as such."""
  if "examples/prompt_ids" not in metrics:
    return None
  gold = getattr(domain, "gold_answer", None)
  env_tokens = metrics.get("examples/env_tokens")
  fresh = metrics.get("examples/fresh")
  rows = [["task (agent prompt)", "env wrote", "gold", "difficulty", "p̂", "agent's first rollout", "reward", "success"]]
  for i in range(len(metrics["examples/prompt_ids"])):
    valid = bool(metrics["examples/valid"][i])
    reward = float(metrics["examples/reward"][i])
    written = env_tokens is not None and i < len(env_tokens) and (fresh is None or bool(fresh[i]))
    env_text = tokenizer.decode(env_tokens[i]) if written else "(replayed)"
    if not valid:
      rows.append(["(invalid)", repr(env_text), "", "", "", "", "", "invalid"])
      continue
    rows.append(
      [
        repr(tokenizer.decode(metrics["examples/prompt_ids"][i])),
        repr(env_text),
        repr(gold(metrics["examples/spec"][i])) if gold is not None else "",
        f"{float(metrics['examples/difficulty'][i]):g}",
        f"{float(metrics['examples/p_hat'][i]):.2f}",
        repr(tokenizer.decode(metrics["examples/response"][i])),
        f"{reward:.2f}",
        "✓" if reward >= success_threshold else "✗",
      ]
    )
  return rows


# ---- writing -------------------------------------------------------------------------------------------------------


def host_peak_memory_gib() -> float:
  """This process's peak resident memory (Linux ru_maxrss is in KiB)."""
  import resource  # pylint: disable=import-outside-toplevel  (POSIX only)

  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def device_peak_memory_gib() -> float | None:
  """The first local device's peak allocated memory, where the backend reports it (GPU, TPU; not the CPU)."""
  import jax  # pylint: disable=import-outside-toplevel

  stats = jax.local_devices()[0].memory_stats() or {}
  peak = stats.get("peak_bytes_in_use")
  return None if peak is None else peak / 2**30


def log_run_start(writer: Any, config: Any, settings: Settings) -> None:
  """The config as text, and the custom-scalars layout that draws p̂ beside the α band (when an env writes tasks)."""
  writer.text(0, "run/config", f"```\n{config}\n```")
  if settings.num_fresh:
    writer.custom_scalars({"curriculum": {"mean p̂ of the env's tasks, over the α band (shaded)": P_HAT_CHART}})


def log_step(writer: Any, run: Any, step: int, metrics: Mapping[str, Any], extra: Mapping[str, float]) -> None:
  """One logged step: its scalars (`step_scalars`) plus `extra` (learning rates), the k/G-aligned histograms and the
  examples table."""
  settings = run.coevolution.settings
  writer.scalars(step, {**step_scalars(metrics, settings), **extra})
  for tag, (values, edges) in step_histograms(metrics, settings).items():
    writer.histogram(step, tag, values, edges=edges)
  table = examples_table(metrics, run.tokenizer, run.domain, settings.domain.success_threshold)
  if table is not None:
    writer.text(step, "curriculum/examples", table)


def log_perf(writer: Any, run: Any, step: int, metrics: Mapping[str, Any], seconds: Mapping[str, float]) -> None:
  """Where the time of the steps since the last logged one went, per step (`loop.PhaseTimes.per_step`: `step`,
  `eval`, `checkpoint`, `log`, adding up to `wall`), written once they are all done; tokens/s of the step's sampling
  (this step's tokens over the mean step time); peak memory."""
  scalars = {f"perf/{name}_s": s for name, s in seconds.items()}
  if seconds.get("step", 0) > 0:
    scalars["perf/agent_tokens_per_s"] = float(metrics["agent/tokens"]) / seconds["step"]
    if run.coevolution.settings.num_fresh:
      scalars["perf/env_tokens_per_s"] = float(metrics["env/tokens"]) / seconds["step"]
  scalars["perf/host_peak_memory_gib"] = host_peak_memory_gib()
  device_peak = device_peak_memory_gib()
  if device_peak is not None:
    scalars["perf/device_peak_memory_gib"] = device_peak
  writer.scalars(step, scalars)


def log_eval(writer: Any, step: int, result: Mapping[str, Any]) -> None:
  """Held-out accuracy with its binomial standard error, per difficulty, and a table with the item counts."""
  n = int(result["n"])
  acc = float(result["accuracy"])
  scalars = {"eval/accuracy": acc, "eval/accuracy_se": math.sqrt(acc * (1 - acc) / max(n, 1))}
  rows = [
    ["difficulty", "items", "accuracy", "standard error"],
    ["all", str(n), f"{acc:.3f}", f"{scalars['eval/accuracy_se']:.3f}"],
  ]
  counts = result.get("n_by_difficulty", {})
  for d, a in result["by_difficulty"].items():
    scalars[f"eval/accuracy_difficulty_{d}"] = a
    k = int(counts.get(d, 0))
    rows.append([d, str(k), f"{a:.3f}", f"{math.sqrt(a * (1 - a) / k):.3f}" if k else ""])
  writer.scalars(step, scalars)
  writer.text(step, "eval/by_difficulty", rows)
