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

PyTorch reference: our agent is exported with `save_hf`, loaded with transformers' AutoModelForCausalLM (float32) and
runs the same token ids [tasks x G, prompt + answer] with a GRPO-like loss (-adv x log pi, token mean), backward,
global-norm clipping and AdamW. Two comparisons, each ours / torch in tokens/s:
  like-for-like     one jitted fwd+bwd+AdamW of our model (rl.updates.gradient_step) vs one torch step, same loss
  agent update      the full agent_update vs torch doing the same work: a no-grad reference forward + M steps

Usage:  python -m genenv_jax.bench.step [--config=default|smoke|VARIANT|FILE.py[:VARIANT]] [--repeats=N]
                                        [--warm_start=F] [--tiny] [--fast_compile] [--devices=N] [--torch_threads=N]
--config is a variant of configs/default.py (default: none), or a config file as genenv_jax.main takes it.
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
  )


def _args() -> SimpleNamespace:
  """The flags' values, checked (ValueError naming the flag)."""
  args = cli.namespace(_FLAGS)
  if args.repeats <= 0 or args.warm_start < 0:
    raise ValueError(f"--repeats must be positive and --warm_start non-negative, got {args.repeats}, {args.warm_start}")
  return args


def load_config(config: str, warm_start: float = 1.0, tiny: bool = False):
  """The config `config` names (see --config), read at run time, then the benchmark's own overrides on a copy: the
  warm-start steps scaled by `warm_start`, and with `tiny` both models shrunk to TINY_MODEL."""
  if ".py" not in config:
    config = f"{DEFAULT_CONFIG}:{'' if config == 'default' else config}"
  path, _, variant = config.partition(":")
  config = copy.deepcopy(cli.config_module(path).get_config(variant))
  w = config.warm_start
  w.agent_steps, w.env_steps = (int(round(n * warm_start)) for n in (w.agent_steps, w.env_steps))
  if tiny:
    for model in (config.agent.model, config.env.model):
      model.update(TINY_MODEL)
  return config


# ---- timing ---------------------------------------------------------------------------------------------------------


def compile_timed(jitted, args: tuple, options: dict | None = None) -> tuple[Any, float, float]:
  """(compiled, trace+lower seconds, compile seconds) of `jitted.lower(*args).compile(options)`."""
  t0 = time.perf_counter()
  lowered = jitted.lower(*args)
  t1 = time.perf_counter()
  compiled = lowered.compile(compiler_options=options or None)
  return compiled, t1 - t0, time.perf_counter() - t1


def _shardings(tree: Any) -> Any:
  import jax

  return jax.tree.map(lambda x: x.sharding, tree)


def figures(times: Sequence[float]) -> dict[str, Any]:
  return {"seconds": statistics.median(times), "best_s": min(times), "times": list(times)}


def compile_jitted(
  fn: Callable, args: tuple, in_shardings: tuple, options: dict | None = None
) -> tuple[dict[str, Any], Any, Callable[[], Any]]:
  """Compiles `fn` with explicit input shardings (timed) and calls it once (the warm-up); returns the compile
  figures, that call's output and a blocking zero-argument call for the timing pass."""
  import jax

  compiled, lower_s, compile_s = compile_timed(jax.jit(fn, in_shardings=in_shardings), args, options)
  call = lambda: jax.block_until_ready(compiled(*args))  # noqa: E731
  return {"lower_s": lower_s, "compile_s": compile_s}, call(), call


def interleaved(calls: dict[str, Callable[[], Any]], repeats: int, warmup: bool = True) -> dict[str, list[float]]:
  """Times blocking calls round-robin (after a warm-up call each), so load drift on a shared machine hits all alike."""
  for call in calls.values() if warmup else ():
    call()
  times: dict[str, list[float]] = {name: [] for name in calls}
  for _ in range(repeats):
    for name, call in calls.items():
      t0 = time.perf_counter()
      call()
      times[name].append(time.perf_counter() - t0)
  return times


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


def compile_gradient_step(
  run, state, batch: dict[str, np.ndarray], options: dict | None = None
) -> tuple[dict[str, Any], Callable[[], Any]]:
  """One jitted fwd+bwd+AdamW (rl.updates.gradient_step) of our agent on the batch: loss = -Σ adv·logπ·m / Σ m."""
  import jax
  import jax.numpy as jnp
  from flax import nnx

  from genenv_jax.rl.logprobs import response_logprobs
  from genenv_jax.rl.updates import gradient_step

  co = run.coevolution

  def loss_fn(params, b):
    logp, _ = response_logprobs(
      nnx.merge(co.agent_graphdef, params), b["prompt_ids"], b["prompt_mask"], b["response"], b["response_mask"]
    )
    m = b["response_mask"].astype(jnp.float32)
    return -(logp * b["adv"][:, None] * m).sum(), m.sum(), {}

  def step(params, opt, b):
    return gradient_step(loss_fn, co.agent_optimizer, params, opt, b)

  b = jax.tree.map(jnp.asarray, batch)
  sh = run.state_shardings
  fig, _, call = compile_jitted(
    step, (state.agent, state.agent_opt, b), (sh.agent, sh.agent_opt, _shardings(b)), options
  )
  return fig, call


