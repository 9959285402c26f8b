"""The run's settings: one typed tree that mirrors the config's sections, the only place that names, defaults and checks
a setting.

  Settings(seed, total_steps, checkpoint_every, eval_every, log_every, max_checkpoints, allow_config_change,
           distributed, tokenizer, slice, mode, mesh: MeshSettings, domain: DomainSection, agent: AgentSettings,
           env: EnvSettings, pools: PoolSettings, warm_start: WarmStartSettings)
  AgentSettings(model: ModelSettings, sampling: SamplingParams, logprob_chunk, grpo: GrpoSettings,
                optimizer: OptimizerSettings, lora: LoraSettings)
  EnvSettings(model: ModelSettings, train, objective, sampling: SamplingParams, logprob_chunk, num_seeds,
              samples_per_seed, curriculum: CurriculumSettings, kl_coef, max_kl, kl_cap_mode,
              optimizer: OptimizerSettings, lora: LoraSettings)

Each section is a frozen dataclass named for its config section (config.env.curriculum -> EnvSettings.curriculum), its
fields named as the config's keys, each declared once with its default, its test and what it allows (`setting`;
the machinery is coevolution/setting_fields.py). A section checks its own fields, and the constraints between them,
in `__post_init__`; choice fields take their options from the code that dispatches on them (models.attention's
implementations, the benchmark registry's domains, ...), from genenv_jax.choices (the RL maths's estimators,
aggregations, env objectives and KL-cap modes, which rl.grpo and rl.curriculum dispatch on: declared below both, so
that importing the settings loads no rl or step module), or declare them here (MODES, ENV_POOL_ADMITS), so the lists
cannot drift. The tree is hashable: it is static in the jitted step, as the sampler's own `SamplingParams` (which
carries the sampling section, checks itself, and travels as is from the config to the sampler and the log-probs).

`from_config(config, domain, tokenizer)` walks the ConfigDict once; a key a config lacks takes its default (configs
saved before a key existed), and every bad value is listed at once (`SettingsError`). `to_config(section)` is the
inverse for the config files: they start from the defaults and override what their run changes.

Everything reads the tree: the step and the warm start their sections, coevolution.build the mesh, the tokenizer, the
domain's answer form and the models (`ModelSettings.model_config`, its attention included), the loop its schedule,
plan (planning/) its slice, mesh, rows, lengths and models. A benchmark domain's own keys (data_dir, spec_len, its
family's options) are its family's (benchmarks.registry), which checks them. training/config_checks.py is the
commands' entry: `problems` here, as one error.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Mapping, get_args

import ml_collections

from genenv_jax.benchmarks.registry import ARITHMETIC_ANSWERS, DOMAINS
from genenv_jax.choices import (
  ADVANTAGE_ESTIMATORS,
  ENV_OBJECTIVES,
  KL_CAP_MODES,
  KL_ESTIMATORS,
  LOSS_AGGREGATIONS,
  PG,
  AdvantageEstimator,
  EnvObjective,
  KlCapMode,
  KlEstimator,
  LossAggregation,
)
from genenv_jax.coevolution.setting_fields import (
  MIX,
  Section,
  boolean,
  choice,
  count,
  is_int,
  is_real,
  is_text,
  mix,
  non_negative,
  positive,
  read,
  remat_setting,
  sampling_field,
  section,
  setting,
  unit,
)
from genenv_jax.coevolution.setting_fields import SettingsError as SettingsError  # re-exported: the tree's error
from genenv_jax.coevolution.setting_fields import to_config as to_config  # re-exported: the config files use it
from genenv_jax.models.attention import IMPLEMENTATIONS
from genenv_jax.models.config import DTYPES, REMAT_POLICIES, ModelConfig
from genenv_jax.models.lora import TARGETS as LORA_TARGETS
from genenv_jax.models.lora import LoraSpec
from genenv_jax.sampling.sampler import SamplingParams
from genenv_jax.tasks.arithmetic.domain import VERIFIERS, ArithmeticDomain

# The step's typed choices (the step dispatches on them; coevolution/step.py imports them from here).
Mode = Literal["coevolve", "static", "grpo"]
MODES = get_args(Mode)
COEVOLVE, STATIC, GRPO = MODES
# coevolve: the env writes tasks every step (GenEnv); static: the env writes once, before training, then only replay;
# grpo: plain GRPO on replayed seed tasks, no env.
EnvPoolAdmits = Literal["band", "valid"]
ENV_POOL_ADMITS = get_args(EnvPoolAdmits)
BAND, VALID = ENV_POOL_ADMITS
# band: only fresh tasks whose p̂ lies in the α band join D_env (GenEnv); valid: every valid fresh task, with its p̂.
# how replayed tasks are drawn from D_train within each category of pools.replay_mix: uniform, every valid task alike;
# level_learnability, each difficulty level in proportion to p_L (1 - p_L) of its recent p̂ (rl.pools.
# level_learnability_weights: levels the agent always solves get little replay, levels it begins to forget more)
ReplayWeighting = Literal["uniform", "level_learnability"]
REPLAY_WEIGHTINGS = get_args(ReplayWeighting)
UNIFORM, LEVEL_LEARNABILITY = REPLAY_WEIGHTINGS


# ---- the sections -----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OptimizerSettings(Section):
  """AdamW with a linear warm-up (rl.updates.make_optimizer). lr: the paper's 1e-6 for a 7B agent (5e-7 for the env,
  EnvSettings); the clip threshold also feeds the step's clipped-fraction metric (the optimizer clips). decay_steps
  > 0 decays the rate after the warm-up to 0 along a cosine over that many updates (rl.updates.learning_rate_schedule);
  0, the default, keeps it constant, as the official veRL recipe does."""

  lr: float = setting(1e-6, positive, "a number > 0")
  weight_decay: float = setting(0.0, non_negative, "a number >= 0")
  max_grad_norm: float = setting(1.0, positive, "a number > 0")
  eps: float = setting(1e-8, positive, "a number > 0")
  warmup_steps: int = setting(10, count(0), "an integer >= 0")
  decay_steps: int = setting(0, count(0), "an integer >= 0 (0 = a constant rate after the warm-up)")


@dataclasses.dataclass(frozen=True)
class GrpoSettings(Section):
  """The agent's GRPO update (rl.grpo.grpo_loss): the official GenEnv / veRL defaults (configs/default.py says where
  the demo departs from them and why)."""

  group_size: int = setting(8, count(2), "an integer >= 2 (GRPO compares rollouts within a group)")
  advantage: AdvantageEstimator = setting("grpo", *choice(ADVANTAGE_ESTIMATORS))
  clip_low: float = setting(0.2, lambda v: is_real(v) and 0 <= v < 1, "a number in [0, 1)")
  clip_high: float = setting(0.2, non_negative, "a number >= 0")
  kl_coef: float = setting(0.001, non_negative, "a number >= 0")
  kl_estimator: KlEstimator = setting("k3", *choice(KL_ESTIMATORS))
  entropy_coef: float = setting(0.0, is_real, "a finite number")
  loss_agg: LossAggregation = setting("token-mean", *choice(LOSS_AGGREGATIONS))
  minibatches: int = setting(1, count(1), "an integer >= 1")


@dataclasses.dataclass(frozen=True)
class CurriculumSettings(Section):
  """The α-curriculum (GenEnv, arXiv 2512.19682, Section 3; rl.curriculum): R_env = exp(-β (p̂ - α)²), the band
  |p̂ - α| <= k_min, RWR weights ∝ exp(λ R_env).

  α = 0.5, k_min = 0.1, λ = 1: the paper. β: unstated there; 10 makes R_env(0) = R_env(1) = exp(-2.5) ≈ 0.08 against
  R_env(0.4) ≈ 0.90, so trivial and impossible tasks score about 11x lower than near-target ones."""

  alpha: float = setting(0.5, unit, "a number in [0, 1] (the target success rate)")
  beta: float = setting(10.0, positive, "a number > 0")
  k_min: float = setting(0.1, unit, "a number in [0, 1] (the band's half-width)")
  rwr_lambda: float = setting(1.0, positive, "a number > 0")

  @classmethod
  def constraints(cls, values, path):
    alpha, k_min = (values.get(k, getattr(cls, k)) for k in ("alpha", "k_min"))
    if 0 <= alpha - k_min and alpha + k_min <= 1:
      return []
    return [
      f"{path}alpha ± k_min = {alpha} ± {k_min}: the band [{alpha - k_min:g}, {alpha + k_min:g}] must lie inside [0, 1]"
    ]

  @property
  def band(self) -> tuple[float, float]:
    """The α band's limits (α - k_min, α + k_min)."""
    return self.alpha - self.k_min, self.alpha + self.k_min


