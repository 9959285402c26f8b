"""One small tokenizer interface over HF tokenizer directories and sentencepiece `.model` files.

What: `Tokenizer` fixes what the rest of genenv_jax needs from a tokenizer: special ids (`bos_id`, `eos_ids`,
`pad_id`), `encode`/`decode`, left-padded static-shape batches (`batch_encode`) for the jitted sampler, and chat
formatting (`apply_chat_template`). Two implementations:
  * `HFTokenizer`: a directory with tokenizer.json and/or tokenizer_config.json, loaded offline through transformers'
    `AutoTokenizer` (its chat template is the model's own), or a `.gguf` model file's tokenizer (`models.gguf`);
  * `SentencePieceTokenizer`: a sentencepiece `.model` file. sentencepiece has no chat template, so it uses
    `DEFAULT_CHAT_TEMPLATE`: one "{role}: {content}\\n" line per message, then "assistant:" when a generation prompt
    is asked for.
`load_tokenizer(path)` picks one by what the path holds; `default_tokenizer_path()` is the shipped arithmetic model
(`assets/arith_spm.model`, built by `genenv_jax.scripts.train_tokenizer`: vocab 512, pad=0, bos=1, eos=2, unk=3,
digits split, byte fallback, identity normalization, so `decode(encode(x)) == x` for any text).

Why left padding: the sampler prefills a [B, T] prompt batch and decodes from column T onward, so every prompt must end
at the same column (cf. google-deepmind/gemma `gemma/gm/text/_sampler_loop.py`, which also carries lengths as masks).
"""

from __future__ import annotations

import abc
import json
import os
import pathlib
from typing import Any, Iterable, Literal, Mapping, Sequence

import numpy as np

from genenv_jax.models import gguf, sources

Message = Mapping[str, str]  # {"role": ..., "content": ...}, as in genenv_jax.tasks.benchmark
Truncation = Literal["error", "left", "right"]

DEFAULT_CHAT_TEMPLATE = "{role}: {content}\n"  # per message; the generation prompt is GENERATION_PROMPT
GENERATION_PROMPT = "assistant:"

# End-of-sequence / end-of-turn tokens of common model families; any present as a special token counts as an eos id
# (Qwen2 ends chat turns with <|im_end|> but documents <|endoftext|>; Llama 3 ends turns with <|eot_id|>).
_KNOWN_EOS_TOKENS = (
  "<|im_end|>",
  "<|endoftext|>",
  "<|eot_id|>",
  "<|end_of_text|>",
  "<|eom_id|>",
  "<end_of_turn>",
  "<eos>",
  "</s>",
  "<|end|>",
)
_HF_FILES = ("tokenizer.json", "tokenizer_config.json")


def default_tokenizer_path() -> pathlib.Path:
  """The shipped sentencepiece model of the embedded CPU demo (synthetic arithmetic)."""
  return pathlib.Path(__file__).resolve().parents[1] / "assets" / "arith_spm.model"


def _check_messages(messages: Sequence[Message]) -> None:
  for i, message in enumerate(messages):
    if (
      not isinstance(message, Mapping)
      or not isinstance(message.get("role"), str)
      or not isinstance(message.get("content"), str)
    ):
      raise ValueError(f"message {i} must be a mapping with str 'role' and 'content', got {message!r}")


