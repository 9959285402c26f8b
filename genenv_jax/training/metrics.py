"""TensorBoard metrics without TensorFlow, console progress, and readers that prove the event files are valid.

Writing. `MetricsWriter` builds `Summary` protos with the TensorBoard plugins' own helpers (`scalar_pb`,
`histogram_pb`, `text_pb` in `tensorboard/plugins/*/summary_v2.py`) and appends them to an event file through
`tensorboard.summary.writer.event_file_writer.EventFileWriter`. None of these import TensorFlow: their file I/O goes
through `tensorboard.compat.tf`, which falls back to `tensorboard.compat.tensorflow_stub` when TF is absent.
(`flax.metrics.tensorboard` and clu's writers import TensorFlow and fail here.) Only process 0 writes; every other
process gets a writer whose methods do nothing, so the train loop calls it unconditionally. Each summary carries its
tag's one-line description (`describe`, the train loop's being `log_tags.description`) in its metadata, which
TensorBoard shows beside the tag's chart; `read_descriptions` reads them back.

Remote logdirs (gs://, s3://, ...), the truth for tensorboard 2.21 without TF: the stub's `gfile.get_filesystem`
sends any `scheme://` path to fsspec (`tensorflow_stub/io/gfile.py: _get_fsspec_filesystem`), and for gs:// fsspec
needs `gcsfs`, which is not a dependency here (`fsspec.get_filesystem_class("gs")` raises "Please install gcsfs to
access Google Storage"). Even with gcsfs, the stub writes each record by reopening the object in append mode
(`FSSpecFileSystem.append` -> `fs.open(path, "ab")`), and GCS objects cannot be appended to. So a remote logdir is
never written in place: events go to a local staging directory, and `flush()`/`close()` (or `sync()`) upload each
changed event file whole with fsspec's `put_file`. If fsspec has no filesystem for the scheme (gs:// without gcsfs),
the writer logs one warning naming the staging directory and the `gcloud storage rsync` command that uploads it, and
`sync()` returns False; training is never stopped for want of a metrics upload.
"""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import tempfile
import time
from typing import Any, Callable, Mapping, Sequence, TextIO

import jax
import numpy as np
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.custom_scalar import metadata as custom_scalar_metadata
from tensorboard.plugins.histogram import metadata as histogram_metadata
from tensorboard.plugins.histogram import summary_v2 as histogram_summary
from tensorboard.plugins.scalar import summary_v2 as scalar_summary
from tensorboard.plugins.text import summary_v2 as text_summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

logger = logging.getLogger(__name__)

DEFAULT_BINS = 30


def is_remote_path(path: str | os.PathLike) -> bool:
  """True for `scheme://...` paths other than file://."""
  text = os.fspath(path)
  return "://" in text and not text.startswith("file://")


def _local_path(path: str | os.PathLike) -> str:
  text = os.fspath(path)
  return text[len("file://") :] if text.startswith("file://") else text


# ---------------------------------------------------------------------------------------------------------------------
# Flattening metric trees.
# ---------------------------------------------------------------------------------------------------------------------


def _host_value(x: Any) -> Any:
  """A jax array as a numpy array (fully replicated multi-host arrays read from the local shard)."""
  if isinstance(x, jax.Array):
    if not x.is_fully_addressable:
      if not x.is_fully_replicated:
        raise ValueError(
          f"metric array of shape {x.shape} is sharded over several processes; replicate it in the "
          "step (or gather it with multihost_utils.process_allgather) before logging"
        )
      x = x.addressable_data(0)
    return np.asarray(jax.device_get(x))
  return x


