"""The errors of the data package: missing or corrupt data (a user fixes it with a command) and a failed fetch."""

from __future__ import annotations


class DataMissingError(FileNotFoundError):
  """Benchmark data that is absent or fails its checksum; the message names the dataset, the file and the fix.

  A FileNotFoundError, so callers that already report missing files report this one the same way; the CLIs
  (`evaluate`, `main`, `plan`) print it as one `error:` line and exit with status 2.
  """


class FetchError(RuntimeError):
  """A fetch or import that could not complete: unreachable source, or a file whose sha256 is not the manifest's."""
