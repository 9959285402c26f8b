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
from flax import nnx
from jax.sharding import Mesh

from genenv_jax import sampling
from genenv_jax import sharding as shd
from genenv_jax.coevolution import POOL_FIELDS, Coevolution, CoevolutionState, StepSettings
from genenv_jax.domains.base import Domain, TaskBatch
from genenv_jax.domains.registry import build_domain
from genenv_jax.models.config import ModelConfig
from genenv_jax.models.hf import abstract_model, load_hf
from genenv_jax.models.transformer import Transformer
from genenv_jax.rl import pools
from genenv_jax.rl.updates import make_optimizer
from genenv_jax.tokenizer import Tokenizer, load_tokenizer


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
  config = ModelConfig(
      vocab_size=vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
      num_layers=cfg.num_layers, num_heads=cfg.num_heads, num_kv_heads=cfg.num_kv_heads, head_dim=cfg.head_dim,
      rope_theta=cfg.rope_theta, tie_word_embeddings=cfg.tie_word_embeddings,
      max_position_embeddings=cfg.max_position_embeddings, param_dtype=cfg.dtype, dtype=cfg.dtype, remat=cfg.remat)
  graphdef, abstract = abstract_model(config)
  shardings = shd.state_shardings(abstract, mesh)
  state = jax.jit(lambda: nnx.split(Transformer(config, rngs=nnx.Rngs(seed)))[1], out_shardings=shardings)()
  return nnx.merge(graphdef, state)


def step_settings(config: ml_collections.ConfigDict, domain: Domain, tokenizer: Tokenizer) -> StepSettings:
  a, e, p = config.agent, config.env, config.pools

  def sampling_params(cfg, max_new):
    return sampling.SamplingParams(max_new_tokens=max_new, temperature=cfg.temperature, top_k=cfg.top_k,
                                   top_p=cfg.top_p, eos_ids=tuple(tokenizer.eos_ids), pad_id=tokenizer.pad_id)

  return StepSettings(
      mode=config.mode, env_train=e.train, env_objective=e.objective, num_seeds=e.num_seeds,
      env_samples_per_seed=e.samples_per_seed, num_replay=p.num_replay, group_size=a.grpo.group_size,
      agent_minibatches=a.grpo.minibatches, agent_sampling=sampling_params(a.sampling, domain.agent_answer_len),
      env_sampling=sampling_params(e.sampling, domain.env_output_len), advantage=a.grpo.advantage,
      clip_low=a.grpo.clip_low, clip_high=a.grpo.clip_high, agent_kl_coef=a.grpo.kl_coef,
      kl_estimator=a.grpo.kl_estimator, entropy_coef=a.grpo.entropy_coef, loss_agg=a.grpo.loss_agg,
      alpha=e.curriculum.alpha, beta=e.curriculum.beta, k_min=e.curriculum.k_min,
      rwr_lambda=e.curriculum.rwr_lambda, success_threshold=config.domain.success_threshold,
      env_kl_coef=e.kl_coef, env_max_kl=e.max_kl, env_kl_cap_mode=e.kl_cap_mode,
      replay_mix=tuple(p.replay_mix), env_seed_mix=tuple(p.env_seed_mix), new_window=p.new_window,
      keep_seeds=p.keep_seeds)


def task_rows(tasks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  return {k: tasks[k] for k in POOL_FIELDS}


def build(config: ml_collections.ConfigDict, devices=None) -> tuple[Run, CoevolutionState]:
  """Builds the run and its initial (pre-warm-start) state, every array placed with its sharding.

  The mesh spans `devices` (default: all devices) with the sizes in config.mesh.
  """
  mesh = shd.make_mesh(dict(config.mesh), devices=devices)
  tokenizer = load_tokenizer(config.tokenizer or None)
  domain = build_domain(config.domain, tokenizer, seed=config.seed)
  agent = model_from_config(config.agent.model, tokenizer.vocab_size, mesh, seed=config.seed)
  env = model_from_config(config.env.model, tokenizer.vocab_size, mesh, seed=config.seed + 1)
  for name, model in (("agent", agent), ("env", env)):
    if model.config.vocab_size < tokenizer.vocab_size:
      raise ValueError(f"the {name} model's vocabulary ({model.config.vocab_size}) is smaller than the tokenizer's "
                       f"({tokenizer.vocab_size}); use the tokenizer the model was trained with")
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
        task_rows(seeds))
    env_pool = jax.jit(lambda t: pools.seed_pool(t, config.pools.env_capacity), out_shardings=replicated)(
        task_rows(seeds))
    agent_opt = jax.jit(agent_optimizer.init)(agent_params)
    env_opt = jax.jit(env_optimizer.init)(env_params)
  copy = jax.jit(lambda t: jax.tree.map(jnp.copy, t))
  state = CoevolutionState(
      agent=agent_params, agent_opt=agent_opt, agent_ref=copy(agent_params), env=env_params, env_opt=env_opt,
      env_ref=copy(env_params), train_pool=train_pool, env_pool=env_pool,
      rng=jax.device_put(jax.random.key_data(jax.random.key(config.seed)), replicated),
      step=jax.device_put(jnp.zeros((), jnp.int32), replicated),
      skipped_agent=jax.device_put(jnp.zeros((), jnp.int32), replicated),
      skipped_env=jax.device_put(jnp.zeros((), jnp.int32), replicated))
  state_shardings = jax.tree.map(lambda x: x.sharding, state)
  state = jax.tree.map(lambda x, s: jax.device_put(x, s), state, state_shardings)
  heldout_np = domain.heldout_tasks()
  heldout = TaskBatch(**{k: jnp.asarray(heldout_np[k]) for k in ("prompt_ids", "prompt_mask", "spec", "difficulty",
                                                                  "valid")})
  run = Run(mesh=mesh, tokenizer=tokenizer, domain=domain, coevolution=coevolution, state_shardings=state_shardings,
            heldout=heldout)
  return run, state
