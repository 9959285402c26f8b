"""Tiny GGUF files written with the `gguf` package's GGUFWriter, laid out as llama.cpp's convert_hf_to_gguf.py lays
out a Llama or Qwen2 checkpoint (its tensor names, Llama's q/k row permutation, tied embeddings as a missing
output.weight), each tensor quantised to the ggml type asked for."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
Q = gguf.GGMLQuantizationType

# per tensor kind -> ggml type: every type the product dequantises appears in one model or the other
LLAMA_TYPES = dict(embed=Q.Q8_0, q=Q.Q4_1, k=Q.Q4_0, v=Q.Q5_0, o=Q.Q5_1, gate=Q.F16, up=Q.BF16, down=Q.Q8_0, out=Q.Q8_0)
QWEN2_TYPES = dict(embed=Q.F16, q=Q.Q8_0, k=Q.Q4_1, v=Q.Q4_1, o=Q.Q4_0, gate=Q.Q5_1, up=Q.Q5_0, down=Q.BF16, out=Q.Q4_1)

# A byte-level BPE vocabulary: GPT-2's 256 byte symbols, a few merges, and ChatML's control tokens.
CHATML = (
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
  "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _byte_symbols() -> list[str]:
  from transformers.convert_slow_tokenizer import bytes_to_unicode

  return list(bytes_to_unicode().values())


def tiny_vocab() -> tuple[list[str], list[int], list[str]]:
  """(tokens, token types, merges): 3 control tokens, 256 byte symbols, 6 merged tokens."""
  merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "1 2"]
  specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
  tokens = specials + _byte_symbols() + [m.replace(" ", "") for m in merges]
  types = [3] * len(specials) + [1] * (len(tokens) - len(specials))  # 3: CONTROL, 1: NORMAL
  return tokens, types, merges


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
  """llama.cpp's LlamaModel.permute (convert_hf_to_gguf.py): HF rotate-half rows -> interleaved pairs."""
  return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _add(writer, name: str, w: np.ndarray, qtype) -> None:
  w = np.ascontiguousarray(w, dtype=np.float32)
  if qtype == Q.F32:
    writer.add_tensor(name, w)
  elif qtype == Q.F16:
    writer.add_tensor(name, w.astype(np.float16))
  else:
    writer.add_tensor(name, gguf.quants.quantize(w, qtype), raw_dtype=qtype)


def write_gguf(
  path: pathlib.Path,
  arch: str = "llama",
  *,
  seed: int = 0,
  types: dict | None = None,
  vocab_size: int = 288,
  hidden: int = 64,
  intermediate: int = 96,
  layers: int = 2,
  heads: int = 4,
  kv_heads: int = 2,
  tied: bool = True,
  rope_theta: float = 10000.0,
  tokenizer: bool = True,
  pre: str = "default",
  edit=None,
) -> pathlib.Path:
  """A random model of `arch` ('llama', 'qwen2', or another name for the error cases) written as a GGUF file;
  `edit(writer)` adds metadata or tensors of its own."""
  types = types or (QWEN2_TYPES if arch == "qwen2" else LLAMA_TYPES)
  rng = np.random.default_rng(seed)
  normal = lambda *shape: rng.normal(0.0, 0.1, size=shape).astype(np.float32)  # noqa: E731
  head_dim = hidden // heads
  writer = gguf.GGUFWriter(str(path), arch)
  writer.add_block_count(layers)
  writer.add_context_length(256)
  writer.add_embedding_length(hidden)
  writer.add_feed_forward_length(intermediate)
  writer.add_head_count(heads)
  writer.add_head_count_kv(kv_heads)
  writer.add_rope_freq_base(rope_theta)
  writer.add_layer_norm_rms_eps(1e-6)
  writer.add_rope_dimension_count(head_dim)
  writer.add_vocab_size(vocab_size)
  if tokenizer:
    tokens, token_types, merges = tiny_vocab()
    tokens += [f"<unused{i}>" for i in range(vocab_size - len(tokens))]
    token_types += [1] * (vocab_size - len(token_types))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)
  _add(writer, "token_embd.weight", normal(vocab_size, hidden), types["embed"])
  _add(writer, "output_norm.weight", 1.0 + normal(hidden), Q.F32)
  if not tied:
    _add(writer, "output.weight", normal(vocab_size, hidden), types["out"])
  permute = arch == "llama"
  for i in range(layers):
    q, k = normal(heads * head_dim, hidden), normal(kv_heads * head_dim, hidden)
    _add(writer, f"blk.{i}.attn_norm.weight", 1.0 + normal(hidden), Q.F32)
    _add(writer, f"blk.{i}.ffn_norm.weight", 1.0 + normal(hidden), Q.F32)
    _add(writer, f"blk.{i}.attn_q.weight", _permute(q, heads) if permute else q, types["q"])
    _add(writer, f"blk.{i}.attn_k.weight", _permute(k, kv_heads) if permute else k, types["k"])
    _add(writer, f"blk.{i}.attn_v.weight", normal(kv_heads * head_dim, hidden), types["v"])
    if arch == "qwen2":
      _add(writer, f"blk.{i}.attn_q.bias", normal(heads * head_dim), Q.F32)
      _add(writer, f"blk.{i}.attn_k.bias", normal(kv_heads * head_dim), Q.F32)
      _add(writer, f"blk.{i}.attn_v.bias", normal(kv_heads * head_dim), Q.F32)
    _add(writer, f"blk.{i}.attn_output.weight", normal(hidden, heads * head_dim), types["o"])
    _add(writer, f"blk.{i}.ffn_gate.weight", normal(intermediate, hidden), types["gate"])
    _add(writer, f"blk.{i}.ffn_up.weight", normal(intermediate, hidden), types["up"])
    _add(writer, f"blk.{i}.ffn_down.weight", normal(hidden, intermediate), types["down"])
  if edit is not None:
    edit(writer)
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.write_tensors_to_file()
  writer.close()
  return path
