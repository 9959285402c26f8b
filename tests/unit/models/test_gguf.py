"""GGUF files as checkpoints and tokenizers (genenv_jax.models.gguf), on tiny files written with gguf's GGUFWriter:
each ggml type dequantised bit for bit as gguf-py (and transformers) do, logits and tokenizer equal to transformers'
own GGUF load, export to safetensors, and one clear error for each way a load fails."""

import json

import numpy as np
import pytest
from gguf_files import CHATML, LLAMA_TYPES, QWEN2_TYPES, Q, gguf, write_gguf
from hf_models import hf_logits, torch, transformers

import genenv_jax as gj
from genenv_jax.models import gguf as ours
from genenv_jax.models.tokenizer import load_tokenizer

ATOL = 1e-4


# ---- dequantisation --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("qtype", [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0])
def test_dequantize_is_gguf_py_bit_for_bit(qtype):
  rng = np.random.default_rng(int(qtype))
  x = (rng.normal(0.0, 1.0, size=(6, 96)) * rng.uniform(0.01, 10.0, size=(6, 1))).astype(np.float32)
  x[0, :32] = 0.0  # an all-zero block (scale 0)
  raw = x.astype(np.float16) if qtype == Q.F16 else x if qtype == Q.F32 else gguf.quants.quantize(x, qtype)
  raw = np.frombuffer(raw.tobytes(), dtype=np.uint8)
  got = ours.dequantize(raw, int(qtype), (6, 96))
  want = gguf.quants.dequantize(raw.reshape(6, -1), qtype).reshape(6, 96)
  assert got.dtype == np.float32 and got.shape == (6, 96)
  np.testing.assert_array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32))
  if qtype not in (Q.F32, Q.F16, Q.BF16):
    assert np.max(np.abs(got - x)) < 0.2 * np.max(np.abs(x))  # and it is the tensor, give or take quantisation


@pytest.mark.parametrize("qtype", [Q.Q4_0, Q.Q4_1, Q.Q8_0])
def test_dequantize_matches_transformers_kernels(qtype):
  from transformers.integrations.gguf.dequant import dequantize as torch_dequantize

  x = np.random.default_rng(7).normal(size=(4, 64)).astype(np.float32)
  raw = np.frombuffer(gguf.quants.quantize(x, qtype).tobytes(), dtype=np.uint8)
  want = torch_dequantize(torch.from_numpy(raw.copy()), int(qtype)).numpy().reshape(4, 64)
  np.testing.assert_allclose(ours.dequantize(raw, int(qtype), (4, 64)), want, rtol=1e-6, atol=1e-7)


def test_dequantize_rejects_a_wrong_size():
  with pytest.raises(ValueError, match=r"19 bytes of Q4_0 do not hold a tensor of shape \(32,\)"):
    ours.dequantize(np.zeros(19, np.uint8), int(Q.Q4_0), (32,))
  with pytest.raises(ValueError, match="ggml type Q4_K is not supported; supported: F32, F16, BF16, Q4_0"):
    ours.dequantize(np.zeros(144, np.uint8), int(Q.Q4_K), (256,))


# ---- a model: logits as transformers' GGUF load ----------------------------------------------------------------------

