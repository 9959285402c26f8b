"""Config validation before any work: every bad value of a run's config, listed at once.

`problems(config)` returns one line per bad value: its key path, its value and what is allowed. `validate(config)`
raises `ConfigError` listing them all. The CLIs (`main`, `plan`, `sweep`) call it right after the flags are parsed,
before anything is built, compiled or warm-started, and exit with status 2 on a `ConfigError`.

Two sources, one list. The sections the co-evolution step and the warm start read (mode, domain.success_threshold,
agent, env, pools, warm_start; coevolution/settings.py) check themselves: each setting is declared there once, with
its default and its test, and `settings.problems` lists their bad values. This module checks the rest: the run's
schedule, the domain's tasks, the models' shapes, the mesh, and what crosses from one section into another (min <=
max operand counts, the attention heads divisible by the KV heads, the warm start's env targets against the domain).
Choice fields are checked against the registries the code dispatches on, so the lists cannot drift. A key
that a config does not have is not checked (older configs, variants that drop a section). The domain's lengths
against its longest task are checked when the domain is built (`tasks`: the first thing `build` does), before any
model exists.
"""

from __future__ import annotations

from typing import Any

import ml_collections

from genenv_jax.benchmarks.registry import ARITHMETIC_ANSWERS, DOMAINS
from genenv_jax.coevolution import settings
from genenv_jax.coevolution.settings import choice as _choice
from genenv_jax.coevolution.settings import count as _count
from genenv_jax.coevolution.settings import is_int as _is_int
from genenv_jax.coevolution.settings import positive as _positive
from genenv_jax.models.attention import IMPLEMENTATIONS
from genenv_jax.models.config import REMAT_POLICIES

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


# (key path, test, what is allowed) for the sections outside the settings tree. Model fields: under agent. and env.
_TOP = [
  ("seed", _count(0), "an integer >= 0"),
  ("total_steps", _count(1), "an integer >= 1"),
  ("checkpoint_every", _count(1), "an integer >= 1"),
  ("eval_every", _count(1), "an integer >= 1"),
  ("log_every", _count(1), "an integer >= 1"),
  ("max_checkpoints", _count(1), "an integer >= 1"),
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
]


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
      if path not in ("model.remat", "model.dtype") and _get(config, f"{who}.model.hf_path"):
        continue  # an HF checkpoint brings its own shape
      check(f"{who}.{path}", test, allowed)
  mesh = _get(config, "mesh")
  for name, value in mesh.items() if mesh is not _MISSING else ():
    if not _is_int(value) or not (value == -1 or value >= 1):
      out.append(f"mesh.{name} = {value!r}: must be an integer >= 1, or -1 (every remaining device)")
  return out + settings.problems(config) + _cross_field_problems(config)


def _cross_field_problems(config: ml_collections.ConfigDict) -> list[str]:
  out = []
  g = lambda path: _get(config, path)  # noqa: E731
  domain, targets = g("domain.name"), g("warm_start.env_targets")
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

  return out


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ConfigError listing every bad value of `config` (see `problems`)."""
  found = problems(config)
  if found:
    raise ConfigError(
      f"invalid config ({len(found)} bad value{'s' if len(found) > 1 else ''}; fix them with --config.KEY=VALUE):\n  "
      + "\n  ".join(found)
    )
