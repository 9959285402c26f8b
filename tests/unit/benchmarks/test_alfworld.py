"""ALFWorld: the game wrapper, the walkthrough step decomposition and its cache, the step-level scorer and the
episodic loop, on real valid_unseen games (one per task type) from ../shared/data.

Game tests need `pip install -e .[alfworld]` (alfworld==0.4.2, textworld[pddl]==1.7.0) and skip without it; the
text-protocol tests (action extraction, prompt, scoring of hand items) run everywhere. Each game is played for real
once into a per-session temporary cache; the whole file takes about a minute on two CPU cores.
"""

from __future__ import annotations

import builtins
import json
import pathlib
import time

import pytest

from genenv_jax import cli
from genenv_jax.benchmarks.alfworld import env, evaluator, prompt
from genenv_jax.tasks.benchmark import EvalItem

SPLIT = "valid_unseen"
# One game per task type, small ones (the kitchen games of the heat and cool tasks reset slowest, ~3-6 s).
CI_GAMES = (
  "look_at_obj_in_light-AlarmClock-None-DeskLamp-308/trial_T20190908_222933_607649",
  "pick_and_place_simple-SoapBottle-None-Toilet-424/trial_T20190907_004351_281384",
  "pick_clean_then_place_in_recep-SoapBar-None-Cabinet-424/trial_T20190908_214926_337906",
  "pick_cool_then_place_in_recep-Bread-None-CounterTop-10/trial_T20190908_091747_866951",
  "pick_heat_then_place_in_recep-Tomato-None-GarbageCan-10/trial_T20190908_225046_020282",
  "pick_two_obj_and_place-SoapBar-None-Cabinet-424/trial_T20190909_081720_491733",
)


# ----------------------------------------------------------------------------------------------------------------
# Text protocol: no game needed.
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
  "output, action",
  [
    ("Thought: the bowl is there.\nAction: go to countertop 3", "go to countertop 3"),
    ("Thought: x\nAction:   Go To  Countertop 3.  ", "go to countertop 3"),
    ("**Action:** `take bowl 1 from countertop 3`", "take bowl 1 from countertop 3"),
    ("action: 'open fridge 1'", "open fridge 1"),
    ("Thought: hm\nAction:\n  heat egg 1 with microwave 1\n", "heat egg 1 with microwave 1"),
    ("Thought: a\nAction: open fridge 1\nObservation: ok\nThought: b\nAction: close fridge 1", "open fridge 1"),
    ("I will look around.\n> look\n", "look"),
    ("go to sinkbasin 1\nbecause it is there", "go to sinkbasin 1"),
    ("\n\n  inventory  \n", "inventory"),
    ("Thought: I am not sure.", "thought: i am not sure"),
    ("", ""),
    ("   \n\t", ""),
    (None, ""),
    (42, ""),
    ("Action:", ""),
    ("Action:\n\n", ""),
    ("  - Action : go to desk 1", "go to desk 1"),
  ],
)
def test_extract_action_hand_cases(output: object, action: str) -> None:
  assert evaluator.extract_action(output) == action


def test_normalize_action() -> None:
  assert evaluator.normalize_action("  Move   Bowl 1 to Cabinet 4. ") == "move bowl 1 to cabinet 4"
  assert evaluator.normalize_action('"look"') == "look"
  assert evaluator.normalize_action(None) == ""  # type: ignore[arg-type]


def test_prompt_round_trip_and_window() -> None:
  history = [("go to desk 1", "You arrive at desk 1."), ("take cd 1 from desk 1", "You pick up the cd 1.")]
  messages = evaluator.build_messages(
    "look at cd under the desklamp.",
    "You are in a room.",
    history,
    "You pick up the cd 1.",
    ["go to desk 1", "use desklamp 1"],
  )
  assert [m["role"] for m in messages] == ["system", "user"]
  user = messages[1]["content"]
  assert "Your task is to: look at cd under the desklamp." in user and "- use desklamp 1" in user
  assert "Thought:" in user and "Action:" in user
  assert prompt.prompt_history_actions(messages) == ["go to desk 1", "take cd 1 from desk 1"]
  assert prompt.prompt_step_index(messages) == 2
  assert prompt.prompt_task_and_room(messages) == ("look at cd under the desklamp.", "You are in a room.")
  windowed = evaluator.build_messages("t", "r", history, "o", ["look"], history_window=1)
  assert prompt.prompt_history_actions(windowed) == ["take cd 1 from desk 1"]
  assert prompt.prompt_step_index(windowed) == 2
  wide = evaluator.build_messages("t", "r", history, "o", ["look"], history_window=3)
  assert prompt.prompt_history_actions(wide) == ["go to desk 1", "take cd 1 from desk 1"]
  hidden = evaluator.build_messages("t", "r", history, "o", ["look"], history_window=0)
  assert prompt.prompt_history_actions(hidden) == [] and prompt.prompt_step_index(hidden) == 2
  assert "History" not in evaluator.build_messages("t", "r", [], "r", ["look"])[1]["content"]
  with pytest.raises(ValueError, match="history_window"):
    evaluator.build_messages("t", "r", history, "o", [], history_window=-1)


