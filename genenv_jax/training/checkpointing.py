"""Checkpoints of the whole training state (orbax CheckpointManager) and preemption handling.

What is saved. One step directory holds two orbax items:
- `state`: the training-state pytree through `ocp.args.StandardSave`: jax arrays (sharded or not), numpy arrays and
  scalars, optax states (namedtuples, restored as namedtuples from the abstract target), nested dicts, and
  - typed PRNG keys (`jax.random.key`): orbax 0.12.8 handles them itself. It writes `jax.random.key_data` (uint32)
    and records the impl in the array metadata, then `jax.random.wrap_key_data`s on restore
    (`orbax/checkpoint/_src/serialization/jax_array_handlers.py: _wrap_random_key_data`). A restored key draws the
    same numbers; tests/unit/training/test_checkpointing.py checks this on one device and on a mesh;
  - flax nnx `State`s: orbax could save them as they are, since `State` is a pytree whose `Variable` leaves flatten
    to their values. The on-disk paths would then carry Variable internals (`.../kernel/value`) that change between
    flax versions. So every `nnx.State` in the tree is saved as `nnx.to_pure_dict(state)` instead (paths like
    `agent/params/layers/0/kernel`). On restore it is put back into a copy of the abstract target's State with
    `nnx.replace_by_pure_dict` (the pure-dict route of flax's checkpointing guide).
- `metadata`: a small JSON-able dict (data position, config, ...) through `ocp.args.JsonSave`.

Restoring takes the abstract target: a pytree of `jax.ShapeDtypeStruct`s with `.sharding` set (see `abstract_of`), or
of concrete arrays. Arrays come back with those shardings, so a checkpoint written on one mesh restores onto another.

Multi-process: every process calls `save`, `restore`, `wait` and `close` at the same points; orbax coordinates the
writes (each process writes its own shards, process 0 writes metadata and commits). Saves are async by default. `save`
returns once the device arrays are copied to host, so the train step may donate them afterwards. Call `wait()` (or
`close()`) before the process exits, or the last checkpoint is left uncommitted.

Remote directories (gs://): orbax reaches them through etils.epath for directories and metadata, and tensorstore for
the arrays. Without TensorFlow, epath's gs:// backend is fsspec plus `gcsfs` ("Please install gcsfs to access Google
Storage" otherwise). So install gcsfs on TPU VMs that checkpoint to a bucket.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
import types
from typing import Any, Mapping, Sequence

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from jax.experimental import multihost_utils

from genenv_jax.training import checkpoint_faults as faults

logger = logging.getLogger(__name__)

_STATE = "state"
_METADATA = "metadata"

# orbax writes a replicated array "replica-parallel" by default: each replica writes one slice of it, cut on device by a
# small jitted slice per array shape and replica. For a state of many small replicated leaves those compiles make most
# of the first save's time (docs/EXPERIMENTS.md, "Costs behind implementation choices"). Slices under this many bytes
# are not split (one replica writes the whole array); large replicated arrays on a pod still are.
MIN_REPLICA_SLICE_BYTES = 1 << 20


def _type_handler_registry(min_replica_slice_bytes: int) -> Any:
  """orbax's default type handlers, the jax.Array one with `min_slice_bytes_for_replica_parallel` set."""
  default = ocp.type_handlers.get_type_handler(jax.Array)
  array_handler = ocp.type_handlers.ArrayHandler(
    min_slice_bytes_for_replica_parallel=min_replica_slice_bytes,
    array_metadata_store=getattr(default, "_array_metadata_store", None),
  )
  return ocp.type_handlers.create_type_handler_registry(
    *[
      (ty, array_handler if ty is jax.Array else ocp.type_handlers.get_type_handler(ty))
      for ty in ocp.type_handlers.supported_types()
    ]
  )


