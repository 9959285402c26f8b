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
(max_operands - 1) + (max_digits - 1) + 1 (6 at the defaults 4 and 3; no +1 when `operators` has no '*'). Invalid
tasks have difficulty 0. The CPU demo (configs/default.py) uses sums of min_operands..max_operands single digits, so
there difficulty is simply the number of '+' signs.

`verifier="jax"` keeps parsing and verification on device (`arithmetic.token_ops`); `verifier="host"` runs the Python
twin (`arithmetic.host`) inside jit through `host_callback.host_map`, sharded over every axis of the mesh in context.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from genenv_jax.models.tokenizer import Tokenizer
from genenv_jax.tasks import token_ops as ops
from genenv_jax.tasks.arithmetic import host, token_ops
from genenv_jax.tasks.arithmetic.skewed_digits import digit_weights, weighted_number
from genenv_jax.tasks.arithmetic.variations import variation
from genenv_jax.tasks.base import TaskBatch, host_parse, host_verify

VERIFIERS = ("jax", "host")  # jax: parse and verify on device (arithmetic.token_ops); host: the Python verifier

DEFAULT_BOUND = 10**6


def _single(tokenizer: Tokenizer, text: str) -> int:
  ids = tokenizer.encode(text)
  if len(ids) != 1:
    raise ValueError(
      f"the arithmetic domain needs {text!r} to be one token, but {tokenizer!r} spells it {ids}; "
      "use a tokenizer with split digits (e.g. the shipped genenv_jax/assets/arith_spm.model)"
    )
  return ids[0]


def arith_tokens(tokenizer: Tokenizer) -> token_ops.ArithTokens:
  """The static token table of `tokenizer`; raises ValueError if digits or operators are not single pieces."""
  digit_ids = tuple(_single(tokenizer, str(d)) for d in range(10))
  ops = {op: _single(tokenizer, op) for op in "+-*"}
  probe = "90+12-345*678"  # digits and operators must not merge into other pieces
  want = [digit_ids[int(c)] if c.isdigit() else ops[c] for c in probe]
  if tokenizer.encode(probe) != want:
    raise ValueError(
      f"{tokenizer!r} does not spell {probe!r} one piece per character; the arithmetic domain "
      "reads expressions token by token"
    )
  rates = [tuple(tokenizer.encode(f"{k // 10}.{k % 10}")) for k in range(11)] + [tuple(tokenizer.encode("?"))]
  width = max(len(r) for r in rates)
  return token_ops.ArithTokens(
    digit_ids=digit_ids,
    plus_id=ops["+"],
    minus_id=ops["-"],
    times_id=ops["*"],
    eos_ids=tuple(tokenizer.eos_ids),
    pad_id=tokenizer.pad_id,
    bos_ids=() if tokenizer.bos_id is None else (tokenizer.bos_id,),
    compute_prefix=tuple(tokenizer.encode("Compute: ")),
    compute_suffix=tuple(tokenizer.encode(" =")),
    seed_prefix=tuple(tokenizer.encode("Seed: ")),
    rate_prefix=tuple(tokenizer.encode(" | rate ")),
    task_suffix=tuple(tokenizer.encode(" | New task:")),
    rate_ids=tuple(r + (tokenizer.pad_id,) * (width - len(r)) for r in rates),
    rate_lens=tuple(len(r) for r in rates),
  )


