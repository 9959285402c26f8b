"""CLI: fetch, check and pin the benchmark data.

  python -m genenv_jax.data fetch [NAME ...] [--data_dir DIR] [--from DIR] [--mirror URL]
  python -m genenv_jax.data list [NAME ...] [--data_dir DIR]
  python -m genenv_jax.data manifest --from DIR [--output FILE]

NAME is a dataset of genenv_jax/data/manifest.json (api_bank, tool_calling_seed, bamboogle, bfcl, alfworld,
travelplanner); none means all. The data directory is `--data_dir`, else $GENENV_DATA, else
~/.cache/genenv_jax/data (`genenv_jax.data.location`).

fetch     downloads each file from its pinned source (a GitHub commit, or the bfcl-eval wheel on PyPI) and checks its
          sha256; with --from DIR it copies from a local copy laid out like a data directory instead, with the same
          checks. Files already present and intact are kept, so a rerun resumes an interrupted fetch; files that fail
          the check go to <data dir>/.quarantine/. Exit status 1 when any file failed.
list      shows, per dataset, how many files are present, missing or corrupt.
manifest  (maintainers) records the sha256 and size of every file in the copy at --from into the manifest (--output,
          default the package's manifest.json), after a source pin has changed.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys

from absl import app, flags

from genenv_jax.data import fetch as fetching
from genenv_jax.data.errors import FetchError
from genenv_jax.data.location import ENV_VAR, resolve_data_dir
from genenv_jax.data.manifest import (
  CORRUPT,
  MANIFEST_PATH,
  MISSING,
  Manifest,
  dataset_status,
  dump_manifest,
  load_manifest,
  sha256_file,
)

_DATA_DIR = flags.DEFINE_string(
  "data_dir", None, f"The data directory (default: ${ENV_VAR}, else ~/.cache/genenv_jax/data)."
)
_FROM = flags.DEFINE_string(
  "from", None, "fetch: copy from this local copy instead of downloading; manifest: the copy whose files to record."
)
_MIRROR = flags.DEFINE_string(
  "mirror",
  None,
  "fetch: download from this base URL (file:// or http(s)://) instead "
  "of GitHub and PyPI, laid out as <URL>/<owner>/<repo>/<commit>/<path> and "
  "<URL>/pypi/<wheel file>.",
)
_OUTPUT = flags.DEFINE_string("output", None, "manifest: where to write the manifest (default: the package's own).")

COMMANDS = ("fetch", "list", "manifest")


def list_datasets(manifest: Manifest, names: list[str], data_dir: pathlib.Path) -> list[str]:
  """One line per dataset: its name, title and how many of its files are present, missing or corrupt."""
  lines = [f"data directory: {data_dir}"]
  for d in manifest.select(names):
    status = dataset_status(data_dir, d)
    missing = [p for p, s in status.items() if s == MISSING]
    corrupt = [p for p, s in status.items() if s == CORRUPT]
    n = len(status)
    state = "corrupt" if corrupt else "missing" if missing else "present"
    line = f"{d.name:<18} {d.title:<34} {state:<8} {n - len(missing) - len(corrupt)}/{n} files intact"
    if missing:
      line += f", {len(missing)} missing (e.g. {missing[0]})"
    if corrupt:
      line += f", {len(corrupt)} corrupt: {', '.join(corrupt[:3])}" + (" ..." if len(corrupt) > 3 else "")
    lines.append(line)
  return lines


def record_digests(manifest: Manifest, copy: pathlib.Path) -> Manifest:
  """The manifest with every file's sha256 and size taken from `copy` (an accepted variant stays as it is)."""
  datasets = {}
  for name, d in manifest.datasets.items():
    files = []
    for f in d.files:
      path = copy / f.relpath
      if not path.is_file():
        raise FetchError(f"{path} not found; the copy must hold every file of the manifest")
      digest = sha256_file(path)
      if not f.accepts(digest):
        f = dataclasses.replace(f, sha256=digest, size=path.stat().st_size, accept=(), note="")
      files.append(f)
    datasets[name] = dataclasses.replace(d, files=tuple(files))
  return dataclasses.replace(manifest, datasets=datasets)


def run(command: str, names: list[str]) -> int:
  """Runs one command; returns the exit status."""
  manifest = load_manifest()
  manifest.select(names)  # unknown names fail before anything is written
  data_dir = resolve_data_dir(_DATA_DIR.value)
  if command == "list":
    print("\n".join(list_datasets(manifest, names, data_dir)))
    return 0
  if command == "manifest":
    if not _FROM.value:
      raise ValueError("manifest needs --from DIR, the copy whose digests to record")
    out = pathlib.Path(_OUTPUT.value or MANIFEST_PATH)
    out.write_text(dump_manifest(record_digests(manifest, pathlib.Path(_FROM.value))), encoding="utf-8")
    print(f"manifest: {out}")
    return 0
  if _FROM.value:
    report = fetching.import_from(pathlib.Path(_FROM.value), names, data_dir)
  else:
    report = fetching.fetch(names, data_dir, mirror=_MIRROR.value)
  for relpath, why in report.failed:
    print(f"error: {relpath}: {why}", file=sys.stderr)
  return 1 if report.failed else 0


def main(argv: list[str]) -> None:
  if len(argv) < 2 or argv[1] not in COMMANDS:
    raise app.UsageError(f"give a command: {' | '.join(COMMANDS)} (then dataset names, optional)")
  try:
    status = run(argv[1], argv[2:])
  except (ValueError, FetchError) as e:
    print(f"error: {e}", file=sys.stderr)
    status = 2
  sys.exit(status)


if __name__ == "__main__":
  app.run(main)
