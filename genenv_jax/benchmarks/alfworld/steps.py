"""Step decomposition of ALFWorld expert walkthroughs, cached on disk: seed tasks and step-level benchmark items.

Rule: the walkthrough a_0..a_{n-1} of a game is played in the real game (`alfworld.env.replay_walkthrough`), giving
observations o_0 (the intro) .. o_n. Step k (0 <= k < n) becomes one record: the task, the room description of o_0,
the history ((a_0, o_1), ..., (a_{k-1}, o_k)), the current observation (o_k; the room description when k = 0), the
commands admissible before a_k, and the gold next action a_k. Record ids are `{split}/{task}/{trial}/step-{k}`
(`{task}/{trial}` is the game's folder path under its split). A game whose walkthrough does not win is left out with a
warning naming it (none of the shipped valid_* games: the walkthroughs win all of them).

Cache: a reset costs seconds, so each replay is stored as JSON under the cache directory, one file per game, named
`<task>.<trial>.<key16>.json`. The key is a SHA-256 over the game file's resolved path and content hash, the cache
format version `CACHE_VERSION` and the textworld/alfworld versions (the installed ones, else the pinned ones, so a
cache built with the pinned versions also serves a machine without them). A stale or unreadable entry is recomputed.
The directory is, in order: the `cache_dir` argument; `$GENENV_JAX_CACHE/alfworld`; `$XDG_CACHE_HOME/genenv_jax/
alfworld`; `~/.cache/genenv_jax/alfworld`. Delete it to force fresh replays.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import pathlib
import tempfile
import warnings
from typing import Any, Iterator, Sequence

from genenv_jax.benchmarks.alfworld import env
from genenv_jax.benchmarks.alfworld.prompt import build_messages
from genenv_jax.tasks.benchmark import Message

CACHE_VERSION = 1
CACHE_ENV_VAR = "GENENV_JAX_CACHE"
PINNED_ENGINE = {"textworld": "1.7.0", "alfworld": "0.4.2"}


@dataclasses.dataclass(frozen=True)
class StepRecord:
  """One decision of an expert trajectory: everything the agent sees before step `step`, and the expert's action."""

  id: str
  split: str
  game: str
  game_path: str
  task_type: str
  step: int
  task: str
  room: str
  history: tuple[tuple[str, str], ...]
  observation: str
  admissible: tuple[str, ...]
  gold: str

  def messages(self, history_window: int | None = None) -> tuple[Message, ...]:
    """The agent's prompt for this step (`alfworld.prompt.build_messages`)."""
    return build_messages(self.task, self.room, self.history, self.observation, self.admissible, history_window)


def default_cache_dir() -> pathlib.Path:
  """The cache directory when none is given (see the module docstring for the order of the rules)."""
  if os.environ.get(CACHE_ENV_VAR):
    return pathlib.Path(os.environ[CACHE_ENV_VAR]).expanduser() / "alfworld"
  base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
  return pathlib.Path(base).expanduser() / "genenv_jax" / "alfworld"


def _engine_versions() -> dict[str, str]:
  versions = {}
  for package, pinned in PINNED_ENGINE.items():
    try:
      versions[package] = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
      versions[package] = pinned
  return versions


def cache_key(game_path: str | pathlib.Path) -> dict[str, Any]:
  """The fields a cached replay must match: resolved path, content SHA-256, format and engine versions."""
  path = pathlib.Path(game_path).resolve()
  digest = hashlib.sha256(path.read_bytes()).hexdigest()
  return {"path": str(path), "sha256": digest, "cache_version": CACHE_VERSION, "engine": _engine_versions()}


def cache_file(game_path: str | pathlib.Path, cache_dir: str | pathlib.Path, key: dict[str, Any]) -> pathlib.Path:
  """Where the replay of `game_path` is cached under `cache_dir` for `key`."""
  digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
  path = pathlib.Path(game_path)
  return pathlib.Path(cache_dir) / f"{path.parent.parent.name}.{path.parent.name}.{digest}.json"


def _replay_to_json(replay: env.Replay) -> dict[str, Any]:
  return {
    "game": replay.game,
    "task": replay.task,
    "actions": list(replay.actions),
    "observations": list(replay.observations),
    "admissible": [list(a) for a in replay.admissible],
    "won": replay.won,
  }


