"""The device check: one co-evolution step on one accelerator at realistic shapes, measured against `plan`.

  python -m genenv_jax.bench.device [--chip=h200] [--repeats=3] [--plan=compiled|analytic|none] [--json=PATH]
                                    [--profile=DIR] [--tiny]

What runs (issue 11): bf16, randomly initialised models, a Qwen2.5-1.5B-shaped agent and a Qwen2.5-0.5B-shaped env
(Qwen2.5 shapes: `planning.architectures.KNOWN_MODELS`, vocabulary 151,936, q/k/v bias), full remat, attention
`auto`; the agent at a 1,024-token prompt and a 4,096-token response budget, the env at 1,024 + 1,024; 8 fresh + 8
replayed tasks x G = 8 = 128 agent rows in 4 GRPO mini-batches. The arithmetic domain pads its tasks to these lengths.
Random weights never emit EOS, so every row decodes its whole budget, which is what the analytic model assumes.

What it prints:
- each phase of the step jitted alone (bench.step's phases: env sampling, agent sampling, verification, agent update,
  env update), compile time and the median of --repeats timed calls;
- decode tokens/s of each sampling phase, and its HBM-bandwidth utilisation: the bytes the analytic model says the
  phase reads (weights and KV cache every decode step; `planning.analytic`) over the measured time, against the
  chip's bandwidth;
- the training phases' MFU: the analytic model FLOPs of the phase (forward + backward, no recompute) over the
  measured time, against the chip's dense bf16 peak (`planning.costs.CHIPS`, with its source);
- the measured peak device memory (`Device.memory_stats()["peak_bytes_in_use"]`, GPUs and TPUs) beside `plan`'s
  prediction for the same config on one device (--plan compiled: XLA's memory analysis of the whole step compiled
  by `plan` on this backend; analytic: the analytic peak only; none: skip);
- the targets of issue 11 (training MFU >= 35%, decode >= 60% of HBM bandwidth), met or not, with the figures.
  --profile DIR writes a `jax.profiler` trace of one whole step there, to see where the time goes.

--tiny shrinks the models to one 32-wide layer and the lengths and batch to a few tokens and rows: the CPU self-test
(tests/unit/bench/test_bench_device.py). On a CPU, memory_stats is not available and the chip figures are not the CPU's.
The last line is `JSON: {...}` with every figure.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from types import SimpleNamespace
from typing import Sequence

from absl import flags

from genenv_jax import cli

AGENT_SHAPE, ENV_SHAPE = "qwen2.5-1.5b", "qwen2.5-0.5b"
LENGTHS = dict(agent_prompt_len=1024, agent_answer_len=4096, env_prompt_len=1024, env_output_len=1024)
TINY_LENGTHS = dict(agent_prompt_len=48, agent_answer_len=16, env_prompt_len=48, env_output_len=32)
TARGETS = {"training_mfu": 0.35, "decode_hbm_utilisation": 0.60}
SAMPLING = {"env_sampling": ("env prefill", "env decode"), "agent_sampling": ("agent prefill", "agent decode")}
TRAINING = {"agent_update": "agent update", "env_update": "env update"}


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_string(
      "chip", "h200", "The chip the figures are judged against (planning.costs.CHIPS).", flag_values=fv
    ),
    flags.DEFINE_integer("repeats", 3, "Timed calls per phase, after the compile's warm-up call.", flag_values=fv),
    flags.DEFINE_enum(
      "plan",
      "compiled",
      ["compiled", "analytic", "none"],
      "plan's memory prediction: compile the whole step (XLA memory analysis), the analytic peak only, or none.",
      flag_values=fv,
    ),
    flags.DEFINE_string("json", None, "Also write the JSON figures to this file.", flag_values=fv),
    flags.DEFINE_string(
      "profile", None, "Write a jax.profiler trace of one whole step to this directory.", flag_values=fv
    ),
    flags.DEFINE_boolean("tiny", False, "Tiny models, lengths and batch: the CPU self-test.", flag_values=fv),
  )


def _args() -> SimpleNamespace:
  """The flags' values, checked (ValueError naming the flag)."""
  args = cli.namespace(_FLAGS)
  if args.repeats <= 0:
    raise ValueError(f"--repeats must be positive, got {args.repeats}")
  from genenv_jax.planning import costs

  costs.chip(args.chip)  # ValueError naming the chip and the known ones
  return args


