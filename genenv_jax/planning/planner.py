"""The plan itself: compile the exact co-evolution step for its target from abstract shapes, and set what the
compiler says beside the analytic model (planning.analytic).

Targets:
  tpu  the slice's own TPU topology (planning.topology: libtpu's compiler on compile-only devices, from any host).
       Memory is the TPU compiler's buffer assignment, the program holds the Mosaic (Pallas) kernels the TPU runs
       (attention `auto` and splash follow the mesh's platform, parallel.target), and its collectives are counted
       from the optimised HLO (planning.hlo).
  cpu  N fake CPU devices (XLA_FLAGS --xla_force_host_platform_device_count, set by the plan command before jax
       starts): the fallback where libtpu is missing. XLA:CPU's fusion and buffer assignment are not the TPU's, so its
       memory is an estimate (the fit keeps a 10% margin), and its program holds no Mosaic kernels.
What the figures are (jax 0.10.2):
  - memory: XLA's CompiledMemoryStats of the compiled SPMD program, PER DEVICE; the fit is judged on arguments +
    outputs + temporaries + code - aliased (donated) bytes;
  - FLOPs: XLA's cost_analysis() is PER DEVICE and counts the body of every loop ONCE, so the step time uses the
    analytic count (every row decoding its full budget); the XLA figure is printed beside the analytic count of the
    same loops-once program as a cross-check;
  - time and MFU: planning.analytic, per phase, serial and overlapped; MFU is an upper bound.
"""

from __future__ import annotations

import dataclasses
import time

from genenv_jax.planning.architectures import resolve_model, shape_of
from genenv_jax.planning.report import analytic_figures, format_report
from genenv_jax.planning.workload import LENGTHS, planning_domain, slice_of, tree_of, virtual_mesh_sizes, workload_of

TARGETS = ("tpu", "cpu")