class _StateHandler(ocp.StandardCheckpointHandler):
  """StandardCheckpointHandler (same format and checks) over a PyTreeCheckpointHandler with our type handlers.

  StandardCheckpointHandler (orbax 0.12.8, handlers/standard_checkpoint_handler.py) takes no type-handler registry;
  it delegates every save and restore to the PyTreeCheckpointHandler in `_impl`, replaced here by one that has it.
  """

  def __init__(self, min_replica_slice_bytes: int = MIN_REPLICA_SLICE_BYTES):
    super().__init__()
    self._impl = ocp.PyTreeCheckpointHandler(
      save_concurrent_gb=96,
      restore_concurrent_gb=96,
      type_handler_registry=_type_handler_registry(min_replica_slice_bytes),
    )


def _is_nnx_state(x: Any) -> bool:
  return isinstance(x, nnx.State)


def _to_savable(tree: Any) -> Any:
  """The tree with every nnx.State replaced by its pure dict (nested dicts of arrays)."""
  return jax.tree.map(lambda x: nnx.to_pure_dict(x) if _is_nnx_state(x) else x, tree, is_leaf=_is_nnx_state)


def _from_savable(restored: Any, abstract: Any) -> Any:
  """Puts pure dicts back into nnx.States shaped like those of `abstract` (which is left untouched)."""
  nodes, treedef = jax.tree.flatten(abstract, is_leaf=_is_nnx_state)
  if not any(_is_nnx_state(n) for n in nodes):
    return restored
  restored_nodes = treedef.flatten_up_to(restored)
  out = []
  for node, value in zip(nodes, restored_nodes):
    if _is_nnx_state(node):
      fresh = jax.tree.map(lambda x: x, node)  # a new State with new Variables; `abstract` is not mutated
      nnx.replace_by_pure_dict(fresh, value)
      value = fresh
    out.append(value)
  return treedef.unflatten(out)


def abstract_of(tree: Any) -> Any:
  """The restore target for `tree`: a ShapeDtypeStruct (with sharding) per array leaf, nnx States kept."""
  return jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)


def _check_json(metadata: Mapping[str, Any]) -> dict[str, Any]:
  if not isinstance(metadata, Mapping):
    raise TypeError(f"checkpoint metadata must be a dict, got {type(metadata).__name__}")
  try:
    json.dumps(metadata)
  except (TypeError, ValueError) as e:
    raise TypeError(f"checkpoint metadata must be JSON-serializable (plain str/int/float/bool/list/dict): {e}") from e
  return dict(metadata)


def fault_log_path(directory: str) -> str:
  """Where the full errors of damaged checkpoints in `directory` go: logs/faults.log beside it (WORKDIR/logs/faults.log
  for a run's WORKDIR/checkpoints)."""
  if "://" in directory:
    return f"{directory.rstrip('/').rsplit('/', 1)[0]}/logs/faults.log"
  return os.path.join(os.path.dirname(os.path.abspath(directory)), "logs", "faults.log")


class CheckpointError(FileNotFoundError):
  """No checkpoint in the directory restores; the message names the directory and what to do."""


class ResumeError(ValueError):
  """A workdir that cannot be resumed with this config (changed keys, other shapes); the message says what to do."""


