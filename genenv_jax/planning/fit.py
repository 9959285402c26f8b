"""`plan --fit`: the fastest setting of the memory knobs with which a config's step fits its slice.

The knobs (KNOBS: a Candidate field each, and the config path a user overrides): the agent's GRPO mini-batches (the
env trains on its whole batch in one update: the config has no env mini-batch knob), both samplers' prefill rows and
KV cache kinds, both models' remat policies, and the mesh's split of the slice's chips between fsdp and tensor (data
= 1). Everything else of the config (model, slice, rows, lengths) is the workload and stays as it is.

  1. `candidates`: every valid combination. Valid means what the run itself checks (training.config_checks: the
     mini-batches and prefill rows divide the rows they split) and what keeps each batch split over the chips
     (costs.divisibility_warnings: the rows, a mini-batch's rows and a prefill chunk's rows divide by the batch
     shards), a tensor axis that divides both models' heads, MLP and vocabulary evenly (as the analytic model
     assumes), and no two candidates that compile to the same program (a prefill chunk of every row is 0; the env's
     knobs are fixed where the env neither samples nor trains).
  2. `rank`: each candidate's analytic step time and peak (planning.analytic, the figures `plan --nocompile` prints for
     that config); those whose analytic peak fits come first, fastest first, then the rest by peak. Ties go to the
     candidate that changes fewer of the config's knobs, then to the lower peak.
  3. `confirm`: the first N fitting candidates are compiled for the target (planner.plan; injected, so tests replace
     it), and the fastest whose compiled peak fits is the answer, printed as the --config overrides that turn the
     config into it (`override_line`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence

KEEP = 100  # ranked candidates kept in the result (and in --json)
SHOW = 5  # ranked candidates printed

# Candidate field -> the config path it sets.
KNOBS = {
  "minibatches": "agent.grpo.minibatches",
  "agent_prefill_rows": "agent.sampling.prefill_rows",
  "env_prefill_rows": "env.sampling.prefill_rows",
  "agent_remat": "agent.model.remat",
  "env_remat": "env.model.remat",
  "agent_kv_cache": "agent.sampling.kv_cache",
  "env_kv_cache": "env.sampling.kv_cache",
  "data": "mesh.data",
  "fsdp": "mesh.fsdp",
  "tensor": "mesh.tensor",
}


@dataclasses.dataclass(frozen=True)
class Candidate:
  """One setting of the memory knobs (KNOBS names each field's config path)."""

  minibatches: int
  agent_prefill_rows: int
  env_prefill_rows: int
  agent_remat: str
  env_remat: str
  agent_kv_cache: str
  env_kv_cache: str
  data: int
  fsdp: int
  tensor: int


@dataclasses.dataclass(frozen=True)
class Figures:
  """A candidate's analytic figures: step time (serial), per-chip peak, the verdict, and the memory by component."""

  step_s: float
  peak: int
  fits: bool
  utilisation: float
  peak_phase: str
  components: Mapping[str, int]


@dataclasses.dataclass(frozen=True)
class Ranked:
  candidate: Candidate
  figures: Figures
  changes: int  # knobs that differ from the config's own


@dataclasses.dataclass(frozen=True)
class Confirmation:
  """What compiling one ranked candidate gave: its rank (0 = first), the compiled peak and verdict, its components."""

  rank: int
  fits: bool
  peak: int
  utilisation: float
  components: Mapping[str, int]  # empty where the compiler gave up (note)
  target: str
  note: str = ""  # the compiler's out-of-memory error, where it refused the program


@dataclasses.dataclass(frozen=True)
class Basis:
  """What every candidate shares: the config's workload, both ModelConfigs, the chip and the verdict's margin."""

  workload: object  # planning.analytic.Workload of the config
  devices: int  # chips of the slice
  agent_model: object  # models.config.ModelConfig
  env_model: object
  chip: object  # planning.costs.Chip
  usable_fraction: float


# ---- the config and its candidates -------------------------------------------------------------------------------


def _get(tree, path: str):
  """The settings tree's value at a config path ("agent.model.remat")."""
  for part in path.split("."):
    tree = getattr(tree, part)
  return tree


def knob_values(config) -> dict[str, object]:
  """The config's own value of each knob (KNOBS), as its settings tree holds it (mesh sizes may be -1)."""
  from genenv_jax.planning.workload import tree_of

  tree = tree_of(config)
  values = {field: _get(tree, path) for field, path in KNOBS.items()}
  for who in ("agent", "env"):
    if not isinstance(values[f"{who}_remat"], str):
      raise ValueError(
        f"{who}.model.remat = {values[f'{who}_remat']!r}: plan --fit searches remat by policy name; set it to one "
        "(e.g. --config.agent.model.remat=full)"
      )
  return values


def given(config, devices: int) -> Candidate:
  """The config's own knobs as a Candidate, its mesh sized for `devices` chips (a -1 resolved)."""
  from genenv_jax.planning.workload import tree_of, virtual_mesh_sizes

  values = knob_values(config)
  values.update(virtual_mesh_sizes(tree_of(config).mesh.sizes, devices))
  return Candidate(**values)


def apply(config, candidate: Candidate):
  """A copy of `config` with the candidate's knobs set (the config itself is left as it is)."""
  out = config.copy_and_resolve_references()
  for field, path in KNOBS.items():
    *parents, leaf = path.split(".")
    node = out
    for part in parents:
      node = node[part]
    node[leaf] = getattr(candidate, field)
  return out


def overrides(config, candidate: Candidate) -> dict[str, object]:
  """The config paths whose values the candidate changes, with its values (KNOBS order)."""
  own = knob_values(config)
  return {path: getattr(candidate, f) for f, path in KNOBS.items() if getattr(candidate, f) != own[f]}


def override_line(changes: Mapping[str, object]) -> str:
  """`--config.PATH=VALUE ...` for absl's config flags, to paste after the same --config."""
  return " ".join(f"--config.{path}={value}" for path, value in changes.items())


def divisors(n: int) -> list[int]:
  """The positive divisors of n, ascending."""
  if n <= 0:
    raise ValueError(f"divisors of a non-positive number: {n}")
  return [d for d in range(1, n + 1) if n % d == 0]


def splits_evenly(model, tensor: int) -> bool:
  """Whether a tensor axis of `tensor` chips splits a model's attention heads, MLP and vocabulary without a remainder
  (sharding replicates a dimension that does not divide, which the analytic model does not count)."""
  return all(n % tensor == 0 for n in (model.num_heads, model.intermediate_size, model.vocab_size))


def _chunks(rows: int, shards: int, name: str) -> list[int]:
  """Prefill chunk sizes for `rows` rows: 0 (every row at once) and the proper divisors that divide by the shards."""
  from genenv_jax.planning.costs import divisibility_warnings

  return [0] + [p for p in divisors(rows)[:-1] if not divisibility_warnings({name: p}, shards)]


def candidates(config, basis: Basis) -> list[Candidate]:
  """Every valid candidate for `config` on its Basis's chips (see the module docstring for what valid means)."""
  from genenv_jax.models.config import REMAT_POLICIES
  from genenv_jax.models.transformer import KV_CACHE_KINDS
  from genenv_jax.planning.costs import divisibility_warnings
  from genenv_jax.training.config_checks import problems

  devices, w = basis.devices, basis.workload
  own = given(config, devices)
  env_samples, env_trains = w.env_rows > 0, w.env_rows > 0 and w.env_train
  out = []
  for tensor in divisors(devices):
    if not (splits_evenly(basis.agent_model, tensor) and splits_evenly(basis.env_model, tensor)):
      continue
    fsdp = devices // tensor
    if divisibility_warnings({"env rows": w.env_rows, "agent rows": w.agent_rows}, fsdp):
      continue
    minibatches = [
      m for m in divisors(w.agent_rows) if not divisibility_warnings({"rows per mini-batch": w.agent_rows // m}, fsdp)
    ]
    agent_chunks = _chunks(w.agent_rows, fsdp, "agent prefill rows")
    env_chunks = _chunks(w.env_rows, fsdp, "env prefill rows") if env_samples else [own.env_prefill_rows]
    for m, ap, ep in itertools.product(minibatches, agent_chunks, env_chunks):
      shape = dataclasses.replace(
        own, minibatches=m, agent_prefill_rows=ap, env_prefill_rows=ep, data=1, fsdp=fsdp, tensor=tensor
      )
      if problems(apply(config, shape)):  # the run's own checks, on what remat and the cache kind do not change
        continue
      for ar, er, ak, ek in itertools.product(
        REMAT_POLICIES,
        REMAT_POLICIES if env_trains else [own.env_remat],
        KV_CACHE_KINDS,
        KV_CACHE_KINDS if env_samples else [own.env_kv_cache],
      ):
        out.append(dataclasses.replace(shape, agent_remat=ar, env_remat=er, agent_kv_cache=ak, env_kv_cache=ek))
  return out


def _lengths(config) -> dict | None:
  from genenv_jax.planning.planner import config_lengths

  return config_lengths(config)


# ---- the analytic figures and the ranking ------------------------------------------------------------------------


def basis_of(config, devices: int, chip_name: str, usable_fraction: float = 0.9, attention: str | None = None) -> Basis:
  """The Basis of `config`: its workload and models as `plan --nocompile` reads them."""
  from genenv_jax.planning import costs
  from genenv_jax.planning.planner import models_of
  from genenv_jax.planning.workload import workload_of

  agent_mc, env_mc = models_of(config, attention)
  return Basis(workload_of(config, _lengths(config)), devices, agent_mc, env_mc, costs.chip(chip_name), usable_fraction)


@functools.lru_cache(maxsize=64)
def _shape(model, kv_cache: str):
  from genenv_jax.planning.architectures import shape_of

  return shape_of(model, kv_cache)


def evaluate(basis: Basis, c: Candidate) -> Figures:
  """The candidate's analytic figures: those `plan --nocompile` gives for `apply(config, c)` (a test holds them
  equal), computed from the shared Basis without building a config per candidate."""
  from genenv_jax.planning import analytic, costs
  from genenv_jax.planning.planner import analytic_components

  w = dataclasses.replace(
    basis.workload,
    minibatches=c.minibatches,
    agent_prefill_rows=c.agent_prefill_rows,
    env_prefill_rows=c.env_prefill_rows,
  )
  analysis = analytic.analyse(
    w,
    _shape(basis.agent_model, c.agent_kv_cache),
    _shape(basis.env_model, c.env_kv_cache),
    analytic.MeshShape(c.data, c.fsdp, c.tensor),
    basis.chip,
    agent_remat=c.agent_remat,
    env_remat=c.env_remat,
    attention=basis.agent_model.attention,
  )
  verdict = costs.fit_verdict(analysis.peak_bytes, basis.chip.hbm_bytes, basis.usable_fraction)
  return Figures(
    step_s=analysis.step_serial_s,
    peak=int(analysis.peak_bytes),
    fits=verdict.fits,
    utilisation=verdict.utilisation,
    peak_phase=analysis.peak_phase,
    components=analytic_components(analysis),
  )


def rank(evaluated: Iterable[tuple[Candidate, Figures]], own: Candidate) -> list[Ranked]:
  """The candidates best first: those that fit by their (analytic) figures, fastest first, then the rest, lowest peak
  first; ties go to fewer changes from `own` (the config's knobs), then to the lower peak."""
  out = [Ranked(c, f, sum(getattr(c, k) != getattr(own, k) for k in KNOBS)) for c, f in evaluated]
  return sorted(
    out,
    key=lambda r: (
      not r.figures.fits,
      r.figures.step_s if r.figures.fits else r.figures.peak,
      r.changes,
      r.figures.peak,
      dataclasses.astuple(r.candidate),
    ),
  )


OUT_OF_MEMORY = ("resource_exhausted", "ran out of memory", "out of memory")


def out_of_memory(message: str) -> bool:
  """Whether a compile error says the program does not fit the device's memory."""
  return any(m in message.lower() for m in OUT_OF_MEMORY)


def _check_confirm(n: int) -> None:
  if not isinstance(n, int) or n < 0:
    raise ValueError(f"--fit_confirm must be an integer >= 0 (0 = analytic only), got {n!r}")


def confirm(
  ranked: Sequence[Ranked], config, compile_fn: Callable[[object], dict], n: int, log=print
) -> list[Confirmation]:
  """Compiles the first `n` ranked candidates that fit by the analytic figures (compile_fn: a config -> planner.plan's
  result) and returns what each gave, in rank order, stopping at the first whose compiled peak fits. A compile that
  the compiler refuses for want of memory (the TPU compiler does so where the program exceeds HBM) counts as not
  fitting, with the error as its note."""
  _check_confirm(n)
  out = []
  for i, r in enumerate(ranked[:n]):
    if not r.figures.fits:
      break
    if log:
      log(f"confirming #{i + 1}: {override_line(overrides(config, r.candidate)) or '(the config as given)'}")
    try:
      res = compile_fn(apply(config, r.candidate))
    except RuntimeError as e:
      if not out_of_memory(str(e)):
        raise
      out.append(Confirmation(i, False, 0, 0.0, {}, "", note=str(e).strip().splitlines()[0][:300]))
      continue
    out.append(
      Confirmation(
        rank=i,
        fits=bool(res["fits"]),
        peak=int(res["memory"]["peak"]),
        utilisation=float(res["utilisation"]),
        components={k: int(v) for k, v in res["components"].items()},
        target=str(res.get("target", "")),
      )
    )
    if out[-1].fits:
      break
  return out


# ---- the search ------------------------------------------------------------------------------------------------------


def _entry(config, r: Ranked, index: int) -> dict:
  changes = overrides(config, r.candidate)
  return {
    "rank": index + 1,
    "knobs": dataclasses.asdict(r.candidate),
    "overrides": changes,
    "override_line": override_line(changes),
    "step_serial_s": r.figures.step_s,
    "peak_bytes": r.figures.peak,
    "fits": r.figures.fits,
    "utilisation": r.figures.utilisation,
    "peak_phase": r.figures.peak_phase,
    "components": dict(r.figures.components),
  }


def biggest(components: Mapping[str, int]) -> tuple[str, int, str]:
  """(component, bytes, the knob that shrinks it) of the largest memory component (costs.KNOBS)."""
  from genenv_jax.planning.costs import rank_advice

  top = rank_advice(components, min_fraction=0.0)[0]
  return top.component, top.bytes, top.knob


def search(
  config,
  devices: int,
  chip_name: str,
  confirm_n: int = 2,
  compile_fn: Callable[[object], dict] | None = None,
  usable_fraction: float = 0.9,
  attention: str | None = None,
  target: str = "cpu",
  log=print,
) -> dict:
  """Searches the memory knobs of `config` for `devices` chips of `chip_name`: candidates, ranked by the analytic
  model, the first `confirm_n` fitting ones compiled (compile_fn; default planner.plan for `target`). Returns the
  result (what --json writes) and logs the report."""
  from genenv_jax.planning import costs, planner
  from genenv_jax.planning.workload import tree_of
  from genenv_jax.training.config_checks import validate

  _check_confirm(confirm_n)
  validate(config)
  own = given(config, devices)
  basis = basis_of(config, devices, chip_name, usable_fraction, attention)
  found = candidates(config, basis)
  if not found:
    raise ValueError(
      f"plan --fit: no valid setting of the memory knobs for {devices} chips: the agent's {basis.workload.agent_rows} "
      f"and the env's {basis.workload.env_rows} rows per step must divide by the fsdp axis of some mesh split"
    )
  ranked = rank(((c, evaluate(basis, c)) for c in found), own)
  fitting = sum(r.figures.fits for r in ranked)
  if compile_fn is None:
    compile_fn = functools.partial(
      planner.plan,
      devices=devices,
      chip_name=chip_name,
      usable_fraction=usable_fraction,
      log=None,
      compile_program=True,
      attention=attention,
      target=target,
    )
  checked = confirm(ranked, config, compile_fn, confirm_n if fitting else 0, log=log)
  chosen = next((c for c in checked if c.fits), None)
  best = ranked[chosen.rank] if chosen else (ranked[0] if fitting and not confirm_n else None)
  result = {
    "slice": tree_of(config).slice,
    "chip": basis.chip.name,
    "devices": devices,
    "usable_bytes": usable_fraction * basis.chip.hbm_bytes,
    "candidates": len(ranked),
    "fitting_analytic": fitting,
    "given": _entry(config, Ranked(own, evaluate(basis, own), 0), -1),
    "ranked": [_entry(config, r, i) for i, r in enumerate(ranked[:KEEP])],
    "confirmed": [{**dataclasses.asdict(c), "rank": c.rank + 1, "components": dict(c.components)} for c in checked],
    "best": _entry(config, best, ranked.index(best)) if best else None,
    "best_compiled": bool(chosen),
  }
  if best is None:
    compiled = next((c.components for c in checked if c.components), None)
    name, size, knob = biggest(compiled or ranked[0].figures.components)
    how = "by the compiler" if compiled else "by the analytic model"
    result["none_fits"] = {"component": name, "bytes": size, "knob": knob, "judged": how}
  if log:
    log(format_fit(result, costs.fmt_bytes))
  return result


def format_fit(r: dict, fmt_bytes: Callable[[float], str]) -> str:
  """The report of a search's result: the ranking, the confirmations and the answer (or why there is none)."""
  lines = [
    f"plan --fit: {r['slice'] or r['chip']} ({r['devices']} {r['chip']} chips, {fmt_bytes(r['usable_bytes'])} usable "
    f"per chip); {r['candidates']} valid candidates, {r['fitting_analytic']} fit by the analytic model",
    f"  as given: step {r['given']['step_serial_s']:.2f} s (analytic), analytic peak "
    f"{fmt_bytes(r['given']['peak_bytes'])} ({'fits' if r['given']['fits'] else 'does not fit'})",
    "ranked (analytic step time, fastest fitting first):",
  ]
  for e in r["ranked"][:SHOW]:
    lines.append(
      f"  {e['rank']:>3}. step {e['step_serial_s']:.2f} s, peak {fmt_bytes(e['peak_bytes'])}"
      f"{'' if e['fits'] else ' (does not fit)'}: {e['override_line'] or '(the config as given)'}"
    )
  for c in r["confirmed"]:
    lines.append(
      f"  compiled #{c['rank']}: the compiler refused it: {c['note']}"
      if c["note"]
      else f"  compiled #{c['rank']} ({c['target']}): peak {fmt_bytes(c['peak'])} ({c['utilisation']:.0%} of HBM), "
      f"{'fits' if c['fits'] else 'does not fit'}"
    )
  best = r["best"]
  if best:
    peak = (
      f"compiled peak {fmt_bytes(r['confirmed'][-1]['peak'])}"
      if r["best_compiled"]
      else f"analytic peak {fmt_bytes(best['peak_bytes'])} (not compiled: --fit_confirm=0)"
    )
    lines.append(f"best: #{best['rank']}, analytic step {best['step_serial_s']:.2f} s, {peak}")
    lines.append(f"  {best['override_line'] or '(the config as given: no change)'}")
  else:
    n = r["none_fits"]
    lines.append(
      f"no candidate fits ({'the ' + str(len(r['confirmed'])) + ' compiled' if r['confirmed'] else 'analytic'}); "
      f"the best-ranked one's biggest memory component {n['judged']} is {n['component']} ({fmt_bytes(n['bytes'])}): "
      f"{n['knob']}"
    )
  return "\n".join(lines)