def torch_reference(
  model_dir: str, batch: dict[str, np.ndarray], optimizer_cfg, minibatches: int, threads: int
) -> tuple[dict[str, Any], dict[str, Callable[[], Any]]]:
  """The same batch and loss with transformers + torch.optim.AdamW: (facts, {"step": one full-batch step,
  "update": the agent-update work}), each a blocking call."""
  import torch
  import transformers

  torch.set_num_threads(threads)
  load = lambda: transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)  # noqa: E731
  model, ref = load().train(), load().eval()
  opt = torch.optim.AdamW(
    model.parameters(), lr=optimizer_cfg.lr, eps=optimizer_cfg.eps, weight_decay=optimizer_cfg.weight_decay
  )
  p = batch["prompt_ids"].shape[1]
  batch = {k: np.array(v) for k, v in batch.items()}  # writable copies (torch warns on read-only arrays)
  ids = torch.as_tensor(np.concatenate([batch["prompt_ids"], batch["response"]], 1), dtype=torch.long)
  mask = torch.as_tensor(np.concatenate([batch["prompt_mask"], batch["response_mask"]], 1), dtype=torch.long)
  resp = torch.as_tensor(batch["response"], dtype=torch.long)
  resp_mask = torch.as_tensor(batch["response_mask"], dtype=torch.float32)
  adv = torch.as_tensor(batch["adv"])

  def logp_of(m, rows):
    logits = m(input_ids=ids[rows], attention_mask=mask[rows]).logits[:, p - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, resp[rows][..., None])[..., 0]

  def one_step(rows):
    opt.zero_grad(set_to_none=True)
    m = resp_mask[rows]
    loss = -(logp_of(model, rows) * adv[rows, None] * m).sum() / m.sum().clamp(min=1.0)
    loss.backward()
    if optimizer_cfg.max_grad_norm > 0:
      torch.nn.utils.clip_grad_norm_(model.parameters(), optimizer_cfg.max_grad_norm)
    opt.step()
    return loss

  n = ids.shape[0]
  chunks = [slice(i * n // minibatches, (i + 1) * n // minibatches) for i in range(minibatches)]

  def update_equivalent():
    with torch.no_grad():
      logp_of(ref, slice(None))
    for c in chunks:
      loss = one_step(c)
    return loss

  facts = {"threads": threads, "params": int(sum(t.numel() for t in model.parameters())), "torch": torch.__version__}
  return facts, {"step": lambda: one_step(slice(None)).item(), "update": lambda: update_equivalent().item()}


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
  lines += [
    "",
    f"agent update vs PyTorch (transformers {r['transformers']}, torch {c['torch']}, {c['threads']} "
    f"threads), the same {c['tokens']} tokens = {c['rows']} rows x {c['length']}, timed round-robin:",
    f"{'':<38} {'ours ms':>9} {'torch ms':>9} {'ours tok/s':>11} {'torch tok/s':>12} {'ours/torch':>11} {'(best)':>7}",
  ]
  for key, label in (
    ("step", "fwd+bwd+AdamW, 1 step (like-for-like)"),
    ("update", f"agent_update (ref fwd + {c['optimizer_steps']} steps)"),
  ):
    o, t = c[f"ours_{key}"], c[f"torch_{key}"]
    lines.append(
      f"{label:<38} {1e3 * o['seconds']:>9.2f} {1e3 * t['seconds']:>9.2f} {o['tok_s']:>11.0f} "
      f"{t['tok_s']:>12.0f} {c[f'ratio_{key}']:>10.2f}x {c[f'ratio_{key}_best']:>6.2f}x"
    )
  lines.append(
    "note: our agent_update also runs the reference-model forward for the KL and its mini-batch lax.scan "
    "(M optimizer steps; GRPO clipped loss + entropy); the torch 'agent_update' row does the same work (a "
    "no-grad reference forward + M AdamW steps on the same mini-batches). The like-for-like row is one "
    "fwd+bwd+AdamW each (rl.updates.gradient_step vs torch), same loss (-adv x log pi, token mean). On a "
    "shared CPU torch's intra-op threads slow down sharply when other processes hold the cores: read the "
    "(best) column beside the median, or rerun with --torch_threads 1."
  )
  return "\n".join(lines)


def compare(
  ours: dict[str, Callable[[], Any]], theirs: dict[str, Callable[[], Any]], tokens: int, repeats: int
) -> dict[str, Any]:
  """Ours vs torch on the same work, round-robin; ratios = our tokens/s over torch's, from medians and from bests."""
  times = interleaved(
    {**{f"ours_{k}": v for k, v in ours.items()}, **{f"torch_{k}": v for k, v in theirs.items()}}, repeats
  )
  out: dict[str, Any] = {}
  for name, t in times.items():
    out[name] = {**figures(t), "tok_s": tokens / statistics.median(t), "best_tok_s": tokens / min(t)}
  for key in ours:
    out[f"ratio_{key}"] = out[f"ours_{key}"]["tok_s"] / out[f"torch_{key}"]["tok_s"]
    out[f"ratio_{key}_best"] = out[f"ours_{key}"]["best_tok_s"] / out[f"torch_{key}"]["best_tok_s"]
  return out


def report(result: dict, args, config, s, devices: int, load_before) -> None:
  """Prints the benchmark's header, the sampling phases' decode figures, the table and the `JSON: ...` line."""
  import jax

  phases, stages = result["phases"], result["stage_s"]
  print(
    f"\nco-evolution step, --config={args.config}{' --tiny' if args.tiny else ''}: "
    f"{s.num_fresh} fresh + {s.pools.num_replay} replay tasks x G={s.agent.grpo.group_size}, agent answer "
    f"{s.agent.sampling.max_new_tokens} / env output {s.env.sampling.max_new_tokens} tokens, warm start "
    f"{config.warm_start.agent_steps}/{config.warm_start.env_steps} steps; jax {jax.__version__} on "
    f"{devices} {jax.devices()[0].platform} device(s), {os.cpu_count()} cores; median of {args.repeats}; "
    f"load average {load_before[0]:.2f} before, {result['load_avg_after'][0]:.2f} after"
  )
  for name in ("env_sampling", "agent_sampling"):
    if name in phases:
      f = phases[name]
      print(
        f"{LABELS[name]}: {f['rows']} rows, {f['decode_steps']}/{f['budget']} decode steps run, "
        f"{f['tokens']} tokens generated ({f['slots']} slots)"
      )
  print(format_table(result))
  print("benchmark wall time by stage (s): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()))
  print("JSON: " + json.dumps(result))


def main(argv: Sequence[str]) -> None:
  """Runs the benchmark; prints the table and a final `JSON: ...` line with every figure."""
  cli.no_arguments(argv)
  args = _args()
  import jax
  import transformers
  from flax import nnx

  from genenv_jax.coevolution.build import build
  from genenv_jax.models.hf import save_hf
  from genenv_jax.training.loop import warm_start

  transformers.utils.logging.disable_progress_bar()
  threads = args.torch_threads or os.cpu_count() or 1
  config = load_config(args.config, args.warm_start, args.tiny)
  options = cpu_pipeline.CHEAPEST if args.fast_compile else None  # faster to compile, slower code: smoke tests only
  load_before = os.getloadavg()

  stages: dict[str, float] = {}
  clock = [time.perf_counter()]

  def stage(name: str) -> None:
    now = time.perf_counter()
    stages[name] = now - clock[0]
    clock[0] = now

  run, state = build(config, devices=jax.devices()[: args.devices] if args.devices else None)
  stage("build")
  warm = run.coevolution.settings.warm_start
  if warm.agent_steps or warm.env_steps:
    state = warm_start(run, state, run.coevolution.settings.seed, log=lambda msg: print(msg, flush=True))
  stage("warm_start")
  co = run.coevolution
  with jax.set_mesh(run.mesh):
    phases, x, calls = compile_phases(run, state, options)
    step, step_call = compile_whole_step(run, state, options)
    stage("compile")
    times = interleaved({**calls, "whole_step": step_call}, args.repeats, warmup=False)
    for name, fig in phases.items():
      fig.update(figures(times[name]), tok_s=fig["tokens"] / statistics.median(times[name]))
    step.update(figures(times["whole_step"]), tokens=statistics.median(step.pop("generated")[1:]))
    step["tok_s"] = step["tokens"] / step["seconds"]
    stage("timing")
    batch = update_batch(x)
    ours_step, ours_step_call = compile_gradient_step(run, state, batch, options)
  au = phases["agent_update"]
  with tempfile.TemporaryDirectory(prefix="bench_step_hf_") as tmp:
    save_hf(nnx.merge(co.agent_graphdef, state.agent), tmp)
    facts, torch_calls = torch_reference(
      tmp, batch, config.agent.optimizer, co.settings.agent.grpo.minibatches, threads
    )
    with jax.set_mesh(run.mesh):
      comparison = compare(
        {"step": ours_step_call, "update": calls["agent_update"]}, torch_calls, au["tokens"], args.repeats
      )
  comparison.update(
    facts,
    rows=au["rows"],
    length=au["length"],
    tokens=au["tokens"],
    optimizer_steps=au["optimizer_steps"],
    ours_step_compile_s=ours_step["lower_s"] + ours_step["compile_s"],
    ours_gradient_step_alone=ours_step,
  )
  del calls, step_call, ours_step_call, torch_calls
  stage("torch_comparison")

  phase_sum = sum(phases[n]["seconds"] for n in PHASES if n in phases)
  result = {
    "config": args.config,
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
    "transformers": transformers.__version__,
    "load_avg_before": list(load_before),
    "load_avg_after": list(os.getloadavg()),
    "phases": phases,
    "phase_sum_s": phase_sum,
    "other_s": step["seconds"] - phase_sum,
    "step": step,
    "comparison": comparison,
  }
  report(result, args, config, co.settings, run.mesh.size, load_before)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.bench.step")
