"""Where a co-evolution step's time goes: each phase of `Coevolution` jitted alone, the whole step, and PyTorch.

The phases are the same pure functions the step calls (coevolution/step.py), each jitted on its own with the state's
shardings, on inputs made by running the earlier phases once on a (warm-started) state:
  env sampling      generate_tasks (env prompts, prefill + decode, parse)
  agent sampling    rollouts minus verification (G copies of each task, prefill + decode)
  verification      domain.verify on the rollout outputs (rollouts = the two together, also reported)
  agent update      agent_update: reference forward for the KL, then M mini-batch fwd+bwd+AdamW steps (lax.scan)
  env update        env_update: reference forward, fwd+bwd+AdamW, two forwards for the per-update KL cap
Each is lowered and compiled (timed) and called once to warm up. The whole step is
`run.coevolution.jit_step(run.state_shardings)`, compiled the same way and run on a copy of the state, donated and fed
back, as in training. Then all of them are timed round-robin, --repeats rounds (block_until_ready), so that load drift
on a shared machine hits every figure alike; the median (and the best) is kept. "other" = whole step - sum of phases
(pool draws and inserts, curriculum, metrics), a difference of medians: noise, or the whole program overlapping
independent work (XLA's CPU runtime may run independent ops concurrently), can make it negative.

tokens/s: sampling phases count generated tokens (the mask, EOS included; `slots` = rows x decode steps run is also
in the JSON); updates count processed tokens = rows x (prompt + response length) of their batch, counted once.

Side by side with PyTorch (bench.side_by_side): the agent's update (fwd+bwd+AdamW, full fine-tuning, and with LoRA
where the config turns it on), its reference forward, and greedy sampling's prefill and decode, ours against
transformers + torch.optim.AdamW + transformers' `generate` on the same weights (ours exported with `save_hf`), the
same shapes (--update_rows x --update_length; --sample_batches x --sample_prompt + --sample_new) and the same thread
count (--torch_threads), the greedy tokens compared. Each figure as tok/s, GFLOP/s (FLOPs counted: 6·N·D an update,
2·N·D a forward; N in bench.side_by_side) and its share of this machine's float32 matmul peak, measured in the same
run (bench.sgemm: numpy sgemm --peak_size³, before and after the rest, the higher kept), with the peak resident
memory of each side. The torch side runs in a process of its own (bench.torch_side), after ours, and so does the
peak: one side's memory never counts against the other's. With the phases (--phases, the default), torch also does
the full agent update's work on the rollouts' batch [tasks x G, prompt + answer]: a no-grad reference forward and M
fwd+bwd+AdamW steps on the same mini-batches (the GRPO loss is -adv x log pi, token mean); ours / torch in tokens/s.

Usage:  python -m genenv_jax.bench.step [--config=default|smoke|VARIANT|FILE.py[:VARIANT]] [--set=KEY=VALUE ...]
                                        [--repeats=N] [--warm_start=F] [--tiny] [--fast_compile] [--devices=N]
                                        [--torch_threads=N] [--nophases] [--update_rows=16] [--update_length=128]
                                        [--sample_batches=8,32] [--sample_prompt=64] [--sample_new=16]
                                        [--peak_size=4096]
--config is a variant of configs/default.py (default: none), or a config file as genenv_jax.main takes it, the
real-model one included (configs/smollm2.py: SmolLM2-135M from its GGUF file); --set overrides a setting of it
(`--set=agent.grpo.group_size=8`, repeatable), as `--config.KEY=VALUE` does for genenv_jax.main.
Prints a table, then one line `JSON: {...}` with every figure.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import statistics
import tempfile
import time
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np
from absl import flags

from genenv_jax import cli
from genenv_jax.bench import sgemm, side_by_side, timing, torch_side
from genenv_jax.bench.timing import compile_jitted, compile_timed, figures, interleaved
from genenv_jax.bench.timing import shardings as _shardings
from genenv_jax.parallel import cpu_pipeline
from genenv_jax.reporting import metric_table as mt

TINY_MODEL = dict(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16)
PHASES = ("env_sampling", "agent_sampling", "verification", "agent_update", "env_update")
DEFAULT_CONFIG = pathlib.Path(__file__).resolve().parents[2] / "configs" / "default.py"


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_string(
      "config",
      "default",
      "The config: a variant of configs/default.py (default: none; smoke, random, ...), or a config file as "
      "genenv_jax.main's --config takes it, e.g. configs/default.py:smoke.",
      flag_values=fv,
    ),
    flags.DEFINE_integer("repeats", 10, "Timed calls per figure, after one warm-up call.", flag_values=fv),
    flags.DEFINE_float(
      "warm_start",
      1.0,
      "Fraction of the config's warm-start steps to run first (0: random models; sampling then runs the whole "
      "decode budget, since nothing emits EOS).",
      flag_values=fv,
    ),
    flags.DEFINE_boolean("tiny", False, "Shrink both models to one 32-wide layer (smoke tests).", flag_values=fv),
    flags.DEFINE_boolean(
      "fast_compile",
      False,
      "Compile with XLA's cheap CPU pipeline (faster compiles, slower code: smoke tests only).",
      flag_values=fv,
    ),
    flags.DEFINE_integer("devices", 0, "Build the mesh on the first N devices (0: all).", flag_values=fv),
    flags.DEFINE_integer(
      "torch_threads", 0, "torch.set_num_threads for the PyTorch reference (0: the CPU core count).", flag_values=fv
    ),
    flags.DEFINE_multi_string(
      "set", [], "A config override KEY=VALUE, e.g. agent.grpo.group_size=8 (repeatable).", flag_values=fv
    ),
    flags.DEFINE_boolean(
      "phases",
      True,
      "Time the step's phases and the whole step (and the agent update against torch's); --nophases: the "
      "side-by-side figures alone.",
      flag_values=fv,
    ),
    flags.DEFINE_integer("update_rows", 16, "Rows of the side-by-side update and forward.", flag_values=fv),
    flags.DEFINE_integer(
      "update_length", 128, "Tokens per row of the side-by-side update and forward (a 1-token prompt).", flag_values=fv
    ),
    flags.DEFINE_list("sample_batches", ["8", "32"], "Batch sizes of the side-by-side sampling.", flag_values=fv),
    flags.DEFINE_integer("sample_prompt", 64, "Prompt tokens of the side-by-side sampling.", flag_values=fv),
    flags.DEFINE_integer("sample_new", 16, "New tokens per row of the side-by-side sampling.", flag_values=fv),
    flags.DEFINE_integer(
      "peak_size", 4096, "N of the N x N x N float32 matmul that measures the peak (bench.sgemm).", flag_values=fv
    ),
  )


def _args() -> SimpleNamespace:
  """The flags' values, checked (ValueError naming the flag)."""
  args = cli.namespace(_FLAGS)
  if args.repeats <= 0 or args.warm_start < 0 or args.peak_size <= 0:
    raise ValueError(
      f"--repeats and --peak_size must be positive and --warm_start non-negative, got {args.repeats}, "
      f"{args.peak_size}, {args.warm_start}"
    )
  args.shapes = side_by_side.Shapes(
    args.update_rows,
    args.update_length,
    cli.integers("sample_batches", args.sample_batches),
    args.sample_prompt,
    args.sample_new,
  )
  args.shapes.check()
  return args


