"""The device mesh, logical-axis rules, and placement helpers.

Every parameter of the model carries logical axis names (e.g. ``("embed", "mlp")``). A rule table maps each logical
name onto zero or more mesh axes of the one global mesh ``(data, fsdp, tensor)``; placement is jax.jit with
NamedSharding in and out. A dimension whose size does not divide the product of its mesh axes is replicated instead,
so any KV-head count works on any tensor size (correct, if not the fastest layout).

Multi-controller JAX runs the same program on every host (one process per host). `maybe_initialize_distributed`
starts JAX's distributed runtime only when the config or the launch environment asks; `process_local_rows` says which
rows of a batch this process loads and `host_local_to_global` forms global arrays from those rows; `global_batch`
does the same for data every process holds in full; `to_host` reads (possibly multi-process) results back.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
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
  ("layers", ()),  # the stacked decoder layers: every device holds its shard of every layer
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
    raise ValueError(
      f"mesh shape {dict(zip(MESH_AXES, sizes))} needs {math.prod(sizes)} devices, "
      f"but {len(devices)} are available; use -1 for one axis to take the rest"
    )
  device_grid = np.asarray(devices, dtype=object).reshape(sizes)
  return Mesh(device_grid, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


def logical_to_spec(
  logical_axes: Sequence[str | None] | None,
  shape: Sequence[int],
  mesh: Mesh,
  rules: Sequence[tuple[str, Sequence[str]]] = DEFAULT_RULES,
) -> PartitionSpec:
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


# Sampling's rules: the same split with `fsdp` dropped from every parameter axis (the batch keeps it). Decoding reads
# every weight once per token; with the weights still split over fsdp, each step (and each layer of the layer scan
# inside it) would all-gather them again, and the TPU compiler does not hoist those gathers out of the decode loop.
SAMPLING_RULES = tuple(
  (name, axes if name == "batch" else tuple(a for a in axes if a != "fsdp")) for name, axes in DEFAULT_RULES
)


def gather_over_fsdp(state: Any) -> Any:
  """An nnx State's Variables constrained to their sharding under SAMPLING_RULES (whole over fsdp, still split over
  tensor), on the mesh in context: one all-gather of the weights before a sampling loop rather than one per step.
  The identity without a mesh, or with an fsdp axis of size 1."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty or not set(MESH_AXES) <= set(mesh.axis_names) or mesh.shape["fsdp"] == 1:
    return state

  def one(v):
    if not _is_variable(v):
      return v
    spec = logical_to_spec(v.get_metadata().get("logical_axes"), v.shape, mesh, SAMPLING_RULES)
    return v.replace(jax.lax.with_sharding_constraint(v[...], spec))

  return jax.tree.map(one, state, is_leaf=_is_variable)


