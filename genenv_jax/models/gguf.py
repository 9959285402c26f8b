"""GGUF files (llama.cpp's format) as checkpoints and tokenizers: `hf_path` and `tokenizer` may name a `.gguf` file.

The format (ggml-org/ggml docs/gguf.md, versions 2 and 3; little-endian): the magic `GGUF`, a uint32 version, the
uint64 counts of tensors and of metadata entries; then the metadata, each a string key, a uint32 value type and the
value (integers, floats, bools, strings, and arrays of them); then one entry per tensor: its name, its dimensions
(fastest-moving first, so reversed they are torch's [out, in]), its ggml type and its byte offset into the data
section, which starts at the next multiple of `general.alignment` (32 by default) after the table.

Why a reader of our own rather than the `gguf` package: the format is that small, transformers 5 itself reads it with
one module of its own (`transformers/integrations/gguf/reader.py`), and owning it keeps the product free of another
dependency (gguf brings requests, tqdm and pyyaml) while every failure names the file, what was found and what to do.
The file is memory-mapped and a tensor is dequantised only when asked for. The `gguf` package is a test dependency:
its writer builds the tests' files, and its `gguf.quants.dequantize` is the reference each dequantiser here is
checked against, bit for bit.

Dequantisation (`dequantize`) follows gguf-py's `gguf/quants.py`, which transformers' GGUF load of Llama and Qwen2
(`transformers/modeling_gguf_pytorch_utils.py`) calls: the same float32 operations in the same order, so the weights
are bitwise the same. Types: F32, F16, BF16, and the 32-element blocks Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (one float16
scale `d`, for Q4_1/Q5_1 a float16 minimum `m`; value = d * q (+ m)). Others (the K-quants, the IQ types) raise an
error that says what to do.

Llama's q and k rows: llama.cpp's converter (`convert_hf_to_gguf.py`, `LlamaModel.permute`) reorders the rows of
each head of q_proj and k_proj from HF's rotate-half layout to interleaved pairs; `_unpermute` undoes it as
transformers' `LlamaTensorProcessor._reverse_permute_weights` does. Qwen2 files are not permuted.

The config (`hf_config`) is the config.json transformers builds from the metadata (its `GGUF_CONFIG_MAPPING`), so
`models.hf` parses it like any checkpoint's and an export carries it. The tokenizer (`hf_tokenizer`) is built by
transformers' own GGUF tokenizer converter from the metadata read here, so it gives the same ids and chat text as
`AutoTokenizer.from_pretrained(dir, gguf_file=name)`, without the torch that transformers' reader imports.
"""

from __future__ import annotations

import dataclasses
import functools
import mmap
import os
import struct
from typing import Any, Callable

import numpy as np

SUPPORTED_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}
_VERSIONS = (2, 3)
_DEFAULT_ALIGNMENT = 32
_REFETCH = (
  "fetch or copy the file again (SmolLM2-135M-Instruct: `python -m genenv_jax.data fetch smollm2` checks its sha256)"
)

# ggml's type ids (ggml.h, `enum ggml_type`), named for messages
GGML_TYPE_NAMES = {
  0: "F32",
  1: "F16",
  2: "Q4_0",
  3: "Q4_1",
  6: "Q5_0",
  7: "Q5_1",
  8: "Q8_0",
  9: "Q8_1",
  10: "Q2_K",
  11: "Q3_K",
  12: "Q4_K",
  13: "Q5_K",
  14: "Q6_K",
  15: "Q8_K",
  16: "IQ2_XXS",
  17: "IQ2_XS",
  18: "IQ3_XXS",
  19: "IQ1_S",
  20: "IQ4_NL",
  21: "IQ3_S",
  22: "IQ2_S",
  23: "IQ4_XS",
  24: "I8",
  25: "I16",
  26: "I32",
  27: "I64",
  28: "F64",
  29: "IQ1_M",
  30: "BF16",
  34: "TQ1_0",
  35: "TQ2_0",
  39: "MXFP4",
}


# ---- dequantisation (gguf-py gguf/quants.py) ------------------------------------------------------------------------