def load_config(config: str, warm_start: float = 1.0, tiny: bool = False, overrides: Sequence[str] = ()):
  """The config `config` names (see --config), read at run time, with the `overrides` (KEY=VALUE, cli.override),
  then the benchmark's own overrides on a copy: the warm-start steps scaled by `warm_start`, and with `tiny` both
  models shrunk to TINY_MODEL."""
  if ".py" not in config:
    config = f"{DEFAULT_CONFIG}:{'' if config == 'default' else config}"
  path, _, variant = config.partition(":")
  config = copy.deepcopy(cli.config_module(path).get_config(variant))
  for assignment in overrides:
    cli.override(config, assignment)
  w = config.warm_start
  w.agent_steps, w.env_steps = (int(round(n * warm_start)) for n in (w.agent_steps, w.env_steps))
  if tiny:
    for model in (config.agent.model, config.env.model):
      model.update(TINY_MODEL)
  return config


# ---- the phases -----------------------------------------------------------------------------------------------------


def _preamble(co, state) -> dict[str, Any]:
  """The step's pool draws and keys (`Coevolution.draw`, before its phases), jitted once."""
  import jax

  return jax.jit(co.draw)(state)


def _sampled(out) -> dict[str, int]:
  mask = np.asarray(out.mask)
  steps = int(mask.sum(-1).max(initial=0))  # a row's mask is a prefix; the decode loop ran for the longest one
  return {
    "rows": int(mask.shape[0]),
    "budget": int(mask.shape[1]),
    "tokens": int(mask.sum()),
    "decode_steps": steps,
    "slots": int(mask.shape[0] * steps),
  }