def flatten_metrics(
  metrics: Mapping[str, Any], prefix: str = "", sep: str = "/"
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
  """Flattens a nested metric mapping into ({"a/b": float}, {"a/c": array}).

  Keys are joined with `sep` under `prefix`. Numbers, booleans and numeric arrays of size 1 become Python floats;
  numeric arrays of any other size go to the second dict (the caller may log them as histograms or drop them);
  strings, None and other objects are skipped.
  """
  scalars: dict[str, float] = {}
  arrays: dict[str, np.ndarray] = {}

  def visit(node: Any, name: str) -> None:
    if isinstance(node, Mapping):
      for key, value in node.items():
        visit(value, f"{name}{sep}{key}" if name else str(key))
      return
    if isinstance(node, (str, bytes)) or node is None:
      return
    if not isinstance(node, (bool, int, float, np.generic, np.ndarray, jax.Array)):
      return
    value = np.asarray(_host_value(node))
    if not (np.issubdtype(value.dtype, np.number) or value.dtype == np.bool_):
      return
    if value.size == 1:
      scalars[name] = float(value.reshape(()))
    else:
      arrays[name] = value

  visit(metrics, prefix)
  return scalars, arrays


# ---------------------------------------------------------------------------------------------------------------------
# Writing.
# ---------------------------------------------------------------------------------------------------------------------


def _text_tensor(data: str | Sequence[str] | Sequence[Sequence[str]]) -> np.ndarray:
  """A string, a list of strings (one column) or a list of equal-length rows, as an object array of str."""
  if isinstance(data, str):
    return np.asarray(data, dtype=object)
  rows = list(data)
  if rows and all(isinstance(r, (list, tuple)) for r in rows):
    widths = {len(r) for r in rows}
    if len(widths) != 1:
      raise ValueError(f"text rows must all have the same number of cells, got lengths {sorted(widths)}")
    return np.asarray([[str(c) for c in r] for r in rows], dtype=object).reshape(len(rows), widths.pop())
  if any(isinstance(r, (list, tuple)) for r in rows):
    raise ValueError("text data must be a string, a list of strings, or a list of rows (lists of strings)")
  return np.asarray([str(r) for r in rows], dtype=object)


class MetricsWriter:
  """TensorBoard event writer on process 0 (a no-op elsewhere); see the module docstring for remote logdirs.

  Usage: `w = MetricsWriter(workdir + "/tb"); w.scalars(step, metrics); w.flush(); ...; w.close()`.
  """

  def __init__(
    self,
    logdir: str | os.PathLike,
    *,
    local_dir: str | os.PathLike | None = None,
    flush_secs: float = 30.0,
    enabled: bool | None = None,
    describe: Callable[[str], str | None] | None = None,
  ):
    """Opens a new event file in `logdir` (created if needed).

    Args:
      logdir: a local directory, or a remote URL (gs://...) that is staged locally and uploaded by `sync()`.
      local_dir: staging directory for a remote logdir (default: a fresh temporary directory).
      flush_secs: the background writer flushes to the local file at least this often.
      enabled: write or not; default `jax.process_index() == 0`.
      describe: tag -> its one-line description (or None), written in each summary's metadata, which TensorBoard
        shows beside the tag's chart (the train loop passes `log_tags.description`).
    """
    self.logdir = os.fspath(logdir)
    self._describe = describe if describe is not None else (lambda tag: None)
    self.enabled = (jax.process_index() == 0) if enabled is None else bool(enabled)
    self._remote_fs: Any = None
    self._remote_root: str | None = None
    self._synced_sizes: dict[str, int] = {}
    self._writer: EventFileWriter | None = None
    self.local_dir: str | None = None
    if not self.enabled:
      return
    if is_remote_path(self.logdir):
      self.local_dir = os.fspath(local_dir) if local_dir is not None else tempfile.mkdtemp(prefix="genenv_tb_")
      self._open_remote()
    else:
      self.local_dir = _local_path(self.logdir)
    os.makedirs(self.local_dir, exist_ok=True)
    self._writer = EventFileWriter(self.local_dir, flush_secs=flush_secs)

  def _open_remote(self) -> None:
    try:
      import fsspec  # pylint: disable=import-outside-toplevel

      self._remote_fs, self._remote_root = fsspec.core.url_to_fs(self.logdir)
      self._remote_fs.makedirs(self._remote_root, exist_ok=True)
    except (ImportError, ValueError, OSError) as e:
      self._remote_fs = None
      logger.warning(
        "MetricsWriter: cannot write to %s from Python (%s: %s). TensorBoard events are written to %s "
        "instead; upload them with `gcloud storage rsync -r %s %s` (or install gcsfs for gs://).",
        self.logdir,
        type(e).__name__,
        e,
        self.local_dir,
        self.local_dir,
        self.logdir,
      )

  def _add(self, step: int, summary: summary_pb2.Summary) -> None:
    if self._writer is None:
      raise RuntimeError("MetricsWriter is closed")
    self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))

  def scalars(
    self, step: int, metrics: Mapping[str, Any], *, prefix: str = "", histograms: bool = False, bins: int = DEFAULT_BINS
  ) -> None:
    """Logs every scalar of a nested metric mapping (see `flatten_metrics`) as one event at `step`.

    Non-scalar numeric arrays are logged as histograms when `histograms` is True, else dropped.
    """
    if not self.enabled:
      return
    values, arrays = flatten_metrics(metrics, prefix=prefix)
    summary = summary_pb2.Summary()
    for tag, value in values.items():
      summary.value.extend(scalar_summary.scalar_pb(tag, value, description=self._describe(tag)).value)
    if histograms:
      for tag, array in arrays.items():
        histogram = histogram_summary.histogram_pb(
          tag, array.astype(np.float64), buckets=bins, description=self._describe(tag)
        )
        summary.value.extend(histogram.value)
    if summary.value:
      self._add(step, summary)

  def histogram(self, step: int, tag: str, values: Any, bins: int = DEFAULT_BINS, edges: Any = None) -> None:
    """Logs the distribution of `values` (any shape, castable to float) in `bins` equal-width buckets, or in the
    buckets between the given increasing `edges` (values outside them are dropped)."""
    if not self.enabled:
      return
    array = np.asarray(_host_value(values), dtype=np.float64).ravel()
    if edges is None:
      if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
      self._add(step, histogram_summary.histogram_pb(tag, array, buckets=bins, description=self._describe(tag)))
      return
    edges = np.asarray(edges, np.float64)
    if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
      raise ValueError(f"histogram edges must be at least two increasing values, got {edges.tolist()}")
    counts, _ = np.histogram(array, bins=edges)
    buckets = np.stack([edges[:-1], edges[1:], counts.astype(np.float64)], axis=1)
    summary = summary_pb2.Summary()
    summary.value.add(
      tag=tag,
      metadata=histogram_metadata.create_summary_metadata(display_name=None, description=self._describe(tag)),
      tensor=tensor_util.make_tensor_proto(buckets, dtype=np.float64),
    )
    self._add(step, summary)

  def custom_scalars(self, charts: Mapping[str, Mapping[str, Sequence[str] | Mapping[str, str]]]) -> None:
    """Lays out TensorBoard's custom-scalars dashboard: {category: {chart title: chart}}, a chart being a list of tags
    drawn together (lines), or {"value": tag, "lower": tag, "upper": tag}: the value's line over a shaded band
    between the two others (TensorBoard's margin chart)."""
    if not self.enabled:
      return
    layout = layout_pb2.Layout()
    for category, titled in charts.items():
      cat = layout.category.add(title=category)
      for title, tags in titled.items():
        chart = cat.chart.add(title=title)
        if isinstance(tags, Mapping):
          if set(tags) != {"value", "lower", "upper"}:
            raise ValueError(f"a margin chart names 'value', 'lower' and 'upper' tags, got {sorted(tags)}")
          chart.margin.series.add(**tags)
        else:  # each tag as an anchored regular expression, so that one chart shows exactly these series
          chart.multiline.tag.extend([f"^{re.escape(t)}$" for t in tags])
    summary = summary_pb2.Summary()
    summary.value.add(
      tag=custom_scalar_metadata.CONFIG_SUMMARY_TAG,
      metadata=custom_scalar_metadata.create_summary_metadata(),
      tensor=tensor_util.make_tensor_proto(np.asarray(layout.SerializeToString(), dtype=object)),
    )
    self._add(0, summary)

  def text(self, step: int, tag: str, data: str | Sequence[str] | Sequence[Sequence[str]]) -> None:
    """Logs markdown text: a string, a list of strings, or a table given as a list of equal-length rows."""
    if not self.enabled:
      return
    self._add(step, text_summary.text_pb(tag, _text_tensor(data), description=self._describe(tag)))

  def sync(self) -> bool:
    """Uploads changed local event files to a remote logdir; True if the remote copy is now current."""
    if not self.enabled or not is_remote_path(self.logdir):
      return True
    if self._remote_fs is None or self.local_dir is None:
      return False
    for name in sorted(os.listdir(self.local_dir)):
      local = os.path.join(self.local_dir, name)
      if not os.path.isfile(local):
        continue
      size = os.path.getsize(local)
      if self._synced_sizes.get(name) == size:
        continue
      self._remote_fs.put_file(local, f"{self._remote_root.rstrip('/')}/{name}")
      self._synced_sizes[name] = size
    return True

  def flush(self) -> None:
    """Writes pending events to the local file, then uploads it when the logdir is remote."""
    if self._writer is not None:
      self._writer.flush()
      self.sync()

  def close(self) -> None:
    """Flushes, uploads and closes; further writes raise. Safe to call twice."""
    if self._writer is not None:
      self._writer.close()
      self._writer = None
      self.sync()

  def __enter__(self) -> "MetricsWriter":
    return self

  def __exit__(self, *exc: Any) -> None:
    self.close()