def device_config(tiny: bool):
  """configs/default.py at the shapes above (or the tiny ones)."""
  from genenv_jax.bench.step import TINY_MODEL, load_config
  from genenv_jax.planning import architectures as plan_models

  config = load_config("default", warm_start=0.0, tiny=tiny)
  for model, name in ((config.agent.model, AGENT_SHAPE), (config.env.model, ENV_SHAPE)):
    if not tiny:
      model.update({k: v for k, v in plan_models.KNOWN_MODELS[name].items()})
      model.update(rope_theta=1e6, qkv_bias=True, max_position_embeddings=32768)
    else:
      model.update(TINY_MODEL)
    model.dtype = "bfloat16"
    model.remat = "full"
  config.domain.update(TINY_LENGTHS if tiny else LENGTHS)
  config.env.num_seeds = 2 if tiny else 8
  config.pools.num_replay = 2 if tiny else 8
  config.agent.grpo.group_size = 2 if tiny else 8
  config.agent.grpo.minibatches = 2 if tiny else 4
  config.mesh.update(data=1, fsdp=1, tensor=1)
  return config


def peak_memory(device) -> int | None:
  """The device's peak bytes in use so far (None where the backend keeps no such statistic, e.g. CPU)."""
  try:
    stats = device.memory_stats() or {}
  except Exception:  # pylint: disable=broad-except  (backends without the call raise)
    return None
  return stats.get("peak_bytes_in_use")


def judged(phases: dict, analytic: dict, chip) -> dict[str, dict[str, float]]:
  """Per phase, the measured utilisation: MFU of the training phases, HBM-bandwidth utilisation and decode tok/s of
  the sampling phases, from the analytic FLOPs and bytes (per device) over the measured median time."""
  by_name = {p["name"]: p for p in analytic["phases"]}
  out = {}
  for phase, analytic_name in TRAINING.items():
    if phase in phases and analytic_name in by_name:
      seconds = phases[phase]["seconds"]
      out[phase] = {"model_flops": by_name[analytic_name]["model_flops"], "mfu": 0.0}
      out[phase]["mfu"] = by_name[analytic_name]["model_flops"] / seconds / chip.peak_flops
  for phase, names in SAMPLING.items():
    if phase in phases and all(n in by_name for n in names):
      seconds = phases[phase]["seconds"]
      hbm = sum(by_name[n]["hbm_bytes"] for n in names)
      out[phase] = {
        "hbm_bytes": hbm,
        "hbm_utilisation": hbm / seconds / chip.hbm_bandwidth,
        "decode_tok_s": phases[phase]["tokens"] / seconds,
      }
  return out


def verdicts(utilisation: dict) -> list[str]:
  """The issue's targets, met or not, with the figure; a phase missing from the run is said so."""
  lines = []
  for phase in TRAINING:
    mfu = utilisation.get(phase, {}).get("mfu")
    target = TARGETS["training_mfu"]
    lines.append(
      f"{phase} MFU {mfu:.1%} (target >= {target:.0%}): {'met' if mfu >= target else 'MISSED'}"
      if mfu is not None
      else f"{phase}: not run"
    )
  util = utilisation.get("agent_sampling", {}).get("hbm_utilisation")
  target = TARGETS["decode_hbm_utilisation"]
  lines.append(
    f"agent decode HBM utilisation {util:.1%} (target >= {target:.0%}): {'met' if util >= target else 'MISSED'}"
    if util is not None
    else "agent sampling: not run"
  )
  return lines


