"""The run's metric names: one table, each metric declared once with its tag, its one-line description, when it is
logged, and where else it goes (summary.json's step rows, the progress line, the plots and their title).

The co-evolution step emits the metrics (coevolution/step.py, under these tags: the names below); training/log_tags.py
picks which to write to TensorBoard at which step (by `when`), each with its line here (`DESCRIPTIONS`);
training/loop.py writes summary.json's rows (`summary`) and the progress line (`progress`); reporting/summary_report.py
and genenv_jax.compare plot the `plot` ones under their title. Every one of those reads this table, and so do
bench.step and the warm start, so that a tag, a description or a title is written once in the package: the tags the
code names are constants here; the families it builds (the update metrics under `AGENT` / `ENV`, the split by seed
source, the pools' statistics, the loop's phases) are built from a prefix written here once; the step's figures that
are not logged under their own tag (token counts, the example tasks) are named here too.
tests/unit/reporting/test_metric_table.py scans every module of the package for a second literal of a tag.

`when` (training.log_tags.step_scalars):
  always       whenever the step produces it;
  off_policy   only with several GRPO mini-batches (with one, every update is on-policy: ratio 1, nothing clipped);
  fresh_tasks  the env's tasks of this step, at a step with a valid env task;
  env_writes   whenever the env wrote tasks;
  band         the α band's limits, drawn beside p̂, whenever an env writes tasks;
  env_update   only at steps where the env was updated;
  counter      once non-zero;
  histogram    a histogram per valid fresh task;
  loop         written by the loop (learning rates, evaluation, timings, memory, warm start, the config, examples).
"""

from __future__ import annotations

import dataclasses

WHEN = ("always", "off_policy", "fresh_tasks", "env_writes", "band", "env_update", "counter", "histogram", "loop")


@dataclasses.dataclass(frozen=True)
class Metric:
  """One metric: `tag` (TensorBoard's name, summary.json's row key), `description` (TensorBoard's line), `when` it is
  logged (WHEN), whether summary.json's step rows hold it (`summary`), its place on the progress line (`progress`,
  1 = first; 0 = not there), its plot's title (`plot`, '' = not plotted), and its row key in summary.json files
  written before the keys were the step's metric names (`old_key`, issue 33)."""

  tag: str
  description: str
  when: str = "always"
  summary: bool = False
  progress: int = 0
  plot: str = ""
  old_key: str = ""

  def __post_init__(self):
    if self.when not in WHEN:
      raise ValueError(f"metric {self.tag}: when = {self.when!r} must be one of {', '.join(WHEN)}")


# The tags the code refers to by name (the others it reads through `tags`, SUMMARY_KEYS, ...): each written here only,
# and nowhere else in the package (tests/unit/reporting/test_metric_table.py scans every module for a second literal).
REWARD_MEAN = "agent/reward_mean"
RESPONSE_LEN = "agent/response_len"
AGENT_SKIPPED_UPDATES = "agent/skipped_updates"
AGENT_LR = "agent/lr"
P_HAT_MEAN = "curriculum/p_hat_mean"
BAND_FRAC = "curriculum/band_frac"
R_ENV_MEAN = "curriculum/r_env_mean"
P_HAT_0_OR_1_FRAC = "curriculum/p_hat_0_or_1_frac"
DIFFICULTY_MEAN = "curriculum/difficulty_mean"
INVALID_FRAC = "curriculum/invalid_frac"
REPLAY_P_HAT_MEAN = "curriculum/replay_p_hat_mean"
REPLAY_DIFFICULTY_MEAN = "curriculum/replay_difficulty_mean"
P_HAT = "curriculum/p_hat"  # the histograms' values, one per fresh task
DIFFICULTY = "curriculum/difficulty"
EXAMPLES = "curriculum/examples"
ENV_OUTPUT_LEN = "env/output_len"
ENV_GRAD_NORM = "env/grad_norm_before_clip"
ENV_SKIPPED_UPDATES = "env/skipped_updates"
ENV_LR = "env/lr"
EVAL_ACCURACY = "eval/accuracy"
EVAL_ACCURACY_SE = "eval/accuracy_se"
EVAL_BY_DIFFICULTY = "eval/by_difficulty"
AGENT_TOKENS_PER_S = "perf/agent_tokens_per_s"
ENV_TOKENS_PER_S = "perf/env_tokens_per_s"
HOST_PEAK_MEMORY = "perf/host_peak_memory_gib"
DEVICE_PEAK_MEMORY = "perf/device_peak_memory_gib"
WARM_START_LOSS = {"agent": "warm_start/agent_loss", "env": "warm_start/env_loss"}  # per warm-start phase
RUN_CONFIG = "run/config"

