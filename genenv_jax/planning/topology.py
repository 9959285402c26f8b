"""Compiling for a Cloud TPU slice on a machine without TPUs: the slice's topology, and libtpu's TPU compiler.

`jax.experimental.topologies.get_topology_desc(platform="tpu", topology_name=...)` gives compile-only devices of a
TPU topology (libtpu, which `pip install "jax[tpu]"` brings, holds the TPU compiler); a mesh of them lowers and
compiles a program for that slice from any host (`JAX_PLATFORMS=cpu` keeps the runtime off real TPUs). MaxText's
train_compile.py uses the same route as its pre-flight check.

Slice names -> topologies (Cloud TPU's documented shapes; v4 and v5p name TensorCores, two per chip, compiled as one
"megacore" device per chip; v5e and v6e name chips):
  v4-N, v5p-N   N/2 chips in a 3-D torus: 4 = 2x2x1, 8 = 2x2x2, 16 = 2x2x4, 32 = 2x4x4, 64 = 4x4x4, 128 = 4x4x8, ...
  v5e-N, v6e-N  N chips in a 2-D torus: 1 = 1x1, 4 = 2x2, 8 = 2x4, 16 = 4x4, 32 = 4x8, 64 = 8x8, 128 = 8x16, ...
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os

from genenv_jax.planning.costs import slice_chips

TORUS_3D = {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8", 256: "4x8x8", 512: "8x8x8"}
TORUS_2D = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}
INSTALL_HINT = 'pip install "jax[tpu]==VERSION" (or pip install -e ".[tpu]")'


@dataclasses.dataclass(frozen=True)
class Topology:
  slice: str  # the Cloud TPU name, e.g. v5p-64
  chip: str  # v4, v5e, v5p or v6e
  chips: int  # = JAX devices
  name: str  # libtpu's topology name, e.g. v5p:2x4x4

  @property
  def options(self) -> dict:
    """Extra get_topology_desc arguments: v4 needs its megacore chip config asked for (else one device per core)."""
    return dict(chip_config_name="megacore", chips_per_host_bounds=(2, 2, 1)) if self.chip == "v4" else {}


def topology(slice_name: str) -> Topology:
  """The TPU topology of a Cloud TPU slice name ('v5p-64' -> v5p:2x4x4, 32 chips), or a ValueError naming the sizes
  that have one."""
  chip, chips = slice_chips(slice_name)
  shapes = TORUS_3D if chip in ("v4", "v5p") else TORUS_2D
  if chips not in shapes:
    per = 2 if chip in ("v4", "v5p") else 1
    known = ", ".join(f"{chip}-{n * per}" for n in shapes)
    raise ValueError(
      f"no known topology for the TPU slice {slice_name!r} ({chips} chips); known {chip} slices: {known}"
    )
  return Topology(str(slice_name).strip().lower(), chip, chips, f"{chip}:{shapes[chips]}")


def libtpu_problem() -> str | None:
  """None where libtpu is installed at the version the installed jax pins, else what is wrong and how to fix it."""
  import packaging.requirements

  jax_version = importlib.metadata.version("jax")
  hint = INSTALL_HINT.replace("VERSION", jax_version)
  pins = [
    packaging.requirements.Requirement(r.split(";")[0])
    for r in importlib.metadata.requires("jax") or []
    if r.replace(" ", "").startswith("libtpu") and "tpu" in r.split(";")[-1]
  ]
  try:
    installed = importlib.metadata.version("libtpu")
  except importlib.metadata.PackageNotFoundError:
    return f"libtpu (the TPU compiler) is not installed: {hint}"
  for pin in pins:
    if installed not in pin.specifier:
      return f"libtpu {installed} does not match jax {jax_version}, which needs {pin}: {hint}"
  return None


def prepare_libtpu(top: Topology) -> None:
  """Environment for a compile-only libtpu, set before it loads (a value the user set wins): the accelerator type
  and a worker hostname, which a TPU VM's metadata server would give and whose absence makes libtpu print host
  discovery warnings; no metadata query; and several processes may load libtpu at once (its lockfile guards real
  chips, and compile-only devices own none: two test workers, or plan beside a test)."""
  accelerator = top.slice.replace("v5e-", "v5litepod-")
  for key, value in (
    ("TPU_ACCELERATOR_TYPE", accelerator),
    ("TPU_WORKER_HOSTNAMES", "localhost"),
    ("TPU_SKIP_MDS_QUERY", "1"),
    ("ALLOW_MULTIPLE_LIBTPU_LOAD", "1"),
  ):
    os.environ.setdefault(key, value)


def tpu_devices(top: Topology) -> list:
  """The compile-only devices of `top`, one per chip. Raises RuntimeError (what to install) without libtpu."""
  problem = libtpu_problem()
  if problem:
    raise RuntimeError(problem)
  prepare_libtpu(top)
  from jax.experimental import topologies

  devices = topologies.get_topology_desc(platform="tpu", topology_name=top.name, **top.options).devices
  if len(devices) != top.chips:
    raise RuntimeError(f"libtpu gave {len(devices)} devices for {top.name}, expected {top.chips} (one per chip)")
  return list(devices)
