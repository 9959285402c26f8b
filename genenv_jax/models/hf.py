"""HF checkpoints in and out: config.json + *.safetensors <-> a sharded Transformer.

Loading streams one tensor at a time from memory-mapped safetensors and places each with its target NamedSharding via
jax.make_array_from_callback, so a process only materialises the slices its own devices hold. Both transformers 4 and
5 config spellings are read (`rope_theta` / `rope_scaling` versus `rope_parameters`; `torch_dtype` versus `dtype`).
Exporting writes a directory that transformers' `from_pretrained` loads. A checkpoint is read from a local directory,
a hub id (through the hub cache) or a URL such as gs:// (`genenv_jax.models.sources`), or from a local `.gguf` file
(llama.cpp's format, dequantised to float32 as transformers does: `genenv_jax.models.gguf`).

Tensor layout: HF Linear weights are [out, in]; ours are [in, ...] with heads split out (q: [embed, heads, head_dim],
o: [heads, head_dim, embed]), so every conversion is a transpose plus a reshape.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Callable, Iterator

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from genenv_jax.models import gguf, safetensors_io, sources
from genenv_jax.models.config import ModelConfig, to_dtype
from genenv_jax.models.transformer import Transformer
from genenv_jax.parallel import sharding as shd

SUPPORTED_ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}
# Checkpoint entries that are buffers, not parameters (older exports carry them).
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def read_hf_config(directory: str | os.PathLike, dtype: str = "float32", remat: bool = False) -> ModelConfig:
  """Parses config.json into a ModelConfig, with a clear error for anything this decoder does not implement.

  `directory` is a local directory, a hub id or a URL (`genenv_jax.models.sources`), or a local .gguf file (its
  metadata read as config.json: `genenv_jax.models.gguf.hf_config`)."""
  return _parse_hf_config(*_read_config_json(directory), dtype=dtype, remat=remat)


def _read_config_json(directory: str | os.PathLike) -> tuple[str, dict[str, Any]]:
  """(the config.json's path or URL, its JSON object) of the checkpoint `directory` (resolved: `sources.resolve`); for
  a .gguf file, (its path, the config.json transformers builds from its metadata: `gguf.hf_config`)."""
  where = sources.resolve(directory, "HF checkpoint directory")
  if gguf.is_gguf(where):
    return where, gguf.hf_config(gguf.read(_local_gguf(where)))
  if sources.is_url(where):
    fs, root = sources.filesystem(where)
    path, exists = f"{where.rstrip('/')}/config.json", fs.isfile(f"{root.rstrip('/')}/config.json")
    read = lambda: fs.cat_file(f"{root.rstrip('/')}/config.json").decode("utf-8")  # noqa: E731
  else:
    if not os.path.isdir(where):
      raise FileNotFoundError(
        f"HF checkpoint directory {where} does not exist (a file of that name does; a checkpoint file must be a .gguf)"
      )
    path, exists = os.path.join(where, "config.json"), os.path.isfile(os.path.join(where, "config.json"))
    read = lambda: pathlib.Path(path).read_text()  # noqa: E731
  if not exists:
    raise FileNotFoundError(f"{path} not found: an HF checkpoint directory needs config.json beside its weights")
  try:
    raw = json.loads(read())
  except json.JSONDecodeError as e:
    raise ValueError(f"{path} is not valid JSON: {e}") from None
  return path, raw


def _local_gguf(where: str) -> str:
  if sources.is_url(where):
    raise ValueError(f"{where}: a .gguf checkpoint is read from a local file; copy it to local disk and pass that path")
  return where


def _parse_hf_config(path: str, raw: Any, dtype: str, remat: bool) -> ModelConfig:
  """The ModelConfig of a config.json's contents `raw`, read from `path` (named in errors)."""
  if not isinstance(raw, dict):
    raise ValueError(f"{path} must hold a JSON object, got {type(raw).__name__}")
  architectures = raw.get("architectures") or []
  arch = next((a for a in architectures if a in SUPPORTED_ARCHITECTURES), None)
  if arch is None:
    raise ValueError(
      f"{path}: unsupported architecture {architectures or raw.get('model_type')!r}; "
      f"supported: {sorted(SUPPORTED_ARCHITECTURES)}"
    )
  for flag in ("attention_bias", "mlp_bias"):
    if arch == "LlamaForCausalLM" and raw.get(flag):
      raise ValueError(f"{path}: Llama with {flag}=true is not supported")
  if raw.get("use_sliding_window"):
    raise ValueError(f"{path}: sliding-window attention (use_sliding_window=true) is not supported")

  def need(key: str) -> Any:
    if key not in raw:
      raise ValueError(f"{path} lacks the required field {key!r}")
    return raw[key]

  rope = dict(raw.get("rope_parameters") or {})  # transformers 5
  legacy_scaling = raw.get("rope_scaling") or {}  # transformers 4
  rope_theta = float(rope.get("rope_theta", raw.get("rope_theta", 10000.0)))
  scaling_src = {**legacy_scaling, **{k: v for k, v in rope.items() if k != "rope_theta"}}
  rope_type = scaling_src.get("rope_type", scaling_src.get("type", "default"))
  if rope_type == "default":
    rope_scaling = None
  elif rope_type == "linear":
    rope_scaling = ("linear", float(scaling_src["factor"]))
  elif rope_type == "llama3":
    rope_scaling = (
      "llama3",
      float(scaling_src["factor"]),
      float(scaling_src["low_freq_factor"]),
      float(scaling_src["high_freq_factor"]),
      float(scaling_src["original_max_position_embeddings"]),
    )
  else:
    raise ValueError(f"{path}: unsupported rope type {rope_type!r}; supported: default, linear, llama3")

  num_heads = int(need("num_attention_heads"))
  hidden = int(need("hidden_size"))
  return ModelConfig(
    vocab_size=int(need("vocab_size")),
    hidden_size=hidden,
    intermediate_size=int(need("intermediate_size")),
    num_layers=int(need("num_hidden_layers")),
    num_heads=num_heads,
    num_kv_heads=int(raw.get("num_key_value_heads") or num_heads),
    head_dim=int(raw.get("head_dim") or hidden // num_heads),
    rope_theta=rope_theta,
    rope_scaling=rope_scaling,
    rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
    qkv_bias=arch == "Qwen2ForCausalLM",
    tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
    max_position_embeddings=int(raw.get("max_position_embeddings", 4096)),
    param_dtype=dtype,
    dtype=dtype,
    remat=remat,
    architecture=arch,
    source_hf_config=json.dumps(raw, sort_keys=True),
  )


# ---- tensor name and layout mapping ---------------------------------------------------------------------------------

Converter = tuple[str, Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]


def _linear(*split: int) -> tuple[Callable, Callable]:
  """HF [out, in] <-> ours [in, *split] (to_ours: transpose then split the out dim; from_ours: the inverse)."""
  return (lambda w: w.T.reshape(w.shape[1], *split), lambda p: p.reshape(p.shape[0], -1).T)


def _out_proj(heads: int, head_dim: int) -> tuple[Callable, Callable]:
  """HF o_proj [embed, heads*head_dim] <-> ours [heads, head_dim, embed]."""
  return (lambda w: w.T.reshape(heads, head_dim, w.shape[0]), lambda p: p.reshape(heads * head_dim, p.shape[-1]).T)


def _same() -> tuple[Callable, Callable]:
  return (lambda w: w, lambda p: p)


def _bias(*split: int) -> tuple[Callable, Callable]:
  return (lambda b: b.reshape(*split), lambda p: p.reshape(-1))


def parameter_map(config: ModelConfig) -> dict[tuple, Converter]:
  """Our per-layer path -> (HF tensor name, to_ours, from_ours); ("layers", i, ...) is layer i's slice of the stacked
  state leaf ("layers", ...) (`stacked_entries`)."""
  nq, nkv, d = config.num_heads, config.num_kv_heads, config.head_dim
  table: dict[tuple, Converter] = {
    ("embed",): ("model.embed_tokens.weight", *_same()),
    ("final_norm",): ("model.norm.weight", *_same()),
  }
  if not config.tie_word_embeddings:
    table[("lm_head",)] = ("lm_head.weight", lambda w: w.T, lambda p: p.T)
  for i in range(config.num_layers):
    hf = f"model.layers.{i}"
    table[("layers", i, "input_norm")] = (f"{hf}.input_layernorm.weight", *_same())
    table[("layers", i, "post_attention_norm")] = (f"{hf}.post_attention_layernorm.weight", *_same())
    table[("layers", i, "attn", "q_proj")] = (f"{hf}.self_attn.q_proj.weight", *_linear(nq, d))
    table[("layers", i, "attn", "k_proj")] = (f"{hf}.self_attn.k_proj.weight", *_linear(nkv, d))
    table[("layers", i, "attn", "v_proj")] = (f"{hf}.self_attn.v_proj.weight", *_linear(nkv, d))
    table[("layers", i, "attn", "o_proj")] = (f"{hf}.self_attn.o_proj.weight", *_out_proj(nq, d))
    if config.qkv_bias:
      table[("layers", i, "attn", "q_bias")] = (f"{hf}.self_attn.q_proj.bias", *_bias(nq, d))
      table[("layers", i, "attn", "k_bias")] = (f"{hf}.self_attn.k_proj.bias", *_bias(nkv, d))
      table[("layers", i, "attn", "v_bias")] = (f"{hf}.self_attn.v_proj.bias", *_bias(nkv, d))
    table[("layers", i, "mlp", "gate_proj")] = (f"{hf}.mlp.gate_proj.weight", lambda w: w.T, lambda p: p.T)
    table[("layers", i, "mlp", "up_proj")] = (f"{hf}.mlp.up_proj.weight", lambda w: w.T, lambda p: p.T)
    table[("layers", i, "mlp", "down_proj")] = (f"{hf}.mlp.down_proj.weight", lambda w: w.T, lambda p: p.T)
  return table


def stacked_entries(table: dict[tuple, Converter], path: tuple, num_layers: int) -> list[Converter]:
  """The converters of a state leaf: one for an unstacked leaf, one per layer (in order) for a stacked one."""
  if path[0] == "layers":
    return [table[("layers", i, *path[1:])] for i in range(num_layers)]
  return [table[path]]


def _state_path(key_path) -> tuple:
  return tuple(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))) for k in key_path)


