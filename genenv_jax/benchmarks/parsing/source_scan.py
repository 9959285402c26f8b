"""Linear-time text scanning for the scorers: tag blocks, and call source text outside strings and brackets.

Tag blocks (`tag_spans`, `tag_contents`): the non-overlapping `<tag>...</tag>` blocks of a text, leftmost first, each
closed by the first closing tag after its opening tag: the matches of the regex `<tag>(.*?)</tag>` (DOTALL), found in
one left-to-right pass. The regex itself is quadratic on text with many unclosed opening tags (each one rescans the
rest of the text); this is O(len(text)). `to_end=True` lets a last unclosed block run to the end of the text (the
regex `<tag>(.*?)(?:</tag>|$)`).

Call source text (`split_top_level`, `keyword_pieces`, `bracket_end`): used where the text is not Python (API-Bank's
`API-Request` lines with bare values, BFCL's Java/JavaScript argument source text). Strings are '...' or "..." with
backslash escapes; a quote right after a letter or digit is an apostrophe (`Macy's`), not the start of a string.
Brackets are (), [] and {}.

`safe_literal_eval`: `ast.literal_eval` behind size and nesting limits, checked in one pass before parsing, so that
deep brackets or unary chains (`[[[[...`, `- - - 1`) are refused as ValueError instead of raising MemoryError or
RecursionError from inside the parser.
"""

from __future__ import annotations

import ast
import re
from typing import Sequence

MAX_LITERAL_CHARS = 100_000
MAX_LITERAL_DEPTH = 64
_NEXT_KEY = re.compile(r"\s*([A-Za-z_]\w*)\s*=(?!=)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {")", "]", "}"}


def _finder(tag: str, ignore_case: bool):
  if not tag:
    raise ValueError("tag_spans needs non-empty opening and closing tags")
  pattern = re.compile(re.escape(tag), re.IGNORECASE) if ignore_case else None

  def find(text: str, start: int) -> tuple[int, int]:
    if pattern is None:
      i = text.find(tag, start)
      return (i, i + len(tag)) if i >= 0 else (-1, -1)
    match = pattern.search(text, start)
    return match.span() if match else (-1, -1)

  return find


def tag_spans(
  text: str, open_tag: str, close_tag: str, ignore_case: bool = False, to_end: bool = False
) -> list[tuple[int, int, int, int]]:
  """(open start, content start, content end, close end) of each block (module docstring); one pass, O(len(text))."""
  find_open, find_close = _finder(open_tag, ignore_case), _finder(close_tag, ignore_case)
  spans, pos = [], 0
  while True:
    start, content = find_open(text, pos)
    if start < 0:
      return spans
    end, after = find_close(text, content)
    if end < 0:
      if to_end:
        spans.append((start, content, len(text), len(text)))
      return spans
    spans.append((start, content, end, after))
    pos = after


def tag_contents(
  text: str, open_tag: str, close_tag: str, ignore_case: bool = False, to_end: bool = False
) -> list[str]:
  """The contents of the blocks of `tag_spans` (the groups that `re.findall(r"<tag>(.*?)</tag>")` returns)."""
  return [text[c:e] for _, c, e, _ in tag_spans(text, open_tag, close_tag, ignore_case, to_end)]


def remove_tag_blocks(
  text: str, open_tag: str, close_tag: str, ignore_case: bool = False, to_end: bool = False, replacement: str = ""
) -> str:
  """`text` with each block of `tag_spans` (tags included) replaced by `replacement`."""
  pieces, pos = [], 0
  for start, _, _, after in tag_spans(text, open_tag, close_tag, ignore_case, to_end):
    pieces += [text[pos:start], replacement]
    pos = after
  pieces.append(text[pos:])
  return "".join(pieces)


def safe_literal_eval(text: str) -> object:
  """`ast.literal_eval(text)` for texts within MAX_LITERAL_CHARS and MAX_LITERAL_DEPTH (brackets, or a run of unary
  signs), else ValueError; a malformed literal is ValueError too (never SyntaxError, MemoryError or RecursionError)."""
  if len(text) > MAX_LITERAL_CHARS:
    raise ValueError(f"literal of {len(text)} characters is over the {MAX_LITERAL_CHARS} limit")
  depth = unary = 0
  quote = ""
  escaped = False
  for ch in text:
    if quote:
      if escaped:
        escaped = False
      elif ch == "\\":
        escaped = True
      elif ch == quote:
        quote = ""
      continue
    if ch in "'\"":
      quote = ch
    elif ch in "([{":
      depth += 1
    elif ch in ")]}":
      depth -= 1
    if ch in "+-~":
      unary += 1
    elif not ch.isspace():
      unary = 0
    if depth > MAX_LITERAL_DEPTH or unary > MAX_LITERAL_DEPTH:
      raise ValueError(f"literal nests deeper than {MAX_LITERAL_DEPTH} levels")
  try:
    return ast.literal_eval(text)
  except (SyntaxError, TypeError, MemoryError, RecursionError) as e:
    raise ValueError(f"not a literal: {type(e).__name__}") from None


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
    value = safe_literal_eval(text)
  except ValueError:
    return text[1:-1]
  return value if isinstance(value, str) else text[1:-1]
