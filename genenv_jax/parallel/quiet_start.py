"""A quiet start on a host without TPU chips: the platforms JAX may start, chosen before it starts any.

With libtpu installed (the test and tpu extras: README, "Quick start"), JAX starts libtpu's TPU platform on every host,
and on a host without chips libtpu prints five lines before a CPU run's first one, among them an error line
(`E0000 ... INVALID_ARGUMENT: Error: unexpected worker hostname ... TPU_WORKER_HOSTNAMES`). `quiet_start()` tells JAX
to skip the TPU platform where no TPU can be meant: no chip on the host (no /dev/accel* or /dev/vfio/N device file,
what libtpu itself looks for), no TPU VM variable (TPU_NAME, TPU_WORKER_HOSTNAMES, ...), and no JAX_PLATFORMS set by
the user. Where a TPU is expected (a chip or a TPU VM variable) nothing changes, so libtpu's own messages say why a
TPU did not start. `genenv_jax.plan` goes further and runs on the CPU alone (it compiles, it never runs: plan.py).

This module imports no JAX: it runs before JAX creates its backends (`cli.run`, before a command's main), when the
platforms can still be chosen.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys

TPU_VARIABLES = ("TPU_NAME", "TPU_WORKER_HOSTNAMES", "TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID", "CLOUD_TPU_TASK_ID")
TPU_DEVICE_FILES = ("/dev/accel*", "/dev/vfio/[0-9]*")  # v2-v5p chips; v5e and v6e chips
GPU_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13")


def tpu_expected(environ=os.environ) -> bool:
  """Whether a TPU may be meant: a chip's device file on this host, or a TPU VM's variable set."""
  return any(environ.get(v) for v in TPU_VARIABLES) or any(glob.glob(pattern) for pattern in TPU_DEVICE_FILES)


def _installed(module: str) -> bool:
  try:
    return importlib.util.find_spec(module) is not None
  except (ImportError, ValueError):
    return False


def platforms_without_tpu() -> str:
  """JAX_PLATFORMS for this host without the TPU: the GPU too where a CUDA plugin and an NVIDIA device are here."""
  gpu = any(_installed(m) for m in GPU_PLUGINS) and bool(glob.glob("/dev/nvidia[0-9]*"))
  return "cuda,cpu" if gpu else "cpu"


def quiet_start(environ=os.environ) -> str | None:
  """Sets JAX_PLATFORMS (and, where JAX is imported but has started no backend, its jax_platforms option) to the
  platforms other than the TPU when no TPU is expected and the user chose none; returns what it set, else None."""
  if "JAX_PLATFORMS" in environ or tpu_expected(environ):
    return None
  if "jax" in sys.modules:
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
      return None
  platforms = environ["JAX_PLATFORMS"] = platforms_without_tpu()
  if "jax" in sys.modules:
    sys.modules["jax"].config.update("jax_platforms", platforms)
  return platforms