@dataclasses.dataclass(frozen=True)
class DomainSettings(Section):
  """What the step reads of the domain section (the rest builds the domain: benchmarks.registry)."""

  success_threshold: float = setting(0.5, unit, "a number in [0, 1] (R_agent >= it counts as a success for p̂)")


ARITHMETIC = {f.name: f.default for f in dataclasses.fields(ArithmeticDomain) if f.init and f.name != "tokenizer"}
LENGTH = "an integer >= 0 (0 = what the longest task needs)"


@dataclasses.dataclass(frozen=True)
class DomainSection(DomainSettings):
  """The whole domain section (config.domain): which domain, and the arithmetic domain's grammar, seeds and lengths
  (tasks.arithmetic.domain.ArithmeticDomain, whose own defaults these are; benchmarks.registry.build_domain builds
  the domain from the section). A benchmark domain (configs/tools.py) has its own keys (data_dir, spec_len, its
  family's options), which its family checks; the arithmetic keys do not apply to it."""

  name: str = setting("arithmetic", *choice(DOMAINS))
  # value: the expression's value (ArithmeticDomain); running: the last digit of every running sum
  # (tasks/arithmetic/running.py)
  answer: str = setting(ARITHMETIC_ANSWERS[0], *choice(ARITHMETIC_ANSWERS))
  verifier: str = setting(ARITHMETIC["verifier"], *choice(VERIFIERS))  # jax: on device; host: Python callbacks
  min_operands: int = setting(ARITHMETIC["min_operands"], count(2), "an integer >= 2")
  max_operands: int = setting(ARITHMETIC["max_operands"], count(2), "an integer >= 2")
  max_digits: int = setting(ARITHMETIC["max_digits"], count(1), "an integer >= 1")
  operators: str = setting(ARITHMETIC["operators"], is_text, "a string of operators (a subset of '+-*')")
  bound: int = setting(ARITHMETIC["bound"], count(1), "an integer >= 1")
  seed_max_difficulty: int = setting(ARITHMETIC["seed_max_difficulty"], count(0), "an integer >= 0 (0 = every level)")
  seed_decay: float = setting(ARITHMETIC["seed_decay"], positive, "a number > 0")
  num_seeds: int = setting(ARITHMETIC["num_seeds"], count(0), "an integer >= 0")
  num_heldout: int = setting(ARITHMETIC["num_heldout"], count(1), "an integer >= 1")
  agent_prompt_len: int = setting(0, count(0), LENGTH)
  agent_answer_len: int = setting(0, count(0), LENGTH)
  env_prompt_len: int = setting(0, count(0), LENGTH)
  env_output_len: int = setting(0, count(0), LENGTH)

  @classmethod
  def constraints(cls, values, path):
    lo, hi = values.get("min_operands", cls.min_operands), values.get("max_operands", cls.max_operands)
    return [f"{path}max_operands = {hi}: must be >= {path}min_operands ({lo})"] if hi < lo else []

  @property
  def lengths(self) -> dict[str, int]:
    """The four lengths (0 = what the longest task needs)."""
    return {k: getattr(self, k) for k in ("agent_prompt_len", "agent_answer_len", "env_prompt_len", "env_output_len")}


