"""LoRA: low-rank adapters on the decoder's projections (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large
Language Models", arXiv 2106.09685), as peft / TRL and tunix offer them.

A targeted projection y = x W (W [in, out], frozen) becomes

  y = x W + (α / r) · (drop(x) A) B,     A [in, r], B [r, out], trainable,

with A drawn from U(-1/√in, 1/√in) (peft's kaiming_uniform(a=√5)) and B = 0, so a fresh adapter changes nothing. Its
merged weight is W' = W + (α / r) A B: the same function with no adapter (`merged`, the export). Dropout (rate p,
inverted: kept inputs scaled by 1 / (1 - p)) acts on the adapter's input only, and only in a training forward, whose
model is given dropout keys (`with_dropout`); every other forward (sampling, the reference, old log-probs) is
deterministic.

The adapters are nnx.LoRAParam variables of an `Adapter` module set on the decoder's Attention and MLP modules as
`<target>_lora` (`attach`); `transformer.project` adds their term. Like every decoder parameter they are stacked
along the leading "layers" axis (A [L, *in, r], B [L, r, *out]), so the one layer scan carries them, and they take
their projection's logical axes, so they shard as it does. Everything else here is a pure function of nnx states:

- `partition(state)` splits a model's state into (adapters, the rest): gradients and optimizer state cover the
  adapters only, the rest enters the update as a constant; `combine` joins them again.
- `reference(state)`: the same state with every B zeroed, i.e. the base model with the adapters off, the KL
  reference, without a second copy of the base weights.
- `fold(state)`: W <- W + (α / r) A B, then B <- 0 (after a full-parameter warm start: the warm-started model is the
  new base, and the adapters start again as a no-op).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

# target -> (the module that holds it: "attn" | "mlp", how many of its weight's axes after "layers" are input axes)
TARGETS: dict[str, tuple[str, int]] = {
  "q_proj": ("attn", 1),
  "k_proj": ("attn", 1),
  "v_proj": ("attn", 1),
  "o_proj": ("attn", 2),
  "gate_proj": ("mlp", 1),
  "up_proj": ("mlp", 1),
  "down_proj": ("mlp", 1),
}
SUFFIX = "_lora"  # the adapter of projection `q_proj` is the module attribute `q_proj_lora`
# transformers' module names (for the adapters' own safetensors file, peft's naming)
HF_MODULES = {name: ("self_attn" if where == "attn" else "mlp") for name, (where, _) in TARGETS.items()}


class DropoutKey(nnx.Variable):
  """An adapter's dropout keys per layer ([L, 2] uint32 key data), on a training forward's model only."""


@dataclasses.dataclass(frozen=True)
class LoraSpec:
  """rank r >= 1, alpha α > 0 (the update is scaled by α / r), the targeted projections, dropout p in [0, 1)."""

  rank: int
  alpha: float
  targets: tuple[str, ...] = tuple(TARGETS)
  dropout: float = 0.0

  def __post_init__(self):
    object.__setattr__(self, "targets", tuple(self.targets))
    if not isinstance(self.rank, int) or isinstance(self.rank, bool) or self.rank < 1:
      raise ValueError(f"LoRA rank = {self.rank!r}: must be an integer >= 1 (the adapters' rank r)")
    if not (isinstance(self.alpha, (int, float)) and math.isfinite(self.alpha) and self.alpha > 0):
      raise ValueError(f"LoRA alpha = {self.alpha!r}: must be a number > 0 (the update is scaled by alpha / rank)")
    unknown = [t for t in self.targets if t not in TARGETS]
    if unknown or not self.targets or len(set(self.targets)) != len(self.targets):
      raise ValueError(
        f"LoRA targets = {self.targets!r}: must be distinct names among {', '.join(TARGETS)}"
        + (f" (unknown: {', '.join(map(repr, unknown))})" if unknown else "")
      )
    if not (isinstance(self.dropout, (int, float)) and 0 <= self.dropout < 1):
      raise ValueError(f"LoRA dropout = {self.dropout!r}: must be a number in [0, 1)")

  @property
  def scale(self) -> float:
    """α / r (Hu et al. 2021, Section 4.1)."""
    return self.alpha / self.rank


def _inverted_dropout(x: jax.Array, key_data: jax.Array, rate: float) -> jax.Array:
  """x with each element kept with probability 1 - rate and scaled by 1 / (1 - rate) (Srivastava et al. 2014)."""
  keep = jax.random.bernoulli(jax.random.wrap_key_data(key_data), 1.0 - rate, x.shape)
  return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))


class Adapter(nnx.Module):
  """One projection's adapter over the stacked layers: A [L, *in, r], B [L, r, *out] (float32), scale α / r."""

  def __init__(self, weight: nnx.Param, num_in: int, spec: LoraSpec, key: jax.Array):
    shape, axes = weight.shape, weight.get_metadata().get("logical_axes")
    layers, fan_in = shape[0], math.prod(shape[1 : 1 + num_in])
    axes = axes if axes is not None else (None,) * len(shape)
    bound = 1.0 / math.sqrt(fan_in)
    a = jax.random.uniform(key, (layers, *shape[1 : 1 + num_in], spec.rank), jnp.float32, -bound, bound)
    self.a = nnx.LoRAParam(a, logical_axes=(axes[0], *axes[1 : 1 + num_in], None))
    b = jnp.zeros((layers, spec.rank, *shape[1 + num_in :]), jnp.float32)
    self.b = nnx.LoRAParam(b, logical_axes=(axes[0], None, *axes[1 + num_in :]))
    self.scale, self.rate = spec.scale, spec.dropout

  def __call__(self, x: jax.Array) -> jax.Array:
    """One layer's term (α / r) · (drop(x) A) B, x [..., in] (flattened as the projection flattens it) -> [..., *out],
    in x's dtype; called on a module merged from one layer's slice (A [*in, r], B [r, *out])."""
    a, b = self.a[...], self.b[...]
    rank, out = b.shape[0], b.shape[1:]
    key = getattr(self, "dropout_key", None)  # set only on a training forward's model (`with_dropout`)
    if key is not None and self.rate > 0:
      x = _inverted_dropout(x, key[...], self.rate)
    lead = x.shape[:-1]
    h = x.reshape(-1, x.shape[-1]) @ a.reshape(-1, rank).astype(x.dtype)
    y = (h @ b.reshape(rank, -1).astype(x.dtype)) * jnp.asarray(self.scale, x.dtype)
    return y.reshape(*lead, *out)


