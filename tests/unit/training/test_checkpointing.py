"""Checkpointer: exact resume (params, adamw, step, typed keys, nnx State, metadata), mesh restore, retention,
save schedule; PreemptionGuard: SIGTERM sets a flag and the previous handler comes back."""

from __future__ import annotations

import os
import signal
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from genenv_jax.training import checkpointing as C


class Tiny(nnx.Module):
  def __init__(self, rngs: nnx.Rngs):
    self.layers = nnx.List([nnx.Linear(4, 8, rngs=rngs), nnx.Linear(8, 4, rngs=rngs)])
    self.scale = nnx.Param(jnp.full((4,), 2.0, jnp.bfloat16))


def make_state(seed: int = 0) -> dict:
  model_state = nnx.state(Tiny(nnx.Rngs(seed)))
  params = {"w": jax.random.normal(jax.random.key(seed), (8, 4)), "b": jnp.arange(4, dtype=jnp.float32)}
  tx = optax.adamw(1e-3)
  opt_state = tx.init(params)
  grads = jax.tree.map(jnp.ones_like, params)
  updates, opt_state = tx.update(grads, opt_state, params)  # non-trivial moments and count
  params = optax.apply_updates(params, updates)
  return {
    "params": params,
    "opt": opt_state,
    "model": model_state,
    "step": jnp.int32(7),
    "epoch": 3 + seed,
    "rng": jax.random.key(seed + 1),
    "nested": {"pool": {"ids": jnp.arange(6, dtype=jnp.int32).reshape(2, 3), "mask": jnp.array([True, False])}},
  }


def assert_bitwise_equal(a, b):
  leaves_a, tree_a = jax.tree.flatten(a)
  leaves_b, tree_b = jax.tree.flatten(b)
  assert tree_a == tree_b
  for x, y in zip(leaves_a, leaves_b):
    if not hasattr(x, "dtype"):  # Python scalars stay Python scalars
      assert type(x) is type(y) and x == y, (x, y)
      continue
    assert x.dtype == y.dtype, (x.dtype, y.dtype)
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      x, y = jax.random.key_data(x), jax.random.key_data(y)
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_exact_resume_in_a_new_checkpointer(tmp_path):
  state = make_state()
  meta = {"data_position": 123, "config": {"lr": 1e-6, "name": "demo"}}
  ckpt = C.Checkpointer(tmp_path / "ckpt", save_every=10)
  assert ckpt.save(10, state, meta)
  ckpt.close()

  fresh = C.Checkpointer(tmp_path / "ckpt", save_every=10)  # as a restarted process would
  assert fresh.latest_step() == 10
  abstract = C.abstract_of(make_state(seed=5))  # same shapes, different values
  restored, restored_meta = fresh.restore(None, abstract)
  fresh.close()

  assert restored_meta == meta
  assert_bitwise_equal(restored, state)
  assert isinstance(restored["model"], nnx.State) and isinstance(restored["opt"][0], optax.ScaleByAdamState)
  assert restored["model"]["scale"].get_value().dtype == jnp.bfloat16
  assert jax.dtypes.issubdtype(restored["rng"].dtype, jax.dtypes.prng_key)
  np.testing.assert_array_equal(jax.random.uniform(restored["rng"], (5,)), jax.random.uniform(state["rng"], (5,)))
  # The abstract target is not modified by the restore.
  assert isinstance(abstract["model"]["scale"].get_value(), jax.ShapeDtypeStruct)


def test_nnx_states_are_saved_as_pure_dicts(tmp_path):
  state = {"model": nnx.state(Tiny(nnx.Rngs(0)))}
  with C.Checkpointer(tmp_path, save_every=1) as ckpt:
    ckpt.save(1, state)
    ckpt.wait()
    raw, meta = ckpt.restore(1)  # no target: the tree as stored
  assert meta == {}
  assert set(raw["model"]) == {"layers", "scale"}
  assert set(raw["model"]["layers"]["0"]) == {"kernel", "bias"}  # no Variable `value` level on disk
  np.testing.assert_array_equal(np.asarray(raw["model"]["scale"]), np.full((4,), 2.0, np.float32))


