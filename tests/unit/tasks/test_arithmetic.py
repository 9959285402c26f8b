"""Tests for genenv_jax.tasks.arithmetic.domain: the pure-JAX parser/evaluator/verifier against hand cases, against the
host-Python twin on random and malformed token rows, and the seed / held-out pools."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from coevolution_configs import arithmetic_domain

from genenv_jax.tasks.arithmetic import host
from genenv_jax.tasks.arithmetic.domain import ArithmeticDomain
from genenv_jax.tasks.base import TaskBatch

FIELDS = ("prompt_ids", "prompt_mask", "spec", "difficulty", "valid")


@pytest.fixture(scope="module")
def domain() -> ArithmeticDomain:
  return arithmetic_domain()


@pytest.fixture(scope="module")
def parse(domain):
  return jax.jit(domain.parse_env_output)


@pytest.fixture(scope="module")
def verify(domain):
  return jax.jit(domain.verify)


def encode(domain: ArithmeticDomain, texts: list[str], width: int, eos: bool = True) -> tuple[np.ndarray, np.ndarray]:
  """Right-padded rows: the text's tokens, then EOS under mask 1 (if `eos`), pad tokens under mask 0."""
  tok = domain.tokenizer
  ids = np.full((len(texts), width), tok.pad_id, np.int32)
  mask = np.zeros((len(texts), width), np.int32)
  for b, text in enumerate(texts):
    row = (tok.encode(text) + ([tok.eos_id] if eos else []))[:width]
    ids[b, : len(row)], mask[b, : len(row)] = row, 1
  return ids, mask


def assert_same_tasks(tasks: TaskBatch, expected: dict[str, np.ndarray]) -> None:
  for name in FIELDS:
    got = np.asarray(getattr(tasks, name))
    assert got.dtype == expected[name].dtype, name
    np.testing.assert_array_equal(got, expected[name], err_msg=name)


# (expression, valid, value, difficulty); difficulty = operators + (longest number's digits - 1) + (1 if '*').
HAND_CASES = [
  ("2+3", True, 5, 1),
  ("12-7*3", True, -9, 4),
  ("4*5*6", True, 120, 3),
  ("1-2-3", True, -4, 2),  # left to right
  ("2*3+4*5", True, 26, 4),
  ("8-2*3-1", True, 1, 4),
  ("0+0", True, 0, 1),
  ("999*999", True, 998001, 4),
  ("10-999*999", True, -997991, 5),
  ("1+2+3+4", True, 10, 3),
  ("-3+4", False, 0, 0),  # leading operator
  ("3++4", False, 0, 0),  # two operators in a row
  ("07+1", False, 0, 0),  # leading zero
  ("3+4*", False, 0, 0),  # trailing operator
  ("5", False, 0, 0),  # no operator
  ("", False, 0, 0),  # empty
  ("1+2+3+4+5", False, 0, 0),  # five operands > max_operands
  ("1000+1", False, 0, 0),  # four digits > max_digits
  ("999*999*2", False, 0, 0),  # partial product over 10**6
  ("0-999*999-999*999", False, 0, 0),  # partial sum under -10**6
  ("3 + 4", False, 0, 0),  # spaces are not part of the grammar
  ("(1+2)*3", False, 0, 0),  # nor are parentheses
]


def test_hand_cases(domain, parse):
  texts = [c[0] for c in HAND_CASES]
  tasks = parse(*encode(domain, texts, domain.env_output_len))
  for b, (text, valid, value, difficulty) in enumerate(HAND_CASES):
    assert bool(tasks.valid[b]) == valid, text
    assert int(tasks.spec[b, 0]) == value, text
    assert float(tasks.difficulty[b]) == difficulty, text
    if valid:
      assert value == eval(text, {"__builtins__": {}})  # noqa: S307 (digits and + - * only)
  assert tasks.prompt_ids.shape == (len(texts), domain.agent_prompt_len)
  assert tasks.spec.shape == (len(texts), domain.spec_len) and tasks.spec.dtype == jnp.int32
  assert tasks.difficulty.dtype == jnp.float32 and tasks.valid.dtype == jnp.bool_


def test_agent_prompt_is_left_padded_compute_line(domain, parse):
  tasks = parse(*encode(domain, ["12-7*3", "3++4"], domain.env_output_len))
  tok, ids, mask = domain.tokenizer, np.asarray(tasks.prompt_ids), np.asarray(tasks.prompt_mask)
  n = int(mask[0].sum())
  assert mask[0].tolist() == [0] * (domain.agent_prompt_len - n) + [1] * n
  assert ids[0, -n] == tok.bos_id and tok.decode(ids[0]) == "Compute: 12-7*3 ="
  assert tok.decode(ids[1]) == "Compute:  ="  # an invalid task gets the empty expression, never a crash


