"""CLI: memory and speed planning. Compiles the FULL co-evolution step for its target from abstract shapes only (no
weights allocated, no checkpoint read), then prints per-device memory, the compiled program's Mosaic kernels and
collectives, the analytic per-phase time (compute, HBM, ICI collectives), training MFU, sampling HBM-bandwidth
utilisation, a memory breakdown, and whether the config fits.

  python -m genenv_jax.plan --config=configs/qwen2_5_7b.py:v5p-64 [--target=auto|tpu|cpu] [--nocompile] [--json=PATH]

Target (--target, default auto): `tpu` compiles for the config's slice (`config.slice`, e.g. v5p-64) with libtpu's TPU
compiler on compile-only devices of that topology, from this host (planning.topology; `pip install -e ".[tpu]"`);
`cpu` compiles for N fake CPU devices (--devices, --chip; XLA:CPU's figures are an estimate). auto is tpu where the
config names a slice and a matching libtpu is installed, else cpu, and the output says which it used and why.
The library behind it is planning.planner (what the figures are), planning.hlo (collectives), planning.topology.
--nocompile gives the analytic figures only (no domain data needed).
"""

from __future__ import annotations

import json
import os
import re
import sys

from absl import app, flags
from ml_collections import config_flags

from genenv_jax import cli
from genenv_jax.parallel import cpu_pipeline


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the command-line flags on `flag_values` (a test lists them on a fresh FlagValues). Called on absl's FLAGS
  only when this module runs as a program, so that importing it next to another program's module with flags of the
  same name (tests, tools) never collides in absl's global registry."""
  global _CONFIG, _DEVICES, _CHIP, _USABLE, _JSON, _LAYERS, _FAST, _NOCOMPILE, _ATTENTION, _TARGET, _HLO, _FIT, _CONFIRM
  fv = flag_values
  _CONFIG = config_flags.DEFINE_config_file(
    "config",
    None,
    "Config file (get_config(arg) style), e.g. configs/qwen2_5_7b.py:v5p-64.",
    lock_config=True,
    flag_values=fv,
  )
  _DEVICES = flags.DEFINE_integer(
    "devices",
    None,
    "Number of (fake CPU) devices of the virtual mesh, one per chip "
    "(default: the chips of the config's slice; v5p-64 = 32 chips).",
    flag_values=fv,
  )
  _CHIP = flags.DEFINE_string(
    "chip",
    None,
    "TPU chip for the time and fit estimates: v4, v5e, v5p or v6e (default: the config's slice).",
    flag_values=fv,
  )
  _USABLE = flags.DEFINE_float(
    "usable_fraction", 0.9, "Fraction of HBM a program may use and still 'fit'.", flag_values=fv
  )
  _JSON = flags.DEFINE_string("json", None, "Also write the figures as JSON to this path.", flag_values=fv)
  _LAYERS = flags.DEFINE_list(
    "layers",
    None,
    "Two small layer counts, e.g. 2,4: compile the step with both models "
    "cut to each and extrapolate the memory figures linearly to the real layer count (a "
    "cross-check, or for programs too slow to compile here; see plan_by_layers).",
    flag_values=fv,
  )
  _FAST = flags.DEFINE_boolean(
    "fast_compile",
    True,
    "Skip LLVM optimisation in the CPU compile "
    "(--xla_backend_optimization_level=0): same buffers, much shorter compile.",
    flag_values=fv,
  )
  _NOCOMPILE = flags.DEFINE_boolean(
    "nocompile",
    False,
    "Analytic figures only: no lowering, no compile, no domain "
    "build (the fit is then judged on the analytic memory estimate).",
    flag_values=fv,
  )
  _ATTENTION = flags.DEFINE_string(
    "attention",
    None,
    "Attention implementation for both models, overriding model.attention: naive, blockwise, splash, cudnn or auto.",
    flag_values=fv,
  )
  _TARGET = flags.DEFINE_enum(
    "target",
    "auto",
    ["auto", "tpu", "cpu"],
    "Compile for the slice's TPU topology (libtpu), for fake CPU devices, or auto: tpu where the config names a "
    "slice and libtpu is installed (and neither --devices nor --chip asks for a virtual mesh), else cpu.",
    flag_values=fv,
  )
  _HLO = flags.DEFINE_string(
    "hlo",
    None,
    "Also write the compiled program's optimised HLO text to this path (collectives, kernels).",
    flag_values=fv,
  )
  _FIT = flags.DEFINE_boolean(
    "fit", False, "Search the memory knobs for the fastest setting that fits (planning.fit).", flag_values=fv
  )
  _CONFIRM = flags.DEFINE_integer(
    "fit_confirm", 2, "--fit: compile the best N candidates to confirm the fit (0: analytic only).", flag_values=fv
  )
  flags.mark_flags_as_required(["config"], flag_values=fv)


