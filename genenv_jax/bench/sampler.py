"""Decode throughput of `genenv_jax.generate` against transformers' `generate` (PyTorch, CPU) on tiny random models.

Both frameworks run the same random Llama checkpoint (built with torch, saved with `save_pretrained`, loaded here by
`gj.load_hf`) on the same prompts: greedy, KV cache, no EOS, exactly `--new_tokens` new tokens per row. A timed call
is one whole `generate` (prefill of `--prompt_len` tokens plus the decode); tokens/s = batch * new tokens / seconds.
Each side gets one warm-up call first (for JAX it compiles; its wall time minus the best timed call is reported as
compile time), then `--repeats` timed calls, of which the best and the median are kept. The ratio is ours over
transformers, from the best calls. A decode-only rate is also reported: the best whole call minus the best call that
generates one token (prefill plus one step), over batch * (new tokens - 1). Greedy tokens of the two are compared
position by position (float differences can make long greedy runs diverge; the fraction agreeing is reported).

On a small shared CPU, torch's intra-op threads can be far slower than one thread when other processes hold cores;
--torch_threads 1 gives the single-thread baseline.

Usage:  python -m genenv_jax.bench.sampler [--configs=1m,8m] [--batch_sizes=8,64] [--new_tokens=64]
                                          [--prompt_len=32] [--repeats=3] [--torch_threads=N] [--tiny]
Prints a table, then one line `JSON: {...}` with every figure.

Long-budget mode (`--long`, ours only, random weights): one greedy `generate` per budget in `--long_budgets`
(default 1,024, 4,096 and 8,192 new tokens) and per KV cache kind in `--kv_caches` (auto = the compute dtype, int8),
no EOS. It prints decode tok/s at each budget and the per-step time as the cache fills: between two budgets N1 < N2,
(t(N2) - t(N1)) / (N2 - N1), the cost of the steps from slot N1 to N2, so a step's cost growing with the filled
length shows as a rising column.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import tempfile
import time
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np
from absl import flags

from genenv_jax import cli


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """A Llama shape (untied embeddings, float32)."""

  hidden_size: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  intermediate_size: int
  vocab_size: int


MODEL_SPECS = {
  "1m": ModelSpec(hidden_size=128, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=512, vocab_size=2048),
  "8m": ModelSpec(hidden_size=256, num_layers=4, num_heads=8, num_kv_heads=8, intermediate_size=1024, vocab_size=8192),
  "tiny": ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64, vocab_size=128),
}
TINY = dict(configs=("tiny",), batch_sizes=(2,), new_tokens=4, prompt_len=8, repeats=1)


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_list("configs", ["1m", "8m"], f"Model configs, from {sorted(MODEL_SPECS)}.", flag_values=fv),
    flags.DEFINE_list("batch_sizes", ["8", "64"], "Batch sizes.", flag_values=fv),
    flags.DEFINE_integer("new_tokens", 64, "Tokens generated per row.", flag_values=fv),
    flags.DEFINE_integer("prompt_len", 32, "Prompt tokens per row (no padding).", flag_values=fv),
    flags.DEFINE_integer("repeats", 3, "Timed calls per measurement, after one warm-up.", flag_values=fv),
    flags.DEFINE_integer("seed", 0, "Seed of the random weights and prompts.", flag_values=fv),
    flags.DEFINE_integer("torch_threads", 0, "torch.set_num_threads (0: the CPU core count).", flag_values=fv),
    flags.DEFINE_boolean(
      "tiny", False, "Tiny model, batch 2, 4 new tokens, 1 repeat (the smoke test).", flag_values=fv
    ),
    flags.DEFINE_boolean(
      "long", False, "Long-budget decode mode (ours only): see the module docstring.", flag_values=fv
    ),
    flags.DEFINE_list("long_budgets", ["1024", "4096", "8192"], "--long: new-token budgets.", flag_values=fv),
    flags.DEFINE_list("kv_caches", ["auto", "int8"], "--long: KV cache kinds (auto, int8).", flag_values=fv),
  )


def _args() -> SimpleNamespace:
  """The flags' values, checked (ValueError naming the flag); --tiny replaces the sizes with tiny ones."""
  args = cli.namespace(_FLAGS)
  args.long_budgets = tuple(sorted(cli.integers("long_budgets", args.long_budgets)))
  args.kv_caches = tuple(k.strip() for k in args.kv_caches if k.strip())
  if args.long and args.tiny:
    args.long_budgets = (8, 16)
  args.configs = tuple(c.strip() for c in args.configs if c.strip())
  args.batch_sizes = cli.integers("batch_sizes", args.batch_sizes)
  if args.tiny:
    for name, value in TINY.items():
      setattr(args, name, value)
  unknown = [c for c in args.configs if c not in MODEL_SPECS]
  if unknown:
    raise ValueError(f"unknown --configs {unknown}; choose from {sorted(MODEL_SPECS)}")
  if args.new_tokens <= 0 or args.prompt_len <= 0 or args.repeats <= 0 or not args.batch_sizes:
    raise ValueError("--new_tokens, --prompt_len, --repeats and --batch_sizes must be positive")
  if not args.long_budgets or min(args.long_budgets) <= 0:
    raise ValueError("--long_budgets must be positive integers")
  from genenv_jax.models.transformer import KV_CACHE_KINDS

  if not args.kv_caches or set(args.kv_caches) - set(KV_CACHE_KINDS):
    raise ValueError(f"--kv_caches must name kinds from {', '.join(KV_CACHE_KINDS)}, got {args.kv_caches}")
  return args


