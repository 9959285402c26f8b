"""Checks on TensorBoard event files shared by the tests."""

import numpy as np

from genenv_jax.training.metrics import read_tensors


def text_table(logdir, tag) -> np.ndarray:
  cells = np.asarray(read_tensors(logdir, "text")[tag][0][1])
  return np.vectorize(lambda b: b.decode("utf-8") if isinstance(b, bytes) else str(b))(cells)


def constant_zero_and_duplicate_tags(scalars: dict[str, list[tuple[int, float]]]) -> tuple[list[str], list[tuple]]:
  """Tags whose every logged value is 0, and pairs of tags with identical series (same steps, same values)."""
  zero = [t for t, series in scalars.items() if len(series) > 1 and all(v == 0 for _, v in series)]
  seen: dict[tuple, str] = {}
  dups = []
  for tag, series in sorted(scalars.items()):
    key = tuple((s, round(v, 6)) for s, v in series)
    if len(series) > 1 and len({v for _, v in key}) > 1 and key in seen:
      dups.append((seen[key], tag))
    seen.setdefault(key, tag)
  return zero, dups
