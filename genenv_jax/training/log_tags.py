"""What a run logs to TensorBoard: the step's metrics, each under the one name that the step gives it, TensorBoard
shows and summary.json's rows use (`coevolution.step`; `training.loop.SUMMARY_KEYS`), grouped by topic.

This module only decides which of the step's metrics are written at which step, for which variant, and describes
each tag in one line (`DESCRIPTIONS`, shown in TensorBoard beside the chart). One tag per measured quantity, under
six topics:
  curriculum/  the env's fresh tasks as the agent meets them: mean p̂, the fraction in the α band (and the band's
               limits, to draw beside p̂), R_env, invalid and all-or-nothing fractions, generated difficulty, mean p̂
               and difficulty apart for tasks written from base seeds and from generated ones; the replayed tasks'
               p̂ and difficulty; histograms of p̂ (one bin per k/G) and of difficulty (one per level). The fresh
               tasks' figures only at a step with a valid env task (`FRESH_TASKS`); the split by seed source only
               where some task of that source is valid.
  agent/       the GRPO update: reward, policy-gradient loss, KL to the reference, entropy, groups without signal,
               response length, gradient norm before clipping and the fraction of updates clipped, update norm,
               learning rate. The importance ratio and PPO clip fraction only with several mini-batches
               (`OFF_POLICY`): with one, every update is on-policy, so the ratio is 1 and nothing is clipped by
               construction.
  env/         the env update (RWR or GRPO on R_env): its loss terms, KL to the initial env, the update's own KL and
               the cap's scale, gradient and update norms, learning rate: only at steps where the env was updated
               (`ENV_UPDATE`, `env_updated`), as a step that kept no task in the band has no env loss, not a loss of
               0; and the env's output length, whenever it writes.
  pool/        D_train and (when an env writes tasks) D_env: size, share of seeds, staleness, times sampled, mean p̂
               (once some task has one) and difficulty; D_train's share of tasks with a measured p̂ (D_env's is
               1 - its share of seeds: its seeds are never measured, its generated tasks always are).
  eval/        held-out accuracy with its binomial standard error, and per difficulty (training/loop.py).
  perf/        seconds per step by loop phase (the jitted step, evaluation, checkpoint, logging, adding up to the wall
               time per step), averaged over the steps since the last logged one; tokens/s, memory.
Not logged: values that are another tag in a different unit (pool fill = size / capacity, token counts beside
lengths) or its complement (D_env's share of measured tasks), exact duplicates for exact-match rewards (the agent's
success rate is its mean reward), the advantages' mean (0 by construction), the KL over all env tokens (≈ the kept
tasks' KL), and the skipped-update counters while they are 0 (summary.json holds them; once non-zero they are
logged). The step's other figures (agent/loss, agent/tokens, env/num_kept, ...) are for the loop and benchmarks.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from genenv_jax.coevolution.settings import Settings
from genenv_jax.rl.curriculum import RWR

# Which of the step's metrics are logged when (step_scalars). Logged whenever the step produces them:
ALWAYS = (
  "agent/reward_mean",
  "agent/pg_loss",
  "agent/kl_to_reference",
  "agent/entropy",
  "agent/groups_without_signal_frac",
  "agent/response_len",
  "agent/grad_norm_before_clip",
  "agent/grad_clipped_frac",
  "agent/update_norm",
  "curriculum/replay_p_hat_mean",
  "curriculum/replay_difficulty_mean",
)
OFF_POLICY = ("agent/ratio_mean", "agent/ratio_max", "agent/ppo_clip_frac")  # only with several mini-batches
FRESH_TASKS = (  # the env's tasks of this step; needs at least one valid task
  "curriculum/p_hat_mean",
  "curriculum/band_frac",
  "curriculum/r_env_mean",
  "curriculum/p_hat_0_or_1_frac",
  "curriculum/difficulty_mean",
  "curriculum/difficulty_std",
  "curriculum/difficulty_max",
  # the same tasks split by the env prompt's seed: a base seed task, or a generated task from D_env (each NaN, so left
  # out, when no valid task of that kind was written this step)
  "curriculum/p_hat_mean_from_base_seeds",
  "curriculum/p_hat_mean_from_generated_seeds",
  "curriculum/difficulty_mean_from_base_seeds",
  "curriculum/difficulty_mean_from_generated_seeds",
)
ENV_WRITES = ("curriculum/invalid_frac", "env/output_len")  # whenever the env wrote tasks
ENV_UPDATE = (  # only at steps with an env update
  "env/rwr_nll",
  "env/pg_loss",
  "env/kl_to_initial",
  "env/rwr_weight_max",
  "env/grad_norm_before_clip",
  "env/grad_clipped_frac",
  "env/update_norm",
  "env/update_kl",
  "env/kl_cap_scale",
)
POOL_STATS = {  # per pool; a mean p̂ only once some task in the pool has been measured
  "train": (
    "size",
    "frac_seed",
    "frac_evaluated",
    "mean_staleness",
    "mean_times_sampled",
    "mean_p_hat",
    "mean_difficulty",
  ),
  "env": ("size", "frac_seed", "mean_staleness", "mean_times_sampled", "mean_p_hat", "mean_difficulty"),
}
COUNTERS = ("agent/skipped_updates", "env/skipped_updates")  # once non-zero
HISTOGRAMS = ("curriculum/p_hat", "curriculum/difficulty")  # per valid fresh task (invalid ones are -1)

# the curriculum chart: mean p̂ over the α band, shaded (TensorBoard's custom-scalars margin chart)
P_HAT_CHART = {"value": "curriculum/p_hat_mean", "lower": "curriculum/band_low", "upper": "curriculum/band_high"}

_POOLS = {"train": "D_train (tasks the agent trains on)", "env": "D_env (tasks the env is prompted with)"}
_POOL_STAT_DESCRIPTIONS = {
  "size": "number of tasks in {pool}",
  "frac_seed": "share of {pool} that are base seed tasks (the rest were generated)",
  "frac_evaluated": "share of {pool} whose p̂ has been measured at least once",
  "mean_staleness": "mean age of {pool}'s tasks, in steps since they joined it",
  "mean_times_sampled": "mean number of times {pool}'s tasks have been drawn",
  "mean_p_hat": "mean last-measured p̂ of {pool}'s measured tasks",
  "mean_difficulty": "mean difficulty of {pool}'s tasks",
}
_PHASES = {
  "wall": "wall time",
  "step": "time in the jitted step (dispatch, run) and summary rows",
  "eval": "time in held-out evaluation",
  "checkpoint": "time writing checkpoints and summary.json",
  "log": "time writing TensorBoard",
}

# One line per tag, shown in TensorBoard (the summary metadata's description); a test checks every tag has one.
DESCRIPTIONS = {
  # agent/
  "agent/reward_mean": "mean reward of the agent's rollouts on this step's valid tasks (fresh and replayed)",
  "agent/pg_loss": "GRPO's clipped policy-gradient surrogate, token mean over the step's mini-batches",
  "agent/kl_to_reference": "KL of the agent to its reference policy on its rollouts' tokens (the KL estimator set)",
  "agent/entropy": "mean token entropy of the agent's policy on its rollouts",
  "agent/groups_without_signal_frac": "share of task groups whose G rewards are all equal: zero advantage, no signal",
  "agent/response_len": "mean length of the agent's rollouts, in tokens",
  "agent/grad_norm_before_clip": "global norm of the agent's gradient before clipping, mean over mini-batches",
  "agent/grad_clipped_frac": "share of the agent's mini-batch updates whose gradient norm was clipped",
  "agent/update_norm": "global norm of the agent's parameter update, mean over mini-batches",
  "agent/ratio_mean": "mean importance ratio π_new / π_old over the agent's tokens (1 on-policy)",
  "agent/ratio_max": "largest importance ratio π_new / π_old over the agent's tokens",
  "agent/ppo_clip_frac": "share of the agent's tokens whose importance ratio was clipped",
  "agent/skipped_updates": "agent updates skipped so far (non-finite, or a mini-batch without a valid token)",
  "agent/lr": "the agent's learning rate at this step",
  # curriculum/
  "curriculum/p_hat_mean": "mean p̂ (the agent's success rate over its G rollouts) on the env's valid tasks",
  "curriculum/band_frac": "share of the env's valid tasks whose p̂ lies in the α band |p̂ - α| <= k_min",
  "curriculum/band_low": "lower limit of the α band, α - k_min",
  "curriculum/band_high": "upper limit of the α band, α + k_min",
  "curriculum/r_env_mean": "mean env reward R_env = exp(-β (p̂ - α)²) on the env's valid tasks",
  "curriculum/p_hat_0_or_1_frac": "share of the env's valid tasks that the agent always fails or always solves",
  "curriculum/invalid_frac": "share of the env's outputs that do not parse into a valid task",
  "curriculum/difficulty_mean": "mean difficulty of the env's valid tasks",
  "curriculum/difficulty_std": "standard deviation of the difficulty of the env's valid tasks",
  "curriculum/difficulty_max": "largest difficulty among the env's valid tasks",
  "curriculum/p_hat_mean_from_base_seeds": "mean p̂ on the env's valid tasks written from base seed tasks",
  "curriculum/p_hat_mean_from_generated_seeds": "mean p̂ on the env's valid tasks written from generated D_env tasks",
  "curriculum/difficulty_mean_from_base_seeds": "mean difficulty of valid env tasks written from base seed tasks",
  "curriculum/difficulty_mean_from_generated_seeds": "mean difficulty of valid env tasks written from generated tasks",
  "curriculum/replay_p_hat_mean": "mean p̂ on the tasks replayed from D_train",
  "curriculum/replay_difficulty_mean": "mean difficulty of the tasks replayed from D_train",
  "curriculum/p_hat": "p̂ of the env's valid tasks, one bin per k/G",
  "curriculum/difficulty": "difficulty of the env's valid tasks, one bin per level",
  "curriculum/examples": "example tasks across p̂: the env's text, gold answer, difficulty, p̂, a rollout, its reward",
  # env/
  "env/output_len": "mean length of the env's outputs, in tokens",
  "env/rwr_nll": "RWR loss: the env's weighted negative log-likelihood of the kept tasks",
  "env/pg_loss": "the env's clipped policy-gradient surrogate on R_env advantages",
  "env/kl_to_initial": "KL of the env to the initial env on its task tokens (weighted by RWR's weights under RWR)",
  "env/rwr_weight_max": "largest RWR weight among the kept tasks",
  "env/grad_norm_before_clip": "global norm of the env's gradient before clipping",
  "env/grad_clipped_frac": "1 when the env's gradient norm was clipped, else 0",
  "env/update_norm": "global norm of the env's candidate parameter update, before the KL cap scales it",
  "env/update_kl": "KL of the candidate env update to the env before it, on the update's task tokens",
  "env/kl_cap_scale": "scale in [0, 1] applied to the env's update so that its KL stays under the cap",
  "env/skipped_updates": "env updates skipped so far (non-finite, or no kept task)",
  "env/lr": "the env's learning rate at this step",
  # pool/
  **{
    f"pool/{pool}_{stat}": _POOL_STAT_DESCRIPTIONS[stat].format(pool=name)
    for pool, name in _POOLS.items()
    for stat in POOL_STATS[pool]
  },
  # eval/
  "eval/accuracy": "greedy accuracy on the held-out set",
  "eval/accuracy_se": "binomial standard error of the held-out accuracy",
  "eval/accuracy_difficulty_*": "greedy held-out accuracy on the items of this difficulty level",
  "eval/by_difficulty": "held-out items, accuracy and standard error per difficulty level",
  # perf/
  **{f"perf/{phase}_s": f"{what}, s per step since the last logged step" for phase, what in _PHASES.items()},
  "perf/agent_tokens_per_s": "agent tokens sampled per second of step time",
  "perf/env_tokens_per_s": "env tokens sampled per second of step time",
  "perf/host_peak_memory_gib": "this process's peak resident host memory, GiB",
  "perf/device_peak_memory_gib": "peak memory allocated on the first local device, GiB",
  # the rest of the run
  "warm_start/agent_loss": "the agent's supervised warm-start loss",
  "warm_start/env_loss": "the env's supervised warm-start loss",
  "run/config": "the run's config",
}


def description(tag: str) -> str | None:
  """The tag's line in DESCRIPTIONS; a key ending in "*" stands for any tag that starts with what precedes it."""
  if tag in DESCRIPTIONS:
    return DESCRIPTIONS[tag]
  return next((d for key, d in DESCRIPTIONS.items() if key.endswith("*") and tag.startswith(key[:-1])), None)


