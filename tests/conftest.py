"""Test setup: 8 fake CPU devices, so sharded code paths run for real (set before jax is imported)."""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pathlib  # noqa: E402

import pytest  # noqa: E402

PROJECT_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
  """The real benchmark data in ../shared/data; tests that need it skip with a clear reason when it is absent."""
  if not SHARED_DATA.is_dir():
    pytest.skip(f"benchmark data not found at {SHARED_DATA}; it lives beside the project in ../shared/data")
  return SHARED_DATA
