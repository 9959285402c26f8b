"""Token-level arithmetic in pure JAX: evaluate `12+7*3-5`, read `-42` (the generic token operations, finding where a
generation ends and packing prompts, are `genenv_jax.tasks.token_ops`).

Everything works on int32 token ids [B, L] with static shapes (masks, not lengths), so it runs inside the one jitted
co-evolution step (docs/DESIGN.md, "Architecture: how data flows": verifiers in pure JAX over token ids). Nothing here
raises on data: malformed rows come back with `ok = False`.

The grammar, over the tokenizer's single-piece digits and the operators + - * (any other token is malformed):

    expression := number (op number)+          op := '+' | '-' | '*'   (or the domain's subset, `operators`)
    number     := '0' | nonzero-digit digit*   (at most `max_digits` digits, so no leading zero)

with `min_operands` (default 2) .. `max_operands` numbers, evaluated with the usual precedence (* binds tighter than +
and -, left to right), and with every partial product, partial sum and the value within +-`bound` (int32-safe: see
`check_bounds`).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp

from genenv_jax.tasks.token_ops import content_end

INT32_MAX = 2**31 - 1
OPERATORS = "+-*"  # the full operator alphabet; a domain may allow a subset
MAX_ANSWER_DIGITS = 9  # an int32 holds any 9-digit magnitude


@dataclasses.dataclass(frozen=True)
class ArithTokens:
  """The static token ids the arithmetic domain reads and writes (hashable: they are part of compiled programs).

  `digit_ids[d]` spells digit d; `rate_ids[k]` / `rate_lens[k]` spell the success rate k/10 ("0.0" .. "1.0") for
  k = 0..10 and, at k = 11, the unknown rate "?"; the prompt pieces are the tokens of the fixed text around them.
  """

  digit_ids: tuple[int, ...]
  plus_id: int
  minus_id: int
  times_id: int
  eos_ids: tuple[int, ...]
  pad_id: int
  bos_ids: tuple[int, ...]  # () when the tokenizer has no bos token
  compute_prefix: tuple[int, ...]  # "Compute: "
  compute_suffix: tuple[int, ...]  # " ="
  seed_prefix: tuple[int, ...]  # "Seed: "
  rate_prefix: tuple[int, ...]  # " | rate "
  task_suffix: tuple[int, ...]  # " | New task:"
  rate_ids: tuple[tuple[int, ...], ...]
  rate_lens: tuple[int, ...]

  @property
  def eos_id(self) -> int:
    return self.eos_ids[0]


class Expression(NamedTuple):
  """The result of evaluating one batch of expressions; fields are [B], zero where `ok` is False."""

  ok: jax.Array  # bool: well-formed, terminated and within bounds
  value: jax.Array  # int32
  n_operators: jax.Array  # int32
  max_digits: jax.Array  # int32: digits of the longest number
  has_times: jax.Array  # bool


def check_bounds(max_digits: int, bound: int) -> None:
  """Raises ValueError unless int32 evaluation is exact: 10**max_digits <= bound and bound * 10**max_digits fits.

  The evaluator keeps |partial term| <= bound and multiplies it by a number below 10**max_digits, so the product
  must fit an int32; a single number must itself be within the bound so that the host and JAX checks agree.
  """
  if max_digits < 1:
    raise ValueError(f"max_digits must be >= 1, got {max_digits}")
  if bound < 10**max_digits:
    raise ValueError(f"value bound {bound} must be >= 10**max_digits = {10**max_digits}")
  if bound * 10**max_digits > INT32_MAX:
    raise ValueError(
      f"value bound {bound} times 10**max_digits = {10**max_digits} overflows int32; lower "
      "max_digits (<= 3 with the default bound 10**6) or the bound"
    )


def check_operators(operators: str) -> None:
  """Raises ValueError unless `operators` is a non-empty, repeat-free subset of "+-*"."""
  if not operators or set(operators) - set(OPERATORS) or len(set(operators)) != len(operators):
    raise ValueError(f"operators must be a non-empty subset of {OPERATORS!r} without repeats, got {operators!r}")


def digit_values(tokens: jax.Array, digit_ids: Sequence[int]) -> jax.Array:
  """The digit each token spells, or -1 for any other token (same shape as `tokens`)."""
  out = jnp.full(tokens.shape, -1, jnp.int32)
  for d, tok in enumerate(digit_ids):
    out = jnp.where(tokens == tok, d, out)
  return out


def evaluate_expression(
  tokens: jax.Array,
  length: jax.Array,
  terminated: jax.Array,
  vocab: ArithTokens,
  max_operands: int,
  max_digits: int,
  bound: int,
  operators: str = OPERATORS,
  min_operands: int = 2,
) -> Expression:
  """Parses and evaluates `tokens[:, :length]` with a lax.scan state machine over the columns.

  `operators` (a subset of "+-*", static) is the operator alphabet: an operator token outside it is malformed;
  an expression needs min_operands .. max_operands numbers.

  State per row: `total` (sum of finished terms), `term` (signed product of the current term's finished factors),
  `num` / `nd` (the number being read and its digit count), counts, and `ok`. A digit extends `num` (no leading
  zero, at most `max_digits`); an operator needs a number before it, forms f = term * num, then '*' keeps f as the
  term and '+' / '-' add f to the total and start a term of sign +1 / -1. At the end the last number closes the
  expression: value = total + term * num. Every f, total and the value must satisfy |x| <= bound.
  """
  check_bounds(max_digits, bound)
  check_operators(operators)
  batch, width = tokens.shape
  digits = digit_values(tokens, vocab.digit_ids)
  never = jnp.zeros(tokens.shape, bool)
  is_plus, is_minus, is_times = (
    (tokens == tok) if op in operators else never
    for op, tok in (("+", vocab.plus_id), ("-", vocab.minus_id), ("*", vocab.times_id))
  )
  inside = jnp.arange(width)[None, :] < length[:, None]

  zeros = jnp.zeros((batch,), jnp.int32)
  init = dict(
    ok=jnp.ones((batch,), bool),
    total=zeros,
    term=zeros + 1,
    num=zeros,
    nd=zeros,
    n_ops=zeros,
    max_nd=zeros,
    has_times=jnp.zeros((batch,), bool),
  )

  def step(s, x):
    d, plus, minus, times, live = x
    is_digit, is_op = d >= 0, plus | minus | times
    # A digit: no leading zero ("07"), at most max_digits digits.
    digit_ok = ~((s["nd"] == 1) & (s["num"] == 0)) & (s["nd"] < max_digits)
    # An operator: a number must precede it (no leading operator, no two in a row).
    f = s["term"] * s["num"]  # |term| <= bound, num < 10**max_digits: fits int32 (check_bounds)
    f_ok = jnp.abs(f) <= bound
    f = jnp.clip(f, -bound, bound)
    new_total = s["total"] + f
    total_ok = times | (jnp.abs(new_total) <= bound)
    op_ok = (s["nd"] > 0) & f_ok & total_ok
    good = jnp.where(is_digit, digit_ok, is_op & op_ok)
    take_digit, take_op = live & is_digit, live & is_op  # an operator closes the current number
    return dict(
      ok=s["ok"] & (~live | good),
      total=jnp.where(take_op & ~times, jnp.clip(new_total, -bound, bound), s["total"]),
      term=jnp.where(take_op, jnp.where(times, f, jnp.where(minus, -1, 1)), s["term"]),
      num=jnp.where(
        take_digit, jnp.minimum(s["num"] * 10 + jnp.maximum(d, 0), 10**max_digits - 1), jnp.where(take_op, 0, s["num"])
      ),
      nd=jnp.where(take_digit, jnp.minimum(s["nd"] + 1, max_digits + 1), jnp.where(take_op, 0, s["nd"])),
      n_ops=s["n_ops"] + take_op.astype(jnp.int32),
      max_nd=jnp.where(take_op, jnp.maximum(s["max_nd"], s["nd"]), s["max_nd"]),
      has_times=s["has_times"] | (take_op & times),
    ), None

  xs = (digits.T, is_plus.T, is_minus.T, is_times.T, inside.T)
  s, _ = jax.lax.scan(step, init, xs)
  f = s["term"] * s["num"]
  value = s["total"] + jnp.clip(f, -bound, bound)
  ok = (
    s["ok"]
    & terminated
    & (s["nd"] > 0)
    & (s["n_ops"] >= max(min_operands - 1, 1))
    & (s["n_ops"] + 1 <= max_operands)
    & (jnp.abs(f) <= bound)
    & (jnp.abs(value) <= bound)
  )
  zero = jnp.zeros_like(value)
  return Expression(
    ok=ok,
    value=jnp.where(ok, value, zero),
    n_operators=jnp.where(ok, s["n_ops"], zero),
    max_digits=jnp.where(ok, jnp.maximum(s["max_nd"], s["nd"]), zero),
    has_times=ok & s["has_times"],
  )


def parse_integer(tokens: jax.Array, mask: jax.Array, vocab: ArithTokens) -> tuple[jax.Array, jax.Array]:
  """(ok [B] bool, value [B] int32) of an answer `-?(0|[1-9][0-9]*)` followed by EOS (or the mask end).

  Canonical decimal only: no sign but '-', no leading zeros, no "-0", 1..9 digits (int32-safe), nothing else
  before the end (see `content_end`); value is 0 where ok is False.
  """
  length, terminated = content_end(tokens, mask, vocab.eos_ids)
  width = tokens.shape[-1]
  digits = digit_values(tokens, vocab.digit_ids)
  negative = tokens[:, 0] == vocab.minus_id
  start = negative.astype(jnp.int32)
  pos = jnp.arange(width)[None, :]
  in_number = (pos >= start[:, None]) & (pos < length[:, None])
  n_digits = length - start
  all_digits = jnp.all(~in_number | (digits >= 0), axis=-1)
  first = jnp.take_along_axis(digits, jnp.minimum(start, width - 1)[:, None], axis=-1)[:, 0]
  canonical = (n_digits == 1) | (first != 0)
  ok = (
    terminated
    & all_digits
    & (n_digits >= 1)
    & (n_digits <= MAX_ANSWER_DIGITS)
    & canonical
    & ~(negative & (n_digits == 1) & (first == 0))
  )
  powers = jnp.asarray([10**k for k in range(MAX_ANSWER_DIGITS)], jnp.int32)
  place = jnp.clip(length[:, None] - 1 - pos, 0, MAX_ANSWER_DIGITS - 1)
  magnitude = jnp.sum(jnp.where(in_number, jnp.maximum(digits, 0) * powers[place], 0), axis=-1)
  value = jnp.where(negative, -magnitude, magnitude)
  return ok, jnp.where(ok, value, 0).astype(jnp.int32)
