"""rl.updates.learning_rate_schedule against its equation, computed by hand: the linear warm-up, the cosine decay to 0
after it, and the constant rate of the default (decay_steps = 0) left as it was; last_learning_rate reads it back."""

import math

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from genenv_jax.rl.updates import last_learning_rate, learning_rate_schedule, make_optimizer

LR = 1e-4


def _by_hand(n, warmup, decay):
  if n < warmup:
    return LR * n / warmup
  if decay == 0:
    return LR
  return LR * (1 + math.cos(math.pi * min(n - warmup, decay) / decay)) / 2


@pytest.mark.parametrize("warmup,decay", [(10, 0), (0, 0), (10, 190), (0, 50), (3, 1)])
def test_the_schedule_is_its_equation(warmup, decay):
  schedule = learning_rate_schedule(LR, warmup, decay)
  for n in [0, 1, 2, 3, 5, 9, 10, 11, 25, 50, 105, 150, 199, 200, 201, 500]:
    got = float(schedule(n)) if callable(schedule) else float(schedule)
    assert got == pytest.approx(_by_hand(n, warmup, decay), rel=1e-5, abs=LR * 1e-6), n  # float32 cos near π


def test_the_decay_passes_half_the_rate_at_its_midpoint_and_ends_at_0():
  schedule = learning_rate_schedule(LR, 10, 190)
  assert float(schedule(10)) == pytest.approx(LR)
  assert float(schedule(10 + 95)) == pytest.approx(LR / 2, rel=1e-5)
  assert float(schedule(200)) == 0.0 and float(schedule(10_000)) == 0.0


def test_without_decay_the_schedule_is_the_previous_one():
  """decay_steps = 0 returns what the schedule was before the option: the same object kind and the same values."""
  assert learning_rate_schedule(LR, 0, 0) == LR
  warm = learning_rate_schedule(LR, 10, 0)
  reference = optax.linear_schedule(0.0, LR, 10)
  assert [float(warm(n)) for n in range(15)] == [float(reference(n)) for n in range(15)]


def test_last_learning_rate_reads_the_decayed_rate_of_the_newest_update():
  optimizer = make_optimizer(LR, warmup_steps=2, decay_steps=4)
  params = {"w": jnp.ones(3)}
  state = optimizer.init(params)
  rates = []
  for _ in range(7):
    updates, state = optimizer.update({"w": jnp.ones(3)}, state, params)
    params = optax.apply_updates(params, updates)
    rates.append(last_learning_rate(state, LR, warmup_steps=2, decay_steps=4))
  np.testing.assert_allclose(rates, [_by_hand(n, 2, 4) for n in range(7)], rtol=1e-5, atol=LR * 1e-6)