# ---- load -----------------------------------------------------------------------------------------------------------


def abstract_model(config: ModelConfig) -> tuple[nnx.GraphDef, nnx.State]:
  """GraphDef and shape-only state of a Transformer, built without allocating parameters."""
  abstract = nnx.eval_shape(lambda: Transformer(config, rngs=nnx.Rngs(0)))
  return nnx.split(abstract)


def load_hf(
  directory: str | os.PathLike, dtype: str = "float32", mesh: Mesh | None = None, remat: bool = False
) -> Transformer:
  """Loads an HF Llama/Qwen2 checkpoint into a Transformer, each tensor placed with its sharding.

  `directory` is a local directory, a hub id (`Qwen/Qwen2.5-7B-Instruct`, through the hub cache), a URL
  (`gs://bucket/dir`, streamed per tensor; see `genenv_jax.models.sources`) or a local .gguf file
  (`genenv_jax.models.gguf`). Without a mesh, parameters go to the first
  device. Raises a ValueError naming missing, unexpected or misshapen tensors.
  """
  directory = sources.resolve(directory, "HF checkpoint directory")
  config = read_hf_config(directory, dtype=dtype, remat=remat)
  if gguf.is_gguf(directory):
    tensors = gguf.open_checkpoint(directory)
  else:
    tensors = safetensors_io.open_checkpoint(directory)
  graphdef, abstract_state = abstract_model(config)
  table = parameter_map(config)
  target_dtype = to_dtype(dtype)

  expected = {hf_name for hf_name, _, _ in table.values()}
  present = {n for n in tensors if not n.endswith(_IGNORED_SUFFIXES)}
  if config.tie_word_embeddings:
    present.discard("lm_head.weight")  # some exports keep the tied copy
  missing, unexpected = sorted(expected - present), sorted(present - expected)
  if missing or unexpected:
    raise ValueError(
      f"{directory}: checkpoint does not match its {'metadata' if gguf.is_gguf(directory) else 'config.json'} "
      f"(missing tensors: {missing[:8]}{' ...' if len(missing) > 8 else ''}; "
      f"unexpected tensors: {unexpected[:8]}{' ...' if len(unexpected) > 8 else ''})"
    )

  if mesh is None:
    mesh = shd.make_mesh((1, 1, 1), devices=jax.devices()[:1])
  shardings = shd.state_shardings(abstract_state, mesh)

  def check_shape(entry, expected_shape):
    """From the stored shape alone: nothing is read (or, from a .gguf, dequantised) to check it."""
    hf_name, to_ours, _ = entry
    stored = tuple(tensors[hf_name].shape(hf_name))
    try:
      converted = tuple(jax.eval_shape(to_ours, jax.ShapeDtypeStruct(stored, np.float32)).shape)
    except (TypeError, ValueError):  # a reshape the stored size cannot take
      converted = None
    if converted != tuple(expected_shape):
      raise ValueError(
        f"{directory}: tensor {hf_name!r} has shape {stored}, which does not match "
        f"{'its metadata' if gguf.is_gguf(directory) else 'config.json'} (expected {tuple(expected_shape)} after "
        "conversion)"
      )

  def read(entry, expected_shape):
    check_shape(entry, expected_shape)
    hf_name, to_ours, _ = entry
    return np.asarray(to_ours(tensors[hf_name].get(hf_name)), dtype=target_dtype)

  def load_leaf(key_path, variable, sharding):
    path = _state_path(key_path)
    entries = stacked_entries(table, path, config.num_layers)
    if path[0] != "layers":
      host = read(entries[0], variable.shape)
      return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
    # stacked: each device's block is read layer by layer, so the host never holds the whole stacked tensor at once
    # unless a device does
    for entry in entries:
      check_shape(entry, variable.shape[1:])  # shapes checked up front, before any device is filled

    def block(index):
      layers = range(config.num_layers)[index[0]]
      return np.stack([read(entries[i], variable.shape[1:])[index[1:]] for i in layers])

    return jax.make_array_from_callback(tuple(variable.shape), sharding, block)

  is_var = lambda x: isinstance(x, nnx.Variable)  # noqa: E731
  state = jax.tree_util.tree_map_with_path(
    lambda p, v, s: v.replace(load_leaf(p, v, s.get_value() if is_var(s) else s)),
    abstract_state,
    shardings,
    is_leaf=is_var,
  )
  return nnx.merge(graphdef, state)


