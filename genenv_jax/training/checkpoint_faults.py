"""A damaged checkpoint in one line: what is wrong with a step directory, and everything orbax says about it kept off
the console.

A failed orbax restore is loud. Its exception embeds the whole tensorstore spec of the array it failed on, every
concurrent read of the step fails the same way and is reported as it is collected ("Exception ignored in: <coroutine
object _read_array_index_and_device_put>", "Future exception was never retrieved", "Event loop is closed"), and absl
logs the files it could not parse: 273,531 characters for one step whose three largest array files held random bytes.
`quiet_restore_attempt` runs one attempt with all of that (Python logging, sys.stdout/sys.stderr, file descriptor 2,
warnings and unraisable exceptions) written to a fault log instead, and `route_late_reports` sends there the reports
that tensorstore's threads deliver after the attempt has returned. `describe_damage` names the cause for the one
warning line the user sees: a missing or truncated array file, an undecodable manifest, a metadata file that is not
JSON, or else the reason tensorstore gives, without its spec.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
import traceback
from typing import Callable, Iterator

# The JSON files of a step directory (orbax 0.12.8's layout), relative to it.
_JSON_FILES = ("_CHECKPOINT_METADATA", "metadata/metadata", "state/_METADATA", "state/_sharding")
_OCDBT_REFERENCE = re.compile(r"^(?:btreenode|value):(?P<base>[^:]*):(?P<file>[^:]+):(?P<offset>\d+):(?P<length>\d+)$")
_TENSORSTORE_READ = re.compile(r'Error reading "(?P<key>[^"]+)" in OCDBT database at [^:]*: (?P<reason>.*)$')
_SPEC = re.compile(r"\s*\[tensorstore_spec=.*$", re.S)
_LOCAL_FILE = re.compile(r'Error decoding local file "[^"]*": ')


def is_remote(path: str) -> bool:
  """True for `scheme://...` paths other than file://."""
  return "://" in path and not path.startswith("file://")


# ---------------------------------------------------------------------------------------------------------------------
# What is wrong.
# ---------------------------------------------------------------------------------------------------------------------


def _deepest(error: BaseException) -> BaseException:
  """The innermost cause of the error (tensorstore's own, under orbax's wrappers)."""
  seen = set()
  while (error.__cause__ or error.__context__) is not None and id(error) not in seen:
    seen.add(id(error))
    error = error.__cause__ or error.__context__
  return error


def error_reason(error: BaseException) -> str:
  """The cause of a failed restore in one short phrase: tensorstore's reason without its spec, the array it read."""
  inner = _deepest(error)
  lines = [line.strip() for line in _LOCAL_FILE.sub("", _SPEC.sub("", str(inner))).splitlines() if line.strip()]
  text = lines[0] if lines else ""
  read = _TENSORSTORE_READ.search(text)
  if read:
    return f"array {read['key']} does not decode: {read['reason'].split('; at ')[0]}"[:300]
  if isinstance(inner, json.JSONDecodeError):
    return f"a JSON file does not parse ({inner})"[:300]
  text = text.split(" See full TensorStore details")[0]
  return (f"{type(inner).__name__}: {text}" if text else type(inner).__name__)[:300]


def _json_damage(step_dir: str) -> str | None:
  for name in _JSON_FILES:
    path = os.path.join(step_dir, name)
    if not os.path.exists(path):
      if name in ("_CHECKPOINT_METADATA", "state/_METADATA"):
        return f"{name} is missing"
      continue
    try:
      with open(path, encoding="utf-8") as f:
        json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
      return f"{name} is not valid JSON ({e})"
  return None


def _file_damage(root: str, path: str, end: int) -> str | None:
  """A referenced file that is absent or shorter than the bytes read from it."""
  full = os.path.join(root, path)
  if not os.path.exists(full):
    return f"array file state/{path} is missing"
  size = os.path.getsize(full)
  if size < end:
    return f"array file state/{path} is truncated ({size} bytes, {end} referenced)"
  return None


