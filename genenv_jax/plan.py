"""CLI: memory and speed planning. Lowers and compiles the FULL co-evolution step on a virtual mesh of N fake CPU
devices from abstract shapes only (no weights allocated, no checkpoint read), then prints per-device memory, the
analytic per-phase time (compute, HBM, ICI collectives), training MFU, sampling HBM-bandwidth utilisation, a memory
breakdown, and whether the config fits.

  python -m genenv_jax.plan --config=configs/qwen2_5_7b.py:v5p-64 [--nocompile] [--attention=blockwise] [--config.x=y]

The slice comes from the config (`config.slice`, e.g. "v5p-64" = 32 v5p chips; plan_math.slice_chips), or from
--devices and --chip. The step is the one train.py runs: `Coevolution.jit_step(state_shardings)` (explicit in/out
shardings, the state donated) on the state `build.build(abstract=True)` describes (the same shapes and shardings
`build.build` gives). --nocompile skips the compile and gives the analytic figures only (no domain data needed).

Models: a config's shape fields (hidden_size, ..., optional vocab_size / qkv_bias), or, for a model with an
`hf_path` (or an `arch` field), the built-in table KNOWN_MODELS matched by name (the checkpoint is never opened).
A benchmark domain whose data directory is absent is planned as the arithmetic domain padded to the same four
lengths: the compiled step has the same shapes (its host parse/verify callbacks hold no device memory).

What the figures are (measured with jax 0.10.2, see tests/unit/planning/test_plan.py):
  - memory: XLA's CompiledMemoryStats of the compiled SPMD program, i.e. PER DEVICE. The CPU compiler's fusion and
    buffer assignment are not TPU's, so treat them as an estimate (plan_math keeps a 10% margin). The analytic
    breakdown (plan_analytic) says where the bytes go.
  - FLOPs: XLA's cost_analysis() is PER DEVICE (a matmul sharded 8 ways reports 1/8 of its FLOPs) and counts the
    body of every loop ONCE (a lax.scan of 10 matmuls reports 1 matmul; so do the decode while_loop and the
    mini-batch scan). So the step time uses the analytic count (plan_analytic, every row decoding its full budget);
    the XLA figure is printed beside the analytic count of the same loops-once program as a cross-check.
  - time and MFU: plan_analytic, per phase, serial and overlapped; MFU is an upper bound.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time

from absl import app, flags
from ml_collections import config_flags

from genenv_jax import cli


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the command-line flags on `flag_values` (a test lists them on a fresh FlagValues). Called on absl's FLAGS
  only when this module runs as a program, so that importing it next to another program's module with flags of the
  same name (tests, tools) never collides in absl's global registry."""
  global _CONFIG, _DEVICES, _CHIP, _USABLE, _JSON, _LAYERS, _FAST, _NOCOMPILE, _ATTENTION
  fv = flag_values
  _CONFIG = config_flags.DEFINE_config_file(
    "config",
    None,
    "Config file (get_config(arg) style), e.g. configs/qwen2_5_7b.py:v5p-64.",
    lock_config=True,
    flag_values=fv,
  )
  _DEVICES = flags.DEFINE_integer(
    "devices",
    None,
    "Number of (fake CPU) devices of the virtual mesh, one per chip "
    "(default: the chips of the config's slice; v5p-64 = 32 chips).",
    flag_values=fv,
  )
  _CHIP = flags.DEFINE_string(
    "chip",
    None,
    "TPU chip for the time and fit estimates: v4, v5e, v5p or v6e (default: the config's slice).",
    flag_values=fv,
  )
  _USABLE = flags.DEFINE_float(
    "usable_fraction", 0.9, "Fraction of HBM a program may use and still 'fit'.", flag_values=fv
  )
  _JSON = flags.DEFINE_string("json", None, "Also write the figures as JSON to this path.", flag_values=fv)
  _LAYERS = flags.DEFINE_list(
    "layers",
    None,
    "Two small layer counts, e.g. 2,4: compile the step with both models "
    "cut to each and extrapolate the memory figures linearly to the real layer count (a "
    "cross-check, or for programs too slow to compile here; see plan_by_layers).",
    flag_values=fv,
  )
  _FAST = flags.DEFINE_boolean(
    "fast_compile",
    True,
    "Skip LLVM optimisation in the CPU compile "
    "(--xla_backend_optimization_level=0): same buffers, much shorter compile.",
    flag_values=fv,
  )
  _NOCOMPILE = flags.DEFINE_boolean(
    "nocompile",
    False,
    "Analytic figures only: no lowering, no compile, no domain "
    "build (the fit is then judged on the analytic memory estimate).",
    flag_values=fv,
  )
  _ATTENTION = flags.DEFINE_string(
    "attention",
    None,
    "Attention implementation for both models, overriding model.attention: naive, blockwise, splash, cudnn or auto.",
    flag_values=fv,
  )
  flags.mark_flags_as_required(["config"], flag_values=fv)


