"""The embedded default: a tiny agent and a tiny env co-evolving on synthetic arithmetic, on a CPU in minutes.

Variants (`--config=configs/default.py:VARIANT`, composable left to right with '+', e.g. `smoke+random`):
  (none)    the demo (also named `coevolve`): warm start, then co-evolution, about 10 minutes on a 2-core CPU. Its env
            is prompted with the base seeds only (pools.env_seed_mix = (1, 0, 0)), as GenEnv-Random's is, so that
            the two differ only in whether the env is trained (below, "The env's prompts").
  smoke     the same run shrunk to about a minute (CI and scripts use it).
  tiny      both models at one 32-wide layer (`shrink_models`): tests and scripts that check plumbing, not learning.
  random    GenEnv-Random: the env samples tasks but is never trained (env.train=False), and it writes from the seed
            tasks only (pools.env_seed_mix = (1, 0, 0)): no α signal reaches it.
  pooled    GenEnv with three quarters of the env's prompts drawn from D_env, the tasks that passed the α band
            (pools.env_seed_mix = (0.25, 0.5, 0.25): base seeds, older D_env tasks, the latest step's): the previous
            default: "the default" of docs/EXPERIMENTS.md's sections after "Training the env, or prompting it
            from D_env".
  random_pooled  the env never trained, prompted as `pooled`'s is (or as the variant before it, where that one
            already draws from D_env: `reads_p_hat+random_pooled`): the α signal reaches this env through its prompts
            (the `random` of docs/EXPERIMENTS.md's older sections).
  static    static augmentation: the env generates once after warm start, then only replay.
  grpo      plain GRPO on the seed tasks, no env.
  pg        the env trained with GRPO on R_env instead of RWR: K = 4 samples per seed, as many env tasks per step
            as the config it modifies (8 seeds x 4 = 32 here; its figures, docs/EXPERIMENTS.md, "What the default
            shows", are `pooled+pg`'s).
  reads_p_hat  an env that reads the agent's p̂ on its seed: D_env takes every valid task with its p̂
            (pools.env_admits = "valid"), the env's warm start (600 steps) pairs each seed shown each p̂ = k / G with
            a seed one level harder above the α band, easier below, alike inside (env_targets = "rate_directed"),
            and every env prompt is a generated task (env_seed_mix = (0, 0.5, 0.5)), never a base seed shown "?".
            Not the default: its untrained env (reads_p_hat+random_pooled) trained a better agent, as RWR collapses
            the trained env onto one level (docs/EXPERIMENTS.md, "The env that reads p̂"); sweep it with `python -m
            genenv_jax.sweep --config=configs/default.py:reads_p_hat`.

The demo's task family: sums of 3..12 single digits (difficulty = the number of '+' signs, 2..11), a smooth ladder of
levels that the warm-started agent partly masters, where an earlier family of larger numbers was beyond this
~0.15M-parameter agent (docs/EXPERIMENTS.md, "How the demo's settings were chosen"). 4096 seeds, level k (from the
easiest) weighted 0.6**k: the seeds are mostly easy, so the warm-started env first writes tasks the agent mostly solves
(p̂ above the α band) and must learn to write harder ones. The held-out set is 2,000 other tasks, 200 per level: a
binomial standard error near 0.01, so that a gain of a few points can show within one run. The agent's warm start is
2,000 steps, so that the agent a run starts from varies less with the seed (the same section).

Hyper-parameters and where they come from (GenEnv, arXiv 2512.19682, and its official veRL code):
  clip 0.2, k3 KL, token-mean loss: official defaults. lr 1e-6 / 5e-7 (agent / env) are the paper's values for 7B
  models; these tiny models learn nothing at such rates, so the demo uses 1e-4 and 5e-4 (10 warm-up steps each; the
  real-model configs keep the paper's values).
  Agent KL coefficient 0.05 rather than the official 0.001: replayed easy tasks have zero advantage (every rollout
  right) and give no GRPO gradient, so the KL term is what keeps the agent from forgetting the easy levels, which at
  0.001 it did (docs/EXPERIMENTS.md, "How the demo's settings were chosen").
  Env lr 5e-4: at lower rates the env stalled on too-easy tasks (the same section).
  α = 0.5, k_min = 0.1, λ = 1: paper. β: unstated in the paper; 10 makes R_env(0) = R_env(1) = exp(-2.5) ≈ 0.08.
  G = 10 here rather than 8: with G = 8 only p̂ = 0.5 passes the band |p̂ - α| <= 0.1, about 27% of tasks whose
  true success rate is 0.5; with G = 10, p̂ in {0.4, 0.5, 0.6} passes (docs/DESIGN.md, "The method").
  Env KL to its initial model 0.5 (the settings' default, 0.001, is the paper's reading of a weak pull back, DESIGN.md,
  "The method") and a per-update KL cap of 0.05 (scaled). At 0.001 the RWR-trained env, cloning its in-band tasks,
  drifted on some seeds to sums hard only for their atypical value (zero-heavy: `0+1+0`, `0+2+1+0+3+0+0+0+0+0`),
  and the agent trained on them lost held-out accuracy; at 0.5 the env still raises the level where the agent
  allows it, 1 of 20 runs ended more than 2 SE below its start (2 of 10 at 0.001), and GenEnv's mean held-out
  accuracy stayed that of 0.001 (11 paired units; docs/EXPERIMENTS.md, "The env's KL to its initial model at 0.5",
  "The shipped default (env KL 0.5) on 10 seeds under two ISAs").
  Each step: 32 env tasks + 16 replayed from D_train (half base seeds), G = 10 rollouts each.

The env's prompts: the base seeds only. GenEnv's env can reach the agent's frontier by two routes, its RWR training and
prompts drawn from D_env (the tasks that passed the band), which even an untrained env rewrites at about their level. On
this demo each route alone gives the whole gain over GenEnv-Random, and together they give no more (docs/EXPERIMENTS.md,
"Training the env, or prompting it from D_env"; README, "What the default shows"). With D_env's prompts the trained env
could not be told from an untrained one, so the default prompts as GenEnv-Random does, and GenEnv - GenEnv-Random
measures the env's training alone; `pooled` keeps the other route.

D_env (read by `pooled` and `reads_p_hat`) keeps the 4,096 seeds and only the latest 256 tasks that passed the α band
(pools.env_capacity = 4,352; oldest evicted first). Half of `pooled`'s prompts are "old" D_env tasks, each shown with
the p̂ it had when it passed; with the whole history kept those seeds went stale as the agent learnt, and the env
drifted back to easy tasks late in a run (docs/EXPERIMENTS.md, "What the default shows").

The end-of-run summary (genenv_jax/reporting/summary_report.py) states whether the three phenomena showed, with numbers.
"""

