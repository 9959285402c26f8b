"""CLI: memory and speed planning. Lowers and compiles the FULL co-evolution step on a virtual mesh of N fake CPU
devices from abstract shapes only (no weights allocated, no checkpoint read), then prints per-device memory, FLOPs,
an estimated step time and MFU on a TPU chip, and whether the config fits.

  python -m genenv_jax.plan --config=configs/qwen2_5_7b.py:v5p-64 --devices=32 --chip=v5p [--config.x=y ...]

The step is the one train.py runs: `Coevolution.jit_step(state_shardings)` (explicit in/out shardings, the state
donated) on the state `build.abstract_build` describes (the same shapes and shardings `build.build` gives).

Models: a config's shape fields (hidden_size, ..., optional vocab_size / qkv_bias), or, for a model with an
`hf_path` (or an `arch` field), the built-in table KNOWN_MODELS matched by name (the checkpoint is never opened).

What the figures are (measured with jax 0.10.2, see tests/test_plan.py):
  - memory: XLA's CompiledMemoryStats of the compiled SPMD program, i.e. PER DEVICE. The CPU compiler's fusion and
    buffer assignment are not TPU's, so treat them as an estimate (plan_math keeps a 10% margin).
  - FLOPs: XLA's cost_analysis() is PER DEVICE (a matmul sharded 8 ways reports 1/8 of its FLOPs) and counts the
    body of every loop ONCE (a lax.scan of 10 matmuls reports 1 matmul; so do the decode while_loop and the
    mini-batch scan). So the step time uses the analytic count of plan_math (every row decoding its full budget);
    the XLA figure is printed beside the analytic count of the same loops-once program as a cross-check.
  - step time: roofline per phase (plan_math.step_estimate); collectives (ICI) are not modelled.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

from absl import app, flags
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file (get_config(arg) style), e.g. "
                                          "configs/qwen2_5_7b.py:v5p-64.", lock_config=True)
_DEVICES = flags.DEFINE_integer("devices", None, "Number of (fake CPU) devices of the virtual mesh: the slice's "
                                "chip count (v5p-64 = 32 chips).")
_CHIP = flags.DEFINE_string("chip", "v5p", "TPU chip for the time and fit estimates: v4, v5e, v5p or v6e.")
_USABLE = flags.DEFINE_float("usable_fraction", 0.9, "Fraction of HBM a program may use and still 'fit'.")
_JSON = flags.DEFINE_string("json", None, "Also write the figures as JSON to this path.")
_LAYERS = flags.DEFINE_list("layers", None, "Two small layer counts, e.g. 2,4: compile the step with both models "
                             "cut to each and extrapolate the memory figures linearly to the real layer count (for "
                             "programs too big to compile here in reasonable time; see plan_by_layers).")
_FAST = flags.DEFINE_boolean("fast_compile", True, "Skip LLVM optimisation in the CPU compile "
                             "(--xla_backend_optimization_level=0): same buffers, much shorter compile.")
flags.mark_flags_as_required(["config", "devices"])

# Architectures of known checkpoints (from their config.json), so plan never needs the files.
KNOWN_MODELS = {
    "qwen2.5-0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_layers=24, num_heads=14,
                         num_kv_heads=2, head_dim=64, tie_word_embeddings=True),
    "qwen2.5-1.5b": dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_layers=28, num_heads=12,
                         num_kv_heads=2, head_dim=128, tie_word_embeddings=True),
    "qwen2.5-7b": dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_layers=28, num_heads=28,
                       num_kv_heads=4, head_dim=128, tie_word_embeddings=False),
}
_QWEN = dict(rope_theta=1e6, qkv_bias=True, max_position_embeddings=32768, rms_norm_eps=1e-6,
             architecture="Qwen2ForCausalLM")


def known_model_name(name: str) -> str | None:
  """'/ckpt/Qwen2.5-7B-Instruct' -> 'qwen2.5-7b' (the table key the basename starts with), else None."""
  base = os.path.basename(os.path.normpath(str(name))).lower()
  return next((k for k in sorted(KNOWN_MODELS, key=len, reverse=True) if base.startswith(k)), None)


def resolve_model(cfg, vocab_size: int):
  """The ModelConfig plan compiles for one model: KNOWN_MODELS by `arch` or `hf_path`, else the shape fields."""
  from genenv_jax.build import model_config_from
  from genenv_jax.models.config import ModelConfig
  name = cfg.get("arch", "") or cfg.hf_path
  if not name:
    return model_config_from(cfg, vocab_size)
  key = known_model_name(name)
  if key is None:
    raise ValueError(f"plan does not read checkpoints and does not know the architecture of {name!r} (known: "
                     f"{', '.join(KNOWN_MODELS)}); set the model's arch field to one of those, or set hf_path='' "
                     "and give the shape fields (hidden_size, intermediate_size, num_layers, ...)")
  fields = {**_QWEN, **KNOWN_MODELS[key]}
  return ModelConfig(**fields, param_dtype=cfg.dtype, dtype=cfg.dtype, remat=cfg.remat)


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


def _shape(mc):
  from genenv_jax import plan_math
  from genenv_jax.models.config import to_dtype
  import numpy as np
  head = mc.vocab_size * mc.hidden_size
  untied_head = 0 if mc.tie_word_embeddings else head
  body = mc.num_params - mc.vocab_size * mc.hidden_size - mc.hidden_size - untied_head
  return plan_math.Shape(body_params=body, head_params=head, layers=mc.num_layers, heads=mc.num_heads,
                         head_dim=mc.head_dim, kv_heads=mc.num_kv_heads,
                         param_bytes=mc.num_params * np.dtype(to_dtype(mc.param_dtype)).itemsize)


def phases(run, agent_mc, env_mc, devices: int, tensor: int, loops_once: bool = False):
  """The analytic phases of one step (plan_math), every row decoding its full budget. With loops_once, the program
  as XLA's cost analysis counts it: one decode step per sampler, one agent mini-batch."""
  from genenv_jax import plan_math
  from genenv_jax.models.config import to_dtype
  import numpy as np
  s, d = run.coevolution.settings, run.domain
  out = []
  env_rows = s.num_fresh
  agent_rows = (s.num_fresh + s.num_replay) * s.group_size
  kv = lambda mc: 2 * mc.num_layers * mc.num_kv_heads * mc.head_dim * np.dtype(to_dtype(mc.dtype)).itemsize  # noqa
  env_shape, agent_shape = _shape(env_mc), _shape(agent_mc)
  if env_rows:
    out.append(plan_math.sampling_phase("env sampling", env_shape, env_rows, d.env_prompt_len,
                                        1 if loops_once else d.env_output_len, devices, tensor, kv(env_mc)))
  out.append(plan_math.sampling_phase("agent sampling", agent_shape, agent_rows, d.agent_prompt_len,
                                      1 if loops_once else d.agent_answer_len, devices, tensor, kv(agent_mc)))
  ref = 1 if s.agent_kl_coef > 0 else 0
  if loops_once:
    out.append(plan_math.train_phase("agent reference", agent_shape, agent_rows, d.agent_prompt_len,
                                     d.agent_answer_len, False, passes_fwd=ref, passes_train=0))
    out.append(plan_math.train_phase("agent update", agent_shape, agent_rows // s.agent_minibatches,
                                     d.agent_prompt_len, d.agent_answer_len, agent_mc.remat))
  else:
    out.append(plan_math.train_phase("agent update", agent_shape, agent_rows, d.agent_prompt_len,
                                     d.agent_answer_len, agent_mc.remat, passes_fwd=ref))
  if env_rows and s.env_train:
    out.append(plan_math.train_phase("env update", env_shape, env_rows, d.env_prompt_len, d.env_output_len,
                                     env_mc.remat, passes_fwd=3))
  return out


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
  groups = {"parameters": (state.agent, state.env), "references": (state.agent_ref, state.env_ref),
            "optimizer": (state.agent_opt, state.env_opt),
            "pools": (state.train_pool, state.env_pool, state.rng, state.step, state.skipped_agent,
                      state.skipped_env)}
  for name, tree in groups.items():
    dev[name], glob[name] = _device_bytes(tree)
  # Moments held whole on every chip while the parameters are sharded: flag the build's replicated optimizer state.
  param_ratio = dev["parameters"] / max(glob["parameters"], 1)
  if devices > 1 and dev["optimizer"] > 2 * param_ratio * glob["optimizer"]:
    dev["optimizer_replicated"], glob["optimizer_replicated"] = dev.pop("optimizer"), glob.pop("optimizer")
  dev["temporaries"] = glob["temporaries"] = int(temporaries)
  return dev, glob


