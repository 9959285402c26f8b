"""Supervised warm start of both models on the domain's seed tasks (before co-evolution).

The agent learns seed prompt -> correct answer; the env learns env prompt(seed) -> another seed task of nearby
difficulty (|Δ difficulty| <= 1), so that the initial env writes well-formed tasks across the whole difficulty range
and already tracks its seed's difficulty (or, with env_targets="variation", one local edit of the seed itself; with
"rate_directed", a seed one level harder or easier as the p̂ its prompt shows lies above or below the α band).
Loss: token-mean NLL, L = Σ -log π(y_t | x, y_<t) / #tokens.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from genenv_jax.coevolution.settings import CurriculumSettings, WarmStartSettings
from genenv_jax.rl.logprobs import response_logprobs
from genenv_jax.rl.updates import gradient_step
from genenv_jax.tasks.base import Domain


def nearby_difficulty_partners(
  difficulty: np.ndarray, rng: np.random.Generator, copy_frac: float = 0.0, level_first: bool = False
) -> np.ndarray:
  """For each task i of difficulty d, the index of a random task j != i of difficulty d - 1, d or d + 1 (i itself when
  none exists), or, with probability `copy_frac`, i itself: an env that has learnt to sometimes restate its seed can
  later be taught (by RWR) to restate the seeds that sit in the α band.

  By default j is drawn uniformly over all such tasks, so where the seeds are not spread evenly over levels the
  partner leans toward the more numerous one: on the demo's seeds (level k weighted 0.6**k) partners are easier than
  their seed on average, and so are the tasks an env warm-started on them writes (`scripts/env_tracking`;
  docs/EXPERIMENTS.md, "What the default shows"). With `level_first`, a
  level is drawn uniformly among the three that hold such a task, then a task uniformly within it: the partner's
  difficulty is unbiased."""
  partners = np.arange(len(difficulty))
  copies = rng.random(len(difficulty)) < copy_frac
  if not level_first:
    for i, d in enumerate(difficulty):
      candidates = np.nonzero((np.abs(difficulty - d) <= 1) & (np.arange(len(difficulty)) != i))[0]
      if len(candidates) and not copies[i]:
        partners[i] = rng.choice(candidates)
    return partners
  by_level = {d: np.nonzero(difficulty == d)[0] for d in np.unique(difficulty)}
  for i, d in enumerate(difficulty):
    levels = [lv for lv in (d - 1, d, d + 1) if lv in by_level and (lv != d or len(by_level[d]) > 1)]
    if copies[i] or not levels:
      continue
    candidates = by_level[levels[rng.integers(len(levels))]]
    candidates = candidates[candidates != i]
    partners[i] = candidates[rng.integers(len(candidates))]
  return partners


def rate_directed_partners(
  difficulty: np.ndarray, rng: np.random.Generator, p_hat: float, alpha: float, k_min: float
) -> np.ndarray:
  """For each task i shown with success rate `p_hat`, the index of a random task one level harder than i when p̂ is
  above the α band (p̂ > α + k_min), one level easier when below it, of i's own level when inside it: the direction
  an env should move from a seed the agent solves that often. Where no task has the level asked for, one of i's own
  level. `p_hat` < 0 (unknown) gives `nearby_difficulty_partners` with `level_first` (unbiased, as the rest)."""
  if p_hat < 0:
    return nearby_difficulty_partners(difficulty, rng, level_first=True)
  step = 1 if p_hat > alpha + k_min + 1e-9 else -1 if p_hat < alpha - k_min - 1e-9 else 0
  by_level = {d: np.nonzero(difficulty == d)[0] for d in np.unique(difficulty)}
  partners = np.empty(len(difficulty), np.int64)
  for i, d in enumerate(difficulty):
    candidates = by_level.get(d + step, by_level[d])
    partners[i] = rng.choice(candidates)
  return partners


def env_p_hat_values(warm: WarmStartSettings, group_size: int) -> tuple[float, ...]:
  """The p̂ values the env's warm-start prompts show besides "unknown" (a negative p̂): none for
  `warm.env_p_hats = "unknown"`, and every value a G-rollout estimate can take, k / G for k = 0..G, for "all"."""
  return tuple(k / group_size for k in range(group_size + 1)) if warm.env_p_hats == "all" else ()


def agent_sft_pairs(domain: Domain, seed: int, skewed_tasks: int) -> dict[str, np.ndarray]:
  """The agent's supervised pairs (prompt, prompt mask, target, target mask): each seed task and its answer, then
  `skewed_tasks` more tasks whose digits follow skewed distributions (`domain.skewed_digit_tasks`, drawn from `seed`;
  tasks.arithmetic.skewed_digits says why), so that the warm start covers sums the seeds' uniform digits make rare."""
  tasks = [domain.seed_tasks()]
  if skewed_tasks:
    if not hasattr(domain, "skewed_digit_tasks"):
      raise ValueError(
        f"warm_start.agent_skewed_tasks = {skewed_tasks} needs a domain that draws tasks with skewed digits; the "
        f"{domain.name!r} domain cannot: set warm_start.agent_skewed_tasks = 0"
      )
    tasks.append(domain.skewed_digit_tasks(seed, skewed_tasks))
  pairs = {
    "prompt_ids": "prompt_ids",
    "prompt_mask": "prompt_mask",
    "target": "answer_ids",
    "target_mask": "answer_mask",
  }
  return {key: np.concatenate([t[field] for t in tasks]) for key, field in pairs.items()}


