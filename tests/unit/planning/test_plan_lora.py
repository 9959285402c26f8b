"""plan with LoRA (agent.lora / env.lora, models/lora.py): the state keeps no reference copy, AdamW moments and
gradients are the adapters' alone, in the analytic figures (by hand, and for the 7B config) and in the abstract state
that plan compiles for."""

import json
import os
import subprocess
import sys

import jax
import pytest
from coevolution_configs import tiny_config
from conftest import PROJECT_ROOT

from genenv_jax.coevolution.build import build
from genenv_jax.models import lora
from genenv_jax.planning import analytic, costs

SHAPE = costs.Shape(
  body_params=10_000,
  head_params=1_000,
  layers=2,
  heads=4,
  head_dim=8,
  kv_heads=2,
  param_bytes=22_000,
  hidden=32,
  intermediate=64,
)
MESH = analytic.MeshShape(data=1, fsdp=2, tensor=1)


def _run_plan(*args, timeout=120):
  """The plan CLI in a subprocess (it sets its own XLA_FLAGS before JAX starts)."""
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
  command = [sys.executable, "-m", "genenv_jax.plan", *args]
  return subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_adapter_count_by_hand():
  spec = lora.LoraSpec(rank=4, alpha=8.0, targets=("q_proj", "o_proj", "down_proj"))
  # q: 32 + 32, o: 32 + 32, down: 64 + 32, over 2 layers at rank 4
  assert analytic.lora_params(SHAPE, spec) == 2 * 4 * (64 + 64 + 96)
  assert analytic.lora_bytes(SHAPE, spec) == 4 * 2 * 4 * 224 and analytic.lora_bytes(SHAPE, None) == 0


def test_state_memory_keeps_no_reference_and_moments_for_the_adapters_only():
  spec = lora.LoraSpec(rank=4, alpha=8.0)
  adapters = analytic.lora_bytes(SHAPE, spec)
  full = analytic.state_memory((SHAPE, SHAPE), MESH)
  assert full == {"parameters": 22_000, "references": 22_000, "optimizer": 44_000}
  both = analytic.state_memory((SHAPE, SHAPE), MESH, adapters=(spec, spec))
  assert both == {"parameters": 22_000 + adapters, "references": 0, "optimizer": 2 * adapters}
  agent_only = analytic.state_memory((SHAPE, SHAPE), MESH, adapters=(spec, None))
  assert agent_only == {"parameters": 22_000 + adapters / 2, "references": 11_000, "optimizer": 22_000 + adapters}
  g = analytic.train_memory(SHAPE, MESH, 4, 4, 2, "full", True, 0, float(adapters))["gradients"]
  assert g == adapters / 2


def test_plan_of_the_7b_config_with_lora(tmp_path):
  figures = {}
  for name, flags in (("full", []), ("lora", ["--config.agent.lora.enabled=true", "--config.env.lora.enabled=true"])):
    out = tmp_path / f"{name}.json"
    proc = _run_plan("--config=configs/qwen2_5_7b.py:v5p-64", "--nocompile", f"--json={out}", *flags, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures[name] = json.loads(out.read_text())["analytic"]["memory"]
  full, lo = figures["full"], figures["lora"]
  assert lo["state"]["references"] == 0 and full["state"]["references"] > 0
  # Qwen2.5-7B, r = 8 on every projection: about 20M adapter parameters against 7.6B
  assert lo["state"]["optimizer"] < full["state"]["optimizer"] / 100
  assert lo["agent update"]["gradients"] < full["agent update"]["gradients"] / 100
  assert lo["state"]["parameters"] == pytest.approx(full["state"]["parameters"], rel=0.01)


def test_the_abstract_state_plan_compiles_holds_adapter_moments_only():
  config = tiny_config(**{"agent.lora.enabled": True, "env.lora.enabled": True})
  _, state = build(config, devices=jax.devices()[:1], abstract=True)
  assert state.agent_ref is None and state.env_ref is None
  size = lambda t: sum(x.size for x in jax.tree.leaves(t))  # noqa: E731
  for params, opt in ((state.agent, state.agent_opt), (state.env, state.env_opt)):
    adapters, base = lora.partition(params)
    assert base is not None and 2 * size(adapters) <= size(opt) <= 2 * size(adapters) + 8