CASES = {
  "llama_gqa_tied": dict(arch="llama", heads=4, kv_heads=2, tied=True, types=LLAMA_TYPES),
  "llama_mha_untied": dict(arch="llama", heads=4, kv_heads=4, tied=False, rope_theta=500.0, types=LLAMA_TYPES),
  "qwen2_gqa_untied": dict(arch="qwen2", heads=4, kv_heads=2, tied=False, rope_theta=1e6, types=QWEN2_TYPES),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def gguf_model(request, tmp_path_factory):
  """(the GGUF file, transformers' float32 load of it)."""
  path = write_gguf(tmp_path_factory.mktemp(request.param) / "model.gguf", **CASES[request.param])
  pytest.importorskip("accelerate")  # transformers' GGUF load needs it
  hf = transformers.AutoModelForCausalLM.from_pretrained(
    path.parent, gguf_file=path.name, quantization_config=transformers.GgufConfig(dequantize=True)
  ).eval()
  return path, hf


def _batch(vocab: int):
  rng = np.random.RandomState(0)
  ids = rng.randint(3, vocab, size=(3, 12)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, :5] = 0
  ids[mask == 0] = 2
  return ids, mask


def test_logits_match_transformers_gguf_load(gguf_model, tmp_path):
  path, hf = gguf_model
  model = gj.load_hf(path)
  assert model.config.architecture == type(hf).__name__
  assert model.config.tie_word_embeddings == hf.config.tie_word_embeddings
  assert (model.config.num_heads, model.config.num_kv_heads, model.config.rope_theta) == (
    hf.config.num_attention_heads,
    hf.config.num_key_value_heads,
    hf.config.rope_parameters["rope_theta"],
  )
  ids, mask = _batch(288)
  want = hf_logits(hf, ids, mask)
  got = np.asarray(gj.forward(model, ids, mask))
  assert np.max(np.abs(got - want) * mask[..., None]) < ATOL
  # the weights themselves are transformers' (q and k un-permuted), bit for bit
  hf_state = {k: v.numpy() for k, v in hf.state_dict().items()}
  checkpoint = ours.open_checkpoint(path)
  for name in ("model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight"):
    np.testing.assert_array_equal(checkpoint[name].get(name), hf_state[name])
  # exported to safetensors, the model reloads with the same logits in genenv_jax and transformers
  out = gj.save_hf(model, tmp_path / "export")
  assert json.loads((out / "config.json").read_text())["architectures"] == [type(hf).__name__]
  reloaded = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
  assert np.max(np.abs(hf_logits(reloaded, ids, mask) - want) * mask[..., None]) < ATOL


# ---- the tokenizer: ids and chat text as transformers' GGUF load -----------------------------------------------------

TEXTS = ["the cat sat in a hat", "  12 + 12 = 24\n\tthe end", "<|im_start|>user\nhi<|im_end|>", "Ünïcödé ☃ 😀", ""]
MESSAGES = [
  [{"role": "user", "content": "What is 12 + 30?"}],
  [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "the end"}],
]


