"""XLA:CPU's cheaper compile pipelines, for programs that are compiled more than they are run: plan's CPU estimate,
the smoke benchmarks and the tests. Each is a set of XLA debug options, given to a compile as `compiler_options` or
to a whole process as XLA_FLAGS text (`as_xla_flags`, read when JAX creates its backends). Imports nothing heavy, so
a process can set its XLA_FLAGS from here before JAX loads.

Measured on the tests' tiny co-evolution step, one CPU device of a 2-core host
(docs/EXPERIMENTS.md, "Costs behind implementation choices"): XLA's default pipeline compiles it in 13.4 s,
`LLVM_OFF` in 7.4 s, `CHEAPEST` in 3.9 s; the compiled step then ran in 0.07 s, against 0.05 s (`LLVM_OFF`) and
0.03 s (default).
"""

from __future__ import annotations

LLVM_OFF = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
"""LLVM's optimisation passes off. The HLO pipeline, its fusions and buffer assignment are the default's, so the
memory figures are too (`python -m genenv_jax.plan --fast_compile`)."""

CHEAPEST = {**LLVM_OFF, "xla_cpu_use_fusion_emitters": False}
"""LLVM_OFF and XLA:CPU's older loop fusion emitters instead of its MLIR ones: the cheapest compile; fusion can
differ from the default's, so this is for running tiny programs (tests, smoke benchmarks), not for memory figures."""


PORTABLE = {
  "xla_cpu_max_isa": "SSE4_2",
  "xla_cpu_experimental_ynn_fusion_type": "",
  "xla_cpu_use_xnnpack": False,
  "xla_cpu_use_onednn": False,
  "xla_cpu_multi_thread_eigen": False,
}
"""Numerics that do not depend on the x86 CPU the program runs on: code generated for SSE4.2 only (every x86-64 CPU
that runs jaxlib has it), and no kernel library that picks its kernels at run time by the CPU's features: YNNPACK's
fusions (XLA:CPU's default for dots and their neighbours: `__ynn_fusion` in the optimised HLO), XNNPACK and oneDNN
off, so dots run in XLA's own emitters or Eigen's single-threaded contraction, whose summation order is fixed at
jaxlib's build. Slower; for digests that must agree across machines (`genenv_jax.scripts.numerics_digest`), not for
runs. XLA's default, by contrast, gave the demo's warm-started agent a final SFT loss of 0.099 on an AVX2 host and
0.044 under `--xla_cpu_max_isa=SSE4_2` on the same host (docs/EXPERIMENTS.md, "The demo across machines")."""


def as_xla_flags(options: dict[str, bool | int]) -> str:
  """The options as XLA_FLAGS text: {"a": 0, "b": True} -> "--a=0 --b=true"."""
  return " ".join(f"--{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in options.items())
