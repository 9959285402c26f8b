"""ALFWorld (Shridhar et al., ICLR 2021) as a step-level `Benchmark`, plus the public ALFWorld API of genenv_jax.

Data: `<data_dir>/alfworld/{valid_unseen,valid_seen,valid_train}/<task>/<trial>/game.tw-pddl` (134 / 140 / 200 games,
json_2.1.1). Items are the decisions of the expert walkthroughs replayed in the real games (`alfworld.steps`; the
replays are cached on disk, so only the first load plays games): id `{split}/{task}/{trial}/step-{k}`, the ReAct-style
prompt of `alfworld.prompt.build_messages` (task, history, current observation, admissible actions), and as gold a dict
`{"action", "admissible", "game", "step", "task_type"}`. valid_unseen has 788 items, valid_seen 812, valid_train 1194.

Scoring: the action is extracted from the output (`Action: ...` line > `> ...` line > first line; see
`alfworld.prompt.extract_action`) and normalised (lower case, single spaces); `correct` iff it equals the normalised
gold action. `detail` also reports whether the predicted action was admissible at that step. Aggregate: step accuracy
and admissible rate per split and overall.

NOT THE PAPER'S METRIC: GenEnv reports ALFWorld episodic success (goal reached within 50 steps); that is
`alfworld.episodes.run_episodes`. Step accuracy against one expert trajectory is a stricter, teacher-forced proxy
(other actions may also lead to the goal), so `aggregate` flags it with `not_comparable_to_paper = 1.0`.

Needs the optional extra for any game play: `pip install -e .[alfworld]` (alfworld==0.4.2, textworld[pddl]==1.7.0).
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Sequence

from genenv_jax.benchmarks.alfworld.env import (
  SPLITS,
  TASK_TYPES,
  AlfworldGame,
  GameState,
  Replay,
  check_split,
  game_name,
  list_games,
  read_walkthrough,
  replay_walkthrough,
  split_intro,
  task_type,
)
from genenv_jax.benchmarks.alfworld.episodes import (
  DEFAULT_MAX_STEPS,
  EpisodeReport,
  EpisodeResult,
  Policy,
  null_policy,
  run_episodes,
  walkthrough_policy,
)
from genenv_jax.benchmarks.alfworld.prompt import (
  SYSTEM_PROMPT,
  build_messages,
  extract_action,
  normalize_action,
  oracle_reply,
)
from genenv_jax.benchmarks.alfworld.steps import (
  StepRecord,
  default_cache_dir,
  load_replay,
  load_step_records,
  select_games,
)
from genenv_jax.tasks.benchmark import EvalItem, ItemResult

__all__ = [
  "SPLITS",
  "TASK_TYPES",
  "AlfworldGame",
  "GameState",
  "Replay",
  "check_split",
  "game_name",
  "list_games",
  "read_walkthrough",
  "replay_walkthrough",
  "split_intro",
  "task_type",
  "DEFAULT_MAX_STEPS",
  "EpisodeReport",
  "EpisodeResult",
  "Policy",
  "null_policy",
  "run_episodes",
  "walkthrough_policy",
  "SYSTEM_PROMPT",
  "build_messages",
  "extract_action",
  "normalize_action",
  "oracle_reply",
  "StepRecord",
  "default_cache_dir",
  "load_replay",
  "load_step_records",
  "select_games",
  "AlfworldStepBenchmark",
  "record_to_item",
  "split_of",
  "NOTE",
]

NOTE = (
  "ALFWorld step accuracy is teacher-forced next-action match against the expert walkthrough; GenEnv reports "
  "episodic success within 50 steps (run_episodes), so the step numbers are not comparable to the paper's."
)


def record_to_item(record: StepRecord, history_window: int | None = None) -> EvalItem:
  """The benchmark item of one step record."""
  gold = {
    "action": record.gold,
    "admissible": list(record.admissible),
    "game": record.game,
    "step": record.step,
    "task_type": record.task_type,
  }
  return EvalItem(id=record.id, split=record.split, messages=record.messages(history_window), gold=gold)


def _mean(values: Sequence[float]) -> float:
  return float(sum(values) / len(values)) if values else 0.0


@dataclasses.dataclass(frozen=True)
class AlfworldStepBenchmark:
  """Step-level ALFWorld: next-action exact match on expert walkthrough steps (see the module docstring).

  `cache_dir`: where walkthrough replays are cached (None: `default_cache_dir()`); `games`: restrict every split to
  these `<task>/<trial>` names (a name a split lacks raises ValueError when that split is loaded); `history_window`:
  the number of past (action, observation) pairs shown in each prompt (None: all).
  """

  cache_dir: str | None = None
  games: tuple[str, ...] | None = None
  history_window: int | None = None
  name: str = dataclasses.field(default="alfworld_steps", init=False)

  def splits(self) -> Sequence[str]:
    return SPLITS

  def load_items(self, data_dir: str, split: str | None = None, limit: int | None = None) -> list[EvalItem]:
    """Items of one split (all splits, in `SPLITS` order, when None); the first `limit` items overall.

    Games are replayed (or read from the cache) one by one, only as many as `limit` needs. Raises ValueError naming
    a bad split, limit or game name, FileNotFoundError when the data is missing.
    """
    chosen = SPLITS if split is None else (check_split(split),)
    if limit is not None and limit < 0:
      raise ValueError(f"limit must be >= 0 or None, got {limit}")
    per_split: dict[str, list[str] | None] = {name: None for name in chosen}
    if self.games is not None:
      names = {name: {game_name(p) for p in list_games(data_dir, name)} for name in chosen}
      missing = [g for g in self.games if not any(g in names[name] for name in chosen)]
      if missing:
        raise ValueError(f"ALFWorld split(s) {', '.join(chosen)} have no game(s) {', '.join(missing)}")
      per_split = {name: [g for g in self.games if g in names[name]] for name in chosen}
    items: list[EvalItem] = []
    for name in chosen:
      remaining = None if limit is None else limit - len(items)
      if remaining == 0:
        break
      if per_split[name] == []:
        continue
      records = load_step_records(data_dir, name, self.cache_dir, per_split[name], remaining)
      items += [record_to_item(r, self.history_window) for r in records]
    return items

  def score(self, item: EvalItem, output: str) -> ItemResult:
    """Exact match of the normalised extracted action with the gold action; never raises on malformed output."""
    prediction = extract_action(output)
    gold = normalize_action(str(item.gold["action"]))
    admissible = {normalize_action(a) for a in item.gold.get("admissible", ())}
    correct = bool(prediction) and prediction == gold
    detail = {"prediction": prediction, "gold": gold, "admissible": prediction in admissible}
    return ItemResult(item.id, item.split, correct, 1.0 if correct else 0.0, detail)

  def oracle_output(self, item: EvalItem) -> str:
    return oracle_reply(str(item.gold["action"]))

  def aggregate(self, results: Sequence[ItemResult]) -> dict[str, float]:
    """`step_accuracy`, `admissible_rate` and `n` per split (`<split>/...`) and overall; see NOTE for the flag."""
    metrics: dict[str, float] = {}
    groups = [(f"{s}/", [r for r in results if r.split == s]) for s in sorted({r.split for r in results})]
    for prefix, chosen in groups + [("", list(results))]:
      metrics[f"{prefix}step_accuracy"] = _mean([float(r.correct) for r in chosen])
      metrics[f"{prefix}admissible_rate"] = _mean([float(bool(r.detail.get("admissible"))) for r in chosen])
      metrics[f"{prefix}n"] = float(len(chosen))
    metrics["not_comparable_to_paper"] = 1.0
    return metrics


def split_of(game_path: str | pathlib.Path) -> str:
  """The split folder a game file lies in (e.g. "valid_unseen"); raises ValueError when it is not under one."""
  split = pathlib.Path(game_path).parent.parent.parent.name
  return check_split(split)