# ---------------------------------------------------------------------------------------------------------------------
# Console progress.
# ---------------------------------------------------------------------------------------------------------------------


def format_duration(seconds: float) -> str:
  """Seconds as h:mm:ss (hours may exceed 24); '--:--:--' for unknown or infinite."""
  if seconds is None or not math.isfinite(seconds) or seconds < 0:
    return "--:--:--"
  total = int(round(seconds))
  return f"{total // 3600}:{total % 3600 // 60:02d}:{total % 60:02d}"


class ProgressLine:
  """Prints one plain line every `every` steps on process 0: step/total, steps/s, elapsed, ETA, chosen metrics.

  The rate is measured since the previous printed line (or the start). `clock` and `stream` are injectable so that
  the output can be tested.
  """

  def __init__(
    self,
    total_steps: int,
    *,
    every: int = 10,
    keys: Sequence[str] = (),
    start_step: int = 0,
    stream: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    enabled: bool | None = None,
  ):
    if total_steps < 1:
      raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    if every < 1:
      raise ValueError(f"every must be >= 1, got {every}")
    self.total_steps = int(total_steps)
    self.every = int(every)
    self.keys = tuple(keys)
    self.enabled = (jax.process_index() == 0) if enabled is None else bool(enabled)
    self._stream = stream
    self._clock = clock
    self._start_time = clock()
    self._last = (int(start_step), self._start_time)

  def due(self, step: int) -> bool:
    """True when `update(step)` prints."""
    return self.enabled and (step % self.every == 0 or step >= self.total_steps)

  def format(self, step: int, metrics: Mapping[str, Any] | None = None) -> str:
    """The line for `step` (advances the rate window)."""
    now = self._clock()
    last_step, last_time = self._last
    dt = now - last_time
    rate = (step - last_step) / dt if dt > 0 and step > last_step else float("nan")
    eta = (self.total_steps - step) / rate if rate > 0 else float("nan")
    self._last = (int(step), now)
    parts = [
      f"step {step}/{self.total_steps} ({100.0 * step / self.total_steps:.1f}%)",
      f"{rate:.3g} steps/s" if math.isfinite(rate) else "-- steps/s",
      f"elapsed {format_duration(now - self._start_time)}",
      f"ETA {format_duration(eta)}",
    ]
    if metrics and self.keys:
      values, _ = flatten_metrics(metrics)
      parts += [f"{k} {values[k]:.4g}" for k in self.keys if k in values]
    return " | ".join(parts)

  def update(self, step: int, metrics: Mapping[str, Any] | None = None) -> str | None:
    """Prints and returns the line when `step` is due, else returns None (and reads no metrics)."""
    step = int(step)
    if not self.due(step):
      return None
    line = self.format(step, metrics)
    stream = self._stream if self._stream is not None else sys.stdout
    print(line, file=stream, flush=True)
    return line


