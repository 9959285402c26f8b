"""JAX's persistent compilation cache (parallel.compile_cache): a second start of the same program reads the
executable back instead of compiling it again."""

import os
import subprocess
import sys
import textwrap

from conftest import PROJECT_ROOT

# A new process each time, as a restart is: it compiles the tiny config's co-evolution step (the program a run
# compiles first) with the cache in `directory`, and prints jax's cache hit and miss events.
SCRIPT = textwrap.dedent(
  """
  import os, sys
  from genenv_jax.parallel import compile_cache
  compile_cache.enable(sys.argv[1], min_compile_s=0.0)
  import jax
  events = []
  jax.monitoring.register_event_listener(lambda name, **kw: events.append(name))
  from coevolution_configs import tiny_config
  from genenv_jax.coevolution.build import build
  run, state = build(tiny_config(), abstract=True)
  with jax.set_mesh(run.mesh):
    run.coevolution.jit_step(run.state_shardings).lower(state).compile()
  print("HITS", events.count(compile_cache.HIT_EVENT), "MISSES", events.count(compile_cache.MISS_EVENT))
  """
)


def _start(directory) -> tuple[int, int]:
  env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}  # the session's own cache
  env.update(PYTHONPATH=f"{PROJECT_ROOT}:{PROJECT_ROOT / 'tests'}", JAX_PLATFORMS="cpu")
  proc = subprocess.run(
    [sys.executable, "-c", SCRIPT, str(directory)],
    cwd=PROJECT_ROOT,
    capture_output=True,
    text=True,
    timeout=600,
    env=env,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  [line] = [x for x in proc.stdout.splitlines() if x.startswith("HITS")]
  _, hits, _, misses = line.split()
  return int(hits), int(misses)


def test_second_start_reads_the_step_from_the_cache(tmp_path):
  cache = tmp_path / "compile_cache"
  hits, misses = _start(cache)
  assert hits == 0 and misses >= 1  # the first start compiles and writes
  assert any(cache.iterdir())
  hits, misses = _start(cache)
  assert hits >= 1 and misses == 0  # the second reads every executable back


def test_enable_refuses_an_empty_directory():
  import pytest

  from genenv_jax.parallel import compile_cache

  with pytest.raises(ValueError, match="needs a directory"):
    compile_cache.enable("")


def test_a_run_uses_the_flag_then_jax_s_environment_variable_then_the_workdir(monkeypatch):
  from genenv_jax.parallel import compile_cache

  monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/shared/jax_cache")
  assert compile_cache.directory_for("/given", "/run") == "/given"
  assert compile_cache.directory_for("", "/run") == "/shared/jax_cache"
  monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
  assert compile_cache.directory_for("", "/run") == os.path.join("/run", "compile_cache")


def test_the_smallest_compile_kept_is_the_argument_then_jax_s_environment_variable_then_one_second(
  monkeypatch, tmp_path
):
  import jax

  from genenv_jax.parallel import compile_cache

  kept = {
    name: getattr(jax.config, name)
    for name in ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
  }
  try:
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.25")
    compile_cache.enable(str(tmp_path), min_compile_s=2.0)
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 2.0
    compile_cache.enable(str(tmp_path))
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.25
    monkeypatch.delenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")
    compile_cache.enable(str(tmp_path))
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 1.0
  finally:  # this process's own cache, as the session set it
    for name, value in kept.items():
      jax.config.update(name, value)
