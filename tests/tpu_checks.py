"""Compiles for TPU topologies, in a process of its own (tests/unit/planning/test_tpu_compile.py runs each check with
`python -c`): once libtpu has made compile-only TPU devices in a process, that process's later multi-device CPU
computations abort (jax 0.10.2, libtpu 0.0.42.1), so these never run inside a pytest worker."""

import os
import pathlib
import tempfile

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from genenv_jax.models import attention
from genenv_jax.models.config import ModelConfig
from genenv_jax.models.hf import abstract_model
from genenv_jax.parallel import sharding as shd
from genenv_jax.parallel.target import target_platform
from genenv_jax.planning import topology

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


def loss_program(mesh, rows: int = 8, tokens: int = 128) -> str:
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


def check_tpu_mesh_selects_splash_on_a_cpu_host():
  mesh = _tpu_mesh()
  with jax.set_mesh(mesh):
    assert target_platform() == "tpu"
    assert attention.resolve("auto", jnp.bfloat16) == "splash"
  assert jax.default_backend() == "cpu"  # the host never changed


def check_splash_forward_and_backward_compile_through_mosaic_inside_the_loss():
  text = loss_program(_tpu_mesh())
  # splash's forward, and its backward's dq and dkv kernels, in each of the 2 layers' scan body (the body is one
  # computation): at least three Mosaic kernels, none of them interpreted
  assert text.count('custom_call_target="tpu_custom_call"') >= 3


def check_sampler_prefill_and_decode_with_an_int8_cache_compile_for_tpu():
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


def check_host_callbacks_with_outputs_of_mixed_rank_compile_for_tpu():
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


def check_tiny_coevolution_step_compiles_for_a_v5p_8_through_plan():
  from coevolution_configs import tiny_config

  from genenv_jax.planning import hlo, planner

  c = tiny_config()
  with c.unlocked():
    c.slice = "v5p-8"
    c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 4, 1
    for model in (c.agent.model, c.env.model):
      model.attention = "auto"
  hlo_path = os.path.join(tempfile.mkdtemp(), "step.hlo")
  r = planner.plan(c, log=None, target="tpu", hlo_path=hlo_path)
  assert r["target"] == "tpu v5p:2x2x1" and r["config"]["devices"] == 4
  assert r["mosaic_kernels"] > 0  # splash in both models' prefill and training forward
  m = r["memory"]
  assert m["peak"] == m["arguments"] + m["outputs"] + m["temporaries"] + m["generated_code"] - m["alias"]
  assert r["fits"] and m["alias"] > 0
  kinds = r["collectives"]
  assert kinds["all-gather"]["ops"] > 0  # fsdp gathers the weights
  assert kinds["all-reduce"]["ops"] + kinds["reduce-scatter"]["ops"] > 0  # and reduces the gradients
  # fresh and replayed tasks join shard by shard (Coevolution.task_shards), and split so: the step moves no task rows
  # between chips, where a concatenate, and the slices taking it apart, were collective-permutes from step.py
  rows = hlo.by_source(hlo.analyse(pathlib.Path(hlo_path).read_text()))
  assert any(source.startswith("coevolution/step.py") for _, source, _, _ in rows)  # its collectives are placed
  moved = [r for r in rows if r[0] == "collective-permute" and r[1].startswith("coevolution/step.py")]
  assert not moved, moved


def check_compile_only_devices_one_per_chip():
  for name, devices, kind in (("v4-8", 4, "TPU v4"), ("v6e-8", 8, "TPU v6 lite")):
    found = topology.tpu_devices(topology.topology(name))
    assert len(found) == devices and found[0].device_kind == kind and found[0].platform == "tpu"
