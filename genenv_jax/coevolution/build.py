"""Config -> everything a run needs: mesh, tokenizer, domain, both models, optimizers, the state and its shardings.

Data flows one way (DESIGN.md): config -> build -> step -> metrics and checkpoints. Nothing here mutates the config.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh

from genenv_jax.benchmarks.registry import build_domain
from genenv_jax.coevolution.step import POOL_FIELDS, Coevolution, CoevolutionState, StepSettings
from genenv_jax.models.config import ModelConfig
from genenv_jax.models.hf import abstract_model, load_hf
from genenv_jax.models.tokenizer import Tokenizer, load_tokenizer
from genenv_jax.models.transformer import Transformer
from genenv_jax.parallel import sharding as shd
from genenv_jax.rl import pools
from genenv_jax.rl.updates import make_optimizer
from genenv_jax.sampling import sampler as sampling
from genenv_jax.tasks.base import Domain, TaskBatch


@dataclasses.dataclass(frozen=True)
class Run:
  """The built pieces of a run (everything static, plus the initial state)."""

  mesh: Mesh
  tokenizer: Tokenizer
  domain: Domain
  coevolution: Coevolution
  state_shardings: Any
  heldout: TaskBatch


def model_from_config(cfg: ml_collections.ConfigDict, vocab_size: int, mesh: Mesh, seed: int) -> Transformer:
  """A local HF checkpoint (cfg.hf_path) or a random decoder of the configured shape, placed on the mesh."""
  if cfg.hf_path:
    return load_hf(cfg.hf_path, dtype=cfg.dtype, mesh=mesh, remat=cfg.remat)
  config = model_config_from(cfg, vocab_size)
  graphdef, abstract = abstract_model(config)
  shardings = shd.state_shardings(abstract, mesh)
  state = jax.jit(lambda: nnx.split(Transformer(config, rngs=nnx.Rngs(seed)))[1], out_shardings=shardings)()
  return nnx.merge(graphdef, state)


def step_settings(config: ml_collections.ConfigDict, domain: Domain, tokenizer: Tokenizer) -> StepSettings:
  a, e, p = config.agent, config.env, config.pools

  def sampling_params(cfg, max_new):
    return sampling.SamplingParams(
      max_new_tokens=max_new,
      temperature=cfg.temperature,
      top_k=cfg.top_k,
      top_p=cfg.top_p,
      eos_ids=tuple(tokenizer.eos_ids),
      pad_id=tokenizer.pad_id,
      prefill_rows=int(cfg.get("prefill_rows", 0) or 0),
      kv_cache=cfg.get("kv_cache", "auto"),
      vocab_limit=tokenizer.vocab_size,  # a checkpoint's embedding may be padded past the tokenizer's ids
    )

  return StepSettings(
    mode=config.mode,
    env_train=e.train,
    env_objective=e.objective,
    num_seeds=e.num_seeds,
    env_samples_per_seed=e.samples_per_seed,
    num_replay=p.num_replay,
    group_size=a.grpo.group_size,
    agent_minibatches=a.grpo.minibatches,
    agent_logprob_chunk=a.logprob_chunk,
    env_logprob_chunk=e.logprob_chunk,
    agent_sampling=sampling_params(a.sampling, domain.agent_answer_len),
    env_sampling=sampling_params(e.sampling, domain.env_output_len),
    advantage=a.grpo.advantage,
    clip_low=a.grpo.clip_low,
    clip_high=a.grpo.clip_high,
    agent_kl_coef=a.grpo.kl_coef,
    kl_estimator=a.grpo.kl_estimator,
    entropy_coef=a.grpo.entropy_coef,
    loss_agg=a.grpo.loss_agg,
    alpha=e.curriculum.alpha,
    beta=e.curriculum.beta,
    k_min=e.curriculum.k_min,
    rwr_lambda=e.curriculum.rwr_lambda,
    success_threshold=config.domain.success_threshold,
    env_kl_coef=e.kl_coef,
    env_max_kl=e.max_kl,
    env_kl_cap_mode=e.kl_cap_mode,
    replay_mix=tuple(p.replay_mix),
    env_seed_mix=tuple(p.env_seed_mix),
    new_window=p.new_window,
    keep_seeds=p.keep_seeds,
    agent_max_grad_norm=a.optimizer.max_grad_norm,
    env_max_grad_norm=e.optimizer.max_grad_norm,
  )


def task_rows(tasks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  return {k: tasks[k] for k in POOL_FIELDS}


def optimizer_state_shardings(optimizer: optax.GradientTransformation, params: Any, mesh: Mesh) -> Any:
  """Shardings of `optimizer.init(params)`: each parameter-shaped leaf (AdamW's moments) takes its parameter's
  sharding, everything else (step counts) is replicated. `params` leaves carry `.sharding` (arrays or
  ShapeDtypeStructs). Left to XLA, a jitted `optimizer.init` replicates the moments on every device: 56.7 GiB per
  chip for a 7B agent + env (genenv_jax.plan), instead of 1/fsdp of it.
  """
  shapes = jax.eval_shape(optimizer.init, params)
  return optax.tree_map_params(
    optimizer, lambda _, p: p.sharding, shapes, params, transform_non_params=lambda _: shd.replicated(mesh)
  )


def build(config: ml_collections.ConfigDict, devices=None) -> tuple[Run, CoevolutionState]:
  """Builds the run and its initial (pre-warm-start) state, every array placed with its sharding.

  The mesh spans `devices` (default: all devices, over every process) with the sizes in config.mesh. Multi-process:
  every process runs this with the same config; each builds its share of every array (parameters by a jitted init
  with output shardings, host data such as the held-out set through `sharding.global_batch`).
  """
  mesh = shd.make_mesh(dict(config.mesh), devices=devices)
  tokenizer = load_tokenizer(config.tokenizer or None)
  domain = build_domain(config.domain, tokenizer, seed=config.seed)
  agent = model_from_config(config.agent.model, tokenizer.vocab_size, mesh, seed=config.seed)
  env = model_from_config(config.env.model, tokenizer.vocab_size, mesh, seed=config.seed + 1)
  for name, model in (("agent", agent), ("env", env)):
    if model.config.vocab_size < tokenizer.vocab_size:
      raise ValueError(
        f"the {name} model's vocabulary ({model.config.vocab_size}) is smaller than the tokenizer's "
        f"({tokenizer.vocab_size}); use the tokenizer the model was trained with"
      )
  settings = step_settings(config, domain, tokenizer)
  o = config.agent.optimizer
  agent_optimizer = make_optimizer(o.lr, o.weight_decay, o.max_grad_norm, eps=o.eps, warmup_steps=o.warmup_steps)
  o = config.env.optimizer
  env_optimizer = make_optimizer(o.lr, o.weight_decay, o.max_grad_norm, eps=o.eps, warmup_steps=o.warmup_steps)
  agent_graphdef, agent_params = nnx.split(agent)
  env_graphdef, env_params = nnx.split(env)
  coevolution = Coevolution(agent_graphdef, env_graphdef, domain, agent_optimizer, env_optimizer, settings)

  seeds = domain.seed_tasks()
  replicated = shd.replicated(mesh)
  with jax.set_mesh(mesh):
    train_pool = jax.jit(lambda t: pools.seed_pool(t, config.pools.train_capacity), out_shardings=replicated)(
      task_rows(seeds)
    )
    env_pool = jax.jit(lambda t: pools.seed_pool(t, config.pools.env_capacity), out_shardings=replicated)(
      task_rows(seeds)
    )
    agent_opt = jax.jit(
      agent_optimizer.init, out_shardings=optimizer_state_shardings(agent_optimizer, agent_params, mesh)
    )(agent_params)
    env_opt = jax.jit(env_optimizer.init, out_shardings=optimizer_state_shardings(env_optimizer, env_params, mesh))(
      env_params
    )
  copy = jax.jit(lambda t: jax.tree.map(jnp.copy, t))
  state = CoevolutionState(
    agent=agent_params,
    agent_opt=agent_opt,
    agent_ref=copy(agent_params),
    env=env_params,
    env_opt=env_opt,
    env_ref=copy(env_params),
    train_pool=train_pool,
    env_pool=env_pool,
    rng=jax.device_put(np.asarray(jax.random.key_data(jax.random.key(config.seed))), replicated),
    step=jax.device_put(np.zeros((), np.int32), replicated),
    skipped_agent=jax.device_put(np.zeros((), np.int32), replicated),
    skipped_env=jax.device_put(np.zeros((), np.int32), replicated),
  )
  state_shardings = jax.tree.map(lambda x: x.sharding, state)
  state = jax.tree.map(lambda x, s: jax.device_put(x, s), state, state_shardings)
  heldout_np = domain.heldout_tasks()  # identical on every process; each places only its own rows on the mesh
  heldout = TaskBatch(
    **shd.global_batch({k: heldout_np[k] for k in ("prompt_ids", "prompt_mask", "spec", "difficulty", "valid")}, mesh)
  )
  run = Run(
    mesh=mesh,
    tokenizer=tokenizer,
    domain=domain,
    coevolution=coevolution,
    state_shardings=state_shardings,
    heldout=heldout,
  )
  return run, state


# ---- abstract build (planning: shapes and shardings only, nothing allocated) -----------------------------------------


def model_config_from(cfg: ml_collections.ConfigDict, vocab_size: int) -> ModelConfig:
  """The ModelConfig of a random decoder of the configured shape (the one `model_from_config` builds when hf_path is
  empty); optional fields `vocab_size` (default: the tokenizer's) and `qkv_bias` (default False) are honoured."""
  return ModelConfig(
    vocab_size=int(cfg.get("vocab_size", 0) or vocab_size),
    hidden_size=cfg.hidden_size,
    intermediate_size=cfg.intermediate_size,
    num_layers=cfg.num_layers,
    num_heads=cfg.num_heads,
    num_kv_heads=cfg.num_kv_heads,
    head_dim=cfg.head_dim,
    rope_theta=cfg.rope_theta,
    qkv_bias=bool(cfg.get("qkv_bias", False)),
    tie_word_embeddings=cfg.tie_word_embeddings,
    max_position_embeddings=cfg.max_position_embeddings,
    param_dtype=cfg.dtype,
    dtype=cfg.dtype,
    remat=cfg.remat,
  )


def abstract_build(
  config: ml_collections.ConfigDict,
  mesh: Mesh,
  agent_model: ModelConfig | None = None,
  env_model: ModelConfig | None = None,
) -> tuple[Run, CoevolutionState]:
  """`build` without allocating: the same Run, and a CoevolutionState whose every leaf is a jax.ShapeDtypeStruct
  carrying the NamedSharding `build` would give it (for lowering and compiling the step, e.g. genenv_jax.plan).

  No checkpoint is read: the models are `agent_model` / `env_model` when given, else the config's shape fields
  (`model_config_from`). Optimizer-state shardings are those of `build` (`optimizer_state_shardings`).
  """
  tokenizer = load_tokenizer(config.tokenizer or None)
  domain = build_domain(config.domain, tokenizer, seed=config.seed)
  replicated = shd.replicated(mesh)
  settings = step_settings(config, domain, tokenizer)

  def optimizer(o):
    return make_optimizer(o.lr, o.weight_decay, o.max_grad_norm, eps=o.eps, warmup_steps=o.warmup_steps)

  def abstract(tree, shardings):
    return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings)

  def model(cfg, given, name):
    mc = given or model_config_from(cfg, tokenizer.vocab_size)
    if mc.vocab_size < tokenizer.vocab_size:
      raise ValueError(
        f"the {name} model's vocabulary ({mc.vocab_size}) is smaller than the tokenizer's "
        f"({tokenizer.vocab_size}); use the tokenizer the model was trained with"
      )
    graphdef, state = abstract_model(mc)
    return graphdef, abstract(state, shd.state_shardings(state, mesh))

  def opt_state(opt, params):
    with jax.set_mesh(mesh):
      shapes = jax.eval_shape(opt.init, params)
    return abstract(shapes, optimizer_state_shardings(opt, params, mesh))

  agent_graphdef, agent_params = model(config.agent.model, agent_model, "agent")
  env_graphdef, env_params = model(config.env.model, env_model, "env")
  agent_optimizer, env_optimizer = optimizer(config.agent.optimizer), optimizer(config.env.optimizer)
  coevolution = Coevolution(agent_graphdef, env_graphdef, domain, agent_optimizer, env_optimizer, settings)
  seeds = task_rows(domain.seed_tasks())
  rep = lambda tree: abstract(tree, jax.tree.map(lambda _: replicated, tree))  # noqa: E731
  scalar = jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated)
  state = CoevolutionState(
    agent=agent_params,
    agent_opt=opt_state(agent_optimizer, agent_params),
    agent_ref=agent_params,
    env=env_params,
    env_opt=opt_state(env_optimizer, env_params),
    env_ref=env_params,
    train_pool=rep(jax.eval_shape(lambda t: pools.seed_pool(t, config.pools.train_capacity), seeds)),
    env_pool=rep(jax.eval_shape(lambda t: pools.seed_pool(t, config.pools.env_capacity), seeds)),
    rng=rep(jax.eval_shape(lambda: jax.random.key_data(jax.random.key(config.seed)))),
    step=scalar,
    skipped_agent=scalar,
    skipped_env=scalar,
  )
  heldout_np = domain.heldout_tasks()
  heldout = TaskBatch(**{k: heldout_np[k] for k in ("prompt_ids", "prompt_mask", "spec", "difficulty", "valid")})
  run = Run(
    mesh=mesh,
    tokenizer=tokenizer,
    domain=domain,
    coevolution=coevolution,
    state_shardings=jax.tree.map(lambda x: x.sharding, state),
    heldout=heldout,
  )
  return run, state
