"""The maths of `genenv_jax.plan`: TPU chips, the per-device memory verdict, a roofline step time, MFU, and advice.

Every function here is pure (numbers in, numbers out) and tested by hand-computed cases in tests/test_plan.py.

Chips (one JAX device per chip: v4 and v5p run their two TensorCores as one "megacore" device; v5e and v6e have one
TensorCore per chip). Peak dense bf16 FLOP/s, HBM capacity and HBM bandwidth per chip, from Google Cloud's TPU
system-architecture pages (read 2026-12):
  v4   275 TFLOP/s, 32 GiB, 1200 GB/s   https://cloud.google.com/tpu/docs/v4
  v5e  197 TFLOP/s, 16 GiB,  819 GB/s   https://cloud.google.com/tpu/docs/v5e
  v5p  459 TFLOP/s, 95 GiB, 2765 GB/s   https://cloud.google.com/tpu/docs/v5p
  v6e  918 TFLOP/s, 32 GiB, 1640 GB/s   https://cloud.google.com/tpu/docs/v6e
Slice names count TensorCores for v4/v5p (v5p-64 = 32 chips = 32 JAX devices) and chips for v5e/v6e (v6e-64 = 64).

Memory (per device, from XLA's CompiledMemoryStats): peak ≈ arguments + outputs + temporaries + generated code −
aliased bytes (donated inputs that outputs reuse), the usual upper bound (MaxText's "total memory" uses the same
sum). A config fits when that peak is at most `usable_fraction` (default 0.9) of the chip's HBM: the margin covers
the runtime's own reservations, fragmentation, and the CPU compiler's buffer assignment differing from TPU's.

Step time (roofline, Williams et al. 2009): each phase takes max(FLOPs / peak FLOP/s, HBM bytes / bandwidth) per
device; the step is the sum of its phases. MFU (PaLM, Chowdhery et al. 2022, appendix B) = model FLOPs (no
rematerialisation recompute) / (devices × peak FLOP/s × step time).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

GIB = 2**30


@dataclasses.dataclass(frozen=True)
class Chip:
  name: str
  peak_flops: float   # dense bf16 FLOP/s per chip (= per JAX device)
  hbm_bytes: float    # HBM capacity per chip
  hbm_bandwidth: float  # bytes/s per chip
  source: str


CHIPS: dict[str, Chip] = {
    "v4": Chip("v4", 275e12, 32 * GIB, 1200e9, "https://cloud.google.com/tpu/docs/v4"),
    "v5e": Chip("v5e", 197e12, 16 * GIB, 819e9, "https://cloud.google.com/tpu/docs/v5e"),
    "v5p": Chip("v5p", 459e12, 95 * GIB, 2765e9, "https://cloud.google.com/tpu/docs/v5p"),
    "v6e": Chip("v6e", 918e12, 32 * GIB, 1640e9, "https://cloud.google.com/tpu/docs/v6e"),
}


def chip(name: str) -> Chip:
  """The chip named `name` (case-insensitive), or a ValueError listing the known ones."""
  key = str(name).strip().lower()
  if key not in CHIPS:
    raise ValueError(f"unknown chip {name!r}; known chips: {', '.join(sorted(CHIPS))}")
  return CHIPS[key]


# ---- memory ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Memory:
  """Per-device bytes of a compiled program (XLA's CompiledMemoryStats fields)."""

  arguments: int
  outputs: int
  temporaries: int
  generated_code: int
  alias: int          # output bytes that reuse donated argument buffers
  xla_peak: int = 0   # XLA's own heap-simulation peak where the backend reports it (0 = not reported)

  @property
  def peak(self) -> int:
    """arguments + outputs + temporaries + generated code − alias (an upper bound on the live bytes)."""
    return self.arguments + self.outputs + self.temporaries + self.generated_code - self.alias


@dataclasses.dataclass(frozen=True)
class Verdict:
  fits: bool
  peak: int
  usable: float       # usable_fraction × HBM
  hbm: float
  shortfall: float    # bytes over `usable` (0 when it fits)
  utilisation: float  # peak / HBM


def fit_verdict(peak_bytes: float, hbm_bytes: float, usable_fraction: float = 0.9) -> Verdict:
  """Fits iff peak_bytes <= usable_fraction × hbm_bytes."""
  if hbm_bytes <= 0:
    raise ValueError(f"hbm_bytes must be positive, got {hbm_bytes}")
  if not 0 < usable_fraction <= 1:
    raise ValueError(f"usable_fraction must be in (0, 1], got {usable_fraction}")
  if peak_bytes < 0:
    raise ValueError(f"peak_bytes must be >= 0, got {peak_bytes}")
  usable = usable_fraction * hbm_bytes
  return Verdict(fits=peak_bytes <= usable, peak=int(peak_bytes), usable=usable, hbm=hbm_bytes,
                 shortfall=max(0.0, peak_bytes - usable), utilisation=peak_bytes / hbm_bytes)


# ---- FLOPs of the co-evolution step (analytic) ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Shape:
  """What the FLOP count needs of a decoder: matmul parameters of the body, the head, and attention sizes."""

  body_params: int     # parameters of the layers that take part in matmuls (q, k, v, o, gate, up, down; biases too)
  head_params: int     # vocab × hidden (the LM head, tied or not)
  layers: int
  heads: int
  head_dim: int
  kv_heads: int
  param_bytes: int     # bytes of all parameters (the weights a decode step reads)


def forward_flops(shape: Shape, rows: int, tokens: int, keys: int, head_tokens: int) -> float:
  """One forward pass: 2·body·rows·tokens (matmuls) + 2·head·rows·head_tokens (LM head) + attention
  4·rows·tokens·keys·heads·head_dim·layers (QKᵀ and PV over the FULL key length: this decoder masks, it does not skip,
  the causal half; Kaplan et al. 2020, table 1, without that halving)."""
  return (2.0 * shape.body_params * rows * tokens + 2.0 * shape.head_params * rows * head_tokens
          + 4.0 * rows * tokens * keys * shape.heads * shape.head_dim * shape.layers)


@dataclasses.dataclass(frozen=True)
class Phase:
  name: str
  flops: float        # global hardware FLOPs (rematerialisation included)
  model_flops: float  # global FLOPs without rematerialisation (the MFU numerator)
  hbm_bytes: float    # per-device HBM bytes that bound the phase (decode: weights + KV cache read per token)


def sampling_phase(name: str, shape: Shape, rows: int, prompt: int, new: int, devices: int, tensor: int,
                   kv_bytes_per_token: float) -> Phase:
  """Prefill (prompt tokens, head at the last one) + `new` decode steps, each a one-token forward over the full
  prompt + new cache slots. Each decode step reads the weights (param_bytes / tensor per device, after the fsdp
  all-gather) and this device's KV cache (rows·slots·kv_bytes_per_token / devices)."""
  slots = prompt + new
  flops = forward_flops(shape, rows, prompt, prompt, 1) + new * forward_flops(shape, rows, 1, slots, 1)
  per_step_bytes = shape.param_bytes / tensor + rows * slots * kv_bytes_per_token / devices
  return Phase(name, flops, flops, new * per_step_bytes)


def train_phase(name: str, shape: Shape, rows: int, prompt: int, response: int, remat: bool, passes_fwd: int = 0,
                passes_train: int = 1) -> Phase:
  """`passes_fwd` plain forwards (reference / old-policy log-probs) + `passes_train` forward+backward passes, over
  rows × (prompt + response) tokens, head at the response positions. Backward = 2 × forward; remat recomputes the
  forward once more (hardware FLOPs only)."""
  fwd = forward_flops(shape, rows, prompt + response, prompt + response, response)
  model = (passes_fwd + 3 * passes_train) * fwd
  hardware = model + (passes_train * fwd if remat else 0.0)
  return Phase(name, hardware, model, 0.0)


@dataclasses.dataclass(frozen=True)
class StepEstimate:
  seconds: float
  flops: float         # global hardware FLOPs per step
  model_flops: float
  mfu: float
  phases: tuple[tuple[str, float, str], ...]  # (name, seconds, "compute" | "memory")


def step_estimate(phases: Sequence[Phase], devices: int, peak_flops: float, hbm_bandwidth: float) -> StepEstimate:
  """Σ over phases of max(flops / devices / peak, hbm_bytes / bandwidth); MFU = model FLOPs / (devices·peak·time)."""
  if devices <= 0:
    raise ValueError(f"devices must be positive, got {devices}")
  if peak_flops <= 0 or hbm_bandwidth <= 0:
    raise ValueError(f"peak_flops and hbm_bandwidth must be positive, got {peak_flops}, {hbm_bandwidth}")
  rows, total = [], 0.0
  for p in phases:
    compute, memory = p.flops / devices / peak_flops, p.hbm_bytes / hbm_bandwidth
    t = max(compute, memory)
    rows.append((p.name, t, "compute" if compute >= memory else "memory"))
    total += t
  flops, model = sum(p.flops for p in phases), sum(p.model_flops for p in phases)
  mfu = model / (devices * peak_flops * total) if total > 0 else 0.0
  return StepEstimate(total, flops, model, mfu, tuple(rows))


# ---- advice ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Advice:
  component: str
  bytes: int
  knob: str


KNOBS = {
    "temporaries": "activations of the largest batch: raise agent.grpo.minibatches (fewer rows per update; each "
                   "mini-batch is its own optimizer step), turn on model.remat if off, or shorten the domain lengths",
    "optimizer": "AdamW moments: grow the fsdp axis (mesh.fsdp) so they shard over more chips",
    "optimizer_replicated": "AdamW moments are REPLICATED on every chip: give them their parameters' shardings "
                            "(plan --shard_optimizer shows the effect)",
    "parameters": "trained weights: grow the fsdp axis (mesh.fsdp)",
    "references": "frozen reference copies: offload them to host memory or drop them (agent.grpo.kl_coef=0 and "
                  "env.kl_coef=0), or grow the fsdp axis",
    "pools": "task pools (replicated): lower pools.train_capacity / pools.env_capacity",
}


def rank_advice(components: Mapping[str, float], min_fraction: float = 0.01) -> list[Advice]:
  """The knobs for the memory components, largest component first; components under min_fraction of the total
  are left out. Keys are those of KNOBS (anything else is a ValueError)."""
  unknown = set(components) - set(KNOBS)
  if unknown:
    raise ValueError(f"unknown memory components {sorted(unknown)}; known: {sorted(KNOBS)}")
  total = sum(components.values())
  ranked = sorted(components.items(), key=lambda kv: -kv[1])
  return [Advice(name, int(size), KNOBS[name]) for name, size in ranked
          if total > 0 and size >= min_fraction * total]


def fmt_bytes(n: float) -> str:
  """Bytes as GiB with two decimals (MiB below 1 GiB)."""
  return f"{n / GIB:.2f} GiB" if abs(n) >= GIB else f"{n / 2**20:.1f} MiB"


def divisibility_warnings(rows: Mapping[str, int], batch_shards: int) -> list[str]:
  """A warning for each batch whose row count does not divide by the (data × fsdp) shards: such a batch is not
  split over the devices (sharding.logical_to_spec replicates it), so each device computes all of its rows."""
  return [f"{name} = {n} does not divide by the {batch_shards} (data x fsdp) shards: that batch is replicated, "
          f"not split; choose sizes that are multiples of {batch_shards}"
          for name, n in rows.items() if n % batch_shards]


def extrapolate(x1: float, y1: float, x2: float, y2: float, x: float) -> float:
  """The straight line through (x1, y1) and (x2, y2), evaluated at x (x1 != x2)."""
  if x1 == x2:
    raise ValueError(f"extrapolation needs two different points, got x1 = x2 = {x1}")
  return y1 + (y2 - y1) * (x - x1) / (x2 - x1)