# Architectures of known checkpoints (from their config.json), so plan never needs the files.
KNOWN_MODELS = {
  "qwen2.5-0.5b": dict(
    vocab_size=151936,
    hidden_size=896,
    intermediate_size=4864,
    num_layers=24,
    num_heads=14,
    num_kv_heads=2,
    head_dim=64,
    tie_word_embeddings=True,
  ),
  "qwen2.5-1.5b": dict(
    vocab_size=151936,
    hidden_size=1536,
    intermediate_size=8960,
    num_layers=28,
    num_heads=12,
    num_kv_heads=2,
    head_dim=128,
    tie_word_embeddings=True,
  ),
  "qwen2.5-7b": dict(
    vocab_size=152064,
    hidden_size=3584,
    intermediate_size=18944,
    num_layers=28,
    num_heads=28,
    num_kv_heads=4,
    head_dim=128,
    tie_word_embeddings=False,
  ),
}
_QWEN = dict(
  rope_theta=1e6, qkv_bias=True, max_position_embeddings=32768, rms_norm_eps=1e-6, architecture="Qwen2ForCausalLM"
)


def known_model_name(name: str) -> str | None:
  """'/ckpt/Qwen2.5-7B-Instruct' -> 'qwen2.5-7b' (the table key the basename starts with), else None."""
  base = os.path.basename(os.path.normpath(str(name))).lower()
  return next((k for k in sorted(KNOWN_MODELS, key=len, reverse=True) if base.startswith(k)), None)


def resolve_model(cfg, vocab_size: int, attention: str | None = None):
  """The ModelConfig plan compiles for one model: KNOWN_MODELS by `arch` or `hf_path`, else the shape fields; the
  attention implementation is `attention` when given, else the config's `attention` field when it has one."""
  from genenv_jax.coevolution.build import model_config_from
  from genenv_jax.models.config import ModelConfig

  name = cfg.get("arch", "") or cfg.hf_path
  if not name:
    mc = model_config_from(cfg, vocab_size)
  else:
    key = known_model_name(name)
    if key is None:
      raise ValueError(
        f"plan does not read checkpoints and does not know the architecture of {name!r} (known: "
        f"{', '.join(KNOWN_MODELS)}); set the model's arch field to one of those, or set hf_path='' "
        "and give the shape fields (hidden_size, intermediate_size, num_layers, ...)"
      )
    mc = ModelConfig(**{**_QWEN, **KNOWN_MODELS[key]}, param_dtype=cfg.dtype, dtype=cfg.dtype, remat=cfg.remat)
  attention = attention or cfg.get("attention", None)
  return dataclasses.replace(mc, attention=attention) if attention else mc


def set_device_count(n: int, fast_compile: bool = False) -> None:
  """Asks XLA for n fake CPU devices. XLA reads XLA_FLAGS when JAX first creates its backends (at the first
  jax.devices() or computation, not at import), so this works until then; afterwards the count cannot change and
  `plan` reports the mismatch."""
  if n <= 0:
    raise ValueError(f"--devices must be positive, got {n}")
  flags_now = re.sub(r"--xla_force_host_platform_device_count=\\d+", "", os.environ.get("XLA_FLAGS", ""))
  extra = " --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true" if fast_compile else ""
  os.environ["XLA_FLAGS"] = f"{flags_now} --xla_force_host_platform_device_count={n}{extra}".strip()
  os.environ["JAX_PLATFORMS"] = "cpu"
  if "jax" in sys.modules:
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
      sys.modules["jax"].config.update("jax_platforms", "cpu")


def slice_of(config, devices: int | None = None, chip_name: str | None = None) -> tuple[str, int]:
  """(chip, devices): --chip / --devices where given, else the config's `slice` (e.g. "v5p-64": v5p, 32 chips)."""
  from genenv_jax.planning import costs as plan_math

  if devices is not None and devices <= 0:
    raise ValueError(f"--devices must be positive, got {devices}")
  name = config.get("slice", "") or ""
  if name:
    kind, chips = plan_math.slice_chips(name)
    return (chip_name or kind), (devices or chips)
  if devices is None or chip_name is None:
    raise ValueError(
      "the config names no TPU slice (config.slice, e.g. configs/qwen2_5_7b.py:v5p-64): give "
      "--devices (chips of the slice) and --chip (v4, v5e, v5p or v6e)"
    )
  return chip_name, devices


