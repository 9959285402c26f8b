"""XLA's memory figures of the co-evolution step at a real model's shape, compiled for one CPU device, never run.

  python -m genenv_jax.scripts.step_memory [--model=smollm2-135m] [--layers=N] [--remat=none|full|save_dots|...]
      [--minibatches=1] [--tasks=16] [--group=8] [--lengths=64,16,64,40] [--dump=DIR]

Prints one JSON line: the compiled step's arguments, outputs, temporaries and alias in GiB, and its peak as `plan`
counts it (arguments + outputs + temporaries + code - alias, planning.costs.Memory.peak). XLA:CPU puts every
temporary of a program in ONE preallocated buffer, so the temporaries are the single allocation a run asks for
(27.5 GB at the first real-model step, docs/EXPERIMENTS.md, "The real model's step memory"). `--dump=DIR` also writes
XLA's buffer assignment (`DIR/*jit_step*buffer-assignment.txt`, `*memory-usage-report.txt`: the largest values and the
HLO that owns each).

The models are random decoders of `--model`'s shape (planning.architectures.KNOWN_MODELS; both agent and env),
`--layers` of them when given: per-layer buffers scale with the layer count, the vocabulary's do not, so a shallow
compile separates the two. The config is configs/default.py's with the models, the task batch (`--tasks` = env prompts +
as many replayed tasks, G = `--group`), the four lengths (agent prompt, answer, env prompt, env output) and the agent's
mini-batches replaced; the sampler's vocabulary limit is the model's whole vocabulary, as with the model's own
tokenizer. LLVM's passes are off (cpu_pipeline.LLVM_OFF: the same buffer assignment, a shorter compile)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence

from absl import flags

from genenv_jax import cli
from genenv_jax.parallel import cpu_pipeline  # imports no jax

GIB = 2**30


def step_config(model: str, layers: int, remat: str, minibatches: int, tasks: int, group: int, lengths: Sequence[int]):
  """configs/default.py's config with both models `model`'s shape (KNOWN_MODELS) at `layers` layers and `remat`,
  tasks / 2 env prompts + tasks / 2 replayed tasks of G = `group` rollouts, the four domain lengths and the agent's
  GRPO mini-batches."""
  from configs import default
  from genenv_jax.planning.architectures import KNOWN_MODELS

  shape = KNOWN_MODELS[model]
  c = default.get_config("")
  for m in (c.agent.model, c.env.model):
    m.update(
      default.model_shape(
        shape["hidden_size"],
        layers or shape["num_layers"],
        shape["num_heads"],
        shape["num_kv_heads"],
        shape["intermediate_size"],
      )
    )
    m.head_dim = shape["head_dim"]
    m.vocab_size = shape["vocab_size"]
    m.tie_word_embeddings = shape["tie_word_embeddings"]
    if "rope_theta" in shape:
      m.rope_theta = shape["rope_theta"]
    m.remat = remat
  keys = ("agent_prompt_len", "agent_answer_len", "env_prompt_len", "env_output_len")
  c.domain.update(dict(zip(keys, lengths, strict=True)))
  c.env.num_seeds = tasks - tasks // 2
  c.pools.num_replay = tasks // 2
  c.agent.grpo.group_size = group
  c.agent.grpo.minibatches = minibatches
  return c


def whole_vocabulary(settings):
  """The settings with both samplers' vocabulary limit off (0): the model's own tokenizer covers its embedding, where
  the arithmetic tokenizer this config builds would mask all but its few hundred ids."""
  off = lambda section: dataclasses.replace(section, sampling=dataclasses.replace(section.sampling, vocab_limit=0))  # noqa: E731
  return dataclasses.replace(settings, agent=off(settings.agent), env=off(settings.env))


def compiled_memory(config) -> dict:
  """Builds the abstract state (coevolution.build, abstract=True), lowers and compiles `jit_step`, and returns XLA's
  memory figures in GiB with the lower and compile times."""
  import jax

  from genenv_jax.coevolution.build import build

  t0 = time.time()
  run, state = build(config, abstract=True, devices=jax.devices()[:1])
  run.coevolution.settings = whole_vocabulary(run.coevolution.settings)
  step = run.coevolution.jit_step(run.state_shardings)
  with jax.set_mesh(run.mesh):
    lowered = step.lower(state)
    t1 = time.time()
    compiled = lowered.compile()
  t2 = time.time()
  m = compiled.memory_analysis()
  parts = dict(
    arguments=m.argument_size_in_bytes,
    outputs=m.output_size_in_bytes,
    temporaries=m.temp_size_in_bytes,
    generated_code=m.generated_code_size_in_bytes,
    alias=m.alias_size_in_bytes,
  )
  peak = parts["arguments"] + parts["outputs"] + parts["temporaries"] + parts["generated_code"] - parts["alias"]
  return {
    **{f"{k}_gib": v / GIB for k, v in parts.items()},
    "peak_gib": peak / GIB,
    "lower_s": t1 - t0,
    "compile_s": t2 - t1,
  }


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_string("model", "smollm2-135m", "a planning.architectures.KNOWN_MODELS name", flag_values=fv),
    flags.DEFINE_integer("layers", 0, "layers of both models (0: the model's own)", lower_bound=0, flag_values=fv),
    flags.DEFINE_string("remat", "none", "both models' remat policy (models.config.REMAT_POLICIES)", flag_values=fv),
    flags.DEFINE_integer("minibatches", 1, "the agent's GRPO mini-batches", lower_bound=1, flag_values=fv),
    flags.DEFINE_integer("tasks", 16, "tasks per step: half env prompts, half replayed", lower_bound=2, flag_values=fv),
    flags.DEFINE_integer("group", 8, "G, the agent's rollouts per task", lower_bound=1, flag_values=fv),
    flags.DEFINE_string("lengths", "64,16,64,40", "agent prompt, answer, env prompt, env output", flag_values=fv),
    flags.DEFINE_string("dump", "", "a directory for XLA's dumps (buffer assignment)", flag_values=fv),
  )


def main(argv: Sequence[str]) -> int:
  """Prints one JSON line. Through cli.run (or cli.call): a bad flag is one `error:` line, exit 2."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  if "jax" in sys.modules:
    raise RuntimeError("step_memory must run in a process of its own: XLA_FLAGS are read when JAX starts")
  xla = cpu_pipeline.as_xla_flags(cpu_pipeline.LLVM_OFF)
  os.environ["XLA_FLAGS"] = f"{xla} --xla_dump_to={args.dump} --xla_dump_hlo_as_text" if args.dump else xla
  os.environ["JAX_PLATFORMS"] = "cpu"
  lengths = cli.integers("lengths", args.lengths.split(","))
  config = step_config(args.model, args.layers, args.remat, args.minibatches, args.tasks, args.group, lengths)
  out = {k: v for k, v in vars(args).items() if k != "dump"}
  print(json.dumps({**out, **compiled_memory(config)}))
  return 0


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.scripts.step_memory")