def test_split_intro() -> None:
  intro = (
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. You see a desk 1.\n\n"
    "Your task is to: put a cd in desk."
  )
  assert evaluator.split_intro(intro) == ("You are in the middle of a room. You see a desk 1.", "put a cd in desk.")


def _hand_item(split: str, gold: str) -> EvalItem:
  return EvalItem(
    id=f"{split}/g/step-0",
    split=split,
    messages=(),
    gold={"action": gold, "admissible": [gold, "look", "go to desk 1"], "game": "g", "step": 0, "task_type": "unknown"},
  )


def test_score_and_aggregate_hand_items() -> None:
  bench = evaluator.AlfworldStepBenchmark()
  item = _hand_item(SPLIT, "take cd 1 from desk 1")
  right = bench.score(item, "Thought: t\nAction: Take CD 1 from desk 1.")
  assert right.correct and right.score == 1.0 and right.detail["admissible"]
  admissible_but_wrong = bench.score(item, "Action: look")
  assert not admissible_but_wrong.correct and admissible_but_wrong.detail["admissible"]
  for junk in ("", "Action: fly away", "\x00\n\n", None):
    result = bench.score(item, junk)  # type: ignore[arg-type]
    assert not result.correct and result.score == 0.0 and not result.detail["admissible"]
  assert bench.score(item, bench.oracle_output(item)).correct
  other = _hand_item("valid_seen", "look")
  metrics = bench.aggregate([right, admissible_but_wrong, bench.score(other, "> look")])
  assert metrics[f"{SPLIT}/step_accuracy"] == 0.5 and metrics["valid_seen/step_accuracy"] == 1.0
  assert metrics["step_accuracy"] == pytest.approx(2 / 3) and metrics["admissible_rate"] == 1.0
  assert metrics["n"] == 3.0 and metrics["not_comparable_to_paper"] == 1.0


def test_bad_arguments_name_the_bad_thing(shared_data: pathlib.Path) -> None:
  bench = evaluator.AlfworldStepBenchmark()
  assert tuple(bench.splits()) == ("valid_unseen", "valid_seen", "valid_train")
  with pytest.raises(ValueError, match="test_unseen"):
    bench.load_items(str(shared_data), split="test_unseen")
  with pytest.raises(ValueError, match="no-such-task/trial_0"):
    evaluator.AlfworldStepBenchmark(games=("no-such-task/trial_0",)).load_items(str(shared_data), split=SPLIT)
  with pytest.raises(ValueError, match="limit"):
    bench.load_items(str(shared_data), split=SPLIT, limit=-1)
  assert bench.load_items(str(shared_data), split=SPLIT, limit=0) == []
  with pytest.raises(FileNotFoundError, match="ALFWorld data not found"):
    evaluator.list_games("/nonexistent-dir", SPLIT)
  assert len(evaluator.list_games(shared_data, SPLIT)) == 134


def test_missing_textworld_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
  real_import = builtins.__import__

  def fake_import(name: str, *args, **kwargs):
    if name.startswith("textworld"):
      raise ImportError(f"No module named {name!r}")
    return real_import(name, *args, **kwargs)

  monkeypatch.setattr(builtins, "__import__", fake_import)
  with pytest.raises(ImportError, match=r"pip install -e \.\[alfworld\]"):
    env.import_textworld()


