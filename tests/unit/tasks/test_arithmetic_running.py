"""Tests for genenv_jax.tasks.arithmetic.running: the running-digit answer form against hand cases, the pure-JAX
parser and verifier against their host twins, the seed pool's answers, and the errors a bad setting gets."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from configs.default import get_config
from genenv_jax.benchmarks.registry import build_domain
from genenv_jax.coevolution.settings import from_config
from genenv_jax.models.tokenizer import load_tokenizer
from genenv_jax.tasks.arithmetic.domain import ArithmeticDomain
from genenv_jax.tasks.arithmetic.running import RunningSumDomain, running_digits
from genenv_jax.training.config_checks import problems

FIELDS = ("prompt_ids", "prompt_mask", "spec", "difficulty", "valid")


@pytest.fixture(scope="module")
def domain() -> RunningSumDomain:
  return RunningSumDomain(
    load_tokenizer(),
    min_operands=3,
    max_operands=7,
    max_digits=1,
    operators="+-",
    bound=999,
    num_seeds=80,
    num_heldout=40,
    seed_decay=0.6,
    agent_prompt_len=0,
    agent_answer_len=0,
    env_prompt_len=0,
    env_output_len=0,
  )


@pytest.fixture(scope="module")
def parse(domain):
  return jax.jit(domain.parse_env_output)


@pytest.fixture(scope="module")
def verify(domain):
  return jax.jit(domain.verify)


def encode(domain, texts: list[str], width: int) -> tuple[np.ndarray, np.ndarray]:
  """Right-padded rows: the text's tokens, then EOS under mask 1, pad tokens under mask 0."""
  tok = domain.tokenizer
  ids = np.full((len(texts), width), tok.pad_id, np.int32)
  mask = np.zeros((len(texts), width), np.int32)
  for b, text in enumerate(texts):
    row = (tok.encode(text) + [tok.eos_id])[:width]
    ids[b, : len(row)], mask[b, : len(row)] = row, 1
  return ids, mask


def test_running_digits_by_hand():
  assert running_digits("3+4+5-9") == [7, 2, 3]  # 7, 12, 3
  assert running_digits("7+3+2") == [0, 2]
  assert running_digits("1-5-6") == [6, 0]  # -4 % 10 = 6, -10 % 10 = 0


def test_lengths_follow_the_longest_task(domain):
  assert domain.spec_len == 6 and domain.agent_answer_len == 7  # six digits, then EOS


def test_parse_hand_cases(domain, parse):
  texts = ["3+4+5-9", "7+3+2", "1-5-6+0+9+9+9", "3+4", "12+3+4", "3*4+5", "3+4+"]
  tasks = parse(*encode(domain, texts, domain.env_output_len))
  assert np.asarray(tasks.valid).tolist() == [True, True, True, False, False, False, False]
  spec = np.asarray(tasks.spec)
  assert spec[0].tolist() == [7, 2, 3, -1, -1, -1]
  assert spec[1].tolist() == [0, 2, -1, -1, -1, -1]
  assert spec[2].tolist() == [6, 0, 0, 9, 8, 7]
  assert (spec[3:] == -1).all()
  assert [domain.gold_answer(row) for row in spec[:3]] == ["723", "02", "600987"]
  assert np.asarray(tasks.difficulty)[:3].tolist() == [3, 2, 6]