def loops_once_flops(w, agent, env, mesh, efficient: bool, agent_remat: str, env_remat: str) -> float:
  """Global analytic FLOPs of the program as XLA's cost analysis counts it (every loop body once): both prefills,
  one decode step per sampler, one agent mini-batch (its reference forward over the whole batch, outside the scan),
  and the env update."""
  from genenv_jax.planning import analytic

  total = 0.0
  if w.env_rows:
    total += sum(c.flops for c in analytic.sampling_costs("env", env, mesh, w.env_rows, w.env_prompt, 1, efficient))
  total += sum(
    c.flops for c in analytic.sampling_costs("agent", agent, mesh, w.agent_rows, w.agent_prompt, 1, efficient)
  )
  rows = w.agent_rows // w.minibatches
  total += analytic.train_cost(
    "", agent, mesh, rows, w.agent_prompt, w.agent_answer, forwards=0, updates=1, remat=agent_remat, efficient=efficient
  ).flops
  if w.agent_reference:
    total += (
      analytic.train_cost(
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
    total += analytic.train_cost(
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
  """Per-device bytes of each memory component (the costs.KNOBS keys) and the global bytes of each."""
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


@dataclasses.dataclass
class Compiled:
  """What compiling the step for its target gives."""

  target: str  # "tpu v5p:2x4x4" or "cpu (8 virtual devices)"
  mesh_sizes: dict
  lengths: dict
  state: object  # the abstract state (ShapeDtypeStructs with shardings)
  memory: object  # planning.costs.Memory
  cost: dict  # XLA cost_analysis
  seconds: dict  # build, lower, compile
  hlo: object  # planning.hlo.HloReport


def target_devices(config, target: str, devices: int) -> tuple[list, str]:
  """(devices, target name): the slice's compile-only TPU devices, or the first `devices` devices of the running
  backend ("cpu": the plan command's fake CPU devices; bench.device plans on the accelerator it measures)."""
  import jax

  from genenv_jax.planning import topology

  if target == "tpu":
    name = tree_of(config).slice
    if not name:
      raise ValueError("--target=tpu compiles for the config's TPU slice, and the config names none (config.slice)")
    top = topology.topology(name)
    return topology.tpu_devices(top), f"tpu {top.name}"
  if target != "cpu":
    raise ValueError(f"unknown compile target {target!r}; choose one of {', '.join(TARGETS)}")
  available = jax.devices()
  if len(available) < devices:
    raise ValueError(
      f"jax was initialised with {len(available)} devices, fewer than --devices={devices}: "
      "XLA_FLAGS must ask for them before jax is imported (run plan as `python -m genenv_jax.plan`)"
    )
  platform = available[0].platform
  return available[:devices], f"{platform} ({devices} {'virtual ' if platform == 'cpu' else ''}devices)"


def compile_step(config, agent_mc, env_mc, target: str, devices: int, hlo_path: str | None = None) -> Compiled:
  """Builds the abstract state on a mesh of the target's devices and lowers and compiles `jit_step` for it: the
  program a run of `config` executes, host callbacks and donated state included."""
  import jax

  from genenv_jax.coevolution.build import build
  from genenv_jax.parallel import sharding as shd
  from genenv_jax.planning import costs, hlo

  t0 = time.time()
  mesh_devices, name = target_devices(config, target, devices)
  mesh = shd.make_mesh(tree_of(config).mesh.sizes, devices=mesh_devices)
  run, state = build(config, abstract=True, mesh=mesh, agent_model=agent_mc, env_model=env_mc)
  step = run.coevolution.jit_step(run.state_shardings)
  t1 = time.time()
  with jax.set_mesh(mesh):
    lowered = step.lower(state)
    t2 = time.time()
    compiled = lowered.compile()
    t3 = time.time()
  text = compiled.as_text()
  if hlo_path:
    with open(hlo_path, "w") as fh:
      fh.write(text)
  stats = compiled.memory_analysis()
  cost = compiled.cost_analysis() or {}
  memory = costs.Memory(
    arguments=stats.argument_size_in_bytes,
    outputs=stats.output_size_in_bytes,
    temporaries=stats.temp_size_in_bytes,
    generated_code=stats.generated_code_size_in_bytes,
    alias=stats.alias_size_in_bytes,
    xla_peak=int(getattr(stats, "peak_memory_in_bytes", 0)),
  )
  return Compiled(
    target=name,
    mesh_sizes=dict(mesh.shape),
    lengths={k: getattr(run.domain, k) for k in LENGTHS},
    state=state,
    memory=memory,
    cost=cost[0] if isinstance(cost, (list, tuple)) else cost,
    seconds={"build": t1 - t0, "lower": t2 - t1, "compile": t3 - t2},
    hlo=hlo.analyse(text),
  )


def collective_figures(report, analysis) -> dict:
  """Per collective kind: the compiled program's ops, executions and bytes received per device per step (loops
  unrolled), beside the analytic model's count and bytes for the same kind."""
  from genenv_jax.planning import hlo

  out = hlo.summarise(report)
  for kind in out:
    words = kind.replace("-", " ")
    mine = [c for t in analysis.phases for c in t.cost.collectives if words in c.name.replace("-", " ")]
    out[kind]["analytic_count"] = sum(c.count for c in mine)
    out[kind]["analytic_bytes"] = sum(c.bytes for c in mine)
  return out


def top_sources(report, n: int = 8) -> list[dict]:
  """The `n` (kind, source line) pairs that move the most bytes per step, for finding where a collective comes from."""
  from genenv_jax.planning import hlo

  return [
    {"kind": kind, "source": source, "runs": runs, "bytes": b} for kind, source, runs, b in hlo.by_source(report)[:n]
  ]


def models_of(config, attention: str | None = None, num_layers: int | None = None):
  """(agent, env) ModelConfigs plan models for `config` (resolve_model with the tokenizer's vocabulary), both with
  `attention` where given and `num_layers` where given; a ValueError when the two attention implementations differ."""
  from genenv_jax.models.tokenizer import load_tokenizer

  s = tree_of(config)
  vocab = load_tokenizer(s.tokenizer or None).vocab_size
  agent_mc = resolve_model(s.agent.model, vocab, attention)
  env_mc = resolve_model(s.env.model, vocab, attention)
  if num_layers:
    agent_mc, env_mc = (dataclasses.replace(m, num_layers=num_layers) for m in (agent_mc, env_mc))
  if agent_mc.attention != env_mc.attention:
    raise ValueError(
      f"plan models one attention implementation for both models, got agent {agent_mc.attention!r} "
      f"and env {env_mc.attention!r}; set both (or pass --attention)"
    )
  return agent_mc, env_mc


def config_lengths(config) -> dict | None:
  """The built domain's four lengths where the config leaves one at 0 (--nocompile), else None (the config's)."""
  s = tree_of(config)
  if all(s.domain.lengths.values()):
    return None
  from genenv_jax.benchmarks.registry import build_domain
  from genenv_jax.models.tokenizer import load_tokenizer

  domain = build_domain(config.domain, load_tokenizer(s.tokenizer or None), seed=s.seed, answer=s.domain.answer)
  return {k: getattr(domain, k) for k in LENGTHS}


def kv_cache_of(config, who: str) -> str:
  """The KV cache kind `who` ("agent" or "env") samples with (its sampling.kv_cache setting)."""
  return getattr(tree_of(config), who).sampling.kv_cache


def analytic_components(analysis) -> dict[str, int]:
  """Per-chip bytes of each memory component (the costs.KNOBS keys) by the analytic model: the state's parts, and
  the working set of the phase that peaks as "temporaries" (what a compiled program's components are)."""
  return {
    **{k: int(v) for k, v in analysis.memory["state"].items()},
    "temporaries": int(sum(analysis.memory[analysis.peak_phase].values())),
  }


def config_figures(config, mesh_sizes, devices, chip_name, agent_mc, env_mc, remat, w, rows) -> dict:
  """What was planned: the slice, mesh, models, lengths, rows and the memory knobs, as `plan`'s JSON gives them."""
  return {
    "slice": tree_of(config).slice,
    "mesh": mesh_sizes,
    "devices": devices,
    "chip": chip_name,
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
    "kv_cache": {"agent": kv_cache_of(config, "agent"), "env": kv_cache_of(config, "env")},
  }


def plan(
  config,
  devices: int | None = None,
  chip_name: str | None = None,
  usable_fraction: float = 0.9,
  log=print,
  num_layers: int | None = None,
  compile_program: bool = True,
  attention: str | None = None,
  target: str = "cpu",
  hlo_path: str | None = None,
) -> dict:
  """Compiles the step for `config` on `target` ("tpu": the slice's topology; "cpu": `devices` fake devices) and
  returns (and logs) the figures.

  devices / chip_name default to the config's slice. `num_layers` replaces both models' layer count;
  compile_program=False gives the analytic figures only (--nocompile; the domain is built only when the config
  leaves a length at 0). `attention` overrides both models' implementation; `hlo_path` receives the optimised HLO."""
  from genenv_jax.planning import analytic, costs

  chip_name, devices = slice_of(config, devices, chip_name)
  chip = costs.chip(chip_name)
  config, note = planning_domain(config) if compile_program else (config, None)
  agent_mc, env_mc = models_of(config, attention, num_layers)
  compiled = compile_step(config, agent_mc, env_mc, target, devices, hlo_path) if compile_program else None
  lengths = compiled.lengths if compiled else config_lengths(config)
  mesh_sizes = compiled.mesh_sizes if compiled else virtual_mesh_sizes(tree_of(config).mesh.sizes, devices)
  mesh_shape = analytic.MeshShape(mesh_sizes["data"], mesh_sizes["fsdp"], mesh_sizes["tensor"])
  w = workload_of(config, lengths)
  agent_shape = shape_of(agent_mc, kv_cache_of(config, "agent"))
  env_shape = shape_of(env_mc, kv_cache_of(config, "env"))
  remat = {"agent": analytic.remat_policy(agent_mc.remat), "env": analytic.remat_policy(env_mc.remat)}
  analysis = analytic.analyse(
    w,
    agent_shape,
    env_shape,
    mesh_shape,
    chip,
    agent_remat=remat["agent"],
    env_remat=remat["env"],
    attention=agent_mc.attention,
  )
  if compiled:
    comp_dev, _ = state_components(compiled.state, compiled.memory.temporaries, devices)
    peak = compiled.memory.peak
  else:
    comp_dev = analytic_components(analysis)
    peak = int(analysis.peak_bytes)
  verdict = costs.fit_verdict(peak, chip.hbm_bytes, usable_fraction)
  advice = costs.rank_advice(comp_dev)
  rows = {
    "env rows": w.env_rows,
    "agent rows": w.agent_rows,
    "agent rows per mini-batch": w.agent_rows // w.minibatches,
  }
  warnings = costs.divisibility_warnings(rows, mesh_shape.batch_shards) + ([note] if note else [])
  efficient = analytic.memory_efficient(agent_mc.attention)
  once = loops_once_flops(w, agent_shape, env_shape, mesh_shape, efficient, remat["agent"], remat["env"])
  cost = compiled.cost if compiled else {}
  result = {
    "config": config_figures(config, mesh_sizes, devices, chip.name, agent_mc, env_mc, remat, w, rows),
    "compiled": bool(compile_program),
    "target": compiled.target if compiled else "analytic",
    "compile_s": compiled.seconds if compiled else {"build": 0.0, "lower": 0.0, "compile": 0.0},
    "memory": (
      {
        **{k: getattr(compiled.memory, k) for k in ("arguments", "outputs", "temporaries", "generated_code", "alias")},
        "xla_peak": compiled.memory.xla_peak,
        "peak": compiled.memory.peak,
      }
      if compiled
      else {"peak": peak}
    ),
    "mosaic_kernels": compiled.hlo.mosaic_kernels if compiled else 0,
    "collectives": collective_figures(compiled.hlo, analysis) if compiled else {},
    "unknown_loops": len(compiled.hlo.unknown_loops) if compiled else 0,
    "collective_sources": top_sources(compiled.hlo) if compiled else [],
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


def plan_by_layers(
  config,
  devices: int | None,
  chip_name: str | None,
  layers: tuple[int, int],
  usable_fraction: float = 0.9,
  log=print,
  attention: str | None = None,
  target: str = "cpu",
  hlo_path: str | None = None,
) -> dict:
  """A cross-check (and the way for programs too slow to compile here): compiles the same step with both models cut
  to layers[0] and to layers[1] layers, and extrapolates every per-device memory and XLA FLOP figure along the
  straight line through the two to the real layer count (exact for the state, whose bytes are linear in the layers;
  with remat, temporaries are the saved per-layer inputs, linear too, plus one layer's and the head's working set).
  The analytic figures are those of the real model."""
  from genenv_jax.planning import costs

  kw = dict(usable_fraction=usable_fraction, log=None, attention=attention, target=target, hlo_path=hlo_path)
  a = plan(config, devices, chip_name, num_layers=layers[0], **kw)
  b = plan(config, devices, chip_name, num_layers=layers[1], **kw)
  full = plan(config, devices, chip_name, compile_program=False, **kw)
  real = full["layers"]
  if full["config"]["env_layers"] != real:
    raise ValueError("--layers needs the agent and the env to have the same layer count")
  line = lambda ya, yb: round(costs.extrapolate(layers[0], ya, layers[1], yb, real))  # noqa: E731
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
  verdict = costs.fit_verdict(r["memory"]["peak"], a["hbm"], usable_fraction)
  r.update(fits=verdict.fits, usable=verdict.usable, utilisation=verdict.utilisation)
  advice = costs.rank_advice(r["components"])
  r["advice"] = [x.component for x in advice]
  if log:
    log(format_report(r, advice))
  return r
