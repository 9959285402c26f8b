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

from genenv_jax.choices import RWR
from genenv_jax.coevolution.settings import Settings
from genenv_jax.reporting import metric_table as mt

# Which of the step's metrics are logged when (step_scalars): reporting.metric_table's `when`, where each is declared.
ALWAYS = mt.tags("always")
OFF_POLICY = mt.tags("off_policy")  # only with several mini-batches
FRESH_TASKS = mt.tags("fresh_tasks")  # the env's tasks of this step; needs at least one valid task
ENV_WRITES = mt.tags("env_writes")  # whenever the env wrote tasks
ENV_UPDATE = mt.tags("env_update")  # only at steps with an env update
POOL_STATS = mt.POOL_STATS  # per pool; a mean p̂ only once some task in the pool has been measured
COUNTERS = mt.tags("counter")  # once non-zero
HISTOGRAMS = mt.tags("histogram")  # per valid fresh task (invalid ones are -1)
BAND_LOW, BAND_HIGH = mt.tags("band")

# the curriculum chart: mean p̂ over the α band, shaded (TensorBoard's custom-scalars margin chart)
P_HAT_CHART = {"value": mt.P_HAT_MEAN, "lower": BAND_LOW, "upper": BAND_HIGH}

# One line per tag, shown in TensorBoard (the summary metadata's description); a test checks every tag has one. Each
# tag is described where it is declared (reporting.metric_table), the pool and timing families included.
DESCRIPTIONS = mt.DESCRIPTIONS


def description(tag: str) -> str | None:
  """The tag's line in DESCRIPTIONS; a key ending in "*" stands for any tag that starts with what precedes it."""
  if tag in DESCRIPTIONS:
    return DESCRIPTIONS[tag]
  return next((d for key, d in DESCRIPTIONS.items() if key.endswith("*") and tag.startswith(key[:-1])), None)


def env_updated(metrics: Mapping[str, Any], settings: Settings) -> bool:
  """Whether this step updated the env: RWR needs a kept task (one in the band); GRPO on R_env, a valid task."""
  if not (settings.num_fresh and settings.env.train) or mt.ENV_GRAD_NORM not in metrics:
    return False
  if settings.env.objective == RWR:
    return float(metrics.get(mt.ENV_NUM_KEPT, 0.0)) > 0
  return float(metrics.get(mt.INVALID_FRAC, 1.0)) < 1.0


def has_valid_fresh_task(metrics: Mapping[str, Any]) -> bool:
  """Whether the env wrote a valid task this step: the fresh tasks' figures (FRESH_TASKS) exist only then."""
  return float(metrics.get(mt.INVALID_FRAC, 1.0)) < 1.0


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
    out[BAND_LOW], out[BAND_HIGH] = settings.env.curriculum.band
  if env_updated(metrics, settings):
    out.update(pick(ENV_UPDATE))
  for pool in ("train", "env") if settings.num_fresh else ("train",):
    measured = float(metrics.get(mt.pool_tag(pool, "frac_evaluated"), 0.0)) > 0  # a mean p̂ needs a measured task
    out.update(pick(tuple(mt.pool_tag(pool, stat) for stat in POOL_STATS[pool] if measured or stat != "mean_p_hat")))
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
  if mt.EXAMPLE_PROMPT_IDS not in metrics:
    return None
  gold = getattr(domain, "gold_answer", None)
  env_tokens = metrics.get(mt.EXAMPLE_ENV_TOKENS)
  fresh = metrics.get(mt.EXAMPLE_FRESH)
  rows = [["task (agent prompt)", "env wrote", "gold", "difficulty", "p̂", "agent's first rollout", "reward", "success"]]
  for i in range(len(metrics[mt.EXAMPLE_PROMPT_IDS])):
    valid = bool(metrics[mt.EXAMPLE_VALID][i])
    reward = float(metrics[mt.EXAMPLE_REWARD][i])
    written = env_tokens is not None and i < len(env_tokens) and (fresh is None or bool(fresh[i]))
    env_text = tokenizer.decode(env_tokens[i]) if written else "(replayed)"
    if not valid:
      rows.append(["(invalid)", repr(env_text), "", "", "", "", "", "invalid"])
      continue
    rows.append(
      [
        repr(tokenizer.decode(metrics[mt.EXAMPLE_PROMPT_IDS][i])),
        repr(env_text),
        repr(gold(metrics[mt.EXAMPLE_SPEC][i])) if gold is not None else "",
        f"{float(metrics[mt.EXAMPLE_DIFFICULTY][i]):g}",
        f"{float(metrics[mt.EXAMPLE_P_HAT][i]):.2f}",
        repr(tokenizer.decode(metrics[mt.EXAMPLE_RESPONSE][i])),
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
  writer.text(0, mt.RUN_CONFIG, f"```\n{config}\n```")
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
    writer.text(step, mt.EXAMPLES, table)


def log_perf(writer: Any, run: Any, step: int, metrics: Mapping[str, Any], seconds: Mapping[str, float]) -> None:
  """Where the time of the steps since the last logged one went, per step (`loop.PhaseTimes.per_step`: `step`,
  `eval`, `checkpoint`, `log`, adding up to `wall`), written once they are all done; tokens/s of the step's sampling
  (this step's tokens over the mean step time); peak memory."""
  scalars = {mt.phase_tag(name): s for name, s in seconds.items()}
  if seconds.get("step", 0) > 0:
    scalars[mt.AGENT_TOKENS_PER_S] = float(metrics[mt.AGENT_TOKENS]) / seconds["step"]
    if run.coevolution.settings.num_fresh:
      scalars[mt.ENV_TOKENS_PER_S] = float(metrics[mt.ENV_TOKENS]) / seconds["step"]
  scalars[mt.HOST_PEAK_MEMORY] = host_peak_memory_gib()
  device_peak = device_peak_memory_gib()
  if device_peak is not None:
    scalars[mt.DEVICE_PEAK_MEMORY] = device_peak
  writer.scalars(step, scalars)


def log_eval(writer: Any, step: int, result: Mapping[str, Any]) -> None:
  """Held-out accuracy with its binomial standard error, per difficulty, and a table with the item counts."""
  n = int(result["n"])
  acc = float(result["accuracy"])
  scalars = {mt.EVAL_ACCURACY: acc, mt.EVAL_ACCURACY_SE: math.sqrt(acc * (1 - acc) / max(n, 1))}
  rows = [
    ["difficulty", "items", "accuracy", "standard error"],
    ["all", str(n), f"{acc:.3f}", f"{scalars[mt.EVAL_ACCURACY_SE]:.3f}"],
  ]
  counts = result.get("n_by_difficulty", {})
  for d, a in result["by_difficulty"].items():
    scalars[f"{mt.EVAL_BY_LEVEL}{d}"] = a
    k = int(counts.get(d, 0))
    rows.append([d, str(k), f"{a:.3f}", f"{math.sqrt(a * (1 - a) / k):.3f}" if k else ""])
  writer.scalars(step, scalars)
  writer.text(step, mt.EVAL_BY_DIFFICULTY, rows)