# ---- export ---------------------------------------------------------------------------------------------------------


def hf_config_dict(config: ModelConfig) -> dict[str, Any]:
  """config.json for transformers 5 (also read by 4), starting from the loaded checkpoint's own config when known."""
  raw = json.loads(config.source_hf_config) if config.source_hf_config else {}
  for stale in ("rope_theta", "rope_scaling", "torch_dtype"):
    raw.pop(stale, None)
  rope: dict[str, Any] = {"rope_type": "default", "rope_theta": config.rope_theta}
  if config.rope_scaling is not None and config.rope_scaling[0] == "linear":
    rope.update(rope_type="linear", factor=config.rope_scaling[1])
  elif config.rope_scaling is not None:
    _, factor, low, high, original = config.rope_scaling
    rope.update(
      rope_type="llama3",
      factor=factor,
      low_freq_factor=low,
      high_freq_factor=high,
      original_max_position_embeddings=int(original),
    )
  raw.update(
    architectures=[config.architecture],
    model_type=SUPPORTED_ARCHITECTURES[config.architecture],
    vocab_size=config.vocab_size,
    hidden_size=config.hidden_size,
    intermediate_size=config.intermediate_size,
    num_hidden_layers=config.num_layers,
    num_attention_heads=config.num_heads,
    num_key_value_heads=config.num_kv_heads,
    head_dim=config.head_dim,
    rms_norm_eps=config.rms_norm_eps,
    tie_word_embeddings=config.tie_word_embeddings,
    max_position_embeddings=config.max_position_embeddings,
    rope_parameters=rope,
    dtype=config.param_dtype,
    hidden_act="silu",
  )
  return raw


