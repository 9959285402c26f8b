"""Qwen2.5-7B-Instruct agent and env, full fine-tuning, at the paper's settings (not run here: no such hardware).

Usage: python -m genenv_jax.main --config=configs/qwen2_5_7b.py --workdir=gs://BUCKET/run \
         --config.agent.model.hf_path=/path/Qwen2.5-7B-Instruct --config.env.model.hf_path=/path/Qwen2.5-7B-Instruct \
         --config.tokenizer=/path/Qwen2.5-7B-Instruct

Everything is complete apart from the three paths. Values (GenEnv, arXiv 2512.19682, and its official veRL code):
  batch 64 tasks per step, G = 8 rollouts, clip 0.2, k3 KL 0.001, token-mean loss, agent lr 1e-6 (AdamW),
  env lr 5e-7, α = 0.5, k_min = 0.1, λ = 1. β = 10 (unstated in the paper; see rl/curriculum.py).
  Parameters and compute in bfloat16 with remat; the mesh is fully-sharded data parallel over every chip
  (fsdp = -1), which `python -m genenv_jax.plan` sizes per slice.
"""

import ml_collections

from configs import default


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

  c.domain.max_digits = 3
  c.domain.max_operands = 4
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
  if arg:
    raise ValueError(f"configs/qwen2_5_7b.py takes no variant, got {arg!r}")
  return c
