"""The outer loop: build, warm start (or resume), step, evaluate, checkpoint, log, summarise.

Resume is exact: the checkpoint holds the whole CoevolutionState (both models, optimizers, references, pools, rng,
step), and a restart with the same workdir continues from the latest one. SIGTERM (or a TPU maintenance event) saves
a checkpoint and exits cleanly. WORKDIR/summary.json holds the config, the curriculum figures of every step (TensorBoard
gets one step in `log_every`), the held-out evaluations and the wall time, so scripts can compare runs without parsing
TensorBoard.

Multi-host (one process per host, the same call everywhere): each process places only its own rows of the warm-start
batches and of the held-out set (`sharding.process_local_rows`, `host_local_to_global`, `global_batch`); metrics and
evaluation results are all-gathered to every host (`sharding.to_host`); checkpoints are saved and restored by all
processes together; only process 0 logs, writes TensorBoard and summary.json. The workdir may be a gs:// URL: orbax
writes checkpoints through tensorstore, summary.json and TensorBoard events go through fsspec (gcsfs), events staged
locally and uploaded (genenv_jax/training/metrics.py). tests/integration/test_multiprocess.py runs 2 processes
against 1 on CPU.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pathlib
import tempfile
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging as absl_logging
from flax import nnx

from genenv_jax.coevolution.build import Run, build
from genenv_jax.coevolution.settings import (
  GRPO,
  STATIC,
  DomainSection,
  LoraSettings,
  OptimizerSettings,
  from_config,
  to_config,
)
from genenv_jax.coevolution.step import CoevolutionState
from genenv_jax.models import lora
from genenv_jax.parallel import sharding as shd
from genenv_jax.reporting import metric_table as mt
from genenv_jax.reporting.summary_report import parse_summary, phenomena
from genenv_jax.rl.updates import last_learning_rate
from genenv_jax.training import log_tags, warm_start_reuse
from genenv_jax.training.checkpointing import JAX_SERVICE, Checkpointer, PreemptionGuard, ResumeError
from genenv_jax.training.config_checks import validate as validate_config
from genenv_jax.training.metrics import MetricsWriter, ProgressLine, is_remote_path
from genenv_jax.training.warm_start import sft_batches, sft_optimizer, supervised_warm_start

# The step's metrics that go into every step's summary.json row, under the step's (and TensorBoard's) names.
SUMMARY_KEYS = mt.SUMMARY_KEYS  # summary.json's step rows: reporting.metric_table, where each metric is declared


def summary_record(host: dict[str, Any]) -> dict[str, float]:
  """One step's summary.json row; the fresh tasks' figures (`log_tags.FRESH_TASKS`: p̂, band fraction, difficulty)
  are left out at a step whose env tasks were all invalid (there is nothing to average: a 0 there would read as a real
  value, e.g. a rise in difficulty from 0 once tasks become valid), as in TensorBoard; a figure with no tasks to
  average this step (NaN: say, no task was written from a base seed) is left out too."""
  row = {k: float(host[k]) for k in SUMMARY_KEYS if k in host and math.isfinite(float(host[k]))}
  if mt.INVALID_FRAC in row and not log_tags.has_valid_fresh_task(row):
    row = {k: v for k, v in row.items() if k not in log_tags.FRESH_TASKS}
  return row


def _reported(metric: str, record: dict[str, float]) -> bool:
  """Whether a step metric's figure is in the step's summary record (the fresh-task figures may be left out)."""
  return metric not in SUMMARY_KEYS or metric in record


PROGRESS_KEYS = mt.PROGRESS_KEYS  # the progress line's figures, in its order


# ---- evaluation ------------------------------------------------------------------------------------------------------


def evaluate_heldout(run: Run, eval_fn, agent_params) -> dict[str, Any]:
  """Greedy accuracy on the held-out set (`heldout_record`)."""
  rewards, difficulty = shd.to_host((eval_fn(agent_params, run.heldout), run.heldout.difficulty), run.mesh)
  return heldout_record(rewards >= run.coevolution.settings.domain.success_threshold, difficulty)


def heldout_record(correct: np.ndarray, difficulty: np.ndarray) -> dict[str, Any]:
  """Accuracy overall and per level, with the item count `n`, the counts per level and the per-item 0/1 `correct`
  scores (item order fixed by the held-out set, so two evaluations pair item by item for `stats`). A level is the
  integer part of a task's difficulty: the text domains score halves (BFCL: (calls + arguments) / 2), and every
  item counts in exactly one level."""
  correct, level = np.asarray(correct, bool).ravel(), np.floor(np.asarray(difficulty)).astype(np.int64).ravel()
  levels = np.unique(level)
  return {
    "accuracy": float(correct.mean()),
    "by_difficulty": {str(d): float(correct[level == d].mean()) for d in levels},
    "n": int(correct.size),
    "n_by_difficulty": {str(d): int((level == d).sum()) for d in levels},
    "correct": correct.astype(np.int8).tolist(),
  }


# ---- warm start ------------------------------------------------------------------------------------------------------


class Preempted(Exception):
  """SIGTERM arrived during the warm start; its progress is saved, and a rerun with the same workdir resumes it."""


def _sft_reporter(name: str, total: int, log, writer: MetricsWriter | None) -> Callable[[int, float], None]:
  """The warm start's per-step report of one phase: a log line at each quarter, the loss to TensorBoard 100 times."""

  def line(i, loss):
    if (i + 1) % max(total // 4, 1) == 0 or i + 1 == total:
      log(f"warm start {name}: {i + 1}/{total} loss {loss:.3f}")
    if writer is not None and ((i + 1) % max(total // 100, 1) == 0 or i + 1 == total):
      writer.scalars(i + 1, {mt.WARM_START_LOSS[name]: loss})

  return line


def warm_start(
  run: Run,
  state: CoevolutionState,
  seed: int,
  log,
  stop: Callable[[], bool] | None = None,
  progress: Checkpointer | None = None,
  about: dict | None = None,
  writer: MetricsWriter | None = None,
  reuse: warm_start_reuse.Entry | None = None,
) -> CoevolutionState:
  """SFT both models on the seeds, as the run's settings ask (`run.coevolution.settings.warm_start`; the env only
  where the mode samples it); the warm-started models become the references (the "initial" env of the KL). The
  agent's SFT draws its batches with `seed` (the config's), the env's with seed + 1.

  Resumable: with `stop` (polled after each SFT step) and `progress` (a Checkpointer of its own), a stop saves the
  phase ("agent", then "env"), the steps done in it, both models and the phase's AdamW state, then raises
  Preempted; called again with the same `progress`, the warm start continues from there, and ends bit-identical to
  an uninterrupted one. `about` (JSON) is saved with the progress and restored into the same dict. With `writer`,
  each phase's SFT loss goes to TensorBoard as warm_start/agent_loss and warm_start/env_loss (x = its SFT step).

  With `reuse` (training.warm_start_reuse), a fresh warm start first looks for the one kept under the run's fingerprint
  and reads it back instead of computing it (`about` gets the kept run's values, and about["reused_from"] names the
  entry); one it computes to the end is kept there for the next run.
  """
  co = run.coevolution
  s = co.settings
  w = s.warm_start

  if w.batch_size % _rows(run.mesh) == 0:  # each process gathers and places only its own rows of each batch
    local = shd.process_local_rows(w.batch_size, run.mesh)
    place = lambda batch: shd.host_local_to_global(batch, run.mesh, w.batch_size)  # noqa: E731
  else:  # rows that do not split over the data shards: every process holds the whole (replicated) batch
    local, place = slice(None), lambda batch: shd.global_batch(batch, run.mesh)  # noqa: E731

  env_steps = 0 if s.mode == GRPO else w.env_steps  # plain GRPO never samples the env: nothing to warm
  phases = [
    ("agent", co.agent_graphdef, w.agent_steps, seed),
    ("env", co.env_graphdef, env_steps, seed + 1),
  ]
  models = {"agent": state.agent, "env": state.env}
  start_phase, resume = "agent", None
  with jax.set_mesh(run.mesh):
    if progress is not None and progress.latest_step() is not None:
      meta = progress.metadata(progress.latest_step())
      steps = dict(agent=w.agent_steps, env=env_steps)
      opt_target = {}
      if meta["done"]:
        opt_target = sft_optimizer(w.lr, steps[meta["phase"]]).init(models[meta["phase"]])
      target = {"models": models, "opt": opt_target}
      saved, meta = progress.restore(progress.latest_step(), target)
      models, start_phase = saved["models"], meta["phase"]
      resume = (meta["done"], saved["opt"]) if meta["done"] else None
      if about is not None:
        about.update(meta.get("about", {}))
      log(f"resuming the warm start: {start_phase} phase, {meta['done']} of {steps[start_phase]} steps done")
    elif reuse is not None and (kept := warm_start_reuse.load(*reuse, models)) is not None:
      models, kept_about = kept
      if about is not None:
        about.update(kept_about, reused_from=warm_start_reuse.entry_dir(*reuse))
      log(f"warm start read back from {warm_start_reuse.entry_dir(*reuse)} (a run with the same fingerprint kept it)")
      start_phase = None

    def save_and_stop(phase: str, done: int, opt_state) -> None:
      number = done + (w.agent_steps if phase == "env" else 0)
      progress.save(
        number,
        {"models": models, "opt": opt_state if done else {}},
        {"phase": phase, "done": done, "about": about or {}},
        force=True,
      )
      progress.wait()
      raise Preempted(f"preemption signal during the warm start: saved its progress ({phase} phase, step {done})")

    order = [name for name, *_ in phases]
    for name, graphdef, steps, phase_seed in phases[order.index(start_phase) :] if start_phase else []:
      if name != start_phase and stop is not None and progress is not None and stop():
        save_and_stop(name, 0, None)
      models[name], _, (done, opt_state) = supervised_warm_start(
        graphdef,
        models[name],
        sft_batches(run.domain, name, phase_seed, w, s.agent.grpo.group_size, s.env.curriculum),
        steps,
        w.batch_size,
        w.lr,
        phase_seed,
        place,
        _sft_reporter(name, steps, log, writer),
        local=local,
        resume=resume if name == start_phase else None,
        stop=stop if progress is not None else None,
      )
      if done < steps:
        save_and_stop(name, done, opt_state)
    if reuse is not None and start_phase is not None:
      warm_start_reuse.save(*reuse, models, about or {})  # computed here, so `about` names no entry
  return _warm_started(run, state, models["agent"], models["env"])


def _warm_started(run: Run, state: CoevolutionState, agent, env) -> CoevolutionState:
  """`state` with the warm-started models, which become the references (LoRA: folded into a new base, which is)."""
  co = run.coevolution
  copy = jax.jit(lambda t: jax.tree.map(jnp.copy, t))
  if lora.has_adapters(agent) or lora.has_adapters(env):  # the warm-started model is the new base (models.lora.fold)
    fold = lambda graphdef: jax.jit(lambda t: nnx.state(lora.fold(nnx.merge(graphdef, t))))  # noqa: E731
    agent, env = (fold(co.agent_graphdef)(agent), fold(co.env_graphdef)(env))
  reference = lambda m: None if lora.has_adapters(m) else copy(m)  # noqa: E731  LoRA: the base is the reference
  state = state.replace(agent=agent, agent_ref=reference(agent), env=env, env_ref=reference(env))
  return jax.tree.map(lambda x, s: jax.device_put(x, s), state, run.state_shardings)


def _rows(mesh) -> int:
  return mesh.shape["data"] * mesh.shape["fsdp"]


def static_augmentation(run: Run, state: CoevolutionState, rounds: int) -> CoevolutionState:
  """The static ablation: the warm-started env writes `rounds` batches once (`Coevolution.static_round`); valid tasks
  join D_train for good."""
  fn = jax.jit(run.coevolution.static_round, in_shardings=(run.state_shardings,), out_shardings=run.state_shardings)
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

  def __init__(
    self,
    path: str,
    config: ml_collections.ConfigDict,
    resume_step: int | None,
    changes: dict[str, tuple[Any, Any]] | None = None,
  ):
    """`changes` (config_changes of a resumed run) are appended to `config_changes` with the step they start at."""
    self.path = str(path)
    old = parse_summary(self._read()) if resume_step is not None and self._exists() else {}  # older names too
    keep = lambda rows: [r for r in rows if r["step"] <= (resume_step or 0)]  # noqa: E731
    old_perf = old.get("perf", {})
    self.data = {
      "config": json.loads(config.to_json_best_effort()),
      "steps": keep(old.get("steps", [])),
      "evals": keep(old.get("evals", [])),
      "warm_start": old.get("warm_start", {}),
      "wall_time_s": old.get("wall_time_s", 0.0),
      "config_changes": old.get("config_changes", []),
      # [step, seconds per step] of each logged span (PhaseTimes' `step`: the jitted step and its rows), and the
      # largest peak resident memory of the processes that ran it (log_tags.host_peak_memory_gib)
      "perf": {
        "step_s": [p for p in old_perf.get("step_s", []) if p[0] <= (resume_step or 0)],
        "host_peak_memory_gib": old_perf.get("host_peak_memory_gib", 0.0),
      },
    }
    if changes:
      record = {key: {"saved": a, "now": b} for key, (a, b) in changes.items()}
      self.data["config_changes"].append({"from_step": resume_step or 0, "changes": record})

  @classmethod
  def read_config(cls, path: str) -> dict | None:
    """The config saved in summary.json at `path`, or None when there is no readable summary."""
    reader = cls.__new__(cls)
    reader.path = str(path)
    if not reader._exists():
      return None
    try:
      return json.loads(reader._read()).get("config")
    except ValueError:
      return None

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


def _summary_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
  """The few scalars of a step's summary.json row (SUMMARY_KEYS), still on the device: every step gets a row, so that
  the end-of-run tests and sweep reports read every step's tasks, not one step in `log_every` (TensorBoard and the
  progress line keep `log_every`)."""
  return {k: metrics[k] for k in SUMMARY_KEYS if k in metrics}


def _host_metrics(metrics: dict[str, Any], mesh) -> dict[str, np.ndarray]:
  """The step's metrics as numpy arrays on every process (an all-gather where they span several processes)."""
  return shd.to_host(dict(metrics), mesh)


def _schedule(optimizer: OptimizerSettings) -> dict[str, Any]:
  """The learning-rate schedule's arguments of an optimizer section of the tree (rl.updates.make_optimizer's)."""
  return {"lr": optimizer.lr, "warmup_steps": optimizer.warmup_steps, "decay_steps": optimizer.decay_steps}


# Keys a resumed run may change without --config.allow_config_change: how long it runs and what it logs, not what it
# computes. allow_config_change itself, and where the benchmark data lives, are never compared.
RESUMABLE_CHANGES = (
  "total_steps",
  "eval_every",
  "log_every",
  "checkpoint_every",
  "max_checkpoints",
  "allow_config_change",
  "distributed",
  "domain.data_dir",
)


# Keys added to the configs after runs had been saved without them, each with the value that gives those runs'
# behaviour: a saved config that lacks the key reads as holding it, so that such a run still resumes.
KEYS_ADDED_LATER = {
  # 2026-12-05: the arithmetic domain's answer form (tasks/arithmetic/running.py)
  "domain.answer": DomainSection.answer,
  # 2026-12-06: LoRA adapters (coevolution.settings.LoraSettings), off before; their defaults as summary.json holds them
  **{
    f"{who}.lora.{key}": list(value) if isinstance(value, tuple) else value
    for who in ("agent", "env")
    for key, value in to_config(LoraSettings()).items()
  },
}


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
  if isinstance(tree, dict):
    return {k: v for key, value in tree.items() for k, v in _flatten(value, f"{prefix}{key}.").items()}
  return {prefix.rstrip("."): tree}


def config_changes(saved: dict, config: ml_collections.ConfigDict) -> dict[str, tuple[Any, Any]]:
  """{key: (saved value, new value)} for every key whose value differs (absent keys count as None, except that a
  key of KEYS_ADDED_LATER absent from the saved config counts as its listed value)."""
  old, new = _flatten(saved), _flatten(json.loads(config.to_json_best_effort()))
  old = {**{k: v for k, v in KEYS_ADDED_LATER.items() if k in new}, **old}
  return {k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


def check_resume_config(summary_path: str, config: ml_collections.ConfigDict, log) -> dict[str, tuple[Any, Any]]:
  """The config changes of a resumed run; raises ResumeError unless every change is in RESUMABLE_CHANGES or
  config.allow_config_change is set. A workdir without summary.json has nothing to compare."""
  saved = Summary.read_config(summary_path)
  if saved is None:
    return {}
  changes = config_changes(saved, config)
  refused = {k: v for k, v in changes.items() if k not in RESUMABLE_CHANGES}
  listing = lambda items: "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in items.items())  # noqa: E731
  if refused and not from_config(config).allow_config_change:
    raise ResumeError(
      f"this workdir holds a run with another config, and resuming would mix two runs. Changed: {listing(refused)}. "
      "Resume with the config it was started with, start a new --workdir, or pass "
      "--config.allow_config_change=true to continue anyway (the change is recorded in summary.json)"
    )
  if changes:
    log(f"resuming with a changed config: {listing(changes)}")
  return changes


def check_writable(workdir: str) -> None:
  """A local workdir must be creatable and writable before anything is built (PermissionError otherwise)."""
  if is_remote_path(workdir):
    return
  try:
    os.makedirs(workdir, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=workdir, prefix=".writable-"):
      pass
  except OSError as e:
    raise PermissionError(
      f"the workdir {workdir} is not writable ({e.strerror or e}): checkpoints, TensorBoard events and summary.json "
      "go there; choose a writable --workdir"
    ) from None


def train(
  config: ml_collections.ConfigDict, workdir: str, log=print, warm_start_reuse_dir: str | None = None
) -> dict[str, Any]:
  """Runs (or resumes) a co-evolution run to config.total_steps; returns the summary dict. With
  `warm_start_reuse_dir`, the warm start is read from that directory where a run with the same fingerprint kept one,
  and kept there otherwise (training.warm_start_reuse; summary.json's warm_start.reused_from says which).

  Before anything is built: the config is validated (config_checks.ConfigError), the workdir must be writable
  (PermissionError), and a resumed run's config must match the saved one (ResumeError; see RESUMABLE_CHANGES).
  Resuming takes the newest intact checkpoint (a damaged one is named in one warning line and skipped), or
  continues an interrupted warm start. SIGTERM at any point leaves a workdir that resumes.
  """
  validate_config(config)
  s = from_config(config)  # the schedule and the checkpoints' settings (the run's tree, once built, holds the rest)
  started = time.time()
  log = log if shd.is_main_process() else (lambda *_: None)  # console output from process 0 only
  workdir = str(workdir)
  check_writable(workdir)
  reuse = None
  if warm_start_reuse_dir:
    warm_start_reuse.check_usable(warm_start_reuse_dir)
    reuse = warm_start_reuse.Entry(warm_start_reuse_dir, warm_start_reuse.fingerprint(config, s.mode != GRPO))
  checkpointer = Checkpointer(
    workdir_path(workdir, "checkpoints"), save_every=s.checkpoint_every, max_to_keep=s.max_checkpoints
  )
  progress = Checkpointer(workdir_path(workdir, "warm_start"), save_every=1, max_to_keep=1, async_save=False)
  saved_steps = checkpointer.all_steps()
  resuming = bool(saved_steps) or progress.latest_step() is not None
  summary_path = workdir_path(workdir, "summary.json")
  changes = check_resume_config(summary_path, config, log) if resuming else {}
  run, state = build(config)
  eval_fn = jax.jit(run.coevolution.heldout_rewards)
  latest = None
  if saved_steps:
    # a damaged step: one warning line; its full error goes to WORKDIR/logs/faults.log (the console with --verbosity=1)
    latest, state, _ = checkpointer.restore_newest_intact(
      state, warn=log, fault_log=workdir_path(workdir, "logs/faults.log"), verbose=absl_logging.get_verbosity() >= 1
    )
    log(f"resumed from the checkpoint at step {latest} in {checkpointer.directory}")
  summary = Summary(summary_path, config, latest, changes)
  # process 0 writes; a remote logdir is synced; each tag carries its line of log_tags.DESCRIPTIONS
  writer = MetricsWriter(workdir_path(workdir, "tensorboard"), describe=log_tags.description)
  with PreemptionGuard() as guard:
    if latest is None:
      about = {}
      if progress.latest_step() is None:
        with jax.set_mesh(run.mesh):  # the held-out accuracy before any training: what the warm start itself adds
          about["heldout_accuracy_before"] = evaluate_heldout(run, eval_fn, state.agent)["accuracy"]
        log(f"held-out accuracy before the warm start: {about['heldout_accuracy_before']:.3f}")
      t0 = time.time()
      # multi-process runs with jax's preemption service poll it at the loop's steps only (its sync points must
      # increase); a SIGTERM in their warm start is acted on at the first step
      stop = guard.should_stop if guard.mode != JAX_SERVICE else None
      try:
        state = warm_start(
          run, state, s.seed, log, stop=stop, progress=progress, about=about, writer=writer, reuse=reuse
        )
      except Preempted as e:
        log(f"{e}; rerun the same command to resume")
        summary.data["preempted"] = "warm start"
        summary.write()
        progress.close()
        checkpointer.close()
        writer.close()
        return summary.data
      if run.coevolution.settings.mode == STATIC:
        state = static_augmentation(run, state, run.coevolution.settings.pools.static_rounds)
      summary.data["warm_start"] = {
        "seconds": time.time() - t0,
        "heldout_accuracy_before": about.get("heldout_accuracy_before"),
        **({"reused_from": about["reused_from"]} if "reused_from" in about else {}),
      }
    progress.close()
    summary.data.pop("preempted", None)
    return _run_steps(config, run, state, eval_fn, checkpointer, summary, guard, writer, started, log)


@contextlib.contextmanager
def _checkpoint_write(checkpointer: Checkpointer, step: int):
  """Turns a failed checkpoint write (a full disk, a lost mount) inside the block into one clear OSError that names
  the newest intact checkpoint to resume from."""
  try:
    yield
  except Exception as e:  # pylint: disable=broad-except  (orbax and tensorstore raise many kinds)
    intact = [s for s in checkpointer.all_steps() if s < step]
    raise OSError(
      f"could not write the checkpoint at step {step} (or an earlier asynchronous one) to {checkpointer.directory}: "
      f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}. "
      + (
        f"The checkpoint at step {intact[-1]} is intact: free space (or fix the directory) and rerun the same "
        "command to resume from it."
        if intact
        else "No earlier checkpoint: fix the directory and rerun."
      )
    ) from None


class PhaseTimes:
  """Wall time of the loop's phases over a span of steps. `per_step()`: each phase's seconds per step, `step` being
  the rest of the span's wall time (dispatching and running the jitted step, the summary rows), so that the phases add
  up to the wall time per step (`wall`)."""

  def __init__(self, clock: Callable[[], float] = time.time):
    self.clock, self.start, self.steps, self.seconds = clock, clock(), 0, {"eval": 0.0, "checkpoint": 0.0, "log": 0.0}

  @contextlib.contextmanager
  def phase(self, name: str):
    t0 = self.clock()
    try:
      yield
    finally:
      self.seconds[name] += self.clock() - t0

  def per_step(self) -> dict[str, float]:
    n = max(self.steps, 1)
    wall = (self.clock() - self.start) / n
    out = {name: s / n for name, s in self.seconds.items()}
    return {"wall": wall, "step": wall - sum(out.values()), **out}


def _run_steps(config, run, state, eval_fn, checkpointer, summary, guard, writer, started, log) -> dict[str, Any]:
  """The co-evolution steps from the state's step to config.total_steps: log, evaluate, checkpoint, summarise."""
  s = run.coevolution.settings
  step_fn = run.coevolution.jit_step(run.state_shardings)
  start = int(jax.device_get(state.step))
  progress = ProgressLine(s.total_steps, every=s.log_every, keys=PROGRESS_KEYS, start_step=start)

  def evaluate_and_log(step: int) -> None:
    with jax.set_mesh(run.mesh):
      result = evaluate_heldout(run, eval_fn, state.agent)
    summary.data["evals"].append({"step": step, **result})
    log_tags.log_eval(writer, step, result)
    log(f"eval at step {step}: held-out accuracy {result['accuracy']:.3f}")

  def learning_rates(host: dict[str, np.ndarray]) -> dict[str, float]:
    rates = {mt.AGENT_LR: last_learning_rate(state.agent_opt, **_schedule(s.agent.optimizer))}
    if log_tags.env_updated(host, s):
      rates[mt.ENV_LR] = last_learning_rate(state.env_opt, **_schedule(s.env.optimizer))
    return rates

  if start == 0 and not summary.data["evals"]:
    log_tags.log_run_start(writer, config, s)
    evaluate_and_log(0)
  # Every step gets a summary row, whatever log_every. An unlogged step's figures are fetched one step late, once the
  # next step is dispatched (or when its checkpoint has waited for it), so the host never waits on a step it has just
  # launched. `unwritten` holds at most that one (step, device figures) pair.
  unwritten: list[tuple[int, dict[str, Any]]] = []

  def add_row(row_step: int, host: dict[str, np.ndarray]) -> None:
    summary.data["steps"].append({"step": row_step, **summary_record(host)})

  def write_unwritten() -> None:
    while unwritten:
      row_step, figures = unwritten.pop()
      add_row(row_step, _host_metrics(figures, run.mesh))

  step = start
  timings = PhaseTimes()  # the loop's phases over the steps since the last logged one
  while step < s.total_steps:
    with jax.set_mesh(run.mesh):
      state, metrics = step_fn(state)
    step += 1
    timings.steps += 1
    write_unwritten()  # the step before this one: finished by now
    logged = step % s.log_every == 0 or step == s.total_steps
    if logged:
      host = _host_metrics(metrics, run.mesh)  # waits for the step
      add_row(step, host)
      with timings.phase("log"):
        log_tags.log_step(writer, run, step, host, learning_rates(host))
        record = summary.data["steps"][-1]
        progress.update(step, {k: float(host[k]) for k in PROGRESS_KEYS if k in host and _reported(k, record)})
    else:
      unwritten.append((step, _summary_metrics(metrics)))
    if step % s.eval_every == 0 or step == s.total_steps:
      with timings.phase("eval"):
        evaluate_and_log(step)
    preempted = guard.should_stop(step)
    with timings.phase("checkpoint"):
      with _checkpoint_write(checkpointer, step):
        saved = checkpointer.save(step, state, metadata={"step": step}, force=preempted or step == s.total_steps)
      if saved:  # the checkpoint waited for the step: its row goes into summary.json with it
        write_unwritten()
      summary.write()
    if logged:  # this step's phases included: the figures of step N describe steps up to N
      seconds = timings.per_step()
      summary.data["perf"]["step_s"].append([step, seconds["step"]])
      log_tags.log_perf(writer, run, step, host, seconds)
      timings = PhaseTimes()
    writer.flush()  # a remote (gs://) logdir uploads only what changed, so TensorBoard follows the run live
    if preempted:
      log(f"preemption signal: saved the checkpoint at step {step}; exiting")
      break
  write_unwritten()
  with _checkpoint_write(checkpointer, step):  # an asynchronous write's failure surfaces here
    checkpointer.wait()
  writer.flush()
  jax.block_until_ready(state)
  _close_summary(summary, state, started)
  checkpointer.close()
  writer.close()
  return summary.data


def _close_summary(summary: Summary, state: Any, started: float) -> None:
  """The end-of-run figures of summary.json (wall time, the final step, skipped updates, the peak memory, the
  phenomena), written."""
  summary.data["wall_time_s"] = summary.data.get("wall_time_s", 0.0) + (time.time() - started)
  summary.data["final_step"] = int(jax.device_get(state.step))
  summary.data["skipped_updates"] = {  # skipped updates, as TensorBoard's agent/skipped_updates, env/skipped_updates
    "agent": int(jax.device_get(state.skipped_agent)),
    "env": int(jax.device_get(state.skipped_env)),
  }
  perf = summary.data["perf"]
  perf["host_peak_memory_gib"] = max(perf["host_peak_memory_gib"], log_tags.host_peak_memory_gib())
  summary.data["phenomena"] = phenomena(summary.data)
  summary.write()