def test_termination_rules(domain, parse):
  width = domain.env_output_len
  ids, mask = encode(domain, ["1+2", "1+2", "1+2"], width)
  mask[1, 3:] = 0  # no EOS, but the mask ends: the content ends there
  ids[1, 3:] = 7  # (garbage under mask 0 is ignored)
  ids[2, 4:] = domain.tokens.digit_ids[9]  # garbage after the EOS is ignored
  mask[2, :] = 1
  full = encode(domain, ["1+1+1+1+1+1+1+1"], width, eos=False)  # fills the row, never emits EOS
  overflow_ids, overflow_mask = full[0], np.ones_like(full[1])
  tasks = parse(np.concatenate([ids, overflow_ids]), np.concatenate([mask, overflow_mask]))
  assert np.asarray(tasks.valid).tolist() == [True, True, True, False]
  assert np.asarray(tasks.spec[:, 0]).tolist() == [3, 3, 3, 0]
  short = encode(domain, ["12+3"], width, eos=False)  # an exact fit without EOS, mask all ones: not terminated
  tasks = parse(short[0][:, :4], np.ones((1, 4), np.int32))
  assert not bool(tasks.valid[0])


def _random_rows(domain: ArithmeticDomain, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
  """Malformed and well-formed rows: uniform ids, arithmetic-alphabet soup, byte-fallback digits, random masks."""
  t, width = domain.tokens, domain.env_output_len
  alphabet = np.asarray([*t.digit_ids, t.plus_id, t.minus_id, t.times_id, t.eos_id, t.pad_id, t.bos_ids[0]])
  weights = np.asarray([6] * 10 + [3, 3, 3, 2, 1, 1], np.float64)
  kinds = rng.integers(0, 3, size=n)
  ids = np.where(
    kinds[:, None] == 0,
    rng.integers(0, domain.tokenizer.vocab_size + 8, size=(n, width)),
    rng.choice(alphabet, size=(n, width), p=weights / weights.sum()),
  )
  bytes_digits = rng.random((n, width)) < 0.05  # "<0x31>" decodes to "1" but is not the digit piece
  ids = np.where(bytes_digits, rng.integers(52, 62, size=(n, width)), ids).astype(np.int32)
  ends = rng.integers(0, width + 1, size=n)
  mask = (np.arange(width)[None, :] < ends[:, None]).astype(np.int32)
  mask[kinds == 2] = 1
  return ids, mask


def _random_expressions(
  rng: np.random.Generator, n: int, operands: tuple[int, int] = (1, 5), digits: int = 4
) -> list[str]:
  """Digit/operator strings with operands in [lo, hi] and numbers of up to `digits` digits (some out of range)."""
  out = []
  for _ in range(n):
    k = int(rng.integers(operands[0], operands[1] + 1))
    nums = [str(int(rng.integers(0, 10 ** int(rng.integers(1, digits + 1))))) for _ in range(k)]
    out.append("".join(x + str(rng.choice(list("+-*"))) for x in nums[:-1]) + nums[-1])
  return out


def test_jax_matches_host_on_random_and_real_rows(domain, parse):
  rng = np.random.default_rng(0)
  ids, mask = _random_rows(domain, rng, 600)
  texts = _random_expressions(rng, 400) + domain.seed_expressions()
  real_ids, real_mask = encode(domain, texts, domain.env_output_len)
  ids, mask = np.concatenate([ids, real_ids]), np.concatenate([mask, real_mask])
  tasks = parse(ids, mask)
  assert_same_tasks(tasks, domain.parse_env_output_host(ids, mask))
  valid = np.asarray(tasks.valid)
  assert 150 < valid.sum() < len(valid) - 300  # both branches well exercised
  for b in np.flatnonzero(valid[600:]) + 600:  # real expressions: the value is Python's
    assert int(tasks.spec[b, 0]) == eval(texts[b - 600], {"__builtins__": {}})  # noqa: S307


def test_byte_fallback_digits_are_not_digits(domain, parse):
  tok = domain.tokenizer
  ids = np.asarray([[53, tok.encode("+")[0], 54, tok.eos_id]], np.int32)  # "<0x31>+<0x32>" decodes to "1+2"
  assert tok.decode(ids[0], stop_at_eos=True) == "1+2"
  mask = np.ones_like(ids)
  assert not bool(parse(ids, mask).valid[0])
  assert not domain.parse_env_output_host(ids, mask)["valid"][0]


def test_verify_exact_integer_answers(domain, parse, verify):
  tasks = parse(*encode(domain, ["12-7*3"] * 10 + ["3++4"], domain.env_output_len))
  answers = ["-9", "9", "-09", "-9 ", " -9", "-9-", "", "--9", "-9.0", "-90", "0"]
  want = [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]  # "0" on the invalid task still earns nothing
  resp, resp_mask = encode(domain, answers, domain.agent_answer_len)
  assert np.asarray(verify(tasks, resp, resp_mask)).tolist() == want
  assert domain.verify_host(tasks.spec, tasks.valid, resp, resp_mask).tolist() == want
  zero = parse(*encode(domain, ["0*5", "0*5"], domain.env_output_len))
  resp, resp_mask = encode(domain, ["0", "-0"], domain.agent_answer_len)
  assert np.asarray(verify(zero, resp, resp_mask)).tolist() == [1, 0]
  # An EOS under mask 1 ends the answer; a row of digits with no EOS and no mask end never ends.
  ended = encode(domain, ["-9"], domain.agent_answer_len)[0]
  assert float(verify(tasks, np.repeat(ended, 11, 0), np.ones((11, domain.agent_answer_len), np.int32))[0]) == 1
  overflow = np.full((11, domain.agent_answer_len), domain.tokens.digit_ids[9], np.int32)
  assert not np.asarray(verify(tasks, overflow, np.ones_like(overflow))).any()


def test_verify_jax_matches_host_on_random_responses(domain, parse, verify):
  rng = np.random.default_rng(1)
  texts = _random_expressions(rng, 600, operands=(2, 4), digits=2)
  tasks = parse(*encode(domain, texts, domain.env_output_len))
  t, width = domain.tokens, domain.agent_answer_len
  truth = [str(int(v)) for v in np.asarray(tasks.spec[:, 0])]
  noisy = [
    s if rng.random() < 0.5 else str(rng.choice(["-", "0", "", " ", "+", "00"])) + s[int(rng.integers(0, 2)) :]
    for s in truth
  ]
  resp, resp_mask = encode(domain, noisy, width)
  soup = rng.choice(np.asarray([*t.digit_ids, t.minus_id, t.eos_id, t.pad_id, 53]), size=(200, width))
  resp = np.concatenate([resp, soup.astype(np.int32)])
  resp_mask = np.concatenate([resp_mask, (rng.random((200, width)) < 0.9).astype(np.int32)])
  tasks = jax.tree.map(lambda x: jnp.concatenate([x, x[:200]]), tasks)
  got = np.asarray(verify(tasks, resp, resp_mask))
  want = domain.verify_host(np.asarray(tasks.spec), np.asarray(tasks.valid), resp, resp_mask)
  np.testing.assert_array_equal(got, want)
  assert got.dtype == np.float32 and 100 < got.sum() < len(got) - 100


def test_seed_and_heldout_pools(domain, verify):
  seeds, heldout = domain.seed_tasks(), domain.heldout_tasks()
  keys = set(FIELDS) | {"env_ids", "env_mask", "answer_ids", "answer_mask"}
  assert set(seeds) == set(heldout) == keys
  levels = domain.max_difficulty
  assert levels == 6
  for pool, n in ((seeds, domain.num_seeds), (heldout, domain.num_heldout)):
    assert pool["valid"].all() and pool["env_ids"].shape == (n, domain.env_output_len)
    counts = np.bincount(pool["difficulty"].astype(int), minlength=levels + 1)
    assert counts[0] == 0 and counts[1:].max() - counts[1:].min() <= 1 and counts[1:].min() >= 1
    lengths = pool["env_mask"].sum(1)
    rows = np.arange(n)
    assert (pool["env_ids"][rows, lengths - 1] == domain.tokens.eos_id).all()  # ends in EOS under the mask
    assert (pool["answer_ids"][rows, pool["answer_mask"].sum(1) - 1] == domain.tokens.eos_id).all()
    assert (pool["env_ids"][pool["env_mask"] == 0] == domain.tokens.eos_id).all()  # right-padded with EOS
    tasks = TaskBatch(**{k: jnp.asarray(pool[k]) for k in FIELDS})
    assert np.asarray(verify(tasks, pool["answer_ids"], pool["answer_mask"])).all()
  seed_set, heldout_set = set(domain.seed_expressions()), set(domain.heldout_expressions())
  assert len(heldout_set) == domain.num_heldout and not seed_set & heldout_set  # held-out: distinct, never a seed
  assert len(seed_set) >= 0.9 * domain.num_seeds  # seeds may repeat only where a level has few distinct tasks
  assert domain.seed_expressions() == arithmetic_domain().seed_expressions()  # deterministic in the seed
  assert domain.seed_expressions() != arithmetic_domain(seed=1).seed_expressions()


def test_parse_reproduces_seed_rows(domain, parse):
  seeds = domain.seed_tasks()
  assert_same_tasks(parse(seeds["env_ids"], seeds["env_mask"]), {k: seeds[k] for k in FIELDS})


def test_env_prompt_matches_text_encoding(domain):
  seeds = domain.seed_tasks()
  n = domain.num_seeds
  p_hat = np.linspace(0.0, 1.0, n).astype(np.float32)
  p_hat[:4] = [np.nan, -1.0, 0.25, 0.5]
  batch = {k: seeds[k] for k in ("env_ids", "env_mask")}
  fn = jax.jit(domain.env_prompt)
  ids, mask = fn(batch, {"p_hat": p_hat})
  want_ids, want_mask = domain.env_prompt_host(domain.seed_expressions(), p_hat)
  np.testing.assert_array_equal(np.asarray(ids), want_ids)
  np.testing.assert_array_equal(np.asarray(mask), want_mask)
  tok = domain.tokenizer
  expr = domain.seed_expressions()
  assert tok.decode(np.asarray(ids[0])) == f"Seed: {expr[0]} | rate ? | New task:"
  assert tok.decode(np.asarray(ids[3])) == f"Seed: {expr[3]} | rate 0.5 | New task:"
  assert tok.decode(np.asarray(ids[-1])) == f"Seed: {expr[-1]} | rate 1.0 | New task:"
  unknown, _ = fn(batch, {})
  assert tok.decode(np.asarray(unknown[5])) == f"Seed: {expr[5]} | rate ? | New task:"


def test_host_verifier_without_mesh_matches_jax(domain, parse):
  host_domain = dataclasses.replace(domain, verifier="host")
  ids, mask = encode(domain, ["12-7*3", "2+3", "3++4", "999*999"], domain.env_output_len)
  tasks = jax.jit(host_domain.parse_env_output)(ids, mask)
  assert_same_tasks(tasks, domain.parse_env_output_host(ids, mask))
  resp, resp_mask = encode(domain, ["-9", "6", "0", "998001"], domain.agent_answer_len)
  got = jax.jit(host_domain.verify)(tasks, resp, resp_mask)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.jit(domain.verify)(parse(ids, mask), resp, resp_mask)))
  assert np.asarray(got).tolist() == [1, 0, 0, 1]


