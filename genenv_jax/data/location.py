"""Where the benchmark data lives: the one resolver every entry point uses.

Order: an explicit directory (`--data_dir`, or `config.domain.data_dir`), then the `GENENV_DATA` environment
variable, then the per-user cache `$XDG_CACHE_HOME/genenv_jax/data` (`~/.cache/genenv_jax/data` when XDG_CACHE_HOME is
unset). `python -m genenv_jax.data fetch` fills that same directory. The layout is one folder per dataset
(`api_bank/`, `bfcl/`, ...; `manifest.json` lists every file).
"""

from __future__ import annotations

import os
import pathlib

ENV_VAR = "GENENV_DATA"


def default_data_dir() -> pathlib.Path:
  """The per-user cache directory: `$XDG_CACHE_HOME/genenv_jax/data`, else `~/.cache/genenv_jax/data`."""
  cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return pathlib.Path(cache) / "genenv_jax" / "data"


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> pathlib.Path:
  """`data_dir` when given (non-empty), else `$GENENV_DATA`, else `default_data_dir()`; the path need not exist yet
  (`manifest.require` reports missing data with the command that fetches it)."""
  if data_dir:
    return pathlib.Path(data_dir).expanduser()
  env = os.environ.get(ENV_VAR)
  if env:
    return pathlib.Path(env).expanduser()
  return default_data_dir()
