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
from genenv_jax.coevolution.settings import ModelSettings, OptimizerSettings, PoolSettings, from_config
from genenv_jax.coevolution.step import Coevolution, CoevolutionState, pool_rows, task_batch
from genenv_jax.models import lora
from genenv_jax.models.config import ModelConfig
from genenv_jax.models.hf import abstract_model, load_hf
from genenv_jax.models.tokenizer import Tokenizer, load_tokenizer
from genenv_jax.models.transformer import Transformer
from genenv_jax.parallel import sharding as shd
from genenv_jax.rl import pools
from genenv_jax.rl.updates import make_optimizer
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


def model_from_config(cfg: ModelSettings, vocab_size: int, mesh: Mesh, seed: int) -> Transformer:
  """A local HF checkpoint (cfg.hf_path) or a random decoder of the configured shape, placed on the mesh; either
  computes attention as `cfg.attention` says."""
  if cfg.hf_path:
    model = load_hf(cfg.hf_path, dtype=cfg.dtype, mesh=mesh, remat=cfg.remat)
    model.use_attention(cfg.attention)
    return model
  config = cfg.model_config(vocab_size)
  graphdef, abstract = abstract_model(config)
  shardings = shd.state_shardings(abstract, mesh)
  state = jax.jit(lambda: nnx.split(Transformer(config, rngs=nnx.Rngs(seed)))[1], out_shardings=shardings)()
  return nnx.merge(graphdef, state)


def task_rows(tasks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  """The pool rows of a domain's tasks (`seed_tasks()`: the TaskBatch fields and each task's own env text)."""
  return pool_rows(task_batch(tasks), tasks["env_ids"], tasks["env_mask"])


def check_pool_capacities(pool_settings: PoolSettings, num_seed_tasks: int) -> None:
  """Raises ValueError when D_train or D_env cannot hold the domain's seed tasks plus generated ones: each pool starts
  with every seed task, so a capacity below their count would drop seeds, and (with keep_seeds) one equal to it
  leaves no slot for a generated task. Capacity minus seed count is how many generated tasks a pool remembers
  (oldest evicted first, `rl.pools.insert`)."""
  for name in ("train_capacity", "env_capacity"):
    capacity = getattr(pool_settings, name)
    if capacity < num_seed_tasks or (capacity == num_seed_tasks and pool_settings.keep_seeds):
      raise ValueError(
        f"pools.{name} = {capacity}: the pool starts with the domain's {num_seed_tasks} seed tasks and needs room "
        f"for generated ones; set it above {num_seed_tasks} (seeds + the generated tasks it should remember)"
      )


def optimizer_state_shardings(optimizer: optax.GradientTransformation, params: Any, mesh: Mesh) -> Any:
  """Shardings of `optimizer.init(params)`: each parameter-shaped leaf (AdamW's moments) takes its parameter's
  sharding, everything else (step counts) is replicated. `params` leaves carry `.sharding` (arrays or
  ShapeDtypeStructs). Left to XLA, a jitted `optimizer.init` replicates the moments on every device (for a 7B agent
  + env, more than a chip holds: genenv_jax.plan), instead of 1/fsdp of it.
  """
  shapes = jax.eval_shape(optimizer.init, params)
  return optax.tree_map_params(
    optimizer, lambda _, p: p.sharding, shapes, params, transform_non_params=lambda _: shd.replicated(mesh)
  )


def build(
  config: ml_collections.ConfigDict,
  devices=None,
  *,
  abstract: bool = False,
  mesh: Mesh | None = None,
  agent_model: ModelConfig | None = None,
  env_model: ModelConfig | None = None,
) -> tuple[Run, CoevolutionState]:
  """Builds the run and its initial (pre-warm-start) state, every array placed with its sharding.

  The mesh is `mesh`, else one over `devices` (default: all devices, over every process) with the sizes in
  config.mesh. Multi-process: every process runs this with the same config; each builds its share of every array
  (parameters by a jitted init with output shardings, host data such as the held-out set through
  `sharding.global_batch`).

  `abstract=True` (genenv_jax.plan) allocates nothing and reads no checkpoint: every state leaf is a
  jax.ShapeDtypeStruct carrying the sharding the real build gives it, and the models are `agent_model` / `env_model`
  when given, else the settings' shape fields (`ModelSettings.model_config`). Both go through this one function, so
  the state that plan compiles for is the state that training runs.
  """
  tree = from_config(config)  # the config alone: what builds the mesh, the tokenizer, the domain and the models
  mesh = mesh if mesh is not None else shd.make_mesh(tree.mesh.sizes, devices=devices)
  tokenizer = load_tokenizer(tree.tokenizer or None)
  domain = build_domain(config.domain, tokenizer, seed=tree.seed, answer=tree.domain.answer)
  settings = from_config(config, domain, tokenizer)  # with the domain's lengths and the tokenizer's ids
  agent_optimizer, env_optimizer = optimizer_from(settings.agent.optimizer), optimizer_from(settings.env.optimizer)
  vocab = tokenizer.vocab_size
  agent_graphdef, agent_params = _model(
    "agent", settings.agent.model, agent_model, vocab, mesh, settings.seed, abstract, settings.agent.lora.spec
  )
  env_graphdef, env_params = _model(
    "env", settings.env.model, env_model, vocab, mesh, settings.seed + 1, abstract, settings.env.lora.spec
  )
  coevolution = Coevolution(agent_graphdef, env_graphdef, domain, agent_optimizer, env_optimizer, settings)

  replicated = shd.replicated(mesh)

  def place(fn, *args, sharding):
    """fn(*args) computed with output `sharding` (a sharding, or a tree of them), or only its shapes if abstract."""
    with jax.set_mesh(mesh):
      if not abstract:
        return jax.jit(fn, out_shardings=sharding)(*args)
      shapes = jax.eval_shape(fn, *args)
    shardings = jax.tree.map(lambda _: sharding, shapes) if isinstance(sharding, jax.sharding.Sharding) else sharding
    return _shaped(shapes, shardings)

  def reference(params):  # a frozen copy of the initial model (the KL anchor); with LoRA, the base itself is
    if lora.has_adapters(params):  # the anchor (the adapters off, models.lora.reference): no copy is kept
      return None
    return params if abstract else jax.jit(lambda t: jax.tree.map(jnp.copy, t))(params)

  def optimizer_state(optimizer, params):  # over the trainable parameters: the adapters alone with LoRA
    trained = lora.partition(params)[0]
    return place(optimizer.init, trained, sharding=optimizer_state_shardings(optimizer, trained, mesh))

  seeds = task_rows(domain.seed_tasks())
  check_pool_capacities(settings.pools, len(seeds["prompt_ids"]))
  zero = lambda: jnp.zeros((), jnp.int32)  # noqa: E731
  state = CoevolutionState(
    agent=agent_params,
    agent_opt=optimizer_state(agent_optimizer, agent_params),
    agent_ref=reference(agent_params),
    env=env_params,
    env_opt=optimizer_state(env_optimizer, env_params),
    env_ref=reference(env_params),
    train_pool=place(lambda t: pools.seed_pool(t, settings.pools.train_capacity), seeds, sharding=replicated),
    env_pool=place(lambda t: pools.seed_pool(t, settings.pools.env_capacity), seeds, sharding=replicated),
    rng=place(lambda: jax.random.key_data(jax.random.key(settings.seed)), sharding=replicated),
    step=place(zero, sharding=replicated),
    skipped_agent=place(zero, sharding=replicated),
    skipped_env=place(zero, sharding=replicated),
  )
  state_shardings = jax.tree.map(lambda x: x.sharding, state)
  heldout_np = domain.heldout_tasks()  # identical on every process; each places only its own rows on the mesh
  heldout = {k: heldout_np[k] for k in ("prompt_ids", "prompt_mask", "spec", "difficulty", "valid")}
  run = Run(
    mesh=mesh,
    tokenizer=tokenizer,
    domain=domain,
    coevolution=coevolution,
    state_shardings=state_shardings,
    heldout=TaskBatch(**(heldout if abstract else shd.global_batch(heldout, mesh))),
  )
  return run, state


def optimizer_from(o: OptimizerSettings) -> optax.GradientTransformation:
  """The AdamW of an optimizer section (rl.updates.make_optimizer)."""
  return make_optimizer(
    o.lr, o.weight_decay, o.max_grad_norm, eps=o.eps, warmup_steps=o.warmup_steps, decay_steps=o.decay_steps
  )


def _shaped(tree: Any, shardings: Any) -> Any:
  """`tree`'s leaves as jax.ShapeDtypeStructs carrying the matching `shardings` leaves."""
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings)