def mesh_size(v: Any) -> bool:
  return is_int(v) and (v == -1 or v >= 1)


MESH_SIZE = "an integer >= 1, or -1 (every remaining device)"


@dataclasses.dataclass(frozen=True)
class MeshSettings(Section):
  """The device mesh (parallel.sharding.make_mesh): data parallel, fully-sharded data parallel, tensor parallel; one
  size may be -1, every device the others leave."""

  data: int = setting(-1, mesh_size, MESH_SIZE)
  fsdp: int = setting(1, mesh_size, MESH_SIZE)
  tensor: int = setting(1, mesh_size, MESH_SIZE)

  @property
  def sizes(self) -> dict[str, int]:
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def lora_targets(v: Any) -> bool:
  """Distinct projection names, at least one, each one models.lora knows."""
  return isinstance(v, tuple) and bool(v) and all(t in LORA_TARGETS for t in v) and len(set(v)) == len(v)


@dataclasses.dataclass(frozen=True)
class LoraSettings(Section):
  """LoRA adapters on a model's projections (models/lora.py; Hu et al. 2021): off by default (every parameter trains).
  On: the base weights are frozen, only the adapters train (the optimizer holds their state alone), and the KL
  reference is the base model with the adapters off. y = x W + (alpha / rank) (drop(x) A) B, B = 0 at the start.
  Defaults: peft's alpha = 2 rank, every linear projection of the decoder (not the embedding or the head)."""

  enabled: bool = setting(False, boolean, "true or false (true: train LoRA adapters only)")
  rank: int = setting(8, count(1), "an integer >= 1 (the adapters' rank r)")
  alpha: float = setting(16.0, positive, "a number > 0 (the adapters' update is scaled by alpha / rank)")
  targets: tuple[str, ...] = setting(
    tuple(LORA_TARGETS),
    lora_targets,
    "a non-empty list of distinct projections, each one of " + ", ".join(repr(t) for t in LORA_TARGETS),
    convert=lambda v: tuple(v) if isinstance(v, (list, tuple)) else v,
  )
  dropout: float = setting(0.0, lambda v: is_real(v) and 0 <= v < 1, "a number in [0, 1) (on the adapters' input)")

  @property
  def spec(self) -> LoraSpec | None:
    """The adapters to attach (models.lora.LoraSpec), or None when LoRA is off."""
    return LoraSpec(self.rank, float(self.alpha), self.targets, float(self.dropout)) if self.enabled else None