@pytest.mark.parametrize("arch,pre", [("llama", "smollm"), ("qwen2", "qwen2")])
def test_tokenizer_matches_transformers_gguf_load(tmp_path, arch, pre):
  path = write_gguf(tmp_path / "model.gguf", arch, layers=1, pre=pre)
  tok = load_tokenizer(path)
  hf = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file=path.name)
  assert [tok.encode(t) for t in TEXTS] == [hf(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
  # decoding drops pad ids, and pad is <|im_end|> here (as in SmolLM2's own files): the round trip skips that text
  assert all(tok.decode(tok.encode(t), skip_special=False) == t for t in TEXTS if "<|im_end|>" not in t)
  for messages in MESSAGES:
    text = tok.apply_chat_template(messages)
    assert text == hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert tok.encode(text) == hf(text, add_special_tokens=False)["input_ids"]
  assert (tok.bos_id, tok.eos_ids, tok.pad_id, tok.vocab_size) == (1, (2, 0), 2, 288)  # as a converted directory's
  assert tok.decode(tok.encode("<|im_start|>hi<|im_end|>")) == "hi"  # control tokens are special
  assert CHATML == hf.chat_template


def test_export_writes_a_gguf_runs_tokenizer_as_tokenizer_files(tmp_path):
  """export.copy_tokenizer of a run whose tokenizer is a .gguf file saves transformers' tokenizer files (not the model
  file again), which load to the same ids, chat text and special ids."""
  from genenv_jax.export import copy_tokenizer

  path = write_gguf(tmp_path / "model.gguf", "llama", layers=1, pre="smollm")
  out = tmp_path / "export"
  out.mkdir()
  written = copy_tokenizer(path, out)
  assert "tokenizer.json" in written and not any(name.endswith(".gguf") for name in written), written
  assert sorted(p.name for p in out.iterdir()) == written
  ours_tok, exported = load_tokenizer(path), load_tokenizer(out)
  assert [exported.encode(t) for t in TEXTS] == [ours_tok.encode(t) for t in TEXTS]
  assert [exported.apply_chat_template(m) for m in MESSAGES] == [ours_tok.apply_chat_template(m) for m in MESSAGES]
  assert (exported.bos_id, exported.pad_id, exported.vocab_size) == (ours_tok.bos_id, ours_tok.pad_id, 288)


# ---- errors ----------------------------------------------------------------------------------------------------------


def test_architecture_outside_llama_and_qwen2(tmp_path):
  path = write_gguf(tmp_path / "phi.gguf", "phi3", layers=1, types=LLAMA_TYPES)
  with pytest.raises(ValueError) as e:
    gj.load_hf(path)
  assert str(e.value) == (
    f"{path}: architecture 'phi3' (general.architecture) is not supported; genenv_jax's decoder loads llama and "
    "qwen2 GGUF files only: pass a Llama- or Qwen2-family model"
  )


def test_rope_scaling(tmp_path):
  def linear(w):
    w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
    w.add_rope_scaling_factor(4.0)

  assert gj.read_hf_config(write_gguf(tmp_path / "linear.gguf", layers=1, edit=linear)).rope_scaling == ("linear", 4.0)
  yarn = write_gguf(tmp_path / "yarn.gguf", layers=1, edit=lambda w: w.add_rope_scaling_type(gguf.RopeScalingType.YARN))
  with pytest.raises(ValueError, match=r"yarn\.gguf has llama\.rope\.scaling\.type = 'yarn': rope scaling other than "):
    gj.load_hf(yarn)
  freqs = write_gguf(
    tmp_path / "l3.gguf", layers=1, edit=lambda w: w.add_tensor("rope_freqs.weight", np.ones(8, np.float32))
  )
  with pytest.raises(ValueError, match=r"l3\.gguf has a rope_freqs\.weight tensor: .* pass the model's HF checkpoint"):
    gj.load_hf(freqs)


def test_unsupported_quantisation(tmp_path):
  path = tmp_path / "k.gguf"
  writer = gguf.GGUFWriter(str(path), "llama")
  writer.add_tensor("token_embd.weight", np.zeros((2, 144), np.uint8), raw_dtype=Q.Q4_K)
  writer.add_tensor("output_norm.weight", np.ones(256, np.float32))
  for step in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file, writer.close):
    step()
  for load in (gj.load_hf, load_tokenizer):
    with pytest.raises(ValueError) as e:
      load(path)
    assert str(e.value).startswith(
      f"{path} holds tensors quantised as Q4_K (1 tensors), which genenv_jax does not dequantise (supported: F32, F16, "
      "BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0); use a file of this model quantised to one of those"
    )


def test_truncated_or_foreign_files(tmp_path):
  whole = write_gguf(tmp_path / "whole.gguf", layers=1).read_bytes()
  cut = tmp_path / "cut.gguf"
  cut.write_bytes(whole[:-100])
  with pytest.raises(
    ValueError,
    match=rf"^{cut} is truncated: tensor 'blk\.0\.ffn_down\.weight' \(Q8_0 \[64, 96\]\) "
    rf"ends at byte {len(whole)} but the file has {len(whole) - 100} bytes; fetch or copy the file ",
  ):
    gj.load_hf(cut)
  cut.write_bytes(whole[:3000])  # inside the vocabulary
  with pytest.raises(ValueError, match=rf"^{cut}: its GGUF header is truncated \(the file ends inside its metadata"):
    load_tokenizer(cut)
  cut.write_bytes(b"PK\x03\x04" + whole[4:])
  with pytest.raises(ValueError, match=r"is not a GGUF file: it starts with b'PK\\x03\\x04', not b'GGUF'"):
    gj.load_hf(cut)
  with pytest.raises(FileNotFoundError, match=r"'smollm2/absent\.gguf' does not exist .* `fetch smollm2`"):
    gj.load_hf("smollm2/absent.gguf")  # a relative .gguf path is a file, never a hub id


def test_evaluate_takes_a_gguf_file_as_its_model_and_tokenizer(tmp_path):
  from genenv_jax.evaluation import agents

  path = write_gguf(tmp_path / "model.gguf", layers=1)
  assert agents.load_model(path).config.num_layers == 1
  assert agents.resolve_tokenizer(path, None).eos_ids == (2, 0)
  with pytest.raises(FileNotFoundError, match=r"is not an HF model directory \(no config.json\) nor a .gguf file"):
    agents.load_model(tmp_path)
