"""The device check's CPU self-test: --tiny runs every phase and prints the figures and verdicts."""

import math

from conftest import json_result

from genenv_jax import cli
from genenv_jax.bench import device


def test_tiny_device_check_prints_phases_utilisation_and_verdicts(capsys):
  assert cli.call(device, ["--tiny", "--plan", "analytic", "--repeats", "1"]) == 0
  printed = capsys.readouterr().out
  result = json_result(printed)  # its one JSON line
  assert "peak device memory: measured n/a on this backend; plan (analytic) predicts" in printed
  for phase in ("env_sampling", "agent_sampling", "verification", "agent_update", "env_update"):
    assert phase in result["phases"] and result["phases"][phase]["seconds"] > 0
  for phase in ("agent_update", "env_update"):
    assert 0 < result["utilisation"][phase]["mfu"] < 1  # a CPU against an H200's peak: tiny, but positive
  assert result["utilisation"]["agent_sampling"]["decode_tok_s"] > 0
  assert "agent_update MFU" in printed and "(target >= 35%)" in printed
  assert "agent decode HBM utilisation" in printed and "(target >= 60%)" in printed
  assert result["predicted_peak_bytes"] > 0 and result["measured_peak_bytes"] is None
  assert result["chip"] == "h200"
  assert all(math.isfinite(v) for v in result["stage_s"].values())


def test_the_full_shapes_are_the_issues():
  config = device.device_config(tiny=False)
  assert config.agent.model.hidden_size == 1536 and config.agent.model.num_layers == 28  # Qwen2.5-1.5B
  assert config.env.model.hidden_size == 896 and config.env.model.num_layers == 24  # Qwen2.5-0.5B
  assert config.agent.model.vocab_size == 151936 and config.agent.model.dtype == "bfloat16"
  assert (config.domain.agent_prompt_len, config.domain.agent_answer_len) == (1024, 4096)
  rows = (config.env.num_seeds + config.pools.num_replay) * config.agent.grpo.group_size
  assert rows == 128 and rows % config.agent.grpo.minibatches == 0
  from genenv_jax.training.config_checks import problems

  assert problems(config) == []