def build_torch_model(spec: ModelSpec, max_positions: int, seed: int) -> Any:
  """A random-weight transformers LlamaForCausalLM (its own initializer, seeded), in eval mode."""
  import torch
  import transformers

  config = transformers.LlamaConfig(
    vocab_size=spec.vocab_size,
    hidden_size=spec.hidden_size,
    intermediate_size=spec.intermediate_size,
    num_hidden_layers=spec.num_layers,
    num_attention_heads=spec.num_heads,
    num_key_value_heads=spec.num_kv_heads,
    max_position_embeddings=max_positions,
    tie_word_embeddings=False,
    rms_norm_eps=1e-6,
    bos_token_id=1,
    eos_token_id=None,
    pad_token_id=0,
    dtype="float32",
  )
  torch.manual_seed(seed)
  return transformers.LlamaForCausalLM(config).eval()


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float], Any]:
  """(warm-up seconds, timed seconds per repeat, last result); fn must block until its result is ready."""
  start = time.perf_counter()
  result = fn()
  warmup = time.perf_counter() - start
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    result = fn()
    times.append(time.perf_counter() - start)
  return warmup, times, result


def rates(prefix: str, tokens: int, ours_s: Sequence[float], hf_s: Sequence[float]) -> dict[str, float | None]:
  """tokens/s of each side (best and median call) and their ratios; None where a time is not positive."""

  def rate(seconds: float) -> float | None:
    return tokens / seconds if seconds > 0 else None

  def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None else None

  out = {
    f"{prefix}ours_tok_s": rate(min(ours_s)),
    f"{prefix}ours_tok_s_median": rate(statistics.median(ours_s)),
    f"{prefix}hf_tok_s": rate(min(hf_s)),
    f"{prefix}hf_tok_s_median": rate(statistics.median(hf_s)),
  }
  out[f"{prefix}ratio"] = ratio(out[f"{prefix}ours_tok_s"], out[f"{prefix}hf_tok_s"])
  out[f"{prefix}ratio_median"] = ratio(out[f"{prefix}ours_tok_s_median"], out[f"{prefix}hf_tok_s_median"])
  return out


def ours_greedy(model, ids: np.ndarray, mask: np.ndarray | None, steps: int, **options) -> np.ndarray:
  """`steps` greedy tokens per row from `genenv_jax.generate` (no EOS: exactly `steps`), blocking; `options` go to
  generate (buckets, kv_cache)."""
  import jax

  import genenv_jax as gj

  out = gj.generate(
    model, ids, mask, max_new_tokens=steps, temperature=0.0, eos_ids=(), key=jax.random.key(0), **options
  )
  return np.asarray(jax.block_until_ready(out).tokens)


def hf_greedy(hf_model, ids: np.ndarray, mask: np.ndarray, steps: int) -> np.ndarray:
  """`steps` greedy tokens per row from transformers' `generate` (KV cache, no EOS: exactly `steps`)."""
  import torch

  with torch.inference_mode():
    out = hf_model.generate(
      input_ids=torch.as_tensor(ids, dtype=torch.long),
      attention_mask=torch.as_tensor(mask, dtype=torch.long),
      max_new_tokens=steps,
      min_new_tokens=steps,
      do_sample=False,
      use_cache=True,
      eos_token_id=None,
      pad_token_id=0,
    )
  return out[:, ids.shape[1] :].numpy()


def agreement(ours: np.ndarray, theirs: np.ndarray) -> dict[str, float]:
  """Fraction of equal token positions, of fully equal rows, and mean common-prefix length over N."""
  equal = ours == theirs
  prefix = np.where(equal.all(1), equal.shape[1], np.argmin(equal, axis=1))
  return {
    "token_fraction": float(equal.mean()),
    "row_fraction": float(equal.all(1).mean()),
    "prefix_fraction": float(prefix.mean() / equal.shape[1]),
  }