def test_restore_onto_a_mesh_uses_the_target_shardings(tmp_path):
  state = {"w": jnp.arange(64.0).reshape(8, 8), "keys": jax.random.split(jax.random.key(3), 8), "count": jnp.int32(4)}
  with C.Checkpointer(tmp_path, save_every=1) as ckpt:
    ckpt.save(3, state, {"note": "unsharded"})
    ckpt.wait()
    mesh = jax.make_mesh((2, 2, 2), ("data", "fsdp", "tensor"))
    specs = {"w": P(("data", "fsdp"), "tensor"), "keys": P("data"), "count": P()}
    abstract = jax.tree.map(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, s)), state, specs
    )
    restored, _ = ckpt.restore(3, abstract)
  for name, spec in specs.items():
    assert restored[name].sharding == NamedSharding(mesh, spec), name
  assert restored["w"].addressable_shards[0].data.shape == (2, 4)
  assert_bitwise_equal(restored, state)
  draw = jax.vmap(lambda k: jax.random.bits(k, (3,)))
  np.testing.assert_array_equal(np.asarray(draw(restored["keys"])), np.asarray(draw(state["keys"])))


def test_save_schedule_max_to_keep_and_latest_step(tmp_path):
  state = {"x": jnp.zeros((2,))}
  with C.Checkpointer(tmp_path, save_every=5, max_to_keep=2) as ckpt:
    assert ckpt.latest_step() is None
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
      ckpt.restore(None, C.abstract_of(state))
    saved = [step for step in range(1, 16) if ckpt.save(step, {"x": jnp.full((2,), float(step))})]
    assert saved == [5, 10, 15]
    assert ckpt.save(17, state, force=True)  # preemption save off the schedule
    assert not ckpt.save(17, state, force=True)  # never overwrites a saved step
    ckpt.wait()
    assert ckpt.latest_step() == 17
    assert ckpt.all_steps() == [15, 17]
    restored, _ = ckpt.restore(15, C.abstract_of(state))
    np.testing.assert_array_equal(np.asarray(restored["x"]), [15.0, 15.0])
    with pytest.raises(FileNotFoundError, match="saved steps"):
      ckpt.restore(5, C.abstract_of(state))


def test_bad_arguments_raise_clear_errors(tmp_path):
  with pytest.raises(ValueError, match="save_every"):
    C.Checkpointer(tmp_path / "a", save_every=0)
  with C.Checkpointer(tmp_path / "b", save_every=1) as ckpt:
    with pytest.raises(TypeError, match="JSON"):
      ckpt.save(1, {"x": jnp.zeros(())}, {"array": np.zeros(2)})
    assert ckpt.latest_step() is None


def wait_for(predicate, timeout: float = 5.0) -> bool:
  deadline = time.monotonic() + timeout
  while not predicate() and time.monotonic() < deadline:
    time.sleep(0.01)
  return predicate()


def test_sigterm_sets_the_flag_and_the_old_handler_returns():
  calls = []

  def previous(signum, frame):
    calls.append(signum)

  original = signal.signal(signal.SIGTERM, previous)
  try:
    with C.PreemptionGuard() as guard:
      assert guard.mode == C.LOCAL
      assert not guard.should_stop(0)
      os.kill(os.getpid(), signal.SIGTERM)
      assert wait_for(lambda: guard.should_stop(1))  # we are still alive: the handler only set a flag
      assert guard.signal_received == signal.SIGTERM and calls == []
      assert guard.should_stop(2)  # sticky
    assert signal.getsignal(signal.SIGTERM) is previous
    os.kill(os.getpid(), signal.SIGTERM)
    assert wait_for(lambda: calls == [signal.SIGTERM])
  finally:
    signal.signal(signal.SIGTERM, original)


def test_guard_cannot_be_entered_twice():
  guard = C.PreemptionGuard()
  with guard:
    with pytest.raises(RuntimeError, match="already active"):
      guard.__enter__()


def test_preemption_mode_choice():
  assert C.preemption_mode(1, True) == C.LOCAL
  assert C.preemption_mode(4, True) == C.JAX_SERVICE
  assert C.preemption_mode(4, False) == C.ALLGATHER
  with pytest.raises(ValueError, match="unknown preemption mode"):
    C.PreemptionGuard(mode="nope")
