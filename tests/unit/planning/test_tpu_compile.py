"""The TPU compiler in the loop, on this CPU: programs compiled for a TPU topology (libtpu's compile-only devices) take
the TPU's implementation choices and hold the Mosaic kernels a TPU runs; a mesh of CPU devices keeps the CPU's.

These tests compile the parts whose TPU path nothing else exercises: splash attention forward and backward inside the
model's loss, the sampler's prefill and decode over an int8 KV cache, and a tiny config's whole co-evolution step
through `plan`. They skip where libtpu is not installed (`pip install -e ".[tpu]"`; the test extras include it).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from genenv_jax.models import attention
from genenv_jax.models.config import ModelConfig
from genenv_jax.models.hf import abstract_model
from genenv_jax.parallel import sharding as shd
from genenv_jax.parallel.target import target_platform
from genenv_jax.planning import topology

LIBTPU = topology.libtpu_problem()
needs_libtpu = pytest.mark.skipif(LIBTPU is not None, reason=f"no TPU compiler here: {LIBTPU}")

TINY = dict(
  vocab_size=256,
  hidden_size=256,
  intermediate_size=512,
  num_layers=2,
  num_heads=4,
  num_kv_heads=2,
  head_dim=128,
  param_dtype="bfloat16",
  dtype="bfloat16",
  attention="auto",
)


def _tpu_mesh(slice_name: str = "v5p-8"):
  devices = topology.tpu_devices(topology.topology(slice_name))
  return shd.make_mesh({"data": len(devices), "fsdp": 1, "tensor": 1}, devices=devices)


def _cpu_mesh():
  return shd.make_mesh({"data": 4, "fsdp": 1, "tensor": 1}, devices=jax.devices()[:4])


def _loss_program(mesh, rows: int = 8, tokens: int = 128) -> str:
  """The optimised HLO of value_and_grad of the model's mean token log-prob, compiled for `mesh`."""
  graphdef, params = abstract_model(ModelConfig(**TINY))
  replicated = NamedSharding(mesh, PartitionSpec())
  params = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated), params)
  batch = NamedSharding(mesh, PartitionSpec(("data",)))
  ids = jax.ShapeDtypeStruct((rows, tokens), jnp.int32, sharding=batch)
  mask = jax.ShapeDtypeStruct((rows, tokens), jnp.bool_, sharding=batch)

  def loss(p, ids, mask):
    logits, _ = nnx.merge(graphdef, p)(ids, mask)
    return jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), ids[..., None], axis=-1))

  with jax.set_mesh(mesh):
    return jax.jit(jax.value_and_grad(loss)).lower(params, ids, mask).compile().as_text()


# ---- the choice follows the mesh -------------------------------------------------------------------------------------


def test_cpu_mesh_keeps_the_hosts_choices():
  with jax.set_mesh(_cpu_mesh()):
    assert target_platform() == "cpu"
    assert attention.resolve("auto", jnp.bfloat16) == "blockwise"
  assert target_platform() == jax.default_backend() == "cpu"
  assert "tpu_custom_call" not in _loss_program(_cpu_mesh())


@needs_libtpu
def test_tpu_mesh_selects_splash_on_a_cpu_host():
  mesh = _tpu_mesh()
  with jax.set_mesh(mesh):
    assert target_platform() == "tpu"
    assert attention.resolve("auto", jnp.bfloat16) == "splash"
  assert jax.default_backend() == "cpu"  # the host never changed


# ---- what nothing else compiles for a TPU ----------------------------------------------------------------------------


@needs_libtpu
def test_splash_forward_and_backward_compile_through_mosaic_inside_the_loss():
  text = _loss_program(_tpu_mesh())
  # splash's forward, and its backward's dq and dkv kernels, in each of the 2 layers' scan body (the body is one
  # computation): at least three Mosaic kernels, none of them interpreted
  assert text.count('custom_call_target="tpu_custom_call"') >= 3


@needs_libtpu
def test_sampler_prefill_and_decode_with_an_int8_cache_compile_for_tpu():
  from genenv_jax.sampling.sampler import SamplingParams, sample

  mesh = _tpu_mesh()
  graphdef, params = abstract_model(ModelConfig(**TINY))
  replicated = NamedSharding(mesh, PartitionSpec())
  params = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated), params)
  batch = NamedSharding(mesh, PartitionSpec(("data",)))
  ids = jax.ShapeDtypeStruct((8, 128), jnp.int32, sharding=batch)
  mask = jax.ShapeDtypeStruct((8, 128), jnp.bool_, sharding=batch)
  key = jax.ShapeDtypeStruct((2,), jnp.uint32, sharding=replicated)
  sp = SamplingParams(max_new_tokens=16, kv_cache="int8", prefill_rows=4)

  def run(p, ids, mask, key):
    return sample(nnx.merge(graphdef, p), ids, mask, key, sp).tokens

  with jax.set_mesh(mesh):
    compiled = jax.jit(run).lower(params, ids, mask, key).compile()
  text = compiled.as_text()
  assert "s8[" in text  # the int8 cache is in the program (the prefill writes the cache: blockwise, not splash)
  assert compiled.memory_analysis().temp_size_in_bytes > 0


