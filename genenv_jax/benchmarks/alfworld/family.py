"""ALFWorld next-action steps as a training task family (the "alfworld" training domain, step level).

Seeds: the expert-walkthrough steps of `alfworld/valid_train` games, replayed in the real games and cached on disk
(`alfworld.steps.load_step_records`). The ALFWorld evaluation splits are valid_unseen (the paper's 134 games) and
valid_seen; their games are never seeds. `num_games` games are taken evenly spaced over the sorted valid_train list (so
every task type is represented); a first replay plays the game (seconds, docs/EXPERIMENTS.md, "Costs behind
implementation choices"), later loads read the cache.

Env text format (a decision: the task, the room, up to MAX_HISTORY earlier steps, the observation, the commands and
the next action):
  Task: put a clean mug in coffeemachine.
  Room: You are in the middle of a room. Looking quickly around you, you see a cabinet 1, ...
  Before: go to countertop 1 => You arrive at countertop 1. On the countertop 1, you see a mug 1.
  Observation: You arrive at countertop 1. On the countertop 1, you see a mug 1.
  Admissible: go to cabinet 1 | take mug 1 from countertop 1 | look | inventory
  Action: take mug 1 from countertop 1

Parser rule (`parse`): the lines in exactly that order (0..MAX_HISTORY `Before:` lines, each `action => observation`
with both sides non-empty); non-empty task, room and observation; 2..MAX_COMMANDS admissible commands separated by
" | ", unique after `alfworld.prompt.normalize_action`; and the action, normalised, must be one of them. That is what
the domain can check: it cannot play a generated state, so it does not know that the action is the expert's.
Gold text: the normalised action. Difficulty: the number of admissible commands over 10 plus the number of earlier
steps shown.

Agent prompt: ALFWorld's ReAct prompt (`alfworld.prompt.build_messages` with the task, room, history, observation and
commands). Score: `AlfworldStepBenchmark.score` (the normalised extracted action equals the gold), 1.0 or 0.0.
"""

from __future__ import annotations

import dataclasses
import pathlib

from genenv_jax.benchmarks.alfworld.env import game_name, list_games
from genenv_jax.benchmarks.alfworld.evaluator import AlfworldStepBenchmark
from genenv_jax.benchmarks.alfworld.prompt import build_messages, normalize_action, oracle_reply
from genenv_jax.benchmarks.alfworld.steps import StepRecord, load_step_records
from genenv_jax.tasks.benchmark import EvalItem
from genenv_jax.tasks.text_domain import ParsedTask

SEED_SPLIT = "valid_train"
EVAL_SPLITS = ("valid_unseen", "valid_seen")
MAX_HISTORY, MAX_COMMANDS = 2, 80
_SCORER = AlfworldStepBenchmark()


def _one_line(text: str) -> str:
  return " ".join(str(text).split())


def write_task(record: StepRecord) -> str:
  """A step record as an env text (its last MAX_HISTORY earlier steps shown)."""
  lines = [f"Task: {_one_line(record.task)}", f"Room: {_one_line(record.room)}"]
  for action, observation in record.history[max(len(record.history) - MAX_HISTORY, 0) :]:
    lines.append(f"Before: {_one_line(action)} => {_one_line(observation)}")
  lines += [
    f"Observation: {_one_line(record.observation)}",
    "Admissible: " + " | ".join(_one_line(a) for a in record.admissible),
    f"Action: {_one_line(record.gold)}",
  ]
  return "\n".join(lines)


def seed_games(data_dir: pathlib.Path, num_games: int) -> list[str]:
  """`num_games` valid_train game names, evenly spaced over the sorted list."""
  names = [game_name(p) for p in list_games(data_dir, SEED_SPLIT)]
  if not 1 <= num_games <= len(names):
    raise ValueError(f"num_games must be in 1..{len(names)} (the valid_train games), got {num_games}")
  step = len(names) / num_games
  return [names[int(i * step)] for i in range(num_games)]


def _field(line: str, prefix: str) -> str | None:
  if not line.startswith(prefix):
    return None
  value = line[len(prefix) :].strip()
  return value or None


@dataclasses.dataclass(frozen=True)
class AlfworldTasks:
  """The ALFWorld step family (module docstring); `cache_dir` is where replays are cached (None: the default)."""

  num_games: int = 12
  cache_dir: str | None = None
  name: str = "alfworld"
  env_instruction: str = (
    "You write decision points of a household text game (ALFWorld) for an agent. Write the lines 'Task: ...', "
    "'Room: ...', up to two lines 'Before: <earlier action> => <what was observed>', 'Observation: ...', "
    "'Admissible: <command> | <command> | ...' and 'Action: <the best next command, one of the admissible ones>'. "
    "Nothing else."
  )

  def seed_texts(self, data_dir: pathlib.Path) -> list[str]:
    records = load_step_records(data_dir, SEED_SPLIT, self.cache_dir, seed_games(data_dir, self.num_games))
    return [write_task(r) for r in records]

  def parse(self, text: str) -> ParsedTask | None:
    if not isinstance(text, str):
      return None
    lines = text.strip().split("\n")
    if not 5 <= len(lines) <= 5 + MAX_HISTORY:
      return None
    task, room = _field(lines[0], "Task: "), _field(lines[1], "Room: ")
    observation, commands = _field(lines[-3], "Observation: "), _field(lines[-2], "Admissible: ")
    action = _field(lines[-1], "Action: ")
    if None in (task, room, observation, commands, action):
      return None
    history = []
    for line in lines[2:-3]:
      before = _field(line, "Before: ")
      parts = [] if before is None else [p.strip() for p in before.split(" => ", 1)]
      if len(parts) != 2 or not all(parts):
        return None
      history.append((parts[0], parts[1]))
    admissible = [c.strip() for c in commands.split(" | ")]
    normalized = [normalize_action(c) for c in admissible]
    if not 2 <= len(admissible) <= MAX_COMMANDS or not all(normalized) or len(set(normalized)) != len(normalized):
      return None
    gold = normalize_action(action)
    if gold not in normalized:
      return None
    messages = build_messages(task, room, history, observation, admissible)
    return ParsedTask(tuple(messages), gold, len(admissible) / 10.0 + len(history))

  def oracle(self, gold: str) -> str | None:
    return oracle_reply(gold)

  def score(self, gold: str, output: str) -> float:
    return _SCORER.score(EvalItem("generated", SEED_SPLIT, (), {"action": gold, "admissible": []}), output).score