def bench_one(name: str, spec: ModelSpec, args: SimpleNamespace) -> list[dict[str, Any]]:
  """Every batch size for one model config; the checkpoint lives in a temp dir for the duration."""

  import genenv_jax as gj

  rows = []
  with tempfile.TemporaryDirectory(prefix=f"bench_sampler_{name}_") as tmp:
    hf_model = build_torch_model(spec, max_positions=max(256, 2 * (args.prompt_len + args.new_tokens)), seed=args.seed)
    n_params = sum(p.numel() for p in hf_model.parameters())
    hf_model.save_pretrained(tmp)
    model = gj.load_hf(tmp)
    rng = np.random.RandomState(args.seed)
    for batch in args.batch_sizes:
      ids = rng.randint(3, spec.vocab_size, size=(batch, args.prompt_len)).astype(np.int32)
      mask = np.ones_like(ids)
      n = args.new_tokens

      def ours(steps: int) -> np.ndarray:
        return ours_greedy(model, ids, mask, steps)

      def theirs(steps: int) -> np.ndarray:
        return hf_greedy(hf_model, ids, mask, steps)

      ours_warm, ours_times, ours_tokens = timed(lambda: ours(n), args.repeats)
      hf_warm, hf_times, hf_tokens = timed(lambda: theirs(n), args.repeats)
      row = {
        "config": name,
        "params": int(n_params),
        "batch": batch,
        "prompt_len": args.prompt_len,
        "new_tokens": n,
        "ours_s": ours_times,
        "hf_s": hf_times,
        "ours_warmup_s": ours_warm,
        "hf_warmup_s": hf_warm,
        "ours_compile_s": max(ours_warm - min(ours_times), 0.0),
      }
      row.update(rates("", batch * n, ours_times, hf_times))
      if n > 1:  # decode only: minus a prefill-plus-one-token call, (N - 1) tokens per row
        _, ours_first, _ = timed(lambda: ours(1), args.repeats)
        _, hf_first, _ = timed(lambda: theirs(1), args.repeats)
        row.update(ours_first_token_s=min(ours_first), hf_first_token_s=min(hf_first))
        row.update(
          rates(
            "decode_", batch * (n - 1), [t - min(ours_first) for t in ours_times], [t - min(hf_first) for t in hf_times]
          )
        )
      row["agreement"] = agreement(ours_tokens, hf_tokens)
      rows.append(row)
  return rows


def _num(value: float | None, spec: str, suffix: str = "") -> str:
  return "n/a" if value is None else format(value, spec) + suffix


def format_table(rows: list[dict[str, Any]]) -> str:
  """One line per (config, batch): whole-generate and decode-only tokens/s, ratios, compile time, agreement."""
  header = (
    f"{'config':<6} {'params':>10} {'batch':>5} | {'ours tok/s':>10} {'hf tok/s':>9} {'ratio':>7} "
    f"{'(median)':>8} | {'decode: ours':>12} {'hf':>7} {'ratio':>7} | {'compile s':>9} | tokens agree"
  )
  lines = [header, "-" * len(header)]
  for r in rows:
    a = r["agreement"]
    agree = (
      "yes"
      if a["token_fraction"] == 1.0
      else (
        f"no ({a['token_fraction']:.1%} of tokens, {a['row_fraction']:.0%} of rows, prefix {a['prefix_fraction']:.0%})"
      )
    )
    lines.append(
      f"{r['config']:<6} {r['params']:>10,} {r['batch']:>5} | {_num(r['ours_tok_s'], '.0f'):>10} "
      f"{_num(r['hf_tok_s'], '.0f'):>9} {_num(r['ratio'], '.2f', 'x'):>7} {_num(r['ratio_median'], '.2f', 'x'):>8} | "
      f"{_num(r.get('decode_ours_tok_s'), '.0f'):>12} {_num(r.get('decode_hf_tok_s'), '.0f'):>7} "
      f"{_num(r.get('decode_ratio'), '.2f', 'x'):>7} | {r['ours_compile_s']:>9.2f} | {agree}"
    )
  return "\n".join(lines)


