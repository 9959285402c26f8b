"""The platform a program is compiled for, which is not always the platform this process runs on.

A program lowered for a mesh of TPU devices from `jax.experimental.topologies` (ahead-of-time compilation, as
`genenv_jax.plan` does on a CPU machine) must make TPU choices (splash through Mosaic, not the Pallas interpreter)
although `jax.default_backend()` says "cpu". So every choice keyed on the backend reads `target_platform()`: the
platform of the devices of the mesh in context (`jax.set_mesh`), and jax's default backend only where no mesh with
devices is set.
"""

from __future__ import annotations

import jax

# PJRT platform names of one kind of accelerator, as the choices here name it.
_ALIASES = {"cuda": "gpu", "rocm": "gpu"}


def target_platform() -> str:
  """'tpu', 'gpu' or 'cpu': the platform of the current mesh's devices, else `jax.default_backend()`."""
  mesh = jax.sharding.get_abstract_mesh()
  device = None if mesh.empty else getattr(mesh, "abstract_device", None)
  platform = getattr(device, "platform", None) or jax.default_backend()
  return _ALIASES.get(platform, platform)
