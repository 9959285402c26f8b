"""The one registry: each benchmark's evaluator (`genenv_jax.evaluate --benchmark NAME`) and training domain
(`config.domain.name`), by name.

Evaluators: `make_benchmark(name)`; each entry names the module and the class, imported only when that benchmark is
built, so a missing optional dependency of one benchmark (ALFWorld's game engine) never breaks the others. A module
that defines `NOTE` (a str) has it printed under the metrics table: Bamboogle's and ALFWorld's say why their numbers
are not comparable to the paper's.

Training domains: `build_domain(config.domain, ...)`.
`arithmetic` is the embedded synthetic domain. The five benchmark training domains are `text_domain.TextDomain`
over a task family: `api_bank`, `bfcl`, `bamboogle` (closed-book QA), `travelplanner` and `alfworld` (step level).
Their settings: `data_dir` (empty: `genenv_jax.data.resolve_data_dir`'s default; the datasets in FAMILY_DATA must
be there, else a DataMissingError naming the file and the fetch command), `num_seeds` (0 = every training task that
fits), `num_heldout`, the four lengths and `spec_len` (bytes), `success_threshold`, plus the family options in
FAMILY_OPTIONS. The tokenizer is the run's
(`config.tokenizer`: an HF tokenizer directory, or empty for the shipped sentencepiece model with byte fallback).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import ml_collections

from genenv_jax.models.tokenizer import Tokenizer
from genenv_jax.tasks.base import Domain
from genenv_jax.tasks.benchmark import Benchmark


@dataclasses.dataclass(frozen=True)
class Entry:
  """One benchmark: its evaluator and training family as "module:Class", the family's options, and the datasets
  (genenv_jax/data/manifest.json) the family reads: its benchmark's, plus its seed sources."""

  evaluator: str
  family: str
  family_options: tuple[str, ...] = ()
  family_data: tuple[str, ...] = ()
  family_takes_data_dir: bool = False


# The names are the CLI's and the configs'; an evaluator class's own `name` attribute may differ ("alfworld_steps").
BENCHMARKS: dict[str, Entry] = {
  "api_bank": Entry(
    "genenv_jax.benchmarks.api_bank.evaluator:ApiBankBenchmark",
    "genenv_jax.benchmarks.api_bank.family:ApiBankTasks",
    family_data=("api_bank",),
  ),
  "bfcl": Entry(
    "genenv_jax.benchmarks.bfcl.evaluator:BfclBenchmark",
    "genenv_jax.benchmarks.bfcl.family:BfclTasks",
    family_data=("bfcl", "tool_calling_seed"),
  ),
  "bamboogle": Entry(
    "genenv_jax.benchmarks.bamboogle.evaluator:BamboogleBenchmark",
    "genenv_jax.benchmarks.bamboogle.family:QaTasks",
    family_data=("bamboogle", "travelplanner"),
  ),
  "travelplanner": Entry(
    "genenv_jax.benchmarks.travelplanner.evaluator:TravelPlannerBenchmark",
    "genenv_jax.benchmarks.travelplanner.family:TravelPlannerTasks",
    family_options=("num_candidates",),
    family_data=("travelplanner",),
    family_takes_data_dir=True,
  ),
  "alfworld": Entry(
    "genenv_jax.benchmarks.alfworld.evaluator:AlfworldStepBenchmark",
    "genenv_jax.benchmarks.alfworld.family:AlfworldTasks",
    family_options=("num_games", "cache_dir"),
    family_data=("alfworld",),
  ),
}


def _load(name: str, target: str) -> Any:
  """The attribute named by "module:Attr", imported now; an ImportError names the benchmark."""
  module_name, attr = target.split(":")
  try:
    return getattr(importlib.import_module(module_name), attr)
  except ImportError as err:
    raise ImportError(f"benchmark {name!r} could not be imported from {module_name} ({err})") from err


def _entry(name: str) -> Entry:
  if name not in BENCHMARKS:
    raise ValueError(f"unknown benchmark {name!r}; choose one of: {', '.join(BENCHMARKS)}")
  return BENCHMARKS[name]


def benchmark_names() -> tuple[str, ...]:
  """The registered names, in registry order."""
  return tuple(BENCHMARKS)


