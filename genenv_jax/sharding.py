"""The device mesh, logical-axis rules, and placement helpers.

Every parameter of the model carries logical axis names (e.g. ``("embed", "mlp")``). A rule table maps each logical
name onto zero or more mesh axes of the one global mesh ``(data, fsdp, tensor)``; placement is jax.jit with
NamedSharding in and out. A dimension whose size does not divide the product of its mesh axes is replicated instead,
so any KV-head count works on any tensor size (correct, if not the fastest layout).

Multi-controller JAX runs the same program on every host: `initialize_distributed` is called only when asked, and
`host_local_to_global` forms a global array from each process's own share of a batch.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")

# Logical axis -> mesh axes. Parameters: embeddings and MLP/attention matrices are sharded over `fsdp` along the model
# dimension and over `tensor` along heads/MLP/vocab (Megatron-style column/row split). Activations: the batch is split
# over every data-parallel axis.
DEFAULT_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("batch", ("data", "fsdp")),
    ("vocab", ("tensor",)),
    ("embed", ("fsdp",)),
    ("mlp", ("tensor",)),
    ("q_heads", ("tensor",)),
    ("kv_heads", ("tensor",)),
    ("head_dim", ()),
    ("norm", ()),
    ("length", ()),
)


def make_mesh(shape: Mapping[str, int] | Sequence[int], devices: Sequence[jax.Device] | None = None) -> Mesh:
  """Builds the (data, fsdp, tensor) mesh; one size may be -1, meaning "all the devices the others leave".

  `shape` is a mapping with keys from MESH_AXES (missing axes have size 1) or a sequence of three sizes.
  """
  devices = list(jax.devices() if devices is None else devices)
  if isinstance(shape, Mapping):
    unknown = set(shape) - set(MESH_AXES)
    if unknown:
      raise ValueError(f"unknown mesh axes {sorted(unknown)}; the mesh axes are {MESH_AXES}")
    sizes = [int(shape.get(name, 1)) for name in MESH_AXES]
  else:
    sizes = [int(s) for s in shape]
    if len(sizes) != len(MESH_AXES):
      raise ValueError(f"mesh shape {tuple(sizes)} must give one size per axis {MESH_AXES}")
  if sizes.count(-1) > 1:
    raise ValueError(f"mesh shape {tuple(sizes)}: at most one axis may be -1")
  if any(s == 0 or s < -1 for s in sizes):
    raise ValueError(f"mesh shape {tuple(sizes)}: sizes must be positive, or -1 for the rest")
  known = math.prod(s for s in sizes if s != -1)
  if -1 in sizes:
    if len(devices) % known:
      raise ValueError(f"mesh shape {tuple(sizes)}: {len(devices)} devices do not divide by {known}")
    sizes[sizes.index(-1)] = len(devices) // known
  if math.prod(sizes) != len(devices):
    raise ValueError(f"mesh shape {dict(zip(MESH_AXES, sizes))} needs {math.prod(sizes)} devices, "
                     f"but {len(devices)} are available; use -1 for one axis to take the rest")
  device_grid = np.asarray(devices, dtype=object).reshape(sizes)
  return Mesh(device_grid, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


def logical_to_spec(logical_axes: Sequence[str | None] | None, shape: Sequence[int], mesh: Mesh,
                    rules: Sequence[tuple[str, Sequence[str]]] = DEFAULT_RULES) -> PartitionSpec:
  """Maps logical axis names to a PartitionSpec on `mesh`, replicating dims that the mesh axes do not divide.

  A mesh axis is used at most once per array (the first dimension that claims it wins).
  """
  if logical_axes is None:
    return PartitionSpec()
  if len(logical_axes) != len(shape):
    raise ValueError(f"logical axes {tuple(logical_axes)} do not match an array of shape {tuple(shape)}")
  table = dict(rules)
  used: set[str] = set()
  spec = []
  for name, size in zip(logical_axes, shape):
    if name is not None and name not in table:
      raise ValueError(f"logical axis {name!r} has no sharding rule; known: {sorted(table)}")
    axes = tuple(a for a in (table[name] if name is not None else ()) if mesh.shape.get(a, 1) > 1 and a not in used)
    if axes and size % math.prod(mesh.shape[a] for a in axes) == 0:
      used.update(axes)
      spec.append(axes[0] if len(axes) == 1 else axes)
    else:
      spec.append(None)
  return PartitionSpec(*spec)


def _is_variable(x: Any) -> bool:
  from flax import nnx  # local import: sharding has no other flax dependency
  return isinstance(x, nnx.Variable)


def state_shardings(state: Any, mesh: Mesh, rules: Sequence[tuple[str, Sequence[str]]] = DEFAULT_RULES) -> Any:
  """NamedSharding for every leaf of an nnx State (from each Variable's `logical_axes` metadata), same structure."""

  def one(v):
    if _is_variable(v):
      axes = v.get_metadata().get("logical_axes")
      return v.replace(NamedSharding(mesh, logical_to_spec(axes, v.shape, mesh, rules)))
    return NamedSharding(mesh, PartitionSpec())

  return jax.tree.map(one, state, is_leaf=_is_variable)


def batch_sharding(mesh: Mesh, ndim: int) -> NamedSharding:
  """Rows over every data-parallel axis (data, fsdp), the other dimensions replicated."""
  return NamedSharding(mesh, PartitionSpec(("data", "fsdp"), *([None] * (ndim - 1))))


def constrain(x: jax.Array, logical_axes: Sequence[str | None]) -> jax.Array:
  """with_sharding_constraint by logical names on the mesh in context (`jax.set_mesh`); identity when there is none."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty or not set(MESH_AXES) <= set(mesh.axis_names):
    return x
  return jax.lax.with_sharding_constraint(x, logical_to_spec(logical_axes, x.shape, mesh))


def place(tree: Any, shardings: Any) -> Any:
  """Places (or reshards) a pytree of arrays with a jitted identity, the NamedShardings given as out_shardings."""
  return jax.jit(lambda t: t, out_shardings=shardings)(tree)


def host_local_to_global(local_batch: Any, mesh: Mesh) -> Any:
  """Forms global arrays, batch-sharded over (data, fsdp), from each process's own rows of the batch.

  Each process passes only the rows it loaded (its `process_index` share); on one process this is a plain device_put.
  """
  def one(x):
    x = np.asarray(x)
    sharding = batch_sharding(mesh, x.ndim)
    if jax.process_count() == 1:
      return jax.device_put(x, sharding)
    return jax.make_array_from_process_local_data(sharding, x)

  return jax.tree.map(one, local_batch)


def process_local_rows(global_rows: int) -> slice:
  """The slice of a global batch that this process loads (rows split evenly over processes)."""
  count, index = jax.process_count(), jax.process_index()
  if global_rows % count:
    raise ValueError(f"a global batch of {global_rows} rows does not split over {count} processes")
  per = global_rows // count
  return slice(index * per, (index + 1) * per)


def initialize_distributed(coordinator_address: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None, local_device_ids: Sequence[int] | None = None) -> None:
  """Calls jax.distributed.initialize; only ever called when the config or launch environment asks for it.

  On Cloud TPU all arguments may be None (they are discovered); on CPU pass them explicitly.
  """
  kwargs = {k: v for k, v in dict(coordinator_address=coordinator_address, num_processes=num_processes,
                                  process_id=process_id, local_device_ids=local_device_ids).items() if v is not None}
  jax.distributed.initialize(**kwargs)


def is_main_process() -> bool:
  """True on process 0, the one that writes logs and summaries."""
  return jax.process_index() == 0


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec())

