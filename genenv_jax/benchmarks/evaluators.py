"""Benchmark names -> `Benchmark` constructors, for `genenv_jax.evaluate` (`--benchmark NAME`).

Each entry names the module and the class; the module is imported only when that benchmark is built, so a missing
optional dependency of one benchmark (ALFWorld's game engine) never breaks the others. Adding a benchmark is one line
in `BENCHMARKS`. A module that defines `NOTE` (a str) has it printed under the metrics table: Bamboogle's and ALFWorld's
say why their numbers are not comparable to the paper's.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from genenv_jax.tasks.benchmark import Benchmark

# name -> (module, class). The names are the CLI's; the class's own `name` attribute may differ ("alfworld_steps").
BENCHMARKS: Mapping[str, tuple[str, str]] = {
    "api_bank": ("genenv_jax.benchmarks.api_bank.evaluator", "ApiBankBenchmark"),
    "bfcl": ("genenv_jax.benchmarks.bfcl.evaluator", "BfclBenchmark"),
    "bamboogle": ("genenv_jax.benchmarks.bamboogle.evaluator", "BamboogleBenchmark"),
    "travelplanner": ("genenv_jax.benchmarks.travelplanner.evaluator", "TravelPlannerBenchmark"),
    "alfworld": ("genenv_jax.benchmarks.alfworld.evaluator", "AlfworldStepBenchmark"),
}


def benchmark_names() -> tuple[str, ...]:
  """The registered names, in registry order."""
  return tuple(BENCHMARKS)


def _module(name: str) -> Any:
  if name not in BENCHMARKS:
    raise ValueError(f"unknown benchmark {name!r}; choose one of: {', '.join(BENCHMARKS)}")
  module_name, _ = BENCHMARKS[name]
  try:
    return importlib.import_module(module_name)
  except ImportError as err:
    raise ImportError(f"benchmark {name!r} could not be imported from {module_name} ({err})") from err


def make_benchmark(name: str, **options: Any) -> Benchmark:
  """Builds the benchmark registered as `name`; `options` go to its constructor (e.g. `cache_dir` for alfworld).

  Raises ValueError naming an unknown benchmark (and listing the known ones) or an option its constructor rejects.
  """
  module = _module(name)
  cls = getattr(module, BENCHMARKS[name][1])
  try:
    return cls(**options)
  except TypeError as err:
    raise ValueError(f"benchmark {name!r} ({cls.__name__}) does not take the options {sorted(options)}: {err}") from err


def benchmark_note(name: str) -> str | None:
  """The module's `NOTE` (a caveat to print beside the metrics), or None when it has none."""
  note = getattr(_module(name), "NOTE", None)
  return note if isinstance(note, str) and note.strip() else None
