"""Row-chunked prefill (SamplingParams.prefill_rows) samples exactly what one prefill of every row samples."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from genenv_jax.models.config import ModelConfig
from genenv_jax.models.transformer import Transformer
from genenv_jax.sampling.sampler import SamplingParams, sample

CONFIG = ModelConfig(
  vocab_size=64, hidden_size=32, intermediate_size=48, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8
)


def _run(prefill_rows: int, temperature: float):
  model = Transformer(CONFIG, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)
  ids = jax.random.randint(jax.random.key(3), (4, 6), 1, 64)
  mask = jnp.array([[0, 0, 1, 1, 1, 1], [1] * 6, [0, 0, 0, 0, 1, 1], [0, 1, 1, 1, 1, 1]], bool)
  params = SamplingParams(max_new_tokens=5, temperature=temperature, prefill_rows=prefill_rows)
  fn = jax.jit(lambda s, i, m: sample(nnx.merge(graphdef, s), i, m, jax.random.key(7), params))
  return fn(state, ids, mask)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_chunked_prefill_equals_one_prefill(temperature):
  whole, chunked = _run(0, temperature), _run(2, temperature)
  np.testing.assert_array_equal(np.asarray(whole.tokens), np.asarray(chunked.tokens))
  np.testing.assert_allclose(np.asarray(whole.logprobs), np.asarray(chunked.logprobs), atol=1e-5)


def test_prefill_rows_must_divide_the_rows():
  with pytest.raises(ValueError, match="prefill_rows=3 must divide the 4 rows"):
    _run(3, 0.0)
  with pytest.raises(ValueError, match="prefill_rows must be >= 0"):
    SamplingParams(max_new_tokens=1, prefill_rows=-1)