def _is_shape_mismatch(error: BaseException) -> bool:
  """orbax 0.12.8's errors for a target of other shapes or another tree structure than the saved state, anywhere in
  the error's chain of causes."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    text = str(error)
    if "not compatible with the stored shape" in text or "tree structures do not match" in text:
      return True
    error = error.__cause__ or error.__context__
  return False


class Checkpointer:
  """orbax CheckpointManager for (state pytree, JSON metadata) pairs, one directory per saved step.

  Usage in a train loop:
    ckpt = Checkpointer(workdir + "/checkpoints", save_every=1000, max_to_keep=3)
    if ckpt.latest_step() is not None:
      state, meta = ckpt.restore(None, abstract_of(state))
    ... each step: ckpt.save(step, state, {"data_position": pos})   # False when not due
    ckpt.close()
  """

  def __init__(
    self, directory: str | os.PathLike, *, save_every: int, max_to_keep: int | None = 3, async_save: bool = True
  ):
    """Opens (or creates) the checkpoint directory.

    Args:
      directory: local path or gs:// URL (see the module docstring).
      save_every: `save(step, ...)` writes when step % save_every == 0 (or when forced).
      max_to_keep: keep the newest this many checkpoints (None keeps all).
      async_save: write in a background thread after the device-to-host copy.
    """
    if save_every < 1:
      raise ValueError(f"save_every must be >= 1, got {save_every}")
    if max_to_keep is not None and max_to_keep < 1:
      raise ValueError(f"max_to_keep must be >= 1 or None, got {max_to_keep}")
    text = os.fspath(directory)
    self.directory = text if "://" in text else os.path.abspath(text)
    self.save_every = int(save_every)
    options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, enable_async_checkpointing=async_save, create=True)
    registry = ocp.handlers.DefaultCheckpointHandlerRegistry()
    state_handler = _StateHandler()
    registry.add(_STATE, ocp.args.StandardSave, state_handler)
    registry.add(_STATE, ocp.args.StandardRestore, state_handler)
    registry.add(_METADATA, ocp.args.JsonSave, ocp.JsonCheckpointHandler())
    registry.add(_METADATA, ocp.args.JsonRestore, ocp.JsonCheckpointHandler())
    self._manager = ocp.CheckpointManager(self.directory, handler_registry=registry, options=options)

  def is_due(self, step: int) -> bool:
    """True when `step` is a multiple of `save_every`."""
    return int(step) % self.save_every == 0

  def save(self, step: int, state: Any, metadata: Mapping[str, Any] | None = None, *, force: bool = False) -> bool:
    """Saves (state, metadata) at `step` when due or forced; returns whether a save was started.

    A step that is already saved is never overwritten (returns False). Every process must call this.
    """
    step = int(step)
    if not (force or self.is_due(step)):
      return False
    if step in self.all_steps():
      logger.info("checkpoint for step %d already exists in %s; not saving again", step, self.directory)
      return False
    args = ocp.args.Composite(
      **{_STATE: ocp.args.StandardSave(_to_savable(state)), _METADATA: ocp.args.JsonSave(_check_json(metadata or {}))}
    )
    return bool(self._manager.save(step, args=args, force=True))

  def latest_step(self) -> int | None:
    """The newest committed step, or None when there is no checkpoint."""
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    """Committed steps, ascending."""
    return sorted(self._manager.all_steps())

  def restore(self, step: int | None = None, abstract_state: Any = None) -> tuple[Any, dict[str, Any]]:
    """Restores (state, metadata) at `step` (None: the latest).

    `abstract_state` gives structure, dtypes and shardings (ShapeDtypeStructs with sharding, or arrays); without it
    the tree comes back as orbax saved it (nested dicts and lists, for inspection).
    """
    if step is None:
      step = self.latest_step()
      if step is None:
        raise FileNotFoundError(f"no checkpoint to restore in {self.directory}")
    elif int(step) not in self.all_steps():
      raise FileNotFoundError(f"no checkpoint for step {step} in {self.directory}; saved steps: {self.all_steps()}")
    target = None if abstract_state is None else _to_savable(abstract_state)
    restored = self._manager.restore(
      int(step),
      args=ocp.args.Composite(**{_STATE: ocp.args.StandardRestore(target), _METADATA: ocp.args.JsonRestore()}),
    )
    state = restored[_STATE] if abstract_state is None else _from_savable(restored[_STATE], abstract_state)
    return state, dict(restored[_METADATA] or {})

  def metadata(self, step: int) -> dict[str, Any]:
    """The JSON metadata saved with `step`, without reading the state."""
    restored = self._manager.restore(int(step), args=ocp.args.Composite(**{_METADATA: ocp.args.JsonRestore()}))
    return dict(restored[_METADATA] or {})

  def restore_newest_intact(
    self, abstract_state: Any, warn=logger.warning, *, fault_log: str | None = None, verbose: bool = False
  ) -> tuple[int, Any, dict[str, Any]]:
    """(step, state, metadata) of the newest checkpoint that restores, newest first.

    A damaged or incomplete step is named in one `warn` line (the step, the cause: a missing or truncated array file,
    an undecodable manifest, a metadata file that is not JSON, or the reason tensorstore gives), moved aside and
    skipped. Its full error, with all that orbax printed and logged while trying it, goes to `fault_log` (default
    `fault_log_path(self.directory)`, WORKDIR/logs/faults.log for WORKDIR/checkpoints), not to the console; with
    `verbose` (the CLI's --verbosity=1) orbax's output reaches the console and the traceback is printed as well.

    A checkpoint that restores nowhere because its arrays do not fit `abstract_state` (another model shape) raises
    ResumeError at once: an older step would not fit either. No intact step at all raises CheckpointError naming the
    directory and what to do.
    """
    steps = self.all_steps()
    if not steps:
      raise FileNotFoundError(f"no checkpoint to restore in {self.directory}")
    log_path = fault_log or fault_log_path(self.directory)
    faults.route_late_reports(log_path)  # before the first attempt: its failed reads report from then on
    failures = []
    for step in reversed(steps):
      captured: list[str] = []
      try:
        with contextlib.nullcontext() if verbose else faults.quiet_restore_attempt(captured.append):
          state, metadata = self.restore(step, abstract_state)
        sys.stderr.write("".join(captured))  # a restore that succeeds keeps what it printed (orbax's own warnings)
        return step, state, metadata
      except Exception as e:  # pylint: disable=broad-except  (orbax raises many kinds for a damaged step)
        reason = faults.error_reason(e)
        if _is_shape_mismatch(e):
          raise ResumeError(
            f"the checkpoint at step {step} in {self.directory} holds a state of other shapes than the model this "
            f"config builds ({reason}); resume with the config it was saved with, or start a new --workdir"
          ) from None
        cause = faults.describe_damage(self._step_dir(step), e)
        faults.append_to_log(log_path, faults.fault_record(step, self.directory, cause, e, "".join(captured)))
        if verbose:
          traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
        failures.append(step)
        where = self._set_aside(step)
        warn(
          f"checkpoint at step {step} in {self.directory} is damaged: {cause}; moved to {where}, trying an older one "
          f"(full error in {log_path})"
        )
    raise CheckpointError(
      f"no intact checkpoint in {self.directory} (steps {failures} all failed to restore; details in {log_path}); "
      "move the directory aside to start the run over, or give a new --workdir"
    )

  def _step_dir(self, step: int) -> str:
    if "://" in self.directory:
      return f"{self.directory.rstrip('/')}/{step}"
    return os.path.join(self.directory, str(step))

  def _set_aside(self, step: int) -> str:
    """Takes a damaged step out of the manager's view, so the resumed run can write that step again: a local one is
    moved (kept, for inspection) to DIRECTORY.corrupt/STEP-TIME; a remote one is deleted."""
    if "://" in self.directory:
      self._manager.delete(step)
      return "nowhere (deleted)"
    aside = f"{self.directory}.corrupt"
    os.makedirs(aside, exist_ok=True)
    target = os.path.join(aside, f"{step}-{int(time.time())}")
    os.replace(os.path.join(self.directory, str(step)), target)
    self._manager.reload()
    return target

  def wait(self) -> None:
    """Blocks until pending async saves are committed."""
    self._manager.wait_until_finished()

  def close(self) -> None:
    """Waits for pending saves and releases the manager."""
    self._manager.close()

  def __enter__(self) -> "Checkpointer":
    return self

  def __exit__(self, *exc: Any) -> None:
    self.close()


# ---------------------------------------------------------------------------------------------------------------------
# Preemption.
# ---------------------------------------------------------------------------------------------------------------------

LOCAL, JAX_SERVICE, ALLGATHER = "local", "jax_service", "allgather"


def preemption_mode(process_count: int, service_enabled: bool) -> str:
  """How `PreemptionGuard` learns of a preemption.

  - "local" (one process): a Python SIGTERM handler sets a flag.
  - "jax_service" (several processes, `jax_enable_preemption_service` on, the jax 0.10.2 default):
    `jax.distributed.initialize` starts the preemption sync manager, and jaxlib installs its own SIGTERM notifier
    (`SigtermNotifier` in libjax_common.so). A Python handler would replace it, so none is installed, and
    `multihost_utils.reached_preemption_sync_point(step)` says when every host has reached the same safe step. This
    also covers TPU maintenance events, which arrive as SIGTERM. orbax's `CheckpointManager.reached_preemption` is
    this same call.
  - "allgather" (several processes, service off): the SIGTERM flag is OR-ed over processes with
    `multihost_utils.process_allgather`, a small collective on every `should_stop` call.
  """
  if process_count <= 1:
    return LOCAL
  return JAX_SERVICE if service_enabled else ALLGATHER


class PreemptionGuard:
  """Context manager that turns SIGTERM (preemption) into a flag that the train loop polls.

  The handler only records the signal; all work happens in the loop:
    with PreemptionGuard() as guard:
      for step in ...:
        state, metrics = train_step(state, batch)
        if guard.should_stop(step):      # every process, every step
          ckpt.save(step, state, meta, force=True); ckpt.wait(); break
  On exit the previous handlers are restored. Handlers can only be installed from the main thread.
  """

  def __init__(self, signals: Sequence[int] = (signal.SIGTERM,), *, mode: str | None = None):
    """`mode` defaults to `preemption_mode(jax.process_count(), jax.config.jax_enable_preemption_service)`."""
    if mode is None:
      mode = preemption_mode(jax.process_count(), bool(jax.config.jax_enable_preemption_service))
    if mode not in (LOCAL, JAX_SERVICE, ALLGATHER):
      raise ValueError(f"unknown preemption mode {mode!r}; expected one of {(LOCAL, JAX_SERVICE, ALLGATHER)}")
    self.mode = mode
    self.signals = tuple(signals)
    self._previous: dict[int, Any] = {}
    self._received: int | None = None
    self._stop = False
    self._active = False

  def _handler(self, signum: int, frame: types.FrameType | None) -> None:  # pylint: disable=unused-argument
    self._received = signum  # nothing else: the loop does the work

  def __enter__(self) -> "PreemptionGuard":
    if self._active:
      raise RuntimeError("PreemptionGuard is already active")
    if self.mode != JAX_SERVICE:
      if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("PreemptionGuard must be entered in the main thread (Python signal handlers live there)")
      for sig in self.signals:
        self._previous[sig] = signal.getsignal(sig)
        signal.signal(sig, self._handler)
    self._active = True
    return self

  def __exit__(self, *exc: Any) -> None:
    for sig, previous in self._previous.items():
      signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
    self._previous.clear()
    self._active = False

  @property
  def signal_received(self) -> int | None:
    """The signal this process caught (None if none); in "jax_service" mode jaxlib catches it instead."""
    return self._received

  def should_stop(self, step: int | None = None) -> bool:
    """True once the job should checkpoint and exit; sticky.

    In "jax_service" mode `step` is required and every process must call this at every step (the sync protocol
    picks a step all hosts reach). In "allgather" mode every process must call it at the same points.
    """
    if self._stop:
      return True
    if self.mode == LOCAL:
      self._stop = self._received is not None
    elif self.mode == JAX_SERVICE:
      if step is None:
        raise ValueError("should_stop(step) needs the step in multi-process runs (preemption sync point)")
      self._stop = bool(multihost_utils.reached_preemption_sync_point(int(step)))
    else:
      flags = multihost_utils.process_allgather(np.asarray(self._received is not None, np.int32))
      self._stop = bool(np.any(flags))
    if self._stop:
      logger.warning("preemption requested (mode %s, step %s): checkpoint and exit", self.mode, step)
    return self._stop
