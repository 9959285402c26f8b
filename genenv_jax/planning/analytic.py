"""Analytic time and memory of one co-evolution step on a TPU slice: per phase, with collectives, remat and MFU.

Pure functions (numbers in, numbers out), tested by hand in tests/unit/planning/test_plan.py; `genenv_jax.plan`
prints them beside the compiled program's memory. Bytes and seconds are per device (= per chip); FLOPs are global
unless named otherwise.

The step's phases (coevolution/step.py), each a `Cost`:
  env prefill / env decode      env_rows prompts of env_prompt tokens, then env_output decode steps
  agent prefill / agent decode  agent_rows prompts of agent_prompt tokens, then agent_answer decode steps
  agent update                  per mini-batch (M of them): a reference forward (when the KL term is on), a forward and
                                a backward over rows/M × (prompt + answer) tokens, the LM head at the answer tokens,
                                one optimizer step
  env update                    a reference forward, a forward and a backward, and two forwards (the KL cap's log-probs
                                before and after the update) over env_rows × (env_prompt + env_output), one step

Time of a phase (`timed`), with compute = hardware FLOPs / (devices × peak), hbm = bytes read from HBM / bandwidth
(the roofline, Williams et al. 2009; decoding reads the weights and the KV cache every step) and ici = bytes each chip
receives in collectives / ICI bandwidth (planning.costs.CHIPS):
  serial      max(compute, hbm) + ici     (no overlap of communication with compute)
  overlapped  max(compute, hbm, ici)      (perfect overlap)
MFU = model FLOPs / (devices × peak × time) (PaLM, Chowdhery et al. 2022, appendix B). It is an UPPER BOUND: it
ignores kernel efficiency, the vector unit's elementwise work (norms, softmax, RoPE), the latency of small collectives,
host callbacks and the step's bookkeeping.

FLOPs. Model FLOPs count each pass once (backward = 2 × forward) with attention over the causal half
(planning.costs.causal_keys). Hardware FLOPs add what is computed twice or wasted (`recompute_flops`):
  - remat "full" recomputes each layer's forward in the backward pass (not the LM head); "save_dots" and
    "save_all_dots" save the matmul outputs, so only elementwise work is recomputed (no matmul FLOPs); "none" none;
  - a memory-efficient attention (flash-style: blockwise, splash, cudnn) recomputes the scores QKᵀ in its backward
    (FlashAttention-2, Dao 2023): half the attention forward again;
  - chunked log-probs (logprob_chunk > 0) checkpoint each chunk, so the LM head's matmul runs again in the backward;
  - naive attention scores every key and masks the causal half: the masked half is computed (hardware) but is not
    model work.

Collectives (`train_collectives`, `sampling_collectives`). The parameters are sharded over `fsdp` (ZeRO-3 / FSDP,
Rajbhandari et al. 2020) and over `tensor` Megatron-style (Shoeybi et al. 2019); the batch over (data, fsdp).
Ring volumes (Patarasuk & Yuan 2009): an all-gather or a reduce-scatter of an n-way sharded array of B bytes moves
(n-1)/n·B into each chip, an all-reduce twice that.
  - fsdp all-gather of each layer's weights before its use: once per forward pass and once more per backward pass
    (the gathered weights are dropped in between); B = the model's bytes / tensor;
  - gradient reduce-scatter over fsdp, once per optimizer step; B = the gradients' bytes / tensor (parameter dtype);
  - gradient all-reduce over data (data > 1), of the chip's fsdp shard of the gradients;
  - tensor-axis all-reduces (Megatron's f and g): 2 per layer per forward (after attention's output projection and
    after the MLP's down projection) and 2 per layer per backward, of the activations [rows, tokens, hidden];
  - sampling gathers the weights once per sampling phase: XLA hoists the loop-invariant all-gathers out of the decode
    while_loop (checked on the compiled smoke step: the weight all-gathers sit in the entry computation, none in the
    loop bodies), then 2 tensor all-reduces per layer per decode step.

Memory (`train_memory`, `sampling_memory`, `state_memory`): the per-device working set of each phase, an analytic
breakdown beside the compiled program's figure (which decides the fit). See each function for its terms. With LoRA
(Workload.agent_lora / env_lora) the state holds no reference copy and AdamW moments for the adapters alone, and the
update's gradients are the adapters'; its FLOPs and collectives are still counted as full fine-tuning's (an upper
bound: the frozen weights' gradient matmuls and reduce-scatters are not run).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence

from genenv_jax.models.config import REMAT_POLICIES, remat_policy  # noqa: F401 (re-exported for plan)
from genenv_jax.models.lora import LoraSpec
from genenv_jax.planning.costs import Chip, Shape, causal_keys, forward_flops

ATTENTION = ("naive", "blockwise", "splash", "cudnn", "auto")
ATTENTION_BLOCK = 512  # query and key block of the memory-efficient attention working set (a tile, not the sequence)
SCORE_BYTES = 4  # attention scores and logits are float32
ADAPTER_BYTES = 4  # LoRA adapters are float32 whatever the model's dtype (models.lora.Adapter)


def memory_efficient(attention: str) -> bool:
  """Whether an attention implementation avoids the [rows, heads, T, S] scores (flash-style) and skips blocks that the
  causal mask or an unfilled cache hides. 'auto' plans the TPU's choice (splash)."""
  if attention not in ATTENTION:
    raise ValueError(f"unknown attention implementation {attention!r}; choose one of {', '.join(ATTENTION)}")
  return attention != "naive"