def _alphabet_rows(domain, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
  """Rows over digits, + - *, EOS and pad, with random mask ends: well-formed and malformed tasks mixed."""
  t, width = domain.tokens, domain.env_output_len
  rows = []
  for _ in range(n):
    k = int(rng.integers(1, 9))
    digits = [str(int(rng.integers(0, 10 if rng.random() < 0.95 else 100))) for _ in range(k)]
    ops = rng.choice(list("+-*"), size=k, p=[0.6, 0.35, 0.05])
    rows.append("".join(d + o for d, o in zip(digits, ops))[:-1])
  ids, mask = encode(domain, rows, width)
  cut = rng.random(n) < 0.1
  mask[cut] = (np.arange(width)[None, :] < rng.integers(0, width + 1, size=(int(cut.sum()), 1))).astype(np.int32)
  ids[rng.random((n, width)) < 0.02] = t.eos_id
  return ids, mask


def test_jax_matches_host(domain, parse):
  rng = np.random.default_rng(0)
  ids, mask = _alphabet_rows(domain, rng, 500)
  seeds = domain.seed_tasks()
  ids, mask = np.concatenate([ids, seeds["env_ids"]]), np.concatenate([mask, seeds["env_mask"]])
  tasks = parse(ids, mask)
  host = domain.parse_env_output_host(ids, mask)
  for name in FIELDS:
    np.testing.assert_array_equal(np.asarray(getattr(tasks, name)), host[name], err_msg=name)
  valid = np.asarray(tasks.valid)
  assert 150 < valid.sum() < len(valid) - 100


def test_verify_exact_running_digits(domain, parse, verify):
  answers = ["723", "72", "7230", "724", "7 23", "-723", "", "723"]
  tasks = parse(*encode(domain, ["3+4+5-9"] * 7 + ["3+4"], domain.env_output_len))
  want = [1, 0, 0, 0, 0, 0, 0, 0]  # the last task is invalid (one operator: below min_operands)
  resp, resp_mask = encode(domain, answers, domain.agent_answer_len)
  assert np.asarray(verify(tasks, resp, resp_mask)).tolist() == want
  assert domain.verify_host(np.asarray(tasks.spec), np.asarray(tasks.valid), resp, resp_mask).tolist() == want
  # Digits to the end of the row, no EOS and no mask end: never terminated, so wrong.
  full = np.full((8, domain.agent_answer_len), domain.tokens.digit_ids[7], np.int32)
  assert not np.asarray(verify(tasks, full, np.ones_like(full))).any()


def test_verify_jax_matches_host_on_noisy_answers(domain, parse, verify):
  rng = np.random.default_rng(1)
  seeds = domain.seed_tasks()
  tasks = parse(seeds["env_ids"], seeds["env_mask"])
  truth = [domain.gold_answer(row) for row in np.asarray(tasks.spec)]
  noisy = []
  for s in truth:
    r = rng.random()
    if r < 0.4:
      noisy.append(s)
    elif r < 0.6:
      noisy.append(s[:-1])
    elif r < 0.8:
      i = int(rng.integers(0, len(s)))
      noisy.append(s[:i] + str((int(s[i]) + 1) % 10) + s[i + 1 :])
    else:
      noisy.append(s + str(int(rng.integers(0, 10))))
  resp, resp_mask = encode(domain, noisy, domain.agent_answer_len)
  got = np.asarray(verify(tasks, resp, resp_mask))
  want = domain.verify_host(np.asarray(tasks.spec), np.asarray(tasks.valid), resp, resp_mask)
  np.testing.assert_array_equal(got, want)
  assert got.tolist() == [float(a == b) for a, b in zip(noisy, truth)]


def test_seed_answers_are_the_running_digits(domain, verify):
  seeds = domain.seed_tasks()
  texts = domain.seed_expressions()
  tok = domain.tokenizer
  for b in range(5):
    answer = tok.decode(seeds["answer_ids"][b], stop_at_eos=True)
    assert answer == "".join(map(str, running_digits(texts[b])))
  assert seeds["valid"].all()
  assert np.asarray(
    verify(domain.parse_env_output(seeds["env_ids"], seeds["env_mask"]), seeds["answer_ids"], seeds["answer_mask"])
  ).all()


def test_constructor_errors():
  tok = load_tokenizer()
  lengths = dict(agent_prompt_len=0, agent_answer_len=0, env_prompt_len=0, env_output_len=0)
  with pytest.raises(ValueError, match="single-digit numbers joined by"):
    RunningSumDomain(tok, max_digits=2, operators="+", **lengths)
  with pytest.raises(ValueError, match="single-digit numbers joined by"):
    RunningSumDomain(tok, max_digits=1, operators="+*", **lengths)
  with pytest.raises(ValueError, match="agent_answer_len=6 is too short.*needs 8 tokens"):
    RunningSumDomain(tok, max_digits=1, operators="+", max_operands=8, **dict(lengths, agent_answer_len=6))


def test_config_selects_the_answer_form():
  cfg = get_config("smoke")
  answer = lambda: from_config(cfg).domain.answer  # noqa: E731
  assert type(build_domain(cfg.domain, load_tokenizer(), 0, answer())) is ArithmeticDomain
  cfg.domain.answer = "running"
  assert type(build_domain(cfg.domain, load_tokenizer(), 0, answer())) is RunningSumDomain
  del cfg.domain["answer"]  # a config saved before the key existed: the tree's one default
  assert type(build_domain(cfg.domain, load_tokenizer(), 0, answer())) is ArithmeticDomain
  cfg.domain.answer = "digits"
  assert any("domain.answer" in p and "'running'" in p for p in problems(cfg))
  with pytest.raises(ValueError, match="domain.answer must be one of"):
    build_domain(cfg.domain, load_tokenizer(), 0, "digits")