# the model fields that describe a random decoder's shape: an HF checkpoint brings its own (its config.json)
SHAPE_FIELDS = (
  "vocab_size",
  "hidden_size",
  "intermediate_size",
  "num_layers",
  "num_heads",
  "num_kv_heads",
  "head_dim",
  "rope_theta",
  "qkv_bias",
  "tie_word_embeddings",
  "max_position_embeddings",
)


@dataclasses.dataclass(frozen=True)
class ModelSettings(Section):
  """A model (agent.model, env.model): a local HF checkpoint (`hf_path`), or a random Llama-style decoder of the shape
  below (models.config.ModelConfig, built by `model_config`). With `hf_path` set, the checkpoint's config.json gives
  the shape and only `dtype`, `remat` and `attention` apply. Defaults: the CPU demo's ~0.15M-parameter decoder
  (configs/default.py), head_dim = hidden_size / num_heads."""

  hf_path: str = setting("", is_text, "a checkpoint directory, hub id or URL ('' = a random model of the shape below)")
  arch: str = setting(
    "", is_text, "a known checkpoint's name (planning.architectures.KNOWN_MODELS, read by plan only) or ''"
  )
  vocab_size: int = setting(0, count(0), "an integer >= 0 (0 = the tokenizer's vocabulary)")
  hidden_size: int = setting(64, count(1), "an integer >= 1")
  intermediate_size: int = setting(256, count(1), "an integer >= 1")
  num_layers: int = setting(2, count(1), "an integer >= 1")
  num_heads: int = setting(4, count(1), "an integer >= 1")
  num_kv_heads: int = setting(2, count(1), "an integer >= 1")
  head_dim: int = setting(16, count(1), "an integer >= 1")
  rope_theta: float = setting(10000.0, positive, "a number > 0")
  qkv_bias: bool = setting(False, boolean, "true or false (biases on the q, k, v projections: Qwen2)")
  tie_word_embeddings: bool = setting(True, boolean, "true or false (the LM head is the embedding)")
  max_position_embeddings: int = setting(256, count(1), "an integer >= 1")
  dtype: str = setting("float32", *choice(DTYPES))  # parameters and compute
  remat: Any = setting("none", remat_setting, "true, false or one of " + ", ".join(REMAT_POLICIES))
  # auto: TPU splash, GPU cudnn, CPU blockwise (models.attention)
  attention: str = setting("auto", *choice(IMPLEMENTATIONS))

  @classmethod
  def field_problems(cls, values, path=""):
    """An HF checkpoint's shape is its config.json's: the shape fields are not checked then."""
    if values.get("hf_path"):
      values = {k: v for k, v in values.items() if k not in SHAPE_FIELDS}
    return super().field_problems(values, path)

  @classmethod
  def constraints(cls, values, path):
    if values.get("hf_path"):
      return []
    heads, kv = values.get("num_heads", cls.num_heads), values.get("num_kv_heads", cls.num_kv_heads)
    if heads % kv:
      return [f"{path}num_heads = {heads}: must be a multiple of {path}num_kv_heads ({kv})"]
    return []

  def model_config(self, vocab_size: int) -> ModelConfig:
    """The ModelConfig of the random decoder of this shape (`vocab_size`: the tokenizer's, unless set here)."""
    shape = {k: getattr(self, k) for k in SHAPE_FIELDS}
    shape["vocab_size"] = int(self.vocab_size or vocab_size)
    return ModelConfig(**shape, param_dtype=self.dtype, dtype=self.dtype, remat=self.remat, attention=self.attention)


