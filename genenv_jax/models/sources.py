"""Where a checkpoint or tokenizer lives: a local directory, a Hugging Face hub id, or an fsspec URL.

`hf_path` and `tokenizer` name one of:
  * a local directory, or a local `.gguf` file (llama.cpp's format, `genenv_jax.models.gguf`: weights and tokenizer
    in one file), or for a tokenizer a sentencepiece `.model` file: used as it is;
  * a URL with a scheme (`gs://bucket/Qwen2.5-7B-Instruct`, `s3://...`, `memory://...`): read through fsspec. Model
    weights are streamed from it one tensor at a time by byte-range reads (`safetensors_io`), so nothing is copied to
    local disk first; a tokenizer's few small files are copied to a local directory, since transformers reads local
    files only. Each scheme needs its fsspec backend installed: `gcsfs` for gs://, `s3fs` for s3://;
  * a hub id, `ORG/NAME` (`Qwen/Qwen2.5-7B-Instruct`), that is not a local path: resolved by
    `huggingface_hub.snapshot_download` into the hub cache (HF_HUB_CACHE, default ~/.cache/huggingface/hub). It
    downloads where a network allows and, with HF_HUB_OFFLINE=1, reads a filled cache without any network access.
A name that is none of these raises FileNotFoundError naming each place that was tried.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Sequence

# What a model load reads, and what a tokenizer load reads (tokenizer.json, tokenizer_config.json,
# special_tokens_map.json, a sentencepiece or tiktoken file, a chat template, generation_config.json's eos ids).
MODEL_FILES = ("config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json")
TOKENIZER_FILES = (
  "tokenizer*",
  "special_tokens_map.json",
  "added_tokens.json",
  "vocab*",
  "merges.txt",
  "chat_template*",
  "*.model",
  "*.tiktoken",
  "config.json",
  "generation_config.json",
)
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def is_url(path: str | os.PathLike) -> bool:
  """True for `scheme://...` (gs://, s3://, memory://, file://): read through fsspec."""
  return re.match(r"^[A-Za-z][\w+.-]*://", os.fspath(path)) is not None


def is_hub_id(text: str) -> bool:
  """`ORG/NAME` with hub-legal characters: exactly one slash, no leading '.', '/' or '~'."""
  return _HUB_ID.fullmatch(text) is not None and not text.endswith((".", "-"))


def filesystem(url: str):
  """(fsspec filesystem, path within it) for `url`; a scheme whose backend is not installed gets a clear error."""
  import fsspec  # pylint: disable=import-outside-toplevel

  try:
    return fsspec.core.url_to_fs(url)
  except (ImportError, ValueError) as e:
    scheme = url.split("://", 1)[0]
    package = {"gs": "gcsfs", "gcs": "gcsfs", "s3": "s3fs", "az": "adlfs", "abfs": "adlfs"}.get(scheme)
    hint = f"pip install {package}" if package else f"install the fsspec backend for {scheme}://"
    raise ValueError(f"cannot read {url}: {e} ({hint})") from None


def _from_hub(repo_id: str, files: Sequence[str]) -> tuple[str | None, str]:
  """(snapshot directory, '') or (None, why the hub cache and the hub did not give it)."""
  try:
    import huggingface_hub  # pylint: disable=import-outside-toplevel
  except ImportError:
    return None, "huggingface_hub is not installed (pip install huggingface_hub)"
  try:
    return huggingface_hub.snapshot_download(repo_id=repo_id, allow_patterns=list(files)), ""
  except Exception as e:  # pylint: disable=broad-except  (offline, not found, gated, no network: all say "not here")
    cache = huggingface_hub.constants.HF_HUB_CACHE
    offline = " (HF_HUB_OFFLINE is set: the cache only)" if huggingface_hub.constants.HF_HUB_OFFLINE else ""
    reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return None, f"not in the hub cache {cache}{offline} and not downloaded: {type(e).__name__}: {reason}"


def resolve(source: str | os.PathLike, what: str, files: Sequence[str] = MODEL_FILES) -> str:
  """A local path or a URL that holds `source` (see the module docstring); `what` names the setting in errors.

  A local path is returned absolute and a URL as given, after checking it exists; a hub id becomes its snapshot
  directory in the hub cache, holding the files that match `files`.
  """
  text = os.fspath(source)
  if not text:
    raise ValueError(f"{what} is empty: give a local directory, a hub id (ORG/NAME) or a URL (gs://...)")
  if is_url(text):
    fs, root = filesystem(text)
    if not fs.exists(root):
      raise FileNotFoundError(f"{what} {text} does not exist (looked up through fsspec's {type(fs).__name__})")
    return text
  local = os.path.abspath(os.path.expanduser(text))
  if os.path.exists(local):
    return local
  if text.lower().endswith(".gguf"):  # a model file, never a hub id
    raise FileNotFoundError(
      f"{what} {text!r} does not exist (the local path {local}); a model file of the data manifest is fetched with "
      "`python -m genenv_jax.data fetch NAME` (SmolLM2-135M-Instruct: `fetch smollm2`, into <data dir>/smollm2/)"
    )
  if not is_hub_id(text):
    raise FileNotFoundError(
      f"{what} {text!r} does not exist: tried the local path {local}; it is not a hub id (ORG/NAME) either"
    )
  snapshot, why = _from_hub(text, files)
  if snapshot is None:
    raise FileNotFoundError(f"{what} {text!r} not found: tried the local path {local}, and the hub id {text}: {why}")
  return snapshot


def local_copy(url: str, files: Sequence[str] = TOKENIZER_FILES) -> str:
  """Copies the files of the directory `url` that match `files` (top level only) to a new local temporary directory
  and returns it (a file `url` is copied alone, and its local path returned): for readers that open local files only
  (transformers' tokenizers, sentencepiece)."""
  import fnmatch  # pylint: disable=import-outside-toplevel

  fs, root = filesystem(url)
  target = tempfile.mkdtemp(prefix="genenv_jax-copy-")
  if fs.isfile(root):  # one file (a sentencepiece .model)
    name = root.rstrip("/").rsplit("/", 1)[-1]
    fs.get_file(root, os.path.join(target, name))
    return os.path.join(target, name)
  for path in fs.ls(root, detail=False):
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if any(fnmatch.fnmatch(name, pattern) for pattern in files) and fs.isfile(path):
      fs.get_file(path, os.path.join(target, name))
  return target
