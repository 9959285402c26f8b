"""Domain names -> constructors, for configs (`config.domain.name`).

`arithmetic` is the embedded synthetic domain. The five benchmark training domains are `text_domain.TextDomain`
over a task family: `api_bank`, `bfcl`, `bamboogle` (closed-book QA), `travelplanner` and `alfworld` (step level).
Their settings: `data_dir` (empty: `genenv_jax.data.resolve_data_dir`'s default; the datasets in FAMILY_DATA must
be there, else a DataMissingError naming the file and the fetch command), `num_seeds` (0 = every training task that
fits), `num_heldout`, the four lengths and `spec_len` (bytes), `success_threshold`, plus the family options in
FAMILY_OPTIONS. The tokenizer is the run's
(`config.tokenizer`: an HF tokenizer directory, or empty for the shipped sentencepiece model with byte fallback).
"""

from __future__ import annotations

from typing import Any

import ml_collections

from genenv_jax.domains.base import Domain
from genenv_jax.tokenizer import Tokenizer

TEXT_SETTINGS = ("data_dir", "num_seeds", "num_heldout", "agent_prompt_len", "agent_answer_len", "env_prompt_len",
                 "env_output_len", "spec_len", "success_threshold")
FAMILY_OPTIONS = {"api_bank": (), "bfcl": (), "bamboogle": (), "travelplanner": ("num_candidates",),
                  "alfworld": ("num_games", "cache_dir")}
TEXT_DOMAINS = tuple(FAMILY_OPTIONS)
# the datasets (genenv_jax/data/manifest.json) each family reads: its benchmark's, plus its seed sources
FAMILY_DATA = {"api_bank": ("api_bank",), "bfcl": ("bfcl", "tool_calling_seed"), "bamboogle": ("bamboogle",
               "travelplanner"), "travelplanner": ("travelplanner",), "alfworld": ("alfworld",)}
DOMAINS = ("arithmetic",) + TEXT_DOMAINS


def _family(name: str, data_dir: str, options: dict[str, Any]) -> Any:
  """The task family of a text domain (imported lazily: ALFWorld needs its optional packages only when chosen)."""
  if name == "api_bank":
    from genenv_jax.domains.api_bank_tasks import ApiBankTasks
    return ApiBankTasks(**options)
  if name == "bfcl":
    from genenv_jax.domains.bfcl_tasks import BfclTasks
    return BfclTasks(**options)
  if name == "bamboogle":
    from genenv_jax.domains.qa_tasks import QaTasks
    return QaTasks(**options)
  if name == "travelplanner":
    from genenv_jax.domains.travelplanner_tasks import TravelPlannerTasks
    return TravelPlannerTasks(data_dir, **options)
  from genenv_jax.domains.alfworld_tasks import AlfworldTasks
  return AlfworldTasks(**options)


def build_text_domain(name: str, settings: dict[str, Any], tokenizer: Tokenizer, seed: int) -> Domain:
  """A benchmark training domain from a flat settings dict (keys: TEXT_SETTINGS and the family's options)."""
  from genenv_jax.data import require, resolve_data_dir
  from genenv_jax.domains.text_domain import TextDomain

  allowed = set(TEXT_SETTINGS) | set(FAMILY_OPTIONS[name])
  unknown = sorted(set(settings) - allowed)
  if unknown:
    raise ValueError(f"domain {name!r} has no setting(s) {unknown}; its settings are {sorted(allowed)}")
  data_dir = str(require(resolve_data_dir(settings.get("data_dir")), FAMILY_DATA[name]))
  options = {k: (v or None if k == "cache_dir" else v) for k, v in settings.items() if k in FAMILY_OPTIONS[name]}
  domain_settings = {k: v for k, v in settings.items() if k in TEXT_SETTINGS and k != "data_dir"}
  return TextDomain(_family(name, data_dir, options), tokenizer, data_dir=data_dir, seed=seed, **domain_settings)


def build_domain(cfg: ml_collections.ConfigDict, tokenizer: Tokenizer, seed: int) -> Domain:
  """Builds the training domain named by cfg.name with the remaining cfg fields as its settings."""
  name = cfg.name
  if name == "arithmetic":
    from genenv_jax.domains.arithmetic import ArithmeticDomain
    settings = {k: v for k, v in cfg.items() if k not in ("name", "success_threshold")}
    return ArithmeticDomain(tokenizer, seed=seed, **settings)
  if name in TEXT_DOMAINS:
    return build_text_domain(name, {k: v for k, v in cfg.items() if k != "name"}, tokenizer, seed)
  raise ValueError(f"unknown domain {name!r}; available training domains: {', '.join(DOMAINS)}")
