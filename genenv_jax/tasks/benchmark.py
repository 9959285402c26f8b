"""The evaluation interface every benchmark domain implements.

A benchmark turns real data into `EvalItem`s (a chat prompt for the agent plus the gold answer), scores one model
output per item into an `ItemResult`, and aggregates results into the benchmark's headline metrics. Two reference
agents check an evaluator: the oracle (`Benchmark.oracle_output`) must score 100%, the null agent (empty output) 0%
(BFCL irrelevance excepted, where "no call" is the right answer).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Protocol, Sequence

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant" | "tool", "content": str}


@dataclasses.dataclass(frozen=True)
class EvalItem:
  """One scored unit of a benchmark: the prompt the agent sees and the gold answer it is checked against."""

  id: str
  split: str
  messages: tuple[Message, ...]
  gold: Any


@dataclasses.dataclass(frozen=True)
class ItemResult:
  """The verdict on one item; `score` is in [0, 1] (1.0 or 0.0 for exact-match benchmarks)."""

  id: str
  split: str
  correct: bool
  score: float
  detail: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def to_json(self) -> dict[str, Any]:
    return {
      "id": self.id,
      "split": self.split,
      "correct": bool(self.correct),
      "score": float(self.score),
      **({"detail": dict(self.detail)} if self.detail else {}),
    }


class Benchmark(Protocol):
  """What `genenv_jax.evaluate` needs from a benchmark."""

  name: str

  def splits(self) -> Sequence[str]:
    """The split names `load_items(split=...)` accepts."""

  def load_items(self, data_dir: str, split: str | None = None, limit: int | None = None) -> list[EvalItem]:
    """Reads the items from `data_dir` (a data directory, see genenv_jax.data); raises ValueError naming a bad split."""

  def score(self, item: EvalItem, output: str) -> ItemResult:
    """Scores one model output; malformed output scores 0, it never raises."""

  def oracle_output(self, item: EvalItem) -> str:
    """A model output that the gold answer would produce; it must score as correct."""

  def aggregate(self, results: Sequence[ItemResult]) -> dict[str, float]:
    """Headline metrics (per split and overall), as the benchmark reports them."""