@dataclasses.dataclass(frozen=True)
class MeshShape:
  data: int
  fsdp: int
  tensor: int

  def __post_init__(self):
    for name in ("data", "fsdp", "tensor"):
      if int(getattr(self, name)) <= 0:
        raise ValueError(f"mesh axis {name} must be positive, got {getattr(self, name)}")

  @property
  def devices(self) -> int:
    return self.data * self.fsdp * self.tensor

  @property
  def batch_shards(self) -> int:
    return self.data * self.fsdp


# ---- collectives -----------------------------------------------------------------------------------------------------


def gather_bytes(array_bytes: float, n: int) -> float:
  """Bytes each chip receives in a ring all-gather (or sends in a reduce-scatter) of an n-way sharded array."""
  return array_bytes * (n - 1) / n


def all_reduce_bytes(array_bytes: float, n: int) -> float:
  """Bytes each chip receives in a ring all-reduce over n chips: a reduce-scatter then an all-gather."""
  return 2.0 * array_bytes * (n - 1) / n


@dataclasses.dataclass(frozen=True)
class Collective:
  name: str  # what is communicated, and why
  bytes: float  # per chip, received, over the whole phase
  count: int  # how many such collectives the phase issues


def tensor_all_reduces(shape: Shape, mesh: MeshShape, rows: int, tokens: int, passes: int) -> Collective:
  """2 all-reduces per layer per pass over the tensor axis, of this chip's activations [rows/(data·fsdp), tokens,
  hidden]; `passes` counts forwards, backwards and recomputed forwards alike."""
  activations = rows / mesh.batch_shards * tokens * shape.hidden * shape.dtype_bytes
  count = 2 * shape.layers * passes if mesh.tensor > 1 else 0
  return Collective(
    "tensor all-reduces of the activations (2 per layer per pass)",
    count * all_reduce_bytes(activations, mesh.tensor),
    count,
  )


def train_collectives(
  shape: Shape, mesh: MeshShape, rows: int, tokens: int, forwards: int, updates: int, remat: str
) -> tuple[Collective, ...]:
  """The collectives of `updates` optimizer steps over `rows` rows in all, each with `forwards` plain forwards (the
  reference's, the KL cap's) plus one forward and one backward."""
  weights = shape.param_bytes / mesh.tensor
  grads = gather_bytes(weights, mesh.fsdp)
  passes = forwards + 2 + (1 if remat == "full" else 0)
  out = [
    Collective(
      "fsdp all-gather of each layer's weights, forward",
      updates * (forwards + 1) * grads,
      updates * (forwards + 1) * shape.layers if mesh.fsdp > 1 else 0,
    ),
    Collective(
      "fsdp all-gather of each layer's weights, backward",
      updates * grads,
      updates * shape.layers if mesh.fsdp > 1 else 0,
    ),
    Collective("gradient reduce-scatter over fsdp", updates * grads, updates * shape.layers if mesh.fsdp > 1 else 0),
  ]
  if mesh.data > 1:
    out.append(
      Collective(
        "gradient all-reduce over data",
        updates * all_reduce_bytes(weights / mesh.fsdp, mesh.data),
        updates * shape.layers,
      )
    )
  out.append(tensor_all_reduces(shape, mesh, rows, tokens, passes))
  return tuple(c for c in out if c.count)