def _holder(model: nnx.Module, target: str) -> nnx.Module:
  return getattr(model.layers, TARGETS[target][0])


def attach(model: nnx.Module, spec: LoraSpec, seed: int) -> nnx.Module:
  """Sets an `Adapter` (B = 0: a no-op) on each targeted projection of a `Transformer`, in place; returns the model.
  A is drawn from `seed` (one key per target)."""
  for i, target in enumerate(spec.targets):
    holder = _holder(model, target)
    key = jax.random.fold_in(jax.random.key(seed), i)
    setattr(holder, target + SUFFIX, Adapter(getattr(holder, target), TARGETS[target][1], spec, key))
  return model


def adapters_of(model: nnx.Module) -> dict[str, Adapter]:
  """target -> its Adapter, for the projections of `model` that have one."""
  out = {}
  for target in TARGETS:
    adapter = getattr(_holder(model, target), target + SUFFIX, None)
    if adapter is not None:
      out[target] = adapter
  return out


def delta(adapter_a: jax.Array, adapter_b: jax.Array, scale: float, num_in: int) -> jax.Array:
  """(α / r) A B over the stacked layers, float32, in the weight's shape [L, *in, *out]."""
  layers, rank = adapter_a.shape[0], adapter_a.shape[-1]
  ins, outs = adapter_a.shape[1:-1], adapter_b.shape[2:]
  assert len(ins) == num_in, (adapter_a.shape, num_in)
  a = adapter_a.astype(jnp.float32).reshape(layers, -1, rank)
  b = adapter_b.astype(jnp.float32).reshape(layers, rank, -1)
  return (scale * jnp.einsum("lir,lro->lio", a, b)).reshape(layers, *ins, *outs)


def merged(model: nnx.Module) -> nnx.Module:
  """A copy of `model` with each adapter merged into its weight, W' = W + (α / r) A B (in W's dtype), and removed:
  a plain Transformer whose logits equal the adapted model's (the export). A model without adapters comes back as it
  is (no copy)."""
  if not adapters_of(model):
    return model
  out = nnx.clone(model)
  for target, adapter in adapters_of(out).items():
    holder = _holder(out, target)
    weight = getattr(holder, target)
    update = delta(adapter.a[...], adapter.b[...], adapter.scale, TARGETS[target][1])
    weight[...] = (weight[...].astype(jnp.float32) + update).astype(weight.dtype)
    delattr(holder, target + SUFFIX)
  return out


def has_adapters(state: Any) -> bool:
  """Whether an nnx state (or a model) holds LoRA adapters."""
  state = nnx.state(state) if isinstance(state, nnx.Module) else state
  return any(isinstance(v, nnx.LoRAParam) for v in jax.tree.leaves(state, is_leaf=_is_variable))


def _is_variable(x: Any) -> bool:
  return isinstance(x, nnx.Variable)


def partition(state: nnx.State) -> tuple[nnx.State, nnx.State | None]:
  """(adapters, the rest) of a model's state; (state, None) when it has no adapters, so a model without LoRA goes
  through the update exactly as before."""
  if not has_adapters(state):
    return state, None
  return nnx.split_state(state, nnx.LoRAParam, ...)


def combine(adapters: nnx.State, rest: nnx.State | None) -> nnx.State:
  """The inverse of `partition`."""
  return adapters if rest is None else nnx.merge_state(rest, adapters)


def _map_adapter_leaves(state: nnx.State, fn) -> nnx.State:
  """`state` with fn(path, value) applied to the value of every LoRAParam leaf."""

  def one(path, x):
    if not isinstance(x, nnx.LoRAParam):
      return x
    return x.replace(fn(path, x.get_value()))

  return jax.tree_util.tree_map_with_path(one, state, is_leaf=_is_variable)