def set_device_count(n: int, fast_compile: bool = False) -> None:
  """Asks XLA for n fake CPU devices. XLA reads XLA_FLAGS when JAX first creates its backends (at the first
  jax.devices() or computation, not at import), so this works until then; afterwards the count cannot change and
  `plan` reports the mismatch."""
  if n <= 0:
    raise ValueError(f"--devices must be positive, got {n}")
  flags_now = re.sub(r"--xla_force_host_platform_device_count=\\d+", "", os.environ.get("XLA_FLAGS", ""))
  extra = f" {cpu_pipeline.as_xla_flags(cpu_pipeline.LLVM_OFF)}" if fast_compile else ""
  os.environ["XLA_FLAGS"] = f"{flags_now} --xla_force_host_platform_device_count={n}{extra}".strip()
  use_cpu_runtime()


def use_cpu_runtime() -> None:
  """JAX's runtime on the CPU only: plan compiles, it never runs, and a TPU target's devices are libtpu's
  compile-only ones (jax would otherwise try, and fail, to start a TPU runtime on a host without chips)."""
  os.environ["JAX_PLATFORMS"] = "cpu"
  if "jax" in sys.modules:
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
      sys.modules["jax"].config.update("jax_platforms", "cpu")


def choose_target(requested: str, config, virtual_mesh_asked: bool, compile_program: bool) -> tuple[str, str | None]:
  """(target, why): the compile target for --target=`requested`, and a note where auto fell back to the CPU."""
  from genenv_jax.planning import topology

  if requested == "cpu" or not compile_program:
    return "cpu", None
  from genenv_jax.planning.workload import tree_of

  problem = None if tree_of(config).slice else "the config names no TPU slice (config.slice)"
  if problem is None and virtual_mesh_asked:
    problem = "--devices or --chip asks for a virtual mesh of that size"
  problem = problem or topology.libtpu_problem()
  if requested == "tpu":
    if problem:
      raise ValueError(f"--target=tpu: {problem}")
    return "tpu", None
  return ("cpu", f"compiled for fake CPU devices, not the TPU: {problem}") if problem else ("tpu", None)


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    from genenv_jax.planning import planner
    from genenv_jax.planning.workload import host_slice, slice_of, tree_of
    from genenv_jax.training.config_checks import validate

    validate(_CONFIG.value)  # a ConfigError is a ValueError: one message listing every bad value, exit 2
    virtual = _DEVICES.value is not None or _CHIP.value is not None
    if virtual or tree_of(_CONFIG.value).slice:
      chip_name, devices = slice_of(_CONFIG.value, _DEVICES.value, _CHIP.value)
    else:  # no slice, no flags: this host's devices (the embedded default plans as it runs)
      chip_name, devices, note = host_slice(_CONFIG.value)
      print(f"plan: {note}", file=sys.stderr)
    compiles = not _NOCOMPILE.value and not (_FIT.value and _CONFIRM.value == 0)
    target, why = choose_target(_TARGET.value, _CONFIG.value, virtual, compiles)
    if why:
      print(f"plan: {why}", file=sys.stderr)
    if target == "cpu" and compiles:
      set_device_count(devices, _FAST.value)
    elif target == "tpu":
      use_cpu_runtime()
    kw = dict(usable_fraction=_USABLE.value, attention=_ATTENTION.value, target=target, hlo_path=_HLO.value)
    if _FIT.value:
      from genenv_jax.planning import fit

      if _LAYERS.value or _HLO.value:
        raise ValueError("--fit compiles several candidates whole; it takes neither --layers nor --hlo")
      confirm = _CONFIRM.value if compiles else 0
      result = fit.search(_CONFIG.value, devices, chip_name, confirm, None, _USABLE.value, _ATTENTION.value, target)
    elif _LAYERS.value:
      layers = tuple(int(x) for x in _LAYERS.value)
      if len(layers) != 2 or layers[0] == layers[1] or min(layers) <= 0:
        raise ValueError(f"--layers takes two different positive layer counts (e.g. 2,4), got {_LAYERS.value}")
      if _NOCOMPILE.value:
        raise ValueError("--layers compiles the step at two layer counts; it cannot go with --nocompile")
      result = planner.plan_by_layers(_CONFIG.value, devices, chip_name, layers, **kw)
    else:
      result = planner.plan(_CONFIG.value, devices, chip_name, compile_program=not _NOCOMPILE.value, **kw)
  except (ValueError, FileNotFoundError, RuntimeError) as e:  # FileNotFoundError: also genenv_jax.data's errors
    print(f"plan: error: {e}", file=sys.stderr)
    sys.exit(2)
  if _JSON.value:
    with open(_JSON.value, "w") as fh:
      json.dump(result, fh, indent=1)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.plan")
