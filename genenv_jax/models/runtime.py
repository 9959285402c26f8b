"""Calling a (possibly sharded) Transformer from plain Python: the mesh it lives on, input placement, `forward`.

The model itself is an nnx module; these helpers split it into (graphdef, state), place host inputs on the model's
mesh with the batch split over (data, fsdp), and run a jitted pure function under `jax.set_mesh` so that the model's
logical sharding constraints apply.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from genenv_jax.models.transformer import Transformer
from genenv_jax.parallel import sharding as shd


def model_mesh(model_or_state: Any) -> Mesh | None:
  """The mesh the parameters are sharded on (None for unsharded or host arrays)."""
  state = nnx.state(model_or_state) if isinstance(model_or_state, nnx.Module) else model_or_state
  for leaf in jax.tree.leaves(state):
    sharding = getattr(leaf, "sharding", None)
    if isinstance(sharding, NamedSharding):
      return sharding.mesh
  return None


def mesh_context(mesh: Mesh | None):
  """`jax.set_mesh(mesh)`, or nothing when there is no mesh."""
  return jax.set_mesh(mesh) if mesh is not None else contextlib.nullcontext()


def place_batch(arrays: Any, mesh: Mesh | None) -> Any:
  """Puts host arrays on the mesh, rows split over (data, fsdp) when they divide evenly, else replicated."""
  if mesh is None:
    return jax.tree.map(jnp.asarray, arrays)
  rows = mesh.shape["data"] * mesh.shape["fsdp"]

  def one(x):
    x = np.asarray(x) if not isinstance(x, jax.Array) else x
    sharding = shd.batch_sharding(mesh, x.ndim) if x.ndim and x.shape[0] % rows == 0 else shd.replicated(mesh)
    return jax.device_put(x, sharding)

  return jax.tree.map(one, arrays)


@functools.partial(jax.jit, static_argnums=0)
def _forward(graphdef: nnx.GraphDef, state: nnx.State, input_ids: jax.Array, attention_mask: jax.Array) -> jax.Array:
  logits, _ = nnx.merge(graphdef, state)(input_ids, attention_mask)
  return logits


def forward(model: Transformer, input_ids: Any, attention_mask: Any = None) -> jax.Array:
  """Logits [B, T, V] in float32 for a left-padded batch (attention_mask 1 = real token; default all ones)."""
  input_ids = np.asarray(input_ids) if not isinstance(input_ids, jax.Array) else input_ids
  if input_ids.ndim != 2:
    raise ValueError(f"input_ids must be [batch, length], got shape {tuple(input_ids.shape)}")
  if attention_mask is None:
    attention_mask = np.ones(input_ids.shape, np.int32)
  if tuple(attention_mask.shape) != tuple(input_ids.shape):
    raise ValueError(f"attention_mask shape {tuple(attention_mask.shape)} != input_ids shape {tuple(input_ids.shape)}")
  graphdef, state = nnx.split(model)
  mesh = model_mesh(state)
  ids, mask = place_batch((input_ids, attention_mask), mesh)
  with mesh_context(mesh):
    return _forward(graphdef, state, ids.astype(jnp.int32), mask.astype(jnp.int32))