@needs_libtpu
def test_host_callbacks_with_outputs_of_mixed_rank_compile_for_tpu():
  """A text domain's parser returns [B, L] ids and [B] flags through one host callback: the TPU lowering of such a
  callback failed to verify until host_map made every array [rows, rest] at the boundary."""
  from genenv_jax.tasks.host_callback import host_map

  mesh = _tpu_mesh()
  rows = NamedSharding(mesh, PartitionSpec(("data",)))
  x = jax.ShapeDtypeStruct((8, 16), jnp.int32, sharding=rows)
  flags = jax.ShapeDtypeStruct((8,), jnp.bool_, sharding=rows)
  like = {
    "total": jax.ShapeDtypeStruct((8,), jnp.float32),
    "doubled": jax.ShapeDtypeStruct((8, 16), jnp.int32),
    "cube": jax.ShapeDtypeStruct((8, 2, 3), jnp.int32),
    "flags": jax.ShapeDtypeStruct((8,), jnp.bool_),
  }

  def fn(x, f):
    return {"total": x.sum(-1), "doubled": 2 * x, "cube": x[:, :6].reshape(-1, 2, 3), "flags": f}

  with jax.set_mesh(mesh):
    text = jax.jit(lambda x, f: host_map(fn, like, x, f)).lower(x, flags).compile().as_text()
  assert "custom-call" in text or "send" in text  # the host transfer is in the program


def test_host_map_round_trips_every_rank_on_a_cpu_mesh():
  from genenv_jax.tasks.host_callback import host_map, wait_for_host_callbacks

  x = np.arange(8 * 6, dtype=np.int32).reshape(8, 6)
  flags = np.arange(8) % 3 == 0
  like = {
    "total": jax.ShapeDtypeStruct((8,), jnp.float32),
    "cube": jax.ShapeDtypeStruct((8, 2, 3), jnp.int32),
    "flags": jax.ShapeDtypeStruct((8,), jnp.bool_),
  }

  def fn(x, f):
    return {"total": x.sum(-1), "cube": x.reshape(-1, 2, 3), "flags": f}

  with jax.set_mesh(_cpu_mesh()):
    out = jax.jit(lambda x, f: host_map(fn, like, x, f))(x, flags)
    wait_for_host_callbacks(out)
  np.testing.assert_array_equal(out["total"], x.sum(-1))
  np.testing.assert_array_equal(out["cube"], x.reshape(8, 2, 3))
  np.testing.assert_array_equal(out["flags"], flags)


@needs_libtpu
def test_tiny_coevolution_step_compiles_for_a_v5p_8_through_plan():
  from coevolution_configs import tiny_config

  from genenv_jax.planning import planner

  c = tiny_config()
  with c.unlocked():
    c.slice = "v5p-8"
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 4, 1
    for model in (c.agent.model, c.env.model):
      model.attention = "auto"
  r = planner.plan(c, log=None, target="tpu")
  assert r["target"] == "tpu v5p:2x2x1" and r["config"]["devices"] == 4
  assert r["mosaic_kernels"] > 0  # splash in both models' prefill and training forward
  m = r["memory"]
  assert m["peak"] == m["arguments"] + m["outputs"] + m["temporaries"] + m["generated_code"] - m["alias"]
  assert r["fits"] and m["alias"] > 0
  kinds = r["collectives"]
  assert kinds["all-gather"]["ops"] > 0  # fsdp gathers the weights
  assert kinds["all-reduce"]["ops"] + kinds["reduce-scatter"]["ops"] > 0  # and reduces the gradients


# ---- the slice table and libtpu's version ----------------------------------------------------------------------------


def test_slice_topologies_and_unknown_slices():
  assert topology.topology("v5p-64").name == "v5p:2x4x4" and topology.topology("v5p-64").chips == 32
  assert topology.topology("v5p-8").name == "v5p:2x2x1"
  assert topology.topology("v5p-128").name == "v5p:4x4x4"
  assert topology.topology("v6e-8").name == "v6e:2x4"
  assert topology.topology("v6e-64").name == "v6e:8x8"
  assert topology.topology("v5litepod-16").name == "v5e:4x4"
  v4 = topology.topology("v4-8")
  assert v4.name == "v4:2x2x1" and v4.options["chip_config_name"] == "megacore"
  with pytest.raises(ValueError, match="no known topology for the TPU slice 'v6e-12'.*v6e-8"):
    topology.topology("v6e-12")
  with pytest.raises(ValueError, match="unknown TPU slice"):
    topology.topology("h100-8")


@needs_libtpu
@pytest.mark.parametrize("name,devices,kind", [("v4-8", 4, "TPU v4"), ("v6e-8", 8, "TPU v6 lite")])
def test_compile_only_devices_one_per_chip(name, devices, kind):
  found = topology.tpu_devices(topology.topology(name))
  assert len(found) == devices and found[0].device_kind == kind and found[0].platform == "tpu"


def test_libtpu_version_must_match_jax(monkeypatch):
  import importlib.metadata

  real = importlib.metadata.version

  def fake(name):
    return "0.0.1" if name == "libtpu" else real(name)

  monkeypatch.setattr(importlib.metadata, "version", fake)
  problem = topology.libtpu_problem()
  assert problem and "libtpu 0.0.1 does not match jax" in problem and 'pip install "jax[tpu]==' in problem

  def missing(name):
    if name == "libtpu":
      raise importlib.metadata.PackageNotFoundError(name)
    return real(name)

  monkeypatch.setattr(importlib.metadata, "version", missing)
  assert "libtpu (the TPU compiler) is not installed" in topology.libtpu_problem()


def test_tpu_target_refuses_a_config_without_a_slice():
  from coevolution_configs import tiny_config

  from genenv_jax.planning import planner

  with pytest.raises(ValueError, match="names none"):
    planner.target_devices(tiny_config(), "tpu", 4)
  with pytest.raises(ValueError, match="unknown compile target 'gpu'"):
    planner.target_devices(tiny_config(), "gpu", 4)
  assert np.all([d.platform == "cpu" for d in planner.target_devices(tiny_config(), "cpu", 4)[0]])
