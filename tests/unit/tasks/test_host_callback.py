"""Tests for genenv_jax.tasks.host_callback: host numpy functions inside jit, one block of rows per device."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from coevolution_configs import arithmetic_domain

from genenv_jax.parallel.sharding import batch_sharding, make_mesh
from genenv_jax.tasks.host_callback import host_map, wait_for_host_callbacks


@pytest.fixture(scope="module")
def mesh():
  return make_mesh((2, 2, 2))  # tensor = 2: a (data, fsdp)-only split would score each row twice


def _recording(seen: list[list[int]]):
  """A host function that records the row ids it is handed (test-local state) and doubles `x`."""

  def fn(rows: np.ndarray, x: np.ndarray) -> dict[str, np.ndarray]:
    seen.append(rows.tolist())
    return dict(rows=rows, y=x.astype(np.float64) * 2)  # float64 on purpose: cast to out_like's float32

  return fn


def _out_like(batch: int):
  return dict(rows=jax.ShapeDtypeStruct((batch,), jnp.int32), y=jax.ShapeDtypeStruct((batch, 3), jnp.float32))


def test_each_row_scored_exactly_once_on_every_device(mesh):
  batch, seen = 32, []
  fn = jax.jit(lambda rows, x: host_map(_recording(seen), _out_like(batch), rows, x))
  rows = jax.device_put(np.arange(batch, dtype=np.int32), batch_sharding(mesh, 1))  # replicated over tensor
  x = jax.device_put(np.arange(batch * 3, dtype=np.int32).reshape(batch, 3), batch_sharding(mesh, 2))
  with jax.set_mesh(mesh):
    out = fn(rows, x)
  wait_for_host_callbacks(out)
  assert len(seen) == 8 and all(len(block) == batch // 8 for block in seen)  # one call per device, own rows only
  assert sorted(r for block in seen for r in block) == list(range(batch))  # each row exactly once
  assert out["y"].dtype == jnp.float32
  np.testing.assert_array_equal(np.asarray(out["rows"]), np.arange(batch))
  np.testing.assert_array_equal(np.asarray(out["y"]), np.arange(batch * 3).reshape(batch, 3) * 2.0)
  assert set(out["y"].sharding.spec[0]) == {"data", "fsdp", "tensor"}


def test_explicit_mesh_and_no_mesh(mesh):
  batch, seen = 16, []
  x = np.ones((batch, 3), np.int32)
  rows = np.arange(batch, dtype=np.int32)
  out = jax.jit(lambda r, v: host_map(_recording(seen), _out_like(batch), r, v, mesh=mesh))(rows, x)
  wait_for_host_callbacks(out)
  assert len(seen) == 8 and sorted(sum(seen, [])) == list(range(batch))
  seen.clear()
  out = jax.jit(lambda r, v: host_map(_recording(seen), _out_like(batch), r, v))(rows, x)  # no mesh in context
  wait_for_host_callbacks(out)
  assert seen == [list(range(batch))]
  np.testing.assert_array_equal(np.asarray(out["y"]), 2.0 * x)


def test_indivisible_batch_is_padded_with_zero_rows_and_each_row_scored_once(mesh):
  """12 rows on 8 devices (as 32 env tasks on a 64-chip slice): padded to 16 with zero rows, 2 per device, the 4
  padding rows' results dropped."""
  seen: list[list[int]] = []
  fn = lambda r, v: host_map(_recording(seen), _out_like(12), r, v, mesh=mesh)  # noqa: E731
  x = np.arange(36, dtype=np.int32).reshape(12, 3)
  out = jax.jit(fn)(np.arange(1, 13, dtype=np.int32), x)
  wait_for_host_callbacks(out)
  assert len(seen) == 8 and all(len(block) == 2 for block in seen)
  assert sorted(r for block in seen for r in block) == [0] * 4 + list(range(1, 13))  # the real rows once, 4 pads
  np.testing.assert_array_equal(np.asarray(out["rows"]), np.arange(1, 13))
  np.testing.assert_array_equal(np.asarray(out["y"]), 2.0 * x)


def test_mismatched_batch_dimensions_are_a_clear_error():
  with pytest.raises(ValueError, match="same leading batch dimension"):
    host_map(_recording([]), _out_like(8), np.arange(4, dtype=np.int32), np.zeros((8, 3), np.int32))


def test_vmap_over_host_map_calls_per_element():
  seen: list[list[int]] = []
  fn = lambda r, v: host_map(_recording(seen), _out_like(4), r, v)  # noqa: E731
  rows = np.arange(8, dtype=np.int32).reshape(2, 4)
  out = jax.jit(jax.vmap(fn))(rows, np.ones((2, 4, 3), np.int32))
  wait_for_host_callbacks(out)
  assert sorted(map(tuple, seen)) == [(0, 1, 2, 3), (4, 5, 6, 7)]
  np.testing.assert_array_equal(np.asarray(out["rows"]), rows)


def test_host_verifier_on_mesh_matches_pure_jax(mesh):
  jax_domain = arithmetic_domain()
  host_domain = dataclasses.replace(jax_domain, verifier="host")
  seeds = jax_domain.seed_tasks()
  batch = 48
  env_ids, env_mask = seeds["env_ids"][:batch].copy(), seeds["env_mask"][:batch].copy()
  env_ids[::7, 1] = jax_domain.tokens.plus_id  # break some tasks (e.g. "12+..." -> "1+..." or "3++4")
  answers, answer_mask = seeds["answer_ids"][:batch].copy(), seeds["answer_mask"][:batch].copy()
  answers[::3, 0] = jax_domain.tokens.digit_ids[7]  # wrong (or malformed) answers on every third row
  answers[::5] = np.random.default_rng(0).integers(0, 512, size=answers[::5].shape)  # garbage

  def step(domain):
    def run(ids, mask, resp, resp_mask):
      tasks = domain.parse_env_output(ids, mask)
      return tasks, domain.verify(tasks, resp, resp_mask)

    return jax.jit(run)

  placed = [jax.device_put(a, batch_sharding(mesh, a.ndim)) for a in (env_ids, env_mask, answers, answer_mask)]
  with jax.set_mesh(mesh):
    host_tasks, host_reward = step(host_domain)(*placed)
    jax_tasks, jax_reward = step(jax_domain)(*placed)
  wait_for_host_callbacks(host_tasks, host_reward)
  for name in ("prompt_ids", "prompt_mask", "spec", "difficulty", "valid"):
    np.testing.assert_array_equal(np.asarray(getattr(host_tasks, name)), np.asarray(getattr(jax_tasks, name)))
  np.testing.assert_array_equal(np.asarray(host_reward), np.asarray(jax_reward))
  reward = np.asarray(jax_reward)
  assert 0 < reward.sum() < batch and not np.asarray(jax_tasks.valid).all()  # both outcomes present