def shape_of(mc, kv_cache: str = "auto"):
  """plan_math.Shape of a ModelConfig, with the KV cache kind its sampling uses."""
  import numpy as np

  from genenv_jax.models.config import to_dtype
  from genenv_jax.planning import costs as plan_math

  head = mc.vocab_size * mc.hidden_size
  untied_head = 0 if mc.tie_word_embeddings else head
  body = mc.num_params - mc.vocab_size * mc.hidden_size - mc.hidden_size - untied_head
  return plan_math.Shape(
    body_params=body,
    head_params=head,
    layers=mc.num_layers,
    heads=mc.num_heads,
    head_dim=mc.head_dim,
    kv_heads=mc.num_kv_heads,
    param_bytes=mc.num_params * np.dtype(to_dtype(mc.param_dtype)).itemsize,
    hidden=mc.hidden_size,
    intermediate=mc.intermediate_size,
    dtype_bytes=np.dtype(to_dtype(mc.dtype)).itemsize,
    kv_cache=kv_cache,
  )


LENGTHS = ("agent_prompt_len", "agent_answer_len", "env_prompt_len", "env_output_len")


def workload_of(config, lengths=None):
  """plan_analytic.Workload of a config: rows as coevolution.StepSettings counts them, lengths from config.domain
  (or `lengths`, a mapping with the four LENGTHS, e.g. the built domain's when the config leaves them 0)."""
  from genenv_jax.planning import analytic as plan_analytic

  lengths = lengths or {k: int(config.domain.get(k, 0)) for k in LENGTHS}
  if not all(lengths.get(k) for k in LENGTHS):
    raise ValueError(
      f"the config leaves a domain length at 0 ({dict(lengths)}): --nocompile needs all four of "
      f"{', '.join(LENGTHS)} set (or drop --nocompile so the domain is built)"
    )
  a, e = config.agent, config.env
  env_rows = e.num_seeds * e.get("samples_per_seed", 1) if config.mode == "coevolve" else 0
  chunk = lambda m: int(m.get("logprob_chunk", 0) or 0)  # noqa: E731
  prefill = lambda m: int(m.sampling.get("prefill_rows", 0) or 0)  # noqa: E731
  return plan_analytic.Workload(
    env_rows=env_rows,
    agent_rows=(env_rows + config.pools.num_replay) * a.grpo.group_size,
    minibatches=a.grpo.minibatches,
    agent_prompt=lengths["agent_prompt_len"],
    agent_answer=lengths["agent_answer_len"],
    env_prompt=lengths["env_prompt_len"],
    env_output=lengths["env_output_len"],
    agent_reference=a.grpo.kl_coef > 0,
    env_train=bool(e.train),
    agent_logprob_chunk=chunk(a),
    env_logprob_chunk=chunk(e),
    agent_prefill_rows=prefill(a),
    env_prefill_rows=prefill(e),
  )


def planning_domain(config):
  """(config, note): a benchmark domain whose data directory is missing becomes the arithmetic domain padded to the
  same four lengths (same compiled shapes), with a note saying so; any other config is returned as it is."""
  from genenv_jax.benchmarks.registry import FAMILY_DATA, TEXT_DOMAINS
  from genenv_jax.data import resolve_data_dir
  from genenv_jax.data.manifest import require

  d = config.domain
  if d.name not in TEXT_DOMAINS:
    return config, None
  try:
    require(resolve_data_dir(d.get("data_dir", "") or None), FAMILY_DATA[d.name])
    return config, None
  except FileNotFoundError as e:
    note = (
      f"{e}; planned as the arithmetic domain padded to the {d.name} lengths (the compiled step has the same shapes)"
    )
  import ml_collections

  c = ml_collections.ConfigDict(config.to_dict())
  c.domain = ml_collections.ConfigDict(
    dict(
      name="arithmetic",
      verifier="jax",
      min_operands=2,
      max_operands=4,
      max_digits=3,
      operators="+-*",
      bound=10**6,
      seed_max_difficulty=0,
      seed_decay=1.0,
      # fewer seeds than either pool holds (build refuses a pool with no room beyond its seeds); the seed count
      # sets no compiled shape
      num_seeds=max(1, min(2048, config.pools.train_capacity - 1, config.pools.env_capacity - 1)),
      num_heldout=64,
      success_threshold=d.success_threshold,
      **{k: d[k] for k in LENGTHS},
    )
  )
  return c, note


