"""Streaming safetensors reading (memory-mapped, one tensor at a time) and sharded writing, numpy only.

The format (huggingface/safetensors docs): an 8-byte little-endian header size N, then N bytes of JSON mapping each
tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the end of the header), plus an
optional "__metadata__" dict of strings; then the raw little-endian tensor bytes. bfloat16 maps to ml_dtypes.bfloat16,
so no framework is needed and tensors are read lazily from the page cache. Reading also takes a URL (gs://, s3://,
memory://): the header once, then one byte-range read per tensor. Writing is local.
"""

from __future__ import annotations

import json
import os
import pathlib
import struct
from typing import Iterator, Mapping

import ml_dtypes
import numpy as np

from genenv_jax.models import sources

_DTYPES = {
  "F64": np.dtype(np.float64),
  "F32": np.dtype(np.float32),
  "F16": np.dtype(np.float16),
  "BF16": np.dtype(ml_dtypes.bfloat16),
  "I64": np.dtype(np.int64),
  "I32": np.dtype(np.int32),
  "I16": np.dtype(np.int16),
  "I8": np.dtype(np.int8),
  "U8": np.dtype(np.uint8),
  "BOOL": np.dtype(np.bool_),
}
_NAMES = {v: k for k, v in _DTYPES.items()}

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


class SafetensorsFile:
  """A safetensors file; `get(name)` returns one tensor as a read-only numpy array.

  A local file is memory-mapped (`get` returns a view, without copying); a URL (gs://, memory://, see
  `genenv_jax.models.sources`) is read through fsspec, the header once and then each tensor by one byte-range read,
  so a process holds one tensor at a time, not the file.
  """

  def __init__(self, path: str | os.PathLike):
    remote = sources.is_url(path)
    self.path = os.fspath(path) if remote else pathlib.Path(path)
    if remote:
      fs, root = sources.filesystem(self.path)
      file_bytes = int(fs.size(root))
      self._read = lambda offset, n: fs.cat_file(root, start=offset, end=offset + n)
    else:
      file_bytes = os.path.getsize(self.path)
      self._read = lambda offset, n: _read_local(self.path, offset, n)
    raw = self._read(0, 8)
    if len(raw) != 8:
      raise ValueError(f"{self.path} is not a safetensors file (shorter than its 8-byte header size)")
    (size,) = struct.unpack("<Q", raw)
    if 8 + size > file_bytes:
      raise ValueError(
        f"{self.path}: the safetensors header claims {size} bytes but the file has only {file_bytes - 8} after its "
        "size field (a truncated or corrupt file: copy or export it again)"
      )
    try:
      header = json.loads(self._read(8, size))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
      raise ValueError(f"{self.path} has a corrupt safetensors header: {e}") from None
    if not isinstance(header, dict):
      raise ValueError(f"{self.path} has a corrupt safetensors header: a JSON {type(header).__name__}, not an object")
    self.metadata = header.pop("__metadata__", {}) or {}
    self.header = header
    self._data_start = 8 + size
    for name in header:
      self._check_extent(name, file_bytes)
    self._map = np.memmap(self.path, dtype=np.uint8, mode="r") if file_bytes > 0 and not remote else None

  def _check_extent(self, name: str, file_bytes: int) -> None:
    """The tensor's entry is well formed, its byte range matches its dtype and shape, and the file holds it all."""
    info = self.header[name]
    try:
      begin, end = (int(x) for x in info["data_offsets"])
      shape = [int(d) for d in info["shape"]]
      dtype = info["dtype"]
    except (KeyError, TypeError, ValueError):
      raise ValueError(f"{self.path}: tensor {name!r} has a malformed header entry {info!r}") from None
    if dtype not in _DTYPES:
      return  # reported when read (`get`): a file may hold tensors we never ask for
    expected = int(np.prod(shape, dtype=np.int64)) * _DTYPES[dtype].itemsize
    if end - begin != expected:
      raise ValueError(
        f"{self.path}: tensor {name!r} ({dtype} {shape}) needs {expected} bytes but its header gives "
        f"{end - begin} (offsets {begin}..{end}): a corrupt file, copy or export it again"
      )
    available = max(0, file_bytes - self._data_start - begin)
    if self._data_start + end > file_bytes:
      raise ValueError(
        f"{self.path}: tensor {name!r} ({dtype} {shape}) needs {expected} bytes but the file holds only "
        f"{min(available, expected)} of them ({file_bytes} bytes in all): a truncated file, copy or export it again"
      )

  def keys(self) -> list[str]:
    return list(self.header)

  def shape(self, name: str) -> tuple[int, ...]:
    return tuple(self.header[name]["shape"])

  def get(self, name: str) -> np.ndarray:
    info = self.header[name]
    if info["dtype"] not in _DTYPES:
      raise ValueError(f"{self.path}: tensor {name!r} has unsupported dtype {info['dtype']}")
    begin, end = info["data_offsets"]
    dtype = _DTYPES[info["dtype"]]
    if self._map is not None:
      raw = self._map[self._data_start + begin : self._data_start + end]
    else:
      raw = np.frombuffer(self._read(self._data_start + begin, end - begin), dtype=np.uint8)
    return raw.view(dtype).reshape(info["shape"])


