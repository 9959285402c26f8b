"""Tests for genenv_jax.rl.pools: fixed-capacity task pools (GenEnv Algorithm 1 step 6)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from genenv_jax.rl import pools as P

L_P, S = 6, 3


def make_tasks(ids, difficulty=None, weight=None) -> dict:
  """A batch of tasks whose prompt ids encode `ids` (row i has prompt_ids[i, -1] = ids[i])."""
  ids = np.asarray(ids, np.int32)
  b = ids.shape[0]
  prompt = np.zeros((b, L_P), np.int32)
  prompt[:, -1] = ids
  mask = np.zeros((b, L_P), np.bool_)
  mask[:, -2:] = True
  return {
    "prompt_ids": jnp.asarray(prompt),
    "prompt_mask": jnp.asarray(mask),
    "spec": jnp.asarray(np.stack([ids, ids + 1, ids + 2], 1)),
    "spec_mask": jnp.ones((b, S), jnp.bool_),
    "difficulty": jnp.asarray(difficulty if difficulty is not None else np.zeros(b), jnp.float32),
    "weight": jnp.asarray(weight if weight is not None else np.ones(b), jnp.float32),
  }


def ids_of(pool: P.TaskPool) -> np.ndarray:
  """Task id per slot, -1 for invalid slots."""
  return np.where(np.asarray(pool.valid), np.asarray(pool.tasks["prompt_ids"][:, -1]), -1)


def counts(idx, n) -> np.ndarray:
  return np.bincount(np.asarray(idx), minlength=n)


def test_empty_pool_shapes_and_reserved_names():
  example = {k: v[0] for k, v in make_tasks([7]).items()}
  pool = P.empty_pool(example, 4)
  assert pool.capacity == 4
  assert pool.tasks["prompt_ids"].shape == (4, L_P) and pool.tasks["prompt_ids"].dtype == jnp.int32
  assert pool.tasks["spec_mask"].dtype == jnp.bool_
  assert not bool(pool.valid.any()) and int(pool.num_inserted) == 0
  assert (np.asarray(pool.last_eval) == -1).all()
  with pytest.raises(ValueError):
    P.empty_pool({"valid": jnp.zeros(())}, 4)


def test_insert_into_empty_respects_accept_mask():
  pool = P.empty_pool({k: v[0] for k, v in make_tasks([0]).items()}, 5)
  batch = make_tasks([10, 11, 12, 13], difficulty=[0.1, 0.2, 0.3, 0.4])
  pool = P.insert(pool, batch, jnp.array([True, False, True, False]), step=3)
  assert ids_of(pool).tolist() == [10, 12, -1, -1, -1]
  np.testing.assert_allclose(np.asarray(pool.tasks["difficulty"][:2]), [0.1, 0.3])
  np.testing.assert_array_equal(np.asarray(pool.tasks["spec"][1]), [12, 13, 14])
  assert np.asarray(pool.inserted_at[:2]).tolist() == [3, 3]
  assert not bool(pool.is_seed.any())
  assert int(pool.num_inserted) == 2
  assert np.asarray(pool.order[:2]).tolist() == [0, 1]


def test_insert_all_false_is_noop():
  pool = P.seed_pool(make_tasks([1, 2]), 4)
  new = P.insert(pool, make_tasks([5, 6, 7]), jnp.zeros((3,), jnp.bool_), step=9)
  for a, b in zip(jax.tree.leaves(pool), jax.tree.leaves(new)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_identical_rows_get_distinct_slots():
  pool = P.empty_pool({k: v[0] for k, v in make_tasks([0]).items()}, 6)
  pool = P.insert(pool, make_tasks([4, 4, 4, 4]), jnp.ones((4,), jnp.bool_), step=0)
  assert ids_of(pool).tolist() == [4, 4, 4, 4, -1, -1]
  assert sorted(np.asarray(pool.order[:4]).tolist()) == [0, 1, 2, 3]


def test_overflow_evicts_oldest_generated_and_keeps_seeds():
  pool = P.seed_pool(make_tasks([100, 101]), 5)
  assert np.asarray(pool.is_seed).tolist() == [True, True, False, False, False]
  pool = P.insert(pool, make_tasks([1, 2, 3]), jnp.ones((3,), bool), step=1)
  assert ids_of(pool).tolist() == [100, 101, 1, 2, 3]
  # full: the two oldest generated (1, then 2) go first, seeds stay
  pool = P.insert(pool, make_tasks([4, 5]), jnp.ones((2,), bool), step=2)
  assert ids_of(pool).tolist() == [100, 101, 4, 5, 3]
  assert np.asarray(pool.inserted_at).tolist() == [0, 0, 2, 2, 1]
  # B > eligible slots (3 generated): only the first 3 accepted rows enter, replacing 3, 4, 5 in age order
  pool = P.insert(pool, make_tasks([6, 7, 8, 9, 10]), jnp.array([True, False, True, True, True]), step=3)
  assert ids_of(pool).tolist() == [100, 101, 8, 9, 6]
  assert int(pool.is_seed.sum()) == 2


def test_overflow_without_keep_seeds_evicts_seeds_last():
  pool = P.seed_pool(make_tasks([100, 101]), 4)
  pool = P.insert(pool, make_tasks([1, 2]), jnp.ones((2,), bool), step=1)
  pool = P.insert(pool, make_tasks([3, 4, 5]), jnp.ones((3,), bool), step=2, keep_seeds=False)
  # generated 1, 2 evicted first, then the oldest seed (100)
  assert ids_of(pool).tolist() == [5, 101, 3, 4]
  assert np.asarray(pool.is_seed).tolist() == [False, True, False, False]
  # with keep_seeds=True the same pool cannot lose its last seed
  pool = P.insert(pool, make_tasks([6, 7, 8, 9]), jnp.ones((4,), bool), step=3, keep_seeds=True)
  assert ids_of(pool)[1] == 101 and sorted(ids_of(pool).tolist()) == [6, 7, 8, 101]


def test_seed_pool_truncates_to_capacity():
  pool = P.seed_pool(make_tasks([1, 2, 3, 4]), 3, step=5)
  assert ids_of(pool).tolist() == [1, 2, 3]
  assert bool(pool.is_seed.all()) and (np.asarray(pool.inserted_at) == 5).all()


def holey_pool() -> P.TaskPool:
  """Capacity 8, valid slots 1, 3, 4, 6 (ids 11, 13, 14, 16)."""
  pool = P.insert(
    P.empty_pool({k: v[0] for k, v in make_tasks([0]).items()}, 8),
    make_tasks(np.arange(10, 18)),
    jnp.ones((8,), bool),
    step=0,
  )
  return pool.replace(valid=jnp.array([False, True, False, True, True, False, True, False]))


def test_sample_returns_only_valid_slots():
  pool = holey_pool()
  batch, idx, new_pool = P.sample(pool, jax.random.key(0), 1000, step=0)
  idx = np.asarray(idx)
  assert set(idx.tolist()) == {1, 3, 4, 6}
  assert bool(batch["valid"].all())
  np.testing.assert_array_equal(np.asarray(batch["prompt_ids"][:, -1]), idx + 10)
  assert batch["spec"].shape == (1000, S)
  np.testing.assert_array_equal(np.asarray(new_pool.times_sampled), counts(idx, 8))


def test_weighted_sampling_frequencies():
  w = np.array([1.0, 2.0, 3.0, 4.0, 0.0, -5.0])
  pool = P.seed_pool(make_tasks(np.arange(6), weight=w), 6)
  p = np.asarray(P.sampling_probs(pool, 0, weights_field="weight"))
  np.testing.assert_allclose(p, [0.1, 0.2, 0.3, 0.4, 0.0, 0.0], atol=1e-6)
  _, idx, _ = P.sample(pool, jax.random.key(1), 20000, step=0, weights_field="weight")
  freq = counts(idx, 6) / 20000
  np.testing.assert_allclose(freq[:4], [0.1, 0.2, 0.3, 0.4], atol=0.02)
  assert freq[4] == 0 and freq[5] == 0


def test_zero_weights_fall_back_to_uniform():
  pool = P.seed_pool(make_tasks(np.arange(4), weight=np.zeros(4)), 4)
  p = np.asarray(P.sampling_probs(pool, 0, weights_field="weight"))
  np.testing.assert_allclose(p, 0.25, atol=1e-6)


def mixed_pool() -> P.TaskPool:
  """2 seeds (step 0), 3 old generated (step 1), 1 new generated (step 9); sampled at step 10, new_window=1."""
  pool = P.seed_pool(make_tasks([100, 101]), 8)
  pool = P.insert(pool, make_tasks([1, 2, 3]), jnp.ones((3,), bool), step=1)
  return P.insert(pool, make_tasks([9]), jnp.ones((1,), bool), step=9)


def category_freq(pool, idx, step=10):
  cats = np.asarray(P.categories(pool, step))
  idx = np.asarray(idx)
  return np.array([cats[c][idx].mean() for c in range(3)])


def test_mix_ratios_respected():
  pool = mixed_pool()
  cats = np.asarray(P.categories(pool, 10))
  assert cats.sum(1).tolist() == [2, 3, 1]
  p = np.asarray(P.sampling_probs(pool, 10, mix=(0.5, 0.3, 0.2)))
  np.testing.assert_allclose([p[c].sum() for c in cats], [0.5, 0.3, 0.2], atol=1e-6)
  np.testing.assert_allclose(p[cats[1]], 0.1, atol=1e-6)  # uniform within the old category
  _, idx, _ = P.sample(pool, jax.random.key(2), 20000, step=10, mix=(0.5, 0.3, 0.2))
  np.testing.assert_allclose(category_freq(pool, idx), [0.5, 0.3, 0.2], atol=0.02)
  # a wider window turns the step-1 tasks "new" too
  cats9 = np.asarray(P.categories(pool, 10, new_window=9))
  assert cats9.sum(1).tolist() == [2, 0, 4]


def test_mix_falls_back_when_a_category_is_empty():
  pool = P.seed_pool(make_tasks([100, 101]), 8)
  pool = P.insert(pool, make_tasks([1, 2, 3]), jnp.ones((3,), bool), step=1)  # no "new" tasks at step 10
  p = np.asarray(P.sampling_probs(pool, 10, mix=(0.5, 0.3, 0.2)))
  assert np.isfinite(p).all() and abs(p.sum() - 1) < 1e-6
  cats = np.asarray(P.categories(pool, 10))
  np.testing.assert_allclose([p[c].sum() for c in cats], [0.5 / 0.8, 0.3 / 0.8, 0.0], atol=1e-6)
  _, idx, _ = P.sample(pool, jax.random.key(3), 20000, step=10, mix=(0.5, 0.3, 0.2))
  np.testing.assert_allclose(category_freq(pool, idx), [0.625, 0.375, 0.0], atol=0.02)
  # only empty categories have mass: fall back to the unmixed (uniform over valid) distribution
  p = np.asarray(P.sampling_probs(pool, 10, mix=(0.0, 0.0, 1.0)))
  np.testing.assert_allclose(p[:5], 0.2, atol=1e-6)
  assert p[5:].sum() == 0


def test_staleness_values():
  pool = P.seed_pool(make_tasks([100]), 4, step=0)
  pool = P.insert(pool, make_tasks([1, 2]), jnp.ones((2,), bool), step=3)
  batch, idx, _ = P.sample(pool, jax.random.key(4), 64, step=5)
  expected = np.array([5, 2, 2, 0])[np.asarray(idx)]
  np.testing.assert_array_equal(np.asarray(batch["staleness"]), expected)
  np.testing.assert_array_equal(np.asarray(batch["is_seed"]), np.asarray(idx) == 0)
  assert set(np.asarray(idx).tolist()) == {0, 1, 2}
  stats = P.pool_stats(pool, 5)
  np.testing.assert_allclose(float(stats["mean_staleness"]), (5 + 2 + 2) / 3, rtol=1e-6)


def test_empty_pool_sample_is_all_invalid():
  pool = P.empty_pool({k: v[0] for k, v in make_tasks([0]).items()}, 4)
  batch, idx, new_pool = P.sample(pool, jax.random.key(5), 16, step=3, mix=(0.2, 0.3, 0.5), weights_field="weight")
  assert not bool(batch["valid"].any())
  assert (np.asarray(idx) >= 0).all() and (np.asarray(idx) < 4).all()
  assert (np.asarray(batch["staleness"]) == 0).all()
  assert int(new_pool.times_sampled.sum()) == 0
  assert np.isfinite(np.asarray(P.sampling_probs(pool, 3, mix=(0.2, 0.3, 0.5)))).all()
  stats = P.pool_stats(new_pool, 3)
  assert int(stats["size"]) == 0
  for k, v in stats.items():
    assert np.isfinite(float(v)) and float(v) == 0.0, k
  # update_stats on an invalid batch changes nothing
  upd = P.update_stats(new_pool, idx, jnp.full((16,), 0.7), step=3)
  assert (np.asarray(upd.last_eval) == -1).all()


def test_sampling_is_deterministic_for_a_key():
  pool = mixed_pool()
  _, a, _ = P.sample(pool, jax.random.key(6), 256, step=10, mix=(0.3, 0.3, 0.4))
  _, b, _ = P.sample(pool, jax.random.key(6), 256, step=10, mix=(0.3, 0.3, 0.4))
  _, c, _ = P.sample(pool, jax.random.key(7), 256, step=10, mix=(0.3, 0.3, 0.4))
  np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert not np.array_equal(np.asarray(a), np.asarray(c))


def test_update_stats_averages_duplicates_and_checks_order_ids():
  pool = P.seed_pool(make_tasks([0, 1, 2, 3]), 4)
  idx = jnp.array([1, 1, 2, 3], jnp.int32)
  pool2 = P.update_stats(
    pool, idx, jnp.array([0.25, 0.75, 0.5, 0.9]), step=7, mask=jnp.array([True, True, True, False])
  )
  np.testing.assert_allclose(np.asarray(pool2.p_hat), [0.0, 0.5, 0.5, 0.0])
  assert np.asarray(pool2.last_eval).tolist() == [-1, 7, 7, -1]
  stats = P.pool_stats(pool2, 7)
  np.testing.assert_allclose(float(stats["mean_p_hat"]), 0.5)
  np.testing.assert_allclose(float(stats["frac_evaluated"]), 0.5)
  # slot 2 is overwritten between sample and update: its stale row must be skipped
  batch, sidx, pool3 = P.sample(pool2, jax.random.key(8), 32, step=8)
  pool3 = pool3.replace(order=pool3.order.at[2].set(99))
  pool4 = P.update_stats(pool3, sidx, jnp.ones((32,)), step=8, order_ids=batch["order"])
  drawn = set(np.asarray(sidx).tolist())
  assert 2 in drawn
  assert float(pool4.p_hat[2]) == 0.5 and int(pool4.last_eval[2]) == 7
  for s in drawn - {2}:
    assert float(pool4.p_hat[s]) == 1.0 and int(pool4.last_eval[s]) == 8


def test_insert_with_measured_p_hat_and_stats():
  pool = P.seed_pool(make_tasks([100], difficulty=[1.0]), 4)
  pool = P.insert(
    pool, make_tasks([1, 2], difficulty=[2.0, 3.0]), jnp.array([True, True]), step=2, p_hat=jnp.array([0.4, 0.6])
  )
  assert np.asarray(pool.last_eval).tolist() == [-1, 2, 2, -1]
  stats = P.pool_stats(pool, 4)
  assert int(stats["size"]) == 3
  np.testing.assert_allclose(float(stats["fill"]), 0.75)
  np.testing.assert_allclose(float(stats["frac_seed"]), 1 / 3, rtol=1e-6)
  np.testing.assert_allclose(float(stats["mean_difficulty"]), 2.0, rtol=1e-6)
  np.testing.assert_allclose(float(stats["mean_p_hat"]), 0.5, rtol=1e-6)
  np.testing.assert_allclose(float(stats["mean_staleness"]), (4 + 2 + 2) / 3, rtol=1e-6)


def test_jit_with_donation_does_not_recompile():
  traces = {"insert": 0, "sample": 0}

  def insert_fn(pool, tasks, accept, step):
    traces["insert"] += 1
    return P.insert(pool, tasks, accept, step)

  def sample_fn(pool, key, step):
    traces["sample"] += 1
    return P.sample(pool, key, 8, step=step, mix=jnp.array([0.4, 0.3, 0.3]), weights_field="weight")

  j_insert = jax.jit(insert_fn, donate_argnums=0)
  j_sample = jax.jit(sample_fn, donate_argnums=0)
  pool = P.seed_pool(make_tasks([100, 101]), 6)
  key = jax.random.key(9)
  seed_draws = np.zeros(2, np.int64)
  for step in range(1, 6):
    old_valid = pool.valid
    accept = jnp.array([True, step % 2 == 0, True])
    pool = j_insert(pool, make_tasks([3 * step, 3 * step + 1, 3 * step + 2]), accept, jnp.int32(step))
    assert old_valid.is_deleted()  # the donated buffers were consumed
    key, sub = jax.random.split(key)
    batch, idx, pool = j_sample(pool, sub, jnp.int32(step))
    assert bool(batch["valid"].all())
    seed_draws += counts(idx, 6)[:2]
  assert traces == {"insert": 1, "sample": 1}
  assert j_insert._cache_size() == 1 and j_sample._cache_size() == 1
  assert int(pool.is_seed.sum()) == 2 and bool(pool.valid.all())
  assert int(pool.num_inserted) == 2 + 2 * 5 + 2  # two seeds, two per step, one more on even steps
  # seeds are never evicted, so their counters hold every draw; generated slots were reset on overwrite
  np.testing.assert_array_equal(np.asarray(pool.times_sampled[:2]), seed_draws)
  assert 0 < seed_draws.sum() < 8 * 5


def test_sharded_pool_under_jit():
  mesh = Mesh(np.array(jax.devices()[:8]), ("data",))
  pool = P.seed_pool(make_tasks(np.arange(4)), 16)

  def shard(x):
    return jax.device_put(x, NamedSharding(mesh, PartitionSpec("data", *([None] * (x.ndim - 1)))))

  pool = jax.tree.map(lambda x: shard(x) if x.ndim >= 1 else x, pool)
  assert len(pool.tasks["prompt_ids"].sharding.device_set) == 8

  @functools.partial(jax.jit, donate_argnums=0)
  def step_fn(pool, key, step):
    pool = P.insert(pool, make_tasks(np.arange(20, 28)), jnp.ones((8,), bool), step)
    batch, idx, pool = P.sample(pool, key, 16, step=step, mix=(0.5, 0.0, 0.5))
    pool = P.update_stats(pool, idx, jnp.full((16,), 0.5), step, order_ids=batch["order"])
    return pool, batch, P.pool_stats(pool, step)

  pool, batch, stats = step_fn(pool, jax.random.key(10), jnp.int32(1))
  assert int(stats["size"]) == 12 and bool(batch["valid"].all())
  ids = np.asarray(batch["prompt_ids"][:, -1])
  assert set(ids.tolist()) <= set(range(4)) | set(range(20, 28))
  np.testing.assert_allclose(float(stats["frac_seed"]), 4 / 12, rtol=1e-6)


def test_level_learnability_weights_hand_computed():
  """Levels: 2 (3 slots, p̂ 1 measured at step 9), 3 (1 slot, p̂ 0.5 at step 8), 4 (2 slots, never measured), 5 (1
  slot, p̂ 0.9 at step 1: stale at window 5), and one empty slot. w_L = p_L (1 - p_L) + 0.01, split over the level."""
  difficulty = np.array([2, 2, 2, 3, 4, 4, 5], np.float32)
  pool = P.seed_pool(make_tasks(np.arange(7), difficulty=difficulty), 8)
  pool = P.update_stats(pool, jnp.array([0, 1, 2]), jnp.array([1.0, 1.0, 1.0]), 9)
  pool = P.update_stats(pool, jnp.array([3]), jnp.array([0.5]), 8)
  pool = P.update_stats(pool, jnp.array([6]), jnp.array([0.9]), 1)
  w = np.asarray(P.level_learnability_weights(pool, 10, window=5, floor=0.01))
  unexplored = 0.5 * 0.5 + 0.01
  expected = [0.01 / 3] * 3 + [0.25 + 0.01] + [unexplored / 2] * 2 + [unexplored] + [0.0]
  np.testing.assert_allclose(w, expected, rtol=1e-6)
  # a level's draw does not grow with its size: level 4's two slots together weigh what level 5's one does
  assert np.isclose(w[4] + w[5], w[6])
  # with the window wide enough the old measurement counts: level 5 at p̂ 0.9 -> 0.09 + 0.01
  w_all = np.asarray(P.level_learnability_weights(pool, 10, window=20, floor=0.01))
  np.testing.assert_allclose(w_all[6], 0.9 * 0.1 + 0.01, rtol=1e-6)
  # drawn through sample(weights=...): a level the agent always solves is drawn least
  _, idx, _ = P.sample(pool, jax.random.key(0), 20000, step=10, weights=jnp.asarray(w))
  freq = counts(idx, 8) / 20000
  np.testing.assert_allclose(freq, np.asarray(expected) / np.sum(expected), atol=0.015)


def test_weights_and_weights_field_are_one_or_the_other():
  pool = P.seed_pool(make_tasks(np.arange(4)), 4)
  with pytest.raises(ValueError, match="not both"):
    P.sampling_probs(pool, 0, weights_field="weight", weights=jnp.ones(4))
  with pytest.raises(ValueError, match="per-slot"):
    P.sampling_probs(pool, 0, weights=jnp.ones(3))
