"""The mesh and logical-axis rules, and sharded forward / sampling against one device (8 fake CPU devices)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hf_models import make_hf_model, save_hf_model
from jax.sharding import PartitionSpec

import genenv_jax as gj
from genenv_jax.parallel import sharding as shd

MESHES = [(8, 1, 1), (2, 2, 2), (1, 2, 4)]


def test_eight_fake_devices():
  assert jax.device_count() == 8


def test_make_mesh_sizes_and_rest():
  assert dict(shd.make_mesh((2, -1, 2)).shape) == {"data": 2, "fsdp": 2, "tensor": 2}
  assert dict(shd.make_mesh({"tensor": 4, "data": -1}).shape) == {"data": 2, "fsdp": 1, "tensor": 4}
  with pytest.raises(ValueError, match="needs 12 devices, but 8 are available"):
    shd.make_mesh((3, 2, 2))
  with pytest.raises(ValueError, match="at most one axis may be -1"):
    shd.make_mesh((-1, -1, 1))
  with pytest.raises(ValueError, match="unknown mesh axes"):
    shd.make_mesh({"model": 8})


def test_logical_rules_shard_divisible_dims_and_replicate_the_rest():
  mesh = shd.make_mesh((1, 2, 4))
  assert shd.logical_to_spec(("embed", "mlp"), (64, 96), mesh) == PartitionSpec("fsdp", "tensor")
  # 2 kv heads do not split over tensor=4: replicated rather than an error
  assert shd.logical_to_spec(("embed", "kv_heads", "head_dim"), (64, 2, 16), mesh) == PartitionSpec("fsdp", None, None)
  assert shd.logical_to_spec(("batch", "length"), (8, 5), mesh) == PartitionSpec("fsdp", None)
  with pytest.raises(ValueError, match="has no sharding rule"):
    shd.logical_to_spec(("nonsense",), (4,), mesh)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
  model = make_hf_model(
    "qwen2", num_attention_heads=4, num_key_value_heads=2, hidden_size=64, intermediate_size=128, vocab_size=128
  )
  return save_hf_model(model, tmp_path_factory.mktemp("sharded"))


@pytest.fixture(scope="module")
def batch():
  rng = np.random.RandomState(0)
  ids = rng.randint(3, 128, size=(8, 9)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[::3, :4] = 0
  return ids * mask, mask


@pytest.fixture(scope="module")
def single_device_results(checkpoint, batch):
  model = gj.load_hf(checkpoint)
  ids, mask = batch
  logits = np.asarray(gj.forward(model, ids, mask))
  greedy = gj.generate(model, ids, mask, max_new_tokens=6, temperature=0.0)
  sampled = gj.generate(model, ids, mask, max_new_tokens=6, temperature=1.0, top_k=30, key=jax.random.key(3))
  return logits, greedy, sampled


@pytest.mark.parametrize("mesh_shape", MESHES, ids=lambda s: "x".join(map(str, s)))
def test_sharded_forward_and_sampler_match_one_device(mesh_shape, checkpoint, batch, single_device_results):
  mesh = gj.make_mesh(mesh_shape)
  model = gj.load_hf(checkpoint, mesh=mesh)
  # parameters really are sharded as the rules say
  q = model.layers.attn.q_proj[...]  # stacked [layers, embed, q_heads, head_dim]
  assert q.sharding.spec == shd.logical_to_spec(("layers", "embed", "q_heads", "head_dim"), q.shape, mesh)
  if mesh_shape != (8, 1, 1):
    assert not q.is_fully_replicated
  ids, mask = batch
  logits, greedy, sampled = single_device_results
  sharded_logits = gj.forward(model, ids, mask)
  assert sharded_logits.sharding.mesh.shape == mesh.shape
  np.testing.assert_allclose(np.asarray(sharded_logits) * mask[..., None], logits * mask[..., None], atol=1e-4)
  out = gj.generate(model, ids, mask, max_new_tokens=6, temperature=0.0)
  np.testing.assert_array_equal(np.asarray(out.tokens), np.asarray(greedy.tokens))
  np.testing.assert_allclose(np.asarray(out.logprobs), np.asarray(greedy.logprobs), atol=1e-4)
  out = gj.generate(model, ids, mask, max_new_tokens=6, temperature=1.0, top_k=30, key=jax.random.key(3))
  np.testing.assert_array_equal(np.asarray(out.tokens), np.asarray(sampled.tokens))


def test_host_local_to_global_on_one_process():
  mesh = gj.make_mesh((2, 2, 2))
  rows = shd.process_local_rows(8)
  assert rows == slice(0, 8)
  x = shd.host_local_to_global({"ids": np.arange(16).reshape(8, 2)}, mesh)["ids"]
  assert x.sharding.spec == PartitionSpec(("data", "fsdp"), None)
  np.testing.assert_array_equal(np.asarray(x), np.arange(16).reshape(8, 2))


# ---- fresh and replayed rows in one batch, shard by shard ------------------------------------------------------------


def _rows_mesh():
  from genenv_jax.parallel.sharding import make_mesh

  return make_mesh({"data": 2, "fsdp": 2, "tensor": 1}, devices=jax.devices()[:4])


def test_interleave_rows_keeps_every_shards_rows_and_split_undoes_it():
  from genenv_jax.parallel.sharding import batch_shards_in_context, interleave_rows, interleaved_position, split_rows

  a, b = np.arange(8) * 10, np.arange(4) + 100
  # one shard: a plain concatenate
  np.testing.assert_array_equal(interleave_rows(jnp.asarray(a), jnp.asarray(b), 1), np.concatenate([a, b]))
  assert batch_shards_in_context(8, 4) == 1  # no mesh in context
  with jax.set_mesh(_rows_mesh()):  # 4 batch shards: shard i holds a's 2 rows, then b's 1
    assert batch_shards_in_context(8, 4) == 4 and batch_shards_in_context(8, 6) == 1
    joined = jax.jit(interleave_rows, static_argnums=2)(a, b, 4)
    np.testing.assert_array_equal(joined, [0, 10, 100, 20, 30, 101, 40, 50, 102, 60, 70, 103])
    back = jax.jit(split_rows, static_argnums=(1, 2))(joined, 8, 4)
    np.testing.assert_array_equal(back[0], a)
    np.testing.assert_array_equal(back[1], b)
    is_a, row = jax.jit(interleaved_position, static_argnums=(1, 2, 3))(jnp.arange(12), 8, 12, 4)
  np.testing.assert_array_equal(np.where(is_a, a[row], b[np.minimum(row, 3)]), joined)


def test_interleave_rows_moves_no_rows_between_devices():
  from jax.sharding import NamedSharding, PartitionSpec

  from genenv_jax.parallel.sharding import interleave_rows, split_rows

  mesh = _rows_mesh()
  rows = NamedSharding(mesh, PartitionSpec(("data", "fsdp"), None))
  a = jax.ShapeDtypeStruct((32, 16), jnp.int32, sharding=rows)
  b = jax.ShapeDtypeStruct((16, 16), jnp.int32, sharding=rows)

  def both(a, b):
    joined = interleave_rows(a, b, 4)
    return joined, split_rows(joined * 2, 32, 4)

  with jax.set_mesh(mesh):
    text = jax.jit(both).lower(a, b).compile().as_text()
    plain = jax.jit(lambda a, b: jnp.concatenate([a, b])[8:40]).lower(a, b).compile().as_text()
  kinds = ("collective-permute", "all-to-all", "all-gather", "all-reduce")
  assert not any(f" {k}(" in text or f" {k}-start(" in text for k in kinds)
  assert any(f" {k}(" in plain or f" {k}-start(" in plain for k in kinds)  # what a plain concatenate costs