def sampling_collectives(shape: Shape, mesh: MeshShape, rows: int, prompt: int, new: int) -> tuple[Collective, ...]:
  """Prefill: the weights gathered over fsdp once (hoisted out of the decode loop) and the tensor all-reduces over the
  prompt; decode: the tensor all-reduces of one token per row per step."""
  out = [
    Collective(
      "fsdp all-gather of the weights (once, hoisted out of the decode loop)",
      gather_bytes(shape.param_bytes / mesh.tensor, mesh.fsdp),
      shape.layers if mesh.fsdp > 1 else 0,
    ),
    tensor_all_reduces(shape, mesh, rows, prompt, 1),
  ]
  if new:
    out.append(tensor_all_reduces(shape, mesh, rows, 1, new))
  return tuple(c for c in out if c.count)


# ---- FLOPs and bytes of the phases -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Cost:
  """What one phase costs: global FLOPs, per-device HBM bytes read, per-device collectives."""

  name: str
  kind: str  # "sampling" | "train"
  model_flops: float  # without recompute or masked work (the MFU numerator)
  flops: float  # what the hardware computes
  hbm_bytes: float  # per device, the bytes that bound a memory-bound phase (decoding)
  collectives: tuple[Collective, ...] = ()
  recompute: Mapping[str, float] = dataclasses.field(
    default_factory=dict
  )  # hardware FLOPs beyond the model's, by source


def recompute_flops(
  shape: Shape, rows: int, tokens: int, head_tokens: int, remat: str, efficient: bool, logprob_chunk: int
) -> dict[str, float]:
  """Hardware FLOPs one forward+backward pass computes beyond the model's 3 forwards, by source (module docstring)."""
  keys = causal_keys(tokens) if efficient else tokens
  out = {}
  if remat == "full":
    out["remat (layer forward again)"] = forward_flops(shape, rows, tokens, keys, 0)
  if efficient:
    out["flash backward (QKᵀ again)"] = 2.0 * rows * tokens * keys * shape.heads * shape.head_dim * shape.layers
  if logprob_chunk:
    out["chunked log-probs (LM head again)"] = 2.0 * shape.head_params * rows * head_tokens
  return out


def train_cost(
  name: str,
  shape: Shape,
  mesh: MeshShape,
  rows: int,
  prompt: int,
  response: int,
  *,
  forwards: int,
  updates: int,
  remat: str,
  efficient: bool,
  logprob_chunk: int = 0,
) -> Cost:
  """`updates` optimizer steps over `rows` rows in all of prompt + response tokens, LM head at the response: per
  step `forwards` plain forwards, one forward and one backward (2 forwards' FLOPs)."""
  tokens = prompt + response
  model_fwd = forward_flops(shape, rows, tokens, causal_keys(tokens), response)
  hw_fwd = forward_flops(shape, rows, tokens, causal_keys(tokens) if efficient else tokens, response)
  recompute = recompute_flops(shape, rows, tokens, response, remat, efficient, logprob_chunk)
  masked = (forwards + 3) * (hw_fwd - model_fwd)
  if masked:
    recompute["masked attention (causal half scored)"] = masked
  return Cost(
    name,
    "train",
    (forwards + 3) * model_fwd,
    (forwards + 3) * model_fwd + sum(recompute.values()),
    0.0,
    train_collectives(shape, mesh, rows, tokens, forwards, updates, remat),
    recompute,
  )