def analytic_figures(analysis, chip) -> dict:
  """The JSON form of a plan_analytic.Analysis."""
  phases = []
  for t in analysis.phases:
    phases.append(
      {
        "name": t.cost.name,
        "kind": t.cost.kind,
        "model_flops": t.cost.model_flops,
        "flops": t.cost.flops,
        "hbm_bytes": t.cost.hbm_bytes,
        "compute_s": t.compute_s,
        "hbm_s": t.hbm_s,
        "ici_s": t.ici_s,
        "serial_s": t.serial_s,
        "overlapped_s": t.overlapped_s,
        "bound": t.bound,
        "mfu_serial": t.mfu_serial,
        "mfu_overlapped": t.mfu_overlapped,
        "hbm_utilisation": t.hbm_utilisation,
        "recompute_overhead": t.recompute_overhead,
        "recompute": dict(t.cost.recompute),
        "collectives": [
          {"name": c.name, "bytes": c.bytes, "count": c.count, "seconds": c.bytes / chip.ici_bandwidth}
          for c in t.cost.collectives
        ],
      }
    )
  return {
    "phases": phases,
    "training": analysis.training,
    "sampling": analysis.sampling,
    "step_serial_s": analysis.step_serial_s,
    "step_overlapped_s": analysis.step_overlapped_s,
    "memory": analysis.memory,
    "peak_phase": analysis.peak_phase,
    "peak_bytes": analysis.peak_bytes,
  }


def loops_once_flops(w, agent, env, mesh, efficient: bool, agent_remat: str, env_remat: str) -> float:
  """Global analytic FLOPs of the program as XLA's cost analysis counts it (every loop body once): both prefills,
  one decode step per sampler, one agent mini-batch (its reference forward over the whole batch, outside the scan),
  and the env update."""
  from genenv_jax.planning import analytic as pa

  total = 0.0
  if w.env_rows:
    total += sum(c.flops for c in pa.sampling_costs("env", env, mesh, w.env_rows, w.env_prompt, 1, efficient))
  total += sum(c.flops for c in pa.sampling_costs("agent", agent, mesh, w.agent_rows, w.agent_prompt, 1, efficient))
  rows = w.agent_rows // w.minibatches
  total += pa.train_cost(
    "", agent, mesh, rows, w.agent_prompt, w.agent_answer, forwards=0, updates=1, remat=agent_remat, efficient=efficient
  ).flops
  if w.agent_reference:
    total += (
      pa.train_cost(
        "",
        agent,
        mesh,
        w.agent_rows,
        w.agent_prompt,
        w.agent_answer,
        forwards=0,
        updates=1,
        remat="none",
        efficient=efficient,
      ).model_flops
      / 3
    )
  if w.env_rows and w.env_train:
    total += pa.train_cost(
      "", env, mesh, w.env_rows, w.env_prompt, w.env_output, forwards=3, updates=1, remat=env_remat, efficient=efficient
    ).flops
  return total


def _device_bytes(tree) -> tuple[int, int]:
  """(bytes on one device, global bytes) of a pytree of ShapeDtypeStructs with shardings."""
  import jax
  import numpy as np

  dev = glob = 0
  for x in jax.tree.leaves(tree):
    item = np.dtype(x.dtype).itemsize
    glob += int(np.prod(x.shape)) * item
    dev += int(np.prod(x.sharding.shard_shape(x.shape))) * item
  return dev, glob


def state_components(state, temporaries: int, devices: int) -> tuple[dict[str, int], dict[str, int]]:
  """Per-device bytes of each memory component (the plan_math.KNOBS keys) and the global bytes of each."""
  dev, glob = {}, {}
  groups = {
    "parameters": (state.agent, state.env),
    "references": (state.agent_ref, state.env_ref),
    "optimizer": (state.agent_opt, state.env_opt),
    "pools": (state.train_pool, state.env_pool, state.rng, state.step, state.skipped_agent, state.skipped_env),
  }
  for name, tree in groups.items():
    dev[name], glob[name] = _device_bytes(tree)
  # Moments held whole on every chip while the parameters are sharded: flag the build's replicated optimizer state.
  param_ratio = dev["parameters"] / max(glob["parameters"], 1)
  if devices > 1 and dev["optimizer"] > 2 * param_ratio * glob["optimizer"]:
    dev["optimizer_replicated"], glob["optimizer_replicated"] = dev.pop("optimizer"), glob.pop("optimizer")
  dev["temporaries"] = glob["temporaries"] = int(temporaries)
  return dev, glob


