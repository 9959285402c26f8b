"""What plan compiles for: the slice (chip and device count), the mesh sizes, the rows and lengths of one step
(planning.analytic.Workload), and a stand-in domain for a benchmark whose data is absent."""

from __future__ import annotations


def slice_of(config, devices: int | None = None, chip_name: str | None = None) -> tuple[str, int]:
  """(chip, devices): --chip / --devices where given, else the config's `slice` (e.g. "v5p-64": v5p, 32 chips)."""
  from genenv_jax.planning import costs

  if devices is not None and devices <= 0:
    raise ValueError(f"--devices must be positive, got {devices}")
  name = config.get("slice", "") or ""
  if name:
    kind, chips = costs.slice_chips(name)
    return (chip_name or kind), (devices or chips)
  if devices is None or chip_name is None:
    raise ValueError(
      "the config names no TPU slice (config.slice, e.g. configs/qwen2_5_7b.py:v5p-64): give "
      "--devices (chips of the slice) and --chip (v4, v5e, v5p or v6e)"
    )
  return chip_name, devices


LENGTHS = ("agent_prompt_len", "agent_answer_len", "env_prompt_len", "env_output_len")


def workload_of(config, lengths=None):
  """analytic.Workload of a config: rows as coevolution.settings counts them, lengths from config.domain
  (or `lengths`, a mapping with the four LENGTHS, e.g. the built domain's when the config leaves them 0)."""
  from genenv_jax.planning import analytic

  lengths = lengths or {k: int(config.domain.get(k, 0)) for k in LENGTHS}
  if not all(lengths.get(k) for k in LENGTHS):
    raise ValueError(
      f"the config leaves a domain length at 0 ({dict(lengths)}): --nocompile needs all four of "
      f"{', '.join(LENGTHS)} set (or drop --nocompile so the domain is built)"
    )
  a, e = config.agent, config.env
  env_rows = e.num_seeds * e.get("samples_per_seed", 1) if config.mode == "coevolve" else 0
  chunk = lambda m: int(m.get("logprob_chunk", 0) or 0)  # noqa: E731
  prefill = lambda m: int(m.sampling.get("prefill_rows", 0) or 0)  # noqa: E731
  return analytic.Workload(
    agent_lora=lora_spec_of(a),
    env_lora=lora_spec_of(e),
    env_rows=env_rows,
    agent_rows=(env_rows + config.pools.num_replay) * a.grpo.group_size,
    minibatches=a.grpo.minibatches,
    agent_prompt=lengths["agent_prompt_len"],
    agent_answer=lengths["agent_answer_len"],
    env_prompt=lengths["env_prompt_len"],
    env_output=lengths["env_output_len"],
    agent_reference=a.grpo.kl_coef > 0,
    env_train=bool(e.train),
    agent_logprob_chunk=chunk(a),
    env_logprob_chunk=chunk(e),
    agent_prefill_rows=prefill(a),
    env_prefill_rows=prefill(e),
  )


def lora_spec_of(section):
  """The LoRA adapters of a model section (agent or env: its `lora` sub-section, coevolution.settings.LoraSettings),
  as a models.lora.LoraSpec; None when LoRA is off or the section has none (an older config)."""
  from genenv_jax.models.lora import LoraSpec

  lora = section.get("lora")
  if not lora or not lora.get("enabled", False):
    return None
  return LoraSpec(int(lora.rank), float(lora.alpha), tuple(lora.targets), float(lora.get("dropout", 0.0)))


def planning_domain(config):
  """(config, note): a benchmark domain whose data directory is missing becomes the arithmetic domain padded to the
  same four lengths (same compiled shapes), with a note saying so; any other config is returned as it is."""
  from genenv_jax.benchmarks.registry import FAMILY_DATA, TEXT_DOMAINS
  from genenv_jax.data import resolve_data_dir
  from genenv_jax.data.manifest import require

  d = config.domain
  if d.name not in TEXT_DOMAINS:
    return config, None
  try:
    require(resolve_data_dir(d.get("data_dir", "") or None), FAMILY_DATA[d.name])
    return config, None
  except FileNotFoundError as e:
    note = (
      f"{e}; planned as the arithmetic domain padded to the {d.name} lengths (the compiled step has the same shapes)"
    )
  import ml_collections

  c = ml_collections.ConfigDict(config.to_dict())
  c.domain = ml_collections.ConfigDict(
    dict(
      name="arithmetic",
      verifier="jax",
      min_operands=2,
      max_operands=4,
      max_digits=3,
      operators="+-*",
      bound=10**6,
      seed_max_difficulty=0,
      seed_decay=1.0,
      # fewer seeds than either pool holds (build refuses a pool with no room beyond its seeds); the seed count
      # sets no compiled shape
      num_seeds=max(1, min(2048, config.pools.train_capacity - 1, config.pools.env_capacity - 1)),
      num_heldout=64,
      success_threshold=d.success_threshold,
      **{k: d[k] for k in LENGTHS},
    )
  )
  return c, note


def virtual_mesh_sizes(mesh: dict, devices: int) -> dict[str, int]:
  """The (data, fsdp, tensor) sizes sharding.make_mesh would give `devices` devices (one size may be -1), without
  creating devices (for --nocompile)."""
  sizes = {k: int(mesh.get(k, 1)) for k in ("data", "fsdp", "tensor")}
  free = [k for k, v in sizes.items() if v == -1]
  known = 1
  for k, v in sizes.items():
    if v != -1:
      if v <= 0:
        raise ValueError(f"mesh.{k} must be positive or -1, got {v}")
      known *= v
  if len(free) > 1:
    raise ValueError(f"at most one mesh size may be -1, got {mesh}")
  if free:
    if devices % known:
      raise ValueError(f"{devices} devices do not divide by {known} (the mesh sizes other than -1 in {mesh})")
    sizes[free[0]] = devices // known
  elif known != devices:
    raise ValueError(f"the mesh {mesh} needs {known} devices, but the slice has {devices}")
  return sizes