def sampling_costs(
  name: str, shape: Shape, mesh: MeshShape, rows: int, prompt: int, new: int, efficient: bool
) -> tuple[Cost, Cost]:
  """(prefill, decode). Prefill: rows × prompt tokens, the head at the last one. Decode step i (0-based) runs one token
  per row against prompt + i + 1 keys; a memory-efficient attention reads only those cache slots, naive reads and
  scores all prompt + new. Each step reads the weights (gathered: param_bytes / tensor) and this chip's cache."""
  slots = prompt + new
  kv_split = mesh.tensor if shape.kv_heads % mesh.tensor == 0 else 1
  kv_chip = rows / mesh.batch_shards * shape.kv_bytes_per_token / kv_split  # cache bytes per slot on one chip
  model_pf = forward_flops(shape, rows, prompt, causal_keys(prompt), 1)
  hw_pf = forward_flops(shape, rows, prompt, causal_keys(prompt) if efficient else prompt, 1)
  mean_keys = causal_keys(new, prompt)  # step i sees prompt + i + 1 keys
  model_dec = new * forward_flops(shape, rows, 1, mean_keys, 1)
  hw_dec = new * forward_flops(shape, rows, 1, mean_keys if efficient else slots, 1)
  weights = shape.param_bytes / mesh.tensor
  collectives = sampling_collectives(shape, mesh, rows, prompt, new)
  prefill = Cost(
    f"{name} prefill",
    "sampling",
    model_pf,
    hw_pf,
    weights + prompt * kv_chip,
    tuple(c for c in collectives[:2]),
    {"masked attention (causal half scored)": hw_pf - model_pf},
  )
  decode = Cost(
    f"{name} decode",
    "sampling",
    model_dec,
    hw_dec,
    new * (weights + (mean_keys if efficient else slots) * kv_chip),
    tuple(collectives[2:]),
    {"masked attention (unfilled cache scored)": hw_dec - model_dec},
  )
  return prefill, decode


# ---- time ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Timed:
  cost: Cost
  compute_s: float
  hbm_s: float
  ici_s: float
  serial_s: float
  overlapped_s: float
  mfu_serial: float  # model FLOPs / (devices · peak · serial_s)
  mfu_overlapped: float  # the same over overlapped_s: the upper bound
  hbm_utilisation: float  # HBM bytes / (bandwidth · serial_s): how much of the bandwidth the phase uses

  @property
  def bound(self) -> str:
    return max((("compute", self.compute_s), ("memory", self.hbm_s), ("ici", self.ici_s)), key=lambda kv: kv[1])[0]

  @property
  def recompute_overhead(self) -> float:
    """Hardware FLOPs beyond the model's, as a fraction of the model's."""
    return self.cost.flops / self.cost.model_flops - 1.0 if self.cost.model_flops else 0.0


def timed(cost: Cost, devices: int, chip: Chip) -> Timed:
  """A phase's time on `devices` chips of `chip` (module docstring: serial and overlapped)."""
  if devices <= 0:
    raise ValueError(f"devices must be positive, got {devices}")
  compute = cost.flops / devices / chip.peak_flops
  hbm = cost.hbm_bytes / chip.hbm_bandwidth
  ici = sum(c.bytes for c in cost.collectives) / chip.ici_bandwidth
  serial, overlapped = max(compute, hbm) + ici, max(compute, hbm, ici)

  def mfu(t):
    return cost.model_flops / (devices * chip.peak_flops * t) if t > 0 else 0.0

  return Timed(
    cost,
    compute,
    hbm,
    ici,
    serial,
    overlapped,
    mfu(serial),
    mfu(overlapped),
    cost.hbm_bytes / (chip.hbm_bandwidth * serial) if serial > 0 else 0.0,
  )


def combined(name: str, parts: Sequence[Timed], devices: int, chip: Chip) -> dict[str, float]:
  """Seconds, MFU and HBM utilisation of several phases together (e.g. both updates, or a prefill and its decode)."""
  serial, overlapped = sum(t.serial_s for t in parts), sum(t.overlapped_s for t in parts)
  model, hw = sum(t.cost.model_flops for t in parts), sum(t.cost.flops for t in parts)
  hbm = sum(t.cost.hbm_bytes for t in parts)
  peak = devices * chip.peak_flops
  return {
    "name": name,
    "serial_s": serial,
    "overlapped_s": overlapped,
    "mfu_serial": model / (peak * serial) if serial else 0.0,
    "mfu_overlapped": model / (peak * overlapped) if overlapped else 0.0,
    "recompute_overhead": hw / model - 1.0 if model else 0.0,
    "hbm_utilisation": hbm / (chip.hbm_bandwidth * serial) if serial else 0.0,
  }


# ---- memory ----------------------------------------------------------------------------------------------------------