def _is_b(path) -> bool:
  return getattr(path[-1], "key", None) == "b"


def reference(state: nnx.State) -> nnx.State:
  """The base model with its adapters off: every B zeroed (then (x A) B = 0 exactly), the base weights shared, not
  copied. The KL reference of a LoRA run."""
  return _map_adapter_leaves(state, lambda path, v: jnp.zeros_like(v) if _is_b(path) else v)


def with_dropout(model: nnx.Module, key: jax.Array) -> nnx.Module:
  """In place: gives each adapter with dropout > 0 a DropoutKey (one key per adapter and layer, drawn from `key`),
  so that this model's forwards drop the adapters' inputs: a training forward's model, merged inside the loss. The
  keys live on that model only, never in the run's state. Returns the model."""
  for i, adapter in enumerate(adapters_of(model).values()):
    if adapter.rate > 0:
      keys = jax.random.split(jax.random.fold_in(key, i), adapter.a.shape[0])
      adapter.dropout_key = DropoutKey(jax.random.key_data(keys), logical_axes=("layers", None))
  return model


def fold(model: nnx.Module) -> nnx.Module:
  """In place: each adapter merged into its weight (W <- W + (α / r) A B) and its B zeroed, so the adapters start
  again as a no-op on the new base; a model without adapters is left as it is. Returns the model."""
  for target, adapter in adapters_of(model).items():
    weight = getattr(_holder(model, target), target)
    update = delta(adapter.a[...], adapter.b[...], adapter.scale, TARGETS[target][1])
    weight[...] = (weight[...].astype(jnp.float32) + update).astype(weight.dtype)
    adapter.b[...] = jnp.zeros_like(adapter.b[...])
  return model


def count_params(spec: LoraSpec, weight_shapes: dict[str, tuple[int, ...]]) -> int:
  """Adapter parameters: Σ over the targets of L · r · (in + out), from each target's stacked weight shape."""
  total = 0
  for target in spec.targets:
    shape, num_in = weight_shapes[target], TARGETS[target][1]
    total += shape[0] * spec.rank * (math.prod(shape[1 : 1 + num_in]) + math.prod(shape[1 + num_in :]))
  return total


def hf_adapter_tensors(model: nnx.Module) -> dict[str, np.ndarray]:
  """The adapters in peft's layout and names, per layer: `base_model.model.model.layers.{i}.{module}.{target}.
  lora_A.weight` [r, in] and `lora_B.weight` [out, r] (transformers' [out, in] convention, flattened as transformers
  flattens the projection: heads then head_dim)."""
  out = {}
  for target, adapter in adapters_of(model).items():
    a = np.asarray(jax.device_get(adapter.a[...]), np.float32)
    b = np.asarray(jax.device_get(adapter.b[...]), np.float32)
    layers, rank = a.shape[0], a.shape[-1]
    for i in range(layers):
      name = f"base_model.model.model.layers.{i}.{HF_MODULES[target]}.{target}"
      out[f"{name}.lora_A.weight"] = np.ascontiguousarray(a[i].reshape(-1, rank).T)
      out[f"{name}.lora_B.weight"] = np.ascontiguousarray(b[i].reshape(rank, -1).T)
  return out


def peft_config(spec: LoraSpec, base_model: str = "") -> dict[str, Any]:
  """peft's adapter_config.json for these adapters."""
  return {
    "peft_type": "LORA",
    "task_type": "CAUSAL_LM",
    "base_model_name_or_path": base_model,
    "r": spec.rank,
    "lora_alpha": spec.alpha,
    "lora_dropout": spec.dropout,
    "target_modules": list(spec.targets),
    "bias": "none",
    "fan_in_fan_out": False,
    "inference_mode": True,
  }


def save_adapters(model: nnx.Module, directory: str | os.PathLike, base_model: str = "") -> pathlib.Path:
  """Writes the adapters apart, as peft saves them: `adapter_model.safetensors` (`hf_adapter_tensors`) and
  `adapter_config.json` (`peft_config`). Raises ValueError for a model without adapters."""
  from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel

  spec = spec_of(model)
  if spec is None:
    raise ValueError("the model has no LoRA adapters to save (LoRA was off in its run: agent.lora / env.lora)")
  directory = pathlib.Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  save_file(hf_adapter_tensors(model), str(directory / "adapter_model.safetensors"))
  (directory / "adapter_config.json").write_text(json.dumps(peft_config(spec, base_model), indent=2, sort_keys=True))
  return directory


def spec_of(model: nnx.Module) -> LoraSpec | None:
  """The LoraSpec a model's adapters were attached with (None without adapters)."""
  adapters = adapters_of(model)
  if not adapters:
    return None
  first = next(iter(adapters.values()))
  rank = first.b.shape[1]
  return LoraSpec(rank=rank, alpha=first.scale * rank, targets=tuple(adapters), dropout=first.rate)
