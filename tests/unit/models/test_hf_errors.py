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


def _last_tensor(path):
  f = safetensors_io.SafetensorsFile(path)
  name = max(f.header, key=lambda n: f.header[n]["data_offsets"][1])
  return name, f.header[name]


def test_a_truncated_tensor_names_the_file_the_tensor_and_the_byte_counts(checkpoint):
  path = checkpoint / "model.safetensors"
  name, info = _last_tensor(path)
  data = path.read_bytes()
  path.write_bytes(data[:-100])  # the last tensor loses its last 100 bytes
  begin, end = info["data_offsets"]
  with pytest.raises(ValueError) as e:
    gj.load_hf(checkpoint)
  message = str(e.value)
  assert str(path) in message and repr(name) in message
  assert f"needs {end - begin} bytes but the file holds only {end - begin - 100} of them" in message
  assert "truncated" in message


def test_a_header_that_claims_more_than_the_file_or_is_corrupt_is_named(checkpoint):
  path = checkpoint / "model.safetensors"
  data = path.read_bytes()
  size = int.from_bytes(data[:8], "little")
  path.write_bytes(data[: 8 + size // 2])  # the header itself cut in half
  with pytest.raises(ValueError, match=rf"{path}: the safetensors header claims {size} bytes but the file has only"):
    gj.load_hf(checkpoint)
  path.write_bytes(data[:8] + b"{" * size + data[8 + size :])  # same length, not JSON
  with pytest.raises(ValueError, match="has a corrupt safetensors header"):
    gj.load_hf(checkpoint)


def test_offsets_that_disagree_with_the_shape_are_named(checkpoint):
  path = checkpoint / "model.safetensors"
  data = path.read_bytes()
  size = int.from_bytes(data[:8], "little")
  header = json.loads(data[8 : 8 + size])
  name = next(n for n in header if n != "__metadata__")
  header[name]["shape"] = [d * 2 for d in header[name]["shape"]][:1] + header[name]["shape"][1:]
  blob = json.dumps(header).encode()
  blob += b" " * (size - len(blob)) if len(blob) <= size else b""
  path.write_bytes(len(blob).to_bytes(8, "little") + blob + data[8 + size :])
  with pytest.raises(ValueError, match=rf"tensor '{name}' .* needs \d+ bytes but its header gives \d+"):
    gj.load_hf(checkpoint)


def test_writing_over_an_older_sharded_checkpoint_leaves_only_the_new_one(tmp_path):
  import numpy as np

  tensors = [(f"t{i}", np.full((64,), i, np.float32)) for i in range(3)]
  assert len(safetensors_io.write_checkpoint(tmp_path, iter(tensors), max_shard_bytes=300)) == 3  # sharded + index
  assert safetensors_io.write_checkpoint(tmp_path, iter(tensors[:2])) == ["model.safetensors"]
  assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]  # no stale shard or index
  assert sorted(safetensors_io.open_checkpoint(tmp_path)) == ["t0", "t1"]
