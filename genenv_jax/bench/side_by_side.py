"""bench.step's side-by-side figures: the product's agent against PyTorch on the same weights, shapes and threads,
each as tokens/s, GFLOP/s and a share of this machine's measured float32 matmul peak (bench.sgemm).

The work, on the agent of a built run (any config: random models, an HF directory or a GGUF file as `hf_path`):
  update             one jitted forward + backward + AdamW (rl.updates.gradient_step) on `rows` x `length` tokens,
                     the trained weights and optimizer state donated and fed back from call to call (as the
                     co-evolution step's state is; torch's AdamW updates in place):
                     a 1-token prompt and a response of length - 1 tokens, every response token valid, a nonzero
                     advantage per row, loss -Σ adv·log π·m / Σ m. Without LoRA (full fine-tuning: a run with
                     adapters is measured on its merged model, models.lora.merged, with a fresh AdamW over every
                     weight) and, where the config turns LoRA on, with it (the run's own adapters and optimizer
                     state: only the adapters train, the base enters as a constant). torch: transformers' model of the
                     same weights with torch.optim.AdamW over every weight (full fine-tuning; it has no LoRA here).
  reference forward  log π of the same batch with no gradient (the KL reference's forward in an update)
  prefill, decode    greedy sampling of `new_tokens` tokens after a `prompt`-token prompt of random ids, at each
                     batch size: ours `genenv_jax.generate` (sampler.ours_greedy), torch transformers' `generate`
                     (sampler.hf_greedy), no EOS; the greedy tokens of the two are compared (sampler.agreement).
                     Each side is timed for the whole call with `new_tokens` and with one token: a decode step is
                     (t(new_tokens) - t(1)) / (new_tokens - 1); prefill is t(1) less the decode forwards that call
                     holds (ours 1: generate's decode loop feeds the sampled token back; transformers' 0)
The torch side runs in a process of its own (bench.torch_side), and so does the peak (bench.sgemm: OPENBLAS_CORETYPE
and OPENBLAS_L2_SIZE unset there alone; measured before and after the rest, the higher kept: load on a shared machine
moves), so that neither's memory or threads count against ours; each side reports
its own peak resident memory (ours: this process, models, optimizer states and compiled programs included).

FLOPs are counted, not measured: N = the decoder's parameters except the input embedding, with the LM head counted
(tied embeddings: the shared matrix once, as the head), i.e. the weights every token multiplies (`flop_params`;
SmolLM2-135M: 134.5M). An update costs 6·N·D FLOPs for D = rows x length tokens, a forward 2·N·D, a prefill
2·N·(batch x prompt), a decode step 2·N·batch. Attention's own products (QKᵀ, AV) are left out: at these lengths they
are a few percent. A LoRA update does less work (the frozen weights get no gradient: about 4·N·D plus the adapters')
but is counted as 6·N·D like the full one, so its GFLOP/s reads as the rate of the full update it stands in for.
Every figure is the median of `repeats` timed calls after one warm-up.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from genenv_jax.bench import timing


@dataclass(frozen=True)
class Shapes:
  """The side-by-side shapes: the update's rows x length, and sampling's batches, prompt and new tokens."""

  update_rows: int = 16
  update_length: int = 128
  sample_batches: tuple[int, ...] = (8, 32)
  sample_prompt: int = 64
  sample_new: int = 16

  def check(self, max_positions: int | None = None) -> None:
    """ValueError naming the flag when a shape is not positive, or (given `max_positions`) does not fit the model."""
    if min(self.update_rows, self.sample_prompt, *self.sample_batches) < 1 or self.update_length < 2:
      raise ValueError("--update_rows, --sample_batches and --sample_prompt must be positive, --update_length >= 2")
    if self.sample_new < 2:
      raise ValueError(f"--sample_new must be >= 2 (a decode step is a difference of two calls), got {self.sample_new}")
    lengths = {
      "--update_length": self.update_length,
      "--sample_prompt + --sample_new": self.sample_prompt + self.sample_new,
    }
    for name, length in lengths.items():
      if max_positions is not None and length > max_positions:
        raise ValueError(f"{name} = {length} exceeds the model's {max_positions} positions")


def flop_params(config) -> int:
  """N of the FLOP counts (module docstring): ModelConfig.num_params less the input embedding when it is not tied to
  the LM head (tied, the shared matrix counts once, as the head)."""
  return config.num_params - (0 if config.tie_word_embeddings else config.vocab_size * config.hidden_size)


def update_batch(rows: int, length: int, vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
  """Random token ids (from 3: clear of the usual special ids) as a 1-token prompt and a (length - 1)-token response,
  every token valid, advantages ±1 (a zero advantage would zero a row's gradient, not its FLOPs)."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(3, vocab, size=(rows, length), dtype=np.int32)
  return {
    "prompt_ids": ids[:, :1],
    "prompt_mask": np.ones((rows, 1), np.int32),
    "response": ids[:, 1:],
    "response_mask": np.ones((rows, length - 1), np.int32),
    "adv": np.where(rng.random(rows) < 0.5, -1.0, 1.0).astype(np.float32),
  }


def prompts(batch: int, length: int, vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
  """Random prompt ids (from 3) of one length, no padding."""
  ids = np.random.default_rng(seed + batch).integers(3, vocab, size=(batch, length), dtype=np.int32)
  return {"ids": ids, "mask": np.ones_like(ids)}


def logprob_loss(graphdef, chunk_size: int) -> Callable:
  """loss(params, batch) -> (-Σ adv·log π·m, Σ m, {}) of the model `graphdef` merged with `params` (the rl.updates
  convention); log π from rl.logprobs.response_logprobs, `chunk_size` response positions per LM-head chunk."""
  import jax.numpy as jnp
  from flax import nnx

  from genenv_jax.rl.logprobs import response_logprobs

  def loss(params, b):
    model = nnx.merge(graphdef, params)
    logp, _ = response_logprobs(
      model, b["prompt_ids"], b["prompt_mask"], b["response"], b["response_mask"], chunk_size=chunk_size
    )
    m = b["response_mask"].astype(jnp.float32)
    return -(logp * b["adv"][:, None] * m).sum(), m.sum(), {}

  return loss


def compile_update(graphdef, params, optimizer, opt_state, batch, chunk_size: int, options: dict | None = None):
  """One jitted fwd+bwd+AdamW (rl.updates.gradient_step) of `params` on `batch`, with `opt_state` over the trained
  part: the adapters alone when `params` holds LoRA adapters (models.lora.partition), else every weight. Returns
  (compile figures, blocking call)."""
  import jax

  from genenv_jax.models import lora
  from genenv_jax.rl.updates import gradient_step

  loss = logprob_loss(graphdef, chunk_size)
  trained, frozen = lora.partition(params)

  def step(trained, frozen, opt, b):
    return gradient_step(lambda p, b: loss(lora.combine(p, frozen), b), optimizer, trained, opt, b)

  args = (trained, frozen, opt_state, jax.tree.map(jax.numpy.asarray, batch))
  jitted = jax.jit(step, in_shardings=timing.shardings(args), donate_argnums=(0, 2))
  compiled, lower_s, compile_s = timing.compile_timed(jitted, args, options)
  # the trained weights and their optimizer state are donated and fed back, as the co-evolution step does with its
  # state (torch's AdamW updates in place too); copies, so that the run's own arrays outlive the timing
  holder = [jax.tree.map(jax.numpy.copy, (trained, opt_state))]

  def call():
    p, o, _ = jax.block_until_ready(compiled(holder[0][0], frozen, holder[0][1], args[3]))
    holder[0] = (p, o)

  call()
  return {"lower_s": lower_s, "compile_s": compile_s}, call


def compile_forward(graphdef, params, batch, chunk_size: int, options: dict | None = None):
  """The no-gradient log π of `batch` (the reference forward), jitted; (compile figures, blocking call)."""
  import jax

  loss = logprob_loss(graphdef, chunk_size)
  args = (params, jax.tree.map(jax.numpy.asarray, batch))
  fig, _, call = timing.compile_jitted(lambda p, b: loss(p, b)[0], args, timing.shardings(args), options)
  return fig, call


def merged_with_optimizer(graphdef, params, optimizer, mesh):
  """(graphdef, params, AdamW state over every weight) of a run's model with LoRA adapters merged into its weights
  (models.lora.merged): full fine-tuning of the same function, with a fresh optimizer state placed as training places
  one (coevolution.build.optimizer_state_shardings)."""
  import jax
  from flax import nnx

  from genenv_jax.coevolution.build import optimizer_state_shardings
  from genenv_jax.models import lora

  graphdef, params = nnx.split(lora.merged(nnx.merge(graphdef, params)))
  with jax.set_mesh(mesh):
    opt = jax.jit(optimizer.init, out_shardings=optimizer_state_shardings(optimizer, params, mesh))(params)
  return graphdef, params, opt


def ours(run, state, shapes: Shapes, repeats: int, options: dict | None = None) -> dict[str, Any]:
  """Our side: compiles and times the update (full, and with LoRA where the run has adapters), the reference forward
  and sampling at each batch; returns the raw times, compile figures, greedy tokens and this process's peak memory."""
  import jax
  from flax import nnx

  from genenv_jax.bench.sampler import ours_greedy
  from genenv_jax.models import lora

  co = run.coevolution
  graphdef, params = co.agent_graphdef, state.agent
  model = nnx.merge(graphdef, params)
  config = model.config
  shapes.check(config.max_position_embeddings)
  chunk, vocab = co.settings.agent.logprob_chunk, config.vocab_size
  batch = update_batch(shapes.update_rows, shapes.update_length, vocab)
  with_lora = lora.has_adapters(params)
  calls: dict[str, Callable[[], Any]] = {}
  compiled: dict[str, Any] = {}
  with jax.set_mesh(run.mesh):
    for b in shapes.sample_batches:
      p = prompts(b, shapes.sample_prompt, vocab)
      for n in (shapes.sample_new, 1):
        calls[f"sample_{b}_{n}"] = lambda p=p, n=n: ours_greedy(model, p["ids"], p["mask"], n, buckets=())
    compiled["reference_forward"], calls["reference_forward"] = compile_forward(graphdef, params, batch, chunk, options)
    full = (graphdef, params, state.agent_opt)  # without adapters, the run's own optimizer state covers every weight
    if with_lora:
      compiled["update_lora"], calls["update_lora"] = compile_update(
        *full[:2], co.agent_optimizer, full[2], batch, chunk, options
      )
      full = merged_with_optimizer(graphdef, params, co.agent_optimizer, run.mesh)
    compiled["update"], calls["update"] = compile_update(*full[:2], co.agent_optimizer, full[2], batch, chunk, options)
    times = timing.interleaved(calls, repeats)
    tokens = {}
    for b in shapes.sample_batches:
      p = prompts(b, shapes.sample_prompt, vocab)
      tokens[b] = ours_greedy(model, p["ids"], p["mask"], shapes.sample_new, buckets=())
  del calls, full
  return {
    "times": times,
    "compile": compiled,
    "tokens": tokens,
    "batch": batch,
    "vocab": vocab,
    "n_params": flop_params(config),
    "lora": with_lora,
    "peak_rss_bytes": timing.peak_rss_bytes(),
  }


def torch_jobs(shapes: Shapes, vocab: int, directory: str, batch: dict[str, np.ndarray]) -> list[dict[str, Any]]:
  """The torch side's jobs for bench.torch_side (generate first, while the weights are the checkpoint's), their
  arrays written to .npz files in `directory`."""
  jobs = []
  for b in shapes.sample_batches:
    path = f"{directory}/prompts_{b}.npz"
    np.savez(path, **prompts(b, shapes.sample_prompt, vocab))
    jobs.append({"name": f"sample_{b}", "kind": "generate", "batch": path, "new_tokens": shapes.sample_new})
  path = f"{directory}/update_batch.npz"
  np.savez(path, **batch)
  jobs.append({"name": "reference_forward", "kind": "forward", "batch": path})
  jobs.append({"name": "update", "kind": "update", "batch": path, "minibatches": 1})
  return jobs


def _rated(times: Sequence[float], tokens: float, flops: float, peak: float | None, seconds: float | None = None):
  """The figures of timed calls (timing.figures), rated at their median, or at `seconds` when given."""
  out = timing.figures(times)
  return {**out, **timing.rated(out["seconds"] if seconds is None else seconds, tokens, flops, peak)}


def sampling_figures(
  whole: Sequence[float], first: Sequence[float], batch: int, prompt: int, new: int, n: int, peak, forwards_in_first
):
  """Whole-call, prefill and decode figures of one side's sampling (module docstring)."""
  step_s = (statistics.median(whole) - statistics.median(first)) / (new - 1)
  prefill_s = statistics.median(first) - forwards_in_first * step_s
  return {
    "whole": _rated(whole, batch * new, 2.0 * n * batch * (prompt + new), peak),
    "prefill": {"seconds": prefill_s, **timing.rated(prefill_s, batch * prompt, 2.0 * n * batch * prompt, peak)},
    "decode": {"step_s": step_s, **timing.rated(step_s, batch, 2.0 * n * batch, peak)},
  }


def _ratio(a: float | None, b: float | None) -> float | None:
  return a / b if a and b else None


def figures(mine: dict[str, Any], theirs: dict[str, Any], shapes: Shapes, peaks: Sequence[dict]) -> dict[str, Any]:
  """Both sides' figures, side by side, from their raw times (`ours`, bench.torch_side) and the peak: the higher of
  `peaks` (bench.sgemm runs, e.g. one before and one after the rest: on a shared machine the load moves)."""
  from genenv_jax.bench.sampler import agreement

  peak = max(peaks, key=lambda p: p["gflop_s"])
  n, gflop_s, t, jobs = mine["n_params"], peak["gflop_s"], mine["times"], theirs["jobs"]
  d = shapes.update_rows * shapes.update_length
  out: dict[str, Any] = {
    "n_params": n,
    "shapes": {**shapes.__dict__, "sample_batches": list(shapes.sample_batches)},
    "peak": peak,
    "peak_runs_gflop_s": [p["gflop_s"] for p in peaks],
    "threads": theirs["threads"],
    "torch": theirs["torch"],
    "transformers": theirs["transformers"],
    "torch_params": theirs["params"],
    "lora": mine["lora"],
    "memory": {"ours_peak_rss_bytes": mine["peak_rss_bytes"], "torch_peak_rss_bytes": theirs["peak_rss_bytes"]},
    "compile": mine["compile"],
  }
  for name, flops in (("update", 6.0 * n * d), ("reference_forward", 2.0 * n * d)):
    row = {"tokens": d, "flops": flops, "ours": _rated(t[name], d, flops, gflop_s)}
    row["torch"] = _rated(jobs[name]["times"], d, flops, gflop_s)
    row["ratio"] = _ratio(row["ours"]["tok_s"], row["torch"]["tok_s"])
    if name == "update" and "update_lora" in t:
      row["ours_lora"] = _rated(t["update_lora"], d, flops, gflop_s)
      row["lora_speedup"] = _ratio(row["ours_lora"]["tok_s"], row["ours"]["tok_s"])
      row["ratio_lora"] = _ratio(row["ours_lora"]["tok_s"], row["torch"]["tok_s"])
    out[name] = row
  out["sampling"] = []
  for b in shapes.sample_batches:
    args = (b, shapes.sample_prompt, shapes.sample_new, n, gflop_s)
    job = jobs[f"sample_{b}"]
    row = {
      "batch": b,
      "ours": sampling_figures(t[f"sample_{b}_{shapes.sample_new}"], t[f"sample_{b}_1"], *args, forwards_in_first=1),
      "torch": sampling_figures(job["times"], job["first_times"], *args, forwards_in_first=0),
      "agreement": agreement(np.asarray(mine["tokens"][b]), np.asarray(job["tokens"])),
    }
    for part in ("whole", "prefill", "decode"):
      row[f"ratio_{part}"] = _ratio(row["ours"][part]["tok_s"], row["torch"][part]["tok_s"])
    out["sampling"].append(row)
  return out


def _cell(f: dict[str, Any] | None) -> str:
  if not f or f.get("tok_s") is None:
    return f"{'n/a' if f else '':>9} {'':>8} {'':>6}"
  return f"{f['tok_s']:>9.1f} {f['gflop_s']:>8.1f} {100 * (f['peak_share'] or 0):>5.1f}%"


def format_table(r: dict[str, Any]) -> str:
  """The side-by-side table: a line per figure, ours and torch's tok/s, GFLOP/s and share of the peak."""
  peak, s, m = r["peak"], r["shapes"], r["memory"]
  cols = f"{'tok/s':>9} {'GFLOP/s':>8} {'peak':>6}"
  head = f"{'':<34} {'ours':^25} | {'torch':^25} |\n{'':<34} {cols} | {cols} | {'ours/torch':>10}"
  blas = peak["openblas"]
  lines = [
    f"side by side: N = {r['n_params']:,} parameters in the FLOP counts (6ND an update, 2ND a forward); fp32 matmul "
    f"peak {peak['gflop_s']:.1f} GFLOP/s (numpy sgemm {peak['size']}^3, median of {peak['repeats']}, the higher of "
    f"{' and '.join(f'{g:.1f}' for g in r['peak_runs_gflop_s'])} measured before and after; OpenBLAS "
    f"{blas.get('core', '?')}, {blas.get('threads', '?')} threads); torch {r['torch']} with {r['threads']} threads",
    head,
    "-" * 100,
  ]

  def line(label, o, t, ratio):
    lines.append(f"{label:<34} {_cell(o)} | {_cell(t)} | " + (f"{ratio:>9.2f}x" if ratio else ""))

  u, f = r["update"], r["reference_forward"]
  shape = f"{s['update_rows']}x{s['update_length']}"
  line(f"update {shape}, full fine-tuning", u["ours"], u["torch"], u["ratio"])
  if "ours_lora" in u:
    line(f"update {shape}, LoRA (torch: full)", u["ours_lora"], None, u["ratio_lora"])
  line(f"reference forward {shape}", f["ours"], f["torch"], f["ratio"])
  for row in r["sampling"]:
    b = row["batch"]
    line(f"prefill {b}x{s['sample_prompt']}", row["ours"]["prefill"], row["torch"]["prefill"], row["ratio_prefill"])
    line(f"decode {b} rows", row["ours"]["decode"], row["torch"]["decode"], row["ratio_decode"])
    line(f"generate {b}x{s['sample_new']}, whole call", row["ours"]["whole"], row["torch"]["whole"], row["ratio_whole"])
  agree = ", ".join(f"batch {row['batch']} {row['agreement']['token_fraction']:.0%}" for row in r["sampling"])
  lines.append(f"greedy tokens equal, ours vs generate: {agree or 'no sampling'}.")
  lines.append(
    f"peak resident memory: ours {m['ours_peak_rss_bytes'] / 2**30:.2f} GiB (this process: both models, optimizer "
    f"states, compiled programs), torch {m['torch_peak_rss_bytes'] / 2**30:.2f} GiB (a process of its own)."
  )
  if "ours_lora" in u:
    lines.append(
      f"LoRA's share: the update with adapters {u['ours_lora']['seconds']:.3f} s, full {u['ours']['seconds']:.3f} s: "
      f"{u['lora_speedup']:.2f}x the tokens/s (its GFLOP/s counts 6ND as the full update's)."
    )
  return "\n".join(lines)
