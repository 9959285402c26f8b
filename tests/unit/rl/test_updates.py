"""gradient_step / minibatch_updates: a mini-batch with nothing to learn from, or a non-finite one, changes nothing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from genenv_jax.rl import grpo
from genenv_jax.rl.updates import gradient_step, has_tokens, make_optimizer, minibatch_updates

B, L, E, V = 4, 5, 3, 7


def _batch(valid_rows):
  """Rows of a toy policy's batch; rows not in `valid_rows` have an all-zero response mask (invalid tasks)."""
  k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
  mask = np.zeros((B, L), np.int32)
  mask[list(valid_rows)] = 1
  return {
    "x": jax.random.normal(k1, (B, L, E)),
    "tokens": jax.random.randint(k2, (B, L), 0, V),
    "logp_old": -2.0 + 0.1 * jax.random.normal(k3, (B, L)),
    "adv": jax.random.normal(k4, (B,)),
    "mask": jnp.asarray(mask),
  }


def _loss_fn(mode):
  def loss_fn(params, b):
    logp_all = jax.nn.log_softmax(b["x"] @ params["w"], -1)
    logp = jnp.take_along_axis(logp_all, b["tokens"][..., None], -1)[..., 0]
    return grpo.grpo_loss(logp, b["logp_old"], b["logp_old"], b["adv"], b["mask"], kl_coef=0.1, loss_agg_mode=mode)

  return loss_fn


def _assert_same(a, b):
  jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a, b)


def _assert_close(a, b):
  jax.tree.map(lambda x, y: np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-7), a, b)


@pytest.mark.parametrize("mode", sorted(grpo.LOSS_AGGREGATIONS))
def test_a_mini_batch_without_tokens_moves_neither_parameters_nor_optimizer_state(mode):
  """Two mini-batches, the second all invalid: the result is exactly one update on the first, under every
  aggregation (Dr. GRPO's constant divisor included: before, AdamW stepped on its momentum there)."""
  opt = make_optimizer(1e-2, weight_decay=0.01)
  params = {"w": jax.random.normal(jax.random.key(1), (E, V))}
  batch = _batch(valid_rows=(0, 1))
  loss_fn = _loss_fn(mode)
  update = jax.jit(lambda p, o, b: minibatch_updates(loss_fn, opt, p, o, b, 2))
  got_p, got_o, m = update(params, opt.init(params), batch)
  first = jax.tree.map(lambda x: x[:2], batch)
  want_p, want_o, _ = gradient_step(loss_fn, opt, params, opt.init(params), first)
  assert not np.allclose(np.asarray(want_p["w"]), np.asarray(params["w"]))  # the first mini-batch did learn
  _assert_close(got_p, want_p)
  _assert_close(got_o, want_o)
  assert int(m["skipped"]) == 1 and int(m["empty"]) == 1


@pytest.mark.parametrize("mode", sorted(grpo.LOSS_AGGREGATIONS))
def test_an_empty_step_returns_its_inputs_and_counts_as_skipped(mode):
  opt = make_optimizer(1e-2, weight_decay=0.01)
  params = {"w": jax.random.normal(jax.random.key(1), (E, V))}
  # a state with momentum: one real step first
  params, state, _ = gradient_step(_loss_fn(mode), opt, params, opt.init(params), _batch(valid_rows=(0, 1, 2, 3)))
  new_p, new_o, m = gradient_step(_loss_fn(mode), opt, params, state, _batch(valid_rows=()))
  _assert_same(new_p, params)
  _assert_same(new_o, state)
  assert int(m["skipped"]) == 1 and int(m["empty"]) == 1
  assert float(m["grad_norm"]) == 0.0 and float(m["update_norm"]) == 0.0 and float(m["loss"]) == 0.0


def test_a_non_finite_step_is_skipped_but_not_empty():
  opt = make_optimizer(1e-2)
  params = {"w": jnp.full((E, V), jnp.nan)}
  new_p, new_o, m = gradient_step(_loss_fn("token-mean"), opt, params, opt.init(params), _batch(valid_rows=(0,)))
  assert int(m["skipped"]) == 1 and int(m["empty"]) == 0
  _assert_same(new_o, opt.init(params))


def test_has_tokens_reads_the_token_count_when_the_denominator_is_constant():
  assert bool(has_tokens(jnp.asarray(5.0), {}))
  assert not bool(has_tokens(jnp.asarray(0.0), {}))
  assert not bool(has_tokens(jnp.asarray(20.0), {"num_tokens": jnp.asarray(0.0)}))  # Dr. GRPO: B · L_max, no token
  assert bool(has_tokens(jnp.asarray(20.0), {"num_tokens": jnp.asarray(3.0)}))


def test_a_kept_step_is_the_optimizers_update_exactly():
  """A kept step is optax's own update: the same parameters and moments (to float32 rounding: the two programs fuse
  differently), and update_norm is the norm of the applied change."""
  import optax

  opt = make_optimizer(1e-2, weight_decay=0.01)
  params = {"w": jax.random.normal(jax.random.key(1), (E, V))}
  batch, loss_fn = _batch(valid_rows=(0, 1, 2)), _loss_fn("token-mean")
  got_p, got_o, m = jax.jit(lambda p, o: gradient_step(loss_fn, opt, p, o, batch))(params, opt.init(params))

  def plain(p, o):
    total, denom, _ = loss_fn(p, batch)
    g = jax.grad(lambda q: loss_fn(q, batch)[0])(p)
    g = jax.tree.map(lambda x: x / jnp.maximum(denom, 1e-8), g)
    u, o = opt.update(g, o, p)
    return optax.apply_updates(p, u), o, optax.tree.norm(u)

  want_p, want_o, want_norm = jax.jit(plain)(params, opt.init(params))
  _assert_close(got_p, want_p)
  _assert_close(got_o, want_o)
  assert int(m["skipped"]) == 0 and float(m["update_norm"]) == pytest.approx(float(want_norm), rel=1e-6)