def env_updated(metrics: Mapping[str, Any], settings: Settings) -> bool:
  """Whether this step updated the env: RWR needs a kept task (one in the band); GRPO on R_env, a valid task."""
  if not (settings.num_fresh and settings.env.train) or "env/grad_norm_before_clip" not in metrics:
    return False
  if settings.env.objective == RWR:
    return float(metrics.get("env/num_kept", 0.0)) > 0
  return float(metrics.get("curriculum/invalid_frac", 1.0)) < 1.0


def has_valid_fresh_task(metrics: Mapping[str, Any]) -> bool:
  """Whether the env wrote a valid task this step: the fresh tasks' figures (FRESH_TASKS) exist only then."""
  return float(metrics.get("curriculum/invalid_frac", 1.0)) < 1.0


def step_scalars(metrics: Mapping[str, Any], settings: Settings) -> dict[str, float]:
  """The TensorBoard scalars of one step's host metrics (module docstring); values that do not exist at this step
  (no env update, no valid env task, an env-less variant) are left out rather than written as 0."""

  def pick(names: tuple[str, ...]) -> dict[str, float]:
    return {name: float(metrics[name]) for name in names if name in metrics}

  out = pick(ALWAYS)
  if settings.agent.grpo.minibatches > 1:
    out.update(pick(OFF_POLICY))
  if settings.num_fresh:
    out.update(pick(ENV_WRITES))
    if has_valid_fresh_task(metrics):
      out.update(pick(FRESH_TASKS))
    out["curriculum/band_low"], out["curriculum/band_high"] = settings.env.curriculum.band
  if env_updated(metrics, settings):
    out.update(pick(ENV_UPDATE))
  for pool in ("train", "env") if settings.num_fresh else ("train",):
    measured = float(metrics.get(f"pool/{pool}_frac_evaluated", 0.0)) > 0  # a mean p̂ needs a measured task
    out.update(pick(tuple(f"pool/{pool}_{stat}" for stat in POOL_STATS[pool] if measured or stat != "mean_p_hat")))
  out.update({name: value for name, value in pick(COUNTERS).items() if value > 0})
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
  for tag, grid in zip(HISTOGRAMS, (1.0 / settings.agent.grpo.group_size, 1.0)):  # a bin per k/G, per level
    if tag in metrics:
      values = np.asarray(metrics[tag], np.float64)
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