def compile_phases(run, state, options: dict | None = None) -> tuple[dict[str, dict], dict, dict]:
  """Each phase compiled in step order; a phase's output (its warm-up call) feeds the next phases.

  Returns the figures (compile times, token counts), the inputs made along the way (the agent update's batch is
  reused for PyTorch) and each phase's blocking call, for the timing pass.
  """
  import jax
  import jax.numpy as jnp
  from flax import nnx

  from genenv_jax.coevolution.step import task_batch
  from genenv_jax.parallel.sharding import constrain, interleave_rows, split_rows
  from genenv_jax.rl import curriculum
  from genenv_jax.sampling import sampler

  co, sh, s = run.coevolution, run.state_shardings, run.coevolution.settings
  results: dict[str, dict[str, Any]] = {}
  calls: dict[str, Callable[[], Any]] = {}
  x = _preamble(co, state)

  def bench(name, fn, args, in_shardings, **extra):
    fig, out, calls[name] = compile_jitted(fn, args, in_shardings, options)
    results[name] = {**fig, **extra}
    return out

  parts = []
  if s.num_fresh:
    env_prompts, env_out, fresh = bench(
      "env_sampling",
      co.generate_tasks,
      (state.env, x["seeds"], x["k_env"]),
      (sh.env, _shardings(x["seeds"]), _shardings(x["k_env"])),
    )
    results["env_sampling"].update(_sampled(env_out))
    fresh = fresh.replace(valid=fresh.valid & x["seed_valid"])
    parts.append(fresh)
  if s.pools.num_replay:
    parts.append(task_batch(x["replay"]))
  shards = co.task_shards()  # the step's own join: shard by shard, where no device's rows move (Coevolution.step)
  tasks = parts[0] if len(parts) == 1 else jax.tree.map(lambda a, b: interleave_rows(a, b, shards), *parts)
  task_args = (state.agent, tasks, x["k_agent"])
  task_shardings = (sh.agent, _shardings(tasks), _shardings(x["k_agent"]))

  def agent_sampling(params, tasks, key):  # rollouts() without the verification
    grouped = jax.tree.map(lambda t: jnp.repeat(t, s.agent.grpo.group_size, axis=0), tasks)
    prompts = constrain(grouped.prompt_ids, ("batch", "length"))
    return sampler.sample(nnx.merge(co.agent_graphdef, params), prompts, grouped.prompt_mask, key, s.agent.sampling)

  bench("agent_sampling", agent_sampling, task_args, task_shardings)
  grouped, out, rewards = bench("rollouts", co.rollouts, task_args, task_shardings)
  results["agent_sampling"].update(_sampled(out))
  results["rollouts"]["tokens"] = results["agent_sampling"]["tokens"]
  bench(
    "verification",
    co.domain.verify,
    (grouped, out.tokens, out.mask),
    _shardings((grouped, out.tokens, out.mask)),
    rows=int(out.tokens.shape[0]),
    tokens=int(out.mask.sum()),
  )

  args = (state.agent, state.agent_opt, state.agent_ref, grouped, out, rewards, tasks.valid)
  rows, length = out.tokens.shape[0], grouped.prompt_ids.shape[1] + out.tokens.shape[1]
  bench(
    "agent_update",
    co.agent_update,
    args,
    (sh.agent, sh.agent_opt, sh.agent_ref) + _shardings(args[3:]),
    rows=int(rows),
    length=int(length),
    tokens=int(rows * length),
    optimizer_steps=s.agent.grpo.minibatches,
    reference_forward=s.agent.grpo.kl_coef > 0,
  )

  if s.num_fresh and s.env.train:
    cur = jax.jit(lambda r, v: curriculum.curriculum_targets(r, v, s.env.curriculum, s.domain.success_threshold))(
      split_rows(rewards, s.num_fresh, shards)[0] if s.pools.num_replay else rewards, fresh.valid
    )
    args = (state.env, state.env_opt, state.env_ref, env_prompts, env_out, cur, fresh.valid)
    rows, length = env_out.tokens.shape[0], env_prompts[0].shape[1] + env_out.tokens.shape[1]
    bench(
      "env_update",
      co.env_update,
      args,
      (sh.env, sh.env_opt, sh.env_ref) + _shardings(args[3:]),
      rows=int(rows),
      length=int(length),
      tokens=int(rows * length),
      optimizer_steps=1,
    )
  return results, {"tasks": tasks, "grouped": grouped, "agent_out": out, "rewards": rewards}, calls


