"""Compile time of a training gradient against model depth: with the layers under one lax.scan it should barely grow.

  python -m genenv_jax.bench.compile_depth [--layers=4,28] [--tokens=128] [--remat=full]

Qwen2.5-7B's shapes (hidden 3584, MLP 18944, 28 query / 4 KV heads of 128, vocab 152064), bfloat16, shape-only
parameters (nothing is allocated): lowers and compiles value_and_grad of the mean log-likelihood of one row on the
CPU, and prints the seconds per depth.
"""

from __future__ import annotations

import time
from typing import Sequence

import jax
import jax.numpy as jnp
from absl import flags
from flax import nnx

from genenv_jax import cli
from genenv_jax.models.config import REMAT_POLICIES, ModelConfig
from genenv_jax.models.hf import abstract_model
from genenv_jax.planning import architectures

# Qwen2.5-7B as planning.architectures knows it (its config.json), in bfloat16.
QWEN2_5_7B = {
  **architectures._QWEN,
  **architectures.KNOWN_MODELS["qwen2.5-7b"],
  "param_dtype": "bfloat16",
  "dtype": "bfloat16",
}


def compile_seconds(num_layers: int, tokens: int, remat: str, shape: dict | None = None) -> tuple[float, float]:
  """(lower seconds, compile seconds) of the gradient step of a `num_layers`-deep model of `shape`."""
  config = ModelConfig(**{**(shape or QWEN2_5_7B), "num_layers": num_layers}, remat=remat, attention="blockwise")
  graphdef, params = abstract_model(config)
  ids = jax.ShapeDtypeStruct((1, tokens), jnp.int32)
  mask = jax.ShapeDtypeStruct((1, tokens), jnp.bool_)

  def loss(p, ids, mask):
    logits, _ = nnx.merge(graphdef, p)(ids, mask)
    return jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), ids[..., None], axis=-1))

  start = time.perf_counter()
  lowered = jax.jit(jax.value_and_grad(loss)).lower(params, ids, mask)
  lowered_at = time.perf_counter()
  lowered.compile()
  return lowered_at - start, time.perf_counter() - lowered_at


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_list("layers", ["4", "28"], "Model depths to compile.", flag_values=fv),
    flags.DEFINE_integer("tokens", 128, "Tokens of the one row the gradient is taken over.", flag_values=fv),
    flags.DEFINE_enum("remat", "full", list(REMAT_POLICIES), "Remat policy of the model.", flag_values=fv),
  )


def main(argv: Sequence[str]) -> None:
  """Prints the lower and compile seconds of each depth."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  for n in cli.integers("layers", args.layers):
    lower, comp = compile_seconds(n, args.tokens, args.remat)
    print(f"{n:3d} layers: lower {lower:6.1f} s, compile {comp:6.1f} s", flush=True)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.bench.compile_depth")
