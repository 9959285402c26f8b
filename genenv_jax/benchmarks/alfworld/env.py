"""One ALFWorld text game: discovery on disk, reset/step through `textworld.gym`, and the expert walkthrough.

Data layout (read in place, never copied): `<data_dir>/alfworld/{valid_unseen,valid_seen,valid_train}/<task>/<trial>/
game.tw-pddl`, a JSON object with the PDDL domain and problem, the text grammar (its "task" rule already holds the
goal sentence), `solvable` and the expert `walkthrough` (a list of commands). These are the ALFWorld json_2.1.1
games of Shridhar et al. (2021); this copy has no `traj_data.json`, so alfworld's own `AlfredTWEnv` loader cannot
read it. Each game is loaded directly with `textworld.gym.envs.TextworldBatchGymEnv` (batch size 1, synchronous),
wrapped in alfworld's `AlfredDemangler`, which renames PDDL ids (`CounterTop_bar__plus_00_dot_69...`) to the
numbered names the walkthrough uses (`countertop 3`). Requested infos: `feedback`, `admissible_commands`, `won` and
the `walkthrough` extra (`policy_commands`, the planner's plan, works too but is off: it costs time on every step).

Facts of alfworld 0.4.2 and textworld 1.7.0: a reset is slow, since the PDDL is translated by fast-downward, and a step
is fast (docs/EXPERIMENTS.md, "Costs behind implementation choices", has the times). Commands are case-sensitive and
every admissible command is lower case ("GO TO x" does nothing), so callers normalise actions to lower case first (see
`alfworld.prompt.normalize_action`). Any text, the empty string included, is a legal command: an inadmissible one
returns "Nothing happens." and changes nothing.

Requires the optional extra: `pip install -e .[alfworld]` (alfworld==0.4.2, textworld[pddl]==1.7.0; the latter
builds fast-downward from source with cmake and g++).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
from typing import Any, Sequence

SPLITS = ("valid_unseen", "valid_seen", "valid_train")
GAME_FILE = "game.tw-pddl"
TASK_TYPES = (
  "pick_and_place_simple",
  "look_at_obj_in_light",
  "pick_clean_then_place_in_recep",
  "pick_heat_then_place_in_recep",
  "pick_cool_then_place_in_recep",
  "pick_two_obj_and_place",
)
INSTALL_HINT = "pip install -e .[alfworld]"
_TASK_LINE = re.compile(r"^\s*your task is to\s*:\s*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)
_WELCOME = re.compile(r"^\s*-=\s*welcome to textworld, alfred!\s*=-\s*", re.IGNORECASE)


def import_textworld() -> tuple[Any, Any, Any]:
  """Imports (textworld, TextworldBatchGymEnv, AlfredDemangler), or raises ImportError with the install command."""
  try:
    import textworld  # pylint: disable=import-outside-toplevel
    from textworld.gym.envs import TextworldBatchGymEnv  # pylint: disable=import-outside-toplevel
  except ImportError as err:
    raise ImportError(
      f"ALFWorld games need textworld[pddl]==1.7.0, which is not installed ({err}); run `{INSTALL_HINT}`"
    ) from err
  try:
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler  # pylint: disable=import-outside-toplevel
  except ImportError as err:
    raise ImportError(
      f"ALFWorld games need alfworld==0.4.2, which is not installed ({err}); run `{INSTALL_HINT}`"
    ) from err
  return textworld, TextworldBatchGymEnv, AlfredDemangler


def alfworld_root(data_dir: str | pathlib.Path) -> pathlib.Path:
  """The folder holding the split folders: `<data_dir>/alfworld`, or `data_dir` itself when it already is one."""
  root = pathlib.Path(data_dir).expanduser()
  if (root / "alfworld").is_dir():
    return root / "alfworld"
  if any((root / split).is_dir() for split in SPLITS):
    return root
  raise FileNotFoundError(
    f"ALFWorld data not found: neither {root / 'alfworld'} nor split folders {', '.join(SPLITS)} under {root}"
  )


def check_split(split: str) -> str:
  """Returns `split` if it names an ALFWorld split, else raises ValueError listing the valid ones."""
  if split not in SPLITS:
    raise ValueError(f"unknown ALFWorld split {split!r}; expected one of {', '.join(SPLITS)}")
  return split


def list_games(data_dir: str | pathlib.Path, split: str) -> list[pathlib.Path]:
  """All `game.tw-pddl` paths of a split, sorted by `<task>/<trial>` (so by task type first)."""
  folder = alfworld_root(data_dir) / check_split(split)
  if not folder.is_dir():
    raise FileNotFoundError(f"ALFWorld split folder {folder} does not exist")
  return sorted(folder.glob(f"*/*/{GAME_FILE}"))


def game_name(game_path: str | pathlib.Path) -> str:
  """`<task>/<trial>` of a game file, e.g. `pick_clean_then_place_in_recep-Bowl-None-Cabinet-10/trial_T2019...`."""
  path = pathlib.Path(game_path)
  return f"{path.parent.parent.name}/{path.parent.name}"


def task_type(game_path: str | pathlib.Path) -> str:
  """The ALFRED task type of a game, the prefix of its task folder name (one of `TASK_TYPES`), or "unknown"."""
  prefix = pathlib.Path(game_path).parent.parent.name.split("-", 1)[0]
  return prefix if prefix in TASK_TYPES else "unknown"


def read_game_json(game_path: str | pathlib.Path) -> dict[str, Any]:
  """The parsed game file; raises ValueError naming the file when it is not a game JSON with a walkthrough."""
  path = pathlib.Path(game_path)
  try:
    data = json.loads(path.read_text(encoding="utf-8"))
  except (OSError, json.JSONDecodeError) as err:
    raise ValueError(f"cannot read ALFWorld game file {path}: {err}") from err
  walkthrough = data.get("walkthrough") if isinstance(data, dict) else None
  if not isinstance(walkthrough, list) or not all(isinstance(a, str) for a in walkthrough):
    raise ValueError(f"ALFWorld game file {path} has no 'walkthrough' list of commands")
  return data


def read_walkthrough(game_path: str | pathlib.Path) -> tuple[str, ...]:
  """The expert walkthrough stored in the game file (no game is started)."""
  return tuple(read_game_json(game_path)["walkthrough"])


def split_intro(observation: str) -> tuple[str, str]:
  """(room description, task) of the first observation: the welcome banner is dropped and the "Your task is to: ..."
  line is cut out (task "" when there is none)."""
  text = _WELCOME.sub("", observation)
  match = _TASK_LINE.search(text)
  if match is None:
    return text.strip(), ""
  room = (text[: match.start()] + text[match.end() :]).strip()
  return room, match.group(1).strip()


@dataclasses.dataclass(frozen=True)
class GameState:
  """What the agent sees after a reset or a step: the game's text, the admissible commands, and the outcome."""

  observation: str
  admissible: tuple[str, ...]
  won: bool
  done: bool