@dataclasses.dataclass(frozen=True)
class AgentSettings(Section):
  """The agent: its model, its sampling (the sampler's SamplingParams), log-prob chunking, GRPO, optimizer and LoRA."""

  model: ModelSettings = section(ModelSettings)
  sampling: SamplingParams = sampling_field(max_new_tokens=8)
  logprob_chunk: int = setting(512, count(1), "an integer >= 1")  # response positions per LM-head chunk
  grpo: GrpoSettings = section(GrpoSettings)
  optimizer: OptimizerSettings = section(OptimizerSettings)
  lora: LoraSettings = section(LoraSettings)


@dataclasses.dataclass(frozen=True)
class EnvSettings(Section):
  """The env simulator: whether and how it trains, its sampling, the curriculum it is trained toward.

  kl_coef 0.001: KL(π_env ‖ π_env,init) on its task tokens, weak so that the env keeps pace with the agent (DESIGN.md,
  "The method"); max_kl 0.05 nats/token per update, scaled (rl.curriculum.kl_cap_scale), guards its
  stability instead.

  The env's losses (rl.curriculum: RWR's KL term, PG's clipped surrogate) use the agent's `agent.grpo.clip_low`,
  `clip_high` and `kl_estimator`: one clip range and one KL estimator per run, as in GenEnv's official code (one
  veRL actor config for both models); `Settings.env_loss` names them."""

  model: ModelSettings = section(ModelSettings)
  train: bool = setting(True, boolean, "true or false (false: GenEnv-Random, the env samples but never learns)")
  objective: EnvObjective = setting(ENV_OBJECTIVES[0], *choice(ENV_OBJECTIVES))
  sampling: SamplingParams = sampling_field(max_new_tokens=16)
  logprob_chunk: int = setting(512, count(1), "an integer >= 1")
  num_seeds: int = setting(8, count(1), "an integer >= 1 (env prompts per step)")
  samples_per_seed: int = setting(1, count(1), "an integer >= 1 (K env samples per prompt)")
  curriculum: CurriculumSettings = section(CurriculumSettings)
  kl_coef: float = setting(0.001, non_negative, "a number >= 0")
  max_kl: float = setting(0.05, positive, "a number > 0")
  kl_cap_mode: KlCapMode = setting("scale", *choice(KL_CAP_MODES))
  optimizer: OptimizerSettings = section(OptimizerSettings, lr=5e-7)
  lora: LoraSettings = section(LoraSettings)

  @classmethod
  def constraints(cls, values, path):
    k = values.get("samples_per_seed", cls.samples_per_seed)
    if values.get("objective", cls.objective) == PG and k < 2:
      return [f"{path}samples_per_seed = {k}: the 'pg' objective needs >= 2 (a group per seed)"]
    return []


@dataclasses.dataclass(frozen=True)
class PoolSettings(Section):
  """D_train (replayed tasks) and D_env (the env's seed tasks): capacities and how each draws (rl.pools)."""

  train_capacity: int = setting(8192, count(1), "an integer >= 1")
  env_capacity: int = setting(8192, count(1), "an integer >= 1")
  num_replay: int = setting(0, count(0), "an integer >= 0 (tasks re-drawn from D_train per step)")
  replay_mix: tuple[float, float, float] = setting((0.5, 0.25, 0.25), mix, MIX, convert=tuple)  # base, old, new
  env_seed_mix: tuple[float, float, float] = setting((0.5, 0.25, 0.25), mix, MIX, convert=tuple)
  env_admits: EnvPoolAdmits = setting(BAND, *choice(ENV_POOL_ADMITS))  # which fresh tasks join D_env
  new_window: int = setting(1, count(1), "an integer >= 1")
  keep_seeds: bool = setting(True, boolean, "true or false")
  static_rounds: int = setting(8, count(1), "an integer >= 1")
  replay_weighting: ReplayWeighting = setting(UNIFORM, *choice(REPLAY_WEIGHTINGS))
  replay_level_window: int = setting(20, count(1), "an integer >= 1 (steps a level's p̂ counts as recent)")


