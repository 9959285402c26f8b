"""Host-Python arithmetic: the same parse and verify rules as `arithmetic.token_ops`, on decoded text with Python ints.

Why a second implementation: it is the reference that the pure-JAX state machine is tested against, and the form
that a text domain takes (decode, parse with Python, score), entered from the jitted step through
`genenv_jax.tasks.host_callback` (docs/DESIGN.md, "Architecture: how data flows": host-Python verifiers).

Rules (identical to `arithmetic.token_ops`, stated on text):
  * a row's content is its tokens before the first EOS under mask 1 or the first mask 0; a row with neither is not
    terminated and so malformed;
  * the content must be spelled canonically: every id in the vocabulary, and `encode(decode(ids)) == ids` (the
    tokenizer's byte-fallback spelling of "1" is not the digit "1", and control tokens never count);
  * an expression is `number (op number)+` over + - * (or the domain's subset `operators`), min_operands
    (default 2) .. max_operands numbers, each `0` or up to max_digits digits without a leading zero; every partial
    product, partial sum and the value within +-bound;
  * an answer is `-?(0|[1-9][0-9]*)`, 1..9 digits, not "-0".
"""

from __future__ import annotations

import re
from typing import NamedTuple, Sequence

import numpy as np

from genenv_jax.models.tokenizer import Tokenizer
from genenv_jax.tasks.arithmetic.token_ops import MAX_ANSWER_DIGITS, OPERATORS
from genenv_jax.tasks.token_ops import content_ids

_ANSWER = re.compile(r"-?(0|[1-9][0-9]*)")


class HostExpression(NamedTuple):
  value: int
  n_operators: int
  max_digits: int
  has_times: bool


def canonical_text(tokenizer: Tokenizer, ids: list[int]) -> str | None:
  """The text of `ids` if the tokenizer would spell that text exactly so, else None."""
  if any(not 0 <= i < tokenizer.vocab_size for i in ids):
    return None
  text = tokenizer.decode(ids, skip_special=False)
  return text if tokenizer.encode(text) == ids else None


def evaluate_text(
  text: str, max_operands: int, max_digits: int, bound: int, operators: str = OPERATORS, min_operands: int = 2
) -> HostExpression | None:
  """Evaluates `text` under the expression rule (module docstring) with Python ints; None when malformed.

  `operators` (a subset of "+-*") is the operator alphabet; any other operator makes the text malformed; the text
  needs min_operands .. max_operands numbers.
  """
  number = rf"(?:0|[1-9][0-9]{{0,{max_digits - 1}}})"
  op = "[" + "".join(re.escape(o) for o in sorted(operators, key=OPERATORS.index)) + "]"
  if not re.fullmatch(rf"{number}(?:{op}{number})+", text):
    return None
  numbers = [int(n) for n in re.findall(r"[0-9]+", text)]
  ops = re.findall(r"[-+*]", text)
  if not min_operands <= len(numbers) <= max_operands:
    return None
  total, term = 0, numbers[0]
  for op, x in zip(ops, numbers[1:]):
    if op == "*":
      term *= x
      if abs(term) > bound:
        return None
    else:
      total += term
      if abs(total) > bound:
        return None
      term = x if op == "+" else -x
  value = total + term
  if abs(value) > bound:
    return None
  return HostExpression(value, len(ops), max(len(n) for n in re.findall(r"[0-9]+", text)), "*" in ops)


def difficulty_of(expr: HostExpression) -> int:
  """The domain's difficulty score: operators + (longest number's digits - 1) + (1 if any '*')."""
  return expr.n_operators + expr.max_digits - 1 + int(expr.has_times)


def parse_env_output(
  tokenizer: Tokenizer,
  tokens: np.ndarray,
  mask: np.ndarray,
  *,
  max_operands: int,
  max_digits: int,
  bound: int,
  agent_prompt_len: int,
  operators: str = OPERATORS,
  min_operands: int = 2,
) -> dict[str, np.ndarray]:
  """Host twin of `ArithmeticDomain.parse_env_output`: TaskBatch fields as numpy arrays.

  The agent prompt is encoded from text: bos + "Compute: " + expression + " =" (an invalid row gets the empty
  expression), left-padded to agent_prompt_len. spec[:, 0] is the value (0 if invalid).
  """
  tokens, mask = np.asarray(tokens), np.asarray(mask)
  batch = tokens.shape[0]
  texts, spec = [], np.zeros((batch, 1), np.int32)
  difficulty, valid = np.zeros((batch,), np.float32), np.zeros((batch,), bool)
  for b in range(batch):
    ids = content_ids(tokens[b], mask[b], tokenizer.eos_ids)
    text = None if ids is None else canonical_text(tokenizer, ids)
    expr = None if text is None else evaluate_text(text, max_operands, max_digits, bound, operators, min_operands)
    if expr is None:
      texts.append("Compute:  =")
      continue
    texts.append(f"Compute: {text} =")
    spec[b, 0], difficulty[b], valid[b] = expr.value, difficulty_of(expr), True
  prompt_ids, prompt_mask = tokenizer.batch_encode(texts, max_length=agent_prompt_len, add_bos=True, truncation="left")
  return dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, spec=spec, difficulty=difficulty, valid=valid)


def parse_answer(tokenizer: Tokenizer, tokens: np.ndarray, mask: np.ndarray) -> int | None:
  """The integer one response row spells under the answer rule, or None."""
  ids = content_ids(np.asarray(tokens), np.asarray(mask), tokenizer.eos_ids)
  text = None if ids is None else canonical_text(tokenizer, ids)
  if text is None or not _ANSWER.fullmatch(text) or text == "-0":
    return None
  if len(text.lstrip("-")) > MAX_ANSWER_DIGITS:
    return None
  return int(text)


def verify(
  tokenizer: Tokenizer, spec: np.ndarray, valid: np.ndarray, response: np.ndarray, response_mask: np.ndarray
) -> np.ndarray:
  """Host twin of `ArithmeticDomain.verify`: R_agent [B] float32, 1.0 iff the task is valid and the answer is
  spec[0]."""
  spec, valid = np.asarray(spec), np.asarray(valid)
  out = np.zeros((spec.shape[0],), np.float32)
  for b in range(spec.shape[0]):
    answer = parse_answer(tokenizer, response[b], response_mask[b])
    out[b] = float(bool(valid[b]) and answer is not None and answer == int(spec[b, 0]))
  return out


def env_prompt_texts(expressions: Sequence[str], p_hat: np.ndarray | None) -> list[str]:
  """The env prompt text per seed: "Seed: <expr> | rate <r> | New task:".

  r is p̂ rounded to the nearest tenth (ties to even, as numpy and jnp.round do) written "0.0" .. "1.0", or "?" when
  p̂ is unknown (no statistics, NaN or negative).
  """
  out = []
  for i, expr in enumerate(expressions):
    p = None if p_hat is None else float(p_hat[i])
    if p is None or not p >= 0:
      rate = "?"
    else:
      k = int(np.clip(np.round(np.float32(p) * np.float32(10)), 0, 10))
      rate = f"{k // 10}.{k % 10}"
    out.append(f"Seed: {expr} | rate {rate} | New task:")
  return out