def plan(config, devices: int, chip_name: str, usable_fraction: float = 0.9,
         log=print, num_layers: int | None = None, compile_program: bool = True) -> dict:
  """Compiles the step for `config` on `devices` fake devices and returns (and logs) the figures.

  `num_layers` replaces both models' layer count; compile_program=False gives the analytic figures only (both for
  `plan_by_layers`)."""
  import dataclasses
  import jax
  from genenv_jax import plan_math
  from genenv_jax import sharding as shd
  from genenv_jax.build import abstract_build
  from genenv_jax.tokenizer import load_tokenizer

  chip = plan_math.chip(chip_name)
  available = jax.devices()
  if len(available) < devices:
    raise ValueError(f"jax was initialised with {len(available)} devices, fewer than --devices={devices}: XLA_FLAGS "
                     "must ask for them before jax is imported (run plan as `python -m genenv_jax.plan`)")
  mesh = shd.make_mesh(dict(config.mesh), devices=available[:devices])
  vocab = load_tokenizer(config.tokenizer or None).vocab_size
  agent_mc, env_mc = resolve_model(config.agent.model, vocab), resolve_model(config.env.model, vocab)
  if num_layers:
    agent_mc, env_mc = (dataclasses.replace(m, num_layers=num_layers) for m in (agent_mc, env_mc))
  t0 = time.time()
  run, state = abstract_build(config, mesh, agent_model=agent_mc, env_model=env_mc)
  step = run.coevolution.jit_step(run.state_shardings)
  t1 = t2 = t3 = time.time()
  if compile_program:
    with jax.set_mesh(mesh):
      lowered = step.lower(state)
      t2 = time.time()
      compiled = lowered.compile()
      t3 = time.time()
    stats = compiled.memory_analysis()
    cost = compiled.cost_analysis() or {}
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    mem = plan_math.Memory(arguments=stats.argument_size_in_bytes, outputs=stats.output_size_in_bytes,
                           temporaries=stats.temp_size_in_bytes, generated_code=stats.generated_code_size_in_bytes,
                           alias=stats.alias_size_in_bytes, xla_peak=int(getattr(stats, "peak_memory_in_bytes", 0)))
  else:
    cost, mem = {}, plan_math.Memory(0, 0, 0, 0, 0)
  verdict = plan_math.fit_verdict(mem.peak, chip.hbm_bytes, usable_fraction)
  tensor = mesh.shape["tensor"]
  estimate = plan_math.step_estimate(phases(run, agent_mc, env_mc, devices, tensor), devices, chip.peak_flops,
                                     chip.hbm_bandwidth)
  once = sum(p.flops for p in phases(run, agent_mc, env_mc, devices, tensor, loops_once=True)) / devices
  comp_dev, comp_glob = state_components(state, mem.temporaries, devices)
  advice = plan_math.rank_advice(comp_dev)
  s, d = run.coevolution.settings, run.domain
  rows = {"env rows": s.num_fresh, "agent rows": (s.num_fresh + s.num_replay) * s.group_size,
          "agent rows per mini-batch": (s.num_fresh + s.num_replay) * s.group_size // s.agent_minibatches}
  warnings = plan_math.divisibility_warnings(rows, mesh.shape["data"] * mesh.shape["fsdp"])
  result = {
      "config": {"mesh": dict(mesh.shape), "devices": devices, "chip": chip.name,
                 "agent_params": agent_mc.num_params, "env_params": env_mc.num_params,
                 "env_layers": env_mc.num_layers,
                 "lengths": {k: getattr(d, k) for k in ("agent_prompt_len", "agent_answer_len", "env_prompt_len",
                                                        "env_output_len")},
                 "rows": rows, "minibatches": s.agent_minibatches},
      "compile_s": {"build": t1 - t0, "lower": t2 - t1, "compile": t3 - t2},
      "memory": {**{k: getattr(mem, k) for k in ("arguments", "outputs", "temporaries", "generated_code", "alias",
                                                  "xla_peak")}, "peak": mem.peak},
      "components": comp_dev,
      "fits": verdict.fits, "hbm": chip.hbm_bytes, "usable": verdict.usable, "utilisation": verdict.utilisation,
      "flops": {"xla_per_device_loops_once": float(cost.get("flops", 0.0)), "analytic_per_device_loops_once": once,
                "analytic_per_device_step": estimate.flops / devices, "xla_bytes_accessed": float(
                    cost.get("bytes accessed", 0.0))},
      "step_time_s": estimate.seconds, "mfu": estimate.mfu,
      "phases": [{"name": n, "seconds": t, "bound": b} for n, t, b in estimate.phases],
      "advice": [a.component for a in advice], "warnings": warnings,
  }
  result["layers"] = agent_mc.num_layers
  if log:
    log(format_report(result, advice))
  return result


def plan_by_layers(config, devices: int, chip_name: str, layers: tuple[int, int], usable_fraction: float = 0.9,
                   log=print) -> dict:
  """For programs too big to compile here in reasonable time: compiles the same step with both models cut to
  layers[0] and to layers[1] layers, and extrapolates every per-device memory and XLA FLOP figure along the straight
  line through the two to the real layer count (exact for the state, whose bytes are linear in the layers; with
  remat, temporaries are the saved per-layer inputs, linear too, plus one layer's and the head's working set).
  The analytic FLOPs, step time and MFU are those of the real model."""
  from genenv_jax import plan_math
  a = plan(config, devices, chip_name, usable_fraction, log=None, num_layers=layers[0])
  b = plan(config, devices, chip_name, usable_fraction, log=None, num_layers=layers[1])
  full = plan(config, devices, chip_name, usable_fraction, log=None, compile_program=False)
  real = full["layers"]
  if full["config"]["env_layers"] != real:
    raise ValueError("--layers needs the agent and the env to have the same layer count")
  line = lambda ya, yb: int(round(plan_math.extrapolate(layers[0], ya, layers[1], yb, real)))  # noqa: E731
  r = {**a, "layers": real, "extrapolated_from_layers": list(layers),
       "memory_at_layers": {str(n): res["memory"] for n, res in zip(layers, (a, b))},
       "compile_s": {f"{k}_{n}_layers": v for n, res in zip(layers, (a, b)) for k, v in res["compile_s"].items()}}
  r["memory"] = {k: line(a["memory"][k], b["memory"][k]) for k in a["memory"]}
  r["components"] = {k: line(a["components"][k], b["components"][k]) for k in a["components"]}
  r["config"], r["flops"], r["step_time_s"], r["mfu"], r["phases"] = (full[k] for k in ("config", "flops",
                                                                                       "step_time_s", "mfu", "phases"))
  for k in ("xla_per_device_loops_once", "xla_bytes_accessed"):
    r["flops"][k] = line(a["flops"][k], b["flops"][k])
  verdict = plan_math.fit_verdict(r["memory"]["peak"], a["hbm"], usable_fraction)
  r.update(fits=verdict.fits, usable=verdict.usable, utilisation=verdict.utilisation)
  advice = plan_math.rank_advice(r["components"])
  r["advice"] = [x.component for x in advice]
  if log:
    log(format_report(r, advice))
  return r


def format_report(r: dict, advice) -> str:
  from genenv_jax.plan_math import fmt_bytes as fb
  c, m, f = r["config"], r["memory"], r["flops"]
  extra = r.get("extrapolated_from_layers")
  lines = [
      f"plan: {c['devices']} x {c['chip']}, mesh {c['mesh']}, agent {c['agent_params'] / 1e9:.2f}B + env "
      f"{c['env_params'] / 1e9:.2f}B parameters, lengths {c['lengths']}, rows {c['rows']}",
      "compile: " + ", ".join(f"{k} {v:.1f} s" for k, v in r["compile_s"].items()),
      "memory per device (XLA memory_analysis" + (f", extrapolated to {r['layers']} layers from compiles with "
                                                   f"{extra[0]} and {extra[1]}):" if extra else "):"),
      f"  arguments      {fb(m['arguments'])}", f"  outputs        {fb(m['outputs'])}",
      f"  temporaries    {fb(m['temporaries'])}", f"  generated code {fb(m['generated_code'])}",
      f"  alias/donated  -{fb(m['alias'])}",
      f"  peak estimate  {fb(m['peak'])} (args + outputs + temps + code - alias; XLA's own peak "
      f"{fb(m['xla_peak'])}) of {fb(r['hbm'])} HBM ({100 * r['utilisation']:.0f}%)",
      "  state by component: " + ", ".join(f"{k} {fb(v)}" for k, v in r["components"].items()),
      f"FLOPs per device: XLA cost_analysis {f['xla_per_device_loops_once']:.3e} (loops counted once; analytic "
      f"count of that same program {f['analytic_per_device_loops_once']:.3e}); analytic full step "
      f"{f['analytic_per_device_step']:.3e}",
      f"estimated step time {r['step_time_s']:.1f} s on {c['chip']} (roofline; "
      + ", ".join(f"{p['name']} {p['seconds']:.1f} s {p['bound']}-bound" for p in r["phases"])
      + f"), MFU {100 * r['mfu']:.1f}%",
  ]
  lines += [f"warning: {w}" for w in r["warnings"]]
  if r["fits"]:
    lines.append(f"FITS: peak {fb(m['peak'])} <= {fb(r['usable'])} usable of {fb(r['hbm'])} per {c['chip']} chip")
  else:
    lines.append(f"DOES NOT FIT: peak {fb(m['peak'])} > {fb(r['usable'])} usable of {fb(r['hbm'])} per "
                 f"{c['chip']} chip. Knobs, biggest memory component first:")
  if not r["fits"] or any(a.component == "optimizer_replicated" for a in advice):
    lines += [f"  {i + 1}. {a.component} ({fb(a.bytes)}): {a.knob}" for i, a in enumerate(advice)]
  return "\n".join(lines)


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    set_device_count(_DEVICES.value, _FAST.value)
    if _LAYERS.value:
      layers = tuple(int(x) for x in _LAYERS.value)
      if len(layers) != 2 or layers[0] == layers[1] or min(layers) <= 0:
        raise ValueError(f"--layers takes two different positive layer counts (e.g. 2,4), got {_LAYERS.value}")
      result = plan_by_layers(_CONFIG.value, _DEVICES.value, _CHIP.value, layers, _USABLE.value)
    else:
      result = plan(_CONFIG.value, _DEVICES.value, _CHIP.value, _USABLE.value)
  except (ValueError, FileNotFoundError) as e:  # FileNotFoundError: also genenv_jax.data.DataMissingError
    print(f"plan: error: {e}", file=sys.stderr)
    sys.exit(2)
  if _JSON.value:
    with open(_JSON.value, "w") as fh:
      json.dump(result, fh, indent=1)


if __name__ == "__main__":
  app.run(main)
