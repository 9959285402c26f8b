"""The co-evolution state and the one jitted step (GenEnv, arXiv 2512.19682, Algorithm 1).

step(state) -> (state, metrics), one jax.jit with the state donated:
  1. sample seed tasks from D_env (the domain's seeds plus accepted generations) and build env prompts;
  2. the env writes K tasks per seed; the domain parses them and computes their labels (invalid -> masked);
  3. replay tasks are drawn from D_train (base / old / new mix) and joined to the fresh ones;
  4. the agent makes G rollouts per task; the domain verifies them into R_agent;
  5. p̂ = successes / G, R_env = exp(-β (p̂ - α)²), band |p̂ - α| <= k_min;
  6. GRPO update of the agent over mini-batches (lax.scan, clipping, non-finite steps skipped);
  7. env update: reward-weighted regression on the kept tasks (weights ∝ exp(λ R_env)) or GRPO on R_env, with a KL
     penalty to the initial env and a cap on the KL of each update;
  8. valid fresh tasks join D_train, kept ones join D_env; replayed tasks get their new p̂.
Ablations are static switches: mode "coevolve" | "static" (env generates once, then only replay) | "grpo" (no env);
env.train=False is GenEnv-Random (the env samples but never learns).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx, struct

from genenv_jax.choices import PG, RWR
from genenv_jax.coevolution.settings import BAND, LEVEL_LEARNABILITY, Settings
from genenv_jax.models import lora
from genenv_jax.parallel.sharding import (
  batch_shards_in_context,
  constrain,
  interleave_rows,
  interleaved_position,
  split_rows,
)
from genenv_jax.parallel.target import target_platform
from genenv_jax.reporting import metric_table as mt
from genenv_jax.rl import curriculum, grpo, pools
from genenv_jax.rl.logprobs import response_logprobs
from genenv_jax.rl.updates import gradient_step, minibatch_updates
from genenv_jax.sampling import sampler
from genenv_jax.tasks.base import Domain, TaskBatch

POOL_FIELDS = ("prompt_ids", "prompt_mask", "spec", "difficulty", "env_ids", "env_mask")


@struct.dataclass
class CoevolutionState:
  """Everything a run needs to continue exactly: both models, optimizers, references, pools, rng, counters."""

  agent: nnx.State
  agent_opt: Any
  agent_ref: nnx.State
  env: nnx.State
  env_opt: Any
  env_ref: nnx.State
  train_pool: pools.TaskPool
  env_pool: pools.TaskPool
  rng: jax.Array  # raw key data (uint32), so checkpoints hold plain arrays
  step: jax.Array  # int32
  skipped_agent: jax.Array
  skipped_env: jax.Array


NUM_LOGGED_EXAMPLES = 4  # tasks (with their first rollout) that the step returns for the text log


def _repeat(tree: Any, times: int) -> Any:
  return jax.tree.map(lambda x: jnp.repeat(x, times, axis=0), tree)


def task_batch(rows: dict[str, jax.Array]) -> TaskBatch:
  """The TaskBatch fields of a pool's rows."""
  return TaskBatch(
    prompt_ids=rows["prompt_ids"],
    prompt_mask=rows["prompt_mask"],
    spec=rows["spec"],
    difficulty=rows["difficulty"],
    valid=rows["valid"],
  )


def pool_rows(tasks: TaskBatch, env_ids: jax.Array, env_mask: jax.Array) -> dict[str, jax.Array]:
  """A pool's rows (POOL_FIELDS) of `tasks`: their TaskBatch fields but `valid` (the pool keeps its own, per slot),
  and each task as the env writes it (`env_ids` / `env_mask`: the env's output, or a seed's own text), which an env
  prompt seeded with the task shows. The one builder of pool rows: the seed pools, the step's admissions and the
  static ablation's rounds."""
  fields = (tasks.prompt_ids, tasks.prompt_mask, tasks.spec, tasks.difficulty, env_ids, env_mask)
  return dict(zip(POOL_FIELDS, fields))


