"""Qwen2.5-7B-Instruct agent and env, full fine-tuning, at the paper's settings (not run here: no such hardware).

Usage: python -m genenv_jax.main --config=configs/qwen2_5_7b.py --workdir=gs://BUCKET/run \
         --config.agent.model.hf_path=/path/Qwen2.5-7B-Instruct --config.env.model.hf_path=/path/Qwen2.5-7B-Instruct \
         --config.tokenizer=/path/Qwen2.5-7B-Instruct

Everything is complete apart from the three paths. Values (GenEnv, arXiv 2512.19682, and its official veRL code):
  batch 64 tasks per step, G = 8 rollouts, clip 0.2, k3 KL 0.001, token-mean loss, agent lr 1e-6 (AdamW),
  env lr 5e-7, α = 0.5, k_min = 0.1, λ = 1. β = 10 (unstated in the paper; see rl/curriculum.py).
  Parameters and compute in bfloat16 with remat; the mesh is fully-sharded data parallel over every chip
  (fsdp = -1), which `python -m genenv_jax.plan` sizes per slice.

Variants (`configs/qwen2_5_7b.py:VARIANT`, see SLICES): `v5p-64`, `v5p-128`, `v6e-64` set the slice's mesh and the
agent's GRPO mini-batches, 32 fresh + 32 replayed tasks per step, and pad the domain to the paper's lengths
(PAPER_LENGTHS, 9,000 agent tokens) for planning: `python -m genenv_jax.plan --config=configs/qwen2_5_7b.py:v5p-64
--devices=32 --chip=v5p --layers=2,4` (README, "Planning": at these lengths neither planned slice fits yet).
"""

import ml_collections

from configs import default

# The paper's sequence lengths ("up to 9,000 tokens"): the arithmetic domain pads its prompts and answer budgets to
# these (its length fields only need to be >= what its longest task takes), so the compiled step has the real shapes.
PAPER_LENGTHS = dict(agent_prompt_len=1000, agent_answer_len=8000, env_prompt_len=1000, env_output_len=1000)

# Slice -> (mesh over its chips, agent GRPO mini-batches), sized with `python -m genenv_jax.plan` (README, Planning).
# JAX sees one device per chip: v5p-N has N/2 chips (N counts TensorCores), v6e-N has N chips.
SLICES = {
    "v5p-64": (dict(data=1, fsdp=32, tensor=1), 16),
    "v5p-128": (dict(data=1, fsdp=32, tensor=2), 16),
    "v6e-64": (dict(data=1, fsdp=32, tensor=2), 16),
}


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
    model.remat = True
    model.arch = "qwen2.5-7b"  # the shape `genenv_jax.plan` compiles (it never opens hf_path); see plan.KNOWN_MODELS

  c.domain.update(dict(min_operands=2, max_operands=4, max_digits=3, operators="+-*", bound=10**6,
                      seed_max_difficulty=0, seed_decay=1.0))
  c.domain.num_seeds = 2048
  c.domain.num_heldout = 512

  c.agent.optimizer = ml_collections.ConfigDict(dict(lr=1e-6, weight_decay=0.01, max_grad_norm=1.0, eps=1e-8,
                                                     warmup_steps=10))
  c.agent.grpo.group_size = 8
  c.agent.grpo.minibatches = 4
  c.env.optimizer = ml_collections.ConfigDict(dict(lr=5e-7, weight_decay=0.01, max_grad_norm=1.0, eps=1e-8,
                                                   warmup_steps=10))
  c.env.num_seeds = 48
  c.pools.num_replay = 16        # 48 fresh + 16 replayed = 64 tasks per step, the paper's batch
  c.warm_start.agent_steps = 0   # instruction-tuned checkpoints need no supervised warm start
  c.warm_start.env_steps = 0
  variant = arg.strip()
  if variant:
    if variant not in SLICES:
      raise ValueError(f"unknown variant {variant!r} of configs/qwen2_5_7b.py; choose one of: "
                       f"{', '.join(SLICES)} (or none)")
    mesh, minibatches = SLICES[variant]
    c.mesh = ml_collections.ConfigDict(mesh)
    c.agent.grpo.minibatches = minibatches
    c.env.num_seeds = 32        # 32 fresh + 32 replayed = 64 tasks: both batches split over the (data, fsdp) shards
    c.pools.num_replay = 32
    c.domain.update(PAPER_LENGTHS)
  return c