def save_hf(model: Transformer, directory: str | os.PathLike, max_shard_bytes: int = 5 * 2**30) -> pathlib.Path:
  """Writes config.json and safetensors weights that transformers' from_pretrained loads.

  Each tensor is gathered to the host one at a time (all processes must call this; only process 0 writes).
  """
  directory = pathlib.Path(directory)
  config = model.config
  table = parameter_map(config)
  _, state = nnx.split(model)
  flat = {
    _state_path(p): v
    for p, v in jax.tree_util.tree_flatten_with_path(state, is_leaf=lambda x: isinstance(x, nnx.Variable))[0]
  }

  def tensors() -> Iterator[tuple[str, np.ndarray]]:
    for path, variable in flat.items():
      value = variable.get_value() if isinstance(variable, nnx.Variable) else variable
      host = np.asarray(jax.device_get(_fully_replicated(value)))
      entries = stacked_entries(table, path, config.num_layers)
      layers = [host] if path[0] != "layers" else list(host)
      for (hf_name, _, from_ours), one in zip(entries, layers, strict=True):
        yield hf_name, np.ascontiguousarray(from_ours(one))

  if shd.is_main_process():
    directory.mkdir(parents=True, exist_ok=True)
    safetensors_io.write_checkpoint(directory, tensors(), max_shard_bytes=max_shard_bytes)
    (directory / "config.json").write_text(json.dumps(hf_config_dict(config), indent=2, sort_keys=True))
  else:
    for _ in tensors():  # the gathers are collectives: every process takes part
      pass
  return directory


def _fully_replicated(x: jax.Array) -> jax.Array:
  """Gathers a sharded array so every process can read it whole."""
  if isinstance(x.sharding, NamedSharding) and not x.is_fully_replicated:
    return jax.jit(lambda a: a, out_shardings=NamedSharding(x.sharding.mesh, PartitionSpec()))(x)
  return x