import ml_collections

from genenv_jax.coevolution.settings import (
  AgentSettings,
  DomainSettings,
  EnvSettings,
  PoolSettings,
  Settings,
  WarmStartSettings,
  to_config,
)


def model_shape(hidden: int, layers: int, heads: int, kv_heads: int, mlp: int) -> dict:
  """The shape fields of a random decoder's config (head_dim = hidden / heads)."""
  return dict(
    hidden_size=hidden,
    intermediate_size=mlp,
    num_layers=layers,
    num_heads=heads,
    num_kv_heads=kv_heads,
    head_dim=hidden // heads,
  )


def model_config(hidden: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2, mlp: int = 256):
  return ml_collections.ConfigDict(
    dict(
      hf_path="",  # a local HF checkpoint directory; empty = a random model of the shape below
      **model_shape(hidden, layers, heads, kv_heads, mlp),
      rope_theta=10000.0,
      tie_word_embeddings=True,
      max_position_embeddings=256,
      dtype="float32",
      remat="none",  # models.config.REMAT_POLICIES: none, full, save_dots, save_all_dots
    )
  )


def shrink_models(
  c: ml_collections.ConfigDict, hidden: int = 32, mlp: int = 64, layers: int = 1, heads: int = 2, kv_heads: int = 1
) -> ml_collections.ConfigDict:
  """Both models of any config (this file's, configs/tools.py's, configs/qwen2_5_7b.py's) at a small random shape,
  in place, other fields kept: the one way tests, benchmarks and CPU configs shrink a config's models. Returns `c`."""
  for model in (c.agent.model, c.env.model):
    model.update(model_shape(hidden, layers, heads, kv_heads, mlp))
  return c


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.total_steps = 200
  c.checkpoint_every = 50
  c.eval_every = 25
  c.log_every = 5
  c.max_checkpoints = 2
  c.mode = Settings.mode  # coevolve | static | grpo
  c.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))
  c.distributed = False  # call jax.distributed.initialize (multi-host pods)
  c.tokenizer = ""  # empty = the shipped arithmetic sentencepiece model
  # Resuming a workdir with a config that differs beyond training.loop.RESUMABLE_CHANGES (total_steps, eval and
  # logging settings) is refused unless this is set; accepted changes are recorded in summary.json.
  c.allow_config_change = False

  c.domain = ml_collections.ConfigDict(
    dict(
      name="arithmetic",
      answer="value",  # value | running: the last digit of every running sum (tasks/arithmetic/running.py)
      verifier="jax",
      min_operands=3,
      max_operands=12,
      max_digits=1,
      operators="+",
      bound=999,
      seed_max_difficulty=0,
      seed_decay=0.6,
      num_seeds=4096,
      num_heldout=2000,
      agent_prompt_len=0,
      agent_answer_len=0,
      env_prompt_len=0,
      env_output_len=0,  # 0 = what the longest task needs
      **to_config(DomainSettings()),  # success_threshold
    )
  )

  # The sections the step reads start from the settings' defaults (genenv_jax/coevolution/settings.py, where each is
  # declared, checked and sourced); this demo changes the values below (module docstring, "Hyper-parameters").
  c.agent = to_config(AgentSettings())
  c.agent.model = model_config()
  c.agent.optimizer.lr = 1e-4
  c.agent.grpo.group_size = 10
  c.agent.grpo.kl_coef = 0.05

  c.env = to_config(EnvSettings())
  c.env.model = model_config()
  c.env.optimizer.lr = 5e-4
  c.env.kl_coef = 0.5
  c.env.num_seeds = 32

  c.pools = to_config(PoolSettings())
  c.pools.env_capacity = 4352  # the 4,096 seeds + the latest 256 tasks that passed the band (module docstring)
  c.pools.num_replay = 16
  c.pools.env_seed_mix = (1.0, 0.0, 0.0)  # (base, old, new): base seeds only, as GenEnv-Random (module docstring)

  # the demo's warm start is the settings' own (WarmStartSettings): env_p_hats, the p̂ shown in the env's warm-start
  # prompts, unknown | all (training.warm_start.sft_batches)
  c.warm_start = to_config(WarmStartSettings())

  for variant in [v.strip() for v in arg.split("+")]:  # override sets compose left to right: smoke+random
    _apply_variant(c, variant)
  return c


