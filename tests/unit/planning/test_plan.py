"""genenv_jax.plan: the CLI compiles the real step on a virtual mesh and reports memory; planning.costs and
planning.analytic by hand.

The CLI runs in a subprocess because it sets XLA_FLAGS (its own device count) before JAX creates its backends.
"""

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from conftest import PROJECT_ROOT

from genenv_jax import plan
from genenv_jax.coevolution.settings import from_config
from genenv_jax.planning import architectures as plan_models
from genenv_jax.planning import costs, planner
from genenv_jax.planning import workload as plan_workload
from genenv_jax.planning.costs import GIB


def _run_plan(*args, timeout=240):
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
  return subprocess.run(
    [sys.executable, "-m", "genenv_jax.plan", *args],
    cwd=PROJECT_ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


# ---- the CLI on a small config -------------------------------------------------------------------------------------


def test_plan_cli_compiles_smoke_config_on_8_devices(tmp_path):
  out = tmp_path / "plan.json"
  proc = _run_plan(
    "--config=configs/default.py:smoke",
    "--devices=8",
    "--chip=v5p",
    "--config.mode=grpo",
    "--config.mesh.data=2",
    "--config.mesh.fsdp=4",
    "--config.agent.model.remat=full",
    "--config.env.model.remat=full",
    f"--json={out}",
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  text = proc.stdout
  for label in (
    "arguments",
    "outputs",
    "temporaries",
    "generated code",
    "alias/donated",
    "peak estimate",
    "FLOPs per device",
    "analytic memory per device",
    "analytic time on v5p",
    "MFU",
    "FITS",
  ):
    assert label in text, (label, text)
  r = json.loads(out.read_text())
  print(text)  # the memory figures, for the CI log
  m = r["memory"]
  assert r["config"]["mesh"] == {"data": 2, "fsdp": 4, "tensor": 1} and r["config"]["devices"] == 8
  assert m["arguments"] > 0 and m["outputs"] > 0 and m["temporaries"] > 0
  assert m["alias"] > 0  # the state is donated: outputs reuse its buffers
  assert m["peak"] == m["arguments"] + m["outputs"] + m["temporaries"] + m["generated_code"] - m["alias"]
  # every state leaf is an argument: the per-device state components add up to the argument bytes
  state = sum(v for k, v in r["components"].items() if k != "temporaries")
  assert state == m["arguments"]
  assert r["fits"] and 0 < r["utilisation"] < 0.01
  assert r["flops"]["xla_per_device_loops_once"] > 0
  # the analytic count of the loops-once program agrees with XLA's cost analysis to within a factor of 2
  ratio = r["flops"]["xla_per_device_loops_once"] / r["flops"]["analytic_per_device_loops_once"]
  assert 0.5 < ratio < 2.0, ratio
  an = r["analytic"]
  assert r["compiled"] and r["compile_s"]["compile"] > 0 and an["step_serial_s"] > 0
  assert 0 < an["training"]["mfu_serial"] <= an["training"]["mfu_overlapped"] <= 1
  assert [p["name"] for p in an["phases"]] == ["agent prefill", "agent decode", "agent update"]  # grpo: no env phases


def test_plan_cli_plans_a_config_without_a_slice_for_this_host():
  """The embedded default names no slice: plan takes this host's CPU devices and a named chip's figures, and says so."""
  proc = _run_plan("--config=configs/default.py", "--nocompile", timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "planned for this host's 1 CPU device, with the v5e's figures" in proc.stderr


def test_plan_cli_rejects_bad_arguments():
  proc = _run_plan("--config=configs/default.py:smoke", "--devices=0", timeout=120)
  assert proc.returncode == 2 and "--devices must be positive, got 0" in proc.stderr, proc.stderr[-2000:]


# ---- bad inputs, in process (this process has 8 devices from conftest) ---------------------------------------------


def _smoke():
  from configs import default

  return default.get_config("smoke")


def test_plan_rejects_unknown_chip():
  with pytest.raises(ValueError, match="unknown chip 'h100'; known chips: h200, v4, v5e, v5p, v6e"):
    planner.plan(_smoke(), 8, "h100", log=lambda _: None)


def test_plan_rejects_devices_the_mesh_cannot_use():
  c = _smoke()
  c.mesh.tensor = 4  # data=-1 takes the rest: 6 devices do not divide by 4
  with pytest.raises(ValueError, match="6 devices do not divide by 4"):
    planner.plan(c, 6, "v5p", log=lambda _: None)
  c = _smoke()
  c.mesh.data, c.mesh.fsdp = 1, 4
  with pytest.raises(ValueError, match="needs 4 devices, but 8 are available"):
    planner.plan(c, 8, "v5p", log=lambda _: None)


def test_plan_rejects_more_devices_than_jax_has_and_non_positive():
  with pytest.raises(ValueError, match="initialised with 8 devices, fewer than --devices=16"):
    planner.plan(_smoke(), 16, "v5p", log=lambda _: None)
  with pytest.raises(ValueError, match="--devices must be positive, got -3"):
    plan.set_device_count(-3)


def test_known_models_and_unknown_checkpoint():
  assert plan_models.known_model_name("/ckpt/Qwen2.5-7B-Instruct") == "qwen2.5-7b"
  assert plan_models.known_model_name("qwen2.5-7b") == "qwen2.5-7b"
  assert plan_models.known_model_name("/ckpt/Llama-3-8B") is None
  from configs import qwen2_5_7b

  mc = plan_models.resolve_model(from_config(qwen2_5_7b.get_config("v5p-64")).agent.model, vocab_size=512)
  assert (mc.hidden_size, mc.intermediate_size, mc.num_layers, mc.num_heads, mc.num_kv_heads, mc.vocab_size) == (
    3584,
    18944,
    28,
    28,
    4,
    152064,
  )
  assert mc.qkv_bias and not mc.tie_word_embeddings and mc.rematerializes and mc.dtype == "bfloat16"
  assert abs(mc.num_params - 7.6e9) < 0.05e9  # Qwen2.5-7B: 7.61B parameters
  config = _smoke()
  config.agent.model.hf_path = "/ckpt/Mystery-13B"
  with pytest.raises(ValueError, match="does not know the architecture of '/ckpt/Mystery-13B'"):
    plan_models.resolve_model(from_config(config).agent.model, vocab_size=512)


def test_qwen_config_variants():
  from configs import qwen2_5_7b

  c = qwen2_5_7b.get_config("")
  assert dict(c.mesh) == {"data": 1, "fsdp": -1, "tensor": 1} and c.slice == ""
  for name in qwen2_5_7b.SLICES:
    c = qwen2_5_7b.get_config(name)
    d = c.domain
    assert c.slice == name and d.name == "arithmetic"
    assert (d.agent_prompt_len, d.agent_answer_len, d.env_prompt_len, d.env_output_len) == (8000, 1000, 4096, 4096)
    assert c.env.num_seeds + c.pools.num_replay == 64 and c.agent.grpo.group_size == 8
  assert qwen2_5_7b.get_config("v5p-8").agent.model.arch == "qwen2.5-1.5b"
  assert qwen2_5_7b.get_config("v6e-64").env.model.arch == "qwen2.5-7b"
  c = qwen2_5_7b.get_config("api_bank,v5p-64")
  assert c.slice == "v5p-64" and c.domain.name == "api_bank" and c.domain.agent_prompt_len == 8000
  assert c.domain.env_prompt_len == 4096 and c.domain.env_output_len == qwen2_5_7b.TEXT_ENV_OUTPUT < 4096
  assert qwen2_5_7b.parse_variant(" v6e-8 , travelplanner ") == ("travelplanner", "v6e-8")
  assert qwen2_5_7b.get_config("bfcl").domain.name == "bfcl" and qwen2_5_7b.get_config("bfcl").slice == ""
  for bad in ("tpu-9", "v5p-64,v6e-64", "api_bank,bfcl"):
    with pytest.raises(ValueError, match=f"in variant '{bad}'"):
      qwen2_5_7b.get_config(bad)


# ---- --nocompile: the analytic plan at the paper's shapes (no compile, no domain data) ------------------------------


def test_plan_nocompile_paper_shapes_v5p_64(tmp_path):
  out = tmp_path / "plan.json"
  proc = _run_plan(
    "--config=configs/qwen2_5_7b.py:v5p-64", "--nocompile", "--attention=blockwise", f"--json={out}", timeout=120
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  print(proc.stdout)
  r = json.loads(out.read_text())
  c, an = r["config"], r["analytic"]
  assert not r["compiled"] and c["devices"] == 32 and c["chip"] == "v5p" and c["attention"] == "blockwise"
  assert c["lengths"] == {
    "agent_prompt_len": 8000,
    "agent_answer_len": 1000,
    "env_prompt_len": 4096,
    "env_output_len": 4096,
  }
  assert c["rows"] == {"env rows": 32, "agent rows": 512, "agent rows per mini-batch": 32}
  assert [p["name"] for p in an["phases"]] == [
    "env prefill",
    "env decode",
    "agent prefill",
    "agent decode",
    "agent update",
    "env update",
  ]
  by = {p["name"]: p for p in an["phases"]}
  assert by["env decode"]["bound"] == "memory" and by["agent update"]["bound"] == "compute"
  for name in ("agent update", "env update"):
    p = by[name]
    assert 0 < p["mfu_serial"] <= p["mfu_overlapped"] <= 1 and p["recompute_overhead"] > 0
    assert {col["name"] for col in p["collectives"]} == {
      "fsdp all-gather of each layer's weights, forward",
      "fsdp all-gather of each layer's weights, backward",
      "gradient reduce-scatter over fsdp",
    }  # tensor = 1: no tensor all-reduces
  assert an["step_serial_s"] == pytest.approx(sum(p["serial_s"] for p in an["phases"]))
  assert set(an["memory"]) == {"state", "env sampling", "agent sampling", "agent update", "env update"}
  assert set(an["memory"]["agent update"]) == {"checkpoints", "layer", "attention", "logits", "gradients", "weights"}
  assert r["memory"]["peak"] == int(an["peak_bytes"]) and r["fits"] == (an["peak_bytes"] <= 0.9 * 95 * GIB)
  for label in (
    "analytic memory per device",
    "analytic time on v5p",
    "MFU",
    "UPPER BOUND",
    "HBM-bandwidth",
    "ICI fsdp all-gather",
    "recompute overhead",
  ):
    assert label in proc.stdout, label


def test_plan_nocompile_benchmark_domain_without_its_data():
  # --nocompile never builds the domain: a missing data directory does not matter
  proc = _run_plan(
    "--config=configs/qwen2_5_7b.py:api_bank,v6e-64",
    "--nocompile",
    "--config.domain.data_dir=/nonexistent/genenv-data",
    timeout=120,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "64 x v6e (v6e-64)" in proc.stdout and "4096 prompt + 3584 output" in proc.stdout


def test_planning_domain_stands_in_for_missing_benchmark_data():
  from configs import qwen2_5_7b

  c = qwen2_5_7b.get_config("bfcl,v5p-64")
  c.domain.data_dir = "/nonexistent/genenv-data"
  planned, note = plan_workload.planning_domain(c)
  assert planned.domain.name == "arithmetic" and "/nonexistent/genenv-data does not exist" in note
  assert all(planned.domain[k] == c.domain[k] for k in plan_workload.LENGTHS)
  assert planned.domain.success_threshold == c.domain.success_threshold and planned.slice == "v5p-64"
  same, none = plan_workload.planning_domain(qwen2_5_7b.get_config("v5p-64"))
  assert none is None and same.domain.name == "arithmetic"


def test_slice_of_and_virtual_mesh():
  from configs import qwen2_5_7b

  assert plan_workload.slice_of(qwen2_5_7b.get_config("v6e-64")) == ("v6e", 64)
  assert plan_workload.slice_of(qwen2_5_7b.get_config("v5p-8")) == ("v5p", 4)
  assert plan_workload.slice_of(qwen2_5_7b.get_config("v5p-64"), devices=16, chip_name="v4") == ("v4", 16)
  with pytest.raises(ValueError, match="names no TPU slice"):
    plan_workload.slice_of(_smoke())
  assert plan_workload.virtual_mesh_sizes({"data": 1, "fsdp": -1, "tensor": 2}, 64) == {
    "data": 1,
    "fsdp": 32,
    "tensor": 2,
  }
  assert plan_workload.virtual_mesh_sizes({"data": 1, "fsdp": 32, "tensor": 1}, 32) == {
    "data": 1,
    "fsdp": 32,
    "tensor": 1,
  }
  with pytest.raises(ValueError, match="needs 64 devices, but the slice has 32"):
    plan_workload.virtual_mesh_sizes({"data": 2, "fsdp": 32, "tensor": 1}, 32)
  with pytest.raises(ValueError, match="6 devices do not divide by 4"):
    plan_workload.virtual_mesh_sizes({"data": -1, "fsdp": 1, "tensor": 4}, 6)


def test_workload_of_config():
  from configs import qwen2_5_7b

  w = plan_workload.workload_of(qwen2_5_7b.get_config("v5p-64"))
  assert (w.env_rows, w.agent_rows, w.minibatches) == (32, 512, 16)
  assert (w.agent_prompt, w.agent_answer, w.env_prompt, w.env_output) == (8000, 1000, 4096, 4096)
  assert w.agent_reference and w.env_train
  c = qwen2_5_7b.get_config("v5p-64")
  c.mode = "grpo"
  assert plan_workload.workload_of(c).env_rows == 0 and plan_workload.workload_of(c).agent_rows == 32 * 8
  with pytest.raises(ValueError, match="leaves a domain length at 0"):
    plan_workload.workload_of(_smoke())


def test_workload_takes_the_trees_defaults_for_keys_a_config_lacks():
  """A config saved before `logprob_chunk` existed plans with the tree's 512, as its run computes, not 0 (no chunking,
  the raw-ConfigDict fallback plan once had)."""
  from configs import qwen2_5_7b

  c = qwen2_5_7b.get_config("v5p-64")
  for who in (c.agent, c.env):
    del who["logprob_chunk"]
  w = plan_workload.workload_of(c)
  assert w.agent_logprob_chunk == w.env_logprob_chunk == from_config(c).agent.logprob_chunk == 512


# ---- planning.costs by hand -----------------------------------------------------------------------------------------


def test_chip_table_and_slices():
  v5p = costs.chip(" V5P ")
  assert (v5p.peak_flops, v5p.hbm_bytes, v5p.hbm_bandwidth, v5p.ici_bandwidth) == (459e12, 95 * GIB, 2765e9, 600e9)
  assert costs.chip("v6e").peak_flops == 918e12 and costs.chip("v5e").hbm_bytes == 16 * GIB
  assert costs.chip("v4").hbm_bandwidth == 1200e9 and costs.chip("v6e").ici_bandwidth == 400e9
  assert costs.slice_chips("v5p-64") == ("v5p", 32) and costs.slice_chips("v6e-64") == ("v6e", 64)
  assert costs.slice_chips("v5litepod-16") == ("v5e", 16) and costs.slice_chips("v4-8") == ("v4", 4)
  with pytest.raises(ValueError, match="must be a positive multiple of 2"):
    costs.slice_chips("v5p-7")
  with pytest.raises(ValueError, match="unknown TPU slice 'h100-8'"):
    costs.slice_chips("h100-8")


def test_memory_peak_and_fit_verdict():
  m = costs.Memory(arguments=10, outputs=6, temporaries=3, generated_code=1, alias=5)
  assert m.peak == 15
  v = costs.fit_verdict(80 * GIB, 95 * GIB)  # usable 0.9 x 95 = 85.5 GiB
  assert v.fits and v.usable == 85.5 * GIB and v.shortfall == 0 and v.utilisation == pytest.approx(80 / 95)
  v = costs.fit_verdict(90 * GIB, 95 * GIB)
  assert not v.fits and v.shortfall == pytest.approx(4.5 * GIB)
  assert costs.fit_verdict(95 * GIB, 95 * GIB, usable_fraction=1.0).fits
  for bad in (dict(hbm_bytes=0), dict(usable_fraction=0.0), dict(usable_fraction=1.5)):
    with pytest.raises(ValueError):
      costs.fit_verdict(1, **{"hbm_bytes": 10, **bad})


SHAPE = costs.Shape(body_params=100, head_params=10, layers=2, heads=3, head_dim=4, kv_heads=1, param_bytes=1000)


def test_forward_flops_and_causal_keys():
  # 2*100*2*5 + 2*10*2*1 + 4*2*5*5*3*4*2 = 2000 + 40 + 4800
  assert costs.forward_flops(SHAPE, rows=2, tokens=5, keys=5, head_tokens=1) == 6840
  assert costs.causal_keys(5) == 3.0  # (1 + 2 + 3 + 4 + 5) / 5
  assert costs.causal_keys(4, offset=10) == 12.5  # queries see 11..14 keys
  s = costs.Shape(
    body_params=1, head_params=40, layers=3, heads=4, head_dim=8, kv_heads=2, param_bytes=1, hidden=10, dtype_bytes=2
  )
  assert s.vocab == 4 and s.kv_bytes_per_token == 2 * 3 * 2 * 8 * 2
  int8 = dataclasses.replace(s, kv_cache="int8")  # one byte per element plus a float32 scale per head vector
  assert int8.kv_bytes_per_token == 2 * 3 * 2 * (8 + 4)


def test_advice_ranking():
  ranked = costs.rank_advice({"temporaries": 50, "optimizer": 30, "parameters": 15, "pools": 0.5})
  assert [a.component for a in ranked] == ["temporaries", "optimizer", "parameters"]  # pools < 1% left out
  assert "minibatches" in ranked[0].knob and "fsdp" in ranked[1].knob
  assert costs.rank_advice({"references": 3, "optimizer_replicated": 7})[0].component == "optimizer_replicated"
  with pytest.raises(ValueError, match="unknown memory components"):
    costs.rank_advice({"weights": 1})


def test_divisibility_warnings():
  w = costs.divisibility_warnings({"env rows": 48, "agent rows": 512}, 32)
  assert len(w) == 1 and w[0].startswith("env rows = 48 does not divide by the 32")


def test_extrapolate_along_layers():
  # memory 10 at 2 layers and 16 at 4 layers: 3 per layer, 4 fixed -> 28 layers: 4 + 3 * 28 = 88
  assert costs.extrapolate(2, 10, 4, 16, 28) == 88
  with pytest.raises(ValueError, match="two different points"):
    costs.extrapolate(2, 10, 2, 16, 28)


# ---- planning.analytic by hand ---------------------------------------------------------------------------------------

from genenv_jax.planning import analytic  # noqa: E402

# vocab 10, kv bytes per token 2 (K, V) x 2 layers x 2 kv heads x 2 dims x 2 bytes = 32
A = costs.Shape(
  body_params=1000,
  head_params=200,
  layers=2,
  heads=4,
  head_dim=2,
  kv_heads=2,
  param_bytes=4000,
  hidden=20,
  intermediate=40,
  dtype_bytes=2,
)
M = analytic.MeshShape(data=1, fsdp=4, tensor=2)


def test_remat_policy_and_attention_names():
  assert (
    analytic.remat_policy(True) == "full"
    and analytic.remat_policy(False) == "none"
    and analytic.remat_policy(None) == "none"
  )
  assert analytic.remat_policy("save_dots") == "save_dots"
  with pytest.raises(ValueError, match="unknown remat policy 'sometimes'"):
    analytic.remat_policy("sometimes")
  assert (
    not analytic.memory_efficient("naive")
    and analytic.memory_efficient("blockwise")
    and analytic.memory_efficient("auto")
  )
  with pytest.raises(ValueError, match="unknown attention implementation 'flash'"):
    analytic.memory_efficient("flash")
  with pytest.raises(ValueError, match="mesh axis fsdp must be positive"):
    analytic.MeshShape(1, 0, 1)


def test_collective_volumes():
  assert (
    analytic.gather_bytes(100, 4) == 75
    and analytic.all_reduce_bytes(100, 4) == 150
    and analytic.gather_bytes(100, 1) == 0
  )


def test_train_collectives_by_hand():
  got = {
    c.name: (c.bytes, c.count)
    for c in analytic.train_collectives(A, M, rows=16, tokens=10, forwards=1, updates=2, remat="full")
  }
  # weights per tensor shard 4000 / 2 = 2000; each gather moves 3/4 of them: 1500
  assert got["fsdp all-gather of each layer's weights, forward"] == (2 * 2 * 1500, 2 * 2 * 2)  # 2 updates x 2 fwd
  assert got["fsdp all-gather of each layer's weights, backward"] == (2 * 1500, 4)
  assert got["gradient reduce-scatter over fsdp"] == (2 * 1500, 4)
  # activations per chip 16/4 rows x 10 x 20 x 2 bytes = 1600; all-reduce over 2: 1600 each; 2 x 2 layers x 4 passes
  # (reference forward, forward, backward, remat recompute)
  assert got["tensor all-reduces of the activations (2 per layer per pass)"] == (16 * 1600, 16)
  assert len(got) == 4
  got = {
    c.name: (c.bytes, c.count) for c in analytic.train_collectives(A, analytic.MeshShape(2, 4, 2), 16, 10, 1, 2, "none")
  }
  assert got["gradient all-reduce over data"] == (2 * 500, 4)  # 2 x (2000/4) x 1/2 per update
  assert got["tensor all-reduces of the activations (2 per layer per pass)"] == (12 * 800, 12)
  assert [c.name for c in analytic.train_collectives(A, analytic.MeshShape(1, 1, 1), 16, 10, 1, 2, "full")] == []


def test_train_cost_flops_by_hand():
  # tokens 5, causal mean keys 3. model fwd = 2*1000*2*5 + 2*200*2*3 + 4*2*5*3*4*2*2 = 20000 + 2400 + 1920
  c = analytic.train_cost("t", A, M, rows=2, prompt=2, response=3, forwards=1, updates=1, remat="full", efficient=False)
  assert c.model_flops == 4 * 24320
  # naive scores all 5 keys: attention 3200, fwd 25600; remat recomputes the layers (not the head): 20000 + 3200
  assert c.recompute == {"remat (layer forward again)": 23200, "masked attention (causal half scored)": 4 * 1280}
  assert c.flops == 4 * 24320 + 23200 + 5120 and c.kind == "train" and c.hbm_bytes == 0
  c = analytic.train_cost("t", A, M, 2, 2, 3, forwards=1, updates=1, remat="save_dots", efficient=True, logprob_chunk=2)
  # flash backward recomputes QK^T (2*2*5*3*4*2*2); chunked log-probs recompute the head (2*200*2*3)
  assert c.recompute == {"flash backward (QKᵀ again)": 960, "chunked log-probs (LM head again)": 2400}
  assert c.flops == 4 * 24320 + 3360


def test_sampling_costs_by_hand():
  pf, dec = analytic.sampling_costs("s", A, M, rows=8, prompt=4, new=2, efficient=True)
  # cache bytes per slot on a chip: 8/4 rows x 32 / 2 (kv heads over tensor) = 32; decode keys 5 and 6: mean 5.5
  assert pf.hbm_bytes == 2000 + 4 * 32 and dec.hbm_bytes == 2 * (2000 + 5.5 * 32)
  assert dec.model_flops == dec.flops == 2 * (2 * 1000 * 8 + 2 * 200 * 8 + 4 * 8 * 5.5 * 4 * 2 * 2)
  assert {c.name: (c.bytes, c.count) for c in pf.collectives} == {
    "fsdp all-gather of the weights (once, hoisted out of the decode loop)": (1500, 2),
    "tensor all-reduces of the activations (2 per layer per pass)": (4 * 320, 4),
  }
  assert [(c.bytes, c.count) for c in dec.collectives] == [(8 * 80, 8)]
  _, naive = analytic.sampling_costs("s", A, M, 8, 4, 2, efficient=False)
  assert naive.hbm_bytes == 2 * (2000 + 6 * 32) and naive.model_flops == dec.model_flops
  assert naive.flops == 2 * (2 * 1000 * 8 + 2 * 200 * 8 + 4 * 8 * 6 * 4 * 2 * 2)


def test_timed_serial_overlapped_mfu():
  chip = costs.Chip("t", peak_flops=1e12, hbm_bytes=GIB, hbm_bandwidth=1e9, ici_bandwidth=1e9, source="")
  cost = analytic.Cost(
    "p", "train", model_flops=6e12, flops=8e12, hbm_bytes=1e9, collectives=(analytic.Collective("x", 2e9, 1),)
  )
  t = analytic.timed(cost, devices=2, chip=chip)  # compute 4 s, HBM 1 s, ICI 2 s
  assert (t.compute_s, t.hbm_s, t.ici_s, t.serial_s, t.overlapped_s) == (4.0, 1.0, 2.0, 6.0, 4.0)
  assert t.mfu_serial == pytest.approx(0.5) and t.mfu_overlapped == pytest.approx(0.75) and t.bound == "compute"
  assert t.hbm_utilisation == pytest.approx(1 / 6) and t.recompute_overhead == pytest.approx(1 / 3)
  both = analytic.combined("c", [t, t], 2, chip)
  assert both["serial_s"] == 12.0 and both["mfu_serial"] == pytest.approx(0.5)
  with pytest.raises(ValueError, match="devices must be positive"):
    analytic.timed(cost, 0, chip)


def test_memory_breakdown_by_hand():
  m = analytic.train_memory(A, M, rows=8, prompt=6, response=4, remat="full", efficient=False)
  # 2 rows per chip, 10 tokens; one layer: 5*20 + (8+4)*2/2 + 3*40/2 = 172 elements per token
  assert m == {
    "checkpoints": 2 * 2 * 10 * 20 * 2,
    "layer": 2 * 2 * 10 * 172 * 2,
    "attention": 2 * 2 * 100 * 4 * 3,
    "logits": 3 * 2 * 4 * 5 * 4,
    "gradients": 500,
    "weights": 2 * 500 * 2 / 2,
  }
  eff = analytic.train_memory(A, M, 8, 6, 4, remat="save_dots", efficient=True, logprob_chunk=2)
  assert eff["checkpoints"] == 2 * 2 * 10 * (20 + 8 + 40 + 40) * 2  # input + q,k,v + o, down + gate, up
  assert eff["attention"] == 2 * 2 * (100 * 4 * 4 + 10 * 8) and eff["logits"] == 3 * 2 * 2 * 5 * 4
  s = analytic.sampling_memory(A, M, rows=8, prompt=4, new=2, efficient=False, prefill_rows=4)
  # one row per chip in flight: one layer 4 x 172 x 2, naive scores 2 heads x 4 x 4 x 4 x 2, logits 10/2 x 4
  assert s == {"kv_cache": 2 * 6 * 32 / 2, "weights": 2000, "prefill": 1376 + 256 + 20}
  assert analytic.sampling_memory(A, M, 8, 4, 2, efficient=False)["prefill"] == 2 * (1376 + 256 + 20)
  assert analytic.state_memory((A, A), M) == {"parameters": 1000, "references": 1000, "optimizer": 2000}


def test_analyse_assembles_phases_and_peak():
  chip = costs.chip("v5p")
  w = analytic.Workload(
    env_rows=8, agent_rows=16, minibatches=2, agent_prompt=4, agent_answer=2, env_prompt=4, env_output=2
  )
  a = analytic.analyse(w, A, A, M, chip, agent_remat=True, env_remat="none", attention="blockwise")
  assert [t.cost.name for t in a.phases] == [
    "env prefill",
    "env decode",
    "agent prefill",
    "agent decode",
    "agent update",
    "env update",
  ]
  totals = {k: sum(v.values()) for k, v in a.memory.items() if k != "state"}
  assert a.peak_phase == max(totals, key=totals.get)
  assert a.peak_bytes == pytest.approx(sum(a.memory["state"].values()) + totals[a.peak_phase])
  assert a.step_serial_s == pytest.approx(sum(t.serial_s for t in a.phases))
  train = [t for t in a.phases if t.cost.kind == "train"]
  assert a.training["serial_s"] == pytest.approx(sum(t.serial_s for t in train))
  assert a.memory["agent update"] == analytic.train_memory(A, M, 8, 4, 2, "full", True)
  grpo = analytic.analyse(dataclasses.replace(w, env_rows=0), A, A, M, chip, agent_remat="full", env_remat="full")
  assert [t.cost.name for t in grpo.phases] == ["agent prefill", "agent decode", "agent update"]
  with pytest.raises(ValueError, match="must be a positive multiple of the mini-batches"):
    analytic.Workload(
      env_rows=8, agent_rows=10, minibatches=4, agent_prompt=4, agent_answer=2, env_prompt=4, env_output=2
    )
