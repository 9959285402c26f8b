"""The decoder's layers under one lax.scan: equal to running the stacked layers one by one, under every remat policy,
with the KV cache stacked the same way."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from genenv_jax.models.config import REMAT_POLICIES, ModelConfig, remat_policy
from genenv_jax.models.transformer import (
  Transformer,
  init_cache,
  positions_from_mask,
  rms_norm,
  rope_inverse_frequencies,
)

CONFIG = dict(
  vocab_size=64,
  hidden_size=32,
  intermediate_size=48,
  num_layers=3,
  num_heads=4,
  num_kv_heads=2,
  head_dim=8,
  qkv_bias=True,
)


def _batch():
  ids = jax.random.randint(jax.random.key(1), (2, 7), 0, 64)
  mask = jnp.array([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]], bool)  # left padding
  return ids, mask


def _loop_reference(model: Transformer, ids, mask):
  """Final hidden states by a Python loop over the layers, each merged from its slice of the stacked state."""
  cfg = model.config
  graphdef, stacked = nnx.split(model.layers)
  x = jnp.take(model.embed[...], ids, axis=0)
  positions, inv_freq = positions_from_mask(mask), rope_inverse_frequencies(cfg)
  for i in range(cfg.num_layers):
    layer = nnx.merge(graphdef, jax.tree.map(lambda a: a[i], stacked))
    x, _ = layer(x, positions, mask, inv_freq, None, None)
  return rms_norm(x, model.final_norm[...], cfg.rms_norm_eps)


def test_scan_equals_a_loop_over_the_stacked_layers():
  model = Transformer(ModelConfig(**CONFIG), rngs=nnx.Rngs(0))
  assert model.layers.attn.q_proj[...].shape == (3, 32, 4, 8)
  assert model.layers.attn.q_proj.get_metadata()["logical_axes"][0] == "layers"
  ids, mask = _batch()
  got, _ = model.hidden_states(ids, mask)
  want = _loop_reference(model, ids, mask)
  np.testing.assert_allclose(np.asarray(got)[mask], np.asarray(want)[mask], atol=1e-5)


@pytest.mark.parametrize("policy", [p for p in REMAT_POLICIES if p != "none"])
def test_remat_policies_give_the_same_loss_and_gradients(policy):
  ids, mask = _batch()

  def loss_and_grads(remat):
    model = Transformer(ModelConfig(**CONFIG, remat=remat), rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model)

    def loss(p):
      logits, _ = nnx.merge(graphdef, p)(ids, mask)
      return jnp.sum(jnp.where(mask[..., None], jax.nn.log_softmax(logits), 0.0)) / 100

    return jax.jit(jax.value_and_grad(loss))(params)

  (l0, g0), (l1, g1) = loss_and_grads("none"), loss_and_grads(policy)
  np.testing.assert_allclose(l0, l1, rtol=1e-6)
  for a, b in zip(jax.tree.leaves(g0), jax.tree.leaves(g1)):
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_stacked_cache_decoding_equals_the_full_forward():
  cfg = ModelConfig(**CONFIG)
  model = Transformer(cfg, rngs=nnx.Rngs(0))
  ids, mask = _batch()
  full, _ = model(ids, mask)
  cache = init_cache(cfg, 2, 10)
  assert cache["layers"]["k"].shape == (3, 2, 2, 10, 8)
  _, cache = model(ids[:, :4], mask[:, :4], cache)
  steps = []
  for t in range(4, 7):
    logits, cache = model(ids[:, t : t + 1], mask[:, t : t + 1], cache)
    steps.append(logits[:, 0])
  np.testing.assert_allclose(np.stack(steps, 1), np.asarray(full[:, 4:]), atol=1e-5)


def test_remat_setting_names():
  assert [remat_policy(v) for v in (True, False, None, "", "save_dots")] == [
    "full",
    "none",
    "none",
    "none",
    "save_dots",
  ]
  assert ModelConfig(**CONFIG, remat=True).remat == "full" and ModelConfig(**CONFIG, remat=True).rematerializes
  assert not ModelConfig(**CONFIG).rematerializes
  with pytest.raises(ValueError, match="unknown remat policy 'some'"):
    ModelConfig(**CONFIG, remat="some")