def batch_shards_in_context(*rows: int) -> int:
  """How many shards the batch splits into on the mesh in context (data x fsdp) when every one of `rows` divides by
  that many, else 1 (such batches are replicated: logical_to_spec)."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty or not set(MESH_AXES) <= set(mesh.axis_names):
    return 1
  shards = math.prod(mesh.shape[a] for a in dict(DEFAULT_RULES)["batch"])
  return shards if all(r % shards == 0 for r in rows) else 1


def _per_shard(fn, *arrays: jax.Array, outputs: int = 1):
  """`fn` on each device's own rows (batch over data x fsdp), with no collective: jax.shard_map over the mesh in
  context."""
  rows = PartitionSpec(dict(DEFAULT_RULES)["batch"])
  out_specs = rows if outputs == 1 else (rows,) * outputs
  return jax.shard_map(fn, in_specs=(rows,) * len(arrays), out_specs=out_specs, check_vma=False)(*arrays)


def interleave_rows(a: jax.Array, b: jax.Array, shards: int) -> jax.Array:
  """The rows of `a` and `b` in one batch laid out shard by shard: with `shards` batch shards (batch_shards_in_context),
  shard i holds a's rows of shard i, then b's: [a_0, b_0, a_1, b_1, ...]. Each device joins the rows it already holds
  (a per-shard concatenate, no collective), where a plain concatenate([a, b]) moves half of every shard's rows to
  other devices. With one shard it is that concatenate. `split_rows` undoes it."""
  if shards == 1:
    return jnp.concatenate([a, b])
  return _per_shard(lambda x, y: jnp.concatenate([x, y]), a, b)


def split_rows(x: jax.Array, first: int, shards: int) -> tuple[jax.Array, jax.Array]:
  """(a, b) of x = interleave_rows(a, b, shards), a having `first` rows."""
  if shards == 1:
    return x[:first], x[first:]
  return _per_shard(lambda part: (part[: first // shards], part[first // shards :]), x, outputs=2)


def interleaved_position(position: jax.Array, first: int, total: int, shards: int) -> tuple[jax.Array, jax.Array]:
  """(is it one of a's rows, its row in a or b) for positions in interleave_rows(a, b, shards), a having `first` of
  the `total` rows."""
  per, per_a = total // shards, first // shards
  shard, offset = position // per, position % per
  in_a = offset < per_a
  return in_a, jnp.where(in_a, shard * per_a + offset, shard * (per - per_a) + offset - per_a)


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


def process_local_rows(global_rows: int, mesh: Mesh | None = None) -> slice:
  """The rows of a global batch of `global_rows` that this process loads and holds.

  With a mesh: the rows that this process's devices hold under `batch_sharding(mesh)`. They are contiguous
  whenever each process's devices form a block of the (data, fsdp) grid, which `make_mesh` gives for
  `jax.devices()` order; otherwise a ValueError says so. Without a mesh: an even split over processes in process
  order. On one process this is every row.
  """
  count, index = jax.process_count(), jax.process_index()
  if global_rows % count:
    raise ValueError(
      f"a global batch of {global_rows} rows does not split over {count} processes; "
      "use a batch size that divides by the process count"
    )
  if mesh is None:
    per = global_rows // count
    return slice(index * per, (index + 1) * per)
  if global_rows % _batch_shards(mesh):
    raise ValueError(
      f"a global batch of {global_rows} rows does not split over the {_batch_shards(mesh)} "
      f"(data, fsdp) shards of mesh {dict(mesh.shape)}; use a multiple of that"
    )
  indices = batch_sharding(mesh, 1).addressable_devices_indices_map((global_rows,)).values()
  rows = sorted({(i[0].start or 0, global_rows if i[0].stop is None else i[0].stop) for i in indices})
  for (_, stop), (start, _) in zip(rows, rows[1:]):
    if start != stop:
      raise ValueError(
        f"this process's devices hold non-contiguous rows {rows} of the batch; build the mesh "
        "with make_mesh over jax.devices() so that each process holds one block of rows"
      )
  return slice(rows[0][0], rows[-1][1])


def _batch_shards(mesh: Mesh) -> int:
  return mesh.shape["data"] * mesh.shape["fsdp"]


def host_local_to_global(local_batch: Any, mesh: Mesh, global_rows: int | None = None) -> Any:
  """Forms global arrays, batch-sharded over (data, fsdp), from each process's own rows of the batch.

  Each process passes only the rows it loaded: `process_local_rows(global_rows, mesh)` of the global batch.
  `global_rows` defaults to the local row count times the process count. On one process this is a device_put.
  (`jax.make_array_from_process_local_data` places the local rows on this process's devices.)
  """

  def one(x):
    x = np.asarray(x)
    sharding = batch_sharding(mesh, x.ndim)
    if jax.process_count() == 1:
      if global_rows is not None and x.shape[0] != global_rows:
        raise ValueError(f"one process holds the whole batch: expected {global_rows} rows, got {x.shape[0]}")
      return jax.device_put(x, sharding)
    rows = x.shape[0] * jax.process_count() if global_rows is None else global_rows
    return jax.make_array_from_process_local_data(sharding, x, (rows, *x.shape[1:]))

  return jax.tree.map(one, local_batch)


def global_batch(batch: Any, mesh: Mesh) -> Any:
  """Global arrays from a host batch that every process holds in full (identical on every process).

  Arrays whose rows split over the (data, fsdp) shards are batch-sharded and each process copies only its own rows
  to its devices; others (and scalars) are replicated. Works on one process and on many.
  """

  def one(x):
    x = np.asarray(x)
    if x.ndim and x.shape[0] % _batch_shards(mesh) == 0:
      sharding = batch_sharding(mesh, x.ndim)
    else:
      sharding = replicated(mesh)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

  return jax.tree.map(one, batch)


def to_host(tree: Any, mesh: Mesh) -> Any:
  """Numpy copies of a pytree of (possibly multi-process, sharded) arrays, the same full values on every process.

  Each array is first replicated over `mesh` by one jitted identity (an all-gather across processes), then read
  from a local device; `jax.device_get` alone fails on arrays that span other processes' devices.
  """
  full = jax.jit(lambda t: t, out_shardings=replicated(mesh))(tree)
  return jax.tree.map(lambda x: np.asarray(x.addressable_data(0)), full)


# ---- multi-process start-up ------------------------------------------------------------------------------------------

# The launch environment asks for a multi-process run through these variables (launch/ sets them where the cluster
# is not auto-detected). JAX_COORDINATOR_ADDRESS is also read by jax.distributed.initialize itself.
ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "JAX_PROCESS_ID"


def distributed_args_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
  """{coordinator_address, num_processes, process_id} from the environment; absent variables are left out."""
  environ = os.environ if environ is None else environ
  args: dict[str, Any] = {}
  if environ.get(ENV_COORDINATOR):
    address = environ[ENV_COORDINATOR]
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
      raise ValueError(f"{ENV_COORDINATOR}={address!r} must be HOST:PORT (e.g. 10.0.0.2:8476)")
    args["coordinator_address"] = address
  for name, key in ((ENV_NUM_PROCESSES, "num_processes"), (ENV_PROCESS_ID, "process_id")):
    if environ.get(name, "") != "":
      try:
        args[key] = int(environ[name])
      except ValueError:
        raise ValueError(f"{name}={environ[name]!r} must be an integer") from None
  if "num_processes" in args and args["num_processes"] < 1:
    raise ValueError(f"{ENV_NUM_PROCESSES}={args['num_processes']} must be >= 1")
  if "process_id" in args and not 0 <= args["process_id"] < args.get("num_processes", args["process_id"] + 1):
    raise ValueError(f"{ENV_PROCESS_ID}={args['process_id']} must be in [0, {ENV_NUM_PROCESSES})")
  return args


def distributed_requested(config_flag: bool, environ: Mapping[str, str] | None = None) -> bool:
  """True when the config (`distributed=True`) or the launch environment (JAX_NUM_PROCESSES > 1) asks for it."""
  return bool(config_flag) or distributed_args_from_env(environ).get("num_processes", 1) > 1


def maybe_initialize_distributed(config_flag: bool, environ: Mapping[str, str] | None = None) -> bool:
  """Starts JAX's distributed runtime when asked (see `distributed_requested`); returns whether it runs.

  Must run before anything touches a JAX backend. Explicit JAX_* variables are passed on; anything missing is
  auto-detected by jax (Cloud TPU pods, SLURM, Open MPI, Kubernetes), so on a TPU pod `distributed=True` alone
  suffices. On CPU, cross-process collectives use gloo (`jax_cpu_collectives_implementation`, jax 0.10.2's
  default, set explicitly here). Calling it again once the runtime is up does nothing.
  """
  environ = os.environ if environ is None else environ
  if not distributed_requested(config_flag, environ):
    return False
  if jax.distributed.is_initialized():
    return True
  if environ.get("JAX_PLATFORMS", "").split(",")[0].strip() == "cpu":
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
  initialize_distributed(**distributed_args_from_env(environ))
  return True


def initialize_distributed(
  coordinator_address: str | None = None,
  num_processes: int | None = None,
  process_id: int | None = None,
  local_device_ids: Sequence[int] | None = None,
) -> None:
  """Calls jax.distributed.initialize; only ever called when the config or launch environment asks for it.

  On Cloud TPU all arguments may be None (they are discovered); on CPU pass them explicitly.
  """
  kwargs = {
    k: v
    for k, v in dict(
      coordinator_address=coordinator_address,
      num_processes=num_processes,
      process_id=process_id,
      local_device_ids=local_device_ids,
    ).items()
    if v is not None
  }
  jax.distributed.initialize(**kwargs)


def is_main_process() -> bool:
  """True on process 0, the one that writes logs and summaries."""
  return jax.process_index() == 0


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec())