# ---------------------------------------------------------------------------------------------------------------------
# Reading (tests and scripts).
# ---------------------------------------------------------------------------------------------------------------------

_KEEP_ALL = {
  event_accumulator.TENSORS: 0,
  event_accumulator.SCALARS: 0,
  event_accumulator.HISTOGRAMS: 0,
  event_accumulator.COMPRESSED_HISTOGRAMS: 0,
  event_accumulator.IMAGES: 0,
  event_accumulator.AUDIO: 0,
}


def _load(logdir: str | os.PathLike) -> event_accumulator.EventAccumulator:
  path = _local_path(logdir)
  if not is_remote_path(path) and not os.path.exists(path):
    raise FileNotFoundError(f"no TensorBoard logdir at {path}")
  acc = event_accumulator.EventAccumulator(path, size_guidance=_KEEP_ALL)
  acc.Reload()
  return acc


def _plugin_tags(acc: event_accumulator.EventAccumulator, plugin: str) -> list[str]:
  try:
    return sorted(acc.PluginTagToContent(plugin))
  except KeyError:  # the plugin never wrote to this logdir
    return []


def _tensors(acc: event_accumulator.EventAccumulator, plugin: str) -> dict[str, list[tuple[int, np.ndarray]]]:
  return {
    tag: [(e.step, tensor_util.make_ndarray(e.tensor_proto)) for e in acc.Tensors(tag)]
    for tag in _plugin_tags(acc, plugin)
  }


