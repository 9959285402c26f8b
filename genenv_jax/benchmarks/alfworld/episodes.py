"""Episodic ALFWorld evaluation: a ReAct-style loop over whole games, batched across games, with a step limit.

Rule (ALFWorld, Shridhar et al. 2021; the default limit of 50 steps is the one ReAct's ALFWorld runs used, Yao et al.
2023): each game is reset; at every turn the policy sees `alfworld.prompt.build_messages` (task, history, current
observation, admissible actions) and replies "Thought: ... Action: ..."; the parsed action (`extract_action`) is
played in the game. An episode succeeds when the game reports `won` within `max_steps` actions; an inadmissible or
malformed action is just a failed step ("Nothing happens."), never an error. Success rate = won episodes / episodes.

Batching: the policy is called once per turn with the prompts of all unfinished games of the current chunk (at most
`batch_size` games are open at once), so a model can generate them in one batch. It must return one text per prompt.

Oracle: `walkthrough_policy` knows a prompt's game only from its text (task and room description), which games of the
same task folder share, so it refuses such sets (ValueError); 44 of valid_unseen's 78 (task, room) groups hold more
than one game. Run such games in separate `run_episodes` calls.
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from typing import Callable, Sequence

from genenv_jax.benchmarks.alfworld import env, steps
from genenv_jax.benchmarks.alfworld.prompt import (
  build_messages,
  extract_action,
  oracle_reply,
  prompt_step_index,
  prompt_task_and_room,
)
from genenv_jax.tasks.benchmark import Message

Policy = Callable[[Sequence[Sequence[Message]]], Sequence[str]]
DEFAULT_MAX_STEPS = 50


@dataclasses.dataclass(frozen=True)
class EpisodeResult:
  """One played game: whether it was won, the actions taken (as played, after parsing) and the observations."""

  game: str
  game_path: str
  task_type: str
  task: str
  won: bool
  steps: int
  actions: tuple[str, ...]
  observations: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class EpisodeReport:
  """All episodes of a run, with the headline numbers."""

  episodes: tuple[EpisodeResult, ...]
  max_steps: int
  seconds: float

  @property
  def success_rate(self) -> float:
    return sum(e.won for e in self.episodes) / len(self.episodes) if self.episodes else 0.0

  @property
  def mean_steps(self) -> float:
    return sum(e.steps for e in self.episodes) / len(self.episodes) if self.episodes else 0.0

  def summary(self) -> dict[str, float]:
    """success_rate, mean_steps and n overall and per task type (`<task_type>/success_rate`, ...)."""
    metrics = {
      "success_rate": self.success_rate,
      "mean_steps": self.mean_steps,
      "n": float(len(self.episodes)),
      "max_steps": float(self.max_steps),
    }
    for kind in sorted({e.task_type for e in self.episodes}):
      chosen = [e for e in self.episodes if e.task_type == kind]
      metrics[f"{kind}/success_rate"] = sum(e.won for e in chosen) / len(chosen)
      metrics[f"{kind}/n"] = float(len(chosen))
    return metrics


@dataclasses.dataclass
class _Episode:
  """Mutable per-game bookkeeping local to one `run_episodes` call."""

  game: env.AlfworldGame
  room: str
  state: env.GameState
  history: list[tuple[str, str]] = dataclasses.field(default_factory=list)

  def messages(self, history_window: int | None) -> tuple[Message, ...]:
    observation = self.history[-1][1] if self.history else self.room
    return build_messages(self.game.task, self.room, self.history, observation, self.state.admissible, history_window)

  def result(self) -> EpisodeResult:
    return EpisodeResult(
      game=self.game.name,
      game_path=str(self.game.path),
      task_type=env.task_type(self.game.path),
      task=self.game.task,
      won=self.state.won,
      steps=len(self.history),
      actions=tuple(a for a, _ in self.history),
      observations=tuple(o for _, o in self.history),
    )


def _as_text(output: object) -> str:
  return output if isinstance(output, str) else ""


def _run_chunk(
  policy: Policy, paths: Sequence[pathlib.Path], max_steps: int, history_window: int | None
) -> list[EpisodeResult]:
  episodes: list[_Episode] = []
  try:
    for path in paths:
      game = env.AlfworldGame(path)
      episodes.append(_Episode(game=game, room="", state=env.GameState("", (), False, False)))
      state = game.reset()
      episodes[-1].state = state
      episodes[-1].room = env.split_intro(state.observation)[0]
    for _ in range(max_steps):
      active = [e for e in episodes if not e.state.done]
      if not active:
        break
      outputs = list(policy([e.messages(history_window) for e in active]))
      if len(outputs) != len(active):
        raise ValueError(f"policy returned {len(outputs)} outputs for {len(active)} prompts")
      for episode, output in zip(active, outputs):
        action = extract_action(_as_text(output))
        episode.state = episode.game.step(action)
        episode.history.append((action, episode.state.observation))
    return [e.result() for e in episodes]
  finally:
    for episode in episodes:
      episode.game.close()


def run_episodes(
  policy: Policy,
  game_paths: Sequence[str | pathlib.Path],
  max_steps: int = DEFAULT_MAX_STEPS,
  batch_size: int | None = 16,
  history_window: int | None = None,
) -> EpisodeReport:
  """Plays every game with `policy` for at most `max_steps` actions; see the module docstring for the rule.

  `batch_size` games are open at once (None: all); `history_window` limits the history pairs in each prompt.
  Results keep the order of `game_paths`.
  """
  if max_steps < 1:
    raise ValueError(f"max_steps must be >= 1, got {max_steps}")
  if batch_size is not None and batch_size < 1:
    raise ValueError(f"batch_size must be >= 1 or None, got {batch_size}")
  paths = [pathlib.Path(p) for p in game_paths]
  chunk = len(paths) if batch_size is None else batch_size
  start = time.perf_counter()
  results: list[EpisodeResult] = []
  for i in range(0, len(paths), max(chunk, 1)):
    results += _run_chunk(policy, paths[i : i + chunk], max_steps, history_window)
  return EpisodeReport(episodes=tuple(results), max_steps=max_steps, seconds=time.perf_counter() - start)


def null_policy(batch: Sequence[Sequence[Message]]) -> list[str]:
  """The null agent: an empty reply to every prompt."""
  return ["" for _ in batch]


def walkthrough_policy(game_paths: Sequence[str | pathlib.Path], cache_dir: str | pathlib.Path | None = None) -> Policy:
  """An oracle for `run_episodes`: replies with walkthrough[t] of the prompt's game at step t.

  The game is recognised by the (task, room description) of the prompt, read from its cached walkthrough replay
  (`alfworld.steps.load_replay`, which plays the game when the cache lacks it), and t by the prompt's history. Two
  games with the same task and room description would be ambiguous: that raises ValueError naming them. Past the end
  of the walkthrough, or for an unknown prompt, it replies "look".
  """
  plans: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {}
  for path in game_paths:
    replay = steps.load_replay(path, cache_dir)
    room, task = env.split_intro(replay.observations[0])
    key = (replay.task or task, room)
    if key in plans:
      raise ValueError(
        f"games {plans[key][0]} and {path} share task and room description; the walkthrough "
        "oracle cannot tell them apart"
      )
    plans[key] = (str(path), replay.actions)

  def policy(batch: Sequence[Sequence[Message]]) -> list[str]:
    outputs = []
    for messages in batch:
      plan = plans.get(prompt_task_and_room(messages), ("", ()))[1]
      t = prompt_step_index(messages)
      outputs.append(oracle_reply(plan[t] if t < len(plan) else "look"))
    return outputs

  return policy