def _masked_stats(x: jax.Array, mask: jax.Array, prefix: str) -> dict[str, jax.Array]:
  m = mask.astype(jnp.float32)
  n = jnp.maximum(m.sum(), 1.0)
  mean = (x * m).sum() / n
  return {
    f"{prefix}_mean": mean,
    f"{prefix}_std": jnp.sqrt(((x - mean) ** 2 * m).sum() / n),
    f"{prefix}_max": jnp.max(jnp.where(mask, x, -jnp.inf)).clip(min=0.0),
  }


def by_seed_source(values: dict[str, jax.Array], valid: jax.Array, from_base: jax.Array) -> dict[str, jax.Array]:
  """Each `[B]` value's mean over the valid tasks written from base seeds (`<name>_from_base_seeds`) and from
  generated tasks of D_env (`<name>_from_generated_seeds`); NaN where no such task exists (the log and summary.json
  then leave it out).

  Mean p̂ averages both kinds of prompt, in the proportions of `pools.env_seed_mix`; apart, they show when one kind
  pulls it out of the band (docs/EXPERIMENTS.md, "What the default shows")."""
  out = {}
  for source, mask in zip(mt.SEED_SOURCES, (valid & from_base, valid & ~from_base)):
    m = mask.astype(jnp.float32)
    n = m.sum()
    for name, x in values.items():
      out[mt.from_seeds(name, source)] = jnp.where(n > 0, (x * m).sum() / jnp.maximum(n, 1.0), jnp.nan)
  return out


def examples_across_p_hat(p_hat: jax.Array, valid: jax.Array, n: int) -> jax.Array:
  """Indices of `n` tasks spread evenly over the valid tasks ranked by p̂ (the lowest, the highest and evenly between),
  so that the examples table shows the range the agent meets, not the first tasks of the batch; invalid tasks only when
  fewer than `n` are valid (they rank last). `n` is capped at the number of tasks."""
  n = min(n, p_hat.shape[0])
  order = jnp.argsort(jnp.where(valid, p_hat, jnp.inf), stable=True)
  last = jnp.maximum(valid.sum() - 1, 0)
  ranks = jnp.round(jnp.linspace(0.0, 1.0, n) * last).astype(jnp.int32) if n > 1 else jnp.zeros((1,), jnp.int32)
  ranks = jnp.where(valid.sum() >= n, ranks, jnp.arange(n))  # too few valid: the valid ones, then invalid ones
  return order[ranks]


def lora_dropout_key(lora_settings: Any, sampling_key: jax.Array) -> dict[str, jax.Array]:
  """{"dropout_key": ...} for an update whose LoRA adapters have dropout (drawn from the model's sampling key, folded,
  so the step's other draws are unchanged), else {} (a deterministic update)."""
  if not (lora_settings.enabled and lora_settings.dropout > 0):
    return {}
  return {"dropout_key": jax.random.fold_in(sampling_key, 1)}


def minibatch_inputs(params: nnx.State, reference: Any, with_reference: Any, loss_fn: Any) -> tuple:
  """(trained, frozen, constants, prepare, loss) of an update over mini-batches (rl.updates.minibatch_updates) that
  trains `params` with `loss_fn`, where `with_reference(ref_params, chunk)` (or None: no KL term) adds the reference's
  log-probs. Without LoRA adapters: (params, None, reference, with_reference, loss_fn), as ever. With them
  (models.lora) only the adapters train: the base rides in each mini-batch as a constant (outside the gradient), and
  the reference is the base with the adapters off, so `reference` (None) is not used."""
  trained, frozen = lora.partition(params)  # (params, None) without adapters
  if frozen is None:
    return params, None, reference, with_reference, loss_fn
  use_ref = with_reference is not None
  constants = {"frozen": frozen, "reference": lora.reference(trained) if use_ref else None}

  def prepare(c, b):
    b = {**b, "frozen": c["frozen"]}
    return with_reference(lora.combine(c["reference"], c["frozen"]), b) if use_ref else b

  def loss(p, b):
    return loss_fn(lora.combine(p, b["frozen"]), b)

  return trained, frozen, constants, prepare, loss


