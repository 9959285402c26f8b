"""bench.compile_depth on a tiny shape: it lowers and compiles the gradient and reports positive times."""

from genenv_jax.bench.compile_depth import compile_seconds

TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_heads=4, num_kv_heads=2, head_dim=8)


def test_compile_seconds_on_a_tiny_model():
  for layers in (1, 3):
    lower, compile_ = compile_seconds(layers, 8, "save_dots", shape=TINY)
    assert lower > 0 and compile_ > 0
