"""The settings refactor (issue 33: one settings tree) changes how the step is configured, not what it computes: the
default config's initial state and its first co-evolution step are the same, bit for bit, as before it.

The references below were produced by this test's `state_digest` on the code before the refactor (commit b8dc475,
with the log-probs of issue 34's `sampler.policy_logprobs`, merged beside it: z_y - logsumexp(z) rounds differently
from log_softmax, so the step after it differs from b8dc475's in the last bits; b8dc475 + that change and the settings
tree + that change give the same digests), on one CPU device of the test session's eight (conftest: XLA:CPU's
numerics depend on the host device count too), with XLA's default CPU pipeline: the test runs them in a process of
its own, without the test session's cheap-compile flags (conftest.FAST_COMPILE_FLAGS). XLA's numerics differ across
backends and CPU features, so the test runs on the CPU only."""

import hashlib
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from coevolution_configs import tiny_config

from configs.default import get_config
from genenv_jax.coevolution.build import build

# state_digest(initial state), state_digest(state after one step), on the default config (no warm start).
# The second config takes the other branches: the policy-gradient env objective with K = 2, two GRPO mini-batches, seeds
# drawn from D_env, every valid task admitted to D_env.
REFERENCE = {
  "default": {
    "initial": "7a3a38f263e5fd9c510459dec80741b58dd4eff7f98ea39531550cc7d6c51710",
    "after_one_step": "0011bf17208ee3223e4cb8caeaa7890aae280bb35003382270faa18e75e2988d",
  },
  "tiny_pg": {
    "initial": "55cdc955ebbd5c75824c04ecd7a76cfab1d131657dd3e4873dc86e14d4aaaad5",
    "after_one_step": "142070fe5bd0ef59aa1d24e554dcbc7571fee3af70477e4cbad0d90cd62cb370",
  },
}
TINY_PG = {
  "env.objective": "pg",
  "env.samples_per_seed": 2,
  "env.num_seeds": 4,
  "agent.grpo.minibatches": 2,
  "pools.env_seed_mix": (0.25, 0.5, 0.25),
  "pools.env_admits": "valid",
}


def config_of(name: str):
  return get_config() if name == "default" else tiny_config(**TINY_PG)


def state_digest(state) -> str:
  """sha256 over the state's tree structure and every leaf's shape, dtype and bytes (host order)."""
  leaves, treedef = jax.tree.flatten(state)
  h = hashlib.sha256(str(treedef).encode())
  for leaf in leaves:
    a = np.asarray(jax.device_get(leaf))
    h.update(f"{a.shape}{a.dtype}".encode())
    h.update(np.ascontiguousarray(a).tobytes())
  return h.hexdigest()


def digests_of(name: str) -> dict[str, str]:
  """state_digest of the initial state and of the state after one jitted step, on one device."""
  run, state = build(config_of(name), devices=jax.devices()[:1])
  initial = state_digest(state)
  with jax.set_mesh(run.mesh):
    state, _ = run.coevolution.jit_step(run.state_shardings)(state)
  return {"initial": initial, "after_one_step": state_digest(state)}


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the references are CPU numerics")
def test_first_step_is_bit_identical_to_before_the_settings_tree():
  from conftest import FAST_COMPILE_FLAGS, PROJECT_ROOT  # here: the subprocess imports this module, not conftest

  env = dict(os.environ, PYTHONPATH=f"{PROJECT_ROOT}{os.pathsep}{PROJECT_ROOT / 'tests'}")
  env["XLA_FLAGS"] = env["XLA_FLAGS"].replace(FAST_COMPILE_FLAGS, "").strip()  # the default pipeline's numerics
  code = (
    "import json, test_first_step_unchanged as t; "
    "print('DIGESTS', json.dumps({name: t.digests_of(name) for name in t.REFERENCE}))"
  )
  proc = subprocess.run(
    [sys.executable, "-c", code],
    cwd=PROJECT_ROOT / "tests" / "unit" / "coevolution",
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  [line] = [x for x in proc.stdout.splitlines() if x.startswith("DIGESTS ")]
  assert json.loads(line[len("DIGESTS ") :]) == REFERENCE
