"""The step's numerics stay put: the default config's initial state and its first co-evolution step, and a tiny
config's taking the other branches, are the same, bit for bit, as when the references below were taken. A change that
moves them on purpose takes new references (`digests_of`) and says why in its commit.

History. The settings refactor (issue 33: one settings tree) was checked against digests of the code before it
(commit b8dc475 with issue 34's `sampler.policy_logprobs`), taken with XLA's default CPU pipeline in a process of its
own. The code at 1a0cdfb still gave those digests; the references below are that code's under the test session's own
flags (conftest: XLA:CPU's cheapest pipeline, `cpu_pipeline.CHEAPEST`, whose numerics differ in the last bits), on one
CPU device of the session's eight (XLA:CPU's numerics depend on the host device count too), so that the test runs in
the session and its compilation cache. XLA's numerics differ across backends and CPU features, so the test runs on the
CPU only."""

import hashlib

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
    "initial": "ac9b8940c87ce898b5ba9d2ef71b24da61ea2171b936c4043ceaa5f93be1b524",
    "after_one_step": "6065d1c91cf84045b9577568b081e3342f40cee4862d756793d88ca21a5c8a28",
  },
  "tiny_pg": {
    "initial": "a8528c86d5cf24dc8e22b99981c40d4ef71111134b5a16c6599f74918870ac44",
    "after_one_step": "51c12f07a3beade60e573ca099efb906710220d07051717f2dcef683b93c038d",
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
@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_first_step_is_bit_identical_to_the_references(name):
  assert digests_of(name) == REFERENCE[name]
