"""genenv_jax.plan: the CLI compiles the real step on a virtual mesh and reports memory; plan_math by hand.

The CLI runs in a subprocess because it sets XLA_FLAGS (its own device count) before JAX creates its backends.
"""

import json
import os
import subprocess
import sys

import pytest

from genenv_jax import plan, plan_math
from genenv_jax.plan_math import GIB

from conftest import PROJECT_ROOT


def _run_plan(*args, timeout=240):
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
  return subprocess.run([sys.executable, "-m", "genenv_jax.plan", *args], cwd=PROJECT_ROOT, env=env,
                        capture_output=True, text=True, timeout=timeout)


# ---- the CLI on a small config -------------------------------------------------------------------------------------


def test_plan_cli_compiles_smoke_config_on_8_devices(tmp_path):
  out = tmp_path / "plan.json"
  proc = _run_plan("--config=configs/default.py:smoke", "--devices=8", "--chip=v5p", "--config.mode=grpo",
                   "--config.mesh.data=2", "--config.mesh.fsdp=4", "--config.agent.model.remat=True",
                   "--config.env.model.remat=True", f"--json={out}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  text = proc.stdout
  for label in ("arguments", "outputs", "temporaries", "generated code", "alias/donated", "peak estimate",
                "FLOPs per device", "estimated step time", "FITS"):
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
  assert r["compile_s"]["compile"] > 0 and r["step_time_s"] > 0 and 0 < r["mfu"] <= 1


def test_plan_cli_rejects_bad_arguments():
  proc = _run_plan("--config=configs/default.py:smoke", "--devices=0", timeout=120)
  assert proc.returncode == 2 and "--devices must be positive, got 0" in proc.stderr, proc.stderr[-2000:]


# ---- bad inputs, in process (this process has 8 devices from conftest) ---------------------------------------------


def _smoke():
  from configs import default
  return default.get_config("smoke")


def test_plan_rejects_unknown_chip():
  with pytest.raises(ValueError, match="unknown chip 'h100'; known chips: v4, v5e, v5p, v6e"):
    plan.plan(_smoke(), 8, "h100", log=lambda _: None)


def test_plan_rejects_devices_the_mesh_cannot_use():
  c = _smoke()
  c.mesh.tensor = 4  # data=-1 takes the rest: 6 devices do not divide by 4
  with pytest.raises(ValueError, match="6 devices do not divide by 4"):
    plan.plan(c, 6, "v5p", log=lambda _: None)
  c = _smoke()
  c.mesh.data, c.mesh.fsdp = 1, 4
  with pytest.raises(ValueError, match="needs 4 devices, but 8 are available"):
    plan.plan(c, 8, "v5p", log=lambda _: None)


def test_plan_rejects_more_devices_than_jax_has_and_non_positive():
  with pytest.raises(ValueError, match="initialised with 8 devices, fewer than --devices=16"):
    plan.plan(_smoke(), 16, "v5p", log=lambda _: None)
  with pytest.raises(ValueError, match="--devices must be positive, got -3"):
    plan.set_device_count(-3)


def test_known_models_and_unknown_checkpoint():
  assert plan.known_model_name("/ckpt/Qwen2.5-7B-Instruct") == "qwen2.5-7b"
  assert plan.known_model_name("qwen2.5-7b") == "qwen2.5-7b"
  assert plan.known_model_name("/ckpt/Llama-3-8B") is None
  from configs import qwen2_5_7b
  mc = plan.resolve_model(qwen2_5_7b.get_config("v5p-64").agent.model, vocab_size=512)
  assert (mc.hidden_size, mc.intermediate_size, mc.num_layers, mc.num_heads, mc.num_kv_heads, mc.vocab_size) == (
      3584, 18944, 28, 28, 4, 152064)
  assert mc.qkv_bias and not mc.tie_word_embeddings and mc.remat and mc.dtype == "bfloat16"
  assert abs(mc.num_params - 7.6e9) < 0.05e9  # Qwen2.5-7B: 7.61B parameters
  cfg = _smoke().agent.model
  cfg.hf_path = "/ckpt/Mystery-13B"
  with pytest.raises(ValueError, match="does not know the architecture of '/ckpt/Mystery-13B'"):
    plan.resolve_model(cfg, vocab_size=512)


def test_qwen_config_variants():
  from configs import qwen2_5_7b
  c = qwen2_5_7b.get_config("")
  assert dict(c.mesh) == {"data": 1, "fsdp": -1, "tensor": 1}
  for name in qwen2_5_7b.SLICES:
    c = qwen2_5_7b.get_config(name)
    assert c.domain.agent_prompt_len + c.domain.agent_answer_len == 9000
    assert c.env.num_seeds + c.pools.num_replay == 64 and c.agent.grpo.group_size == 8
  with pytest.raises(ValueError, match="unknown variant 'tpu-9'"):
    qwen2_5_7b.get_config("tpu-9")


# ---- plan_math by hand ---------------------------------------------------------------------------------------------


def test_chip_table():
  v5p = plan_math.chip(" V5P ")
  assert (v5p.peak_flops, v5p.hbm_bytes, v5p.hbm_bandwidth) == (459e12, 95 * GIB, 2765e9)
  assert plan_math.chip("v6e").peak_flops == 918e12 and plan_math.chip("v5e").hbm_bytes == 16 * GIB
  assert plan_math.chip("v4").hbm_bandwidth == 1200e9


def test_memory_peak_and_fit_verdict():
  m = plan_math.Memory(arguments=10, outputs=6, temporaries=3, generated_code=1, alias=5)
  assert m.peak == 15
  v = plan_math.fit_verdict(80 * GIB, 95 * GIB)           # usable 0.9 x 95 = 85.5 GiB
  assert v.fits and v.usable == 85.5 * GIB and v.shortfall == 0 and v.utilisation == pytest.approx(80 / 95)
  v = plan_math.fit_verdict(90 * GIB, 95 * GIB)
  assert not v.fits and v.shortfall == pytest.approx(4.5 * GIB)
  assert plan_math.fit_verdict(95 * GIB, 95 * GIB, usable_fraction=1.0).fits
  for bad in (dict(hbm_bytes=0), dict(usable_fraction=0.0), dict(usable_fraction=1.5)):
    with pytest.raises(ValueError):
      plan_math.fit_verdict(1, **{"hbm_bytes": 10, **bad})


SHAPE = plan_math.Shape(body_params=100, head_params=10, layers=2, heads=3, head_dim=4, kv_heads=1, param_bytes=1000)


def test_forward_and_phase_flops():
  # 2*100*2*5 + 2*10*2*1 + 4*2*5*5*3*4*2 = 2000 + 40 + 4800
  assert plan_math.forward_flops(SHAPE, rows=2, tokens=5, keys=5, head_tokens=1) == 6840
  fwd = plan_math.forward_flops(SHAPE, 2, 5, 5, 3)
  p = plan_math.train_phase("t", SHAPE, rows=2, prompt=2, response=3, remat=True, passes_fwd=1)
  assert p.model_flops == 4 * fwd and p.flops == 5 * fwd and p.hbm_bytes == 0
  assert plan_math.train_phase("t", SHAPE, 2, 2, 3, remat=False).flops == 3 * fwd
  one = plan_math.Shape(body_params=100, head_params=10, layers=1, heads=1, head_dim=2, kv_heads=1, param_bytes=1000)
  s = plan_math.sampling_phase("s", one, rows=2, prompt=3, new=2, devices=2, tensor=1, kv_bytes_per_token=4)
  # prefill 1200 + 40 + 144 = 1384; each decode step 400 + 40 + 4*2*1*5*1*2 = 520; bytes 2 * (1000 + 2*5*4/2)
  assert s.flops == 1384 + 2 * 520 and s.model_flops == s.flops and s.hbm_bytes == 2 * 1020


def test_step_estimate_roofline_and_mfu():
  a = plan_math.Phase("a", flops=8e12, model_flops=6e12, hbm_bytes=1e9)   # compute 8e12/2/1e12 = 4 s > 1 s
  b = plan_math.Phase("b", flops=0.0, model_flops=0.0, hbm_bytes=3e9)     # memory 3 s
  e = plan_math.step_estimate([a, b], devices=2, peak_flops=1e12, hbm_bandwidth=1e9)
  assert e.seconds == pytest.approx(7.0)
  assert e.phases == (("a", pytest.approx(4.0), "compute"), ("b", pytest.approx(3.0), "memory"))
  assert e.mfu == pytest.approx(6e12 / (2 * 1e12 * 7.0))
  with pytest.raises(ValueError, match="devices must be positive"):
    plan_math.step_estimate([a], devices=0, peak_flops=1e12, hbm_bandwidth=1e9)


def test_advice_ranking():
  ranked = plan_math.rank_advice({"temporaries": 50, "optimizer": 30, "parameters": 15, "pools": 0.5})
  assert [a.component for a in ranked] == ["temporaries", "optimizer", "parameters"]  # pools < 1% left out
  assert "minibatches" in ranked[0].knob and "fsdp" in ranked[1].knob
  assert plan_math.rank_advice({"references": 3, "optimizer_replicated": 7})[0].component == "optimizer_replicated"
  with pytest.raises(ValueError, match="unknown memory components"):
    plan_math.rank_advice({"weights": 1})


def test_divisibility_warnings():
  w = plan_math.divisibility_warnings({"env rows": 48, "agent rows": 512}, 32)
  assert len(w) == 1 and w[0].startswith("env rows = 48 does not divide by the 32")


def test_extrapolate_along_layers():
  # memory 10 at 2 layers and 16 at 4 layers: 3 per layer, 4 fixed -> 28 layers: 4 + 3 * 28 = 88
  assert plan_math.extrapolate(2, 10, 4, 16, 28) == 88
  with pytest.raises(ValueError, match="two different points"):
    plan_math.extrapolate(2, 10, 2, 16, 28)
