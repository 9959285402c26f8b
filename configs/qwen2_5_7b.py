"""Qwen2.5-7B-Instruct agent and env, full fine-tuning, at the paper's settings (not run here: no such hardware).

Usage: python -m genenv_jax.main --config=configs/qwen2_5_7b.py --workdir=gs://BUCKET/run \
         --config.agent.model.hf_path=/path/Qwen2.5-7B-Instruct --config.env.model.hf_path=/path/Qwen2.5-7B-Instruct \
         --config.tokenizer=/path/Qwen2.5-7B-Instruct

Everything is complete apart from the three paths. Values (GenEnv, arXiv 2512.19682, and its official veRL code):
  batch 64 tasks per step, G = 8 rollouts, clip 0.2, k3 KL 0.001, token-mean loss, agent lr 1e-6 (AdamW),
  env lr 5e-7, α = 0.5, k_min = 0.1, λ = 1. β = 10 (unstated in the paper; see rl/curriculum.py).
  Parameters and compute in bfloat16 with remat; the mesh is fully-sharded data parallel over every chip
  (fsdp = -1), which `python -m genenv_jax.plan` sizes per slice.

Variants (`configs/qwen2_5_7b.py:VARIANT`, VARIANT = SLICE, DOMAIN or DOMAIN,SLICE):
  SLICE (see SLICES): `v5p-64`, `v5p-128`, `v6e-64` (Qwen2.5-7B agent and env) and the single-host `v5p-8`, `v6e-8`
    (Qwen2.5-1.5B agent and env: set both hf_path fields to a Qwen2.5-1.5B-Instruct directory) set the slice
    (`config.slice`, which `genenv_jax.plan` reads), its mesh, the agent's GRPO mini-batches, 32 fresh + 32 replayed
    tasks x G = 8 per step, and the paper's hard case of lengths (PAPER_LENGTHS): the agent at 8,000 prompt + 1,000
    response tokens, the env at 4,096 prompt + 4,096 output tokens, which the arithmetic domain pads to.
  DOMAIN: one of the benchmark training domains of configs/tools.py (api_bank, bfcl, bamboogle, travelplanner,
    alfworld) at the same lengths, except the env's output: TEXT_ENV_OUTPUT = 3,584 tokens, so that the 4,096-token env
    prompt holds the env instruction (up to 512 tokens) plus a seed task.
Plan one with `python -m genenv_jax.plan --config=configs/qwen2_5_7b.py:v5p-64` (README, "Planning").
"""

import dataclasses

import ml_collections

from configs import default, tools
from genenv_jax.coevolution.settings import AgentSettings, EnvSettings, to_config

# The hard case that covers the paper (issue 10): task prompts average about 5.7k tokens and agent responses 137-204
# (paper Fig. 5); the official code allows the agent 4,096 + 512 tokens and the env an 8,192-token context. The
# arithmetic domain pads its prompts and answer budgets to these (its length fields only need to be >= what its
# longest task takes), so the compiled step has these shapes.
PAPER_LENGTHS = dict(agent_prompt_len=8000, agent_answer_len=1000, env_prompt_len=4096, env_output_len=4096)
TEXT_ENV_OUTPUT = 3584  # a benchmark domain's env prompt holds its instruction and a seed task of < env_output_len


@dataclasses.dataclass(frozen=True)
class Slice:
  mesh: dict  # over the slice's chips (JAX sees one device per chip)
  minibatches: int  # the agent's GRPO mini-batches: 512 rows / 16 = 32 per mini-batch, one row per chip on 32
  arch: str  # the model both the agent and the env are (genenv_jax.planning.architectures.KNOWN_MODELS)
  prefill_rows: int = 128  # the agent's prefill chunk (rows of 8,000-token prompts prefilled at once)
  kv_cache: str = "auto"  # the agent's KV cache kind: auto (bf16) or int8 (about half the bytes; approximate)


# Sized with `python -m genenv_jax.plan` (README, "Planning"). v5p-N has N/2 chips (N counts TensorCores), v6e-N N
# chips. On one host the agent's 512 rows x 9,000-slot KV cache and its prefill are split over only 4 or 8 chips:
# smaller prefill chunks and mini-batches, and on v6e-8 (32 GiB chips) an int8 agent cache, bring the peak under 90% of
# HBM.
SLICES = {
  "v5p-64": Slice(dict(data=1, fsdp=32, tensor=1), 16, "qwen2.5-7b"),
  "v5p-128": Slice(dict(data=1, fsdp=32, tensor=2), 16, "qwen2.5-7b"),
  "v6e-64": Slice(dict(data=1, fsdp=32, tensor=2), 16, "qwen2.5-7b"),
  "v5p-8": Slice(dict(data=1, fsdp=4, tensor=1), 32, "qwen2.5-1.5b", prefill_rows=32),
  "v6e-8": Slice(dict(data=1, fsdp=8, tensor=1), 32, "qwen2.5-1.5b", prefill_rows=32, kv_cache="int8"),
}