@dataclasses.dataclass(frozen=True)
class ArithmeticDomain:
  """Synthetic + - * arithmetic (see the module docstring); implements `genenv_jax.tasks.base.Domain`.

  Args: the tokenizer; `min_operands` (2..) .. `max_operands` numbers of up to `max_digits` digits (1..3 at the
  default bound) over `operators` (a subset of "+-*") bound the grammar; `num_heldout` tasks spread evenly over every
  level min_difficulty..max_difficulty; `num_seeds` seed tasks over min_difficulty..seed_max_difficulty (0 = every
  level), level k (counted from the easiest, k = 0, 1, ...) weighted seed_decay**k, so seed_decay < 1 makes the seeds
  mostly easy; both drawn with numpy from `seed`. The four lengths fix every shape (0 = exactly what the longest task
  needs); `bound` caps |partial products|, |partial sums| and |value|; `verifier` is "jax" or "host". Lengths too
  short for the longest task raise ValueError at construction.
  """

  tokenizer: Tokenizer
  max_operands: int = 4
  max_digits: int = 3
  min_operands: int = 2
  num_seeds: int = 60
  num_heldout: int = 60
  seed: int = 0
  agent_prompt_len: int = 24
  agent_answer_len: int = 10
  env_prompt_len: int = 40
  env_output_len: int = 16
  bound: int = DEFAULT_BOUND
  verifier: str = "jax"
  operators: str = token_ops.OPERATORS
  seed_max_difficulty: int = 0
  seed_decay: float = 1.0
  name: str = dataclasses.field(default="arithmetic", init=False)
  spec_len: int = dataclasses.field(default=1, init=False)
  success_threshold: float = dataclasses.field(default=0.5, init=False)
  tokens: token_ops.ArithTokens = dataclasses.field(init=False, repr=False)

  def __post_init__(self):
    if self.verifier not in VERIFIERS:
      raise ValueError(f"verifier must be one of {', '.join(VERIFIERS)}, got {self.verifier!r}")
    if self.max_operands < 2:
      raise ValueError(f"max_operands must be >= 2 (a task has at least one operator), got {self.max_operands}")
    if not 2 <= self.min_operands <= self.max_operands:
      raise ValueError(f"min_operands must be in 2..max_operands={self.max_operands}, got {self.min_operands}")
    token_ops.check_operators(self.operators)
    token_ops.check_bounds(self.max_digits, self.bound)
    if self.seed_max_difficulty and not self.min_difficulty <= self.seed_max_difficulty <= self.max_difficulty:
      raise ValueError(
        f"seed_max_difficulty must be 0 (every level) or in {self.min_difficulty}.."
        f"{self.max_difficulty}, got {self.seed_max_difficulty}"
      )
    if not self.seed_decay > 0:
      raise ValueError(f"seed_decay must be > 0 (1 = every seed level equally often), got {self.seed_decay}")
    for name, levels in (("num_seeds", self.seed_levels), ("num_heldout", self.levels)):
      if getattr(self, name) < len(levels):
        raise ValueError(
          f"{name}={getattr(self, name)} cannot span the {len(levels)} difficulty levels "
          f"{levels[0]}..{levels[-1]}; use >= {len(levels)}"
        )
    object.__setattr__(self, "tokens", arith_tokens(self.tokenizer))
    t = self.tokens
    expr = self.max_expression_len
    need = {
      "env_output_len": expr + 1,
      "agent_prompt_len": len(t.bos_ids) + len(t.compute_prefix) + expr + len(t.compute_suffix),
      "agent_answer_len": len(str(-self.bound)) + 1,
      "env_prompt_len": (
        len(t.bos_ids) + len(t.seed_prefix) + expr + len(t.rate_prefix) + max(t.rate_lens) + len(t.task_suffix)
      ),
    }
    for name, n in need.items():
      if getattr(self, name) == 0:  # 0 = exactly what the longest task needs
        object.__setattr__(self, name, n)
      elif getattr(self, name) < n:
        raise ValueError(
          f"{name}={getattr(self, name)} is too short: the longest task needs {n} tokens "
          f"(max_operands={self.max_operands}, max_digits={self.max_digits}, bound={self.bound})"
        )

  # -- static facts ---------------------------------------------------------------------------------------------------

  @property
  def max_expression_len(self) -> int:
    """Tokens of the longest well-formed expression (one per character)."""
    return self.max_operands * self.max_digits + self.max_operands - 1

  @property
  def max_difficulty(self) -> int:
    return (self.max_operands - 1) + (self.max_digits - 1) + int("*" in self.operators)

  @property
  def min_difficulty(self) -> int:
    """The easiest level: min_operands - 1 (plus 1 when '*' is the only operator)."""
    return min(self._shapes())

  @property
  def levels(self) -> tuple[int, ...]:
    """The difficulty levels of well-formed tasks, min_difficulty..max_difficulty (the held-out set spans them)."""
    return tuple(range(self.min_difficulty, self.max_difficulty + 1))

  @property
  def seed_levels(self) -> tuple[int, ...]:
    """The levels seeds span: min_difficulty..seed_max_difficulty (0 = max_difficulty)."""
    return tuple(range(self.min_difficulty, (self.seed_max_difficulty or self.max_difficulty) + 1))

  # -- pure JAX -------------------------------------------------------------------------------------------------------

  def _parse_jax(self, tokens: jax.Array, mask: jax.Array) -> TaskBatch:
    t = self.tokens
    tokens, mask = jnp.asarray(tokens, jnp.int32), jnp.asarray(mask, jnp.int32)
    length, terminated = ops.content_end(tokens, mask, t.eos_ids)
    e = token_ops.evaluate_expression(
      tokens, length, terminated, t, self.max_operands, self.max_digits, self.bound, self.operators, self.min_operands
    )
    prompt_ids, prompt_mask = ops.pack_left_padded(
      [
        ops.const(t.bos_ids),
        ops.const(t.compute_prefix),
        (tokens, jnp.where(e.ok, length, 0)),
        ops.const(t.compute_suffix),
      ],
      self.agent_prompt_len,
      t.pad_id,
    )
    difficulty = e.n_operators + e.max_digits - 1 + e.has_times.astype(jnp.int32)
    return TaskBatch(
      prompt_ids=prompt_ids,
      prompt_mask=prompt_mask,
      spec=e.value[:, None],
      difficulty=jnp.where(e.ok, difficulty, 0).astype(jnp.float32),
      valid=e.ok,
    )

  def _verify_jax(self, tasks: TaskBatch, response: jax.Array, response_mask: jax.Array) -> jax.Array:
    ok, value = token_ops.parse_integer(
      jnp.asarray(response, jnp.int32), jnp.asarray(response_mask, jnp.int32), self.tokens
    )
    return (ok & tasks.valid & (value == tasks.spec[:, 0])).astype(jnp.float32)

  # -- the Domain protocol --------------------------------------------------------------------------------------------

  def parse_env_output(self, tokens: jax.Array, mask: jax.Array) -> TaskBatch:
    """Jittable: env output [B, env_output_len] -> TaskBatch (see the module docstring for the rules)."""
    if self.verifier == "jax":
      return self._parse_jax(tokens, mask)
    return host_parse(self.parse_env_output_host, tokens, mask, self.agent_prompt_len, self.spec_len)

  def gold_answer(self, spec: np.ndarray) -> str:
    """The computed answer of one spec row, as the agent should write it (for logs)."""
    return str(int(np.asarray(spec).reshape(-1)[0]))

  def verify(self, tasks: TaskBatch, response: jax.Array, response_mask: jax.Array) -> jax.Array:
    """Jittable: R_agent [B] float32, 1.0 iff the task is valid and the response spells spec[:, 0] then EOS."""
    if self.verifier == "jax":
      return self._verify_jax(tasks, response, response_mask)
    return host_verify(self.verify_host, tasks, response, response_mask)

  def env_prompt(self, seed: dict[str, jax.Array], stats: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
    """Jittable: BOS `Seed: <expr> | rate <r> | New task:` per seed row, left-padded to env_prompt_len.

    <expr> is the content of seed["env_ids"] / seed["env_mask"] (clipped to max_expression_len tokens); r is
    stats["p_hat"] to the nearest tenth, "?" where it is NaN or negative, or for every row when absent.
    """
    t = self.tokens
    env_ids, env_mask = jnp.asarray(seed["env_ids"], jnp.int32), jnp.asarray(seed["env_mask"], jnp.int32)
    length, _ = ops.content_end(env_ids, env_mask, t.eos_ids)
    length = jnp.minimum(length, self.max_expression_len)
    rate = ops.rate_tenths(stats, env_ids.shape[0])
    rate_ids = jnp.asarray(t.rate_ids, jnp.int32)[rate]
    rate_lens = jnp.asarray(t.rate_lens, jnp.int32)[rate]
    return ops.pack_left_padded(
      [
        ops.const(t.bos_ids),
        ops.const(t.seed_prefix),
        (env_ids, length),
        ops.const(t.rate_prefix),
        (rate_ids, rate_lens),
        ops.const(t.task_suffix),
      ],
      self.env_prompt_len,
      t.pad_id,
    )

  # -- host twins -----------------------------------------------------------------------------------------------------

  def parse_env_output_host(self, tokens: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """Host Python twin of parse_env_output (decode, regex, Python ints): TaskBatch fields as numpy arrays."""
    return host.parse_env_output(
      self.tokenizer,
      tokens,
      mask,
      max_operands=self.max_operands,
      max_digits=self.max_digits,
      bound=self.bound,
      agent_prompt_len=self.agent_prompt_len,
      operators=self.operators,
      min_operands=self.min_operands,
    )

  def verify_host(
    self, spec: np.ndarray, valid: np.ndarray, response: np.ndarray, response_mask: np.ndarray
  ) -> np.ndarray:
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
    for n_ops in range(self.min_operands - 1, self.max_operands):
      for digits in range(1, self.max_digits + 1):
        for times in self._times_options():
          out.setdefault(n_ops + digits - 1 + int(times), []).append((n_ops, digits, times))
    return out

  def _times_options(self) -> tuple[bool, ...]:
    """Whether a drawn task uses '*': either way when + or - and '*' are allowed, else the only choice."""
    has_additive = any(op in self.operators for op in "+-")
    return ((False, True) if has_additive else (True,)) if "*" in self.operators else (False,)

  def _draw(
    self, rng: np.random.Generator, n_ops: int, digits: int, times: bool, weights: np.ndarray | None = None
  ) -> str:
    """One task text of the shape; its numbers' digits uniform, or drawn from `weights` over 0..9 (skewed_digits)."""
    sizes = rng.integers(1, digits + 1, size=n_ops + 1)
    sizes[rng.integers(0, n_ops + 1)] = digits  # the longest number has exactly `digits` digits
    if weights is None:
      numbers = [int(rng.integers(0, 10)) if k == 1 else int(rng.integers(10 ** (k - 1), 10**k)) for k in sizes]
    else:
      numbers = [weighted_number(rng, int(k), weights) for k in sizes]
    additive = [op for op in "+-" if op in self.operators]
    ops = list(rng.choice(list(self.operators if times else additive), size=n_ops))
    if times:
      ops[int(rng.integers(0, n_ops))] = "*"
    return str(numbers[0]) + "".join(op + str(x) for op, x in zip(ops, numbers[1:]))

  def seed_level_sequence(self) -> list[int]:
    """The difficulty of each seed row: the k-th seed level (k = 0, 1, ...) has weight seed_decay**k.

    Smooth weighted round robin: after one row per level (easiest first), row i takes the level whose count lags
    its share (i + 1) * w most (ties to the easier level), so every prefix follows the weights to within about one
    task per level. With seed_decay = 1 row i has level seed_levels[i mod len(seed_levels)].
    """
    levels = self.seed_levels
    w = np.asarray([self.seed_decay**k for k in range(len(levels))], np.float64)
    w /= w.sum()
    counts = np.zeros(len(levels), np.int64)
    out = []
    for i in range(self.num_seeds):
      k = i if i < len(levels) else int(np.argmax((i + 1) * w - counts + 1e-9 * np.arange(len(levels), 0, -1)))
      counts[k] += 1
      out.append(levels[k])
    return out

  def _expressions(self) -> tuple[list[str], list[str]]:
    """(seed, held-out) expression texts, deterministic in `seed`.

    Held-out row i has difficulty levels[i mod len(levels)] (every level equally often, any prefix spans them) and
    held-out tasks are distinct. Seed row i has difficulty seed_level_sequence()[i]. Held-out tasks are drawn first;
    seeds never equal a held-out task, but may repeat one another, since the low levels hold few distinct tasks
    (200 single-digit sums and differences) while training wants many examples.
    """
    rng, shapes = np.random.default_rng(self.seed), self._shapes()
    heldout: list[str] = []
    levels = self.levels
    for i in range(self.num_heldout):
      heldout.append(self._draw_level(rng, shapes, levels[i % len(levels)], set(heldout)))
    heldout_set = set(heldout)
    seeds = [self._draw_level(rng, shapes, level, heldout_set) for level in self.seed_level_sequence()]
    return seeds, heldout

  def _draw_level(
    self,
    rng: np.random.Generator,
    shapes: dict[int, list[tuple[int, int, bool]]],
    level: int,
    rejected: set[str],
    weights: np.ndarray | None = None,
  ) -> str:
    """A task text of difficulty `level` (one of its `shapes`, `_shapes()`), none of `rejected`, its digits as
    `_draw` draws them."""
    options = shapes[level]
    for _ in range(10_000):
      text = self._draw(rng, *options[int(rng.integers(0, len(options)))], weights=weights)
      expr = host.evaluate_text(text, self.max_operands, self.max_digits, self.bound, self.operators, self.min_operands)
      if expr is not None and host.difficulty_of(expr) == level and text not in rejected:
        return text
    raise ValueError(
      f"could not draw a task of difficulty {level} outside the {len(rejected)} held-out tasks; "
      "lower num_heldout or raise max_digits"
    )

  def _task_arrays(self, texts: list[str]) -> dict[str, np.ndarray]:
    tok, eos = self.tokenizer, self.tokens.eos_id

    def right_padded(rows: list[list[int]], width: int) -> tuple[np.ndarray, np.ndarray]:
      ids = np.full((len(rows), width), eos, np.int32)
      mask = np.zeros((len(rows), width), np.int32)
      for b, row in enumerate(rows):
        ids[b, : len(row)], mask[b, : len(row) + 1] = row, 1  # the content, then one EOS under mask 1
      return ids, mask

    env_ids, env_mask = right_padded([tok.encode(x) for x in texts], self.env_output_len)
    tasks = self.parse_env_output_host(env_ids, env_mask)
    if not tasks["valid"].all():
      raise AssertionError("a generated task failed to parse; this is a bug in ArithmeticDomain")
    answers = [tok.encode(self.gold_answer(row)) for row in tasks["spec"]]
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

  def skewed_digit_tasks(self, seed: int, count: int) -> dict[str, np.ndarray]:
    """`count` tasks in seed_tasks' keys, drawn from `seed`: row i at the level of seed row i (mod num_seeds), so
    that they follow the seeds' level weights, its digits from its own skewed distribution
    (`skewed_digits.digit_weights`), none a held-out task: the agent's extra warm-start data when
    `warm_start.agent_skewed_tasks = count` (skewed_digits says why)."""
    if count < 0:
      raise ValueError(f"count must be >= 0, got {count}")
    rng, shapes = np.random.default_rng(seed), self._shapes()
    levels, heldout = self.seed_level_sequence(), set(self.heldout_expressions())
    texts = [self._draw_level(rng, shapes, levels[i % len(levels)], heldout, digit_weights(rng)) for i in range(count)]
    return self._task_arrays(texts)

  def seed_variations(self, seed: int) -> dict[str, np.ndarray]:
    """One local edit of each seed task (`variations.variation`), drawn from `seed`, in seed_tasks' row order and
    keys: the env's warm-start targets when `warm_start.env_targets = "variation"`."""
    rng = np.random.default_rng(seed)
    bounds = dict(
      min_operands=self.min_operands,
      max_operands=self.max_operands,
      max_digits=self.max_digits,
      bound=self.bound,
      operators=self.operators,
    )
    return self._task_arrays([variation(text, rng, **bounds) for text in self.seed_expressions()])