def read_tags(logdir: str | os.PathLike) -> dict[str, list[str]]:
  """{plugin ("scalars", "histograms", "text"): sorted tags} of the event files in `logdir` (empty ones left out)."""
  acc = _load(logdir)
  tags = {plugin: _plugin_tags(acc, plugin) for plugin in ("scalars", "histograms", "text")}
  legacy = acc.Tags()[event_accumulator.SCALARS]
  tags["scalars"] = sorted(set(tags["scalars"]) | set(legacy))
  return {plugin: found for plugin, found in tags.items() if found}


def read_tensors(logdir: str | os.PathLike, plugin: str) -> dict[str, list[tuple[int, np.ndarray]]]:
  """{tag: [(step, value array)]} for the tensor summaries of one plugin ("scalars", "histograms", "text")."""
  return _tensors(_load(logdir), plugin)


def read_descriptions(logdir: str | os.PathLike) -> dict[str, str]:
  """{tag: the description in its summary metadata} for the tensor summaries in `logdir` ("" where none was given)."""
  acc = _load(logdir)
  tags = {tag for plugin in ("scalars", "histograms", "text") for tag in _plugin_tags(acc, plugin)}
  return {tag: acc.SummaryMetadata(tag).summary_description for tag in sorted(tags)}


def read_scalars(logdir: str | os.PathLike) -> dict[str, list[tuple[int, float]]]:
  """{tag: [(step, value)]}: v2 scalar summaries plus legacy `simple_value` scalars (e.g. from tensorboardX)."""
  acc = _load(logdir)
  out = {tag: [(step, float(value)) for step, value in series] for tag, series in _tensors(acc, "scalars").items()}
  for tag in acc.Tags()[event_accumulator.SCALARS]:
    out.setdefault(tag, []).extend((e.step, float(e.value)) for e in acc.Scalars(tag))
  return out
