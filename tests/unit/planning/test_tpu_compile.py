"""The TPU compiler in the loop, on this CPU: programs compiled for a TPU topology (libtpu's compile-only devices) take
the TPU's implementation choices and hold the Mosaic kernels a TPU runs; a mesh of CPU devices keeps the CPU's.

These tests compile the parts whose TPU path nothing else exercises: splash attention forward and backward inside the
model's loss, the sampler's prefill and decode over an int8 KV cache, and a tiny config's whole co-evolution step
through `plan`, each in a process of its own (tests/tpu_checks.py says why). They skip where libtpu is not installed
(`pip install -e ".[tpu]"`; the test extras include it).
"""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import PROJECT_ROOT
from tpu_checks import loss_program

from genenv_jax.models import attention
from genenv_jax.parallel import sharding as shd
from genenv_jax.parallel.target import target_platform
from genenv_jax.planning import topology

LIBTPU = topology.libtpu_problem()
needs_libtpu = pytest.mark.skipif(LIBTPU is not None, reason=f"no TPU compiler here: {LIBTPU}")


def _cpu_mesh():
  return shd.make_mesh({"data": 4, "fsdp": 1, "tensor": 1}, devices=jax.devices()[:4])


# ---- the choice follows the mesh -------------------------------------------------------------------------------------


def test_cpu_mesh_keeps_the_hosts_choices():
  with jax.set_mesh(_cpu_mesh()):
    assert target_platform() == "cpu"
    assert attention.resolve("auto", jnp.bfloat16) == "blockwise"
  assert target_platform() == jax.default_backend() == "cpu"
  assert "tpu_custom_call" not in loss_program(_cpu_mesh())


# ---- what nothing else compiles for a TPU ----------------------------------------------------------------------------


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


def _run_check(name: str) -> None:
  """tests/tpu_checks.py's `name` in a fresh process (why: that module's docstring)."""
  env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
  env["PYTHONPATH"] = f"{PROJECT_ROOT}{os.pathsep}{PROJECT_ROOT / 'tests'}"
  code = f"import tpu_checks; tpu_checks.{name}()"
  proc = subprocess.run(
    [sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900
  )
  assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"


@needs_libtpu
@pytest.mark.parametrize(
  "check",
  [
    "check_tpu_mesh_selects_splash_on_a_cpu_host",
    "check_compile_only_devices_one_per_chip",
    "check_splash_forward_and_backward_compile_through_mosaic_inside_the_loss",
    "check_sampler_prefill_and_decode_with_an_int8_cache_compile_for_tpu",
    "check_host_callbacks_with_outputs_of_mixed_rank_compile_for_tpu",
    "check_tiny_coevolution_step_compiles_for_a_v5p_8_through_plan",
  ],
)
def test_compiles_for_a_tpu(check):
  _run_check(check)