def make_benchmark(name: str, **options: Any) -> Benchmark:
  """Builds the benchmark registered as `name`; `options` go to its constructor (e.g. `cache_dir` for alfworld).

  Raises ValueError naming an unknown benchmark (and listing the known ones) or an option its constructor rejects.
  """
  cls = _load(name, _entry(name).evaluator)
  try:
    return cls(**options)
  except TypeError as err:
    raise ValueError(f"benchmark {name!r} ({cls.__name__}) does not take the options {sorted(options)}: {err}") from err


def benchmark_note(name: str) -> str | None:
  """The evaluator module's `NOTE` (a caveat to print beside the metrics), or None when it has none."""
  module = importlib.import_module(_entry(name).evaluator.split(":")[0])
  note = getattr(module, "NOTE", None)
  return note if isinstance(note, str) and note.strip() else None


TEXT_SETTINGS = (
  "data_dir",
  "num_seeds",
  "num_heldout",
  "agent_prompt_len",
  "agent_answer_len",
  "env_prompt_len",
  "env_output_len",
  "spec_len",
  "success_threshold",
)
FAMILY_OPTIONS = {name: e.family_options for name, e in BENCHMARKS.items()}
TEXT_DOMAINS = tuple(BENCHMARKS)
FAMILY_DATA = {name: e.family_data for name, e in BENCHMARKS.items()}
DOMAINS = ("arithmetic",) + TEXT_DOMAINS
# The arithmetic domain's answer forms (domain.answer): the value (ArithmeticDomain), or the last digit of every
# running value (arithmetic.running.RunningSumDomain).
ARITHMETIC_ANSWERS = ("value", "running")


def _family(name: str, data_dir: str, options: dict[str, Any]) -> Any:
  """The task family of a text domain (imported lazily: ALFWorld needs its optional packages only when chosen)."""
  entry = _entry(name)
  cls = _load(name, entry.family)
  return cls(data_dir, **options) if entry.family_takes_data_dir else cls(**options)


def build_text_domain(name: str, settings: dict[str, Any], tokenizer: Tokenizer, seed: int) -> Domain:
  """A benchmark training domain from a flat settings dict (keys: TEXT_SETTINGS and the family's options)."""
  from genenv_jax.data import require, resolve_data_dir
  from genenv_jax.tasks.text_domain import TextDomain

  allowed = set(TEXT_SETTINGS) | set(FAMILY_OPTIONS[name])
  unknown = sorted(set(settings) - allowed)
  if unknown:
    raise ValueError(f"domain {name!r} has no setting(s) {unknown}; its settings are {sorted(allowed)}")
  data_dir = str(require(resolve_data_dir(settings.get("data_dir")), FAMILY_DATA[name]))
  options = {k: (v or None if k == "cache_dir" else v) for k, v in settings.items() if k in FAMILY_OPTIONS[name]}
  domain_settings = {k: v for k, v in settings.items() if k in TEXT_SETTINGS and k != "data_dir"}
  return TextDomain(_family(name, data_dir, options), tokenizer, data_dir=data_dir, seed=seed, **domain_settings)


def build_domain(cfg: ml_collections.ConfigDict, tokenizer: Tokenizer, seed: int, answer: str) -> Domain:
  """Builds the training domain named by cfg.name with the remaining cfg fields as its settings; `answer` is the
  arithmetic domain's answer form (coevolution.settings.DomainSection.answer, the section's one default for a config
  saved before the key existed)."""
  name = cfg.name
  if name == "arithmetic":
    from genenv_jax.tasks.arithmetic.domain import ArithmeticDomain
    from genenv_jax.tasks.arithmetic.running import RunningSumDomain

    settings = {k: v for k, v in cfg.items() if k not in ("name", "success_threshold", "answer")}
    if answer not in ARITHMETIC_ANSWERS:
      raise ValueError(f"domain.answer must be one of {ARITHMETIC_ANSWERS}, got {answer!r}")
    cls = RunningSumDomain if answer == "running" else ArithmeticDomain
    return cls(tokenizer, seed=seed, **settings)
  if name in TEXT_DOMAINS:
    return build_text_domain(name, {k: v for k, v in cfg.items() if k != "name"}, tokenizer, seed)
  raise ValueError(f"unknown domain {name!r}; available training domains: {', '.join(DOMAINS)}")