# ---- like-for-like update: ours vs PyTorch --------------------------------------------------------------------------


def update_batch(x: dict[str, Any]) -> dict[str, np.ndarray]:
  """The agent update's batch as host arrays: prompt ids/mask, response, response mask (valid rows), group advantage."""
  from genenv_jax.rl import grpo

  g, out = x["grouped"], x["agent_out"]
  adv, _ = grpo.compute_advantages(x["rewards"], x["tasks"].valid, method="grpo")
  adv = np.asarray(adv).reshape(-1)
  adv = np.where(adv == 0, 0.1, adv).astype(np.float32)  # a zero advantage kills the gradient of a row; same FLOPs
  return {
    "prompt_ids": np.asarray(g.prompt_ids),
    "prompt_mask": np.asarray(g.prompt_mask),
    "response": np.asarray(out.tokens),
    "response_mask": np.asarray(out.mask) * np.asarray(g.valid)[:, None],
    "adv": adv,
  }


# ---- the whole step -------------------------------------------------------------------------------------------------


def compile_whole_step(run, state, options: dict | None = None) -> tuple[dict[str, Any], Callable[[], Any]]:
  """jit_step lowered and compiled (timed) and called once; its call runs on a copy of the state, donated and fed
  back as the training loop does (so the phases keep their inputs). Tokens generated per call are recorded in the
  figures."""
  import jax
  import jax.numpy as jnp

  compiled, lower_s, compile_s = compile_timed(run.coevolution.jit_step(run.state_shardings), (state,), options)
  holder = [jax.tree.map(lambda a, s: jax.device_put(jnp.copy(a), s), state, run.state_shardings)]
  fig: dict[str, Any] = {"lower_s": lower_s, "compile_s": compile_s, "generated": []}

  def call():
    holder[0], metrics = jax.block_until_ready(compiled(holder[0]))
    fig["generated"].append(float(metrics[mt.AGENT_TOKENS]) + float(metrics.get(mt.ENV_TOKENS, 0.0)))

  call()
  return fig, call


# ---- report ---------------------------------------------------------------------------------------------------------

LABELS = {
  "env_sampling": "env sampling",
  "agent_sampling": "agent sampling",
  "verification": "verification",
  "agent_update": "agent update",
  "env_update": "env update",
}


def format_table(r: dict[str, Any]) -> str:
  ph, step = r["phases"], r["step"]
  total = step["seconds"]
  head = f"{'phase':<22} {'median ms':>10} {'best ms':>9} {'% step':>7} {'tokens':>7} {'tok/s':>10} {'compile s':>10}"
  lines = [head, "-" * len(head)]

  def row(label, f, tokens=True):
    toks = f"{f['tokens']:>7.0f} {f['tok_s']:>10.0f}" if tokens else f"{'':>7} {'':>10}"
    return (
      f"{label:<22} {1e3 * f['seconds']:>10.2f} {1e3 * f['best_s']:>9.2f} {100 * f['seconds'] / total:>6.1f}% "
      f"{toks} {f['lower_s'] + f['compile_s']:>10.2f}"
    )

  lines += [row(LABELS[name], ph[name]) for name in PHASES if name in ph]
  lines.append(row("(rollouts = both)", ph["rollouts"], tokens=False))
  lines.append(f"{'other (step - phases)':<22} {1e3 * r['other_s']:>10.2f} {'':>9} {100 * r['other_s'] / total:>6.1f}%")
  lines.append("-" * len(head))
  lines.append(row("whole jitted step", step))
  c = r["comparison"]
  o, t = c["ours_update"], c["torch_update"]
  lines += [
    "",
    f"agent update vs PyTorch ({c['threads']} threads, a process of its own), the same {c['tokens']} tokens = "
    f"{c['rows']} rows x {c['length']}: ours {1e3 * o['seconds']:.2f} ms ({o['tok_s']:.0f} tok/s), torch "
    f"{1e3 * t['seconds']:.2f} ms ({t['tok_s']:.0f} tok/s): ours/torch {c['ratio_update']:.2f}x",
    "note: our agent_update runs the reference forward for the KL and its mini-batch lax.scan (M optimizer steps; "
    "GRPO clipped loss + entropy); torch does the same work (a no-grad reference forward + M AdamW steps on the same "
    "mini-batches, loss -adv x log pi). On a shared CPU torch's intra-op threads slow down sharply when other "
    "processes hold the cores: rerun with --torch_threads 1 to see.",
  ]
  return "\n".join(lines)


