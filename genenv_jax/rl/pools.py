"""Fixed-capacity task pools as pytrees: GenEnv's D_train and D_env, usable inside one jitted step.

Rule implemented (GenEnv, arXiv 2512.19682, Algorithm 1 step 6): "valid tasks join the agent's training pool D_train;
filtered, weighted env generations join D_env; later steps mix base, old and new tasks".

A pool is a `TaskPool` pytree of arrays whose leading dimension is the capacity C:
- `tasks`: the caller's per-slot fields, a dict of arrays `[C, ...]` built from one example task (for a text task:
  `prompt_ids [C, L_p] int32` left-padded, `prompt_mask [C, L_p]`, `spec [C, S] int32`, `spec_mask [C, S]`,
  `difficulty [C] f32`, `weight [C] f32`, ...). The pool never reads them, except `difficulty` in `pool_stats` and the
  field named by `weights_field` in `sample`.
- pool-owned metadata, one entry per slot: `valid` (bool), `is_seed` (bool: base task vs generated), `inserted_at`
  (int32 step), `order` (int32 insertion sequence number, unique among valid slots, the eviction key),
  `times_sampled` (int32), `p_hat` (f32, last measured success rate), `last_eval` (int32 step, -1 = never measured);
  and the scalar `num_inserted` (int32, the next `order` id).

Every function is pure and jittable: shapes are static, masks replace dynamic lengths, and no Python branch reads an
array value, so the pool can be donated and sharded along its capacity axis. Pattern (read, not copied): the
functional level buffer of DramaCow/jaxued `src/jaxued/level_sampler.py`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
from flax import struct

Array = jax.Array
Tasks = dict[str, Array]

RESERVED_KEYS = (
  "valid",
  "is_seed",
  "inserted_at",
  "order",
  "times_sampled",
  "p_hat",
  "last_eval",
  "staleness",
)
"""Names `sample` adds to a sampled batch; caller task fields may not use them."""

METADATA_FIELDS = ("is_seed", "inserted_at", "order", "times_sampled", "p_hat", "last_eval")


@struct.dataclass
class TaskPool:
  """A fixed-capacity pool of tasks; all arrays have leading dimension `capacity` (see the module docstring)."""

  tasks: Tasks
  valid: Array
  is_seed: Array
  inserted_at: Array
  order: Array
  times_sampled: Array
  p_hat: Array
  last_eval: Array
  num_inserted: Array

  @property
  def capacity(self) -> int:
    return self.valid.shape[0]


def empty_pool(example_task: Mapping[str, Any], capacity: int) -> TaskPool:
  """An all-invalid pool of `capacity` slots whose task fields have the shapes and dtypes of `example_task` (one task,
  no batch dimension)."""
  if capacity < 1:
    raise ValueError(f"capacity must be >= 1, got {capacity}")
  bad = sorted(set(example_task) & set(RESERVED_KEYS))
  if bad:
    raise ValueError(f"task fields {bad} clash with pool metadata names {RESERVED_KEYS}")
  tasks = {}
  for k, v in example_task.items():
    v = jnp.asarray(v)
    tasks[k] = jnp.zeros((capacity,) + v.shape, v.dtype)
  return TaskPool(
    tasks=tasks,
    valid=jnp.zeros((capacity,), jnp.bool_),
    is_seed=jnp.zeros((capacity,), jnp.bool_),
    inserted_at=jnp.zeros((capacity,), jnp.int32),
    order=jnp.zeros((capacity,), jnp.int32),
    times_sampled=jnp.zeros((capacity,), jnp.int32),
    p_hat=jnp.zeros((capacity,), jnp.float32),
    last_eval=jnp.full((capacity,), -1, jnp.int32),
    num_inserted=jnp.zeros((), jnp.int32),
  )


def seed_pool(tasks_batch: Mapping[str, Any], capacity: int, step: Any = 0) -> TaskPool:
  """A pool holding a domain's seed (base) tasks `[B, ...]`, marked `is_seed`. If B > capacity the first `capacity`
  rows are kept."""
  example = {k: jnp.asarray(v)[0] for k, v in tasks_batch.items()}
  pool = empty_pool(example, capacity)
  b = _batch_size(tasks_batch)
  return insert(pool, tasks_batch, jnp.ones((b,), jnp.bool_), step, is_seed=True)


def _batch_size(tasks_batch: Mapping[str, Any]) -> int:
  sizes = {jnp.shape(v)[0] for v in tasks_batch.values()}
  if len(sizes) != 1:
    raise ValueError(f"task fields disagree on the batch size: {sizes}")
  return sizes.pop()


def _select_fields(pool: TaskPool, tasks_batch: Mapping[str, Any]) -> Tasks:
  """The pool's task fields taken from `tasks_batch` (extra keys, such as sample's metadata, are ignored)."""
  missing = sorted(set(pool.tasks) - set(tasks_batch))
  if missing:
    raise ValueError(f"tasks_batch lacks pool fields {missing}")
  out = {}
  for k, slot_arr in pool.tasks.items():
    v = jnp.asarray(tasks_batch[k])
    if v.shape[1:] != slot_arr.shape[1:]:
      raise ValueError(f"field {k!r}: batch row shape {v.shape[1:]} != pool row shape {slot_arr.shape[1:]}")
    out[k] = v.astype(slot_arr.dtype)
  return out


def eviction_order(pool: TaskPool, *, keep_seeds: bool = True) -> tuple[Array, Array]:
  """Slots in the order `insert` fills them, and how many of them may be filled.

  Replacement policy ("oldest generated first"): empty slots first (in slot order), then valid generated tasks from
  oldest to newest insertion (`order`, a per-row sequence number, so rows of one step are also ordered), then seed
  tasks from oldest to newest. With `keep_seeds` the seed slots are never eligible.

  Returns `(slots [C] int32, n_eligible [] int32)`: slots[r] is the slot that the r-th accepted row gets when
  r < n_eligible.
  """
  cap = pool.capacity
  group = jnp.where(~pool.valid, 0, jnp.where(pool.is_seed, 2, 1)).astype(jnp.int32)
  age = jnp.where(pool.valid, pool.order, jnp.arange(cap, dtype=jnp.int32))
  slots = jnp.lexsort((age, group)).astype(jnp.int32)  # the last key is the primary one
  n_seed = jnp.sum(pool.valid & pool.is_seed, dtype=jnp.int32)
  n_eligible = jnp.int32(cap) - (n_seed if keep_seeds else jnp.int32(0))
  return slots, n_eligible


def insert(
  pool: TaskPool,
  tasks_batch: Mapping[str, Any],
  accept_mask: Any,
  step: Any,
  *,
  is_seed: Any = False,
  p_hat: Any = None,
  keep_seeds: bool = True,
) -> TaskPool:
  """Insert the accepted rows of `tasks_batch [B, ...]` (GenEnv Algorithm 1 step 6: valid tasks join D_train,
  filtered env generations join D_env).

  The r-th accepted row (r = cumulative count of accepted rows before it) goes to `eviction_order(pool)[r]`: empty
  slots, then the oldest generated tasks, then (only if not `keep_seeds`) the oldest seeds. Each accepted row gets a
  distinct slot, identical rows included; rows beyond the eligible slots, and unaccepted rows, scatter to an
  out-of-bounds index with mode='drop', so earlier accepted rows win. An all-False mask is a no-op.

  Args:
    pool: the pool.
    tasks_batch: dict with (at least) the pool's task fields, each `[B, ...]`.
    accept_mask: `[B]` bool.
    step: int32 scalar, stored as `inserted_at`.
    is_seed: bool or `[B]` bool, marks base tasks.
    p_hat: optional `[B]` f32 success rates already measured for these rows (then `last_eval = step`); otherwise
      `p_hat = 0` and `last_eval = -1`.
    keep_seeds: never overwrite seed tasks.
  """
  cap = pool.capacity
  batch = _select_fields(pool, tasks_batch)
  accept = jnp.asarray(accept_mask, jnp.bool_)
  b = accept.shape[0]
  if batch and _batch_size(batch) != b:
    raise ValueError(f"accept_mask has {b} rows, tasks_batch has {_batch_size(batch)}")
  step = jnp.asarray(step, jnp.int32)

  slots, n_eligible = eviction_order(pool, keep_seeds=keep_seeds)
  rank = jnp.cumsum(accept.astype(jnp.int32)) - 1
  ok = accept & (rank < n_eligible)
  target = jnp.where(ok, slots[jnp.clip(rank, 0, cap - 1)], cap)  # cap = out of bounds -> dropped

  def put(dst: Array, src: Any) -> Array:
    src = jnp.broadcast_to(jnp.asarray(src, dst.dtype), (b,) + dst.shape[1:])
    return dst.at[target].set(src, mode="drop")

  measured = p_hat is not None
  return pool.replace(
    tasks={k: put(pool.tasks[k], v) for k, v in batch.items()},
    valid=put(pool.valid, True),
    is_seed=put(pool.is_seed, is_seed),
    inserted_at=put(pool.inserted_at, step),
    order=put(pool.order, pool.num_inserted + rank),
    times_sampled=put(pool.times_sampled, 0),
    p_hat=put(pool.p_hat, p_hat if measured else 0.0),
    last_eval=put(pool.last_eval, step if measured else -1),
    num_inserted=pool.num_inserted + jnp.sum(ok, dtype=jnp.int32),
  )


def _field(pool: TaskPool, name: str) -> Array:
  if name in pool.tasks:
    return pool.tasks[name]
  if name in METADATA_FIELDS:
    return getattr(pool, name)
  raise KeyError(f"no pool field {name!r}; task fields are {sorted(pool.tasks)}")


def _normalise(w: Array, members: Array) -> Array:
  """w restricted to `members`, summing to 1; uniform over members if their weight sums to 0; all 0 if no members."""
  wm = jnp.where(members, w, 0.0)
  s = jnp.sum(wm)
  u = members.astype(jnp.float32)
  return jnp.where(s > 0, wm / jnp.where(s > 0, s, 1.0), u / jnp.maximum(jnp.sum(u), 1.0))


def categories(pool: TaskPool, step: Any, *, new_window: Any = 1) -> Array:
  """`[3, C]` bool masks of the mixing categories (base, old, new) over valid slots.

  base = seed task; new = generated task with staleness `step - inserted_at <= new_window` (inserted in one of the
  last `new_window` steps, or this one); old = any other generated task.
  """
  staleness = jnp.asarray(step, jnp.int32) - pool.inserted_at
  gen = pool.valid & ~pool.is_seed
  new = gen & (staleness <= jnp.asarray(new_window, jnp.int32))
  return jnp.stack([pool.valid & pool.is_seed, gen & ~new, new])


def sampling_probs(
  pool: TaskPool,
  step: Any,
  *,
  mix: Sequence[float] | Array | None = None,
  weights_field: str | None = None,
  new_window: Any = 1,
  weights: Array | None = None,
) -> Array:
  """`[C]` f32 probability of drawing each slot; sums to 1, or is all 0 for an empty pool.

  Weights: 1 per valid slot, or `max(pool[weights_field], 0)`, or `max(weights, 0)` for weights `[C]` computed by
  the caller (e.g. `level_learnability_weights`; at most one of the two), non-finite -> 0; a set of valid slots
  whose weights sum to 0 falls back to uniform over them. Without `mix`: p ∝ weight over all valid slots. With
  `mix = (base_frac, old_frac, new_frac)` (GenEnv Algorithm 1 step 6: "later steps mix base, old and new tasks"): p =
  Σ_c frac_c · (weights normalised within category c), with the fractions renormalised over non-empty categories;
  if every category with a positive fraction is empty, it falls back to the unmixed distribution.
  """
  valid = pool.valid
  if weights_field is not None and weights is not None:
    raise ValueError(f"pass weights_field ({weights_field!r}) or weights, not both")
  if weights_field is None and weights is None:
    w = jnp.ones(valid.shape, jnp.float32)
  else:
    f = (_field(pool, weights_field) if weights is None else jnp.asarray(weights)).astype(jnp.float32)
    if f.shape != valid.shape:
      what = f"weights_field {weights_field!r}" if weights is None else "weights"
      raise ValueError(f"{what} must be per-slot {valid.shape}, got {f.shape}")
    w = jnp.where(jnp.isfinite(f), jnp.maximum(f, 0.0), 0.0)
  p_all = _normalise(w, valid)
  if mix is None:
    return p_all
  frac = jnp.maximum(jnp.asarray(mix, jnp.float32), 0.0)
  if frac.shape != (3,):
    raise ValueError(f"mix must be (base_frac, old_frac, new_frac), got shape {frac.shape}")
  cats = categories(pool, step, new_window=new_window)
  frac = frac * jnp.any(cats, axis=1)
  total = jnp.sum(frac)
  per_cat = jax.vmap(_normalise, in_axes=(None, 0))(w, cats)  # [3, C]
  p_mix = jnp.sum(frac[:, None] * per_cat, axis=0) / jnp.where(total > 0, total, 1.0)
  return jnp.where(total > 0, p_mix, p_all)


def sample(
  pool: TaskPool,
  key: Array,
  batch_size: int,
  *,
  step: Any,
  mix: Sequence[float] | Array | None = None,
  weights_field: str | None = None,
  new_window: Any = 1,
  weights: Array | None = None,
) -> tuple[Tasks, Array, TaskPool]:
  """Draw `batch_size` slots with replacement from `sampling_probs(...)` (inverse CDF on one uniform per row).

  Returns `(tasks_batch, indices [batch_size] int32, pool)`:
  - tasks_batch: the gathered task fields plus `valid` (bool), `staleness` (`step - inserted_at`, int32),
    `is_seed`, `p_hat`, `order` (the slot's insertion id, for `update_stats(order_ids=...)`);
  - pool: `times_sampled` incremented once per valid draw.
  An empty pool gives an all-False `valid` (rows hold slot 0's zeros, staleness 0) and leaves the pool unchanged; no
  NaN, no error. Callers must mask rows by `valid`.
  """
  p = sampling_probs(pool, step, mix=mix, weights_field=weights_field, new_window=new_window, weights=weights)
  cdf = jnp.cumsum(p)
  u = jax.random.uniform(key, (batch_size,), jnp.float32) * cdf[-1]
  idx = jnp.searchsorted(cdf, u, side="right").astype(jnp.int32)
  slot_ids = jnp.arange(pool.capacity, dtype=jnp.int32)
  last_positive = jnp.max(jnp.where(p > 0, slot_ids, 0))
  idx = jnp.minimum(idx, last_positive)  # guards float round-off at the top of the CDF, and the empty pool
  valid = pool.valid[idx]
  staleness = jnp.where(valid, jnp.asarray(step, jnp.int32) - pool.inserted_at[idx], 0)
  batch = {k: v[idx] for k, v in pool.tasks.items()}
  batch.update(
    valid=valid, staleness=staleness, is_seed=pool.is_seed[idx] & valid, p_hat=pool.p_hat[idx], order=pool.order[idx]
  )
  pool = pool.replace(times_sampled=pool.times_sampled.at[idx].add(valid.astype(jnp.int32)))
  return batch, idx, pool


def level_learnability_weights(
  pool: TaskPool, step: Any, *, window: int, num_levels: int = 64, unmeasured: float = 0.5, floor: float = 0.01
) -> Array:
  """`[C]` per-slot weights under which each difficulty level is drawn in proportion to its learnability, for
  `sample(weights=...)`.

  A level L is the slots whose `difficulty` rounds to L (clipped to [0, num_levels - 1]). Its success rate p_L is the
  mean `p_hat` of its valid slots measured in the last `window` steps (`last_eval >= step - window`; a slot's p̂ is
  written when it is replayed or admitted, `update_stats` and `insert`), or `unmeasured` when none was. Its weight is
  w_L = p_L (1 - p_L) + floor, the variance of a task's Bernoulli reward and the scale of GRPO's advantages: a level
  the agent always or never solves gives no gradient (every group's advantages are 0) and is drawn at the floor, a
  level it has begun to forget (p_L falling below 1) is drawn more; the unmeasured default 0.5 draws a level until it
  is measured. Each slot carries w_L / n_L, n_L the valid slots of its level, so that a level's draw does not grow with
  its size (the pools' seeds are weighted toward easy levels). Prioritised Level Replay (Jiang et al. 2021) ranks
  levels by a learning-potential score the same way; this score is the success rate's variance.
  """
  step = jnp.asarray(step, jnp.int32)
  level = jnp.clip(jnp.round(pool.tasks["difficulty"].astype(jnp.float32)), 0, num_levels - 1).astype(jnp.int32)
  valid = pool.valid.astype(jnp.float32)
  recent = (pool.valid & (pool.last_eval >= 0) & (pool.last_eval >= step - window)).astype(jnp.float32)
  count = jax.ops.segment_sum(valid, level, num_segments=num_levels)
  measured = jax.ops.segment_sum(recent, level, num_segments=num_levels)
  total = jax.ops.segment_sum(recent * pool.p_hat, level, num_segments=num_levels)
  p_level = jnp.where(measured > 0, total / jnp.maximum(measured, 1.0), unmeasured)
  w_level = p_level * (1.0 - p_level) + floor
  return jnp.where(pool.valid, (w_level / jnp.maximum(count, 1.0))[level], 0.0)


def update_stats(
  pool: TaskPool, indices: Array, p_hat: Array, step: Any, *, mask: Array | None = None, order_ids: Array | None = None
) -> TaskPool:
  """Write measured success rates back: `p_hat[slot] = mean of this step's measurements of slot`, `last_eval = step`.

  Rows count only where `mask` (default all) holds, the slot is valid and, if `order_ids` (from `sample`'s batch) are
  given, the slot still holds the task that was sampled (an `insert` in between may have overwritten it). A slot drawn
  several times (sampling is with replacement) gets the mean of its rows, so the result does not depend on scatter
  order. GenEnv Algorithm 1 step 3: p̂ = successes / G per task.
  """
  indices = jnp.asarray(indices, jnp.int32)
  ok = pool.valid[indices]
  if mask is not None:
    ok = ok & jnp.asarray(mask, jnp.bool_)
  if order_ids is not None:
    ok = ok & (pool.order[indices] == jnp.asarray(order_ids, jnp.int32))
  okf = ok.astype(jnp.float32)
  total = jnp.zeros_like(pool.p_hat).at[indices].add(jnp.where(ok, jnp.asarray(p_hat, jnp.float32), 0.0))
  count = jnp.zeros_like(pool.p_hat).at[indices].add(okf)
  seen = count > 0
  return pool.replace(
    p_hat=jnp.where(seen, total / jnp.maximum(count, 1.0), pool.p_hat),
    last_eval=jnp.where(seen, jnp.asarray(step, jnp.int32), pool.last_eval),
  )


def pool_stats(pool: TaskPool, step: Any) -> dict[str, Array]:
  """Scalar summaries for logging; masked means that are 0 (never NaN) when their mask is empty.

  Keys: `size` (int32), `fill` (size / capacity), `frac_seed`, `mean_staleness` (step - inserted_at over valid slots),
  `mean_times_sampled`, `mean_p_hat` (over slots measured at least once), `frac_evaluated`, and `mean_difficulty`
  when the pool has a per-slot `difficulty` task field.
  """
  valid = pool.valid
  size = jnp.sum(valid, dtype=jnp.int32)

  def mmean(x: Array, m: Array) -> Array:
    return jnp.sum(jnp.where(m, x.astype(jnp.float32), 0.0)) / jnp.maximum(jnp.sum(m, dtype=jnp.float32), 1.0)

  evaluated = valid & (pool.last_eval >= 0)
  stats = {
    "size": size,
    "fill": size.astype(jnp.float32) / pool.capacity,
    "frac_seed": mmean(pool.is_seed, valid),
    "mean_staleness": mmean(jnp.asarray(step, jnp.int32) - pool.inserted_at, valid),
    "mean_times_sampled": mmean(pool.times_sampled, valid),
    "mean_p_hat": mmean(pool.p_hat, evaluated),
    "frac_evaluated": mmean(evaluated, valid),
  }
  if "difficulty" in pool.tasks and pool.tasks["difficulty"].shape == valid.shape:
    stats["mean_difficulty"] = mmean(pool.tasks["difficulty"], valid)
  return stats