# ----------------------------------------------------------------------------------------------------------------
# Real games.
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ci_paths(shared_data: pathlib.Path) -> list[pathlib.Path]:
  pytest.importorskip("textworld")
  pytest.importorskip("alfworld")
  return evaluator.select_games(shared_data, SPLIT, CI_GAMES)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
  return tmp_path_factory.mktemp("alfworld_cache")


@pytest.fixture(scope="module")
def replays(ci_paths: list[pathlib.Path], cache_dir: pathlib.Path) -> list[evaluator.Replay]:
  """Each CI game's walkthrough played in the real game (once: this fills the module's cache)."""
  return [evaluator.load_replay(p, cache_dir) for p in ci_paths]


@pytest.fixture(scope="module")
def items(shared_data: pathlib.Path, cache_dir: pathlib.Path, replays: list[evaluator.Replay]) -> list[EvalItem]:
  return evaluator.AlfworldStepBenchmark(cache_dir=str(cache_dir), games=CI_GAMES).load_items(str(shared_data), SPLIT)


def test_ci_games_cover_every_task_type(ci_paths: list[pathlib.Path]) -> None:
  assert sorted(evaluator.task_type(p) for p in ci_paths) == sorted(evaluator.TASK_TYPES)


def test_walkthrough_replay_wins_in_the_real_game(
  ci_paths: list[pathlib.Path], replays: list[evaluator.Replay]
) -> None:
  for path, replay in zip(ci_paths, replays):
    assert replay.won, replay.game
    assert replay.actions == evaluator.read_walkthrough(path)
    assert len(replay.observations) == len(replay.actions) + 1
    assert replay.task and replay.observations[0].startswith("-= Welcome to TextWorld, ALFRED! =-")
    for action, admissible in zip(replay.actions, replay.admissible):
      assert action in admissible, (replay.game, action)  # every expert action was admissible when taken


def test_items_ids_and_contents(items: list[EvalItem], replays: list[evaluator.Replay]) -> None:
  assert len(items) == sum(len(r.actions) for r in replays)
  assert len({i.id for i in items}) == len(items)
  first = items[0]
  assert first.id == f"{SPLIT}/{CI_GAMES[0]}/step-0" and first.split == SPLIT
  assert first.gold["action"] == replays[0].actions[0] and first.gold["game"] == CI_GAMES[0]
  user = first.messages[1]["content"]
  assert replays[0].task in user and "History" not in user and "- " + first.gold["action"] in user
  last = items[len(replays[0].actions) - 1]
  assert prompt.prompt_history_actions(last.messages) == list(replays[0].actions[:-1])


def test_oracle_scores_100_and_null_0(items: list[EvalItem]) -> None:
  bench = evaluator.AlfworldStepBenchmark()
  oracle = [bench.score(i, bench.oracle_output(i)) for i in items]
  null = [bench.score(i, "") for i in items]
  assert bench.aggregate(oracle)["step_accuracy"] == 1.0
  assert bench.aggregate(oracle)[f"{SPLIT}/admissible_rate"] == 1.0
  assert bench.aggregate(null)["step_accuracy"] == 0.0 and bench.aggregate(null)["admissible_rate"] == 0.0


def test_cache_serves_repeated_loads(shared_data: pathlib.Path, cache_dir: pathlib.Path, items: list[EvalItem]) -> None:
  files = sorted(cache_dir.glob("*.json"))
  assert len(files) == len(CI_GAMES)
  entry = json.loads(files[0].read_text())
  assert entry["key"]["cache_version"] == 1 and entry["key"]["engine"]["textworld"]
  start = time.perf_counter()
  again = evaluator.AlfworldStepBenchmark(cache_dir=str(cache_dir), games=CI_GAMES).load_items(str(shared_data), SPLIT)
  assert time.perf_counter() - start < 5.0  # no game is reset (a single reset costs 1-4 s)
  assert again == items
  limited = evaluator.AlfworldStepBenchmark(cache_dir=str(cache_dir), games=CI_GAMES).load_items(
    str(shared_data), limit=5
  )
  assert [i.id for i in limited] == [i.id for i in items[:5]]