# The step's names for its update helpers' metrics (rl.updates.gradient_step, rl.grpo.grpo_loss, rl.curriculum's env
# losses) where the helper's own name would not say what it measures; every other helper metric keeps its name under
# "agent/" or "env/". The step's metric names are the TensorBoard tags and summary.json keys (training/log_tags.py).
AGENT_METRIC_NAMES = {
  "kl": "kl_to_reference",
  "zero_std_frac": "groups_without_signal_frac",
  "grad_norm": "grad_norm_before_clip",
  "grad_clipped": "grad_clipped_frac",
  "clip_frac": "ppo_clip_frac",
}
ENV_METRIC_NAMES = {
  "nll": "rwr_nll",
  "kl": "kl_to_initial",
  "weight_max": "rwr_weight_max",
  "grad_norm": "grad_norm_before_clip",
  "grad_clipped": "grad_clipped_frac",
  "cap_scale": "kl_cap_scale",
}


class Coevolution:
  """Binds the static pieces (graphdefs, domain, optimizers, settings) and exposes the pure phase functions."""

  def __init__(
    self,
    agent_graphdef: nnx.GraphDef,
    env_graphdef: nnx.GraphDef,
    domain: Domain,
    agent_optimizer: optax.GradientTransformation,
    env_optimizer: optax.GradientTransformation,
    settings: Settings,
  ):
    self.agent_graphdef, self.env_graphdef = agent_graphdef, env_graphdef
    self.domain, self.settings = domain, settings
    self.agent_optimizer, self.env_optimizer = agent_optimizer, env_optimizer

  # ---- phases (pure functions of arrays; each can be jitted alone for benchmarks) --------------------------------

  def generate_tasks(self, env_params: nnx.State, seeds: dict[str, jax.Array], key: jax.Array):
    """Env prompts from seeds -> K env samples per seed -> parsed tasks. Returns (prompts, env output, tasks)."""
    s = self.settings
    p_hat = jnp.where(seeds["known"], seeds["p_hat"], -1.0)  # negative = unknown (a base seed never measured)
    prompt_ids, prompt_mask = self.domain.env_prompt(seeds, {"p_hat": p_hat})
    prompt_ids, prompt_mask = _repeat((prompt_ids, prompt_mask), s.env.samples_per_seed)
    prompt_ids = constrain(prompt_ids, ("batch", "length"))
    out = sampler.sample(nnx.merge(self.env_graphdef, env_params), prompt_ids, prompt_mask, key, s.env.sampling)
    tasks = self.domain.parse_env_output(out.tokens, out.mask)
    return (prompt_ids, prompt_mask), out, tasks

  def rollouts(self, agent_params: nnx.State, tasks: TaskBatch, key: jax.Array):
    """G agent samples per task and their rewards [T, G]."""
    s = self.settings
    grouped = _repeat(tasks, s.agent.grpo.group_size)
    prompts = constrain(grouped.prompt_ids, ("batch", "length"))
    out = sampler.sample(
      nnx.merge(self.agent_graphdef, agent_params), prompts, grouped.prompt_mask, key, s.agent.sampling
    )
    rewards = self.domain.verify(grouped, out.tokens, out.mask)
    rewards = jnp.where(grouped.valid, rewards, 0.0).reshape(-1, s.agent.grpo.group_size)
    return grouped, out, rewards

  def _logprobs(
    self,
    graphdef: nnx.GraphDef,
    params: nnx.State,
    sampling_params: sampler.SamplingParams,
    chunk_size: int,
    prompt_ids,
    prompt_mask,
    response,
    response_mask,
    with_entropy: bool = False,
    dropout_key: jax.Array | None = None,
    entropy_gradient: bool = True,
  ):
    """log π of the response (and its entropy) under the policy that sampled it: its temperature, vocabulary limit,
    top-k and top-p (rl.logprobs), so an on-policy ratio is 1. `dropout_key`: a training forward, with LoRA dropout
    (models.lora.with_dropout). `entropy_gradient=False`: the entropy is a metric only (rl.logprobs)."""
    model = nnx.merge(graphdef, params)
    return response_logprobs(
      model if dropout_key is None else lora.with_dropout(model, dropout_key),
      prompt_ids,
      prompt_mask,
      response,
      response_mask,
      with_entropy,
      policy=sampling_params,
      chunk_size=chunk_size,
      entropy_gradient=entropy_gradient,
    )

  def agent_update(
    self,
    agent_params,
    agent_opt,
    agent_ref,
    grouped: TaskBatch,
    out: sampler.SampleOutput,
    rewards: jax.Array,
    valid: jax.Array,
    dropout_key: jax.Array | None = None,
  ):
    """GRPO: group advantages, then clipped surrogate + k3 KL to the reference, over mini-batches.

    The reference log-probs are computed per mini-batch inside the update (`minibatch_updates(prepare=...)`), with
    the reference parameters passed into the scan as an argument. With LoRA adapters (models.lora) only they train:
    the base weights enter the scan as a constant, and the reference is the base with the adapters off;
    `dropout_key` (LoRA dropout on) gives each mini-batch its own dropout key.
    """
    s = self.settings
    adv, adv_metrics = grpo.compute_advantages(rewards, valid, method=s.agent.grpo.advantage)
    response_mask = out.mask * grouped.valid[:, None].astype(jnp.int32)
    batch = {
      "prompt_ids": grouped.prompt_ids,
      "prompt_mask": grouped.prompt_mask,
      "response": out.tokens,
      "response_mask": response_mask,
      "logp_old": out.logprobs,
      "adv": adv.reshape(-1),
    }
    if dropout_key is not None:  # one key per row; each mini-batch's first row's drops its adapters' inputs
      batch["dropout_key"] = jax.random.key_data(jax.random.split(dropout_key, adv.size))
    logp = functools.partial(
      self._logprobs, self.agent_graphdef, sampling_params=s.agent.sampling, chunk_size=s.agent.logprob_chunk
    )

    def with_reference(ref_params, b):
      return {
        **b,
        "logp_ref": logp(
          ref_params,
          prompt_ids=b["prompt_ids"],
          prompt_mask=b["prompt_mask"],
          response=b["response"],
          response_mask=b["response_mask"],
        )[0],
      }

    def loss_fn(params, b):
      logp_new, entropy = logp(
        params,
        prompt_ids=b["prompt_ids"],
        prompt_mask=b["prompt_mask"],
        response=b["response"],
        response_mask=b["response_mask"],
        with_entropy=True,
        entropy_gradient=s.agent.grpo.entropy_coef != 0,  # else the entropy is a metric, outside the gradient
        **({"dropout_key": jax.random.wrap_key_data(b["dropout_key"][0])} if "dropout_key" in b else {}),
      )
      return grpo.grpo_loss(
        logp_new,
        b["logp_old"],
        b.get("logp_ref"),
        b["adv"],
        b["response_mask"],
        clip_low=s.agent.grpo.clip_low,
        clip_high=s.agent.grpo.clip_high,
        kl_coef=s.agent.grpo.kl_coef,
        kl_estimator=s.agent.grpo.kl_estimator,
        entropy=entropy,
        entropy_coef=s.agent.grpo.entropy_coef,
        loss_agg_mode=s.agent.grpo.loss_agg,
        max_len=float(s.agent.sampling.max_new_tokens),
      )

    use_ref = s.agent.grpo.kl_coef > 0
    trained, frozen, constants, prepare, loss = minibatch_inputs(
      agent_params, agent_ref if use_ref else None, with_reference if use_ref else None, loss_fn
    )
    params, opt, metrics = minibatch_updates(
      loss,
      self.agent_optimizer,
      trained,
      agent_opt,
      batch,
      s.agent.grpo.minibatches,
      constants=constants,
      prepare=prepare,
      max_grad_norm=s.agent.optimizer.max_grad_norm,
    )
    params = lora.combine(params, frozen)
    adv_valid = jnp.repeat(valid, s.agent.grpo.group_size)
    metrics.update(_masked_stats(adv.reshape(-1), adv_valid, "adv"), zero_std_frac=adv_metrics["zero_std_frac"])
    return params, opt, metrics

  def env_update(
    self,
    env_params,
    env_opt,
    env_ref,
    env_prompts,
    env_out: sampler.SampleOutput,
    cur: dict[str, jax.Array],
    valid: jax.Array,
    dropout_key: jax.Array | None = None,
  ):
    """RWR (or GRPO on R_env) on the env's own task tokens, KL-penalised to the initial env, KL-capped per update.
    With LoRA adapters (models.lora) only they train, and the initial env is the base with the adapters off."""
    s = self.settings
    if s.env.objective == PG:
      env_mask = env_out.mask  # parse failures stay in their group with R_env = 0 (negative advantage)
    else:
      env_mask = env_out.mask * cur["keep"][:, None].astype(jnp.int32)  # RWR trains on the kept tasks only
    prompt_ids, prompt_mask = env_prompts

    def logp_of(params, b, dropout_key=None):
      return self._logprobs(
        self.env_graphdef,
        params,
        s.env.sampling,
        s.env.logprob_chunk,
        b["prompt_ids"],
        b["prompt_mask"],
        b["tokens"],
        b["mask"],
        dropout_key=dropout_key,
      )[0]

    batch = {
      "prompt_ids": prompt_ids,
      "prompt_mask": prompt_mask,
      "tokens": env_out.tokens,
      "mask": env_mask,
      "logp_old": env_out.logprobs,
      "weights": cur["weights"],
      "r_env": cur["r_env"],
    }
    trained, frozen = lora.partition(env_params)  # (env_params, None) without adapters
    reference = env_ref if frozen is None else lora.reference(env_params)
    batch["logp_ref"] = jax.lax.stop_gradient(logp_of(reference, batch))

    def loss_fn(params, b):
      logp = logp_of(lora.combine(params, frozen), b, dropout_key)
      if s.env.objective == RWR:
        return curriculum.rwr_env_loss(
          logp, b["mask"], b["weights"], b["logp_ref"], kl_coef=s.env.kl_coef, kl_estimator=s.agent.grpo.kl_estimator
        )
      return curriculum.pg_env_loss(
        logp,
        b["logp_old"],
        b["logp_ref"],
        b["r_env"],
        b["mask"],
        s.env.samples_per_seed,
        clip_low=s.agent.grpo.clip_low,
        clip_high=s.agent.grpo.clip_high,
        kl_coef=s.env.kl_coef,
        kl_estimator=s.agent.grpo.kl_estimator,
      )

    candidate, candidate_opt, metrics = gradient_step(
      loss_fn, self.env_optimizer, trained, env_opt, batch, max_grad_norm=s.env.optimizer.max_grad_norm
    )
    # The per-update KL cap: KL(π_new ‖ π_old) on this batch's task tokens, then scale the step back.
    logp_old_params = jax.lax.stop_gradient(logp_of(env_params, batch))
    logp_new = jax.lax.stop_gradient(logp_of(lora.combine(candidate, frozen), batch))
    update_kl = grpo.masked_mean(grpo.kl_k3(logp_new, logp_old_params), batch["mask"].astype(bool))
    scale = curriculum.kl_cap_scale(update_kl, s.env.max_kl, s.env.kl_cap_mode)
    params = jax.tree.map(lambda new, old: (old + scale * (new - old)).astype(old.dtype), candidate, trained)
    params = lora.combine(params, frozen)
    opt = jax.tree.map(lambda new, old: jnp.where(scale > 0, new, old), candidate_opt, env_opt)
    metrics.update(update_kl=update_kl, cap_scale=scale)
    return params, opt, metrics

  # ---- the step ------------------------------------------------------------------------------------------------

  def task_shards(self) -> int:
    """How many shards the step's task batch (fresh tasks, then replayed ones) is laid out in, shard by shard
    (sharding.interleave_rows): the batch shards of the mesh in context, so that no device's rows move when the two
    join. 1 (a plain concatenate, fresh tasks first) without both kinds of task, when a count does not divide, and
    on an XLA:CPU target: there the shard-by-shard executable, read back from the persistent compilation cache on
    8 devices, deadlocked XLA:CPU's collectives (jax 0.10.2; README, "Planning"), and on one host's memory the
    concatenate's few kB cost nothing."""
    s = self.settings
    if not (s.num_fresh and s.pools.num_replay) or target_platform() == "cpu":
      return 1
    return batch_shards_in_context(s.num_fresh, s.pools.num_replay)

  def draw(self, state: CoevolutionState) -> dict[str, Any]:
    """The step's random draws, before its phases: the next rng `key`, the env's and the agent's sampling keys, the
    env's seed tasks from D_env (`seeds`, with `known` = a generated task whose p̂ is known, and `seed_valid` per env
    sample) and the replayed tasks from D_train (`replay`), with both pools as the draws leave them."""
    s = self.settings
    key, k_seed, k_env, k_replay, k_agent = jax.random.split(jax.random.wrap_key_data(state.rng), 5)
    out = {"key": key, "k_env": k_env, "k_agent": k_agent, "env_pool": state.env_pool, "train_pool": state.train_pool}
    draw = functools.partial(pools.sample, step=state.step, new_window=s.pools.new_window)
    if s.num_fresh:
      seeds, _, out["env_pool"] = draw(state.env_pool, k_seed, s.env.num_seeds, mix=s.pools.env_seed_mix)
      out["seeds"] = {**seeds, "known": seeds["valid"] & ~seeds["is_seed"]}
      out["seed_valid"] = jnp.repeat(seeds["valid"], s.env.samples_per_seed)
    if s.pools.num_replay:
      weights = None
      if s.pools.replay_weighting == LEVEL_LEARNABILITY:
        weights = pools.level_learnability_weights(state.train_pool, state.step, window=s.pools.replay_level_window)
      out["replay"], out["replay_idx"], out["train_pool"] = draw(
        state.train_pool, k_replay, s.pools.num_replay, mix=s.pools.replay_mix, weights=weights
      )
    return out

  def examples(
    self, tasks: TaskBatch, p_hat, agent_out, rewards, shards: int
  ) -> tuple[dict[str, jax.Array], jax.Array, jax.Array]:
    """The text log's tasks, spread over p̂ (fresh and replayed alike), with their first rollout; and, for each,
    whether it is a fresh task and its row among the fresh ones (`shards`: Coevolution.task_shards)."""
    s = self.settings
    pick = examples_across_p_hat(p_hat, tasks.valid, NUM_LOGGED_EXAMPLES)
    if s.num_fresh and s.pools.num_replay:
      picked_fresh, fresh_row = interleaved_position(pick, s.num_fresh, tasks.valid.shape[0], shards)
    else:
      picked_fresh, fresh_row = pick < s.num_fresh, jnp.minimum(pick, max(s.num_fresh - 1, 0))
    examples = {
      mt.EXAMPLE_PROMPT_IDS: tasks.prompt_ids[pick],
      mt.EXAMPLE_SPEC: tasks.spec[pick],
      mt.EXAMPLE_DIFFICULTY: tasks.difficulty[pick],
      mt.EXAMPLE_VALID: tasks.valid[pick],
      mt.EXAMPLE_P_HAT: p_hat[pick],
      mt.EXAMPLE_RESPONSE: agent_out.tokens[pick * s.agent.grpo.group_size],
      mt.EXAMPLE_REWARD: rewards[pick, 0],
      mt.EXAMPLE_FRESH: picked_fresh,
    }
    return examples, picked_fresh, fresh_row

  def admit_fresh(self, train_pool, env_pool, fresh: TaskBatch, env_out, fresh_cur, step) -> tuple[Any, Any]:
    """The fresh tasks into D_train (every valid one) and D_env (those in the band, or every valid one with
    `pools.env_admits = "valid"`), each with its p̂."""
    s = self.settings
    rows = pool_rows(fresh, env_out.tokens, env_out.mask)
    p_hat, valid = fresh_cur["p_hat"], fresh.valid
    train_pool = pools.insert(train_pool, rows, valid, step, p_hat=p_hat, keep_seeds=s.pools.keep_seeds)
    admitted = fresh_cur["keep"] if s.pools.env_admits == BAND else valid
    env_pool = pools.insert(env_pool, rows, admitted, step, p_hat=p_hat, keep_seeds=s.pools.keep_seeds)
    return train_pool, env_pool

  def fresh_metrics(
    self, fresh: TaskBatch, fresh_cur: dict[str, jax.Array], env_out, seeds, picked_fresh, fresh_row
  ) -> dict[str, jax.Array]:
    """The figures of the env's fresh tasks as the agent met them (their p̂, band, R_env, validity, difficulty, split
    by seed source where the env is prompted from D_env too, and the histograms' values), its output's length and
    token count, and the env's text of the example tasks (`picked_fresh`, `fresh_row`: Coevolution.examples)."""
    s = self.settings
    p_hat, valid = fresh_cur["p_hat"], fresh.valid
    metrics = {
      mt.P_HAT_MEAN: fresh_cur["p_hat_mean"],
      mt.R_ENV_MEAN: fresh_cur["r_env_mean"],
      mt.BAND_FRAC: fresh_cur["band_frac"],
      mt.INVALID_FRAC: 1.0 - fresh_cur["valid_frac"],
      mt.P_HAT_0_OR_1_FRAC: grpo.masked_mean(((p_hat == 0) | (p_hat == 1)).astype(jnp.float32), valid),
      mt.ENV_TOKENS: env_out.mask.sum().astype(jnp.float32),
      mt.ENV_OUTPUT_LEN: env_out.mask.sum(-1).astype(jnp.float32).mean(),
      mt.P_HAT: jnp.where(valid, p_hat, -1.0),  # per task, for the histogram; -1 = invalid
      mt.DIFFICULTY: jnp.where(valid, fresh.difficulty, -1.0),
      mt.EXAMPLE_ENV_TOKENS: env_out.tokens[jnp.where(picked_fresh, fresh_row, 0)],  # shown for fresh ones only
    }
    metrics.update({mt.CURRICULUM + k: v for k, v in _masked_stats(fresh.difficulty, valid, "difficulty").items()})
    if s.pools.env_seed_mix[0] < 1:  # prompts can come from D_env too; with base seeds only, the split repeats the mean
      from_base = jnp.repeat(seeds["is_seed"], s.env.samples_per_seed)
      metrics.update(by_seed_source({mt.P_HAT_MEAN: p_hat, mt.DIFFICULTY_MEAN: fresh.difficulty}, valid, from_base))
    return metrics

  def step(self, state: CoevolutionState) -> tuple[CoevolutionState, dict[str, jax.Array]]:
    s = self.settings
    drawn = self.draw(state)
    key, train_pool, env_pool, metrics = drawn["key"], drawn["train_pool"], drawn["env_pool"], {}

    parts = []
    if s.num_fresh:
      seeds = drawn["seeds"]
      env_prompts, env_out, fresh = self.generate_tasks(state.env, seeds, drawn["k_env"])
      fresh = fresh.replace(valid=fresh.valid & drawn["seed_valid"])
      parts.append(fresh)
    if s.pools.num_replay:
      replay_rows, replay_idx = drawn["replay"], drawn["replay_idx"]
      parts.append(task_batch(replay_rows))
    shards = self.task_shards()
    tasks = parts[0] if len(parts) == 1 else jax.tree.map(lambda a, b: interleave_rows(a, b, shards), *parts)

    grouped, agent_out, rewards = self.rollouts(state.agent, tasks, drawn["k_agent"])
    cur = curriculum.curriculum_targets(rewards, tasks.valid, s.env.curriculum, s.domain.success_threshold)
    dropout = lora_dropout_key(s.agent.lora, drawn["k_agent"])  # {} unless LoRA dropout is on
    agent, agent_opt, agent_metrics = self.agent_update(
      state.agent, state.agent_opt, state.agent_ref, grouped, agent_out, rewards, tasks.valid, **dropout
    )
    metrics.update({mt.AGENT + AGENT_METRIC_NAMES.get(k, k): v for k, v in agent_metrics.items()})
    valid_f = tasks.valid.astype(jnp.float32)
    metrics.update(
      {
        mt.REWARD_MEAN: (rewards.mean(-1) * valid_f).sum() / jnp.maximum(valid_f.sum(), 1.0),
        mt.AGENT_ACCURACY: cur["p_hat_mean"],
        mt.RESPONSE_LEN: agent_out.mask.sum(-1).astype(jnp.float32).mean(),
        mt.AGENT_TOKENS: agent_out.mask.sum().astype(jnp.float32),
      }
    )
    examples, picked_fresh, fresh_row = self.examples(tasks, cur["p_hat"], agent_out, rewards, shards)
    metrics.update(examples)

    env, env_opt = state.env, state.env_opt
    skipped_env = state.skipped_env
    if s.num_fresh:
      fresh_rewards = split_rows(rewards, s.num_fresh, shards)[0] if s.pools.num_replay else rewards
      fresh_cur = curriculum.curriculum_targets(
        fresh_rewards, fresh.valid, s.env.curriculum, s.domain.success_threshold
      )
      metrics.update(self.fresh_metrics(fresh, fresh_cur, env_out, seeds, picked_fresh, fresh_row))
      if s.env.train:
        dropout = lora_dropout_key(s.env.lora, drawn["k_env"])
        env, env_opt, env_metrics = self.env_update(
          state.env, state.env_opt, state.env_ref, env_prompts, env_out, fresh_cur, fresh.valid, **dropout
        )
        metrics.update({mt.ENV + ENV_METRIC_NAMES.get(k, k): v for k, v in env_metrics.items()})
        skipped_env = skipped_env + env_metrics["skipped"]
      train_pool, env_pool = self.admit_fresh(train_pool, env_pool, fresh, env_out, fresh_cur, state.step)
    if s.pools.num_replay:
      replay_p_hat = split_rows(cur["p_hat"], s.num_fresh, shards)[1] if s.num_fresh else cur["p_hat"]
      train_pool = pools.update_stats(
        train_pool, replay_idx, replay_p_hat, state.step, mask=replay_rows["valid"], order_ids=replay_rows["order"]
      )
      metrics[mt.REPLAY_P_HAT_MEAN] = grpo.masked_mean(replay_p_hat, replay_rows["valid"])
      metrics[mt.REPLAY_DIFFICULTY_MEAN] = grpo.masked_mean(replay_rows["difficulty"], replay_rows["valid"])
    for name, pool in (("train", train_pool), ("env", env_pool)):
      metrics.update({mt.pool_tag(name, k): v for k, v in pools.pool_stats(pool, state.step).items()})
    metrics[mt.AGENT_SKIPPED_UPDATES] = state.skipped_agent + agent_metrics["skipped"]  # over the run so far
    metrics[mt.ENV_SKIPPED_UPDATES] = skipped_env

    new_state = state.replace(
      agent=agent,
      agent_opt=agent_opt,
      env=env,
      env_opt=env_opt,
      train_pool=train_pool,
      env_pool=env_pool,
      rng=jax.random.key_data(key),
      step=state.step + 1,
      skipped_agent=state.skipped_agent + agent_metrics["skipped"],
      skipped_env=skipped_env,
    )
    return new_state, metrics

  def jit_step(self, state_shardings: Any):
    """The step as one jax.jit with explicit state shardings in and out, the state donated."""
    return jax.jit(self.step, in_shardings=(state_shardings,), out_shardings=(state_shardings, None), donate_argnums=0)

  # ---- the static ablation -----------------------------------------------------------------------------------

  def static_round(self, state: CoevolutionState) -> CoevolutionState:
    """One of the static ablation's rounds before training (mode "static", `pools.static_rounds` of them): the
    warm-started env writes tasks from `env.num_seeds` seeds of D_env, shown as of unknown p̂, and every valid one
    joins D_train for good; the step then only replays. Advances the rng, not the step."""
    s = self.settings
    key, k_seed, k_env = jax.random.split(jax.random.wrap_key_data(state.rng), 3)
    seeds, _, env_pool = pools.sample(state.env_pool, k_seed, s.env.num_seeds, step=state.step)
    seeds = {**seeds, "known": jnp.zeros_like(seeds["valid"])}
    _, out, tasks = self.generate_tasks(state.env, seeds, k_env)
    rows = pool_rows(tasks, out.tokens, out.mask)
    train_pool = pools.insert(state.train_pool, rows, tasks.valid, state.step, keep_seeds=True)
    return state.replace(train_pool=train_pool, env_pool=env_pool, rng=jax.random.key_data(key))

  # ---- evaluation --------------------------------------------------------------------------------------------

  def heldout_rewards(self, agent_params: nnx.State, tasks: TaskBatch) -> jax.Array:
    """Greedy R_agent [N] on a fixed task set (held-out evaluation)."""
    params = dataclasses.replace(self.settings.agent.sampling, temperature=0.0)
    out = sampler.sample(
      nnx.merge(self.agent_graphdef, agent_params), tasks.prompt_ids, tasks.prompt_mask, jax.random.key(0), params
    )
    return jnp.where(tasks.valid, self.domain.verify(tasks, out.tokens, out.mask), 0.0)