def plan(
  config,
  devices: int | None = None,
  chip_name: str | None = None,
  usable_fraction: float = 0.9,
  log=print,
  num_layers: int | None = None,
  compile_program: bool = True,
  attention: str | None = None,
) -> dict:
  """Compiles the step for `config` on `devices` fake devices and returns (and logs) the figures.

  devices / chip_name default to the config's slice. `num_layers` replaces both models' layer count;
  compile_program=False gives the analytic figures only (--nocompile; the domain is built only when the config
  leaves a length at 0). `attention` overrides both models' implementation."""
  import jax

  from genenv_jax.models.tokenizer import load_tokenizer
  from genenv_jax.parallel import sharding as shd
  from genenv_jax.planning import analytic as plan_analytic
  from genenv_jax.planning import costs as plan_math

  chip_name, devices = slice_of(config, devices, chip_name)
  chip = plan_math.chip(chip_name)
  if devices <= 0:
    raise ValueError(f"--devices must be positive, got {devices}")
  config, note = planning_domain(config) if compile_program else (config, None)
  vocab = load_tokenizer(config.tokenizer or None).vocab_size
  agent_mc = resolve_model(config.agent.model, vocab, attention)
  env_mc = resolve_model(config.env.model, vocab, attention)
  if num_layers:
    agent_mc, env_mc = (dataclasses.replace(m, num_layers=num_layers) for m in (agent_mc, env_mc))
  mesh_sizes = None
  t0 = time.time()
  t1 = t2 = t3 = t0
  lengths, state, cost, mem = None, None, {}, None
  if compile_program:
    from genenv_jax.coevolution.build import build

    available = jax.devices()
    if len(available) < devices:
      raise ValueError(
        f"jax was initialised with {len(available)} devices, fewer than --devices={devices}: "
        "XLA_FLAGS must ask for them before jax is imported (run plan as `python -m genenv_jax.plan`)"
      )
    mesh = shd.make_mesh(dict(config.mesh), devices=available[:devices])
    mesh_sizes = dict(mesh.shape)
    run, state = build(config, abstract=True, mesh=mesh, agent_model=agent_mc, env_model=env_mc)
    lengths = {k: getattr(run.domain, k) for k in LENGTHS}
    step = run.coevolution.jit_step(run.state_shardings)
    t1 = time.time()
    with jax.set_mesh(mesh):
      lowered = step.lower(state)
      t2 = time.time()
      compiled = lowered.compile()
      t3 = time.time()
    stats = compiled.memory_analysis()
    cost = compiled.cost_analysis() or {}
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    mem = plan_math.Memory(
      arguments=stats.argument_size_in_bytes,
      outputs=stats.output_size_in_bytes,
      temporaries=stats.temp_size_in_bytes,
      generated_code=stats.generated_code_size_in_bytes,
      alias=stats.alias_size_in_bytes,
      xla_peak=int(getattr(stats, "peak_memory_in_bytes", 0)),
    )
  elif not all(int(config.domain.get(k, 0)) for k in LENGTHS):
    from genenv_jax.benchmarks.registry import build_domain

    domain = build_domain(config.domain, load_tokenizer(config.tokenizer or None), seed=config.seed)
    lengths = {k: getattr(domain, k) for k in LENGTHS}
  if mesh_sizes is None:
    mesh_sizes = virtual_mesh_sizes(dict(config.mesh), devices)
  mesh_shape = plan_analytic.MeshShape(mesh_sizes["data"], mesh_sizes["fsdp"], mesh_sizes["tensor"])
  w = workload_of(config, lengths)
  agent_shape = shape_of(agent_mc, config.agent.sampling.get("kv_cache", "auto"))
  env_shape = shape_of(env_mc, config.env.sampling.get("kv_cache", "auto"))
  remat = {"agent": plan_analytic.remat_policy(agent_mc.remat), "env": plan_analytic.remat_policy(env_mc.remat)}
  if agent_mc.attention != env_mc.attention:
    raise ValueError(
      f"plan models one attention implementation for both models, got agent {agent_mc.attention!r} "
      f"and env {env_mc.attention!r}; set both (or pass --attention)"
    )
  analysis = plan_analytic.analyse(
    w,
    agent_shape,
    env_shape,
    mesh_shape,
    chip,
    agent_remat=remat["agent"],
    env_remat=remat["env"],
    attention=agent_mc.attention,
  )
  state_analytic = analysis.memory["state"]
  if state is not None:
    comp_dev, _ = state_components(state, mem.temporaries, devices)
    peak = mem.peak
  else:
    comp_dev = {
      **{k: int(v) for k, v in state_analytic.items()},
      "temporaries": int(sum(analysis.memory[analysis.peak_phase].values())),
    }
    peak = int(analysis.peak_bytes)
  verdict = plan_math.fit_verdict(peak, chip.hbm_bytes, usable_fraction)
  advice = plan_math.rank_advice(comp_dev)
  rows = {
    "env rows": w.env_rows,
    "agent rows": w.agent_rows,
    "agent rows per mini-batch": w.agent_rows // w.minibatches,
  }
  warnings = plan_math.divisibility_warnings(rows, mesh_shape.batch_shards)
  if note:
    warnings.append(note)
  once = loops_once_flops(
    w,
    agent_shape,
    env_shape,
    mesh_shape,
    plan_analytic.memory_efficient(agent_mc.attention),
    remat["agent"],
    remat["env"],
  )
  result = {
    "config": {
      "slice": config.get("slice", "") or "",
      "mesh": mesh_sizes,
      "devices": devices,
      "chip": chip.name,
      "agent_params": agent_mc.num_params,
      "env_params": env_mc.num_params,
      "env_layers": env_mc.num_layers,
      "attention": agent_mc.attention,
      "remat": remat,
      "lengths": {
        "agent_prompt_len": w.agent_prompt,
        "agent_answer_len": w.agent_answer,
        "env_prompt_len": w.env_prompt,
        "env_output_len": w.env_output,
      },
      "rows": rows,
      "minibatches": w.minibatches,
      "logprob_chunk": {"agent": w.agent_logprob_chunk, "env": w.env_logprob_chunk},
      "prefill_rows": {"agent": w.agent_prefill_rows, "env": w.env_prefill_rows},
      "kv_cache": {"agent": agent_shape.kv_cache, "env": env_shape.kv_cache},
    },
    "compiled": bool(compile_program),
    "compile_s": {"build": t1 - t0, "lower": t2 - t1, "compile": t3 - t2},
    "memory": (
      {
        **{k: getattr(mem, k) for k in ("arguments", "outputs", "temporaries", "generated_code", "alias", "xla_peak")},
        "peak": mem.peak,
      }
      if mem
      else {"peak": peak}
    ),
    "components": comp_dev,
    "fits": verdict.fits,
    "hbm": chip.hbm_bytes,
    "usable": verdict.usable,
    "utilisation": verdict.utilisation,
    "flops": {
      "xla_per_device_loops_once": float(cost.get("flops", 0.0)),
      "analytic_per_device_loops_once": once / devices,
      "analytic_per_device_step": sum(t.cost.flops for t in analysis.phases) / devices,
      "xla_bytes_accessed": float(cost.get("bytes accessed", 0.0)),
    },
    "analytic": analytic_figures(analysis, chip),
    "advice": [a.component for a in advice],
    "warnings": warnings,
    "layers": agent_mc.num_layers,
  }
  if log:
    log(format_report(result, advice))
  return result