def sft_batches(
  domain: Domain,
  which: str,
  seed: int,
  warm: WarmStartSettings,
  group_size: int,
  curriculum: CurriculumSettings,
) -> dict[str, np.ndarray]:
  """All supervised pairs for `which` in {"agent", "env"} as host arrays (prompt, prompt mask, target, target mask),
  as the warm start's settings `warm` ask (the agent's: `agent_sft_pairs`); `group_size` (the agent's G,
  agent.grpo.group_size) fixes the p̂ values a prompt can show, `curriculum` (env.curriculum) the α band of
  "rate_directed". All three are the run's: none is defaulted, so that a caller cannot get the defaults for a run
  that set other values.

  The env's target for seed i: with env_targets="nearby", another seed of nearby difficulty, or with probability
  `env_copy_frac` seed i itself (`nearby_difficulty_partners`; "nearby_level" draws the partner's level first, so that
  it is unbiased); with "variation", one local edit of seed i (`domain.seed_variations`, arithmetic only), so that the
  env learns to write tasks close to its seed; with "rate_directed", for each p̂ its prompt shows, a seed one level
  harder when p̂ is above the α band, one level easier when below it, of the same level inside it
  (`rate_directed_partners`, with `curriculum`'s α and k_min; "nearby_level" where p̂ is unknown), so that the env
  starts from the rule "harder when the agent solves the seed often" and the curriculum refines it (it needs
  env_p_hats="all", which the settings check).

  The env's prompt shows its seed's success rate p̂. Seeds have none, so each prompt shows "unknown"; with
  env_p_hats="all" every pair appears once more per value a G-rollout p̂ takes (`env_p_hat_values`), its prompt showing
  that p̂ and (but for "rate_directed") its target unchanged, so that the env learns to write the same well-formed tasks
  whatever p̂ its prompt shows. Generated tasks in D_env prompt the env with their measured p̂, which an env warm-started
  on "unknown" alone had never seen: it wrote no valid task from such prompts (`scripts/env_validity`;
  docs/EXPERIMENTS.md, "The text domains on a CPU"). The target stays the same in every copy: distinct targets per
  copy made the mapping depend on the p̂ text, and that warm start's loss stayed far above the plain one's (same
  section)."""
  if which == "agent":
    return agent_sft_pairs(domain, seed, warm.agent_skewed_tasks)
  seeds = domain.seed_tasks()
  env_targets = warm.env_targets
  shown = (-1.0, *env_p_hat_values(warm, group_size))  # p̂ = -1: unknown
  if env_targets == "rate_directed":
    rng = np.random.default_rng(seed)
    difficulty = np.asarray(seeds["difficulty"])
    partners = [rate_directed_partners(difficulty, rng, p, curriculum.alpha, curriculum.k_min) for p in shown]
    targets = [(seeds["env_ids"][j], seeds["env_mask"][j]) for j in partners]
  elif env_targets == "variation":
    if not hasattr(domain, "seed_variations"):
      raise ValueError(
        f"warm_start.env_targets = 'variation' needs a domain that can edit its seeds; the {domain.name!r} domain "
        "cannot: use env_targets = 'nearby'"
      )
    edits = domain.seed_variations(seed)
    targets = [(edits["env_ids"], edits["env_mask"])] * len(shown)
  else:
    level_first = env_targets == "nearby_level"
    rng = np.random.default_rng(seed)
    partners = nearby_difficulty_partners(seeds["difficulty"], rng, warm.env_copy_frac, level_first=level_first)
    targets = [(seeds["env_ids"][partners], seeds["env_mask"][partners])] * len(shown)
  rows = {k: jnp.asarray(v) for k, v in seeds.items()}
  prompt = jax.jit(domain.env_prompt)
  copies = [prompt(rows, {"p_hat": jnp.full(len(seeds["difficulty"]), p, jnp.float32)}) for p in shown]
  return {
    "prompt_ids": np.concatenate([np.asarray(ids) for ids, _ in copies]),
    "prompt_mask": np.concatenate([np.asarray(mask) for _, mask in copies]),
    "target": np.concatenate([np.asarray(ids) for ids, _ in targets]),
    "target_mask": np.concatenate([np.asarray(mask) for _, mask in targets]),
  }