# Tags built from a prefix, each prefix written here only: the step's topics, for the figures it names by their
# producer's key (rl.grpo's and rl.curriculum's update metrics, the difficulty's statistics), the per-level accuracy,
# and the split by seed source (`from_seeds`).
AGENT, CURRICULUM, ENV = "agent/", "curriculum/", "env/"
EVAL_BY_LEVEL = "eval/accuracy_difficulty_"  # + the level: one tag per difficulty level
SEED_SOURCES = ("base", "generated")  # an env prompt's seed: a base seed task, or a generated task from D_env


def from_seeds(name: str, source: str) -> str:
  """The tag (or key) of `name` measured on the fresh tasks written from `source`'s seeds (SEED_SOURCES)."""
  return f"{name}_from_{source}_seeds"


# The step's outputs that are not logged under their own tag: token counts (the loop's tokens/s, bench.step), the
# update's kept-task count (log_tags.env_updated), the agent's success rate (its mean reward, for exact-match rewards)
# and the example tasks that log_tags.examples_table turns into the EXAMPLES table.
AGENT_TOKENS = "agent/tokens"
AGENT_ACCURACY = "agent/accuracy"
ENV_TOKENS = "env/tokens"
ENV_NUM_KEPT = "env/num_kept"
EXAMPLE_PROMPT_IDS = "examples/prompt_ids"
EXAMPLE_SPEC = "examples/spec"
EXAMPLE_DIFFICULTY = "examples/difficulty"
EXAMPLE_VALID = "examples/valid"
EXAMPLE_P_HAT = "examples/p_hat"
EXAMPLE_RESPONSE = "examples/response"
EXAMPLE_REWARD = "examples/reward"
EXAMPLE_FRESH = "examples/fresh"
EXAMPLE_ENV_TOKENS = "examples/env_tokens"  # the env's text of each example, shown for fresh ones only

