"""The outer loop: build, warm start (or resume), step, evaluate, checkpoint, log, summarise.

Resume is exact: the checkpoint holds the whole CoevolutionState (both models, optimizers, references, pools, rng,
step), and a restart with the same workdir continues from the latest one. SIGTERM (or a TPU maintenance event) saves
a checkpoint and exits cleanly. WORKDIR/summary.json holds the config, the per-step curriculum figures, the held-out
evaluations and the wall time, so scripts can compare runs without parsing TensorBoard.

Multi-host (one process per host, the same call everywhere): each process places only its own rows of the warm-start
batches and of the held-out set (`sharding.process_local_rows`, `host_local_to_global`, `global_batch`); metrics and
evaluation results are all-gathered to every host (`sharding.to_host`); checkpoints are saved and restored by all
processes together; only process 0 logs, writes TensorBoard and summary.json. The workdir may be a gs:// URL: orbax
writes checkpoints through tensorstore, summary.json and TensorBoard events go through fsspec (gcsfs), events staged
locally and uploaded (genenv_jax/training/metrics.py). tests/test_multiprocess.py runs 2 processes against 1 on CPU.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from genenv_jax.coevolution.build import Run, build
from genenv_jax.coevolution.step import CoevolutionState
from genenv_jax.parallel import sharding as shd
from genenv_jax.reporting.summary_report import phenomena
from genenv_jax.rl import pools
from genenv_jax.training.checkpointing import Checkpointer, PreemptionGuard
from genenv_jax.training.config_checks import validate as validate_config
from genenv_jax.training.metrics import MetricsWriter, ProgressLine, is_remote_path
from genenv_jax.training.warm_start import sft_batches, supervised_warm_start

SUMMARY_KEYS = {
  "p_hat_mean": "env/p_hat_mean",
  "band_frac": "env/band_frac",
  "invalid_frac": "env/invalid_frac",
  "difficulty_mean": "env/difficulty_mean",
  "agent_reward": "agent/reward_mean",
  "replay_p_hat_mean": "replay/p_hat_mean",
}
PROGRESS_KEYS = ("agent/reward_mean", "env/p_hat_mean", "env/band_frac", "env/difficulty_mean")


# ---- evaluation ------------------------------------------------------------------------------------------------------


def evaluate_heldout(run: Run, eval_fn, agent_params) -> dict[str, Any]:
  """Greedy accuracy on the held-out set, overall and per integer difficulty, with the item count `n` and the per-item
  0/1 `correct` scores (item order fixed by the held-out set, so two evaluations pair item by item for `stats`)."""
  rewards, difficulty = shd.to_host((eval_fn(agent_params, run.heldout), run.heldout.difficulty), run.mesh)
  correct = rewards >= run.coevolution.settings.success_threshold
  by_difficulty = {str(int(d)): float(correct[difficulty == d].mean()) for d in np.unique(difficulty)}
  return {
    "accuracy": float(correct.mean()),
    "by_difficulty": by_difficulty,
    "n": int(correct.size),
    "correct": correct.astype(np.int8).ravel().tolist(),
  }


# ---- warm start ------------------------------------------------------------------------------------------------------


def warm_start(run: Run, state: CoevolutionState, config: ml_collections.ConfigDict, log) -> CoevolutionState:
  """SFT both models on the seeds; the warm-started models become the references (the "initial" env of the KL)."""
  w = config.warm_start
  co = run.coevolution

  if w.batch_size % _rows(run.mesh) == 0:  # each process gathers and places only its own rows of each batch
    local = shd.process_local_rows(w.batch_size, run.mesh)
    place = lambda batch: shd.host_local_to_global(batch, run.mesh, w.batch_size)  # noqa: E731
  else:  # rows that do not split over the data shards: every process holds the whole (replicated) batch
    local, place = slice(None), lambda batch: shd.global_batch(batch, run.mesh)  # noqa: E731

  def progress(name, total):
    def report(i, loss):
      if (i + 1) % max(total // 4, 1) == 0 or i + 1 == total:
        log(f"warm start {name}: {i + 1}/{total} loss {loss:.3f}")

    return report

  with jax.set_mesh(run.mesh):
    agent, _ = supervised_warm_start(
      co.agent_graphdef,
      state.agent,
      sft_batches(run.domain, "agent", config.seed),
      w.agent_steps,
      w.batch_size,
      w.lr,
      config.seed,
      place,
      progress("agent", w.agent_steps),
      local=local,
    )
    env, _ = supervised_warm_start(
      co.env_graphdef,
      state.env,
      sft_batches(run.domain, "env", config.seed + 1),
      w.env_steps,
      w.batch_size,
      w.lr,
      config.seed + 1,
      place,
      progress("env", w.env_steps),
      local=local,
    )
  copy = jax.jit(lambda t: jax.tree.map(jnp.copy, t))
  state = state.replace(agent=agent, agent_ref=copy(agent), env=env, env_ref=copy(env))
  return jax.tree.map(lambda x, s: jax.device_put(x, s), state, run.state_shardings)


def _rows(mesh) -> int:
  return mesh.shape["data"] * mesh.shape["fsdp"]


def static_augmentation(run: Run, state: CoevolutionState, rounds: int) -> CoevolutionState:
  """The static ablation: the warm-started env writes `rounds` batches once; valid tasks join D_train for good."""
  co, s = run.coevolution, run.coevolution.settings

  def one_round(state):
    key, k_seed, k_env = jax.random.split(jax.random.wrap_key_data(state.rng), 3)
    seeds, _, env_pool = pools.sample(state.env_pool, k_seed, s.num_seeds, step=state.step)
    seeds = {**seeds, "known": jnp.zeros_like(seeds["valid"])}
    _, out, tasks = co.generate_tasks(state.env, seeds, k_env)
    rows = {
      "prompt_ids": tasks.prompt_ids,
      "prompt_mask": tasks.prompt_mask,
      "spec": tasks.spec,
      "difficulty": tasks.difficulty,
      "env_ids": out.tokens,
      "env_mask": out.mask,
    }
    train_pool = pools.insert(state.train_pool, rows, tasks.valid, state.step, keep_seeds=True)
    return state.replace(train_pool=train_pool, env_pool=env_pool, rng=jax.random.key_data(key))

  fn = jax.jit(one_round, in_shardings=(run.state_shardings,), out_shardings=run.state_shardings)
  with jax.set_mesh(run.mesh):
    for _ in range(rounds):
      state = fn(state)
  return state


# ---- the loop --------------------------------------------------------------------------------------------------------


def workdir_path(workdir: str, name: str) -> str:
  """WORKDIR/name for a local directory or a URL (gs://bucket/run); pathlib would fold the '//' of 'gs://'."""
  workdir = str(workdir)
  return f"{workdir.rstrip('/')}/{name}" if is_remote_path(workdir) else os.path.join(workdir, name)


class Summary:
  """WORKDIR/summary.json, rewritten after each record; on resume, records past the restored step are dropped.

  Only process 0 writes it. A local file is replaced atomically (write a temporary file, then rename); a remote one
  (gs://...) is uploaded whole through fsspec (gcsfs for gs://), one object write, so readers never see half a file.
  """

  def __init__(self, path: str, config: ml_collections.ConfigDict, resume_step: int | None):
    self.path = str(path)
    old = json.loads(self._read()) if resume_step is not None and self._exists() else {}
    keep = lambda rows: [r for r in rows if r["step"] <= (resume_step or 0)]  # noqa: E731
    self.data = {
      "config": json.loads(config.to_json_best_effort()),
      "steps": keep(old.get("steps", [])),
      "evals": keep(old.get("evals", [])),
      "warm_start": old.get("warm_start", {}),
      "wall_time_s": old.get("wall_time_s", 0.0),
    }

  def _exists(self) -> bool:
    if is_remote_path(self.path):
      import fsspec  # pylint: disable=import-outside-toplevel

      fs, root = fsspec.core.url_to_fs(self.path)
      return fs.exists(root)
    return os.path.exists(self.path)

  def _read(self) -> str:
    if is_remote_path(self.path):
      import fsspec  # pylint: disable=import-outside-toplevel

      with fsspec.open(self.path, "r") as f:
        return f.read()
    return pathlib.Path(self.path).read_text()

  def write(self) -> None:
    if not shd.is_main_process():
      return
    text = json.dumps(self.data, indent=1)
    if is_remote_path(self.path):
      import fsspec  # pylint: disable=import-outside-toplevel

      with fsspec.open(self.path, "w") as f:
        f.write(text)
    else:
      tmp = pathlib.Path(self.path).with_suffix(".tmp")
      tmp.write_text(text)
      tmp.replace(self.path)


def _host_metrics(metrics: dict[str, Any], mesh) -> dict[str, np.ndarray]:
  """The step's metrics as numpy arrays on every process (an all-gather where they span several processes)."""
  return shd.to_host(dict(metrics), mesh)


def _log_step(writer: MetricsWriter, run: Run, step: int, metrics: dict[str, np.ndarray], step_time: float) -> None:
  scalars = {k: float(v) for k, v in metrics.items() if v.ndim == 0}
  scalars["perf/step_time_s"] = step_time
  scalars["perf/agent_tokens_per_s"] = scalars.get("agent/tokens", 0.0) / max(step_time, 1e-9)
  scalars["perf/env_tokens_per_s"] = scalars.get("env/tokens", 0.0) / max(step_time, 1e-9)
  writer.scalars(step, scalars)
  for name in ("hist/p_hat", "hist/difficulty"):
    if name in metrics:
      values = metrics[name][metrics[name] >= 0]
      if values.size:
        writer.histogram(step, name, values)
  if "examples/env_tokens" in metrics:
    tok = run.tokenizer
    rows = [
      f"env: {tok.decode(e)!r} | agent: {tok.decode(a)!r}"
      for e, a in zip(metrics["examples/env_tokens"], metrics["examples/agent_tokens"])
    ]
    writer.text(step, "examples/tasks_and_rollouts", "\n\n".join(rows))


def train(config: ml_collections.ConfigDict, workdir: str, log=print) -> dict[str, Any]:
  """Runs (or resumes) a co-evolution run to config.total_steps; returns the summary dict. Raises
  config_checks.ConfigError, before anything is built, when the config has bad values."""
  validate_config(config)
  started = time.time()
  log = log if shd.is_main_process() else (lambda *_: None)  # console output from process 0 only
  workdir = str(workdir)
  if not is_remote_path(workdir):
    os.makedirs(workdir, exist_ok=True)
  run, state = build(config)
  checkpointer = Checkpointer(
    workdir_path(workdir, "checkpoints"), save_every=config.checkpoint_every, max_to_keep=config.max_checkpoints
  )
  latest = checkpointer.latest_step()
  summary = Summary(workdir_path(workdir, "summary.json"), config, latest)
  eval_fn = jax.jit(run.coevolution.evaluate)
  if latest is not None:
    state, _ = checkpointer.restore(latest, state)
    log(f"resumed from the checkpoint at step {latest} in {checkpointer.directory}")
  else:
    with jax.set_mesh(run.mesh):  # the held-out accuracy before any training: what the warm start itself adds
      before = evaluate_heldout(run, eval_fn, state.agent)
    log(f"held-out accuracy before the warm start: {before['accuracy']:.3f}")
    t0 = time.time()
    state = warm_start(run, state, config, log)
    if config.mode == "static":
      state = static_augmentation(run, state, config.pools.static_rounds)
    summary.data["warm_start"] = {"seconds": time.time() - t0, "heldout_accuracy_before": before["accuracy"]}

  writer = MetricsWriter(workdir_path(workdir, "tensorboard"))  # process 0 writes; a remote logdir is synced
  step_fn = run.coevolution.jit_step(run.state_shardings)
  start = int(jax.device_get(state.step))
  progress = ProgressLine(config.total_steps, every=config.log_every, keys=PROGRESS_KEYS, start_step=start)

  def evaluate(step: int) -> None:
    with jax.set_mesh(run.mesh):
      result = evaluate_heldout(run, eval_fn, state.agent)
    summary.data["evals"].append({"step": step, **result})
    writer.scalars(
      step,
      {
        "eval/accuracy": result["accuracy"],
        **{f"eval/accuracy_difficulty_{d}": a for d, a in result["by_difficulty"].items()},
      },
    )
    log(f"eval at step {step}: held-out accuracy {result['accuracy']:.3f}")

  if start == 0 and not summary.data["evals"]:
    evaluate(0)
  with PreemptionGuard() as guard:
    step = start
    while step < config.total_steps:
      t0 = time.time()
      with jax.set_mesh(run.mesh):
        state, metrics = step_fn(state)
      step += 1
      if step % config.log_every == 0 or step == config.total_steps:
        host = _host_metrics(metrics, run.mesh)
        step_time = time.time() - t0
        _log_step(writer, run, step, host, step_time)
        summary.data["steps"].append(
          {"step": step, **{k: float(host[v]) for k, v in SUMMARY_KEYS.items() if v in host}}
        )
        progress.update(step, {k: float(host[k]) for k in PROGRESS_KEYS if k in host})
      if step % config.eval_every == 0 or step == config.total_steps:
        evaluate(step)
      preempted = guard.should_stop(step)
      checkpointer.save(step, state, metadata={"step": step}, force=preempted or step == config.total_steps)
      writer.flush()  # a remote (gs://) logdir uploads only what changed, so TensorBoard follows the run live
      summary.write()
      if preempted:
        log(f"preemption signal: saved the checkpoint at step {step}; exiting")
        break
  checkpointer.wait()
  writer.flush()
  jax.block_until_ready(state)
  summary.data["wall_time_s"] = summary.data.get("wall_time_s", 0.0) + (time.time() - started)
  summary.data["final_step"] = int(jax.device_get(state.step))
  summary.data["phenomena"] = phenomena(summary.data)
  summary.write()
  checkpointer.close()
  writer.close()
  return summary.data