def _f16(blocks: np.ndarray, start: int) -> np.ndarray:
  """One float16 per block at byte `start`, as float32 [n, 1]."""
  return blocks[:, start : start + 2].copy().view(np.float16).astype(np.float32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
  """[n, 16] bytes -> [n, 32] values 0..15: the 16 low nibbles, then the 16 high ones (ggml's block order)."""
  return np.concatenate([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=1)


def _fifth_bits(qh: np.ndarray) -> np.ndarray:
  """[n, 4] bytes (a little-endian uint32 per block) -> [n, 32] bits, bit j for value j."""
  bits = qh.copy().view(np.uint32) >> np.arange(32, dtype=np.uint32).reshape(1, 32)
  return (bits & np.uint32(1)).astype(np.uint8)


def _q4_0(blocks: np.ndarray) -> np.ndarray:
  q = _nibbles(blocks[:, 2:18]).astype(np.int8) - np.int8(8)
  return _f16(blocks, 0) * q.astype(np.float32)


def _q4_1(blocks: np.ndarray) -> np.ndarray:
  return (_f16(blocks, 0) * _nibbles(blocks[:, 4:20]).astype(np.float32)) + _f16(blocks, 2)


def _q5_0(blocks: np.ndarray) -> np.ndarray:
  q = (_nibbles(blocks[:, 6:22]) | (_fifth_bits(blocks[:, 2:6]) << np.uint8(4))).astype(np.int8) - np.int8(16)
  return _f16(blocks, 0) * q.astype(np.float32)


def _q5_1(blocks: np.ndarray) -> np.ndarray:
  q = (_nibbles(blocks[:, 8:24]) | (_fifth_bits(blocks[:, 4:8]) << np.uint8(4))).astype(np.float32)
  return (_f16(blocks, 0) * q) + _f16(blocks, 2)


def _q8_0(blocks: np.ndarray) -> np.ndarray:
  return blocks[:, 2:34].copy().view(np.int8).astype(np.float32) * _f16(blocks, 0)


@dataclasses.dataclass(frozen=True)
class GGMLType:
  """How a ggml type is stored: `block` values in `block_bytes` bytes, turned into float32 by `to_float`."""

  name: str
  block: int
  block_bytes: int
  to_float: Callable[[np.ndarray], np.ndarray]  # [n_blocks, block_bytes] uint8 -> [n_blocks, block] float32


GGML_TYPES = {
  0: GGMLType("F32", 1, 4, lambda b: b.copy().view(np.float32)),
  1: GGMLType("F16", 1, 2, lambda b: b.copy().view(np.float16).astype(np.float32)),
  30: GGMLType("BF16", 1, 2, lambda b: (b.copy().view(np.int16).astype(np.int32) << 16).view(np.float32)),
  2: GGMLType("Q4_0", 32, 18, _q4_0),
  3: GGMLType("Q4_1", 32, 20, _q4_1),
  6: GGMLType("Q5_0", 32, 22, _q5_0),
  7: GGMLType("Q5_1", 32, 24, _q5_1),
  8: GGMLType("Q8_0", 32, 34, _q8_0),
}


def type_name(ggml_type: int) -> str:
  return GGML_TYPE_NAMES.get(ggml_type, f"unknown type {ggml_type}")


def dequantize(raw: np.ndarray, ggml_type: int, shape: tuple[int, ...]) -> np.ndarray:
  """The float32 array of `shape` (torch order) stored as `raw` (uint8 bytes) in ggml type `ggml_type`.

  ValueError for a type not in GGML_TYPES, or bytes that do not hold `shape`."""
  if ggml_type not in GGML_TYPES:
    raise ValueError(f"ggml type {type_name(ggml_type)} is not supported; supported: {supported_types()}")
  t = GGML_TYPES[ggml_type]
  count = int(np.prod(shape, dtype=np.int64))
  if count % t.block or raw.size != count // t.block * t.block_bytes:
    raise ValueError(f"{raw.size} bytes of {t.name} do not hold a tensor of shape {tuple(shape)}")
  return t.to_float(np.asarray(raw, np.uint8).reshape(-1, t.block_bytes)).reshape(shape)


def supported_types() -> str:
  return ", ".join(t.name for t in GGML_TYPES.values())


# ---- the file -------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TensorInfo:
  name: str
  shape: tuple[int, ...]  # torch order: [out, in] for a linear weight
  ggml_type: int
  offset: int  # from the start of the data section
  nbytes: int


class _Cursor:
  """Reads the header's little-endian fields in order; running past the end raises struct.error."""

  def __init__(self, buffer: mmap.mmap | bytes):
    self.buffer, self.pos = buffer, 0

  def unpack(self, fmt: str) -> tuple:
    values = struct.unpack_from(fmt, self.buffer, self.pos)
    self.pos += struct.calcsize(fmt)
    return values

  def string(self) -> str:
    (n,) = self.unpack("<Q")
    if self.pos + n > len(self.buffer):
      raise struct.error(f"a string of {n} bytes runs past the end")
    text = self.buffer[self.pos : self.pos + n].decode("utf-8")
    self.pos += n
    return text


# metadata value types (gguf.md, `gguf_metadata_value_type`) of fixed width -> struct format
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


def _value(cursor: _Cursor, value_type: int) -> Any:
  if value_type in _SCALARS:
    return cursor.unpack("<" + _SCALARS[value_type])[0]
  if value_type == _STRING:
    return cursor.string()
  if value_type == _ARRAY:
    element_type, count = cursor.unpack("<IQ")
    if element_type in _SCALARS:
      fmt = _SCALARS[element_type]
      width = struct.calcsize(fmt)
      if cursor.pos + count * width > len(cursor.buffer):
        raise struct.error(f"an array of {count} values runs past the end")
      values = np.frombuffer(cursor.buffer, dtype="<" + fmt, count=count, offset=cursor.pos).tolist()
      cursor.pos += count * width
      return values
    return [_value(cursor, element_type) for _ in range(count)]
  raise ValueError(f"unknown metadata value type {value_type}")


class GGUFFile:
  """A GGUF file, memory-mapped: `metadata` (key -> value), `tensors` (GGUF name -> TensorInfo), `array(name)`.

  Opening reads the header and checks that every tensor's type is supported and its bytes lie within the file; each
  failure is one ValueError naming the file, what was found and what to do.
  """

  def __init__(self, path: str | os.PathLike):
    self.path = os.fspath(path)
    with open(self.path, "rb") as f:
      size = os.fstat(f.fileno()).st_size
      if size < 24:
        raise ValueError(f"{self.path} is not a GGUF file: {size} bytes, shorter than its 24-byte header; {_REFETCH}")
      self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if self._map[:4] != b"GGUF":
      raise ValueError(
        f"{self.path} is not a GGUF file: it starts with {bytes(self._map[:4])!r}, not b'GGUF'; pass a .gguf model "
        "file (llama.cpp's format) or an HF checkpoint directory"
      )
    (self.version,) = struct.unpack_from("<I", self._map, 4)
    if self.version not in _VERSIONS:
      raise ValueError(
        f"{self.path} is GGUF version {self.version}; genenv_jax reads versions "
        f"{' and '.join(map(str, _VERSIONS))}: convert it again with a current llama.cpp"
      )
    try:
      self.metadata, table, data_start = self._header()
    except struct.error:
      raise ValueError(
        f"{self.path}: its GGUF header is truncated (the file ends inside its metadata or tensor table); {_REFETCH}"
      ) from None
    except (UnicodeDecodeError, ValueError, OverflowError, MemoryError) as e:
      raise ValueError(f"{self.path}: its GGUF header is corrupt ({type(e).__name__}: {e}); {_REFETCH}") from None
    unsupported = sorted({t for _, _, t, _ in table if t not in GGML_TYPES})
    if unsupported:
      found = ", ".join(f"{type_name(t)} ({sum(1 for *_, u, _ in table if u == t)} tensors)" for t in unsupported)
      raise ValueError(
        f"{self.path} holds tensors quantised as {found}, which genenv_jax does not dequantise (supported: "
        f"{supported_types()}); use a file of this model quantised to one of those (Q8_0 or Q4_1, say), or convert it "
        "with transformers (from_pretrained(DIR, gguf_file=NAME) and save_pretrained) and pass that directory"
      )
    self.tensors: dict[str, TensorInfo] = {}
    for name, shape, ggml_type, offset in table:
      t = GGML_TYPES[ggml_type]
      count = int(np.prod(shape, dtype=np.int64))
      if count % t.block:
        raise ValueError(f"{self.path}: tensor {name!r} ({t.name} {list(shape)}) is not whole blocks; {_REFETCH}")
      info = TensorInfo(name, shape, ggml_type, offset, count // t.block * t.block_bytes)
      end = data_start + offset + info.nbytes
      if end > size:
        raise ValueError(
          f"{self.path} is truncated: tensor {name!r} ({t.name} {list(shape)}) ends at byte {end} but the file has "
          f"{size} bytes; {_REFETCH}"
        )
      self.tensors[name] = info
    self._data_start = data_start

  def _header(self) -> tuple[dict[str, Any], list[tuple], int]:
    """(metadata, [(name, shape, ggml type, offset)], where the data section starts)."""
    cursor = _Cursor(self._map)
    cursor.pos = 8
    tensor_count, kv_count = cursor.unpack("<QQ")
    metadata = {}
    for _ in range(kv_count):
      key = cursor.string()
      (value_type,) = cursor.unpack("<I")
      metadata[key] = _value(cursor, value_type)
    table = []
    for _ in range(tensor_count):
      name = cursor.string()
      (ndim,) = cursor.unpack("<I")
      dims = cursor.unpack(f"<{ndim}Q")
      ggml_type, offset = cursor.unpack("<IQ")
      table.append((name, tuple(int(d) for d in reversed(dims)), ggml_type, offset))
    alignment = int(metadata.get("general.alignment", _DEFAULT_ALIGNMENT))
    return metadata, table, -(-cursor.pos // alignment) * alignment

  def array(self, name: str) -> np.ndarray:
    """Tensor `name` as float32 in torch order (dequantised; read from the page cache)."""
    info = self.tensors[name]
    raw = np.frombuffer(self._map, dtype=np.uint8, count=info.nbytes, offset=self._data_start + info.offset)
    return dequantize(raw, info.ggml_type, info.shape)

  @property
  def architecture(self) -> str:
    return str(self.metadata.get("general.architecture", ""))


@functools.lru_cache(maxsize=4)
def _read_cached(path: str, size: int, mtime_ns: int) -> GGUFFile:
  return GGUFFile(path)


def read(path: str | os.PathLike) -> GGUFFile:
  """The GGUF file at `path` (a local file), opened once per (path, size, mtime) in a process: the model and its
  tokenizer read the same header."""
  path = os.path.abspath(os.fspath(path))
  if not os.path.isfile(path):
    raise FileNotFoundError(f"GGUF file {path} does not exist; {_REFETCH}")
  st = os.stat(path)
  return _read_cached(path, st.st_size, st.st_mtime_ns)


def is_gguf(path: str | os.PathLike) -> bool:
  """True when `path` names a .gguf file (by its suffix; the file need not exist)."""
  return os.fspath(path).lower().endswith(".gguf")


# ---- the checkpoint: config and tensors under HF names ---------------------------------------------------------------


def _arch(gguf: GGUFFile) -> str:
  arch = gguf.architecture
  if arch not in SUPPORTED_ARCHITECTURES:
    raise ValueError(
      f"{gguf.path}: architecture {arch or '(none)'!r} (general.architecture) is not supported; genenv_jax's decoder "
      f"loads {' and '.join(sorted(SUPPORTED_ARCHITECTURES))} GGUF files only: pass a Llama- or Qwen2-family model"
    )
  return arch


def hf_config(gguf: GGUFFile) -> dict[str, Any]:
  """The config.json transformers builds from this file's metadata (GGUF_CONFIG_MAPPING of
  transformers/integrations/ggml.py): sizes from `<arch>.*`, the vocabulary from `<arch>.vocab_size` or the
  tokenizer's token count, tied embeddings when the file has no `output.weight`, rope scaling from
  `<arch>.rope.scaling.*` (linear only: other kinds raise)."""
  arch = _arch(gguf)
  meta = gguf.metadata

  def need(key: str) -> Any:
    if f"{arch}.{key}" not in meta:
      raise ValueError(f"{gguf.path} lacks the metadata key {arch}.{key}; {_REFETCH}")
    return meta[f"{arch}.{key}"]

  heads, hidden = int(need("attention.head_count")), int(need("embedding_length"))
  if f"{arch}.vocab_size" in meta:
    vocab = int(meta[f"{arch}.vocab_size"])
  elif "tokenizer.ggml.tokens" in meta:
    vocab = len(meta["tokenizer.ggml.tokens"])
  else:
    vocab = gguf.tensors["token_embd.weight"].shape[0] if "token_embd.weight" in gguf.tensors else 0
  head_dim = int(meta.get(f"{arch}.rope.dimension_count", hidden // heads)) if arch == "llama" else hidden // heads
  config: dict[str, Any] = {
    "architectures": [SUPPORTED_ARCHITECTURES[arch]],
    "model_type": arch,
    "vocab_size": vocab,
    "hidden_size": hidden,
    "intermediate_size": int(need("feed_forward_length")),
    "num_hidden_layers": int(need("block_count")),
    "num_attention_heads": heads,
    "num_key_value_heads": int(meta.get(f"{arch}.attention.head_count_kv", heads)),
    "head_dim": head_dim,
    "rms_norm_eps": float(meta.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
    "max_position_embeddings": int(meta.get(f"{arch}.context_length", 4096)),
    "rope_theta": float(meta.get(f"{arch}.rope.freq_base", 10000.0)),
    "tie_word_embeddings": "output.weight" not in gguf.tensors,
    "hidden_act": "silu",
    "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
    "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
    "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
    "dtype": "float32",
  }
  scaling = meta.get(f"{arch}.rope.scaling.type", "none")
  if scaling == "linear":
    config["rope_scaling"] = {"rope_type": "linear", "factor": float(need("rope.scaling.factor"))}
  elif scaling != "none" or "rope_freqs.weight" in gguf.tensors:
    found = f"{arch}.rope.scaling.type = {scaling!r}" if scaling != "none" else "a rope_freqs.weight tensor"
    raise ValueError(
      f"{gguf.path} has {found}: rope scaling other than linear is not read from GGUF files; pass the model's HF "
      "checkpoint directory (its config.json states the scaling) instead"
    )
  return config


# GGUF tensor names (llama.cpp's gguf-py/gguf/tensor_mapping.py) -> HF names; {i} is the layer
_NAMES = {
  "token_embd.weight": "model.embed_tokens.weight",
  "output_norm.weight": "model.norm.weight",
  "output.weight": "lm_head.weight",
  "blk.{i}.attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
  "blk.{i}.ffn_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
  "blk.{i}.attn_q.weight": "model.layers.{i}.self_attn.q_proj.weight",
  "blk.{i}.attn_k.weight": "model.layers.{i}.self_attn.k_proj.weight",
  "blk.{i}.attn_v.weight": "model.layers.{i}.self_attn.v_proj.weight",
  "blk.{i}.attn_q.bias": "model.layers.{i}.self_attn.q_proj.bias",
  "blk.{i}.attn_k.bias": "model.layers.{i}.self_attn.k_proj.bias",
  "blk.{i}.attn_v.bias": "model.layers.{i}.self_attn.v_proj.bias",
  "blk.{i}.attn_output.weight": "model.layers.{i}.self_attn.o_proj.weight",
  "blk.{i}.ffn_gate.weight": "model.layers.{i}.mlp.gate_proj.weight",
  "blk.{i}.ffn_up.weight": "model.layers.{i}.mlp.up_proj.weight",
  "blk.{i}.ffn_down.weight": "model.layers.{i}.mlp.down_proj.weight",
}


def hf_name(gguf_name: str) -> str:
  """'blk.3.attn_q.weight' -> 'model.layers.3.self_attn.q_proj.weight'; a name outside the table is kept as it is
  (and reported as unexpected by the loader)."""
  parts = gguf_name.split(".")
  if parts[0] == "blk" and len(parts) > 2 and parts[1].isdigit():
    pattern = ".".join(["blk", "{i}", *parts[2:]])
    return _NAMES[pattern].format(i=parts[1]) if pattern in _NAMES else gguf_name
  return _NAMES.get(gguf_name, gguf_name)


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
  """Undoes llama.cpp's `LlamaModel.permute` of q/k rows (per head: interleaved pairs -> rotate-half halves), as
  transformers' LlamaTensorProcessor._reverse_permute_weights."""
  dim = w.shape[0] // heads // 2
  return w.reshape(heads, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


class Checkpoint:
  """The tensors of a GGUF file under their HF names, read like a safetensors checkpoint (`get`, `shape`, `keys`):
  `get` dequantises to float32 and, for Llama, un-permutes q and k."""

  def __init__(self, gguf: GGUFFile):
    arch = _arch(gguf)
    self.gguf = gguf
    self.path = gguf.path
    self._names = {hf_name(n): n for n in gguf.tensors}
    heads = int(gguf.metadata[f"{arch}.attention.head_count"])
    kv_heads = int(gguf.metadata.get(f"{arch}.attention.head_count_kv", heads))
    self._heads = {"q_proj": heads, "k_proj": kv_heads} if arch == "llama" else {}

  def keys(self) -> list[str]:
    return list(self._names)

  def shape(self, name: str) -> tuple[int, ...]:
    return self.gguf.tensors[self._names[name]].shape

  def get(self, name: str) -> np.ndarray:
    w = self.gguf.array(self._names[name])
    projection = name.split(".")[-2]
    return _unpermute(w, self._heads[projection]) if projection in self._heads else w


def open_checkpoint(path: str | os.PathLike) -> dict[str, Checkpoint]:
  """HF tensor name -> the Checkpoint holding it (the shape of `safetensors_io.open_checkpoint`'s answer)."""
  checkpoint = Checkpoint(read(path))
  return {name: checkpoint for name in checkpoint.keys()}


# ---- the tokenizer ---------------------------------------------------------------------------------------------------

# GGUF tokenizer keys -> the names transformers' converter takes (GGUF_TOKENIZER_MAPPING)
_TOKENIZER_KEYS = {
  "tokenizer.ggml.model": "tokenizer_type",
  "tokenizer.ggml.pre": "pre_tokenizer_type",
  "tokenizer.ggml.tokens": "tokens",
  "tokenizer.ggml.scores": "scores",
  "tokenizer.ggml.token_type": "token_type",
  "tokenizer.ggml.merges": "merges",
  "tokenizer.ggml.bos_token_id": "bos_token_id",
  "tokenizer.ggml.eos_token_id": "eos_token_id",
  "tokenizer.ggml.unknown_token_id": "unk_token_id",
  "tokenizer.ggml.padding_token_id": "pad_token_id",
  "tokenizer.ggml.add_space_prefix": "add_prefix_space",
}
_SPECIAL_TOKENS = {
  "bos_token": "bos_token_id",
  "eos_token": "eos_token_id",
  "unk_token": "unk_token_id",
  "pad_token": "pad_token_id",
}


def hf_tokenizer(gguf: GGUFFile) -> Any:
  """The transformers tokenizer this file's metadata describes, as `AutoTokenizer.from_pretrained(dir,
  gguf_file=name)` builds it (transformers' `get_gguf_tokenizer` + `convert_gguf_tokenizer`, fed from our reader):
  the vocabulary and merges, the pre-tokenizer of `tokenizer.ggml.pre`, control tokens as special tokens, the special
  tokens by id, `add_bos_token`/`add_eos_token`, and the chat template."""
  meta = gguf.metadata
  if "tokenizer.ggml.tokens" not in meta:
    raise ValueError(f"{gguf.path} holds no tokenizer (no tokenizer.ggml.tokens); set `tokenizer` to the model's own")
  from transformers import PreTrainedTokenizerFast  # pylint: disable=import-outside-toplevel
  from transformers.integrations.gguf.gguf_tokenizer_mapping import (  # pylint: disable=import-outside-toplevel
    convert_gguf_tokenizer,
  )

  tokenizer = {name: meta[key] for key, name in _TOKENIZER_KEYS.items() if key in meta}
  config: dict[str, Any] = {}
  for key in ("chat_template", "add_bos_token", "add_eos_token"):
    source = "tokenizer.chat_template" if key == "chat_template" else f"tokenizer.ggml.{key}"
    if source in meta:
      config[key] = meta[source]
  if tokenizer.get("tokenizer_type") == "llama":
    config.setdefault("add_bos_token", True)  # as transformers: llama.cpp adds BOS to a sentencepiece vocabulary
  for name, key in _SPECIAL_TOKENS.items():
    token_id = tokenizer.get(key)
    config[name] = tokenizer["tokens"][token_id] if token_id is not None else None
  try:
    backend, extra = convert_gguf_tokenizer(gguf.architecture, tokenizer)
  except (ValueError, KeyError) as e:
    raise ValueError(
      f"{gguf.path}: cannot build its tokenizer (tokenizer.ggml.model = {tokenizer.get('tokenizer_type')!r}): {e}; "
      "set `tokenizer` to the model's HF tokenizer directory instead"
    ) from None
  return PreTrainedTokenizerFast(tokenizer_object=backend, **config, **extra)
