"""Naive vs blockwise attention on this backend: forward+backward time and compiled temporary memory, plus decode.

Training shape: q [B, T, N, D], k, v [B, K, T, D] in float32, a left-padded key mask (the first T/8 slots padding) and
causality; the loss is Σ out·r over all rows, differentiated with respect to q, k and v. For each T, both
implementations are lowered and compiled from abstract shapes; "temp" is the compiled program's
memory_analysis().temp_size_in_bytes (the peak of its temporaries; arguments and outputs excluded). Time is the
median of --repeats calls after one warm-up (block_until_ready). Naive materialises float32 scores [B, N, T, T], so its
temp grows as T²; blockwise keeps one [B, N, block, block] tile and O(T) accumulators, so its temp grows as T.

Decode: one query token (--decode_batch_size rows) at the last filled slot of a static cache of --cache slots, with
kv_length = the filled length, at --filled slots filled and at the whole cache filled; blockwise vs naive. Blockwise
reads ceil(filled / block) key blocks, so its step time follows the filled length; naive reads the whole cache.

Usage:  python -m genenv_jax.bench.attention [--lengths=1024,4096,9216] [--heads=4] [--kv_heads=2] [--head_dim=64]
                                             [--batch_size=1] [--block=512] [--repeats=3] [--cache=9216] [--filled=1152]
                                             [--decode_batch_size=8] [--naive_run_max=9216]
Prints a table, then one line `JSON: {...}` with every figure.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from genenv_jax import cli
from genenv_jax.models.attention import naive_attention
from genenv_jax.models.attention_blockwise import blockwise_attention

MiB = 2.0**20


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_list("lengths", ["1024", "4096", "9216"], "Training: sequence lengths T.", flag_values=fv),
    flags.DEFINE_integer("heads", 4, "Query heads N.", flag_values=fv),
    flags.DEFINE_integer("kv_heads", 2, "Key/value heads K (GQA when < N).", flag_values=fv),
    flags.DEFINE_integer("head_dim", 64, "Head dimension D.", flag_values=fv),
    flags.DEFINE_integer("batch_size", 1, "Training: batch rows B.", flag_values=fv),
    flags.DEFINE_integer("block", 512, "Blockwise query and key tile size.", flag_values=fv),
    flags.DEFINE_integer("repeats", 3, "Timed calls per figure, after one warm-up call.", flag_values=fv),
    flags.DEFINE_integer("cache", 9216, "Decode: static cache slots.", flag_values=fv),
    flags.DEFINE_integer("filled", 1152, "Decode: slots filled so far (kv_length).", flag_values=fv),
    flags.DEFINE_integer("decode_batch_size", 8, "Decode: rows.", flag_values=fv),
    flags.DEFINE_integer(
      "naive_run_max",
      9216,
      "Run (time) naive only up to this T; above it, only its compiled memory is reported.",
      flag_values=fv,
    ),
  )


def _args() -> SimpleNamespace:
  """The flags' values, checked (ValueError naming the flags)."""
  args = cli.namespace(_FLAGS)
  args.lengths = list(cli.integers("lengths", args.lengths))
  if not args.lengths or min(args.lengths) <= 0 or args.heads % args.kv_heads or not 0 < args.filled <= args.cache:
    raise ValueError("need positive --lengths, --heads a multiple of --kv_heads, and 0 < --filled <= --cache")
  return args


def _median_seconds(fn: Callable, args: tuple, repeats: int) -> float:
  jax.block_until_ready(fn(*args))
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def _inputs(batch: int, t: int, s: int, heads: int, kv_heads: int, head_dim: int, seed: int = 0):
  rng = np.random.RandomState(seed)
  q = jnp.asarray(rng.randn(batch, t, heads, head_dim), jnp.float32)
  k, v = (jnp.asarray(rng.randn(batch, kv_heads, s, head_dim), jnp.float32) for _ in range(2))
  return q, k, v


