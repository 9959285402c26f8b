"""Test setup: 8 fake CPU devices, so sharded code paths run for real; XLA:CPU's cheap compile pipeline; and a
persistent compilation cache (all set before jax is imported)."""

import os
import tempfile

from genenv_jax.parallel import cpu_pipeline  # imports no jax

# XLA:CPU's cheapest pipeline: the tests' tiny programs compile in about a third of the default's time (most of the
# suite's time is compiling), and run slower, which they barely notice. Numerics differ in the last bits from the
# default pipeline's: the step's reference digests (test_first_step_unchanged) are taken under these flags.
FAST_COMPILE_FLAGS = cpu_pipeline.as_xla_flags(cpu_pipeline.CHEAPEST)
os.environ["XLA_FLAGS"] = " ".join(
  [os.environ.get("XLA_FLAGS", ""), "--xla_force_host_platform_device_count=8", FAST_COMPILE_FLAGS]
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# JAX's persistent compilation cache, shared by the test session, its subprocesses and pytest-xdist workers: many tests
# compile the same tiny model and step, and a cache hit skips XLA's compile (2-7 s each on this machine).
os.environ.setdefault(
  "JAX_COMPILATION_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"genenv_jax_test_cache_{os.getuid()}")
)
# Every executable, however quick to compile: a co-evolution run builds about 20 programs of 0.1 s each, 2 s of every
# tiny training run that a cache hit saves.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

import json  # noqa: E402
import pathlib  # noqa: E402

import pytest  # noqa: E402

PROJECT_ROOT = pathlib.Path(__file__).resolve().parents[1]
# The benchmark data the tests read: $GENENV_DATA when set, else the copy beside the project in ../shared/data. The
# product resolves its data directory through GENENV_DATA too (genenv_jax.data.location), so both see the same copy.
SHARED_DATA = pathlib.Path(os.environ.get("GENENV_DATA") or PROJECT_ROOT.parent / "shared" / "data")
os.environ["GENENV_DATA"] = str(SHARED_DATA)


def json_result(printed: str) -> dict:
  """A benchmark's figures: the one `JSON: {...}` line of its output (genenv_jax.bench.*), read back."""
  [line] = [x for x in printed.splitlines() if x.startswith("JSON: ")]
  return json.loads(line[len("JSON: ") :])


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
  """The real benchmark data; tests that need it skip with a clear reason when it is absent."""
  if not SHARED_DATA.is_dir():
    pytest.skip(
      f"benchmark data not found at {SHARED_DATA}; set GENENV_DATA, or fetch it there with: "
      f"python -m genenv_jax.data fetch --data_dir {SHARED_DATA}"
    )
  return SHARED_DATA
