"""Config validation before any work: every bad value of a run's config, listed at once.

`problems(config)` returns one line per bad value: its key path, its value and what is allowed. `validate(config)`
raises `ConfigError` listing them all. The CLIs (`main`, `plan`, `sweep`) call it right after the flags are parsed,
before anything is built, compiled or warm-started, and exit with status 2 on a `ConfigError`.

Covered: every numeric field with a natural range (learning rates > 0, probabilities in [0, 1], counts >= 1, ...),
every choice field (checked against the registries the code dispatches on, so the lists cannot drift), and the
cross-field constraints: group size >= 2, the α band α ± k_min inside [0, 1], the GRPO mini-batches and the prefill
row chunks dividing the rows they split, min <= max operand counts, the attention heads divisible by the KV heads.
A key that a config does not have is not checked (older configs, variants that drop a section). The domain's lengths
against its longest task are checked when the domain is built (`tasks`: the first thing `build` does), before any
model exists.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

import ml_collections

from genenv_jax.benchmarks.registry import ARITHMETIC_ANSWERS, DOMAINS
from genenv_jax.coevolution.step import ENV_POOL_ADMITS
from genenv_jax.models.attention import IMPLEMENTATIONS
from genenv_jax.models.config import REMAT_POLICIES
from genenv_jax.models.transformer import KV_CACHE_KINDS
from genenv_jax.rl.curriculum import KL_CAP_MODES
from genenv_jax.rl.grpo import ADVANTAGE_ESTIMATORS, KL_ESTIMATORS, LOSS_AGGREGATIONS
from genenv_jax.training.warm_start import ENV_P_HATS, ENV_TARGETS

MODES = ("coevolve", "static", "grpo")
ENV_OBJECTIVES = ("rwr", "pg")
DTYPES = ("float32", "bfloat16", "float16")
VERIFIERS = ("jax", "host")


class ConfigError(ValueError):
  """A config with bad values; the message lists every one, a line each."""


_MISSING = object()


def _get(config: ml_collections.ConfigDict, path: str) -> Any:
  node: Any = config
  for part in path.split("."):
    if not hasattr(node, "get") or part not in node:
      return _MISSING
    node = node[part]
  return node


def _is_int(v: Any) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _positive(v):
  return _is_real(v) and v > 0


def _non_negative(v):
  return _is_real(v) and v >= 0


def _unit(v):
  return _is_real(v) and 0 <= v <= 1


def _count(minimum: int) -> Callable[[Any], bool]:
  return lambda v: _is_int(v) and v >= minimum


def _choice(options: Iterable[str]) -> tuple[Callable[[Any], bool], str]:
  options = tuple(options)
  return (lambda v: v in options), "one of " + ", ".join(repr(o) for o in options)


# (key path, test, what is allowed). Model, optimizer and sampling fields are checked under agent. and env.
_TOP = [
  ("seed", _count(0), "an integer >= 0"),
  ("total_steps", _count(1), "an integer >= 1"),
  ("checkpoint_every", _count(1), "an integer >= 1"),
  ("eval_every", _count(1), "an integer >= 1"),
  ("log_every", _count(1), "an integer >= 1"),
  ("max_checkpoints", _count(1), "an integer >= 1"),
  ("mode", *_choice(MODES)),
  ("allow_config_change", lambda v: isinstance(v, bool), "true or false"),
  ("domain.name", *_choice(DOMAINS)),
  ("domain.verifier", *_choice(VERIFIERS)),
  ("domain.answer", *_choice(ARITHMETIC_ANSWERS)),
  ("domain.num_seeds", _count(0), "an integer >= 0"),
  ("domain.num_heldout", _count(1), "an integer >= 1"),
  ("domain.min_operands", _count(2), "an integer >= 2"),
  ("domain.max_digits", _count(1), "an integer >= 1"),
  ("domain.bound", _count(1), "an integer >= 1"),
  ("domain.seed_max_difficulty", _count(0), "an integer >= 0"),
  ("domain.seed_decay", _positive, "a number > 0"),
  ("domain.agent_prompt_len", _count(0), "an integer >= 0 (0 = what the longest task needs)"),
  ("domain.agent_answer_len", _count(0), "an integer >= 0 (0 = what the longest task needs)"),
  ("domain.env_prompt_len", _count(0), "an integer >= 0 (0 = what the longest task needs)"),
  ("domain.env_output_len", _count(0), "an integer >= 0 (0 = what the longest task needs)"),
  ("domain.success_threshold", _unit, "a number in [0, 1]"),
  ("agent.logprob_chunk", _count(1), "an integer >= 1"),
  ("agent.grpo.group_size", _count(2), "an integer >= 2 (GRPO compares rollouts within a group)"),
  ("agent.grpo.advantage", *_choice(ADVANTAGE_ESTIMATORS)),
  ("agent.grpo.clip_low", lambda v: _is_real(v) and 0 <= v < 1, "a number in [0, 1)"),
  ("agent.grpo.clip_high", _non_negative, "a number >= 0"),
  ("agent.grpo.kl_coef", _non_negative, "a number >= 0"),
  ("agent.grpo.kl_estimator", *_choice(KL_ESTIMATORS)),
  ("agent.grpo.entropy_coef", _is_real, "a finite number"),
  ("agent.grpo.loss_agg", *_choice(LOSS_AGGREGATIONS)),
  ("agent.grpo.minibatches", _count(1), "an integer >= 1"),
  ("env.objective", *_choice(ENV_OBJECTIVES)),
  ("env.logprob_chunk", _count(1), "an integer >= 1"),
  ("env.num_seeds", _count(1), "an integer >= 1"),
  ("env.samples_per_seed", _count(1), "an integer >= 1"),
  ("env.curriculum.alpha", _unit, "a number in [0, 1] (the target success rate)"),
  ("env.curriculum.beta", _positive, "a number > 0"),
  ("env.curriculum.k_min", _unit, "a number in [0, 1] (the band's half-width)"),
  ("env.curriculum.rwr_lambda", _positive, "a number > 0"),
  ("env.kl_coef", _non_negative, "a number >= 0"),
  ("env.max_kl", _positive, "a number > 0"),
  ("env.kl_cap_mode", *_choice(KL_CAP_MODES)),
  ("pools.train_capacity", _count(1), "an integer >= 1"),
  ("pools.env_capacity", _count(1), "an integer >= 1"),
  ("pools.num_replay", _count(0), "an integer >= 0"),
  ("pools.new_window", _count(1), "an integer >= 1"),
  ("pools.env_admits", *_choice(ENV_POOL_ADMITS)),
  ("pools.static_rounds", _count(1), "an integer >= 1"),
  ("warm_start.agent_steps", _count(0), "an integer >= 0"),
  ("warm_start.env_steps", _count(0), "an integer >= 0"),
  ("warm_start.batch_size", _count(1), "an integer >= 1"),
  ("warm_start.lr", _positive, "a number > 0"),
  ("warm_start.env_copy_frac", _unit, "a number in [0, 1] (the share of env targets that restate their seed)"),
  ("warm_start.env_targets", *_choice(ENV_TARGETS)),
  ("warm_start.env_p_hats", *_choice(ENV_P_HATS)),
]
_PER_MODEL = [
  ("model.hidden_size", _count(1), "an integer >= 1"),
  ("model.intermediate_size", _count(1), "an integer >= 1"),
  ("model.num_layers", _count(1), "an integer >= 1"),
  ("model.num_heads", _count(1), "an integer >= 1"),
  ("model.num_kv_heads", _count(1), "an integer >= 1"),
  ("model.head_dim", _count(1), "an integer >= 1"),
  ("model.rope_theta", _positive, "a number > 0"),
  ("model.max_position_embeddings", _count(1), "an integer >= 1"),
  ("model.dtype", *_choice(DTYPES)),
  (
    "model.remat",
    lambda v: isinstance(v, bool) or v in REMAT_POLICIES,
    "true, false or one of " + ", ".join(REMAT_POLICIES),
  ),
  ("model.attention", *_choice(IMPLEMENTATIONS)),
  ("optimizer.lr", _positive, "a number > 0"),
  ("optimizer.weight_decay", _non_negative, "a number >= 0"),
  ("optimizer.max_grad_norm", _positive, "a number > 0"),
  ("optimizer.eps", _positive, "a number > 0"),
  ("optimizer.warmup_steps", _count(0), "an integer >= 0"),
  ("sampling.temperature", _non_negative, "a number >= 0 (0 = greedy)"),
  ("sampling.top_k", _count(0), "an integer >= 0 (0 = off)"),
  ("sampling.top_p", lambda v: _is_real(v) and 0 < v <= 1, "a number in (0, 1] (1 = off)"),
  ("sampling.prefill_rows", _count(0), "an integer >= 0 (0 = every row at once)"),
  ("sampling.kv_cache", *_choice(KV_CACHE_KINDS)),
]


def _mix_problem(path: str, mix: Any) -> str | None:
  if mix is _MISSING:
    return None
  values = list(mix) if isinstance(mix, (list, tuple)) else None
  if not values or not all(_non_negative(v) for v in values) or abs(sum(values) - 1.0) > 1e-6:
    return f"{path} = {mix!r}: must be non-negative fractions that sum to 1"
  return None


def problems(config: ml_collections.ConfigDict) -> list[str]:
  """Every bad value of `config`, one line each ("key = value: allowed"); empty when the config is valid."""
  out = []

  def check(path, test, allowed):
    value = _get(config, path)
    if value is not _MISSING and not test(value):
      out.append(f"{path} = {value!r}: must be {allowed}")

  for path, test, allowed in _TOP:
    check(path, test, allowed)
  for who in ("agent", "env"):
    for path, test, allowed in _PER_MODEL:
      if (
        path.startswith("model.")
        and path != "model.remat"
        and path != "model.dtype"
        and _get(config, f"{who}.model.hf_path")
      ):
        continue  # an HF checkpoint brings its own shape
      check(f"{who}.{path}", test, allowed)
  for path in ("pools.replay_mix", "pools.env_seed_mix"):
    problem = _mix_problem(path, _get(config, path))
    if problem:
      out.append(problem)
  mesh = _get(config, "mesh")
  for name, value in mesh.items() if mesh is not _MISSING else ():
    if not _is_int(value) or not (value == -1 or value >= 1):
      out.append(f"mesh.{name} = {value!r}: must be an integer >= 1, or -1 (every remaining device)")
  return out + _cross_field_problems(config)


def _cross_field_problems(config: ml_collections.ConfigDict) -> list[str]:
  out = []
  g = lambda path: _get(config, path)  # noqa: E731
  alpha, k_min = g("env.curriculum.alpha"), g("env.curriculum.k_min")
  if _unit(alpha) and _unit(k_min) and not (0 <= alpha - k_min and alpha + k_min <= 1):
    out.append(
      f"env.curriculum.alpha ± k_min = {alpha} ± {k_min}: the band [{alpha - k_min:g}, {alpha + k_min:g}] must lie "
      "inside [0, 1]"
    )
  domain, targets = g("domain.name"), g("warm_start.env_targets")
  if targets == "rate_directed" and g("warm_start.env_p_hats") in set(ENV_P_HATS) - {"all"}:  # a bad value: named above
    out.append(
      "warm_start.env_targets = 'rate_directed' directs each env target by the p̂ its prompt shows: set "
      "warm_start.env_p_hats = 'all'"
    )
  if targets == "variation" and domain in DOMAINS and domain != "arithmetic":
    out.append(
      f"warm_start.env_targets = 'variation': only the arithmetic domain can edit its seeds, not {domain!r}; "
      "use 'nearby'"
    )
  lo, hi = g("domain.min_operands"), g("domain.max_operands")
  if _is_int(lo) and _is_int(hi) and hi < lo:
    out.append(f"domain.max_operands = {hi}: must be >= domain.min_operands ({lo})")
  for who in ("agent", "env"):
    if g(f"{who}.model.hf_path"):
      continue
    heads, kv = g(f"{who}.model.num_heads"), g(f"{who}.model.num_kv_heads")
    if _is_int(heads) and _is_int(kv) and kv >= 1 and heads % kv:
      out.append(f"{who}.model.num_heads = {heads}: must be a multiple of {who}.model.num_kv_heads ({kv})")

  # The rows each phase samples and trains on, as coevolution.StepSettings counts them.
  mode, group = g("mode"), g("agent.grpo.group_size")
  seeds, per_seed, replay = g("env.num_seeds"), g("env.samples_per_seed"), g("pools.num_replay")
  if all(_is_int(v) for v in (group, seeds, per_seed, replay)) and mode in MODES:
    env_rows = seeds * per_seed if mode == "coevolve" else 0
    agent_rows = (env_rows + replay) * group
    if agent_rows == 0:
      out.append(
        f"pools.num_replay = {replay}: mode {mode!r} trains only on replayed tasks, so it needs pools.num_replay >= 1"
      )
    minibatches = g("agent.grpo.minibatches")
    if agent_rows and _is_int(minibatches) and minibatches >= 1 and agent_rows % minibatches:
      out.append(
        f"agent.grpo.minibatches = {minibatches}: must divide the agent's {agent_rows} rows per step "
        f"((env.num_seeds x env.samples_per_seed + pools.num_replay) x agent.grpo.group_size)"
      )
    for who, rows in (("agent", agent_rows), ("env", env_rows)):
      chunk = g(f"{who}.sampling.prefill_rows")
      if rows and _is_int(chunk) and 0 < chunk < rows and rows % chunk:
        out.append(f"{who}.sampling.prefill_rows = {chunk}: must divide the {rows} rows the {who} samples at once")
  return out


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ConfigError listing every bad value of `config` (see `problems`)."""
  found = problems(config)
  if found:
    raise ConfigError(
      f"invalid config ({len(found)} bad value{'s' if len(found) > 1 else ''}; fix them with --config.KEY=VALUE):\n  "
      + "\n  ".join(found)
    )