def parse_variant(arg: str) -> tuple[str, str]:
  """'api_bank,v5p-64' -> ('api_bank', 'v5p-64'); 'v5p-64' -> ('', 'v5p-64'); 'bfcl' -> ('bfcl', ''); '' -> ('', '')."""
  parts = [p.strip() for p in arg.split(",")] if arg.strip() else []
  domain = slice_name = ""
  for part in parts:
    if part in SLICES and not slice_name:
      slice_name = part
    elif part in tools.LENGTHS and not domain:
      domain = part
    else:
      raise ValueError(
        f"unknown or repeated part {part!r} in variant {arg!r} of configs/qwen2_5_7b.py; the variant is "
        f"SLICE, DOMAIN or DOMAIN,SLICE with SLICE one of {', '.join(SLICES)} and DOMAIN one of "
        f"{', '.join(tools.LENGTHS)}"
      )
  return domain, slice_name


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  c = default.get_config("")
  c.total_steps = 300
  c.checkpoint_every = 25
  c.eval_every = 25
  c.log_every = 1
  c.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=-1, tensor=1))
  c.distributed = True
  c.tokenizer = ""  # the HF checkpoint directory (its tokenizer.json and chat template)

  for model in (c.agent.model, c.env.model):
    model.hf_path = ""  # a local Qwen2.5-7B-Instruct directory (config.json + *.safetensors)
    model.dtype = "bfloat16"
    model.remat = "full"
    # the shape `genenv_jax.plan` compiles (it never opens hf_path); see planning.architectures.KNOWN_MODELS
    model.arch = "qwen2.5-7b"
  # The agent's 512 rows x 8,000-token prompts prefill in 4 chunks of 128 rows: the prompt activations, not the
  # weights or the cache, set the sampling peak (plan: v6e-64 does not fit with every row at once).
  c.agent.sampling.prefill_rows = 128

  c.domain.update(
    dict(
      min_operands=2, max_operands=4, max_digits=3, operators="+-*", bound=10**6, seed_max_difficulty=0, seed_decay=1.0
    )
  )
  c.domain.num_seeds = 2048
  c.domain.num_heldout = 512
  # D_env keeps every task that passed the band: the CPU demo's 256-task window
  # (configs/default.py) is measured on a 200-step toy, and a benchmark's seed set (num_seeds = 0: all) can exceed it
  c.pools.env_capacity = 8192
  # each task conditioned on a seed task from the pool (the paper's Algorithm 1, step 1): D_env's tasks as well as the
  # base seeds. The CPU demo prompts with base seeds only (configs/default.py, "The env's prompts").
  c.pools.env_seed_mix = default.POOLED_MIX

  # the paper's AdamW (the tree's defaults: lr 1e-6 for the agent, 5e-7 for the env), with weight decay 0.01
  c.agent.optimizer = to_config(dataclasses.replace(AgentSettings().optimizer, weight_decay=0.01))
  c.agent.grpo.group_size = 8
  c.agent.grpo.minibatches = 4
  c.env.optimizer = to_config(dataclasses.replace(EnvSettings().optimizer, weight_decay=0.01))
  c.env.num_seeds = 48
  c.pools.num_replay = 16  # 48 fresh + 16 replayed = 64 tasks per step, the paper's batch
  c.warm_start.agent_steps = 0  # instruction-tuned checkpoints need no supervised warm start
  c.warm_start.env_steps = 0
  c.slice = ""  # a Cloud TPU slice name (e.g. v5p-64): what `genenv_jax.plan` plans for
  domain, slice_name = parse_variant(arg)
  if slice_name:
    sl = SLICES[slice_name]
    c.slice = slice_name
    c.mesh = ml_collections.ConfigDict(sl.mesh)
    c.agent.grpo.minibatches = sl.minibatches
    c.agent.sampling.prefill_rows = sl.prefill_rows
    c.agent.sampling.kv_cache = sl.kv_cache
    for model in (c.agent.model, c.env.model):
      model.arch = sl.arch
    c.env.num_seeds = 32  # 32 fresh + 32 replayed = 64 tasks: both batches split over the (data, fsdp) shards
    c.pools.num_replay = 32
    c.domain.update(PAPER_LENGTHS)
  if domain:
    spec, threshold = tools.LENGTHS[domain][4:]
    c.domain = ml_collections.ConfigDict(
      dict(
        name=domain,
        data_dir="",
        num_seeds=0,
        num_heldout=64,
        spec_len=spec,
        success_threshold=threshold,
        **{**PAPER_LENGTHS, "env_output_len": TEXT_ENV_OUTPUT},
        **tools.FAMILY_DEFAULTS.get(domain, {}),
      )
    )
  return c