POOLED_MIX = (0.25, 0.5, 0.25)  # the env's prompts of `pooled`: base seeds, older D_env tasks, the latest step's

VARIANTS = (
  "coevolve",
  "smoke",
  "tiny",
  "random",
  "random_pooled",
  "static",
  "grpo",
  "pg",
  "reads_p_hat",
  "pooled",
)


def _apply_variant(c: ml_collections.ConfigDict, variant: str) -> None:
  """One named override set (module docstring); "" and "coevolve" leave the demo as it is."""
  if variant in ("", "coevolve"):
    return
  if variant == "smoke":  # about a minute; it learns (tests/integration/test_smoke_learns.py), so a broken build shows
    c.total_steps = 20
    c.checkpoint_every = 10
    c.eval_every = 10
    c.log_every = 1
    c.domain.max_operands = 5  # sums of 3..5 digits: three levels, learnable in 400 SFT steps
    c.domain.num_seeds = 2048
    c.domain.num_heldout = 128
    c.warm_start.agent_steps = 400
    c.warm_start.env_steps = 100
    c.env.num_seeds = 8
    c.pools.num_replay = 8
  elif variant == "tiny":
    shrink_models(c)
  elif variant == "random":
    c.env.train = False
    c.pools.env_seed_mix = (1.0, 0.0, 0.0)  # D_env's band-filtered tasks are the α signal: an untrained env gets none
  elif variant == "random_pooled":  # untrained, prompted from D_env: pooled's mix, or the base's own (reads_p_hat)
    c.env.train = False
    if tuple(c.pools.env_seed_mix) == (1.0, 0.0, 0.0):
      c.pools.env_seed_mix = POOLED_MIX
  elif variant == "pooled":
    c.pools.env_seed_mix = POOLED_MIX
  elif variant == "static":
    c.mode = "static"
    c.pools.num_replay = 12
  elif variant == "grpo":
    c.mode = "grpo"
    c.pools.num_replay = 12
  elif variant == "pg":  # as many env tasks per step as the base config, in groups of K = 4 per seed
    c.env.objective = "pg"
    c.env.samples_per_seed = 4
    c.env.num_seeds = max(c.env.num_seeds // 4, 1)
  elif variant == "reads_p_hat":
    c.pools.env_admits = "valid"
    c.pools.env_seed_mix = (0.0, 0.5, 0.5)  # (base, old, new): base seeds have no p̂ to read
    c.warm_start.env_targets = "rate_directed"
    c.warm_start.env_p_hats = "all"
    c.warm_start.env_steps = 600  # at 150 the env's written level did not yet depend on the p̂ shown
  else:
    raise ValueError(
      f"unknown variant {variant!r} of configs/default.py; choose from {', '.join(VARIANTS)} "
      "(or none), joined with '+' to compose, e.g. smoke+random"
    )