# the env's warm-start targets (training.warm_start.sft_batches): nearby, a seed of nearby difficulty; nearby_level,
# the same with the partner's level drawn first; variation, one local edit of the seed (arithmetic only);
# rate_directed, a seed one level harder above the α band, easier below, alike inside (needs env_p_hats = "all")
EnvTargets = Literal["nearby", "nearby_level", "variation", "rate_directed"]
ENV_TARGETS = get_args(EnvTargets)
# the p̂ the env's warm-start prompts show (training.warm_start.env_p_hat_values): unknown, "?" only; all, every k / G
EnvPHats = Literal["unknown", "all"]
ENV_P_HATS = get_args(EnvPHats)


@dataclasses.dataclass(frozen=True)
class WarmStartSettings(Section):
  """The supervised warm start of both models on the domain's seed tasks (training.warm_start), before the first
  step: `agent_steps` and `env_steps` AdamW steps on `batch_size` pairs, lr decayed from `lr` to lr / 10. The env's
  targets (`env_targets`, `env_copy_frac`), the p̂ its prompts show (`env_p_hats`) and the agent's extra tasks with
  skewed digits (`agent_skewed_tasks`, arithmetic only: tasks.arithmetic.skewed_digits): warm_start.sft_batches.
  The defaults are the demo's (configs/default.py says why 2,000 agent steps); configs/qwen2_5_7b.py sets both step
  counts to 0 (an instruction-tuned checkpoint needs no warm start)."""

  agent_steps: int = setting(2000, count(0), "an integer >= 0")
  env_steps: int = setting(150, count(0), "an integer >= 0")
  batch_size: int = setting(64, count(1), "an integer >= 1")
  lr: float = setting(3e-3, positive, "a number > 0")
  agent_skewed_tasks: int = setting(0, count(0), "an integer >= 0 (extra agent SFT tasks with skewed digits)")
  env_copy_frac: float = setting(0.0, unit, "a number in [0, 1] (the share of env targets that restate their seed)")
  env_targets: EnvTargets = setting(ENV_TARGETS[0], *choice(ENV_TARGETS))
  env_p_hats: EnvPHats = setting(ENV_P_HATS[0], *choice(ENV_P_HATS))

  @classmethod
  def constraints(cls, values, path):
    targets, shown = (values.get(k, getattr(cls, k)) for k in ("env_targets", "env_p_hats"))
    if targets == "rate_directed" and shown != "all":
      return [
        f"{path}env_targets = 'rate_directed' directs each env target by the p̂ its prompt shows: set "
        f"{path}env_p_hats = 'all'"
      ]
    return []


