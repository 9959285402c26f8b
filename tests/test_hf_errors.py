"""Bad checkpoints give clear errors that name the offending thing."""

import json

import pytest
from hf_models import make_hf_model, save_hf_model

import genenv_jax as gj
from genenv_jax.models import safetensors_io


@pytest.fixture()
def checkpoint(tmp_path):
  return save_hf_model(make_hf_model("llama", num_attention_heads=4, num_key_value_heads=2), tmp_path / "ckpt")


def test_missing_directory(tmp_path):
  with pytest.raises(FileNotFoundError, match="does not exist"):
    gj.load_hf(tmp_path / "nope")


def test_directory_without_config(tmp_path):
  with pytest.raises(FileNotFoundError, match="config.json"):
    gj.load_hf(tmp_path)


def test_corrupt_config_json(checkpoint):
  (checkpoint / "config.json").write_text("{ not json")
  with pytest.raises(ValueError, match=r"config.json is not valid JSON"):
    gj.load_hf(checkpoint)


def test_unsupported_architecture(checkpoint):
  raw = json.loads((checkpoint / "config.json").read_text())
  raw["architectures"] = ["GPT2LMHeadModel"]
  (checkpoint / "config.json").write_text(json.dumps(raw))
  with pytest.raises(ValueError, match=r"unsupported architecture \['GPT2LMHeadModel'\]"):
    gj.load_hf(checkpoint)


def test_missing_required_field(checkpoint):
  raw = json.loads((checkpoint / "config.json").read_text())
  del raw["hidden_size"]
  (checkpoint / "config.json").write_text(json.dumps(raw))
  with pytest.raises(ValueError, match="lacks the required field 'hidden_size'"):
    gj.load_hf(checkpoint)


def test_shape_mismatch_names_the_tensor(checkpoint):
  raw = json.loads((checkpoint / "config.json").read_text())
  raw["intermediate_size"] = 80
  (checkpoint / "config.json").write_text(json.dumps(raw))
  with pytest.raises(
    ValueError, match=r"tensor 'model.layers.0.mlp.(gate|up|down)_proj.weight' has shape \((96, 64|64, 96)\)"
  ):
    gj.load_hf(checkpoint)


def test_missing_and_unexpected_tensors(checkpoint):
  f = safetensors_io.SafetensorsFile(checkpoint / "model.safetensors")
  tensors = {n: f.get(n).copy() for n in f.keys()}
  tensors["model.extra.weight"] = tensors.pop("model.layers.1.mlp.up_proj.weight")
  del f
  (checkpoint / "model.safetensors").unlink()
  safetensors_io.write_checkpoint(checkpoint, iter(tensors.items()))
  with pytest.raises(
    ValueError,
    match=r"missing tensors: \['model.layers.1.mlp.up_proj.weight'\].*"
    r"unexpected tensors: \['model.extra.weight'\]",
  ):
    gj.load_hf(checkpoint)


def test_no_weights(checkpoint):
  (checkpoint / "model.safetensors").unlink()
  with pytest.raises(FileNotFoundError, match=r"no \*.safetensors weights"):
    gj.load_hf(checkpoint)


def test_truncated_safetensors(checkpoint):
  (checkpoint / "model.safetensors").write_bytes(b"\x01\x02")
  with pytest.raises(ValueError, match="is not a safetensors file"):
    gj.load_hf(checkpoint)


def test_unsupported_dtype_name(checkpoint):
  with pytest.raises(ValueError, match="unsupported dtype 'float8'"):
    gj.load_hf(checkpoint, dtype="float8")
