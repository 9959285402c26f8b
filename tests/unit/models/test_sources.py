"""Checkpoints and tokenizers where users keep them: a hub id through the hub cache (offline), an fsspec URL streamed
per tensor (memory:// standing in for gs://), and one clear error naming what was tried when neither holds it."""

from __future__ import annotations

import os
import pathlib

import fsspec
import huggingface_hub
import numpy as np
import pytest
from hf_models import make_hf_model, save_hf_model

import genenv_jax as gj
from genenv_jax.models import safetensors_io, sources
from genenv_jax.models.tokenizer import HFTokenizer, SentencePieceTokenizer, default_tokenizer_path, load_tokenizer

REVISION = "0123456789abcdef0123456789abcdef01234567"


def tiny_hf_tokenizer(directory: pathlib.Path) -> pathlib.Path:
  """A word-level transformers tokenizer (tokenizer.json + tokenizer_config.json) with an eos token."""
  from tokenizers import Tokenizer, models, pre_tokenizers
  from transformers import PreTrainedTokenizerFast

  vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "two": 4, "plus": 5, "three": 6}
  backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
  backend.pre_tokenizer = pre_tokenizers.Whitespace()
  fast = PreTrainedTokenizerFast(
    tokenizer_object=backend, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
  )
  fast.save_pretrained(directory)
  return directory


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> pathlib.Path:
  """A tiny Qwen2 checkpoint saved by transformers."""
  return save_hf_model(
    make_hf_model("qwen2", num_attention_heads=4, num_key_value_heads=2), tmp_path_factory.mktemp("m")
  )


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> pathlib.Path:
  """Its own directory: beside a Qwen2 config.json, AutoTokenizer would read it as a Qwen2 tokenizer."""
  return tiny_hf_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> pathlib.Path:
  """An empty hub cache in tmp_path, offline (HF_HUB_CACHE, HF_HUB_OFFLINE=1: huggingface_hub reads both as constants
  at import, so the constants are set too)."""
  cache = tmp_path / "hub"
  cache.mkdir()
  monkeypatch.setenv("HF_HUB_CACHE", str(cache))
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
  monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
  return cache


def put_in_hub_cache(cache: pathlib.Path, repo_id: str, directory: pathlib.Path) -> pathlib.Path:
  """The hub cache's layout of one revision: models--ORG--NAME/snapshots/REV/<files>, refs/main = REV."""
  repo = cache / ("models--" + repo_id.replace("/", "--"))
  snapshot = repo / "snapshots" / REVISION
  snapshot.mkdir(parents=True)
  for path in directory.iterdir():
    (snapshot / path.name).write_bytes(path.read_bytes())
  (repo / "refs").mkdir()
  (repo / "refs" / "main").write_text(REVISION)
  return snapshot


def put_in_memory(directory: pathlib.Path, url: str) -> str:
  fs, root = fsspec.core.url_to_fs(url)
  for path in directory.iterdir():
    fs.pipe_file(f"{root}/{path.name}", path.read_bytes())
  return url


@pytest.fixture
def memory_root(request):
  """A fresh memory:// directory, removed afterwards (the memory filesystem is global to the process)."""
  url = f"memory://genenv-{request.node.name}"
  yield url
  fs, root = fsspec.core.url_to_fs(url)
  if fs.exists(root):
    fs.rm(root, recursive=True)


def logits(model) -> np.ndarray:
  ids = np.array([[5, 9, 17, 33, 65, 80], [0, 0, 3, 4, 5, 6]], np.int32)
  mask = (ids > 0).astype(np.int32)
  return np.asarray(gj.forward(model, ids, mask))


def test_a_hub_id_loads_offline_from_the_hub_cache(checkpoint, tokenizer_dir, hub_cache):
  snapshot = put_in_hub_cache(hub_cache, "tiny-org/Tiny-Qwen2", checkpoint)
  assert sources.resolve("tiny-org/Tiny-Qwen2", "hf_path") == str(snapshot)
  np.testing.assert_array_equal(logits(gj.load_hf("tiny-org/Tiny-Qwen2")), logits(gj.load_hf(checkpoint)))
  assert gj.read_hf_config("tiny-org/Tiny-Qwen2").architecture == "Qwen2ForCausalLM"
  put_in_hub_cache(hub_cache, "tiny-org/Tiny-Tokenizer", tokenizer_dir)
  tokenizer = load_tokenizer("tiny-org/Tiny-Tokenizer")
  assert isinstance(tokenizer, HFTokenizer) and tokenizer.encode("two plus three") == [4, 5, 6]


def test_a_local_directory_wins_over_a_hub_id_of_the_same_name(checkpoint, hub_cache, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "org").mkdir()
  local = tmp_path / "org" / "model"
  local.symlink_to(checkpoint)
  assert sources.resolve("org/model", "hf_path") == str(local)


