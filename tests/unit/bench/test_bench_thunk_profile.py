"""bench.thunk_profile: FLOPs counted from compiled HLO against hand-counted products, a profiled program's thunks
found in its trace, and the command's bad inputs."""

import gzip
import json

import jax
import jax.numpy as jnp
import pytest

from genenv_jax import cli
from genenv_jax.bench import thunk_profile


def _compiled():
  """tanh(a @ b) @ bᵀ on [8, 16] x [16, 32], then a 3-step scan of [8, 16] @ [16, 16] products."""

  def f(a, b, c):
    y = jnp.tanh(a @ b) @ b.T
    z, _ = jax.lax.scan(lambda x, w: (jnp.tanh(x @ w), None), y, c)
    return z

  args = (jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((3, 16, 16)))
  return jax.jit(f).lower(*args).compile(), args


def test_dot_flops_counts_each_product_of_the_compiled_program():
  compiled, _ = _compiled()
  flops = thunk_profile.dot_flops(compiled.as_text())
  names = thunk_profile.instruction_names(compiled.as_text())
  assert set(flops) <= names
  # the two top-level products (2·8·32·16 each), whatever fusion XLA put them in; the loop's (2·8·16·16 a trip)
  # counted once a trip, in the loop body, never as the loop's
  values = sorted(flops.values())
  assert values.count(2 * 8 * 32 * 16) >= 2 and 2 * 8 * 16 * 16 in values
  assert not any(name.startswith("while") for name in flops)


def test_a_profile_finds_the_programs_thunks_and_their_rates(tmp_path):
  compiled, args = _compiled()
  table, wall_ms = thunk_profile.profile(compiled, args, calls=2, trace_dir=str(tmp_path))
  names = thunk_profile.instruction_names(compiled.as_text())
  assert wall_ms > 0 and table and all(r.name in names for r in table)
  assert [r.ms for r in table] == sorted((r.ms for r in table), reverse=True)
  products = [r for r in table if r.flops]
  assert products and all(r.gflops_per_s > 0 for r in products)
  assert any(r.executions == 3 for r in products)  # the loop's product, once a trip
  text = thunk_profile.format_rows(table, wall_ms, top=5)
  assert "GFLOP/s" in text and len(text.splitlines()) <= 5 + 5


def test_trace_durations_adds_up_complete_events(tmp_path):
  events = [
    {"ph": "X", "name": "dot.1", "dur": 30},
    {"ph": "X", "name": "dot.1", "dur": 10},
    {"ph": "X", "name": "copy", "dur": 5},
    {"ph": "M", "name": "process_name"},
  ]
  (tmp_path / "a").mkdir()
  with gzip.open(tmp_path / "a" / "x.trace.json.gz", "wt") as f:
    json.dump({"traceEvents": events}, f)
  assert thunk_profile.trace_durations(str(tmp_path)) == {"dot.1": (40, 2), "copy": (5, 1)}
  with pytest.raises(FileNotFoundError, match="jax.profiler.trace"):
    thunk_profile.trace_durations(str(tmp_path / "a" / "none"))


@pytest.mark.parametrize(
  "argv, message",
  [(["--model=gpt5"], "KNOWN_MODELS"), (["--length=1"], "at least 2"), (["--rows=0"], "positive")],
)
def test_bad_inputs_name_what_was_wrong(argv, message, capsys):
  assert cli.call(thunk_profile, argv) == 2
  assert message in capsys.readouterr().err