def virtual_mesh_sizes(mesh: dict, devices: int) -> dict[str, int]:
  """The (data, fsdp, tensor) sizes sharding.make_mesh would give `devices` devices (one size may be -1), without
  creating devices (for --nocompile)."""
  sizes = {k: int(mesh.get(k, 1)) for k in ("data", "fsdp", "tensor")}
  free = [k for k, v in sizes.items() if v == -1]
  known = 1
  for k, v in sizes.items():
    if v != -1:
      if v <= 0:
        raise ValueError(f"mesh.{k} must be positive or -1, got {v}")
      known *= v
  if len(free) > 1:
    raise ValueError(f"at most one mesh size may be -1, got {mesh}")
  if free:
    if devices % known:
      raise ValueError(f"{devices} devices do not divide by {known} (the mesh sizes other than -1 in {mesh})")
    sizes[free[0]] = devices // known
  elif known != devices:
    raise ValueError(f"the mesh {mesh} needs {known} devices, but the slice has {devices}")
  return sizes


def plan_by_layers(
  config,
  devices: int | None,
  chip_name: str | None,
  layers: tuple[int, int],
  usable_fraction: float = 0.9,
  log=print,
  attention: str | None = None,
) -> dict:
  """A cross-check (and the way for programs too slow to compile here): compiles the same step with both models cut
  to layers[0] and to layers[1] layers, and extrapolates every per-device memory and XLA FLOP figure along the
  straight line through the two to the real layer count (exact for the state, whose bytes are linear in the layers;
  with remat, temporaries are the saved per-layer inputs, linear too, plus one layer's and the head's working set).
  The analytic figures are those of the real model."""
  from genenv_jax.planning import costs as plan_math

  kw = dict(usable_fraction=usable_fraction, log=None, attention=attention)
  a = plan(config, devices, chip_name, num_layers=layers[0], **kw)
  b = plan(config, devices, chip_name, num_layers=layers[1], **kw)
  full = plan(config, devices, chip_name, compile_program=False, **kw)
  real = full["layers"]
  if full["config"]["env_layers"] != real:
    raise ValueError("--layers needs the agent and the env to have the same layer count")
  line = lambda ya, yb: round(plan_math.extrapolate(layers[0], ya, layers[1], yb, real))  # noqa: E731
  r = {
    **a,
    "layers": real,
    "extrapolated_from_layers": list(layers),
    "memory_at_layers": {str(n): res["memory"] for n, res in zip(layers, (a, b))},
    "compile_s": {f"{k}_{n}_layers": v for n, res in zip(layers, (a, b)) for k, v in res["compile_s"].items()},
  }
  r["memory"] = {k: line(a["memory"][k], b["memory"][k]) for k in a["memory"]}
  r["components"] = {k: line(a["components"][k], b["components"][k]) for k in a["components"]}
  r["config"], r["flops"], r["analytic"] = full["config"], dict(full["flops"]), full["analytic"]
  for k in ("xla_per_device_loops_once", "xla_bytes_accessed"):
    r["flops"][k] = line(a["flops"][k], b["flops"][k])
  verdict = plan_math.fit_verdict(r["memory"]["peak"], a["hbm"], usable_fraction)
  r.update(fits=verdict.fits, usable=verdict.usable, utilisation=verdict.utilisation)
  advice = plan_math.rank_advice(r["components"])
  r["advice"] = [x.component for x in advice]
  if log:
    log(format_report(r, advice))
  return r


