"""The host-Python bridge: call a numpy function on the host from inside a jitted (and sharded) program.

Rule (docs/DESIGN.md, "Architecture: how data flows"): a host verifier is entered through `jax.pure_callback` inside
`jax.shard_map`, with the batch dimension split over EVERY mesh axis for that call, so each device (and so each host
of a pod) decodes and scores only its own rows. Splitting over (data, fsdp) alone would hand the same rows to each
tensor-parallel replica and score them twice. pure_callback needs every mesh axis manual inside shard_map anyway
(jax/_src/callback.py, `_callback_op_sharding`).

Caveat, seen with jax 0.10.2: a process that exits while callbacks are still in flight aborts. Block on every result
that depends on a callback before exiting (or before tearing the mesh down): `wait_for_host_callbacks(result)`.

`fn` must be pure and deterministic: JAX may call it more than once, or not at all when its result is unused.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AbstractMesh, Mesh, PartitionSpec

Shape = jax.ShapeDtypeStruct


def _as_struct(x: Any) -> Shape:
  return Shape(tuple(x.shape), np.dtype(x.dtype))


def _checked(fn: Callable[..., Any], out_structs: Any, where: str) -> Callable[..., Any]:
  """`fn` on numpy inputs, its outputs checked against `out_structs` (structure, shape) and cast to their dtypes."""
  out_leaves, out_tree = jax.tree.flatten(out_structs)

  def call(*arrays: Any) -> Any:
    result = fn(*(np.asarray(a) for a in arrays))
    leaves, tree = jax.tree.flatten(result)
    if tree != out_tree:
      raise ValueError(
        f"host function {getattr(fn, '__name__', fn)!r} ({where}) returned structure {tree}, expected {out_tree}"
      )
    fixed = []
    for got, want in zip(leaves, out_leaves):
      got = np.asarray(got)
      if tuple(got.shape) != tuple(want.shape):
        raise ValueError(
          f"host function {getattr(fn, '__name__', fn)!r} ({where}) returned shape "
          f"{tuple(got.shape)}, expected {tuple(want.shape)}"
        )
      fixed.append(np.ascontiguousarray(got.astype(want.dtype, copy=False)))
    return jax.tree.unflatten(out_tree, fixed)

  return call


def _context_mesh() -> AbstractMesh | None:
  mesh = jax.sharding.get_abstract_mesh()
  return None if mesh.empty else mesh


def host_map(
  fn: Callable[..., Any],
  out_like: Any,
  *arrays: jax.Array,
  mesh: Mesh | AbstractMesh | None = None,
  vmap_method: str = "sequential",
) -> Any:
  """Calls `fn(*numpy_arrays) -> pytree of numpy arrays` on the host, row-parallel over the mesh; jittable.

  Every array in `arrays` and every leaf of `out_like` (a pytree of ShapeDtypeStruct or arrays giving the GLOBAL
  shapes and dtypes) has the batch as its leading dimension. `fn` maps rows to rows: it sees a block of rows of each
  input and returns the same block of rows of each output; results are cast to the `out_like` dtypes.

  With a mesh (`mesh`, else the one set by `jax.set_mesh`, if any) the call is `jax.shard_map` with the batch split
  over all mesh axes, P(axis_names) in and out, so each device calls `fn` once with only its own B / n_devices rows.
  A batch that does not divide by the device count is padded with rows of zeros up to the next multiple (their
  results are dropped): `fn` must accept such rows (an all-zero mask, an invalid task).
  Without a mesh it is one plain `jax.pure_callback` on the whole batch. `vmap_method` is pure_callback's rule
  under jax.vmap ("sequential": one call per mapped element, always correct since `fn` sees its usual shapes).
  """
  out_structs = jax.tree.map(_as_struct, out_like)
  leaves = jax.tree.leaves(out_structs) + [_as_struct(a) for a in arrays]
  if not leaves:
    raise ValueError("host_map needs at least one input array or output")
  batch = leaves[0].shape[0] if leaves[0].shape else None
  for leaf in leaves:
    if not leaf.shape or leaf.shape[0] != batch:
      raise ValueError(
        f"host_map: every input and output needs the same leading batch dimension, got shapes "
        f"{[tuple(x.shape) for x in leaves]}"
      )
  mesh = _context_mesh() if mesh is None else mesh
  if mesh is None:
    return jax.pure_callback(_checked(fn, out_structs, "no mesh"), out_structs, *arrays, vmap_method=vmap_method)

  axes = tuple(mesh.axis_names)
  shards = math.prod(mesh.shape[a] for a in axes)
  pad = -batch % shards
  if pad:  # e.g. 32 env tasks on a 64-chip slice: zero rows make every device's share whole, and are dropped after
    arrays = tuple(jnp.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1)) for a in arrays)
    out_structs = jax.tree.map(lambda s: Shape((s.shape[0] + pad, *s.shape[1:]), s.dtype), out_structs)
  rows = (batch + pad) // shards
  local = jax.tree.map(lambda s: Shape((rows, *s.shape[1:]), s.dtype), out_structs)
  spec = PartitionSpec(axes)
  host_fn = _checked(fn, local, f"{rows} of {batch + pad} rows per device")
  # Every array crosses to the host as [rows, everything else]: the TPU lowering of a callback whose operands or
  # results differ in rank gives one's sharding to another and fails to verify (jax 0.10.2, libtpu 0.0.42:
  # "'stablehlo.recv' op result 0 - sharding doesn't match tensor rank"), so ranks are made equal at the boundary.
  flat_local = jax.tree.map(lambda s: Shape((rows, math.prod(s.shape[1:])), s.dtype), local)
  in_shapes = [(rows, *a.shape[1:]) for a in arrays]

  def flat_host_fn(*blocks: np.ndarray) -> Any:
    out = host_fn(*(np.reshape(b, shape) for b, shape in zip(blocks, in_shapes)))
    return jax.tree.map(lambda o, f: np.reshape(o, f.shape), out, flat_local)

  def per_device(*blocks: jax.Array) -> Any:
    flat = [b.reshape(rows, math.prod(b.shape[1:])) for b in blocks]
    out = jax.pure_callback(flat_host_fn, flat_local, *flat, vmap_method=vmap_method)
    return jax.tree.map(lambda o, s: o.reshape(s.shape), out, local)

  # check_vma=False: the callback's outputs differ per device by construction (each device's own rows), which the
  # varying-manual-axes check cannot see through an opaque host call.
  mapped = jax.shard_map(
    per_device,
    mesh=mesh,
    in_specs=tuple(spec for _ in arrays),
    out_specs=jax.tree.map(lambda _: spec, out_structs),
    check_vma=False,
  )
  out = mapped(*arrays)
  return jax.tree.map(lambda o: o[:batch], out) if pad else out


def wait_for_host_callbacks(*results: Any) -> None:
  """Blocks until `results` (and every effect already dispatched) are done, so the process may exit safely.

  jax 0.10.2 aborts when a process exits with host callbacks still in flight; call this on the step's outputs (or
  anything computed from a host_map) before exiting, e.g. at the end of training or of a test.
  """
  jax.block_until_ready(results)
  jax.effects_barrier()