def test_constructor_errors(domain):
  tok = domain.tokenizer
  with pytest.raises(ValueError, match="verifier"):
    ArithmeticDomain(tok, verifier="python")
  with pytest.raises(ValueError, match="env_output_len"):
    ArithmeticDomain(tok, env_output_len=8)
  with pytest.raises(ValueError, match="agent_prompt_len"):
    ArithmeticDomain(tok, agent_prompt_len=10)
  with pytest.raises(ValueError, match="overflows int32"):
    ArithmeticDomain(tok, max_digits=4, env_output_len=32, agent_prompt_len=32, env_prompt_len=48)
  with pytest.raises(ValueError, match="num_seeds"):
    ArithmeticDomain(tok, num_seeds=3)
  with pytest.raises(ValueError, match="max_operands"):
    ArithmeticDomain(tok, max_operands=1)
  small = ArithmeticDomain(tok, max_operands=2, max_digits=1, num_seeds=2, num_heldout=2)
  assert small.max_difficulty == 2 and sorted(small.seed_tasks()["difficulty"].tolist()) == [1.0, 2.0]
  assert hash(small) == hash(small)  # usable as a static jit argument


def test_host_difficulty_definition():
  expr = host.evaluate_text("12+7*3-5", max_operands=4, max_digits=3, bound=10**6)
  assert expr is not None and expr.value == 28
  assert host.difficulty_of(expr) == 3 + 1 + 1