class Tokenizer(abc.ABC):
  """The tokenizer interface: read-only special ids plus encode/decode/batch/chat.

  Invariants: `pad_id` is always set (the first eos id when the tokenizer has no pad token); `eos_ids` is non-empty
  and starts with the tokenizer's own eos token; `bos_id` may be None (Qwen2 has none).
  """

  def __init__(
    self,
    path: pathlib.Path,
    vocab_size: int,
    bos_id: int | None,
    eos_ids: Iterable[int],
    pad_id: int | None,
    special_ids: Iterable[int],
  ):
    eos = tuple(dict.fromkeys(int(i) for i in eos_ids))
    if not eos:
      raise ValueError(f"tokenizer at {path} defines no eos token; genenv_jax needs one to end generations")
    self._path = path
    self._vocab_size = int(vocab_size)
    self._bos_id = None if bos_id is None else int(bos_id)
    self._eos_ids = eos
    self._pad_id = eos[0] if pad_id is None else int(pad_id)
    self._special_ids = (
      frozenset(int(i) for i in special_ids)
      | {self._pad_id, *eos}
      | (set() if self._bos_id is None else {self._bos_id})
    )

  @property
  def path(self) -> pathlib.Path:
    return self._path

  @property
  def vocab_size(self) -> int:
    """Number of token ids, added/special tokens included (ids are 0 .. vocab_size - 1)."""
    return self._vocab_size

  @property
  def bos_id(self) -> int | None:
    return self._bos_id

  @property
  def eos_ids(self) -> tuple[int, ...]:
    """Every id that ends a generation; the first is the tokenizer's own eos token."""
    return self._eos_ids

  @property
  def eos_id(self) -> int:
    return self._eos_ids[0]

  @property
  def pad_id(self) -> int:
    return self._pad_id

  @property
  def special_ids(self) -> frozenset[int]:
    """Ids that `decode(..., skip_special=True)` drops (control tokens, bos, eos, pad)."""
    return self._special_ids

  def __repr__(self) -> str:
    return (
      f"{type(self).__name__}(path={str(self._path)!r}, vocab_size={self._vocab_size}, bos_id={self._bos_id}, "
      f"eos_ids={self._eos_ids}, pad_id={self._pad_id})"
    )

  # -- implementation hooks -----------------------------------------------------------------------------------------

  @abc.abstractmethod
  def _encode_many(self, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, without bos/eos."""

  @abc.abstractmethod
  def _decode_ids(self, ids: list[int], skip_special: bool) -> str:
    """Text of in-range ids, pad already removed."""

  @abc.abstractmethod
  def apply_chat_template(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
    """The prompt text for a conversation; with `add_generation_prompt`, it ends where the assistant's reply starts."""

  # -- the shared interface -----------------------------------------------------------------------------------------

  def encode(self, text: str, add_bos: bool = False) -> list[int]:
    """Token ids of `text`; `add_bos` prepends `bos_id` (a no-op when the tokenizer has no bos token)."""
    return self.encode_batch([text], add_bos=add_bos)[0]

  def encode_batch(self, texts: Sequence[str], add_bos: bool = False) -> list[list[int]]:
    """Unpadded token ids of each text (see `encode`)."""
    if isinstance(texts, str):
      raise ValueError("encode_batch takes a sequence of strings, got a single str; use encode(text)")
    for i, text in enumerate(texts):
      if not isinstance(text, str):
        raise ValueError(f"text {i} must be a str, got {type(text).__name__}")
    rows = self._encode_many(list(texts)) if texts else []
    if add_bos and self._bos_id is not None:
      rows = [[self._bos_id, *row] for row in rows]
    return rows

  def decode(self, ids: Sequence[int] | np.ndarray, skip_special: bool = True, stop_at_eos: bool = False) -> str:
    """Text of `ids`. Pad ids are always removed (left-padded prompts and pad-filled tails decode cleanly).

    `skip_special` drops bos/eos/control tokens; `stop_at_eos` cuts at the first id in `eos_ids` (sampled rows keep
    decoding garbage after eos). Ids outside [0, vocab_size) raise ValueError: mask such logits in the sampler.
    """
    flat = np.asarray(ids)
    if flat.ndim != 1:
      raise ValueError(f"decode takes one row of ids, got shape {flat.shape}; decode each row of a batch")
    if flat.size and not np.issubdtype(flat.dtype, np.integer):
      raise ValueError(f"decode takes integer ids, got dtype {flat.dtype}")
    row = [int(i) for i in flat.tolist()]
    if stop_at_eos:
      eos = set(self._eos_ids)
      # Pad may equal eos (pad falls back to eos); a left-pad run is not an end of sequence.
      start = next((k for k, i in enumerate(row) if i != self._pad_id), len(row))
      cut = next((k for k in range(start, len(row)) if row[k] in eos), len(row))
      row = row[:cut]
    bad = [i for i in row if not 0 <= i < self._vocab_size]
    if bad:
      raise ValueError(f"ids {bad[:5]} are outside the vocabulary [0, {self._vocab_size}) of {self._path}")
    return self._decode_ids([i for i in row if i != self._pad_id], skip_special)

  def batch_encode(
    self,
    texts: Sequence[str],
    max_length: int,
    pad_to: int | None = None,
    left_pad: bool = True,
    add_bos: bool = False,
    truncation: Truncation = "error",
  ) -> tuple[np.ndarray, np.ndarray]:
    """Encodes `texts` into a padded batch: (ids int32 [B, T], mask int32 [B, T]), mask 1 on real tokens.

    T is `pad_to` when given (it must be >= max_length), else `max_length`: a fixed width, so jitted consumers see one
    shape. Rows are left-padded by default (every prompt ends at column T - 1) and right-padded with `left_pad=False`.
    A text longer than `max_length` tokens raises ValueError unless `truncation` is "left" (keep the last
    max_length tokens: a prompt's end, where generation starts) or "right" (keep the first ones).
    """
    if max_length < 1:
      raise ValueError(f"max_length must be >= 1, got {max_length}")
    width = max_length if pad_to is None else int(pad_to)
    if width < max_length:
      raise ValueError(f"pad_to={pad_to} is below max_length={max_length}; pass pad_to >= max_length or None")
    if truncation not in ("error", "left", "right"):
      raise ValueError(f"truncation must be 'error', 'left' or 'right', got {truncation!r}")
    rows = self.encode_batch(texts, add_bos=add_bos)
    ids = np.full((len(rows), width), self._pad_id, dtype=np.int32)
    mask = np.zeros((len(rows), width), dtype=np.int32)
    for b, row in enumerate(rows):
      if len(row) > max_length:
        if truncation == "error":
          raise ValueError(
            f"text {b} is {len(row)} tokens, over max_length={max_length} (starts "
            f"{texts[b][:60]!r}); raise max_length or pass truncation='left' or 'right'"
          )
        row = row[-max_length:] if truncation == "left" else row[:max_length]
      n = len(row)
      if n == 0:
        continue
      cols = slice(width - n, width) if left_pad else slice(0, n)
      ids[b, cols] = row
      mask[b, cols] = 1
    return ids, mask


class HFTokenizer(Tokenizer):
  """A transformers tokenizer directory (tokenizer.json / tokenizer_config.json), loaded offline.

  eos ids: the tokenizer's eos token, then generation_config.json's `eos_token_id` (if the directory has one), then
  any special token among `_KNOWN_EOS_TOKENS`. Text is encoded without automatic special tokens (bos only through
  `add_bos`), special-token strings in text (e.g. "<|im_end|>") map to their ids, and decoding never "cleans up"
  spaces, so round trips are exact.
  """

  def __init__(self, path: str | os.PathLike[str], hf_tokenizer: Any = None):
    """`hf_tokenizer`: a transformers tokenizer built already (a .gguf file's, `gguf.hf_tokenizer`), used instead of
    loading the directory `path`, which then only names it."""
    path = pathlib.Path(path)
    tok = self._load(path) if hf_tokenizer is None else hf_tokenizer
    self._tok = tok
    specials = set(tok.all_special_tokens) | {a.content for a in tok.added_tokens_decoder.values() if a.special}
    eos: list[int] = [] if tok.eos_token_id is None else [tok.eos_token_id]
    eos.extend(self._generation_config_eos(path))
    eos.extend(tok.convert_tokens_to_ids(t) for t in _KNOWN_EOS_TOKENS if t in specials)
    super().__init__(
      path,
      vocab_size=len(tok),
      bos_id=tok.bos_token_id,
      eos_ids=eos,
      pad_id=tok.pad_token_id,
      special_ids=tok.convert_tokens_to_ids(sorted(specials)),
    )

  @staticmethod
  def _load(path: pathlib.Path) -> Any:
    if not path.is_dir():
      raise FileNotFoundError(f"HF tokenizer directory {path} does not exist")
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    config, tokenizer_json = path / "tokenizer_config.json", path / "tokenizer.json"
    if not (config.is_file() or tokenizer_json.is_file()):
      raise FileNotFoundError(f"{path} has neither tokenizer.json nor tokenizer_config.json")
    try:
      if config.is_file():
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
      return PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json))
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise ValueError(f"could not load an HF tokenizer from {path}: {e}") from e

  @staticmethod
  def _generation_config_eos(path: pathlib.Path) -> list[int]:
    file = path / "generation_config.json"
    if not file.is_file():
      return []
    try:
      value: Any = json.loads(file.read_text()).get("eos_token_id")
    except json.JSONDecodeError as e:
      raise ValueError(f"{file} is not valid JSON: {e}") from e
    if value is None:
      return []
    return [int(v) for v in (value if isinstance(value, list) else [value])]

  @property
  def hf_tokenizer(self) -> Any:
    """The underlying transformers tokenizer (for callers that need more than this interface)."""
    return self._tok

  def _encode_many(self, texts: Sequence[str]) -> list[list[int]]:
    return [list(row) for row in self._tok(list(texts), add_special_tokens=False)["input_ids"]]

  def _decode_ids(self, ids: list[int], skip_special: bool) -> str:
    return self._tok.decode(ids, skip_special_tokens=skip_special, clean_up_tokenization_spaces=False)

  def apply_chat_template(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
    """The model's own chat template, rendered to text. Raises ValueError if the directory ships none."""
    _check_messages(messages)
    if not getattr(self._tok, "chat_template", None):
      raise ValueError(
        f"tokenizer at {self._path} has no chat template; add \"chat_template\" to its "
        "tokenizer_config.json (or a chat_template.jinja file)"
      )
    text = self._tok.apply_chat_template(
      [dict(m) for m in messages], tokenize=False, add_generation_prompt=add_generation_prompt
    )
    return str(text)


class SentencePieceTokenizer(Tokenizer):
  """A sentencepiece `.model` file. Control pieces (bos/eos/pad) are special; unk and byte pieces are content.

  Chat formatting uses `DEFAULT_CHAT_TEMPLATE` (sentencepiece stores no template): messages become
  "system: ...\\nuser: ...\\n" and a generation prompt appends "assistant:" (no trailing space).
  """

  def __init__(self, path: str | os.PathLike[str]):
    path = pathlib.Path(path)
    if not path.is_file():
      raise FileNotFoundError(f"sentencepiece model {path} does not exist")
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor()
    try:
      sp.Load(str(path))
    except (OSError, RuntimeError) as e:
      raise ValueError(
        f"{path} is not a sentencepiece model ({e}); a tiktoken-style tokenizer.model needs its HF "
        "tokenizer.json directory instead"
      ) from e
    self._sp = sp
    n = sp.get_piece_size()
    controls = [i for i in range(n) if sp.is_control(i)]
    positive = lambda i: None if i < 0 else i  # noqa: E731 (sentencepiece reports a missing id as -1)
    eos = [] if sp.eos_id() < 0 else [sp.eos_id()]
    super().__init__(
      path, vocab_size=n, bos_id=positive(sp.bos_id()), eos_ids=eos, pad_id=positive(sp.pad_id()), special_ids=controls
    )

  def _encode_many(self, texts: Sequence[str]) -> list[list[int]]:
    return [list(row) for row in self._sp.encode(list(texts), out_type=int)]

  def _decode_ids(self, ids: list[int], skip_special: bool) -> str:
    if skip_special:
      return self._sp.decode([i for i in ids if i not in self._special_ids])
    # Control pieces have an empty surface; render them by name in place, keeping every other piece's surface (so
    # spaces match the skip_special decode, dummy-prefix handling included).
    proto = self._sp.decode_ids_as_proto(ids)
    return "".join(p.piece if p.id in self._special_ids else p.surface for p in proto.pieces)

  def apply_chat_template(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
    """`DEFAULT_CHAT_TEMPLATE` per message, then `GENERATION_PROMPT` when `add_generation_prompt`."""
    _check_messages(messages)
    text = "".join(DEFAULT_CHAT_TEMPLATE.format(role=m["role"], content=m["content"]) for m in messages)
    return text + GENERATION_PROMPT if add_generation_prompt else text


def load_tokenizer(path: str | os.PathLike[str] | None = None) -> Tokenizer:
  """The tokenizer at `path` (None: the shipped arithmetic model, `default_tokenizer_path()`).

  `path` is local, a hub id (`Qwen/Qwen2.5-7B-Instruct`: its tokenizer files through the hub cache) or a URL
  (`gs://bucket/dir`: its tokenizer files are copied to a local temporary directory); see `genenv_jax.models.sources`.
  A directory with tokenizer.json or tokenizer_config.json -> `HFTokenizer`; a `.model` file, or a directory holding
  exactly one `.model` file -> `SentencePieceTokenizer`; a `.gguf` file -> an `HFTokenizer` built from its metadata
  (`genenv_jax.models.gguf.hf_tokenizer`: the ids and chat text of transformers' GGUF load). Anything else raises
  FileNotFoundError or ValueError naming the path.
  """
  if path is None:
    path = default_tokenizer_path()
  else:
    where = sources.resolve(path, "tokenizer path", files=sources.TOKENIZER_FILES)
    path = pathlib.Path(sources.local_copy(where) if sources.is_url(where) else where)
  if path.is_dir():
    if any((path / name).is_file() for name in _HF_FILES):
      return HFTokenizer(path)
    models = sorted(p.name for p in path.glob("*.model") if p.is_file())
    if len(models) == 1:
      return SentencePieceTokenizer(path / models[0])
    if models:
      raise ValueError(f"directory {path} holds several .model files {models}; pass the one to use")
    raise FileNotFoundError(
      f"directory {path} holds no tokenizer: expected tokenizer.json / tokenizer_config.json "
      "(HF) or one sentencepiece .model file"
    )
  if path.suffix == ".model":
    return SentencePieceTokenizer(path)
  if gguf.is_gguf(path):
    return HFTokenizer(path, hf_tokenizer=gguf.hf_tokenizer(gguf.read(path)))
  raise ValueError(
    f"{path} is not a tokenizer: pass an HF tokenizer directory, a sentencepiece .model file or a .gguf model file"
  )
