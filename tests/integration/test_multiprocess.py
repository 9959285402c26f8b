"""A real multi-process run on this machine (issue 5): 2 processes x 4 fake CPU devices = one mesh of 8 devices.

Two processes on localhost start JAX's distributed runtime (coordinator on a free port, gloo CPU collectives) and run
a short co-evolution with `genenv_jax.training.loop.train` (tests/multiprocess_worker.py: the smoke variant of
configs/default.py, shrunk; the arithmetic domain with its host-Python verifier, so pure_callback inside shard_map
runs across both processes). One process with 8 devices then runs the same config with the same seed. The checks:
  - the pair's final state and logged metrics equal the single process's, within float tolerance;
  - the checkpoint the pair wrote together restores in the single process to exactly the values the pair restored;
  - only process 0 prints and writes TensorBoard; each process verifies only its own half of the rows.
Every subprocess runs under a timeout; on expiry all of them are killed and the test fails with their output.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import PROJECT_ROOT

from genenv_jax.training.metrics import read_scalars

PROJECT = str(PROJECT_ROOT)
WORKER = os.path.join(PROJECT, "tests", "multiprocess_worker.py")
PHASE_TIMEOUT_S = 900  # per phase (the pair, then the single process); ~3-6 minutes each on a busy 2-core CPU


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def worker_env(**extra) -> dict:
  env = {
    k: v
    for k, v in os.environ.items()
    if k not in ("XLA_FLAGS", "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
  }
  return {**env, "JAX_PLATFORMS": "cpu", **extra}


def run_workers(commands: list[tuple[list[str], dict]], log_prefix, timeout: float) -> list[str]:
  """Starts every command at once and waits for all; kills them all on timeout or on a failure of any one."""
  procs, logs = [], []
  for i, (cmd, env) in enumerate(commands):
    log = open(f"{log_prefix}.{i}.log", "w+")
    logs.append(log)
    procs.append(
      subprocess.Popen(cmd, cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    )
  deadline = time.time() + timeout
  failed = None
  while any(p.poll() is None for p in procs):
    if time.time() > deadline:
      failed = f"timed out after {timeout:.0f} s"
      break
    if any(p.poll() not in (None, 0) for p in procs):
      failed = "a worker failed"
      break
    time.sleep(0.5)
  for p in procs:
    if p.poll() is None:
      os.killpg(p.pid, signal.SIGKILL)
      p.wait()
  outputs = []
  for log in logs:
    log.seek(0)
    outputs.append(log.read())
    log.close()
  if failed or any(p.returncode != 0 for p in procs):
    report = "\n".join(
      f"--- worker {i} (exit {p.returncode}):\n{out[-4000:]}" for i, (p, out) in enumerate(zip(procs, outputs))
    )
    pytest.fail(f"{failed or 'a worker failed'}\n{report}")
  return outputs


def worker_cmd(workdir, out, local_devices, *extra) -> list[str]:
  return [
    sys.executable,
    WORKER,
    f"--workdir={workdir}",
    f"--out={out}",
    f"--local-devices={local_devices}",
    "--verifier=host",
    *extra,
  ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  root = tmp_path_factory.mktemp("multiprocess")
  pair, single = root / "pair", root / "single"
  port = free_port()
  pair_cmds = [
    (
      worker_cmd(pair, pair, 4),
      worker_env(JAX_COORDINATOR_ADDRESS=f"localhost:{port}", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(i)),
    )
    for i in range(2)
  ]
  t0 = time.time()
  pair_out = run_workers(pair_cmds, root / "pair_log", PHASE_TIMEOUT_S)
  t1 = time.time()
  single_out = run_workers(
    [(worker_cmd(single, single, 8, f"--restore-from={pair}"), worker_env())], root / "single_log", PHASE_TIMEOUT_S
  )
  print(f"pair: {t1 - t0:.0f} s, single: {time.time() - t1:.0f} s")
  return {"root": root, "pair": pair, "single": single, "pair_out": pair_out, "single_out": single_out}


def load(prefix, suffix=".npz"):
  with np.load(f"{prefix}{suffix}") as f:
    return {k: f[k] for k in f.files}


def info(prefix, i):
  with open(f"{prefix}.process{i}.json") as f:
    return json.load(f)


def test_pair_is_one_mesh_and_only_process_0_reports(runs):
  infos = [info(runs["pair"], i) for i in range(2)]
  assert [x["process_index"] for x in infos] == [0, 1]
  for x in infos:
    assert (x["process_count"], x["device_count"], x["local_device_count"]) == (2, 8, 4)
    assert x["mesh"] == {"data": 8, "fsdp": 1, "tensor": 1}
  assert [x["writer_enabled"] for x in infos] == [True, False]
  out0, out1 = runs["pair_out"]
  for line in ("warm start agent", "eval at step 0", "step 3/3"):
    assert line in out0 and line not in out1, line
  assert read_scalars(runs["pair"] / "tensorboard")["agent/reward_mean"]


def test_host_verifier_runs_on_each_process_over_its_own_rows(runs):
  pair = [info(runs["pair"], i)["host_rows"] for i in range(2)]
  single = info(runs["single"], 0)["host_rows"]
  # every call inside the step sees the rows of one device; the pair's processes split the work in two halves
  assert pair[0]["verify_host"] == pair[1]["verify_host"] > 0
  assert pair[0]["verify_host"] + pair[1]["verify_host"] == single["verify_host"]
  assert pair[0]["verify_host_calls"] + pair[1]["verify_host_calls"] == single["verify_host_calls"]


def test_pair_matches_one_process_with_8_devices(runs):
  pair, single = load(runs["pair"]), load(runs["single"])
  assert pair.keys() == single.keys()
  for key, value in single.items():
    if np.issubdtype(value.dtype, np.floating):
      np.testing.assert_allclose(pair[key], value, atol=2e-5, rtol=1e-5, err_msg=key)
    else:
      np.testing.assert_array_equal(pair[key], value, err_msg=key)
  # the co-evolution steps moved the agent from its (warm-started) reference by far more than the tolerance
  moved = max(
    float(np.abs(pair[k] - pair[k.replace(".agent[", ".agent_ref[", 1)]).max()) for k in pair if k.startswith(".agent[")
  )
  assert moved > 1e-4, f"the agent moved only {moved:.2e} from its reference: the comparison would be vacuous"
  assert int(pair[".step"]) == 3

  pair_tb, single_tb = read_scalars(runs["pair"] / "tensorboard"), read_scalars(runs["single"] / "tensorboard")
  tags = {t for t in single_tb if not t.startswith("perf/")}
  assert tags and tags == {t for t in pair_tb if not t.startswith("perf/")}
  for tag in sorted(tags):
    got, want = sorted(pair_tb[tag]), sorted(single_tb[tag])
    assert [s for s, _ in got] == [s for s, _ in want], tag
    np.testing.assert_allclose([v for _, v in got], [v for _, v in want], rtol=1e-3, atol=1e-4, err_msg=tag)

  pair_summary = json.loads((runs["pair"] / "summary.json").read_text())
  single_summary = json.loads((runs["single"] / "summary.json").read_text())
  assert pair_summary["final_step"] == single_summary["final_step"] == 3
  assert [e["accuracy"] for e in pair_summary["evals"]] == [e["accuracy"] for e in single_summary["evals"]]


def test_checkpoint_written_by_the_pair_restores_in_one_process(runs):
  pair, restored = load(runs["pair"]), load(runs["single"], ".restored.npz")
  assert pair.keys() == restored.keys()
  for key, value in pair.items():
    np.testing.assert_array_equal(restored[key], value, err_msg=key)


# ---- the multi-host plumbing, in one process (fast) ------------------------------------------------------------------


def test_distributed_args_and_request_come_from_the_launch_environment():
  from genenv_jax.parallel import sharding as shd

  env = {"JAX_COORDINATOR_ADDRESS": "10.0.0.2:8476", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"}
  assert shd.distributed_args_from_env(env) == {
    "coordinator_address": "10.0.0.2:8476",
    "num_processes": 4,
    "process_id": 3,
  }
  assert shd.distributed_args_from_env({}) == {}
  assert shd.distributed_requested(False, env) and shd.distributed_requested(True, {})
  assert not shd.distributed_requested(False, {}) and not shd.distributed_requested(False, {"JAX_NUM_PROCESSES": "1"})
  assert shd.maybe_initialize_distributed(False, {}) is False  # nothing asked: the runtime is not started
  for bad, match in (
    ({"JAX_NUM_PROCESSES": "two"}, "must be an integer"),
    ({"JAX_NUM_PROCESSES": "0"}, "must be >= 1"),
    ({"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "2"}, "JAX_PROCESS_ID=2"),
    ({"JAX_COORDINATOR_ADDRESS": "localhost"}, "HOST:PORT"),
  ):
    with pytest.raises(ValueError, match=match):
      shd.distributed_args_from_env(bad)


def test_process_rows_global_batch_and_to_host_on_one_process():
  import jax
  from jax.sharding import PartitionSpec

  from genenv_jax.parallel import sharding as shd

  mesh = shd.make_mesh({"data": 4, "fsdp": 2})
  assert shd.process_local_rows(16, mesh) == slice(0, 16)
  with pytest.raises(ValueError, match="does not split over the 8"):
    shd.process_local_rows(12, mesh)
  batch = {"rows": np.arange(32).reshape(16, 2), "odd": np.arange(6), "scalar": np.float32(2.5)}
  placed = shd.global_batch(batch, mesh)
  assert placed["rows"].sharding.spec == PartitionSpec(("data", "fsdp"), None)
  assert placed["odd"].sharding.is_fully_replicated and placed["scalar"].sharding.is_fully_replicated
  back = shd.to_host(placed, mesh)
  for key in batch:
    np.testing.assert_array_equal(back[key], batch[key])
  with pytest.raises(ValueError, match="expected 16 rows"):
    shd.host_local_to_global({"x": np.zeros((8, 2))}, mesh, global_rows=16)
  assert jax.process_count() == 1


def test_remote_workdir_paths_and_summary(tmp_path):
  import fsspec

  from configs.default import get_config
  from genenv_jax.training.loop import Summary, workdir_path

  assert workdir_path("gs://bucket/run", "checkpoints") == "gs://bucket/run/checkpoints"
  assert workdir_path("gs://bucket/run/", "summary.json") == "gs://bucket/run/summary.json"
  assert workdir_path(str(tmp_path), "tensorboard") == os.path.join(str(tmp_path), "tensorboard")
  url = workdir_path("memory://genenv_test_summary/run", "summary.json")  # fsspec's in-memory filesystem
  summary = Summary(url, get_config("smoke"), resume_step=None)
  summary.data["steps"] = [{"step": 1, "curriculum/p_hat_mean": 0.5}, {"step": 2, "curriculum/p_hat_mean": 0.25}]
  summary.write()
  fs = fsspec.filesystem("memory")
  assert json.loads(fs.cat(url.replace("memory://", "/")).decode())["steps"][1]["step"] == 2
  resumed = Summary(url, get_config("smoke"), resume_step=1)  # a resume drops records past the restored step
  assert resumed.data["steps"] == [{"step": 1, "curriculum/p_hat_mean": 0.5}]
  fs.rm("/genenv_test_summary", recursive=True)