def main(argv: Sequence[str]) -> None:
  """Runs the check; prints the figures and a final `JSON: ...` line with every figure."""
  cli.no_arguments(argv)
  args = _args()
  import jax

  from genenv_jax.bench import step as bench_step
  from genenv_jax.coevolution.build import build
  from genenv_jax.planning import costs, planner
  from genenv_jax.planning.costs import fmt_bytes

  chip = costs.chip(args.chip)
  device = jax.devices()[0]
  config = device_config(args.tiny)
  stages, clock = {}, [time.perf_counter()]

  def stage(name: str) -> None:
    now = time.perf_counter()
    stages[name] = now - clock[0]
    clock[0] = now

  run, state = build(config, devices=[device])
  stage("build")
  with jax.set_mesh(run.mesh):
    phases, _, calls = bench_step.compile_phases(run, state)
    stage("compile_phases")
    times = bench_step.interleaved(calls, args.repeats, warmup=False)
    for name, fig in phases.items():
      fig.update(bench_step.figures(times[name]))
    stage("timing")
    if args.profile:
      whole, call = bench_step.compile_whole_step(run, state)
      with jax.profiler.trace(args.profile):
        call()
      stage("profile")
  measured_peak = peak_memory(device)
  del calls, state

  prediction = None
  if args.plan != "none":
    with contextlib.redirect_stdout(sys.stderr):  # plan's own report goes to stderr; its figures come back
      prediction = planner.plan(
        config, devices=1, chip_name=args.chip, log=lambda *_: None, compile_program=args.plan == "compiled"
      )
    stage("plan")
  analytic = prediction["analytic"] if prediction else None
  utilisation = judged(phases, analytic, chip) if analytic else {}
  predicted_peak = None
  if prediction:
    predicted_peak = prediction["memory"]["peak"] if prediction.get("compiled") else analytic["peak_bytes"]

  print(
    f"device check: {device.platform} {getattr(device, 'device_kind', '')}, judged as {chip.name} "
    f"({chip.peak_flops / 1e12:.0f} TFLOP/s dense bf16, {chip.hbm_bandwidth / 1e12:.2f} TB/s; {chip.source}); "
    f"agent {AGENT_SHAPE if not args.tiny else 'tiny'}, env {ENV_SHAPE if not args.tiny else 'tiny'}, "
    f"lengths { ({k: config.domain[k] for k in LENGTHS}) }"
  )
  print(f"{'phase':<16} {'compile s':>9} {'median s':>9} {'tokens':>8} {'tok/s':>10}  utilisation")
  for name in (*bench_step.PHASES, "rollouts"):
    if name not in phases:
      continue
    f, u = phases[name], utilisation.get(name, {})
    note = (
      f"MFU {u['mfu']:.1%}" if "mfu" in u else (f"HBM {u['hbm_utilisation']:.1%}" if "hbm_utilisation" in u else "")
    )
    tokens = f.get("tokens", 0)
    print(
      f"{name:<16} {f['lower_s'] + f['compile_s']:>9.1f} {f['seconds']:>9.3f} {tokens:>8} "
      f"{tokens / f['seconds']:>10.0f}  {note}"
    )
  peak_text = fmt_bytes(measured_peak) if measured_peak is not None else "n/a on this backend"
  predicted_text = fmt_bytes(predicted_peak) if predicted_peak is not None else "not planned"
  print(f"peak device memory: measured {peak_text}; plan ({args.plan}) predicts {predicted_text}")
  for line in verdicts(utilisation) if utilisation else ["no analytic figures (--plan none): no verdicts"]:
    print(line)
  result = {
    "platform": device.platform,
    "device_kind": getattr(device, "device_kind", ""),
    "chip": chip.name,
    "chip_source": chip.source,
    "jax": jax.__version__,
    "tiny": args.tiny,
    "repeats": args.repeats,
    "lengths": {k: config.domain[k] for k in LENGTHS},
    "stage_s": stages,
    "phases": phases,
    "utilisation": utilisation,
    "measured_peak_bytes": measured_peak,
    "plan": args.plan,
    "predicted_peak_bytes": predicted_peak,
    "targets": TARGETS,
    "date": time.strftime("%Y-%m-%d"),
  }
  text = json.dumps(result, default=float)
  if args.json:
    with open(os.path.expanduser(args.json), "w", encoding="utf-8") as f:
      f.write(text)
  print("JSON: " + text)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.bench.device")