def test_a_missing_hub_id_or_path_names_what_was_tried(hub_cache, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  with pytest.raises(FileNotFoundError) as e:
    gj.load_hf("no-org/No-Such-Model")
  message = str(e.value)
  assert message.startswith("HF checkpoint directory 'no-org/No-Such-Model' not found: tried the local path ")
  assert str(tmp_path / "no-org" / "No-Such-Model") in message
  assert f"the hub id no-org/No-Such-Model: not in the hub cache {hub_cache} (HF_HUB_OFFLINE is set" in message
  assert len(message.splitlines()) == 1
  with pytest.raises(
    FileNotFoundError,
    match=r"tokenizer path '\./nope/x/y' does not exist: tried the local path .*nope/x/y; it is not a hub id",
  ):
    load_tokenizer("./nope/x/y")
  with pytest.raises(FileNotFoundError, match=r"HF checkpoint directory memory://genenv-absent does not exist"):
    gj.load_hf("memory://genenv-absent")
  with pytest.raises(ValueError, match="hf_path is empty"):
    sources.resolve("", "hf_path")


def test_a_bucket_without_its_fsspec_backend_says_which_package_to_install():
  try:
    import gcsfs  # noqa: F401
  except ImportError:
    with pytest.raises(ValueError, match=r"cannot read gs://bucket/Qwen2.5-7B-Instruct: .*\(pip install gcsfs\)"):
      gj.load_hf("gs://bucket/Qwen2.5-7B-Instruct")
  else:
    pytest.skip("gcsfs is installed: gs:// would be reached over the network")


def test_an_fsspec_directory_loads_with_the_same_logits_streamed_per_tensor(checkpoint, memory_root, monkeypatch):
  url = put_in_memory(checkpoint, f"{memory_root}/Tiny-Qwen2")
  fs, _ = fsspec.core.url_to_fs(url)
  reads = []
  real = type(fs).cat_file

  def cat_file(self, path, start=None, end=None, **kwargs):
    data = real(self, path, start=start, end=end, **kwargs)
    if path.endswith(".safetensors"):
      reads.append(len(data))
    return data

  monkeypatch.setattr(type(fs), "cat_file", cat_file)
  np.testing.assert_array_equal(logits(gj.load_hf(url)), logits(gj.load_hf(checkpoint)))
  weights = safetensors_io.open_checkpoint(checkpoint)
  largest = max(f.get(name).nbytes for name, f in weights.items())
  assert reads and max(reads) <= largest  # one tensor per read, never the whole file
  assert os.path.getsize(checkpoint / "model.safetensors") > largest


def test_a_sharded_fsspec_checkpoint_loads_through_its_index(checkpoint, memory_root, tmp_path):
  local = gj.save_hf(gj.load_hf(checkpoint), tmp_path / "sharded", max_shard_bytes=20_000)
  assert (local / safetensors_io.INDEX_FILE).exists()
  url = put_in_memory(local, f"{memory_root}/sharded")
  np.testing.assert_array_equal(logits(gj.load_hf(url)), logits(gj.load_hf(checkpoint)))


def test_a_tokenizer_loads_from_an_fsspec_directory_or_file(tokenizer_dir, memory_root):
  url = put_in_memory(tokenizer_dir, f"{memory_root}/tokenizer")
  fs, root = fsspec.core.url_to_fs(memory_root)
  fs.pipe_file(f"{root}/tokenizer/model.safetensors", b"weights, not for the tokenizer")
  tokenizer = load_tokenizer(url)
  assert isinstance(tokenizer, HFTokenizer) and tokenizer.encode("three plus two") == [6, 5, 4]
  assert not (tokenizer.path / "model.safetensors").exists()  # the tokenizer's files only are copied
  fs.pipe_file(f"{root}/spm/arith.model", default_tokenizer_path().read_bytes())
  spm = load_tokenizer(f"{memory_root}/spm/arith.model")
  assert isinstance(spm, SentencePieceTokenizer) and spm.vocab_size == load_tokenizer().vocab_size
  assert load_tokenizer(f"{memory_root}/spm").encode("1+2") == load_tokenizer().encode("1+2")


def test_hub_ids_are_told_from_paths():
  assert sources.is_hub_id("Qwen/Qwen2.5-7B-Instruct") and sources.is_hub_id("meta-llama/Llama-3.1-8B")
  for text in ("/abs/path", "./rel/path", "a/b/c", "~/x", "Qwen", "org/name.", "gs://b/x"):
    assert not sources.is_hub_id(text), text
  assert sources.is_url("gs://bucket/x") and sources.is_url("memory://x") and not sources.is_url("/x/y")