@dataclasses.dataclass(frozen=True)
class Settings(Section):
  """The whole tree the step, the warm start, the loop, plan and the logs read (module docstring). The run's schedule
  and checkpoints are top-level keys: `total_steps` co-evolution steps, logged every `log_every`, evaluated every
  `eval_every`, checkpointed every `checkpoint_every` (the last `max_checkpoints` kept)."""

  seed: int = setting(0, count(0), "an integer >= 0")
  total_steps: int = setting(200, count(1), "an integer >= 1")
  checkpoint_every: int = setting(50, count(1), "an integer >= 1")
  eval_every: int = setting(25, count(1), "an integer >= 1")
  log_every: int = setting(5, count(1), "an integer >= 1")
  max_checkpoints: int = setting(2, count(1), "an integer >= 1")
  # resume a workdir whose run had another config (training.loop.RESUMABLE_CHANGES lists what needs no permission)
  allow_config_change: bool = setting(False, boolean, "true or false")
  distributed: bool = setting(False, boolean, "true or false (call jax.distributed.initialize: multi-host pods)")
  tokenizer: str = setting("", is_text, "an HF tokenizer directory, or '' (the shipped arithmetic sentencepiece model)")
  slice: str = setting("", is_text, "a Cloud TPU slice name (e.g. 'v5p-64', what plan plans for), or ''")
  mode: Mode = setting(COEVOLVE, *choice(MODES))
  mesh: MeshSettings = section(MeshSettings)
  domain: DomainSection = section(DomainSection)
  agent: AgentSettings = section(AgentSettings)
  env: EnvSettings = section(EnvSettings)
  pools: PoolSettings = section(PoolSettings)
  warm_start: WarmStartSettings = section(WarmStartSettings)

  @classmethod
  def constraints(cls, values, path):
    """The rows each phase samples and trains on: they must exist, and split as the config asks."""
    out = []
    mode, agent, env, pools = (values.get(k) for k in ("mode", "agent", "env", "pools"))
    if not (agent and env and pools):
      return out
    env_rows = env.num_seeds * env.samples_per_seed if mode == COEVOLVE else 0
    agent_rows = (env_rows + pools.num_replay) * agent.grpo.group_size
    if agent_rows == 0:
      out.append(
        f"{path}pools.num_replay = 0: mode {mode!r} trains only on replayed tasks, so it needs pools.num_replay >= 1"
      )
    minibatches = agent.grpo.minibatches
    if agent_rows % minibatches:
      out.append(
        f"{path}agent.grpo.minibatches = {minibatches}: must divide the agent's {agent_rows} rows per step "
        "((env.num_seeds x env.samples_per_seed + pools.num_replay) x agent.grpo.group_size)"
      )
    for who, rows in (("agent", agent_rows), ("env", env_rows)):
      chunk = values[who].sampling.prefill_rows
      if rows and 0 < chunk < rows and rows % chunk:
        out.append(
          f"{path}{who}.sampling.prefill_rows = {chunk}: must divide the {rows} rows the {who} samples at once"
        )
    domain, warm = values.get("domain") or cls().domain, values.get("warm_start") or cls().warm_start
    if warm.env_targets == "variation" and domain.name != "arithmetic":
      out.append(
        f"{path}warm_start.env_targets = 'variation': only the arithmetic domain can edit its seeds, not "
        f"{domain.name!r}; use 'nearby'"
      )
    return out

  @property
  def num_fresh(self) -> int:
    """Env tasks written per step (0 unless the mode co-evolves)."""
    return self.env.num_seeds * self.env.samples_per_seed if self.mode == COEVOLVE else 0

  @property
  def env_loss(self) -> tuple[float, float, str]:
    """(clip_low, clip_high, kl_estimator) of the env's losses: the agent's (EnvSettings says why)."""
    g = self.agent.grpo
    return g.clip_low, g.clip_high, g.kl_estimator


def problems(config: ml_collections.ConfigDict, fixed: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
  """Every bad value of the config's settings, one line each; empty when they are valid."""
  out: list[str] = []
  read(Settings, config, "", fixed or {}, out)
  return out


def from_config(config: ml_collections.ConfigDict, domain: Any = None, tokenizer: Any = None) -> Settings:
  """The settings tree of a config. `domain` and `tokenizer` fix what the config does not hold: each model's decode
  length (the domain's answer and task lengths) and the token ids (EOS, padding, the tokenizer's vocabulary, which a
  checkpoint's embedding may pad past); without them these keep the sampler's defaults (the tree then checks the
  config alone). Raises SettingsError listing every bad value."""
  fixed = {}
  if tokenizer is not None:
    ids = dict(eos_ids=tuple(tokenizer.eos_ids), pad_id=tokenizer.pad_id, vocab_limit=tokenizer.vocab_size)
    fixed = {"agent.sampling": dict(ids), "env.sampling": dict(ids)}
  if domain is not None:
    fixed.setdefault("agent.sampling", {})["max_new_tokens"] = domain.agent_answer_len
    fixed.setdefault("env.sampling", {})["max_new_tokens"] = domain.env_output_len
  out: list[str] = []
  settings = read(Settings, config, "", fixed, out)
  if out:
    raise SettingsError(f"invalid settings ({len(out)} bad value{'s' * (len(out) > 1)}):\n  " + "\n  ".join(out))
  return settings