def report(result: dict, args, config, s, devices: int, load_before) -> None:
  """Prints the benchmark's header, the sampling phases' decode figures, the tables and the `JSON: ...` line."""
  import jax

  print(
    f"\nco-evolution step, --config={args.config}{' --tiny' if args.tiny else ''}"
    f"{''.join(f' --set={a}' for a in args.set)}: "
    f"{s.num_fresh} fresh + {s.pools.num_replay} replay tasks x G={s.agent.grpo.group_size}, agent answer "
    f"{s.agent.sampling.max_new_tokens} / env output {s.env.sampling.max_new_tokens} tokens, warm start "
    f"{config.warm_start.agent_steps}/{config.warm_start.env_steps} steps; jax {jax.__version__} on "
    f"{devices} {jax.devices()[0].platform} device(s), {os.cpu_count()} cores; median of {args.repeats}; "
    f"load average {load_before[0]:.2f} before, {result['load_avg_after'][0]:.2f} after"
  )
  phases = result.get("phases", {})
  for name in ("env_sampling", "agent_sampling"):
    if name in phases:
      f = phases[name]
      print(
        f"{LABELS[name]}: {f['rows']} rows, {f['decode_steps']}/{f['budget']} decode steps run, "
        f"{f['tokens']} tokens generated ({f['slots']} slots)"
      )
  if phases:
    print(format_table(result))
  print(side_by_side.format_table(result["side_by_side"]))
  print("benchmark wall time by stage (s): " + ", ".join(f"{k} {v:.1f}" for k, v in result["stage_s"].items()))
  print("JSON: " + json.dumps(result))


def time_phases(run, state, repeats: int, options: dict | None) -> tuple[dict, dict, dict[str, np.ndarray]]:
  """The phases and the whole step compiled, then timed round-robin: (phase figures, whole-step figures, the agent
  update's batch for torch's run of the same work)."""
  import jax

  with jax.set_mesh(run.mesh):
    phases, x, calls = compile_phases(run, state, options)
    step, step_call = compile_whole_step(run, state, options)
    times = interleaved({**calls, "whole_step": step_call}, repeats, warmup=False)
  for name, fig in phases.items():
    fig.update(figures(times[name]), tok_s=fig["tokens"] / statistics.median(times[name]))
  step.update(figures(times["whole_step"]), tokens=statistics.median(step.pop("generated")[1:]))
  step["tok_s"] = step["tokens"] / step["seconds"]
  return phases, step, update_batch(x)


def torch_spec(model_dir: str, threads: int, repeats: int, optimizer, jobs: list[dict]) -> dict[str, Any]:
  """bench.torch_side's spec: AdamW as rl.updates.make_optimizer builds it from the config's optimizer section."""
  import inspect

  from genenv_jax.rl.updates import make_optimizer

  defaults = inspect.signature(make_optimizer).parameters  # b1, b2: the config has no setting of its own for them
  o = {k: float(optimizer[k]) for k in ("lr", "eps", "weight_decay", "max_grad_norm")}
  o.update(b1=defaults["b1"].default, b2=defaults["b2"].default)
  return {"model_dir": model_dir, "threads": threads, "repeats": repeats, "optimizer": o, "jobs": jobs}