# ---- the demo's knobs: operator subset, operand range, seed level weights, automatic lengths ------------------------


@pytest.fixture(scope="module")
def sums() -> ArithmeticDomain:
  """A small version of the demo family: sums of 3..6 single digits, seeds mostly easy, lengths automatic."""
  return arithmetic_domain(
    min_operands=3,
    max_operands=6,
    max_digits=1,
    operators="+",
    bound=999,
    seed_decay=0.5,
    num_seeds=93,
    num_heldout=40,
    agent_prompt_len=0,
    agent_answer_len=0,
    env_prompt_len=0,
    env_output_len=0,
  )


def test_operator_subset_and_operand_range(sums):
  assert (sums.min_difficulty, sums.max_difficulty, sums.levels) == (2, 5, (2, 3, 4, 5))
  assert sums.env_output_len == 6 * 1 + 5 + 1  # the longest expression plus EOS
  assert sums.agent_answer_len == len("-999") + 1
  cases = [
    ("1+2+3", True, 6, 2),
    ("9+9+9+9+9+9", True, 54, 5),
    ("1+2", False, 0, 0),  # too few operands
    ("1+2+3+4+5+6+7", False, 0, 0),
    ("1+2-3", False, 0, 0),
    ("1*2+3", False, 0, 0),  # '-', '*' not allowed
    ("10+2+3", False, 0, 0),
  ]  # two digits
  ids, mask = encode(sums, [c[0] for c in cases], sums.env_output_len)
  tasks = jax.jit(sums.parse_env_output)(ids, mask)
  got = [(bool(v), int(x), float(d)) for v, x, d in zip(tasks.valid, tasks.spec[:, 0], tasks.difficulty)]
  assert got == [c[1:] for c in cases]
  assert_same_tasks(tasks, sums.parse_env_output_host(ids, mask))
  rng = np.random.default_rng(3)
  texts = _random_expressions(rng, 300, operands=(2, 7), digits=1)
  texts += ["+".join(str(int(d)) for d in rng.integers(0, 10, size=int(rng.integers(2, 8)))) for _ in range(300)]
  ids, mask = encode(sums, texts, sums.env_output_len)
  tasks = jax.jit(sums.parse_env_output)(ids, mask)
  assert_same_tasks(tasks, sums.parse_env_output_host(ids, mask))
  assert 100 < int(np.asarray(tasks.valid).sum()) < 500
  times_only = arithmetic_domain(max_operands=3, max_digits=1, operators="*", num_seeds=4, num_heldout=4)
  assert times_only.levels == (2, 3)  # every task uses '*': one operator + 1 is the easiest level
  assert set(times_only.seed_tasks()["difficulty"].tolist()) == {2.0, 3.0}