def _ocdbt_damage(state_dir: str) -> str | None:
  """Walks the OCDBT database of `state_dir` (manifest, b-tree nodes, value references) and names the first manifest
  that does not decode or the first data file that is missing or shorter than what the tree references."""
  import tensorstore as ts  # pylint: disable=import-outside-toplevel

  if not os.path.exists(os.path.join(state_dir, "manifest.ocdbt")):
    return "state/manifest.ocdbt is missing" if os.path.isdir(os.path.join(state_dir, "d")) else None
  base = ts.KvStore.open({"driver": "file", "path": state_dir.rstrip("/") + "/"}).result()
  try:
    manifest = ts.ocdbt.dump(base).result()
  except Exception as e:  # pylint: disable=broad-except  (tensorstore raises ValueError with a status prefix)
    return f"state/manifest.ocdbt does not decode ({error_reason(e).split('Error decoding manifest: ')[-1]})"
  ends: dict[str, int] = {}
  pending = [version["root"]["location"] for version in manifest.get("versions", [])[-1:] if "root" in version]
  while pending:
    location = pending.pop()
    ref = _OCDBT_REFERENCE.match(location)
    if ref is None:
      continue
    path = ref["base"] + ref["file"]
    damage = _file_damage(state_dir, path, int(ref["offset"]) + int(ref["length"]))
    if damage:
      return damage
    try:
      node = ts.ocdbt.dump(base, location).result()
    except Exception as e:  # pylint: disable=broad-except
      return f"b-tree node file state/{path} does not decode ({error_reason(e)})"
    for entry in node.get("entries", []):
      for key, value in entry.items():
        if not isinstance(value, str):
          continue
        if key == "indirect_value" and (found := _OCDBT_REFERENCE.match(value)):
          file = found["base"] + found["file"]
          ends[file] = max(ends.get(file, 0), int(found["offset"]) + int(found["length"]))
        elif value.startswith("btreenode:"):
          pending.append(value)
  for file, end in sorted(ends.items()):
    damage = _file_damage(state_dir, file, end)
    if damage:
      return damage
  return None


def describe_damage(step_dir: str, error: BaseException) -> str:
  """What is wrong with a step directory whose restore raised `error`, in one phrase.

  A local step is inspected: its metadata files must parse as JSON, and its OCDBT manifest must decode and every array
  file it references must exist with the bytes referenced. When all of that holds (random bytes inside an array file
  of the right size, a remote step), the phrase is the reason tensorstore gave.
  """
  if not is_remote(step_dir) and os.path.isdir(step_dir):
    try:
      found = _json_damage(step_dir) or _ocdbt_damage(os.path.join(step_dir, "state"))
    except Exception as e:  # pylint: disable=broad-except  (the inspection must never hide the restore's error)
      found = None
      logging.getLogger(__name__).debug("inspecting %s failed: %s", step_dir, e)
    if found:
      return found
  return error_reason(error)


# ---------------------------------------------------------------------------------------------------------------------
# Where the details go.
# ---------------------------------------------------------------------------------------------------------------------

_log_lock = threading.Lock()


def append_to_log(path: str, text: str) -> None:
  """Appends `text` to the fault log at `path` (local, or remote through fsspec: read, then rewritten)."""
  with _log_lock:
    if is_remote(path):
      import fsspec  # pylint: disable=import-outside-toplevel

      fs, root = fsspec.core.url_to_fs(path)
      old = fs.cat_file(root).decode("utf-8", "replace") if fs.exists(root) else ""
      with fs.open(root, "w") as f:
        f.write(old + text)
      return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
      f.write(text)


def fault_record(step: int, directory: str, cause: str, error: BaseException, captured: str) -> str:
  """The fault log's entry for one failed step: a header, the full traceback, and what orbax printed meanwhile."""
  when = time.strftime("%Y-%m-%d %H:%M:%S")
  trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
  parts = [f"=== {when} checkpoint at step {step} in {directory}: {cause}\n", trace]
  if captured.strip():
    parts += ["--- output during the restore ---\n", captured if captured.endswith("\n") else captured + "\n"]
  return "".join(parts)


def _is_late_read_report(error: BaseException | None) -> bool:
  """The reports that a failed restore leaves behind: orbax's per-array read errors, surfacing as their coroutines
  are closed, and tensorstore completions calling back into orbax's closed event loop."""
  if isinstance(error, RuntimeError) and str(error) == "Event loop is closed":
    return True
  return type(error) is Exception and str(error).startswith("Encountered error while reading array index")


