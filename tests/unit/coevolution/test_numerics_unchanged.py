"""The demo's numerics stay put, on any x86 CPU: the warm-started state and the state after each of the first
co-evolution steps hash to the references below, bit for bit, under XLA:CPU's portable pipeline
(`genenv_jax.scripts.numerics_digest`, `parallel.cpu_pipeline.PORTABLE`: SSE4.2 code, no YNNPACK/XNNPACK/oneDNN
kernels chosen by the CPU at run time, single-threaded Eigen, one device), in a process of its own.

A change that moves them on purpose takes new references here, says why in its commit, and re-runs the demo's sweep
behind every README figure it moves (README, "What the default shows", names the commit its tables came from).

History. Until 2026-12-06 the guard was `test_first_step_unchanged`: one step's digest under the test session's own
flags (XLA's default kernels, 8 host devices). Its references held on the CPU they were taken on and failed on
another (an AVX-512 host; this AVX2 host too), and it never saw the warm start, whose numerics commit 026e543 had moved
(sampler.policy_logprobs: log π = z_y - logsumexp(z) in place of log_softmax(z)[y], the same maths rounded otherwise;
docs/EXPERIMENTS.md, "The demo across machines")."""

import json
import os
import subprocess
import sys

import pytest
from coevolution_configs import TINY
from conftest import PROJECT_ROOT

from genenv_jax.scripts.numerics_digest import DIGEST_FLAGS

# The second case takes the step's other branches: the policy-gradient env objective with K = 2, two GRPO
# mini-batches, seeds drawn from D_env, every valid task admitted to D_env (on the tests' tiny config).
TINY_PG = {
  "env.objective": "pg",
  "env.samples_per_seed": 2,
  "env.num_seeds": 4,
  "agent.grpo.minibatches": 2,
  "pools.env_seed_mix": (0.25, 0.5, 0.25),
  "pools.env_admits": "valid",
}
CASES = {
  "default": ["--config=configs/default.py", "--agent_steps=100", "--env_steps=20", "--steps=10"],
  "tiny_pg": [
    "--config=configs/default.py:smoke+tiny",
    "--agent_steps=3",
    "--env_steps=3",
    "--steps=2",
    *(f"--set={k}={v}" for k, v in {**TINY, **TINY_PG}.items() if not k.startswith("warm_start.")),
  ],
}
# Taken at the commit that added this test (on 29197c3's step, which the LoRA and GGUF merges left bit-identical).
REFERENCE = {
  "default": {
    "warm_start": "885bfe426f471e67e5ae94eb0476557dd4e25d76c062dd8d93958c2614c6e868",
    "steps": [
      "abc01c60e515fe267d8f1271972d7f2ea06184a80af2002e1de6889868ad4986",
      "c25739ab1c8a2d78ab74f82ce2dfe2353857a4e10cc532a5f0d1728178f2556a",
      "dd6c73116a7a16b35ded3f1a5f6a4df12308941378295b26df1c59d6b3d7f8a4",
      "4064f4b0bdcb86ba329227d3d0fc930eaaaf1d2c203ca8094b335415a8d5796a",
      "182d410bda3d8234c88e489bf9efe9ed769628fb7913c7deffe8121f96b25edb",
      "d0214342939e6ce6d3f9174573c36659c0d75c77e0658b3fc2b30677ebc47daa",
      "68b16b62e2b36bbbe87dd2af7412de4e4c1817855488f6688b90f6dcf509e760",
      "a67cfb700445fca2dc3c8a02e2c91be71c8fdb8451cbca55c6d8a3442b7e208f",
      "3f4a0930347414ff9bb10ce39ec9c78c20f7d7918c00c14a49ebf03f87a05882",
      "30aca4af9287972bdbb1c11b92b4bb7f50bb5a6d87c0f4eaa4fce24e3b4a62c9",
    ],
  },
  "tiny_pg": {
    "warm_start": "ec19853f876850809d338bc4c97eb0caaa6fe1f6f69cfcf379d3e1e0b7efc5d2",
    "steps": [
      "2342b4443eea0028d644c5e313abdce878a023208a15aaf2636d418c159d9d66",
      "d437bd8a27a280dc71f4ed8afaa11a00eac64be3096d001f6cf0cc6755e4176d",
    ],
  },
}


def digests(args: list[str]) -> dict:
  """The script's JSON line, run in a process of its own from the project root."""
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the script sets its own
  done = subprocess.run(
    [sys.executable, "-m", "genenv_jax.scripts.numerics_digest", *args],
    cwd=PROJECT_ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  [line] = [x for x in done.stdout.splitlines() if x.startswith("{")]
  out = json.loads(line)
  assert out.pop("flags") == DIGEST_FLAGS
  return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_digests_equal_the_references(name):
  assert digests(CASES[name]) == REFERENCE[name]


def test_a_change_to_the_step_moves_the_step_digests_only():
  """A tiny entropy bonus is read by the agent's update, not by the warm start: the warm-started state keeps its
  digest, and the state after the last step does not, so the guard sees a change of the step's numerics however
  small. (The first step cannot show it: the learning-rate warm-up starts at 0. A change of a learning rate would
  not do either: in the tiny run's first steps every group's rewards are equal, so the policy-gradient updates are
  zero at any rate; an entropy bonus always has a gradient.)"""
  moved = digests([*CASES["tiny_pg"], "--set=agent.grpo.entropy_coef=1e-6"])
  assert moved["warm_start"] == REFERENCE["tiny_pg"]["warm_start"]
  assert moved["steps"][-1] != REFERENCE["tiny_pg"]["steps"][-1]


PROBE = """
import jax, jax.numpy as jnp
f = jax.jit(lambda a, b: jnp.tanh(a @ b).sum())
print(f.lower(jnp.ones((64, 96)), jnp.ones((96, 128))).compile().as_text())
"""


@pytest.mark.parametrize("portable", [False, True])
def test_the_portable_flags_leave_no_kernel_chosen_by_the_cpu(portable):
  """XLA's default CPU pipeline hands a dot and its neighbours to YNNPACK, whose kernels depend on the CPU's vector
  extensions; under the digests' flags no library fusion is left (and the probe does find one without them)."""
  env = {**os.environ, "XLA_FLAGS": DIGEST_FLAGS if portable else "--xla_force_host_platform_device_count=1"}
  done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  library = [k for k in ("__ynn_fusion", "__xnn_fusion", "__onednn") if k in done.stdout]
  assert library == ([] if portable else ["__ynn_fusion"])
