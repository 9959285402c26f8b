"""The benchmark training domains with tiny random models: a few co-evolution steps on a CPU.

Variants (`--config=configs/tools.py:NAME`, or `NAME+demo`, see `_demo`): api_bank (the default), bfcl, bamboogle,
travelplanner, alfworld, each the training domain of that benchmark (`genenv_jax/benchmarks/registry.py`,
`genenv_jax/tasks/text_domain.py`, `genenv_jax/benchmarks/NAME/family.py`), on the benchmark data (`python -m
genenv_jax.data fetch NAME`; `--config.domain.data_dir`, else $GENENV_DATA, else ~/.cache/genenv_jax/data). The
tokenizer is the shipped sentencepiece model (byte fallback, so any text round-trips; `--config.tokenizer=HF_DIR` for a
model's own), whose 512 pieces make long texts: the lengths below are in its tokens, and tasks that do not fit are
dropped (counted). These runs check the plumbing (env writes, domain parses and verifies on the host, both models
update); tiny random models solve nothing, and `NAME+demo` gives the env enough warm start to write valid tasks
(docs/EXPERIMENTS.md, "The text domains on a CPU"). For real training start from configs/qwen2_5_7b.py and set `domain`
as here.
"""

import ml_collections

from configs.default import POOLED_MIX, shrink_models
from configs.default import get_config as default_config
from genenv_jax.coevolution.settings import EnvSettings

# name -> (agent_prompt_len, agent_answer_len, env_prompt_len, env_output_len, spec_len, success_threshold);
# env_prompt_len = the env instruction's tokens (about 200-300 here) + env_output_len, rounded up
LENGTHS = {
  "api_bank": (640, 128, 800, 512, 256, 1.0),
  "bfcl": (2560, 192, 1856, 1536, 1024, 1.0),
  "bamboogle": (192, 32, 320, 96, 128, 0.5),
  "travelplanner": (3072, 1024, 512, 256, 384, 1.0),
  "alfworld": (1920, 64, 1856, 1536, 128, 1.0),
}
FAMILY_DEFAULTS = {"travelplanner": {"num_candidates": 400}, "alfworld": {"num_games": 8, "cache_dir": ""}}


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  name, _, extra = (arg.strip() or "api_bank").partition("+")
  if name not in LENGTHS or extra not in ("", "demo"):
    raise ValueError(
      f"unknown variant {arg!r} of configs/tools.py; choose one of: {', '.join(LENGTHS)}, optionally with +demo"
    )
  prompt, answer, env_prompt, env_output, spec, threshold = LENGTHS[name]
  c = default_config("smoke")
  c.tokenizer = ""
  c.domain = ml_collections.ConfigDict(
    dict(
      name=name,
      data_dir="",
      num_seeds=64,
      num_heldout=8,
      agent_prompt_len=prompt,
      agent_answer_len=answer,
      env_prompt_len=env_prompt,
      env_output_len=env_output,
      spec_len=spec,
      success_threshold=threshold,
      **FAMILY_DEFAULTS.get(name, {}),
    )
  )
  positions = max(prompt + answer, env_prompt + env_output)
  shrink_models(c, hidden=64, mlp=128, layers=2, heads=4, kv_heads=2)
  for model in (c.agent.model, c.env.model):
    model.max_position_embeddings = positions
  c.total_steps = 3
  c.checkpoint_every = 3
  c.eval_every = 3
  c.log_every = 1
  c.warm_start.agent_steps = 4
  c.warm_start.env_steps = 4
  c.warm_start.batch_size = 8
  c.agent.grpo.group_size = 4
  c.env.num_seeds = 8
  c.pools.num_replay = 8
  c.pools.train_capacity = 512
  c.pools.env_capacity = 512
  c.pools.env_seed_mix = POOLED_MIX  # prompts from D_env as well, as the runs of docs/EXPERIMENTS.md were measured
  c.env.kl_coef = EnvSettings.kl_coef  # the settings' 0.001, as those runs were measured; the demo's 0.5 is the toy's
  if extra == "demo":
    _demo(c)
  return c


def _demo(c: ml_collections.ConfigDict) -> None:
  """`NAME+demo`: a run where the env writes valid tasks and the agent scores, on a CPU in about 20 minutes.

  The tiny env learns 8 seed tasks in its own output format (300 warm-start steps; greedy decoding then writes each
  target exactly). Sampled at temperature 1 it still derails, since a small loss per token compounds over the ~300
  tokens of an API-Bank task; at temperature 0.3 the env's tasks parse, and the agent samples at 0.5. The env's
  warm-start prompts show every p̂ a task can carry (`warm_start.env_p_hats = "all"`): once a generated task joins
  D_env, the env is prompted with it and its measured p̂, and an env warm-started on prompts that all showed "unknown"
  wrote no valid task from such a prompt (docs/EXPERIMENTS.md, "The text domains on a CPU", for both runs).
  """
  c.domain.num_seeds = 8
  c.warm_start.env_p_hats = "all"
  c.warm_start.env_steps = 300
  c.warm_start.agent_steps = 100
  c.env.sampling.temperature = 0.3
  c.agent.sampling.temperature = 0.5
  c.total_steps = 16
  c.eval_every = 8
  c.checkpoint_every = 8
