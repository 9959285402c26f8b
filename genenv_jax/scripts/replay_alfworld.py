"""Replays every expert walkthrough of an ALFWorld split in the real game and prints the win count and the time.

Rule: for each `game.tw-pddl` of the split (`benchmarks.alfworld.env.list_games`), reset the game, play its
`walkthrough` commands in order and count the game as won when textworld reports `won`
(`benchmarks.alfworld.env.replay_walkthrough`). Each replay is also written to the step cache
(`benchmarks.alfworld.steps`, refreshed, unless --no_cache), so later `AlfworldStepBenchmark.load_items` calls are fast.
A reset is slow, so a whole split takes minutes (docs/EXPERIMENTS.md, "Costs behind implementation choices", has the
times and the win count).

Usage:
  python -m genenv_jax.scripts.replay_alfworld [--data_dir DIR] --split valid_unseen [--limit N]
      [--cache_dir DIR | --no_cache] [--quiet]
Exit status: 0 when every replayed game was won, 1 otherwise.
"""

from __future__ import annotations

import time
from typing import Sequence

from absl import flags

from genenv_jax import cli
from genenv_jax.benchmarks.alfworld import env, steps
from genenv_jax.data import resolve_data_dir


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  fv = flag_values
  _FLAGS = (
    flags.DEFINE_string(
      "data_dir",
      None,
      "data directory (holding alfworld/) or the alfworld folder itself (default: genenv_jax.data.resolve_data_dir())",
      flag_values=fv,
    ),
    flags.DEFINE_enum("split", "valid_unseen", env.SPLITS, "the ALFWorld split whose games to replay", flag_values=fv),
    flags.DEFINE_integer("limit", None, "replay only the first N games (sorted by name)", flag_values=fv),
    flags.DEFINE_string(
      "cache_dir", None, "step cache directory (default: benchmarks.alfworld.steps.default_cache_dir())", flag_values=fv
    ),
    flags.DEFINE_boolean("no_cache", False, "do not write replays to the step cache", flag_values=fv),
    flags.DEFINE_boolean("quiet", False, "print only the summary line", flag_values=fv),
  )


def main(argv: Sequence[str]) -> int:
  """Replays the split's walkthroughs. Through cli.run (or cli.call): a bad flag or missing data is one `error:`
  line, exit status 2."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  games = env.list_games(resolve_data_dir(args.data_dir), args.split)
  if args.limit is not None:
    games = games[: max(args.limit, 0)]
  start = time.perf_counter()
  won, lost, actions = 0, [], 0
  for i, path in enumerate(games, 1):
    t0 = time.perf_counter()
    replay = steps.load_replay(path, args.cache_dir, use_cache=not args.no_cache, refresh=True)
    won += replay.won
    actions += len(replay.actions)
    if not replay.won:
      lost.append(replay.game)
    if not args.quiet:
      print(
        f"[{i}/{len(games)}] {'WON ' if replay.won else 'LOST'} {len(replay.actions)} steps "
        f"{time.perf_counter() - t0:.1f}s {replay.game}",
        flush=True,
      )
  seconds = time.perf_counter() - start
  print(
    f"{args.split}: walkthrough won {won}/{len(games)} games ({actions} steps) in {seconds:.1f}s "
    f"({seconds / max(len(games), 1):.2f}s per game)"
  )
  for name in lost:
    print(f"  not won: {name}")
  return 0 if won == len(games) else 1


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.scripts.replay_alfworld")
