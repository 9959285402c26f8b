"""A warm start kept by one run and read back by another (training.warm_start_reuse): the fingerprint tells apart what
warms up otherwise and only that, and a run that reads a warm start back gives the same figures as one that computes
it."""

import json

from coevolution_configs import tiny_config

from genenv_jax.training import warm_start_reuse as reuse
from genenv_jax.training.loop import train


def key(config, env_warmed=True):
  return reuse.fingerprint(config, env_warmed)


def test_the_fingerprint_ignores_what_comes_after_the_warm_start_and_nothing_else(monkeypatch):
  monkeypatch.delenv("XLA_FLAGS", raising=False)
  base = tiny_config()
  # GenEnv, GenEnv-Random and Static of one seed warm up alike
  static = tiny_config(mode="static", **{"pools.num_replay": 12})
  assert key(base) == key(tiny_config(**{"env.train": False})) == key(static)
  assert key(base) == key(tiny_config(total_steps=7, eval_every=3))
  # the RL updates' settings (a screen of one reads back its sweep's warm start), but not G or the curriculum
  updates = {"agent.grpo.kl_coef": 0.2, "agent.grpo.minibatches": 2, "agent.optimizer.lr": 3e-5, "env.kl_coef": 0.01}
  updates.update({"env.max_kl": 0.2, "env.optimizer.lr": 1e-3, "env.objective": "pg", "env.samples_per_seed": 4})
  assert key(base) == key(tiny_config(**updates))
  assert key(base) != key(tiny_config(**{"agent.grpo.group_size": 6}))  # fixes the p̂ values the env's SFT shows
  assert key(base) != key(tiny_config(**{"env.curriculum.alpha": 0.3}))
  assert key(base) != key(tiny_config(seed=1))
  assert key(base) != key(tiny_config(**{"warm_start.agent_steps": 5}))
  assert key(base) != key(tiny_config(**{"agent.model.hidden_size": 64}))
  assert key(base) != key(base, env_warmed=False)  # plain GRPO warms the agent alone
  default_rounding = key(base)
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=SSE4_2")  # other rounding: another warm start
  assert key(base) != default_rounding


def test_the_code_digest_follows_every_source_file(tmp_path):
  (tmp_path / "a.py").write_text("x = 1\n")
  (tmp_path / "sub").mkdir()
  (tmp_path / "sub" / "b.py").write_text("y = 2\n")
  before = reuse.source_digest(tmp_path)
  (tmp_path / "sub" / "b.py").write_text("y = 3\n")
  assert reuse.source_digest(tmp_path) != before


def test_a_run_that_reads_the_warm_start_back_gives_the_same_figures(tmp_path):
  """The first run computes the warm start and keeps it; the second, with the same config, reads it back, runs no SFT
  step, and its figures are the first's to the bit (the variants that share a fingerprint: the test above)."""
  shared = str(tmp_path / "warm_starts")
  config = tiny_config(total_steps=1, eval_every=1, checkpoint_every=1)
  first = train(config, str(tmp_path / "a"), log=lambda _: None, warm_start_reuse_dir=shared)
  lines = []
  second = train(config, str(tmp_path / "b"), log=lines.append, warm_start_reuse_dir=shared)
  assert "reused_from" not in first["warm_start"] and second["warm_start"]["reused_from"].startswith(shared)
  assert not any(line.startswith("warm start agent") for line in lines) and any("read back" in x for x in lines)
  for part in ("steps", "evals"):
    assert json.dumps(second[part]) == json.dumps(first[part])
  assert second["warm_start"]["heldout_accuracy_before"] == first["warm_start"]["heldout_accuracy_before"]
