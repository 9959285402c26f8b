"""The embedded default domain: synthetic integer arithmetic with a difficulty knob (the CPU demo's task family).

GenEnv (arXiv 2512.19682), Algorithm 1, on a task family small enough to train from scratch: the env model writes an
expression, the domain computes its value itself (never trusting the env), the agent answers, and the domain checks
the answer exactly. Text forms (every piece tokenized by the shipped sentencepiece model, where each digit and each
of + - * is its own piece):

  env output     `12+7*3-5` then EOS
  agent prompt   BOS `Compute: 12+7*3-5 =`, left-padded to agent_prompt_len
  agent answer   `28` (optional leading '-') then EOS
  env prompt     BOS `Seed: 12+7*3-5 | rate 0.5 | New task:`, left-padded to env_prompt_len; the rate is the seed's
                 recent success rate p̂ to the nearest tenth ("0.0" .. "1.0"), or `?` when unknown

Difficulty, computed from the expression itself:
    difficulty = (number of operators) + (digits of the longest number - 1) + (1 if it uses '*')
so `3+4` is 1 and the hardest, max_operands numbers of max_digits digits with a '*', is
(max_operands - 1) + (max_digits - 1) + 1 (6 at the defaults 4 and 3). Invalid tasks have difficulty 0.

`verifier="jax"` keeps parsing and verification on device (`arithmetic_jax`); `verifier="host"` runs the Python twin
(`arithmetic_host`) inside jit through `host_callback.host_map`, sharded over every axis of the mesh in context.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from genenv_jax.domains import arithmetic_host as host
from genenv_jax.domains import arithmetic_jax as aj
from genenv_jax.domains.base import TaskBatch
from genenv_jax.domains.host_callback import host_map
from genenv_jax.tokenizer import Tokenizer

DEFAULT_BOUND = 10**6
_UNKNOWN_RATE = 11  # row of ArithTokens.rate_ids that spells "?"


def _single(tokenizer: Tokenizer, text: str) -> int:
  ids = tokenizer.encode(text)
  if len(ids) != 1:
    raise ValueError(f"the arithmetic domain needs {text!r} to be one token, but {tokenizer!r} spells it {ids}; "
                     "use a tokenizer with split digits (e.g. the shipped genenv_jax/assets/arith_spm.model)")
  return ids[0]


def arith_tokens(tokenizer: Tokenizer) -> aj.ArithTokens:
  """The static token table of `tokenizer`; raises ValueError if digits or operators are not single pieces."""
  digit_ids = tuple(_single(tokenizer, str(d)) for d in range(10))
  ops = {op: _single(tokenizer, op) for op in "+-*"}
  probe = "90+12-345*678"  # digits and operators must not merge into other pieces
  want = [digit_ids[int(c)] if c.isdigit() else ops[c] for c in probe]
  if tokenizer.encode(probe) != want:
    raise ValueError(f"{tokenizer!r} does not spell {probe!r} one piece per character; the arithmetic domain "
                     "reads expressions token by token")
  rates = [tuple(tokenizer.encode(f"{k // 10}.{k % 10}")) for k in range(11)] + [tuple(tokenizer.encode("?"))]
  width = max(len(r) for r in rates)
  return aj.ArithTokens(
    digit_ids=digit_ids, plus_id=ops["+"], minus_id=ops["-"], times_id=ops["*"],
    eos_ids=tuple(tokenizer.eos_ids), pad_id=tokenizer.pad_id,
    bos_ids=() if tokenizer.bos_id is None else (tokenizer.bos_id,),
    compute_prefix=tuple(tokenizer.encode("Compute: ")), compute_suffix=tuple(tokenizer.encode(" =")),
    seed_prefix=tuple(tokenizer.encode("Seed: ")), rate_prefix=tuple(tokenizer.encode(" | rate ")),
    task_suffix=tuple(tokenizer.encode(" | New task:")),
    rate_ids=tuple(r + (tokenizer.pad_id,) * (width - len(r)) for r in rates),
    rate_lens=tuple(len(r) for r in rates))


@dataclasses.dataclass(frozen=True)
class ArithmeticDomain:
  """Synthetic + - * arithmetic (see the module docstring); implements `genenv_jax.domains.base.Domain`.

  Args: the tokenizer; `max_operands` (2..) and `max_digits` (1..3 at the default bound) bound the grammar;
  `num_seeds` / `num_heldout` tasks are drawn with numpy from `seed`, spread evenly over difficulties 1..max;
  the four lengths fix every shape; `bound` caps |partial products|, |partial sums| and |value|; `verifier` is
  "jax" or "host". Lengths too short for the longest task raise ValueError at construction.
  """

  tokenizer: Tokenizer
  max_operands: int = 4
  max_digits: int = 3
  num_seeds: int = 60
  num_heldout: int = 60
  seed: int = 0
  agent_prompt_len: int = 24
  agent_answer_len: int = 10
  env_prompt_len: int = 40
  env_output_len: int = 16
  bound: int = DEFAULT_BOUND
  verifier: str = "jax"
  name: str = dataclasses.field(default="arithmetic", init=False)
  spec_len: int = dataclasses.field(default=1, init=False)
  success_threshold: float = dataclasses.field(default=0.5, init=False)
  tokens: aj.ArithTokens = dataclasses.field(init=False, repr=False)

  def __post_init__(self):
    if self.verifier not in ("jax", "host"):
      raise ValueError(f"verifier must be 'jax' or 'host', got {self.verifier!r}")
    if self.max_operands < 2:
      raise ValueError(f"max_operands must be >= 2 (a task has at least one operator), got {self.max_operands}")
    aj.check_bounds(self.max_digits, self.bound)
    levels = self.max_difficulty
    for name in ("num_seeds", "num_heldout"):
      if getattr(self, name) < levels:
        raise ValueError(f"{name}={getattr(self, name)} cannot span the {levels} difficulty levels; use >= {levels}")
    object.__setattr__(self, "tokens", arith_tokens(self.tokenizer))
    t = self.tokens
    expr = self.max_expression_len
    need = {
      "env_output_len": expr + 1,
      "agent_prompt_len": len(t.bos_ids) + len(t.compute_prefix) + expr + len(t.compute_suffix),
      "agent_answer_len": len(str(-self.bound)) + 1,
      "env_prompt_len": (len(t.bos_ids) + len(t.seed_prefix) + expr + len(t.rate_prefix) + max(t.rate_lens)
                         + len(t.task_suffix)),
    }
    for name, n in need.items():
      if getattr(self, name) < n:
        raise ValueError(f"{name}={getattr(self, name)} is too short: the longest task needs {n} tokens "
                         f"(max_operands={self.max_operands}, max_digits={self.max_digits}, bound={self.bound})")

  # -- static facts ---------------------------------------------------------------------------------------------------

  @property
  def max_expression_len(self) -> int:
    """Tokens of the longest well-formed expression (one per character)."""
    return self.max_operands * self.max_digits + self.max_operands - 1

  @property
  def max_difficulty(self) -> int:
    return (self.max_operands - 1) + (self.max_digits - 1) + 1

  # -- pure JAX -------------------------------------------------------------------------------------------------------

  def _parse_jax(self, tokens: jax.Array, mask: jax.Array) -> TaskBatch:
    t = self.tokens
    tokens, mask = jnp.asarray(tokens, jnp.int32), jnp.asarray(mask, jnp.int32)
    length, terminated = aj.content_end(tokens, mask, t.eos_ids)
    e = aj.evaluate_expression(tokens, length, terminated, t, self.max_operands, self.max_digits, self.bound)
    prompt_ids, prompt_mask = aj.pack_left_padded(
      [aj.const(t.bos_ids), aj.const(t.compute_prefix), (tokens, jnp.where(e.ok, length, 0)),
       aj.const(t.compute_suffix)], self.agent_prompt_len, t.pad_id)
    difficulty = e.n_operators + e.max_digits - 1 + e.has_times.astype(jnp.int32)
    return TaskBatch(prompt_ids=prompt_ids, prompt_mask=prompt_mask, spec=e.value[:, None],
                     difficulty=jnp.where(e.ok, difficulty, 0).astype(jnp.float32), valid=e.ok)

  def _verify_jax(self, tasks: TaskBatch, response: jax.Array, response_mask: jax.Array) -> jax.Array:
    ok, value = aj.parse_integer(jnp.asarray(response, jnp.int32), jnp.asarray(response_mask, jnp.int32),
                                 self.tokens)
    return (ok & tasks.valid & (value == tasks.spec[:, 0])).astype(jnp.float32)

  # -- the Domain protocol --------------------------------------------------------------------------------------------

  def parse_env_output(self, tokens: jax.Array, mask: jax.Array) -> TaskBatch:
    """Jittable: env output [B, env_output_len] -> TaskBatch (see the module docstring for the rules)."""
    if self.verifier == "jax":
      return self._parse_jax(tokens, mask)
    batch = tokens.shape[0]
    out_like = dict(prompt_ids=jax.ShapeDtypeStruct((batch, self.agent_prompt_len), jnp.int32),
                    prompt_mask=jax.ShapeDtypeStruct((batch, self.agent_prompt_len), jnp.int32),
                    spec=jax.ShapeDtypeStruct((batch, self.spec_len), jnp.int32),
                    difficulty=jax.ShapeDtypeStruct((batch,), jnp.float32),
                    valid=jax.ShapeDtypeStruct((batch,), jnp.bool_))
    return TaskBatch(**host_map(self.parse_env_output_host, out_like, tokens, mask))

  def verify(self, tasks: TaskBatch, response: jax.Array, response_mask: jax.Array) -> jax.Array:
    """Jittable: R_agent [B] float32, 1.0 iff the task is valid and the response spells spec[:, 0] then EOS."""
    if self.verifier == "jax":
      return self._verify_jax(tasks, response, response_mask)
    out_like = jax.ShapeDtypeStruct((response.shape[0],), jnp.float32)
    return host_map(self.verify_host, out_like, tasks.spec, tasks.valid, response, response_mask)

  def env_prompt(self, seed: dict[str, jax.Array], stats: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
    """Jittable: BOS `Seed: <expr> | rate <r> | New task:` per seed row, left-padded to env_prompt_len.

    <expr> is the content of seed["env_ids"] / seed["env_mask"] (clipped to max_expression_len tokens); r is
    stats["p_hat"] to the nearest tenth, "?" where it is NaN or negative, or for every row when absent.
    """
    t = self.tokens
    env_ids, env_mask = jnp.asarray(seed["env_ids"], jnp.int32), jnp.asarray(seed["env_mask"], jnp.int32)
    length, _ = aj.content_end(env_ids, env_mask, t.eos_ids)
    length = jnp.minimum(length, self.max_expression_len)
    batch = env_ids.shape[0]
    p_hat = stats.get("p_hat") if stats else None
    if p_hat is None:
      rate = jnp.full((batch,), _UNKNOWN_RATE, jnp.int32)
    else:
      p_hat = jnp.asarray(p_hat, jnp.float32)
      tenths = jnp.clip(jnp.round(p_hat * jnp.float32(10)), 0, 10)
      rate = jnp.where(p_hat >= 0, tenths, _UNKNOWN_RATE).astype(jnp.int32)  # NaN >= 0 is False
    rate_ids = jnp.asarray(t.rate_ids, jnp.int32)[rate]
    rate_lens = jnp.asarray(t.rate_lens, jnp.int32)[rate]
    return aj.pack_left_padded(
      [aj.const(t.bos_ids), aj.const(t.seed_prefix), (env_ids, length), aj.const(t.rate_prefix),
       (rate_ids, rate_lens), aj.const(t.task_suffix)], self.env_prompt_len, t.pad_id)

  # -- host twins -----------------------------------------------------------------------------------------------------

  def parse_env_output_host(self, tokens: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """Host Python twin of parse_env_output (decode, regex, Python ints): TaskBatch fields as numpy arrays."""
    return host.parse_env_output(self.tokenizer, tokens, mask, max_operands=self.max_operands,
                                 max_digits=self.max_digits, bound=self.bound, agent_prompt_len=self.agent_prompt_len)

  def verify_host(self, spec: np.ndarray, valid: np.ndarray, response: np.ndarray,
                  response_mask: np.ndarray) -> np.ndarray:
    """Host Python twin of verify: R_agent [B] np.float32."""
    return host.verify(self.tokenizer, spec, valid, response, response_mask)

  def env_prompt_host(self, expressions: list[str], p_hat: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Host twin of env_prompt from expression texts, encoded from the full prompt text."""
    texts = host.env_prompt_texts(expressions, p_hat)
    return self.tokenizer.batch_encode(texts, max_length=self.env_prompt_len, add_bos=True, truncation="left")

  # -- seed and held-out pools ----------------------------------------------------------------------------------------

  def _shapes(self) -> dict[int, list[tuple[int, int, bool]]]:
    """(operators, digits, uses '*') combinations per difficulty level."""
    out: dict[int, list[tuple[int, int, bool]]] = {}
    for n_ops in range(1, self.max_operands):
      for digits in range(1, self.max_digits + 1):
        for times in (False, True):
          out.setdefault(n_ops + digits - 1 + int(times), []).append((n_ops, digits, times))
    return out

  def _draw(self, rng: np.random.Generator, n_ops: int, digits: int, times: bool) -> str:
    sizes = rng.integers(1, digits + 1, size=n_ops + 1)
    sizes[rng.integers(0, n_ops + 1)] = digits  # the longest number has exactly `digits` digits
    numbers = [int(rng.integers(0, 10)) if k == 1 else int(rng.integers(10**(k - 1), 10**k)) for k in sizes]
    ops = list(rng.choice(list("+-*" if times else "+-"), size=n_ops))
    if times:
      ops[int(rng.integers(0, n_ops))] = "*"
    return str(numbers[0]) + "".join(op + str(x) for op, x in zip(ops, numbers[1:]))

  def _expressions(self) -> tuple[list[str], list[str]]:
    """(seed, held-out) expression texts: deterministic in `seed`, distinct, each spread evenly over levels.

    Row i of each list has difficulty 1 + (i mod max_difficulty), so any prefix spans the range too.
    """
    rng = np.random.default_rng(self.seed)
    shapes, seen = self._shapes(), set()
    lists: tuple[list[str], list[str]] = ([], [])
    for out, count in zip(lists, (self.num_seeds, self.num_heldout)):
      for i in range(count):
        level = 1 + i % self.max_difficulty
        for _ in range(10_000):
          text = self._draw(rng, *shapes[level][int(rng.integers(0, len(shapes[level])))])
          expr = host.evaluate_text(text, self.max_operands, self.max_digits, self.bound)
          if text not in seen and expr is not None and host.difficulty_of(expr) == level:
            break
        else:
          raise ValueError(f"could not draw {count} distinct tasks of difficulty {level}; lower num_seeds / "
                           "num_heldout or raise max_digits")
        seen.add(text)
        out.append(text)
    return lists

  def _task_arrays(self, texts: list[str]) -> dict[str, np.ndarray]:
    tok, eos = self.tokenizer, self.tokens.eos_id

    def right_padded(rows: list[list[int]], width: int) -> tuple[np.ndarray, np.ndarray]:
      ids = np.full((len(rows), width), eos, np.int32)
      mask = np.zeros((len(rows), width), np.int32)
      for b, row in enumerate(rows):
        ids[b, :len(row)], mask[b, :len(row) + 1] = row, 1  # the content, then one EOS under mask 1
      return ids, mask

    env_ids, env_mask = right_padded([tok.encode(x) for x in texts], self.env_output_len)
    tasks = self.parse_env_output_host(env_ids, env_mask)
    if not tasks["valid"].all():
      raise AssertionError("a generated task failed to parse; this is a bug in ArithmeticDomain")
    answers = [tok.encode(str(int(v))) for v in tasks["spec"][:, 0]]
    answer_ids, answer_mask = right_padded(answers, self.agent_answer_len)
    return dict(tasks, env_ids=env_ids, env_mask=env_mask, answer_ids=answer_ids, answer_mask=answer_mask)

  def seed_tasks(self) -> dict[str, np.ndarray]:
    """The seed pool: TaskBatch fields + env_ids/env_mask + answer_ids/answer_mask ([N, ...], right-padded)."""
    return self._task_arrays(self._expressions()[0])

  def heldout_tasks(self) -> dict[str, np.ndarray]:
    """The held-out set: same keys as seed_tasks, no expression in common with it."""
    return self._task_arrays(self._expressions()[1])

  def seed_expressions(self) -> list[str]:
    """The seed tasks as text (row order of seed_tasks)."""
    return self._expressions()[0]

  def heldout_expressions(self) -> list[str]:
    return self._expressions()[1]


def default_domain(**overrides: Any) -> ArithmeticDomain:
  """The demo domain on the shipped tokenizer (`load_tokenizer()`), any field overridable."""
  from genenv_jax.tokenizer import load_tokenizer
  return ArithmeticDomain(load_tokenizer(), **overrides)