def _read_local(path: pathlib.Path, offset: int, n: int) -> bytes:
  with open(path, "rb") as f:
    f.seek(offset)
    return f.read(n)


def open_checkpoint(directory: str | os.PathLike) -> dict[str, SafetensorsFile]:
  """Tensor name -> the file holding it, from `model.safetensors.index.json` or every `*.safetensors` in the dir.

  `directory` is a local path or a URL (gs://, memory://; `genenv_jax.models.sources`)."""
  remote = sources.is_url(directory)
  text = os.fspath(directory).rstrip("/")
  if remote:
    fs, root = sources.filesystem(text)
    join = lambda name: f"{text}/{name}"  # noqa: E731
    exists = lambda name: fs.exists(f"{root}/{name}")  # noqa: E731
    read_text = lambda name: fs.cat_file(f"{root}/{name}").decode("utf-8")  # noqa: E731
    listing = sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.glob(f"{root}/*.safetensors"))
  else:
    path = pathlib.Path(directory)
    join = lambda name: path / name  # noqa: E731
    exists = lambda name: (path / name).exists()  # noqa: E731
    read_text = lambda name: (path / name).read_text()  # noqa: E731
    listing = sorted(p.name for p in path.glob("*.safetensors"))
  index_path = join(INDEX_FILE)
  if exists(INDEX_FILE):
    try:
      weight_map = json.loads(read_text(INDEX_FILE))["weight_map"]
    except (json.JSONDecodeError, KeyError) as e:
      raise ValueError(f"{index_path} is not a valid safetensors index (needs a 'weight_map'): {e}") from None
    files = set(weight_map.values())
    missing = [str(join(name)) for name in sorted(files) if not exists(name)]
    if missing:
      raise FileNotFoundError(f"{index_path} names shard files that are missing: {missing}")
    opened = {name: SafetensorsFile(join(name)) for name in files}
    return {tensor: opened[file] for tensor, file in weight_map.items()}
  if not listing:
    raise FileNotFoundError(
      f"no *.safetensors weights in {directory}; save the model with safetensors "
      "(transformers' save_pretrained does by default)"
    )
  table: dict[str, SafetensorsFile] = {}
  for name in listing:
    f = SafetensorsFile(join(name))
    for tensor in f.keys():
      table[tensor] = f
  return table


def _write_file(path: pathlib.Path, tensors: Mapping[str, np.ndarray]) -> None:
  header, offset = {}, 0
  for name, array in tensors.items():
    if array.dtype not in _NAMES:
      raise ValueError(f"tensor {name!r} has dtype {array.dtype}, which safetensors cannot store")
    header[name] = {
      "dtype": _NAMES[array.dtype],
      "shape": list(array.shape),
      "data_offsets": [offset, offset + array.nbytes],
    }
    offset += array.nbytes
  header["__metadata__"] = {"format": "pt"}
  blob = json.dumps(header, separators=(",", ":")).encode()
  blob += b" " * (-len(blob) % 8)  # the spec recommends 8-byte alignment of the data
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(blob)))
    f.write(blob)
    for array in tensors.values():
      f.write(np.ascontiguousarray(array).tobytes())


def write_checkpoint(
  directory: str | os.PathLike, tensors: Iterator[tuple[str, np.ndarray]], max_shard_bytes: int = 5 * 2**30
) -> list[str]:
  """Writes tensors (streamed from an iterator) into shards of at most max_shard_bytes, plus an index when sharded.

  Returns the file names written. One shard is named `model.safetensors`, as transformers expects.
  """
  directory = pathlib.Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  shards: list[list[str]] = []
  current: dict[str, np.ndarray] = {}
  current_bytes, total_bytes, weight_map, written = 0, 0, {}, []

  def flush():
    nonlocal current, current_bytes
    if current:
      tmp_name = f"shard-{len(written):05d}.tmp"
      _write_file(directory / tmp_name, current)
      written.append(tmp_name)
      shards.append(list(current))
    current, current_bytes = {}, 0

  for name, array in tensors:
    if current and current_bytes + array.nbytes > max_shard_bytes:
      flush()
    current[name] = array
    current_bytes += array.nbytes
    total_bytes += array.nbytes
  flush()

  if len(written) == 1:
    os.replace(directory / written[0], directory / SINGLE_FILE)
    _remove_stale(directory, [SINGLE_FILE])
    return [SINGLE_FILE]
  names = []
  for i, (tmp_name, shard_tensors) in enumerate(zip(written, shards)):
    final = f"model-{i + 1:05d}-of-{len(written):05d}.safetensors"
    os.replace(directory / tmp_name, directory / final)
    names.append(final)
    weight_map.update({t: final for t in shard_tensors})
  index = {"metadata": {"total_size": total_bytes}, "weight_map": weight_map}
  (directory / INDEX_FILE).write_text(json.dumps(index, indent=2))
  _remove_stale(directory, names + [INDEX_FILE])
  return names


def _remove_stale(directory: pathlib.Path, keep: list[str]) -> None:
  """Deletes weight files of an earlier checkpoint in `directory` (other shards, an index that would shadow a single
  file), so the directory holds exactly the checkpoint just written."""
  for path in [*directory.glob("*.safetensors"), directory / INDEX_FILE]:
    if path.name not in keep and path.exists():
      path.unlink()
