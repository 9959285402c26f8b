"""Scanning call source text outside string literals and brackets: the splitter the tolerant call parsers share.

Used where the text is not Python (API-Bank's `API-Request` lines with bare values, BFCL's Java/JavaScript argument
source text). Strings are '...' or "..." with backslash escapes; a quote right after a letter or digit is an
apostrophe (`Macy's`), not the start of a string. Brackets are (), [] and {}.
"""

from __future__ import annotations

import ast
import re
from typing import Sequence

_NEXT_KEY = re.compile(r"\s*([A-Za-z_]\w*)\s*=(?!=)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {")", "]", "}"}


def _scan(text: str):
  """Yields (index, char, depth) for each char outside strings; raises ValueError on unbalanced brackets."""
  stack, quote, i = [], "", 0
  while i < len(text):
    ch = text[i]
    if quote:
      if ch == "\\":
        i += 1
      elif ch == quote:
        quote = ""
    elif ch in "'\"" and not (i and text[i - 1].isalnum()):
      quote = ch
    elif ch in _OPENERS:
      yield i, ch, len(stack)
      stack.append(_OPENERS[ch])
    elif ch in _CLOSERS:
      if not stack or stack.pop() != ch:
        raise ValueError(f"unbalanced {ch!r} at {i} in {text!r}")
      yield i, ch, len(stack)
    else:
      yield i, ch, len(stack)
    i += 1
  if quote or stack:
    raise ValueError(f"unclosed {'string' if quote else 'bracket'} in {text!r}")


def bracket_end(text: str) -> int:
  """The index of the bracket that closes `text[0]`, or -1 (unclosed or unbalanced); text after it is not read."""
  try:
    for i, ch, depth in _scan(text):
      if ch in _CLOSERS and depth == 0:
        return i
  except ValueError:
    return -1
  return -1


def top_level_indices(text: str, sep: str = ",") -> list[int]:
  """Indices of `sep` in `text` outside strings and brackets; raises ValueError on unbalanced brackets or strings."""
  return [i for i, ch, depth in _scan(text) if ch == sep and depth == 0]


def split_top_level(text: str, sep: str = ",", at: Sequence[int] | None = None) -> list[str]:
  """Splits `text` at each top-level `sep` (see `top_level_indices`), or only at the indices `at` when given."""
  cuts = list(at) if at is not None else top_level_indices(text, sep)
  pieces, start = [], 0
  for cut in cuts:
    pieces.append(text[start:cut])
    start = cut + 1
  pieces.append(text[start:])
  return pieces


def keyword_pieces(body: str) -> list[tuple[str, str]]:
  """`k=v, k2=v2` -> [(k, v_source), ...]; a top-level comma splits only where the next `name=` follows it.

  So bare values may hold commas (`loc=San Francisco, CA`) or generics (`new HashMap<String, Object>()`). Raises
  ValueError on a piece that is not `identifier=value` or on a repeated key.
  """
  if not body.strip():
    return []
  commas = [i for i in top_level_indices(body) if _NEXT_KEY.match(body, i + 1)]
  pieces, seen = [], set()
  for piece in split_top_level(body, at=commas):
    key, eq, raw = piece.partition("=")
    key = key.strip()
    if not eq or not _IDENT.fullmatch(key) or key in seen or not raw.strip():
      raise ValueError(f"bad keyword argument {piece!r}")
    seen.add(key)
    pieces.append((key, raw.strip()))
  return pieces


def unquote(text: str) -> str | None:
  """The string a quoted literal `'...'` / `"..."` stands for (escapes decoded when valid Python), else None."""
  text = text.strip()
  if len(text) < 2 or text[0] not in "'\"" or text[-1] != text[0]:
    return None
  try:
    value = ast.literal_eval(text)
  except (ValueError, SyntaxError, MemoryError, RecursionError):
    return text[1:-1]
  return value if isinstance(value, str) else text[1:-1]
