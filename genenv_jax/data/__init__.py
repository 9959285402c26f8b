"""The benchmark data: where it lives (`location`), what it must hold (`manifest`, `manifest.json`), and how it
gets there (`fetch`; the CLI is `python -m genenv_jax.data`)."""

from genenv_jax.data.errors import DataMissingError, FetchError
from genenv_jax.data.location import ENV_VAR, default_data_dir, resolve_data_dir
from genenv_jax.data.manifest import load_manifest, require

__all__ = [
  "ENV_VAR",
  "DataMissingError",
  "FetchError",
  "default_data_dir",
  "load_manifest",
  "require",
  "resolve_data_dir",
]