def long_budget(name: str, spec: ModelSpec, args: SimpleNamespace) -> list[dict[str, Any]]:
  """Decode at each budget of args.long_budgets with each KV cache kind: one row per (batch, kind)."""
  from flax import nnx

  import genenv_jax as gj
  from genenv_jax.models.config import ModelConfig

  cache_slots = args.prompt_len + max(args.long_budgets)
  config = ModelConfig(
    vocab_size=spec.vocab_size,
    hidden_size=spec.hidden_size,
    intermediate_size=spec.intermediate_size,
    num_layers=spec.num_layers,
    num_heads=spec.num_heads,
    num_kv_heads=spec.num_kv_heads,
    head_dim=spec.hidden_size // spec.num_heads,
    max_position_embeddings=cache_slots,
  )
  model = gj.Transformer(config, rngs=nnx.Rngs(args.seed))
  rows, rng = [], np.random.RandomState(args.seed)
  for batch in args.batch_sizes:
    ids = rng.randint(3, spec.vocab_size, size=(batch, args.prompt_len)).astype(np.int32)
    tokens = {}
    for kind in args.kv_caches:

      def run(steps: int) -> np.ndarray:
        return ours_greedy(model, ids, None, steps, kv_cache=kind, buckets=())

      seconds, previous = {}, (0, 0.0)
      step_ms = {}
      for n in args.long_budgets:
        _, times, tokens[kind] = timed(lambda: run(n), args.repeats)  # called at once, inside the loop
        seconds[n] = min(times)
        step_ms[f"{previous[0]}-{n}"] = 1e3 * (seconds[n] - previous[1]) / (n - previous[0])
        previous = (n, seconds[n])
      rows.append(
        {
          "config": name,
          "batch": batch,
          "kv_cache": kind,
          "prompt_len": args.prompt_len,
          "seconds": seconds,
          "tok_s": {n: batch * n / t for n, t in seconds.items()},
          "step_ms": step_ms,
        }
      )
    if len(tokens) > 1:  # greedy tokens of each kind against the first kind's (float noise can fork long runs)
      first = tokens[args.kv_caches[0]]
      for row in rows[-len(tokens) :]:
        row["agreement_with_" + args.kv_caches[0]] = agreement(tokens[row["kv_cache"]], first)
  return rows


def format_long(rows: list[dict[str, Any]]) -> str:
  """One line per (config, batch, cache kind): tok/s at each budget, then the per-step ms of each interval."""
  lines = []
  for r in rows:
    rates_ = " ".join(f"{n}: {rate:,.0f}" for n, rate in r["tok_s"].items())
    steps = " ".join(f"{span}: {ms:.2f}" for span, ms in r["step_ms"].items())
    agree = next((f" | tokens agree {v['token_fraction']:.1%}" for k, v in r.items() if k.startswith("agreement")), "")
    lines.append(f"{r['config']:<5} batch {r['batch']:>3} {r['kv_cache']:>5} | tok/s {rates_} | step ms {steps}{agree}")
  return "\n".join(lines)


def main_long(args: SimpleNamespace) -> None:
  """--long: runs `long_budget` for every config; prints its lines and a `JSON: ...` line."""
  import jax

  rows = [row for name in args.configs for row in long_budget(name, MODEL_SPECS[name], args)]
  print(
    f"genenv_jax.generate, long budgets {args.long_budgets} new tokens after a {args.prompt_len}-token prompt, greedy, "
    f"random float32 weights, best of {args.repeats}; jax {jax.__version__} on {jax.devices()[0].platform}, "
    f"{os.cpu_count()} CPU cores. tok/s = batch x budget / seconds of the whole call; step ms over slots N1-N2 = "
    "(t(N2) - t(N1)) / (N2 - N1)"
  )
  print(format_long(rows))
  result = {"mode": "long", "prompt_len": args.prompt_len, "repeats": args.repeats, "rows": rows}
  print("JSON: " + json.dumps(result))


def main(argv: Sequence[str]) -> None:
  """Runs the benchmark; prints the table and a final `JSON: ...` line with every figure."""
  cli.no_arguments(argv)
  args = _args()
  if args.long:
    main_long(args)
    return
  import jax
  import torch
  import transformers

  transformers.utils.logging.disable_progress_bar()
  threads = args.torch_threads or os.cpu_count() or 1
  torch.set_num_threads(threads)
  rows = []
  for name in args.configs:
    rows.extend(bench_one(name, MODEL_SPECS[name], args))
  print(
    f"genenv_jax.generate vs transformers.generate (greedy, KV cache, float32), prompt {args.prompt_len}, "
    f"{args.new_tokens} new tokens, best of {args.repeats} calls; jax {jax.__version__} on "
    f"{jax.devices()[0].platform}, torch {torch.__version__} with {threads} threads, {os.cpu_count()} CPU cores"
  )
  print(
    "tok/s = batch x new tokens / seconds of a whole generate call (prefill included); decode = the same minus a "
    "prefill-plus-one-token call, over (new tokens - 1); ratio = ours / transformers"
  )
  print(format_table(rows))
  fractions = [r["agreement"]["token_fraction"] for r in rows]
  print(
    "tokens agree: "
    + ("yes" if min(fractions) == 1.0 else f"no (lowest fraction of equal tokens {min(fractions):.1%})")
  )
  result = {
    "prompt_len": args.prompt_len,
    "new_tokens": args.new_tokens,
    "repeats": args.repeats,
    "torch_threads": threads,
    "jax_platform": jax.devices()[0].platform,
    "rows": rows,
  }
  print("JSON: " + json.dumps(result))


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.bench.sampler")