def training_figures(args: SimpleNamespace, t: int) -> dict:
  """fwd+bwd time and fwd / fwd+bwd temp of naive and blockwise at length t."""
  q, k, v = _inputs(args.batch_size, t, t, args.heads, args.kv_heads, args.head_dim)
  mask = jnp.ones((args.batch_size, t), bool).at[:, : t // 8].set(False)
  r = jnp.asarray(np.random.RandomState(1).randn(*q.shape), jnp.float32)
  impls = {
    "naive": lambda q, k, v: naive_attention(q, k, v, mask, 0),
    "blockwise": lambda q, k, v: blockwise_attention(q, k, v, mask, 0, block_q=args.block, block_k=args.block),
  }
  out = {}
  for name, f in impls.items():
    fwd = jax.jit(f)
    grad = jax.jit(jax.grad(lambda q, k, v, f=f: jnp.sum(f(q, k, v) * r), argnums=(0, 1, 2)))
    shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (q, k, v)]
    start = time.perf_counter()
    compiled = grad.lower(*shapes).compile()
    row = {
      "compile_s": time.perf_counter() - start,
      "fwd_temp_mib": fwd.lower(*shapes).compile().memory_analysis().temp_size_in_bytes / MiB,
      "fwd_bwd_temp_mib": compiled.memory_analysis().temp_size_in_bytes / MiB,
    }
    if name == "blockwise" or t <= args.naive_run_max:
      row["fwd_bwd_s"] = _median_seconds(compiled, (q, k, v), args.repeats)
    out[name] = row
  return out


def decode_figures(args: SimpleNamespace) -> dict:
  """One-token step time (ms) over a static --cache slot cache, filled to --filled slots and filled to the end.

  The query sits at the last filled slot and kv_length is the filled length: blockwise reads the filled blocks only,
  naive reads the whole cache either way.
  """
  q, k, v = _inputs(args.decode_batch_size, 1, args.cache, args.heads, args.kv_heads, args.head_dim, seed=2)
  out = {}
  for filled in (args.filled, args.cache):
    mask = jnp.zeros((args.decode_batch_size, args.cache), bool).at[:, :filled].set(True)
    steps = {
      "blockwise": jax.jit(
        lambda q, k, v, o, mask=mask: blockwise_attention(q, k, v, mask, o, o + 1, block_q=1, block_k=args.block)
      ),
      "naive": jax.jit(lambda q, k, v, o, mask=mask: naive_attention(q, k, v, mask, o)),
    }
    for name, step in steps.items():
      out[f"{name}_filled_{filled}"] = _median_seconds(step, (q, k, v, jnp.int32(filled - 1)), 10 * args.repeats) * 1e3
  return out


def main(argv: Sequence[str]) -> None:
  """Runs the benchmark; prints the table and a final `JSON: ...` line with every figure."""
  cli.no_arguments(argv)
  args = _args()
  print(
    f"backend {jax.default_backend()}, B={args.batch_size} N={args.heads} K={args.kv_heads} D={args.head_dim} "
    f"block {args.block}, float32, causal + left padding, fwd+bwd = grad of Σ out·r wrt q, k, v"
  )
  print(f"{'T':>6} {'impl':>10} {'fwd temp MiB':>13} {'fwd+bwd temp MiB':>17} {'fwd+bwd s':>10} {'compile s':>10}")
  training = {}
  for t in args.lengths:
    training[t] = training_figures(args, t)
    for name, row in training[t].items():
      run = f"{row['fwd_bwd_s']:10.3f}" if "fwd_bwd_s" in row else f"{'(skipped)':>10}"
      print(
        f"{t:>6} {name:>10} {row['fwd_temp_mib']:13.1f} {row['fwd_bwd_temp_mib']:17.1f} {run} {row['compile_s']:10.2f}"
      )
  lo, hi = min(args.lengths), max(args.lengths)
  growth = {
    name: training[hi][name]["fwd_bwd_temp_mib"] / training[lo][name]["fwd_bwd_temp_mib"]
    for name in ("naive", "blockwise")
  }
  print(
    f"fwd+bwd temp growth T={lo}->{hi} (x{hi / lo:.1f} in T, x{(hi / lo) ** 2:.1f} in T²): "
    + ", ".join(f"{name} x{g:.1f}" for name, g in growth.items())
  )
  decode = decode_figures(args)
  print(
    f"decode step, B={args.decode_batch_size}, 1 query over a {args.cache}-slot cache (ms): "
    + ", ".join(f"{name} {ms:.3f}" for name, ms in decode.items())
  )
  result = {
    "config": {k: v for k, v in vars(args).items()},
    "training": {str(t): v for t, v in training.items()},
    "temp_growth": growth,
    "decode_ms": decode,
  }
  print("JSON: " + json.dumps(result))


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.bench.attention")