def _model(
  name: str,
  cfg: ModelSettings,
  given: ModelConfig | None,
  vocab_size: int,
  mesh: Mesh,
  seed: int,
  abstract: bool,
  adapters: lora.LoraSpec | None = None,
) -> tuple[nnx.GraphDef, Any]:
  """A model's graphdef and parameters on the mesh (`model_from_config`), or shapes only with their shardings; with
  `adapters`, LoRA adapters attached (models.lora.attach, A drawn from `seed`, B = 0) and placed as the model is."""
  if abstract:
    config = given or cfg.model_config(vocab_size)
    if adapters is None:
      graphdef, state = abstract_model(config)
    else:
      graphdef, state = nnx.split(
        nnx.eval_shape(lambda: lora.attach(Transformer(config, rngs=nnx.Rngs(0)), adapters, seed))
      )
    params, model_vocab = _shaped(state, shd.state_shardings(state, mesh)), config.vocab_size
  else:
    model = model_from_config(cfg, vocab_size, mesh, seed)
    if adapters is not None:
      lora.attach(model, adapters, seed)
    (graphdef, params), model_vocab = nnx.split(model), model.config.vocab_size
    if adapters is not None:
      params = jax.device_put(params, shd.state_shardings(params, mesh))
  if model_vocab < vocab_size:
    raise ValueError(
      f"the {name} model's vocabulary ({model_vocab}) is smaller than the tokenizer's ({vocab_size}); use the "
      "tokenizer the model was trained with"
    )
  return graphdef, params