def run_torch(run, state, args, threads: int, mine: dict, agent_batch: dict | None) -> dict[str, Any]:
  """Exports our agent (adapters merged) with save_hf and runs the torch side (bench.torch_side) on its jobs: the
  side-by-side ones, and with `agent_batch` the agent update's work on the rollouts' batch."""
  from flax import nnx

  from genenv_jax.models import lora
  from genenv_jax.models.hf import save_hf

  co = run.coevolution
  with tempfile.TemporaryDirectory(prefix="bench_step_torch_") as tmp:
    save_hf(lora.merged(nnx.merge(co.agent_graphdef, state.agent)), f"{tmp}/model")
    jobs = side_by_side.torch_jobs(args.shapes, mine["vocab"], tmp, mine["batch"])
    if agent_batch is not None:
      np.savez(f"{tmp}/agent_update.npz", **agent_batch)
      grpo = co.settings.agent.grpo
      jobs.append(
        {
          "name": "agent_update",
          "kind": "update",
          "batch": f"{tmp}/agent_update.npz",
          "minibatches": grpo.minibatches,
          "reference": grpo.kl_coef > 0,
        }
      )
    spec = torch_spec(f"{tmp}/model", threads, args.repeats, co.settings.agent.optimizer.__dict__, jobs)
    return torch_side.run(spec, tmp)


def comparison(phases: dict, theirs: dict) -> dict[str, Any]:
  """The agent update against torch doing the same work (torch_side's agent_update job), in tokens/s."""
  au = phases["agent_update"]
  torch_update = {**figures(theirs["jobs"]["agent_update"]["times"])}
  torch_update["tok_s"] = au["tokens"] / torch_update["seconds"]
  return {
    "threads": theirs["threads"],
    "torch": theirs["torch"],
    "rows": au["rows"],
    "length": au["length"],
    "tokens": au["tokens"],
    "optimizer_steps": au["optimizer_steps"],
    "ours_update": {k: au[k] for k in ("seconds", "best_s", "times", "tok_s")},
    "torch_update": torch_update,
    "ratio_update": au["tok_s"] / torch_update["tok_s"],
  }


def main(argv: Sequence[str]) -> None:
  """Runs the benchmark; prints the tables and a final `JSON: ...` line with every figure."""
  cli.no_arguments(argv)
  args = _args()
  import jax

  from genenv_jax.coevolution.build import build
  from genenv_jax.training.loop import warm_start

  threads = args.torch_threads or os.cpu_count() or 1
  config = load_config(args.config, args.warm_start, args.tiny, args.set)
  options = cpu_pipeline.CHEAPEST if args.fast_compile else None  # faster to compile, slower code: smoke tests only
  load_before = os.getloadavg()

  stages: dict[str, float] = {}
  clock = [time.perf_counter()]

  def stage(name: str) -> None:
    now = time.perf_counter()
    stages[name] = now - clock[0]
    clock[0] = now

  peak = sgemm.measure(args.peak_size, args.repeats, threads)
  stage("peak")
  run, state = build(config, devices=jax.devices()[: args.devices] if args.devices else None)
  stage("build")
  warm = run.coevolution.settings.warm_start
  if warm.agent_steps or warm.env_steps:
    state = warm_start(run, state, run.coevolution.settings.seed, log=lambda msg: print(msg, flush=True))
  stage("warm_start")
  mine = side_by_side.ours(run, state, args.shapes, args.repeats, options)
  stage("side_by_side")
  phases, step, agent_batch = time_phases(run, state, args.repeats, options) if args.phases else ({}, {}, None)
  stage("phases")
  theirs = run_torch(run, state, args, threads, mine, agent_batch)
  stage("torch")
  peaks = [peak, sgemm.measure(args.peak_size, args.repeats, threads)]  # before and after: the load moves
  stage("peak_after")

  result = {
    "config": args.config,
    "set": list(args.set),
    "tiny": args.tiny,
    "fast_compile": args.fast_compile,
    "repeats": args.repeats,
    "warm_start_fraction": args.warm_start,
    "warm_start_steps": [config.warm_start.agent_steps, config.warm_start.env_steps],
    "stage_s": stages,
    "jax": jax.__version__,
    "platform": jax.devices()[0].platform,
    "devices": run.mesh.size,
    "mesh": dict(run.mesh.shape),
    "cpu_cores": os.cpu_count(),
    "load_avg_before": list(load_before),
    "load_avg_after": list(os.getloadavg()),
    "peak_rss_bytes": timing.peak_rss_bytes(),
    "side_by_side": side_by_side.figures(mine, theirs, args.shapes, peaks),
  }
  if phases:
    phase_sum = sum(phases[n]["seconds"] for n in PHASES if n in phases)
    result.update(
      phases=phases,
      phase_sum_s=phase_sum,
      other_s=step["seconds"] - phase_sum,
      step=step,
      comparison=comparison(phases, theirs),
    )
  report(result, args, config, run.coevolution.settings, run.mesh.size, load_before)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.bench.step")
