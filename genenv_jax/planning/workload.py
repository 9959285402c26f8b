"""What plan compiles for: the slice (chip and device count), the mesh sizes, the rows and lengths of one step
(planning.analytic.Workload), and a stand-in domain for a benchmark whose data is absent."""

from __future__ import annotations


def tree_of(config):
  """The config's settings tree (coevolution.settings): every value plan reads, with the tree's one default for a key
  the config lacks. Raises coevolution.settings.SettingsError naming every bad value."""
  from genenv_jax.coevolution.settings import from_config

  return from_config(config)


def slice_of(config, devices: int | None = None, chip_name: str | None = None) -> tuple[str, int]:
  """(chip, devices): --chip / --devices where given, else the config's `slice` (e.g. "v5p-64": v5p, 32 chips)."""
  from genenv_jax.planning import costs

  if devices is not None and devices <= 0:
    raise ValueError(f"--devices must be positive, got {devices}")
  name = tree_of(config).slice
  if name:
    kind, chips = costs.slice_chips(name)
    return (chip_name or kind), (devices or chips)
  if devices is None or chip_name is None:
    raise ValueError(
      "the config names no TPU slice (config.slice, e.g. configs/qwen2_5_7b.py:v5p-64): give "
      "--devices (chips of the slice) and --chip (v4, v5e, v5p or v6e)"
    )
  return chip_name, devices


DEFAULT_CHIP = "v5e"  # the chip whose figures plan uses for a config without a slice: the smallest memory (16 GiB)


def host_slice(config) -> tuple[str, int, str]:
  """(chip, devices, note) for a config that names no slice, planned without --devices and --chip: this host's CPU
  devices (XLA_FLAGS' --xla_force_host_platform_device_count, else 1; what `main` runs the config on), with the
  DEFAULT_CHIP's figures (its memory, FLOPs and bandwidths), and the note that says so."""
  import os
  import re

  forced = re.search(r"--xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", ""))
  devices = int(forced.group(1)) if forced else 1
  note = (
    f"the config names no TPU slice (config.slice): planned for this host's {devices} CPU device"
    f"{'s' * (devices > 1)}, with the {DEFAULT_CHIP}'s figures (memory, FLOPs, bandwidths); give --devices and "
    "--chip to plan for another slice"
  )
  return DEFAULT_CHIP, devices, note


LENGTHS = ("agent_prompt_len", "agent_answer_len", "env_prompt_len", "env_output_len")


def workload_of(config, lengths=None):
  """analytic.Workload of a config: rows as coevolution.settings counts them (Settings.num_fresh), lengths from the
  domain section (or `lengths`, a mapping with the four LENGTHS, e.g. the built domain's when the config leaves them
  0), every other value the settings tree's."""
  from genenv_jax.planning import analytic

  s = tree_of(config)
  lengths = lengths or s.domain.lengths
  if not all(lengths.get(k) for k in LENGTHS):
    raise ValueError(
      f"the config leaves a domain length at 0 ({dict(lengths)}): --nocompile needs all four of "
      f"{', '.join(LENGTHS)} set (or drop --nocompile so the domain is built)"
    )
  a, e = s.agent, s.env
  return analytic.Workload(
    agent_lora=a.lora.spec,
    env_lora=e.lora.spec,
    env_rows=s.num_fresh,
    agent_rows=(s.num_fresh + s.pools.num_replay) * a.grpo.group_size,
    minibatches=a.grpo.minibatches,
    agent_prompt=lengths["agent_prompt_len"],
    agent_answer=lengths["agent_answer_len"],
    env_prompt=lengths["env_prompt_len"],
    env_output=lengths["env_output_len"],
    agent_reference=a.grpo.kl_coef > 0,
    env_train=e.train,
    agent_logprob_chunk=a.logprob_chunk,
    env_logprob_chunk=e.logprob_chunk,
    agent_prefill_rows=a.sampling.prefill_rows,
    env_prefill_rows=e.sampling.prefill_rows,
  )


def planning_domain(config):
  """(config, note): a benchmark domain whose data directory is missing becomes the arithmetic domain padded to the
  same four lengths (same compiled shapes), with a note saying so; any other config is returned as it is."""
  from genenv_jax.benchmarks.registry import FAMILY_DATA, TEXT_DOMAINS
  from genenv_jax.data import resolve_data_dir
  from genenv_jax.data.manifest import require

  s = tree_of(config)
  d = s.domain
  if d.name not in TEXT_DOMAINS:
    return config, None
  try:
    require(resolve_data_dir(config.domain.get("data_dir") or None), FAMILY_DATA[d.name])
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
      num_seeds=max(1, min(2048, s.pools.train_capacity - 1, s.pools.env_capacity - 1)),
      num_heldout=64,
      success_threshold=d.success_threshold,
      **d.lengths,
    )
  )
  return c, note


def virtual_mesh_sizes(mesh: dict, devices: int) -> dict[str, int]:
  """The (data, fsdp, tensor) sizes sharding.make_mesh would give `devices` devices (one size may be -1), without
  creating devices (for --nocompile); `mesh`: the tree's MeshSettings.sizes, or any mapping of some of the three."""
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