class AlfworldGame:
  """One ALFWorld game on textworld.gym; `reset()` then `step(command)`; close it (or use `with`) when done.

  The instance owns its textworld environment and nothing else; there is no shared state between games.
  """

  def __init__(self, game_path: str | pathlib.Path):
    self.path = pathlib.Path(game_path)
    if not self.path.is_file():
      raise FileNotFoundError(f"ALFWorld game file {self.path} does not exist")
    self.walkthrough = read_walkthrough(self.path)
    textworld, batch_env_cls, demangler_cls = import_textworld()
    infos = textworld.EnvInfos(feedback=True, admissible_commands=True, won=True, extras=["walkthrough"])
    self._env = batch_env_cls([str(self.path)], infos, batch_size=1, asynchronous=False, wrappers=[demangler_cls()])
    self._started = False
    self.task = ""

  @property
  def name(self) -> str:
    return game_name(self.path)

  def reset(self) -> GameState:
    """Starts the game; the observation is the intro (banner, room, "Your task is to: ..."), and sets `task`."""
    obs, infos = self._env.reset()
    self._started = True
    state = self._state(obs[0], infos, done=False)
    self.task = split_intro(state.observation)[1]
    return state

  def step(self, command: str) -> GameState:
    """Plays one command (any string; an inadmissible one yields "Nothing happens.")."""
    if not self._started:
      raise RuntimeError(f"AlfworldGame.step called before reset on {self.path}")
    command = " ".join(str(command).split())  # one line: the parser reads a single command
    obs, _, dones, infos = self._env.step([command])
    return self._state(obs[0], infos, done=bool(dones[0]))

  def _state(self, observation: str, infos: dict[str, Sequence[Any]], done: bool) -> GameState:
    admissible = tuple(str(c) for c in (infos.get("admissible_commands") or [[]])[0] or ())
    won = bool((infos.get("won") or [False])[0])
    return GameState(observation=str(observation), admissible=admissible, won=won, done=done or won)

  def close(self) -> None:
    if self._env is not None:
      self._env.close()
      self._env = None
      self._started = False

  def __enter__(self) -> "AlfworldGame":
    return self

  def __exit__(self, *exc: Any) -> None:
    self.close()


@dataclasses.dataclass(frozen=True)
class Replay:
  """A walkthrough played in the real game: observations[0] is the intro, observations[k+1] follows actions[k];
  admissible[k] are the commands admissible before actions[k]."""

  game: str
  task: str
  actions: tuple[str, ...]
  observations: tuple[str, ...]
  admissible: tuple[tuple[str, ...], ...]
  won: bool


def replay_walkthrough(game_path: str | pathlib.Path) -> Replay:
  """Plays the game's own walkthrough from a fresh reset and records every step (one reset, len(walkthrough) steps).

  Stops early when the game ends (won) before the walkthrough does.
  """
  with AlfworldGame(game_path) as game:
    state = game.reset()
    observations, admissible, actions = [state.observation], [], []
    for action in game.walkthrough:
      if state.done:
        break
      admissible.append(state.admissible)
      actions.append(action)
      state = game.step(action)
      observations.append(state.observation)
    return Replay(
      game=game.name,
      task=game.task,
      actions=tuple(actions),
      observations=tuple(observations),
      admissible=tuple(admissible),
      won=state.won,
    )