def make_sft_step(graphdef: nnx.GraphDef, optimizer: optax.GradientTransformation) -> Callable:
  """A jitted (params, opt_state, batch) -> (params, opt_state, loss) supervised step."""

  def loss_fn(params, b):
    logp, _ = response_logprobs(
      nnx.merge(graphdef, params), b["prompt_ids"], b["prompt_mask"], b["target"], b["target_mask"]
    )
    mask = b["target_mask"].astype(jnp.float32)
    return -(logp * mask).sum(), mask.sum(), {}

  def step(params, opt_state, batch):
    params, opt_state, metrics = gradient_step(loss_fn, optimizer, params, opt_state, batch)
    return params, opt_state, metrics["loss"]

  return jax.jit(step, donate_argnums=(0, 1))


def sft_optimizer(lr: float, steps: int) -> optax.GradientTransformation:
  """AdamW with a cosine decay from lr to lr / 10 over the warm start's steps."""
  return optax.adamw(optax.cosine_decay_schedule(lr, steps, alpha=0.1))


def supervised_warm_start(
  graphdef: nnx.GraphDef,
  params: nnx.State,
  data: dict[str, np.ndarray],
  steps: int,
  batch_size: int,
  lr: float,
  seed: int,
  place: Callable = jnp.asarray,
  on_progress: Callable[[int, float], None] | None = None,
  local: slice = slice(None),
  *,
  resume: tuple[int, Any] | None = None,
  stop: Callable[[], bool] | None = None,
) -> tuple[nnx.State, list[float], tuple[int, Any]]:
  """`steps` AdamW steps on random mini-batches of `data`; returns the params, the loss curve and (done, opt_state).

  Resumable by step: `stop` is polled after each step, and when it says so the function returns early with
  done < steps; `resume=(done, opt_state)` continues such a run. The row draws of the done steps are replayed (drawn,
  not trained), so a stopped and resumed warm start ends bit-identical to an uninterrupted one.

  Multi-process: every process draws the same global row indices (same `seed`), gathers only its own `local` slice
  of them (`sharding.process_local_rows`), and `place` forms the global batch from those rows.
  """
  if steps <= 0:
    return params, [], (0, None)
  optimizer = sft_optimizer(lr, steps)
  done, opt_state = resume if resume is not None else (0, optimizer.init(params))
  step = make_sft_step(graphdef, optimizer)
  rng = np.random.default_rng(seed)
  n = len(data["prompt_ids"])
  losses = []
  for i in range(steps):
    rows = rng.choice(n, size=batch_size, replace=n < batch_size)
    if i < done:
      continue  # trained before the stop: only its draw is replayed
    params, opt_state, loss = step(params, opt_state, place({k: v[rows[local]] for k, v in data.items()}))
    losses.append(float(loss))
    if on_progress is not None:
      on_progress(i, losses[-1])
    if i + 1 < steps and stop is not None and stop():
      return params, losses, (i + 1, opt_state)
  return params, losses, (steps, opt_state)
