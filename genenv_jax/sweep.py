"""Multi-seed sweeps: every (variant, seed) pair of a config, resumable, several at once, with progress and an ETA.

  python -m genenv_jax.sweep --config=configs/default.py --variants=coevolve,random,static,grpo --seeds=0,1,2 \
      --workdir=DIR [--jobs=2] [--report] [-- --config.key=value ...]

Each run is `python -m genenv_jax.main --config=CONFIG:VARIANT --config.seed=SEED` in DIR/runs/VARIANT_sSEED (a
variant may compose override sets, e.g. smoke+random). A CONFIG given with its own variant, e.g.
`--config=configs/default.py:reads_p_hat`, is the base of every run: the runs are `reads_p_hat+VARIANT`, still named
VARIANT_sSEED, so that the comparison reads `coevolve`, `random` and `static` as GenEnv and its ablations. The
`--config.key=value` overrides after `--` go to every run and win over its variant's own settings: an env_seed_mix
given there is `random`'s env_seed_mix too. A run whose
summary.json has reached its total_steps is skipped; any other run is started again in its own workdir, so it resumes
from its latest checkpoint (genenv_jax.training.loop). Every run's TensorBoard directory is linked under
DIR/tensorboard/VARIANT_sSEED, so `tensorboard --logdir DIR/tensorboard` overlays them. `--report` writes the
comparison (genenv_jax.compare, the first variant as the baseline) when the runs are done.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from absl import app, flags

from genenv_jax import cli


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the command-line flags on `flag_values` (a test lists them on a fresh FlagValues). Called on absl's FLAGS
  only when this module runs as a program, so that importing it next to another program's module with flags of the
  same name (tests, tools) never collides in absl's global registry."""
  global _CONFIG, _VARIANTS, _SEEDS, _WORKDIR, _JOBS, _REPORT, _DRY_RUN
  fv = flag_values
  _CONFIG = flags.DEFINE_string(
    "config",
    None,
    "config file, e.g. configs/default.py (variants are appended as :VARIANT), or a file with a base variant, e.g. "
    "configs/default.py:reads_p_hat (runs are reads_p_hat+VARIANT)",
    flag_values=fv,
  )
  _VARIANTS = flags.DEFINE_list(
    "variants", ["coevolve", "random", "static", "grpo"], "variants of the config", flag_values=fv
  )
  _SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "seeds (config.seed)", flag_values=fv)
  _WORKDIR = flags.DEFINE_string("workdir", None, "sweep directory: runs/, tensorboard/, report files", flag_values=fv)
  _JOBS = flags.DEFINE_integer("jobs", 1, "runs at once (each is its own process)", flag_values=fv)
  _REPORT = flags.DEFINE_boolean(
    "report", False, "write the comparison report (genenv_jax.compare) at the end", flag_values=fv
  )
  _DRY_RUN = flags.DEFINE_boolean("dry_run", False, "print the runs and their state; run nothing", flag_values=fv)


@dataclasses.dataclass(frozen=True)
class RunSpec:
  variant: str
  seed: int

  @property
  def name(self) -> str:
    return f"{self.variant}_s{self.seed}"


def plan(variants: list[str], seeds: list[str | int]) -> list[RunSpec]:
  """Every (variant, seed) pair, variant-major; rejects empty, duplicate or malformed entries with a clear error."""
  variants = [v.strip() for v in variants]
  if not variants or any(not v or "/" in v or ":" in v for v in variants):
    raise ValueError(f"--variants must be non-empty names (override sets joined with '+'), got {variants}")
  try:
    seeds = [int(s) for s in seeds]
  except ValueError as e:
    raise ValueError(f"--seeds must be integers separated by commas, got {seeds}") from e
  if not seeds:
    raise ValueError("--seeds is empty: give at least one, e.g. --seeds=0,1,2")
  if len(set(variants)) != len(variants) or len(set(seeds)) != len(seeds):
    raise ValueError(f"duplicate variants or seeds: {variants} x {seeds}")
  return [RunSpec(v, s) for v in variants for s in seeds]


def run_dir(workdir: str, spec: RunSpec) -> str:
  return os.path.join(workdir, "runs", spec.name)


def is_finished(path: str) -> bool:
  """Whether the run in `path` has a summary.json whose final step reached the config's total_steps."""
  from genenv_jax.reporting.summary_report import finished

  try:
    with open(os.path.join(path, "summary.json")) as f:
      return finished(json.load(f))
  except (OSError, ValueError):
    return False


def split_config(config: str) -> tuple[str, str]:
  """(config file, base variant) of --config: `configs/default.py:reads_p_hat` -> ("configs/default.py", "reads_p_hat");
  the base is "" when none is given."""
  path, _, base = config.partition(":")
  return path, base.strip()


def run_variant(config: str, variant: str) -> str:
  """The override sets of one run: the --config's base variant, if any, then the run's own (`reads_p_hat+random`)."""
  base = split_config(config)[1]
  return f"{base}+{variant}" if base else variant


