"""JAX's persistent compilation cache, so that a restart (after a preemption, or a resumed run) does not compile the
step again.

The co-evolution step of a 7B slice takes minutes to compile; every start of the same program on the same JAX,
backend and topology compiles it again unless the executable is kept. JAX keys a cached executable by the program,
its shardings, the compile options and the backend's version, so a changed config or a new jax simply misses.
"""

from __future__ import annotations

import os

import jax

# jax's own events (jax._src.compiler / compilation_cache): a test counts them to see a second start hit the cache.
HIT_EVENT = "/jax/compilation_cache/cache_hits"
MISS_EVENT = "/jax/compilation_cache/cache_misses"


def directory_for(flag_value: str, workdir: str) -> str:
  """The cache directory a run uses: the flag's value; else JAX's own JAX_COMPILATION_CACHE_DIR, where the user has
  set it (one cache shared by every run on the machine, so that a new workdir starts warm too); else
  WORKDIR/compile_cache."""
  return flag_value or os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(workdir, "compile_cache")


def enable(directory: str, min_compile_s: float | None = None) -> str:
  """Keeps every executable that took at least `min_compile_s` to compile in `directory` (a local path, or a bucket
  path JAX's epath reads, e.g. gs://...), and reads them back on a later start. Call before the first compile.
  `min_compile_s` defaults to JAX's own JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS where the user has set it, else
  1 s. Returns the directory."""
  if min_compile_s is None:
    min_compile_s = float(os.environ.get("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", 1.0))
  if not directory:
    raise ValueError("the compilation cache needs a directory (or do not enable it)")
  if "://" not in directory:
    directory = os.path.abspath(os.path.expanduser(directory))
    os.makedirs(directory, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", directory)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_s))
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return directory
