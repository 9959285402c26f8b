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
docs/EXPERIMENTS.md, "The demo across machines").

The default case is the demo's config with a shorter warm start and 3 steps (50 + 80 SFT steps, 3 co-evolution
steps), and the α band moved down to α ± k_min = 0.1 ± 0.1, so that the env's update runs: the same code paths with the
same data behind them. Until 2026-12-07 it was 50 + 5 SFT steps at α = 0.5 (before 2026-12-06 100 + 20 and 10 steps),
and every env task was invalid at every step: the env's update was skipped, its KL term had no gradient (the env still
equalled its reference), and a change of the env's loss left every digest as it was (a change of env.kl_coef, 0.001 ->
0.5, passed the guard). Measured with the case's flags (numerics_digest.digests' loop, printing each step's
metrics): 38-44% of the env's tasks invalid, p̂ 0.015-0.03 after 50 agent SFT steps, inside the moved
band, so RWR keeps 18-20 of the 32 tasks at every step; the env's update norm 0 at step 1 (the learning-rate warm-up
starts at 0), 0.018 at step 2, 0.033 at step 3; its KL to its initial model 0.0011 at step 3, so its KL term has a
gradient there; the agent's GRPO update has a signal at every step (groups_without_signal_frac 0.72-0.88).
`env.kl_coef=0.49` (against 0.5) leaves the warm start and steps 1-2 as they are and moves step 3's digest (149 s a
run on the 2-core host beside two other jobs: too slow to check in CI, which checks the same on the tiny case). The
tiny case's env warm start is 100 steps (was 3, where every env task was invalid too): 75%, 88% and 100% of its tasks
invalid at steps 1-3, its PG update moves the env from step 2."""

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
  "default": [
    "--config=configs/default.py",
    "--agent_steps=50",
    "--env_steps=80",
    "--steps=3",
    "--set=env.curriculum.alpha=0.1",
  ],
  "tiny_pg": [
    "--config=configs/default.py:smoke+tiny",
    "--agent_steps=3",
    "--env_steps=100",
    "--steps=3",
    *(f"--set={k}={v}" for k, v in {**TINY, **TINY_PG}.items() if not k.startswith("warm_start.")),
  ],
}
# Both retaken on 2026-12-07 for the cases' longer env warm start (the step's code unchanged since 8d19c16, where the
# previous references were taken): `python -m genenv_jax.scripts.numerics_digest` with each case's flags.
REFERENCE = {
  "default": {
    "warm_start": "dc8b2b152b4b2f0332f0e8ebb344f60a39d9e1322dbe5093fde24f7be5435262",
    "steps": [
      "bcc6205b0937bd75c0b9a8750d5acf2f4d9009b1dda007b5f712eeae04f2e44b",
      "4f6089bc2032c2aed18b709fac1c0ffa22e301c39965aa875fc2e572782b8e6a",
      "208c1e3c08ea652f9e3578ff850af2dd1942e3aefb2411a7faccde4f89efc89c",
    ],
  },
  "tiny_pg": {
    "warm_start": "3c5961a135b9efa2bada5ec194a6c890fa033935077f611d8569fa5496594976",
    "steps": [
      "36c6185909eae4dedc31d0c6d5b9d8937ee6c7f0c595f3889f08d92a974e7932",
      "b589547a0d604b1c717e1a5e8329f95f1b36d17f78ffd4c8375ad9df5c35ee73",
      "50ad965c7fd22bfe3fd0379cccb1f6c7bf11409d7eeea88b1dfe5cb73db6cb5f",
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


@pytest.mark.parametrize("change", ["agent.grpo.entropy_coef=1e-6", "env.kl_coef=0.49"])
def test_a_change_to_the_step_moves_the_step_digests_only(change):
  """A change read by the agent's update (a tiny entropy bonus) or by the env's (its KL coefficient, 0.5 -> 0.49), not
  by the warm start: the warm-started state keeps its digest, and the state after the last step does not, so the guard
  sees a change of either model's update however small. (A change of a learning rate would not do: in the tiny run's
  first steps every agent group's rewards are equal, so its policy-gradient updates are zero at any rate; an entropy
  bonus always has a gradient. The env's KL term has one from step 3: step 1's learning rate is 0 under the warm-up,
  so the env first leaves its reference in step 2.)"""
  moved = digests([*CASES["tiny_pg"], f"--set={change}"])
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