M = Metric
METRICS = (
  # agent/: the GRPO update
  M(REWARD_MEAN, "mean reward of the agent's rollouts on this step's valid tasks (fresh and replayed)",
    summary=True, progress=1, plot="agent reward (training tasks)", old_key="agent_reward"),
  M("agent/pg_loss", "GRPO's clipped policy-gradient surrogate, token mean over the step's mini-batches"),
  M("agent/kl_to_reference", "KL of the agent to its reference policy on its rollouts' tokens (the KL estimator set)"),
  M("agent/entropy", "mean token entropy of the agent's policy on its rollouts"),
  M("agent/groups_without_signal_frac",
    "share of task groups whose G rewards are all equal: zero advantage, no signal"),
  M(RESPONSE_LEN, "mean length of the agent's rollouts, in tokens"),
  M("agent/grad_norm_before_clip", "global norm of the agent's gradient before clipping, mean over mini-batches"),
  M("agent/grad_clipped_frac", "share of the agent's mini-batch updates whose gradient norm was clipped"),
  M("agent/update_norm", "global norm of the agent's parameter update, mean over mini-batches"),
  M("agent/ratio_mean", "mean importance ratio π_new / π_old over the agent's tokens (1 on-policy)", "off_policy"),
  M("agent/ratio_max", "largest importance ratio π_new / π_old over the agent's tokens", "off_policy"),
  M("agent/ppo_clip_frac", "share of the agent's tokens whose importance ratio was clipped", "off_policy"),
  M(AGENT_SKIPPED_UPDATES, "agent updates skipped so far (non-finite, or a mini-batch without a valid token)",
    "counter"),
  M(AGENT_LR, "the agent's learning rate at this step", "loop"),
  # curriculum/: the env's fresh tasks as the agent meets them, and the replayed ones
  M(REPLAY_P_HAT_MEAN, "mean p̂ on the tasks replayed from D_train", summary=True,
    old_key="replay_p_hat_mean"),
  M(REPLAY_DIFFICULTY_MEAN, "mean difficulty of the tasks replayed from D_train"),
  M(P_HAT_MEAN, "mean p̂ (the agent's success rate over its G rollouts) on the env's valid tasks",
    "fresh_tasks", summary=True, progress=2, plot="mean p̂ on generated tasks", old_key="p_hat_mean"),
  M(BAND_FRAC, "share of the env's valid tasks whose p̂ lies in the α band |p̂ - α| <= k_min",
    "fresh_tasks", summary=True, progress=3, plot="fraction of tasks in the α band", old_key="band_frac"),
  M(R_ENV_MEAN, "mean env reward R_env = exp(-β (p̂ - α)²) on the env's valid tasks", "fresh_tasks"),
  M(P_HAT_0_OR_1_FRAC, "share of the env's valid tasks that the agent always fails or always solves",
    "fresh_tasks"),
  M(DIFFICULTY_MEAN, "mean difficulty of the env's valid tasks", "fresh_tasks", summary=True,
    progress=4, plot="generated-task difficulty", old_key="difficulty_mean"),
  M("curriculum/difficulty_std", "standard deviation of the difficulty of the env's valid tasks", "fresh_tasks"),
  M("curriculum/difficulty_max", "largest difficulty among the env's valid tasks", "fresh_tasks"),
  # the same tasks split by the env prompt's seed: a base seed task, or a generated task from D_env (each NaN, so left
  # out, when no valid task of that kind was written this step)
  M("curriculum/p_hat_mean_from_base_seeds", "mean p̂ on the env's valid tasks written from base seed tasks",
    "fresh_tasks", summary=True, old_key="p_hat_mean_base_seeded"),
  M("curriculum/p_hat_mean_from_generated_seeds", "mean p̂ on the env's valid tasks written from generated D_env tasks",
    "fresh_tasks", summary=True, old_key="p_hat_mean_pool_seeded"),
  M("curriculum/difficulty_mean_from_base_seeds", "mean difficulty of valid env tasks written from base seed tasks",
    "fresh_tasks"),
  M("curriculum/difficulty_mean_from_generated_seeds",
    "mean difficulty of valid env tasks written from generated tasks", "fresh_tasks"),
  M(INVALID_FRAC, "share of the env's outputs that do not parse into a valid task", "env_writes",
    summary=True, plot="invalid env tasks", old_key="invalid_frac"),
  M("curriculum/band_low", "lower limit of the α band, α - k_min", "band"),
  M("curriculum/band_high", "upper limit of the α band, α + k_min", "band"),
  M(P_HAT, "p̂ of the env's valid tasks, one bin per k/G", "histogram"),
  M(DIFFICULTY, "difficulty of the env's valid tasks, one bin per level", "histogram"),
  M(EXAMPLES, "example tasks across p̂: the env's text, gold answer, difficulty, p̂, a rollout, its reward",
    "loop"),
  # env/: the env update (RWR or GRPO on R_env), and what it writes
  M(ENV_OUTPUT_LEN, "mean length of the env's outputs, in tokens", "env_writes"),
  M("env/rwr_nll", "RWR loss: the env's weighted negative log-likelihood of the kept tasks", "env_update"),
  M("env/pg_loss", "the env's clipped policy-gradient surrogate on R_env advantages", "env_update"),
  M("env/kl_to_initial", "KL of the env to the initial env on its task tokens (weighted by RWR's weights under RWR)",
    "env_update"),
  M("env/rwr_weight_max", "largest RWR weight among the kept tasks", "env_update"),
  M(ENV_GRAD_NORM, "global norm of the env's gradient before clipping", "env_update"),
  M("env/grad_clipped_frac", "1 when the env's gradient norm was clipped, else 0", "env_update"),
  M("env/update_norm", "global norm of the env's candidate parameter update, before the KL cap scales it",
    "env_update"),
  M("env/update_kl", "KL of the candidate env update to the env before it, on the update's task tokens", "env_update"),
  M("env/kl_cap_scale", "scale in [0, 1] applied to the env's update so that its KL stays under the cap",
    "env_update"),
  M(ENV_SKIPPED_UPDATES, "env updates skipped so far (non-finite, or no kept task)", "counter"),
  M(ENV_LR, "the env's learning rate at this step", "loop"),
  # eval/ (training/loop.py)
  M(EVAL_ACCURACY, "greedy accuracy on the held-out set", "loop"),
  M(EVAL_ACCURACY_SE, "binomial standard error of the held-out accuracy", "loop"),
  M(EVAL_BY_LEVEL + "*", "greedy held-out accuracy on the items of this difficulty level", "loop"),
  M(EVAL_BY_DIFFICULTY, "held-out items, accuracy and standard error per difficulty level", "loop"),
  # perf/ (the loop's timings per phase: training.log_tags adds perf/PHASE_s)
  M(AGENT_TOKENS_PER_S, "agent tokens sampled per second of step time", "loop"),
  M(ENV_TOKENS_PER_S, "env tokens sampled per second of step time", "loop"),
  M(HOST_PEAK_MEMORY, "this process's peak resident host memory, GiB", "loop"),
  M(DEVICE_PEAK_MEMORY, "peak memory allocated on the first local device, GiB", "loop"),
  # the rest of the run
  M(WARM_START_LOSS["agent"], "the agent's supervised warm-start loss", "loop"),
  M(WARM_START_LOSS["env"], "the env's supervised warm-start loss", "loop"),
  M(RUN_CONFIG, "the run's config", "loop"),
)  # fmt: skip
BY_TAG = {m.tag: m for m in METRICS}