def _replay_from_json(data: dict[str, Any]) -> env.Replay:
  replay = env.Replay(
    game=str(data["game"]),
    task=str(data["task"]),
    actions=tuple(str(a) for a in data["actions"]),
    observations=tuple(str(o) for o in data["observations"]),
    admissible=tuple(tuple(str(c) for c in cs) for cs in data["admissible"]),
    won=bool(data["won"]),
  )
  if len(replay.observations) != len(replay.actions) + 1 or len(replay.admissible) != len(replay.actions):
    raise ValueError("inconsistent lengths of actions, observations and admissible lists")
  return replay


def load_replay(
  game_path: str | pathlib.Path,
  cache_dir: str | pathlib.Path | None = None,
  use_cache: bool = True,
  refresh: bool = False,
) -> env.Replay:
  """The walkthrough replay of one game: from the cache when a valid entry exists, else played and then cached.

  `use_cache=False` neither reads nor writes the cache; `refresh=True` always plays the game and rewrites the entry.
  """
  key = cache_key(game_path)
  target = cache_file(game_path, default_cache_dir() if cache_dir is None else cache_dir, key)
  if use_cache and not refresh and target.is_file():
    try:
      data = json.loads(target.read_text(encoding="utf-8"))
      if data.get("key") == key:
        return _replay_from_json(data["replay"])
    except (OSError, ValueError, KeyError, TypeError) as err:
      warnings.warn(f"ignoring unreadable ALFWorld cache entry {target}: {err}", stacklevel=2)
  replay = env.replay_walkthrough(game_path)
  if use_cache:
    _write_atomic(target, {"key": key, "replay": _replay_to_json(replay)})
  return replay


def _write_atomic(target: pathlib.Path, data: dict[str, Any]) -> None:
  target.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
  try:
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
      json.dump(data, handle)
    os.replace(tmp, target)
  except BaseException:
    pathlib.Path(tmp).unlink(missing_ok=True)
    raise


def records_from_replay(replay: env.Replay, split: str, game_path: str | pathlib.Path) -> list[StepRecord]:
  """The step records of one replay, by the rule of the module docstring."""
  room, intro_task = env.split_intro(replay.observations[0])
  task = replay.task or intro_task
  records = []
  for k, gold in enumerate(replay.actions):
    history = tuple(zip(replay.actions[:k], replay.observations[1 : k + 1]))
    observation = replay.observations[k] if k > 0 else room
    records.append(
      StepRecord(
        id=f"{split}/{replay.game}/step-{k}",
        split=split,
        game=replay.game,
        game_path=str(game_path),
        task_type=env.task_type(game_path),
        step=k,
        task=task,
        room=room,
        history=history,
        observation=observation,
        admissible=replay.admissible[k],
        gold=gold,
      )
    )
  return records


def select_games(data_dir: str | pathlib.Path, split: str, games: Sequence[str] | None = None) -> list[pathlib.Path]:
  """The game files of a split, all of them or those named `<task>/<trial>` in `games` (in that order).

  Raises ValueError naming any requested game that the split lacks.
  """
  paths = env.list_games(data_dir, split)
  if games is None:
    return paths
  by_name = {env.game_name(p): p for p in paths}
  missing = [g for g in games if g not in by_name]
  if missing:
    raise ValueError(f"ALFWorld split {split!r} has no game(s) {', '.join(missing)}")
  return [by_name[g] for g in games]


def iter_step_records(
  data_dir: str | pathlib.Path,
  split: str,
  cache_dir: str | pathlib.Path | None = None,
  games: Sequence[str] | None = None,
  use_cache: bool = True,
) -> Iterator[StepRecord]:
  """Step records of a split, game by game (so a consumer that stops early replays no further games)."""
  for path in select_games(data_dir, split, games):
    replay = load_replay(path, cache_dir, use_cache)
    if not replay.won:
      warnings.warn(
        f"ALFWorld walkthrough of {split}/{replay.game} does not win the game; its steps are left out", stacklevel=2
      )
      continue
    yield from records_from_replay(replay, split, path)


def load_step_records(
  data_dir: str | pathlib.Path,
  split: str,
  cache_dir: str | pathlib.Path | None = None,
  games: Sequence[str] | None = None,
  limit: int | None = None,
  use_cache: bool = True,
) -> list[StepRecord]:
  """The first `limit` (all when None) step records of a split; see `iter_step_records`."""
  if limit is not None and limit < 0:
    raise ValueError(f"limit must be >= 0 or None, got {limit}")
  records: list[StepRecord] = []
  if limit == 0:
    return records
  for record in iter_step_records(data_dir, split, cache_dir, games, use_cache):
    records.append(record)
    if limit is not None and len(records) >= limit:
      break
  return records