def _pct(x: float) -> str:
  return f"{100 * x:.1f}%"


def format_report(r: dict, advice) -> str:
  from genenv_jax.planning.costs import fmt_bytes as fb

  c, m, f, an = r["config"], r["memory"], r["flops"], r["analytic"]
  extra = r.get("extrapolated_from_layers")
  L = c["lengths"]
  lines = [
    (
      f"plan: {c['devices']} x {c['chip']}"
      + (f" ({c['slice']})" if c.get("slice") else "")
      + f", mesh {c['mesh']}, agent {c['agent_params'] / 1e9:.2f}B + env {c['env_params'] / 1e9:.2f}B parameters, "
      f"{r['layers']} layers, attention {c['attention']}, remat agent {c['remat']['agent']} / env "
      f"{c['remat']['env']}"
    ),
    (
      f"shapes: agent {c['rows']['agent rows']} rows x ({L['agent_prompt_len']} prompt + {L['agent_answer_len']} "
      f"response) in {c['minibatches']} mini-batches; env {c['rows']['env rows']} rows x ({L['env_prompt_len']} "
      f"prompt + {L['env_output_len']} output); log-prob chunk {c['logprob_chunk']}, prefill rows "
      f"{c['prefill_rows']} (0 = all), KV cache {c.get('kv_cache', 'auto')}"
    ),
  ]
  if r["compiled"]:
    lines += [
      "compile: " + ", ".join(f"{k} {v:.1f} s" for k, v in r["compile_s"].items()),
      "memory per device (XLA memory_analysis"
      + (f", extrapolated to {r['layers']} layers from compiles with {extra[0]} and {extra[1]}):" if extra else "):"),
      f"  arguments      {fb(m['arguments'])}",
      f"  outputs        {fb(m['outputs'])}",
      f"  temporaries    {fb(m['temporaries'])}",
      f"  generated code {fb(m['generated_code'])}",
      f"  alias/donated  -{fb(m['alias'])}",
      (
        f"  peak estimate  {fb(m['peak'])} (args + outputs + temps + code - alias; XLA's own peak "
        f"{fb(m['xla_peak'])}) of {fb(r['hbm'])} HBM ({100 * r['utilisation']:.0f}%)"
      ),
      "  state by component: " + ", ".join(f"{k} {fb(v)}" for k, v in r["components"].items()),
      (
        f"FLOPs per device: XLA cost_analysis {f['xla_per_device_loops_once']:.3e} (loops counted once; analytic "
        f"count of that same program {f['analytic_per_device_loops_once']:.3e}); analytic full step "
        f"{f['analytic_per_device_step']:.3e}"
      ),
    ]
  else:
    lines.append("not compiled (--nocompile): the fit below is judged on the analytic memory estimate")
  mem = an["memory"]
  lines.append("analytic memory per device (estimate; plan_analytic):")
  lines.append(
    "  state: " + ", ".join(f"{k} {fb(v)}" for k, v in mem["state"].items()) + f" = {fb(sum(mem['state'].values()))}"
  )
  for phase, parts in mem.items():
    if phase != "state":
      mark = "  <- peak" if phase == an["peak_phase"] else ""
      lines.append(
        f"  {phase}: " + ", ".join(f"{k} {fb(v)}" for k, v in parts.items()) + f" = {fb(sum(parts.values()))}{mark}"
      )
  lines.append(f"  analytic peak: state + {an['peak_phase']} = {fb(an['peak_bytes'])}")
  lines.append(f"analytic time on {c['chip']} (per phase: compute | HBM | ICI -> serial, overlapped):")
  for p in an["phases"]:
    lines.append(
      f"  {p['name']:<14} {p['compute_s']:8.2f} s | {p['hbm_s']:7.2f} s | {p['ici_s']:6.2f} s -> "
      f"{p['serial_s']:8.2f} s, {p['overlapped_s']:8.2f} s  {p['bound']}-bound"
      + (
        f", MFU {_pct(p['mfu_serial'])} / {_pct(p['mfu_overlapped'])}, recompute +{_pct(p['recompute_overhead'])}"
        if p["kind"] == "train"
        else f", HBM bandwidth {_pct(p['hbm_utilisation'])}"
      )
    )
    for col in p["collectives"]:
      lines.append(f"      ICI {col['name']}: {col['count']} x, {fb(col['bytes'])} per chip, {col['seconds']:.3f} s")
    for name, extra_flops in p["recompute"].items():
      if extra_flops:
        lines.append(f"      extra FLOPs {name}: {extra_flops:.3e}")
  t, s = an["training"], an["sampling"]
  lines += [
    (
      f"training (agent + env updates): {t['serial_s']:.1f} s serial / {t['overlapped_s']:.1f} s overlapped; MFU "
      f"{_pct(t['mfu_serial'])} serial, {_pct(t['mfu_overlapped'])} overlapped (an UPPER BOUND; target >= 40%); "
      f"recompute overhead +{_pct(t['recompute_overhead'])} hardware FLOPs"
    ),
    (
      f"sampling (prefill + decode): {s['serial_s']:.1f} s serial / {s['overlapped_s']:.1f} s overlapped; "
      f"HBM-bandwidth "
      f"utilisation {_pct(s['hbm_utilisation'])} (decode is bandwidth-bound: weights + KV cache every step)"
    ),
    f"step (analytic): {an['step_serial_s']:.1f} s serial, {an['step_overlapped_s']:.1f} s overlapped",
  ]
  lines += [f"warning: {w}" for w in r["warnings"]]
  peak = m["peak"]
  how = "" if r["compiled"] else " (analytic)"
  if r["fits"]:
    lines.append(
      f"FITS{how}: peak {fb(peak)} <= {fb(r['usable'])} usable of {fb(r['hbm'])} per {c['chip']} chip "
      f"({100 * (1 - r['utilisation']):.0f}% of HBM to spare)"
    )
  else:
    lines.append(
      f"DOES NOT FIT{how}: peak {fb(peak)} > {fb(r['usable'])} usable of {fb(r['hbm'])} per "
      f"{c['chip']} chip. Knobs, biggest memory component first:"
    )
  if not r["fits"] or any(a.component == "optimizer_replicated" for a in advice):
    lines += [f"  {i + 1}. {a.component} ({fb(a.bytes)}): {a.knob}" for i, a in enumerate(advice)]
  return "\n".join(lines)


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    from genenv_jax.training.config_checks import validate

    validate(_CONFIG.value)  # a ConfigError is a ValueError: one message listing every bad value, exit 2
    chip_name, devices = slice_of(_CONFIG.value, _DEVICES.value, _CHIP.value)
    if not _NOCOMPILE.value:
      set_device_count(devices, _FAST.value)
    if _LAYERS.value:
      layers = tuple(int(x) for x in _LAYERS.value)
      if len(layers) != 2 or layers[0] == layers[1] or min(layers) <= 0:
        raise ValueError(f"--layers takes two different positive layer counts (e.g. 2,4), got {_LAYERS.value}")
      if _NOCOMPILE.value:
        raise ValueError("--layers compiles the step at two layer counts; it cannot go with --nocompile")
      result = plan_by_layers(_CONFIG.value, devices, chip_name, layers, _USABLE.value, attention=_ATTENTION.value)
    else:
      result = plan(
        _CONFIG.value,
        devices,
        chip_name,
        _USABLE.value,
        compile_program=not _NOCOMPILE.value,
        attention=_ATTENTION.value,
      )
  except (ValueError, FileNotFoundError) as e:  # FileNotFoundError: also genenv_jax.data.DataMissingError
    print(f"plan: error: {e}", file=sys.stderr)
    sys.exit(2)
  if _JSON.value:
    with open(_JSON.value, "w") as fh:
      json.dump(result, fh, indent=1)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.plan")
