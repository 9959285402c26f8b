"""Arithmetic with a worked answer: the agent writes the last digit of every running sum, not only the value.

Why a second answer form: with the value as the answer (`domain.ArithmeticDomain`), a tiny agent's success on one
task is close to all or nothing. Its answer is one or two tokens, so whether it is right hangs on one decision that
the task's digits settle; within a difficulty level most tasks are solved nearly always or nearly never, and few
have a success rate near α (docs/EXPERIMENTS.md, "Why (a2) stays low"). Here the answer has one token per operator,
each a small step from the one before, so a task's success rate is a product of many per-step rates and depends on
its length more than on its digits: the levels' spread of rates is what this form is meant to narrow.

Tasks are the sums and differences of single digits of `ArithmeticDomain` (max_digits = 1, operators within "+-");
the env writes them, the prompt and the difficulty (the number of operators) are the same. For `3+4+5-9` the partial
values after each operator are 7, 12, 3, and the answer is their last digits (Python's `x % 10`, so -3 gives 7):

    agent prompt   BOS `Compute: 3+4+5-9 =`            agent answer   `723` then EOS

spec[:, j] is the digit after operator j + 1, and -1 past the last operator (and on every invalid row).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from genenv_jax.tasks import token_ops as ops
from genenv_jax.tasks.arithmetic import host, token_ops
from genenv_jax.tasks.arithmetic.domain import ArithmeticDomain
from genenv_jax.tasks.base import TaskBatch

NO_DIGIT = -1  # spec past a task's last operator


def running_digits(text: str) -> list[int]:
  """Host: the last digit of each partial value of a single-digit `+ -` expression after each operator."""
  total, out = int(text[0]), []
  for op, digit in zip(text[1::2], text[2::2]):
    total += int(digit) if op == "+" else -int(digit)
    out.append(total % 10)
  return out


@dataclasses.dataclass(frozen=True)
class RunningSumDomain(ArithmeticDomain):
  """`ArithmeticDomain`'s tasks answered with the last digit of every running value (module docstring).

  Takes ArithmeticDomain's arguments; needs max_digits = 1 and operators within "+-". agent_answer_len = 0 gives
  max_operands (one digit per operator, then EOS).
  """

  def __post_init__(self):
    if self.max_digits != 1 or set(self.operators) - set("+-"):
      raise ValueError(
        "the running-sum answer needs single-digit numbers joined by + and - (domain.max_digits = 1, "
        f"domain.operators within '+-'); got max_digits={self.max_digits}, operators={self.operators!r}"
      )
    answer_len = self.agent_answer_len
    object.__setattr__(self, "agent_answer_len", 0)  # the value form's length rule does not apply; this one does
    super().__post_init__()
    object.__setattr__(self, "spec_len", self.max_operands - 1)
    need = self.max_operands  # max_operands - 1 digits and EOS
    if answer_len == 0:
      object.__setattr__(self, "agent_answer_len", need)
    elif answer_len < need:
      raise ValueError(
        f"agent_answer_len={answer_len} is too short: the longest running answer needs {need} tokens "
        f"(max_operands={self.max_operands})"
      )

  # -- pure JAX -------------------------------------------------------------------------------------------------------

  def _parse_jax(self, tokens: jax.Array, mask: jax.Array) -> TaskBatch:
    tasks = super()._parse_jax(tokens, mask)
    t = self.tokens
    tokens = jnp.asarray(tokens, jnp.int32)
    numbers = token_ops.digit_values(tokens[:, 0 : 2 * self.max_operands - 1 : 2], t.digit_ids)  # number k at column 2k
    signs = jnp.where(tokens[:, 1 : 2 * self.max_operands - 2 : 2] == t.minus_id, -1, 1)  # operator k at 2k + 1
    n_ops = tasks.difficulty.astype(jnp.int32)  # the number of operators; 0 on invalid rows
    partial = numbers[:, :1] + jnp.cumsum(signs * jnp.maximum(numbers[:, 1:], 0), axis=-1)
    present = jnp.arange(self.spec_len)[None, :] < n_ops[:, None]
    spec = jnp.where(present & tasks.valid[:, None], jnp.mod(partial, 10), NO_DIGIT)
    return tasks.replace(spec=spec.astype(jnp.int32))

  def _verify_jax(self, tasks: TaskBatch, response: jax.Array, response_mask: jax.Array) -> jax.Array:
    response = jnp.asarray(response, jnp.int32)
    length, terminated = ops.content_end(response, jnp.asarray(response_mask, jnp.int32), self.tokens.eos_ids)
    digits = token_ops.digit_values(response, self.tokens.digit_ids)[:, : self.spec_len]
    width = digits.shape[-1]
    expected = tasks.spec[:, :width]
    n = jnp.sum(tasks.spec >= 0, axis=-1)
    match = jnp.all((expected < 0) | (digits == expected), axis=-1)
    ok = tasks.valid & terminated & (n > 0) & (length == n) & match
    return ok.astype(jnp.float32)

  # -- host twins -----------------------------------------------------------------------------------------------------

  def parse_env_output_host(self, tokens: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """Host twin of parse_env_output: ArithmeticDomain's fields, spec the running digits read from the text."""
    out = super().parse_env_output_host(tokens, mask)
    spec = np.full((len(out["valid"]), self.spec_len), NO_DIGIT, np.int32)
    for b in np.flatnonzero(out["valid"]):
      text = host.canonical_text(self.tokenizer, ops.content_ids(tokens[b], mask[b], self.tokenizer.eos_ids))
      digits = running_digits(text)
      spec[b, : len(digits)] = digits
    return dict(out, spec=spec)

  def verify_host(
    self, spec: np.ndarray, valid: np.ndarray, response: np.ndarray, response_mask: np.ndarray
  ) -> np.ndarray:
    """Host twin of verify: 1.0 iff the task is valid and the response spells exactly its running digits."""
    out = np.zeros((len(valid),), np.float32)
    for b in range(len(valid)):
      ids = ops.content_ids(np.asarray(response[b]), np.asarray(response_mask[b]), self.tokenizer.eos_ids)
      text = None if ids is None else host.canonical_text(self.tokenizer, ids)
      out[b] = float(bool(valid[b]) and text is not None and text == self.gold_answer(spec[b]) and text != "")
    return out

  def gold_answer(self, spec: np.ndarray) -> str:
    """The running digits of one spec row, as the agent should write them."""
    return "".join(str(int(d)) for d in np.asarray(spec).reshape(-1) if d >= 0)