def layer_activation_elements(shape: Shape, tensor: int) -> float:
  """Elements per token of one decoder layer's activations on one chip: the residual input, two norms, q/k/v, the
  attention output, the output projection, gate/up/activation of the MLP and its down projection."""
  return (
    5 * shape.hidden
    + (2 * shape.heads + 2 * shape.kv_heads) * shape.head_dim / tensor
    + 3 * shape.intermediate / tensor
  )


def checkpoint_elements(shape: Shape, tensor: int, remat: str) -> float:
  """Elements per token per layer that the backward pass keeps from the forward: "full" the layer's input; the
  "save_dots" policies also the matmul outputs (q, k, v, output projection, gate, up, down); "none" all of them."""
  if remat == "full":
    return shape.hidden
  dots = (
    (shape.heads + 2 * shape.kv_heads) * shape.head_dim / tensor + 2 * shape.hidden + 2 * shape.intermediate / tensor
  )
  if remat in ("save_dots", "save_all_dots"):
    return shape.hidden + dots
  return layer_activation_elements(shape, tensor)


def attention_bytes(
  shape: Shape, tensor: int, rows: float, queries: int, keys: int, efficient: bool, backward: bool
) -> float:
  """One layer's attention working set on one chip for `rows` rows: naive keeps float32 scores and probabilities
  [rows, heads/tensor, queries, keys] (and their gradients in a backward pass); a flash-style kernel one
  ATTENTION_BLOCK² tile of them plus the per-query float32 statistics (running max and sum)."""
  heads = shape.heads / tensor if shape.heads % tensor == 0 else shape.heads
  if efficient:
    tile = min(queries, ATTENTION_BLOCK) * min(keys, ATTENTION_BLOCK)
    return rows * heads * (tile * SCORE_BYTES * (4 if backward else 2) + queries * 2 * SCORE_BYTES)
  return rows * heads * queries * keys * SCORE_BYTES * (3 if backward else 2)


def train_memory(
  shape: Shape,
  mesh: MeshShape,
  rows: int,
  prompt: int,
  response: int,
  remat: str,
  efficient: bool,
  logprob_chunk: int = 0,
  gradient_bytes: float | None = None,
) -> dict[str, float]:
  """Per-chip working set of one forward+backward over `rows` rows (one mini-batch) beyond the state:
  checkpoints  what the backward keeps of every layer (checkpoint_elements × layers)
  layer        one layer's activations and their gradients while it is (re)computed and differentiated
  attention    attention_bytes, with the backward's gradients
  logits       float32 logits, probabilities and their gradient of one chunk (the whole response unchunked), vocab
               split over tensor
  gradients    the gradients, sharded like the parameters: of every parameter, or `gradient_bytes` (a LoRA model's
               adapters, models.lora: the frozen base gets none)
  weights      two layers' gathered weights (the one in use and the next, prefetched)."""
  per_chip = rows / mesh.batch_shards
  tokens = prompt + response
  chunk = min(logprob_chunk, response) if logprob_chunk else response
  act = shape.dtype_bytes
  return {
    "checkpoints": shape.layers * per_chip * tokens * checkpoint_elements(shape, mesh.tensor, remat) * act,
    "layer": 2 * per_chip * tokens * layer_activation_elements(shape, mesh.tensor) * act,
    "attention": attention_bytes(shape, mesh.tensor, per_chip, tokens, tokens, efficient, backward=True),
    "logits": 3 * per_chip * chunk * shape.vocab / mesh.tensor * SCORE_BYTES,
    "gradients": (shape.param_bytes if gradient_bytes is None else gradient_bytes) / (mesh.fsdp * mesh.tensor),
    "weights": 2 * shape.body_params / shape.layers * act / mesh.tensor,
  }


def sampling_memory(
  shape: Shape, mesh: MeshShape, rows: int, prompt: int, new: int, efficient: bool, prefill_rows: int = 0
) -> dict[str, float]:
  """Per-chip working set of sampling beyond the state:
  kv_cache  rows × (prompt + new) slots × kv_bytes_per_token, kv heads split over tensor when they divide
  weights   the whole model gathered over fsdp (the hoisted all-gather), split over tensor
  prefill   one layer's activations and attention over the prompt, for the rows prefilled at once
            (`prefill_rows` of the global batch per chunk, 0 = all), plus their last-position logits."""
  per_chip = rows / mesh.batch_shards
  in_flight = min(per_chip, max(prefill_rows / mesh.batch_shards, 1.0)) if prefill_rows else per_chip
  kv_split = mesh.tensor if shape.kv_heads % mesh.tensor == 0 else 1
  act = shape.dtype_bytes
  prefill = (
    in_flight * prompt * layer_activation_elements(shape, mesh.tensor) * act
    + attention_bytes(shape, mesh.tensor, in_flight, prompt, prompt, efficient, backward=False)
    + in_flight * shape.vocab / mesh.tensor * SCORE_BYTES
  )
  return {
    "kv_cache": per_chip * (prompt + new) * shape.kv_bytes_per_token / kv_split,
    "weights": shape.param_bytes / mesh.tensor,
    "prefill": prefill,
  }


