"""Local variations of an arithmetic task: the env's warm-start targets that keep most of their seed.

Why: a task's success rate for the agent depends on its digits as well as on its level (carries, the size of the
sum), so an env that writes a *fresh* task at its seed's level lands anywhere in that level's spread of success
rates. An env taught to write a small edit of its seed writes tasks whose success rate stays near the seed's, and
when the seeds are the tasks that passed the α band (D_env), its tasks land near the band too. RWR then has in-band
tasks to learn from, and the seed's rate in the prompt can tell it which way to edit (GenEnv, arXiv 2512.19682, §3.3:
the env is prompted with tasks and their measured success rate and writes new tasks of calibrated difficulty).
An option (`warm_start.env_targets = "variation"`), not the default: docs/EXPERIMENTS.md, "Why (a2) stays low,
measured", has its runs on the CPU demo.

One edit, drawn uniformly among those the grammar allows:
  replace   one number by another of the same number of digits   (same level)
  insert    a new number (no longer than the longest) and an additive operator at a random place   (level + 1)
  delete    one number with the operator before it (after it, for the first number)   (level - 1, lower still when
            the '*' or the only longest number goes)
"""

from __future__ import annotations

import re

import numpy as np

from genenv_jax.tasks.arithmetic import host


def _number(rng: np.random.Generator, digits: int) -> str:
  return str(int(rng.integers(0, 10)) if digits == 1 else int(rng.integers(10 ** (digits - 1), 10**digits)))


def _edit(text: str, rng: np.random.Generator, min_operands: int, max_operands: int, operators: str) -> str:
  numbers = re.findall(r"[0-9]+", text)
  ops = re.findall(r"[-+*]", text)
  kinds = ["replace"]
  if len(numbers) < max_operands:
    kinds.append("insert")
  if len(numbers) > min_operands:
    kinds.append("delete")
  kind = kinds[int(rng.integers(0, len(kinds)))]
  if kind == "replace":
    i = int(rng.integers(0, len(numbers)))
    numbers[i] = _number(rng, len(numbers[i]))
  elif kind == "insert":
    i = int(rng.integers(0, len(numbers) + 1))
    additive = [op for op in "+-" if op in operators] or ["*"]
    longest = max(len(n) for n in numbers)
    numbers.insert(i, _number(rng, int(rng.integers(1, longest + 1))))
    ops.insert(max(i - 1, 0), additive[int(rng.integers(0, len(additive)))])
  else:
    i = int(rng.integers(0, len(numbers)))
    del numbers[i]
    del ops[max(i - 1, 0)]
  return numbers[0] + "".join(op + x for op, x in zip(ops, numbers[1:]))


def variation(
  text: str,
  rng: np.random.Generator,
  *,
  min_operands: int,
  max_operands: int,
  max_digits: int,
  bound: int,
  operators: str,
  tries: int = 20,
) -> str:
  """A well-formed one-edit variation of the well-formed expression `text` (module docstring); `text` itself when
  `tries` draws all break the grammar's bounds."""
  for _ in range(tries):
    out = _edit(text, rng, min_operands, max_operands, operators)
    if host.evaluate_text(out, max_operands, max_digits, bound, operators, min_operands) is not None:
      return out
  return text