def test_episodes_oracle_policy_wins(
  ci_paths: list[pathlib.Path], cache_dir: pathlib.Path, replays: list[evaluator.Replay]
) -> None:
  report = evaluator.run_episodes(evaluator.walkthrough_policy(ci_paths, cache_dir), ci_paths)
  assert report.success_rate == 1.0 and report.max_steps == 50
  assert [e.steps for e in report.episodes] == [len(r.actions) for r in replays]
  assert [e.actions for e in report.episodes] == [r.actions for r in replays]
  summary = report.summary()
  assert summary["success_rate"] == 1.0 and summary["n"] == len(CI_GAMES)
  assert all(summary[f"{kind}/success_rate"] == 1.0 for kind in evaluator.TASK_TYPES)


def test_episodes_null_policy_fails_within_the_limit(ci_paths: list[pathlib.Path]) -> None:
  calls: list[int] = []

  def counting_null(batch):
    calls.append(len(batch))
    return evaluator.null_policy(batch)

  report = evaluator.run_episodes(counting_null, ci_paths[:3], max_steps=3, batch_size=2)
  assert report.success_rate == 0.0 and [e.steps for e in report.episodes] == [3, 3, 3]
  assert calls == [2, 2, 2, 1, 1, 1]  # batched across the open games of each chunk
  assert all(o == "Nothing happens." for e in report.episodes for o in e.observations)


def test_episodes_null_policy_default_limit_is_50(ci_paths: list[pathlib.Path]) -> None:
  report = evaluator.run_episodes(evaluator.null_policy, ci_paths[:1])
  assert report.success_rate == 0.0 and report.episodes[0].steps == 50 and report.mean_steps == 50.0


def test_episodes_malformed_output_is_a_failed_step(ci_paths: list[pathlib.Path]) -> None:
  junk = [None, 7, "", "Action: FLY TO THE MOON", "\x00" * 5, "Thought: only a thought", "é" * 2000]

  def junk_policy(batch):
    return [junk[len(prompt.prompt_history_actions(m)) % len(junk)] for m in batch]

  report = evaluator.run_episodes(junk_policy, ci_paths[1:2], max_steps=len(junk))
  assert report.success_rate == 0.0 and report.episodes[0].steps == len(junk)
  with pytest.raises(ValueError, match="2 outputs for 1 prompts"):
    evaluator.run_episodes(lambda batch: ["look", "look"], ci_paths[1:2], max_steps=1)


def test_default_cache_dir_rules(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
  monkeypatch.setenv("GENENV_JAX_CACHE", str(tmp_path / "c"))
  assert evaluator.default_cache_dir() == tmp_path / "c" / "alfworld"
  monkeypatch.delenv("GENENV_JAX_CACHE")
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
  assert evaluator.default_cache_dir() == tmp_path / "x" / "genenv_jax" / "alfworld"


def test_unreadable_cache_entry_is_replayed(
  ci_paths: list[pathlib.Path], cache_dir: pathlib.Path, replays: list[evaluator.Replay], tmp_path: pathlib.Path
) -> None:
  source = next(f for f in cache_dir.glob("*.json") if f.name.startswith(CI_GAMES[0].split("/")[0]))
  (tmp_path / source.name).write_text("{not json")
  with pytest.warns(UserWarning, match="unreadable ALFWorld cache entry"):
    replay = evaluator.load_replay(ci_paths[0], tmp_path)
  assert replay == replays[0]
  assert json.loads((tmp_path / source.name).read_text())["replay"]["won"] is True  # rewritten


def test_replay_script_on_one_game(
  shared_data: pathlib.Path, ci_paths: list[pathlib.Path], capsys: pytest.CaptureFixture[str]
) -> None:
  from genenv_jax.scripts import replay_alfworld  # pylint: disable=import-outside-toplevel

  argv = ["--data_dir", str(shared_data), "--split", SPLIT, "--limit", "1", "--no_cache"]
  assert cli.call(replay_alfworld, argv) == 0
  assert f"{SPLIT}: walkthrough won 1/1 games" in capsys.readouterr().out


def test_walkthrough_policy_refuses_indistinguishable_games(
  shared_data: pathlib.Path, ci_paths: list[pathlib.Path], cache_dir: pathlib.Path
) -> None:
  twin = evaluator.select_games(shared_data, SPLIT, [CI_GAMES[0].split("/")[0] + "/trial_T20190908_222917_366542"])
  with pytest.raises(ValueError, match="share task and room description"):
    evaluator.walkthrough_policy([ci_paths[0], twin[0]], cache_dir)
