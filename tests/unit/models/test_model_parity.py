"""Logit parity with transformers' PyTorch Llama / Qwen2 on tiny random models, before and after export."""

import numpy as np
import pytest
from hf_models import TINY_CONFIGS, hf_logits, make_hf_model, save_hf_model, transformers

import genenv_jax as gj

ATOL = 1e-4


def left_padded_batch(vocab: int, seed: int = 0):
  rng = np.random.RandomState(seed)
  ids = rng.randint(3, vocab, size=(3, 12)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, :4] = 0
  mask[2, :9] = 0
  ids[mask == 0] = 0
  return ids, mask


def masked_max_diff(a, b, mask):
  return float(np.max(np.abs(np.asarray(a) - np.asarray(b)) * mask[..., None]))


@pytest.fixture(scope="module", params=sorted(TINY_CONFIGS))
def hf_checkpoint(request, tmp_path_factory):
  kind, overrides = TINY_CONFIGS[request.param]
  model = make_hf_model(kind, **overrides)
  return model, save_hf_model(model, tmp_path_factory.mktemp(request.param))


def test_logits_match_transformers(hf_checkpoint):
  hf_model, path = hf_checkpoint
  model = gj.load_hf(path)
  ids, mask = left_padded_batch(hf_model.config.vocab_size)
  ours = gj.forward(model, ids, mask)
  assert ours.shape == (3, 12, hf_model.config.vocab_size) and ours.dtype == np.float32
  assert masked_max_diff(ours, hf_logits(hf_model, ids, mask), mask) < ATOL


def test_left_padding_does_not_change_real_logits(hf_checkpoint):
  _, path = hf_checkpoint
  model = gj.load_hf(path)
  ids, mask = left_padded_batch(101)
  padded = np.asarray(gj.forward(model, ids, mask))[2, 9:]
  alone = np.asarray(gj.forward(model, ids[2:3, 9:], mask[2:3, 9:]))[0]
  np.testing.assert_allclose(padded, alone, atol=ATOL)


def test_export_reloads_in_transformers_with_parity(hf_checkpoint, tmp_path):
  hf_model, path = hf_checkpoint
  model = gj.load_hf(path)
  out = gj.save_hf(model, tmp_path / "export")
  reloaded = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
  assert type(reloaded) is type(hf_model)
  ids, mask = left_padded_batch(101, seed=1)
  np.testing.assert_allclose(hf_logits(reloaded, ids, mask), hf_logits(hf_model, ids, mask), atol=ATOL)
  ours_again = gj.forward(gj.load_hf(out), ids, mask)
  assert masked_max_diff(ours_again, hf_logits(reloaded, ids, mask), mask) < ATOL


def test_sharded_checkpoint_with_index_loads(tmp_path):
  hf_model = make_hf_model("qwen2", num_attention_heads=4, num_key_value_heads=2)
  hf_model.save_pretrained(tmp_path, max_shard_size="20KB")
  assert (tmp_path / "model.safetensors.index.json").exists()
  model = gj.load_hf(tmp_path)
  ids, mask = left_padded_batch(101)
  assert masked_max_diff(gj.forward(model, ids, mask), hf_logits(hf_model, ids, mask), mask) < ATOL


def test_transformers4_config_spelling(tmp_path):
  """rope_theta / torch_dtype at the top level (transformers 4) read the same as rope_parameters / dtype."""
  import json

  hf_model = make_hf_model("llama", num_attention_heads=4, num_key_value_heads=2, rope_theta=321.0)
  hf_model.save_pretrained(tmp_path)
  raw = json.loads((tmp_path / "config.json").read_text())
  rope = raw.pop("rope_parameters")
  raw.pop("dtype", None)
  raw.update(rope_theta=rope["rope_theta"], torch_dtype="float32", rope_scaling=None)
  (tmp_path / "config.json").write_text(json.dumps(raw))
  assert gj.read_hf_config(tmp_path).rope_theta == 321.0
  ids, mask = left_padded_batch(101)
  assert masked_max_diff(gj.forward(gj.load_hf(tmp_path), ids, mask), hf_logits(hf_model, ids, mask), mask) < ATOL


def test_llama3_rope_scaling_parity(tmp_path):
  scaling = dict(
    rope_type="llama3",
    rope_theta=10000.0,
    factor=8.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=16,
  )
  hf_model = make_hf_model("llama", num_attention_heads=4, num_key_value_heads=2, rope_parameters=scaling)
  hf_model.save_pretrained(tmp_path)
  assert gj.read_hf_config(tmp_path).rope_scaling[0] == "llama3"
  ids, mask = left_padded_batch(101)
  assert masked_max_diff(gj.forward(gj.load_hf(tmp_path), ids, mask), hf_logits(hf_model, ids, mask), mask) < ATOL


def test_bfloat16_load_and_forward(hf_checkpoint):
  hf_model, path = hf_checkpoint
  model = gj.load_hf(path, dtype="bfloat16")
  ids, mask = left_padded_batch(101)
  logits = gj.forward(model, ids, mask)
  assert logits.dtype == np.float32
  assert model.embed[...].dtype.name == "bfloat16"
  # bfloat16 keeps ~3 significant digits: close to the float32 reference, not equal
  assert masked_max_diff(logits, hf_logits(hf_model, ids, mask), mask) < 0.1