def tags(when: str) -> tuple[str, ...]:
  """The tags logged `when` (WHEN), in the table's order."""
  if when not in WHEN:
    raise ValueError(f"unknown when {when!r}; choose one of {', '.join(WHEN)}")
  return tuple(m.tag for m in METRICS if m.when == when)


SUMMARY_KEYS = tuple(m.tag for m in METRICS if m.summary)  # summary.json's step rows
PROGRESS_KEYS = tuple(m.tag for m in sorted((m for m in METRICS if m.progress), key=lambda m: m.progress))
# tag -> its plot's title: the env's fresh tasks' figures first (compare plots those alone: FRESH_PLOTS)
PLOTS = {m.tag: m.plot for m in sorted(METRICS, key=lambda m: m.when != "fresh_tasks") if m.plot}
FRESH_PLOTS = {tag: title for tag, title in PLOTS.items() if BY_TAG[tag].when == "fresh_tasks"}
OLD_ROW_KEYS = {m.old_key: m.tag for m in METRICS if m.old_key}  # summary.json's keys before issue 33 -> today's

# ---- two families of tags, one per pool statistic and one per loop phase -------------------------------------------

# the step's statistics of D_train and D_env (rl.pools.pool_stats) that are logged, per pool: `pool_tag`; a mean p̂
# only once some task in the pool has been measured (training.log_tags.step_scalars)
POOL_STATS = {
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
# the loop's phases (training.loop.PhaseTimes), timed per step: `phase_tag`
PHASES = {
  "wall": "wall time",
  "step": "time in the jitted step (dispatch, run) and summary rows",
  "eval": "time in held-out evaluation",
  "checkpoint": "time writing checkpoints and summary.json",
  "log": "time writing TensorBoard",
}


def pool_tag(pool: str, stat: str) -> str:
  """The tag of one of rl.pools.pool_stats's statistics of a pool ("train": D_train, "env": D_env)."""
  return f"pool/{pool}_{stat}"


def phase_tag(phase: str) -> str:
  """The tag of a loop phase's seconds per step (PHASES)."""
  return f"perf/{phase}_s"


# One line per logged tag, shown in TensorBoard beside the chart (training.log_tags writes it): the table's, then the
# two families'. A key ending in "*" stands for any tag that starts with what precedes it.
DESCRIPTIONS = {
  **{m.tag: m.description for m in METRICS},
  **{
    pool_tag(pool, stat): _POOL_STAT_DESCRIPTIONS[stat].format(pool=name)
    for pool, name in _POOLS.items()
    for stat in POOL_STATS[pool]
  },
  **{phase_tag(phase): f"{what}, s per step since the last logged step" for phase, what in PHASES.items()},
}
