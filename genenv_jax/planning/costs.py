"""The maths of `genenv_jax.plan`: chips (TPUs, one GPU) and slices, the memory verdict, FLOP counts, and advice.

Every function here is pure (numbers in, numbers out) and tested by hand-computed cases in
tests/unit/planning/test_plan.py. The per-phase time, collectives, MFU and memory breakdown are in planning/analytic.py.

Chips (one JAX device per chip: v4 and v5p run their two TensorCores as one "megacore" device; v5e and v6e have one
TensorCore per chip). Peak dense bf16 FLOP/s, HBM capacity and HBM bandwidth per chip, from Google Cloud's TPU
system-architecture pages (read 2026-12):
  v4   275 TFLOP/s, 32 GiB, 1200 GB/s   https://cloud.google.com/tpu/docs/v4
  v5e  197 TFLOP/s, 16 GiB,  819 GB/s   https://cloud.google.com/tpu/docs/v5e
  v5p  459 TFLOP/s, 95 GiB, 2765 GB/s   https://cloud.google.com/tpu/docs/v5p
  v6e  918 TFLOP/s, 32 GiB, 1640 GB/s   https://cloud.google.com/tpu/docs/v6e
ICI (inter-chip interconnect) bandwidth per chip, ONE direction, i.e. what a chip can receive per second in a
collective: half the pages' "bidirectional ICI bandwidth per chip" (v5p 1200 GB/s, v6e 800 GB/s, v5e 400 GB/s).
Cross-check: the pages' "all-reduce bandwidth per Pod" over the pod's chips gives the same one-direction figure
(v6e 102.4 TB/s / 256 = 400 GB/s, v5e 51.2 TB/s / 256 = 200 GB/s). v4's page gives no per-chip figure: its
1.1 PB/s all-reduce bandwidth per 4096-chip pod, 269 GB/s per chip, is used.
  v4   269 GB/s (1.1 PB/s / 4096)   v5e 200 GB/s   v5p 600 GB/s   v6e 400 GB/s
One GPU, for the device check (`bench.device`): NVIDIA H200 SXM, 989 TFLOP/s dense bf16 (the datasheet's 1,979 is
with 2:4 sparsity), 4.8 TB/s HBM3e, 141 GB (143,771 MiB as nvidia-smi reports it, about 140 GiB), NVLink 900 GB/s
bidirectional (450 GB/s one direction): https://www.nvidia.com/en-us/data-center/h200/ (read 2026-12).
Slice names count TensorCores for v4/v5p (v5p-64 = 32 chips = 32 JAX devices) and chips for v5e/v6e (v6e-64 = 64):
`slice_chips`.

Memory (per device, from XLA's CompiledMemoryStats): peak ≈ arguments + outputs + temporaries + generated code −
aliased bytes (donated inputs that outputs reuse), the usual upper bound (MaxText's "total memory" uses the same
sum). A config fits when that peak is at most `usable_fraction` (default 0.9) of the chip's HBM: the margin covers
the runtime's own reservations, fragmentation, and the CPU compiler's buffer assignment differing from TPU's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

GIB = 2**30


@dataclasses.dataclass(frozen=True)
class Chip:
  name: str
  peak_flops: float  # dense bf16 FLOP/s per chip (= per JAX device)
  hbm_bytes: float  # HBM capacity per chip
  hbm_bandwidth: float  # bytes/s per chip
  ici_bandwidth: float  # bytes/s one chip receives over ICI (one direction; see the module docstring)
  source: str


CHIPS: dict[str, Chip] = {
  "v4": Chip("v4", 275e12, 32 * GIB, 1200e9, 1.1e15 / 4096, "https://cloud.google.com/tpu/docs/v4"),
  "v5e": Chip("v5e", 197e12, 16 * GIB, 819e9, 200e9, "https://cloud.google.com/tpu/docs/v5e"),
  "v5p": Chip("v5p", 459e12, 95 * GIB, 2765e9, 600e9, "https://cloud.google.com/tpu/docs/v5p"),
  "v6e": Chip("v6e", 918e12, 32 * GIB, 1640e9, 400e9, "https://cloud.google.com/tpu/docs/v6e"),
  "h200": Chip("h200", 989e12, 143771 * 2**20, 4.8e12, 450e9, "https://www.nvidia.com/en-us/data-center/h200/"),
}


def chip(name: str) -> Chip:
  """The chip named `name` (case-insensitive), or a ValueError listing the known ones."""
  key = str(name).strip().lower()
  if key not in CHIPS:
    raise ValueError(f"unknown chip {name!r}; known chips: {', '.join(sorted(CHIPS))}")
  return CHIPS[key]


CORES_PER_CHIP = {"v4": 2, "v5p": 2, "v5e": 1, "v6e": 1}  # what a slice name's number counts, per chip


def slice_chips(name: str) -> tuple[str, int]:
  """'v5p-64' -> ('v5p', 32): the chip and the number of chips (= JAX devices) of a Cloud TPU slice name. The
  number counts TensorCores on v4 / v5p (two per chip) and chips on v5e / v6e ('v5litepod-N' is v5e-N)."""
  m = re.fullmatch(r"(v4|v5p|v5e|v5litepod|v6e)-(\d+)", str(name).strip().lower())
  if not m:
    raise ValueError(f"unknown TPU slice {name!r}: expected a name like v5p-64, v6e-64, v5e-8 or v4-32")
  kind = "v5e" if m.group(1) == "v5litepod" else m.group(1)
  count, per_chip = int(m.group(2)), CORES_PER_CHIP[kind]
  if count <= 0 or count % per_chip:
    raise ValueError(
      f"TPU slice {name!r}: {count} must be a positive multiple of {per_chip} ({kind} slice names count TensorCores)"
      if per_chip > 1
      else f"TPU slice {name!r} has no chips"
    )
  return kind, count // per_chip


# ---- memory ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Memory:
  """Per-device bytes of a compiled program (XLA's CompiledMemoryStats fields)."""

  arguments: int
  outputs: int
  temporaries: int
  generated_code: int
  alias: int  # output bytes that reuse donated argument buffers
  xla_peak: int = 0  # XLA's own heap-simulation peak where the backend reports it (0 = not reported)

  @property
  def peak(self) -> int:
    """arguments + outputs + temporaries + generated code − alias (an upper bound on the live bytes)."""
    return self.arguments + self.outputs + self.temporaries + self.generated_code - self.alias


@dataclasses.dataclass(frozen=True)
class Verdict:
  fits: bool
  peak: int
  usable: float  # usable_fraction × HBM
  hbm: float
  shortfall: float  # bytes over `usable` (0 when it fits)
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
  return Verdict(
    fits=peak_bytes <= usable,
    peak=int(peak_bytes),
    usable=usable,
    hbm=hbm_bytes,
    shortfall=max(0.0, peak_bytes - usable),
    utilisation=peak_bytes / hbm_bytes,
  )


# ---- FLOPs of a decoder (analytic) -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Shape:
  """What the analytic model needs of a decoder: matmul parameters of the body, the head, attention and MLP sizes."""

  body_params: int  # parameters of the layers that take part in matmuls (q, k, v, o, gate, up, down; biases too)
  head_params: int  # vocab × hidden (the LM head, tied or not)
  layers: int
  heads: int
  head_dim: int
  kv_heads: int
  param_bytes: int  # bytes of all parameters (the weights a decode step reads)
  hidden: int = 0
  intermediate: int = 0
  dtype_bytes: int = 2  # bytes per activation / KV-cache element (the compute dtype)
  kv_cache: str = "auto"  # the KV cache kind: "auto" (dtype_bytes per element) or "int8" (1 byte + a float32 scale)

  @property
  def vocab(self) -> int:
    return self.head_params // self.hidden if self.hidden else 0

  @property
  def kv_bytes_per_token(self) -> int:
    """KV-cache bytes one token occupies over all layers: 2 (K and V) × layers × kv_heads × bytes of one head's
    vector, head_dim × dtype bytes, or for an int8 cache head_dim × 1 + 4 (its float32 scale)."""
    vector = self.head_dim + 4 if self.kv_cache == "int8" else self.head_dim * self.dtype_bytes
    return 2 * self.layers * self.kv_heads * vector


def forward_flops(shape: Shape, rows: int, tokens: int, keys: float, head_tokens: int) -> float:
  """One forward pass: 2·body·rows·tokens (matmuls) + 2·head·rows·head_tokens (LM head) + attention
  4·rows·tokens·keys·heads·head_dim·layers (QKᵀ and PV; Kaplan et al. 2020, table 1). `keys` is the mean number of
  keys a query is scored against: the full key length for an implementation that masks the causal half, about half
  of it for one that skips masked blocks (`causal_keys`)."""
  return (
    2.0 * shape.body_params * rows * tokens
    + 2.0 * shape.head_params * rows * head_tokens
    + 4.0 * rows * tokens * keys * shape.heads * shape.head_dim * shape.layers
  )


def causal_keys(tokens: int, offset: int = 0) -> float:
  """Mean keys per query under a causal mask when query t (0-based) sees offset + t + 1 keys: offset + (tokens+1)/2."""
  return offset + (tokens + 1) / 2.0


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
  "(coevolution.build.optimizer_state_shardings, which every state built by coevolution.build has)",
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
  return [Advice(name, int(size), KNOBS[name]) for name, size in ranked if total > 0 and size >= min_fraction * total]


def fmt_bytes(n: float) -> str:
  """Bytes as GiB with two decimals (MiB below 1 GiB)."""
  return f"{n / GIB:.2f} GiB" if abs(n) >= GIB else f"{n / 2**20:.1f} MiB"


def divisibility_warnings(rows: Mapping[str, int], batch_shards: int) -> list[str]:
  """A warning for each batch whose row count does not divide by the (data × fsdp) shards: such a batch is not
  split over the devices (sharding.logical_to_spec replicates it), so each device computes all of its rows."""
  return [
    f"{name} = {n} does not divide by the {batch_shards} (data x fsdp) shards: that batch is replicated, "
    f"not split; choose sizes that are multiples of {batch_shards}"
    for name, n in rows.items()
    if n % batch_shards
  ]


def extrapolate(x1: float, y1: float, x2: float, y2: float, x: float) -> float:
  """The straight line through (x1, y1) and (x2, y2), evaluated at x (x1 != x2)."""
  if x1 == x2:
    raise ValueError(f"extrapolation needs two different points, got x1 = x2 = {x1}")
  return y1 + (y2 - y1) * (x - x1) / (x2 - x1)