_late_log: list[str | None] = [None]


# tensorstore's status codes, as its errors begin (absl::Status names)
_TENSORSTORE_STATUS = ("DATA_LOSS: ", "NOT_FOUND: ", "OUT_OF_RANGE: ", "FAILED_PRECONDITION: ", "INVALID_ARGUMENT: ")


def _is_unretrieved_read_error(record: logging.LogRecord, error: BaseException | None) -> bool:
  """asyncio's report of a task whose tensorstore error nobody awaited: a failed restore's other array reads, e.g.
  "DATA_LOSS: Error opening "zarr" driver: ..." for each array of a step whose manifest does not decode."""
  return (
    record.getMessage().startswith("Task exception was never retrieved")
    and isinstance(error, ValueError)
    and str(error).startswith(_TENSORSTORE_STATUS)
  )


class _LateReportFilter(logging.Filter):
  def filter(self, record: logging.LogRecord) -> bool:
    error = record.exc_info[1] if record.exc_info else None
    if not (_is_late_read_report(error) or _is_unretrieved_read_error(record, error)):
      return True
    if _late_log[0]:
      append_to_log(_late_log[0], f"(late report) {record.getMessage()}: {error_reason(error)}\n")
    return False


def route_late_reports(log_path: str | None) -> None:
  """From now on, the late reports of failed restores (`_is_late_read_report`) go to `log_path` (None drops them)
  instead of sys.excepthook, sys.unraisablehook and the asyncio logger. Installed once; a later call moves them."""
  _late_log[0] = log_path
  if getattr(sys.unraisablehook, "_routes_late_reports", False):
    return
  excepthook, unraisablehook = sys.excepthook, sys.unraisablehook

  def keep(error: BaseException) -> None:
    if _late_log[0]:
      append_to_log(_late_log[0], f"(late report) {type(error).__name__}: {error_reason(error)}\n")

  def on_exception(kind, value, tb):
    if _is_late_read_report(value):
      keep(value)
    else:
      excepthook(kind, value, tb)

  def on_unraisable(report):
    if _is_late_read_report(report.exc_value):
      keep(report.exc_value)
    else:
      unraisablehook(report)

  on_unraisable._routes_late_reports = True
  sys.excepthook, sys.unraisablehook = on_exception, on_unraisable
  logging.getLogger("asyncio").addFilter(_LateReportFilter())


@contextlib.contextmanager
def _fd_to_file(fd: int, file) -> Iterator[None]:
  """Points file descriptor `fd` at `file` (C++ logging from tensorstore and jaxlib) for the block."""
  try:
    saved = os.dup(fd)
  except OSError:  # no such descriptor (an embedding without stderr)
    yield
    return
  try:
    for stream in (sys.__stderr__, sys.__stdout__):
      if stream is not None:
        with contextlib.suppress(Exception):
          stream.flush()
    os.dup2(file.fileno(), fd)
    yield
  finally:
    os.dup2(saved, fd)
    os.close(saved)


@contextlib.contextmanager
def quiet_restore_attempt(captured: Callable[[str], None]) -> Iterator[None]:
  """Runs the block with its console output diverted: Python logging (absl's handler and any other on the root
  logger), sys.stdout and sys.stderr (tracebacks, warnings, unraisable reports), and file descriptor 2. The text
  goes to `captured(text)` when the block ends, after a garbage collection that makes the failed reads report. The
  block's exception propagates."""
  buffer = io.StringIO()
  handler = logging.StreamHandler(buffer)
  handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
  root = logging.getLogger()
  saved_handlers = root.handlers[:]
  saved_streams = sys.stdout, sys.stderr
  with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as native:
    try:
      root.handlers = [handler]
      sys.stdout = sys.stderr = buffer
      with _fd_to_file(2, native):
        try:
          yield
        finally:
          gc.collect()  # the failed reads are collected (and report) here, into the buffer
    finally:
      sys.stdout, sys.stderr = saved_streams
      root.handlers = saved_handlers
      native.seek(0)
      captured(buffer.getvalue() + native.read())