def command(config: str, spec: RunSpec, path: str, overrides: list[str]) -> list[str]:
  """The `genenv_jax.main` command line of one run (in `path` = DIR/runs/NAME). The runs share DIR/warm_starts, so
  that the variants of one seed that warm up alike compute it once (training.warm_start_reuse), and one compilation
  cache, DIR/compile_cache (unless $JAX_COMPILATION_CACHE_DIR names the machine's own), so that each program compiles
  once per sweep."""
  shared = os.path.dirname(os.path.dirname(os.path.abspath(path)))
  cache = (
    [] if os.environ.get("JAX_COMPILATION_CACHE_DIR") else [f"--compile_cache={os.path.join(shared, 'compile_cache')}"]
  )
  return [
    sys.executable,
    "-m",
    "genenv_jax.main",
    f"--config={split_config(config)[0]}:{run_variant(config, spec.variant)}",
    f"--workdir={path}",
    f"--warm_start_reuse={os.path.join(shared, 'warm_starts')}",
    *cache,
    f"--config.seed={spec.seed}",
    *overrides,
  ]


def check_configs(config: str, specs: list[RunSpec], overrides: list[str]) -> None:
  """Validates every variant's config (genenv_jax.training.config_checks) before any run starts; exits with status 2
  listing the bad values. The --config.* overrides are validated by each run's own start-up, which also exits 2."""
  from genenv_jax.training.config_checks import ConfigError, validate

  path = split_config(config)[0]
  try:
    module = cli.config_module(path)
  except FileNotFoundError:
    print(f"sweep: error: the config file {path!r} does not exist", file=sys.stderr)
    sys.exit(2)
  for variant in sorted({run_variant(config, s.variant) for s in specs}):
    try:
      validate(module.get_config(variant))
    except (ConfigError, ValueError) as e:
      print(f"sweep: error: variant {variant!r} of {path}: {e}", file=sys.stderr)
      sys.exit(2)


def link_tensorboard(workdir: str, spec: RunSpec) -> None:
  """DIR/tensorboard/NAME -> runs/NAME/tensorboard (relative, so the sweep directory can move)."""
  tb = os.path.join(workdir, "tensorboard")
  os.makedirs(tb, exist_ok=True)
  link = os.path.join(tb, spec.name)
  if not os.path.lexists(link):
    os.symlink(os.path.join("..", "runs", spec.name, "tensorboard"), link)


def format_eta(seconds: float) -> str:
  seconds = max(0, round(seconds))
  return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def sweep(
  config: str, specs: list[RunSpec], workdir: str, jobs: int = 1, overrides: list[str] | None = None, log=print
) -> dict[str, int]:
  """Runs every unfinished spec (at most `jobs` at once); returns {run name: exit code} of the runs it started."""
  if jobs < 1:
    raise ValueError(f"--jobs must be >= 1, got {jobs}")
  todo = [s for s in specs if not is_finished(run_dir(workdir, s))]
  for s in specs:
    os.makedirs(run_dir(workdir, s), exist_ok=True)
    link_tensorboard(workdir, s)
  log(f"sweep: {len(specs)} runs, {len(specs) - len(todo)} already finished, {len(todo)} to run, {jobs} at once")
  lock, t0, done, codes = threading.Lock(), time.time(), [0], {}

  def one(spec: RunSpec) -> None:
    path = run_dir(workdir, spec)
    with open(os.path.join(path, "log.txt"), "a") as out:
      code = subprocess.run(
        command(config, spec, path, overrides or []), stdout=out, stderr=subprocess.STDOUT, check=False
      ).returncode
    with lock:
      done[0] += 1
      codes[spec.name] = code
      elapsed = time.time() - t0
      eta = elapsed / done[0] * (len(todo) - done[0])
      state = "done" if code == 0 else f"FAILED (exit {code}; see {os.path.join(path, 'log.txt')})"
      log(f"[{done[0]}/{len(todo)}] {spec.name} {state}; elapsed {format_eta(elapsed)}, ETA {format_eta(eta)}")

  with ThreadPoolExecutor(max_workers=jobs) as pool:
    list(pool.map(one, todo))
  return codes


def main(argv) -> None:
  overrides = list(argv[1:])
  bad = [a for a in overrides if not a.startswith("--config.")]
  if bad:
    raise app.UsageError(f"extra arguments must be config overrides (--config.key=value), got {bad}")
  if not _CONFIG.value or not _WORKDIR.value:
    raise app.UsageError("--config and --workdir are required")
  specs = plan(_VARIANTS.value, _SEEDS.value)
  check_configs(_CONFIG.value, specs, overrides)
  workdir = os.path.expanduser(_WORKDIR.value)
  if _DRY_RUN.value:
    for s in specs:
      path = run_dir(workdir, s)
      state = "finished" if is_finished(path) else "to run"
      print(f"{s.name}: {state}: {' '.join(command(_CONFIG.value, s, path, overrides))}")
    return
  codes = sweep(_CONFIG.value, specs, workdir, _JOBS.value, overrides)
  failed = sorted(k for k, c in codes.items() if c != 0)
  if _REPORT.value:
    from genenv_jax import compare

    print(compare.write_report(workdir, baseline=specs[0].variant), flush=True)
  if failed:
    sys.exit(f"sweep: {len(failed)} run(s) failed: {', '.join(failed)} (rerun the same command to resume them)")


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.sweep")