def test_seed_levels_follow_the_decay_and_heldout_spans_every_level(sums):
  seeds, heldout = sums.seed_tasks(), sums.heldout_tasks()
  # weights 1, 1/2, 1/4, 1/8 over levels 2..5 (sum 15/8): 93 seeds -> 49.6, 24.8, 12.4, 6.2
  counts = np.bincount(seeds["difficulty"].astype(int), minlength=6)[2:]
  want = 93 * np.asarray([8, 4, 2, 1]) / 15
  assert np.abs(counts - want).max() <= 1.0 and counts.sum() == 93
  levels = sums.seed_level_sequence()
  assert levels[:4] == [2, 3, 4, 5] and levels == [int(d) for d in seeds["difficulty"]]
  for n in (10, 31, 60):  # every prefix follows the weights to within about one task per level
    prefix = np.bincount(levels[:n], minlength=6)[2:]
    assert np.abs(prefix - n * np.asarray([8, 4, 2, 1]) / 15).max() <= 1.5, (n, prefix)
  h = np.bincount(heldout["difficulty"].astype(int), minlength=6)[2:]
  assert h.tolist() == [10, 10, 10, 10]
  assert not set(sums.seed_expressions()) & set(sums.heldout_expressions())
  easy = dataclasses.replace(sums, seed_max_difficulty=3, seed_decay=1.0)
  assert easy.seed_levels == (2, 3) and easy.seed_level_sequence()[:6] == [2, 3, 2, 3, 2, 3]
  assert set(easy.seed_tasks()["difficulty"].tolist()) == {2.0, 3.0}
  assert np.bincount(easy.heldout_tasks()["difficulty"].astype(int))[2:].tolist() == [10, 10, 10, 10]


def test_new_knob_errors(domain):
  tok = domain.tokenizer
  for kwargs, match in [
    (dict(min_operands=1), "min_operands"),
    (dict(min_operands=5), "min_operands"),
    (dict(operators="+/"), "operators"),
    (dict(operators=""), "operators"),
    (dict(operators="++"), "operators"),
    (dict(seed_decay=0.0), "seed_decay"),
    (dict(seed_max_difficulty=9), "seed_max_difficulty"),
    (dict(min_operands=3, seed_max_difficulty=1), "seed_max_difficulty"),
    (dict(num_heldout=5), "num_heldout"),
  ]:
    with pytest.raises(ValueError, match=match):
      ArithmeticDomain(tok, **kwargs)