def lora_params(shape: Shape, spec: LoraSpec) -> int:
  """A model's LoRA adapter parameters (models.lora): L · r · (in + out) summed over the targeted projections."""
  h, f, q, kv = shape.hidden, shape.intermediate, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
  sides = {
    "q_proj": h + q,
    "k_proj": h + kv,
    "v_proj": h + kv,
    "o_proj": q + h,
    "gate_proj": h + f,
    "up_proj": h + f,
    "down_proj": f + h,
  }
  return shape.layers * spec.rank * sum(sides[t] for t in spec.targets)


def lora_bytes(shape: Shape, spec: LoraSpec | None) -> int:
  """Bytes of a model's adapters (float32, models.lora.Adapter); 0 without LoRA."""
  return 0 if spec is None else ADAPTER_BYTES * lora_params(shape, spec)


def state_memory(
  shapes: Sequence[Shape], mesh: MeshShape, moments: int = 2, adapters: Sequence[LoraSpec | None] = ()
) -> dict[str, float]:
  """Per-chip bytes of the parameters, the frozen references and the AdamW moments (`moments` arrays in the trained
  parameters' dtype, optax's default) of each model, sharded over fsdp × tensor. A model with LoRA `adapters` (its
  entry, models.lora.LoraSpec; None = full fine-tuning) keeps its base plus the adapters, no reference copy (the base
  is the reference), and moments for the adapters alone."""
  shard = mesh.fsdp * mesh.tensor
  specs = tuple(adapters) + (None,) * (len(shapes) - len(adapters))
  extra = [lora_bytes(s, spec) for s, spec in zip(shapes, specs)]
  params = sum(s.param_bytes + x for s, x in zip(shapes, extra)) / shard
  references = sum(s.param_bytes for s, spec in zip(shapes, specs) if spec is None) / shard
  trained = sum(s.param_bytes if spec is None else x for s, spec, x in zip(shapes, specs, extra)) / shard
  return {"parameters": params, "references": references, "optimizer": moments * trained}


# ---- the step --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Workload:
  """The step's shapes, as the config gives them (no domain or model needed)."""

  env_rows: int
  agent_rows: int
  minibatches: int
  agent_prompt: int
  agent_answer: int
  env_prompt: int
  env_output: int
  agent_reference: bool = True  # the agent's KL term is on: a reference forward per mini-batch
  env_train: bool = True
  agent_logprob_chunk: int = 0
  env_logprob_chunk: int = 0
  agent_prefill_rows: int = 0
  env_prefill_rows: int = 0
  agent_lora: LoraSpec | None = None  # LoRA adapters (models.lora): only they train; None = every parameter
  env_lora: LoraSpec | None = None

  def __post_init__(self):
    if self.agent_rows <= 0 or self.minibatches <= 0 or self.agent_rows % self.minibatches:
      raise ValueError(
        f"agent rows ({self.agent_rows}) must be a positive multiple of the mini-batches ({self.minibatches})"
      )


@dataclasses.dataclass(frozen=True)
class Analysis:
  phases: tuple[Timed, ...]
  training: dict[str, float]  # combined() of the update phases
  sampling: dict[str, float]  # combined() of the prefill and decode phases
  step_serial_s: float
  step_overlapped_s: float
  memory: dict[str, dict[str, float]]  # phase -> its working set by component (state under "state")
  peak_phase: str
  peak_bytes: float  # state + the largest working set


# A search (planning/fit.py) analyses tens of thousands of candidates that differ in a knob or two, so most of their
# phases are the same: each phase's time and working set is computed once per distinct input (all hashable).


