"""Test setup: 8 fake CPU devices, so sharded code paths run for real, and a persistent compilation cache (both set
before jax is imported)."""

import os
import tempfile

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# JAX's persistent compilation cache, shared by the test session, its subprocesses and pytest-xdist workers: many tests
# compile the same tiny model and step, and a cache hit skips XLA's compile (2-7 s each on this machine).
os.environ.setdefault(
  "JAX_COMPILATION_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"genenv_jax_test_cache_{os.getuid()}")
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")

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