@functools.lru_cache(maxsize=4096)
def _timed_sampling(
  name: str, shape: Shape, mesh: MeshShape, rows: int, prompt: int, new: int, efficient: bool, chip: Chip
) -> tuple[Timed, Timed]:
  return tuple(timed(c, mesh.devices, chip) for c in sampling_costs(name, shape, mesh, rows, prompt, new, efficient))


@functools.lru_cache(maxsize=4096)
def _timed_train(name: str, shape: Shape, mesh: MeshShape, chip: Chip, *args, **kwargs) -> Timed:
  return timed(train_cost(name, shape, mesh, *args, **kwargs), mesh.devices, chip)


def _gradient_bytes(shape: Shape, spec: LoraSpec | None) -> float | None:
  """The gradients' bytes of a LoRA model's update (its adapters'); None (every parameter's) without LoRA."""
  return None if spec is None else float(lora_bytes(shape, spec))


@functools.lru_cache(maxsize=4096)
def _memory(fn, *args) -> tuple[tuple[str, float], ...]:
  return tuple(fn(*args).items())


def analyse(
  w: Workload,
  agent: Shape,
  env: Shape,
  mesh: MeshShape,
  chip: Chip,
  *,
  agent_remat: str,
  env_remat: str,
  attention: str = "naive",
) -> Analysis:
  """The analytic figures of one step: each phase timed, training MFU, sampling HBM utilisation, the memory
  breakdown."""
  agent_remat, env_remat = remat_policy(agent_remat), remat_policy(env_remat)
  eff = memory_efficient(attention)
  phases, memory = [], {}
  if w.env_rows:
    phases += _timed_sampling("env", env, mesh, w.env_rows, w.env_prompt, w.env_output, eff, chip)
    memory["env sampling"] = dict(
      _memory(sampling_memory, env, mesh, w.env_rows, w.env_prompt, w.env_output, eff, w.env_prefill_rows)
    )
  phases += _timed_sampling("agent", agent, mesh, w.agent_rows, w.agent_prompt, w.agent_answer, eff, chip)
  memory["agent sampling"] = dict(
    _memory(sampling_memory, agent, mesh, w.agent_rows, w.agent_prompt, w.agent_answer, eff, w.agent_prefill_rows)
  )
  phases.append(
    _timed_train(
      "agent update",
      agent,
      mesh,
      chip,
      w.agent_rows,
      w.agent_prompt,
      w.agent_answer,
      forwards=int(w.agent_reference),
      updates=w.minibatches,
      remat=agent_remat,
      efficient=eff,
      logprob_chunk=w.agent_logprob_chunk,
    )
  )
  memory["agent update"] = dict(
    _memory(
      train_memory,
      agent,
      mesh,
      w.agent_rows // w.minibatches,
      w.agent_prompt,
      w.agent_answer,
      agent_remat,
      eff,
      w.agent_logprob_chunk,
      _gradient_bytes(agent, w.agent_lora),
    )
  )
  if w.env_rows and w.env_train:
    phases.append(
      _timed_train(
        "env update",
        env,
        mesh,
        chip,
        w.env_rows,
        w.env_prompt,
        w.env_output,
        forwards=3,
        updates=1,
        remat=env_remat,
        efficient=eff,
        logprob_chunk=w.env_logprob_chunk,
      )
    )
    memory["env update"] = dict(
      _memory(
        train_memory,
        env,
        mesh,
        w.env_rows,
        w.env_prompt,
        w.env_output,
        env_remat,
        eff,
        w.env_logprob_chunk,
        _gradient_bytes(env, w.env_lora),
      )
    )
  phases = tuple(phases)
  state = state_memory((agent, env), mesh, adapters=(w.agent_lora, w.env_lora))
  peak_phase = max(memory, key=lambda k: sum(memory[k].values()))
  return Analysis(
    phases=phases,
    training=combined("training", [t for t in phases if t.cost.kind == "train"], mesh.devices, chip),
    sampling=combined("sampling", [t for t in phases if t.cost.kind == "sampling"], mesh.devices, chip),
    step_serial_s=sum(t.serial_s for t in phases),
    step_overlapped_s=sum(t.overlapped_s for t in phases),
    memory={"state": state, **memory},
    peak_phase=peak_phase,
    peak_bytes=sum(state.values()) + sum(memory[peak_phase].values()),
  )
