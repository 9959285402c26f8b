"""plan --fit (genenv_jax.planning.fit): the candidates are valid, the ranking picks the fastest that fits, the
compile confirmation falls back past a candidate the compiler rejects, and the printed overrides give the candidate.

Everything runs on the analytic model; the compiler is a fake (`confirm`'s and `search`'s injected compile_fn)."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from absl import flags
from conftest import PROJECT_ROOT
from ml_collections import config_flags

from configs import qwen2_5_7b
from genenv_jax.planning import fit, planner
from genenv_jax.planning.costs import GIB
from genenv_jax.training.config_checks import problems

CHIPS = 8  # v6e-8
LONG_PROMPT = 16000  # agent prompt tokens at which no bf16 ("auto") agent KV cache fits a v6e-8 chip


def _v6e8(**domain):
  c = qwen2_5_7b.get_config("v6e-8")
  c.agent.sampling.kv_cache = "auto"
  c.domain.update(domain)
  return c


@dataclasses.dataclass
class Searched:
  config: object
  basis: fit.Basis
  own: fit.Candidate
  evaluated: list
  ranked: list


def _searched(config) -> Searched:
  basis = fit.basis_of(config, CHIPS, "v6e")
  own = fit.given(config, CHIPS)
  evaluated = [(c, fit.evaluate(basis, c)) for c in fit.candidates(config, basis)]
  return Searched(config, basis, own, evaluated, fit.rank(evaluated, own))


@pytest.fixture(scope="module")
def paper():
  """v6e-8 at the paper's lengths with a bf16 agent cache."""
  return _searched(_v6e8())


@pytest.fixture(scope="module")
def long_prompt():
  """v6e-8 with 16,000-token agent prompts and a bf16 agent cache: only an int8 agent cache fits."""
  return _searched(_v6e8(agent_prompt_len=LONG_PROMPT))


# ---- candidates ------------------------------------------------------------------------------------------------------


def test_divisors_and_even_tensor_splits():
  assert fit.divisors(12) == [1, 2, 3, 4, 6, 12]
  assert fit.divisors(1) == [1]
  with pytest.raises(ValueError, match="non-positive"):
    fit.divisors(0)
  model = type("M", (), dict(num_heads=12, intermediate_size=8960, vocab_size=151936))
  assert [t for t in (1, 2, 3, 4, 8) if fit.splits_evenly(model, t)] == [1, 2, 4]


def test_candidates_respect_divisibility(paper):
  agent_rows, env_rows = paper.basis.workload.agent_rows, paper.basis.workload.env_rows
  assert (agent_rows, env_rows) == (512, 32)
  cands = [c for c, _ in paper.evaluated]
  assert len(set(cands)) == len(cands)  # no duplicates
  for c in cands:
    assert (c.data, c.fsdp * c.tensor) == (1, CHIPS)
    assert agent_rows % c.minibatches == 0 and (agent_rows // c.minibatches) % c.fsdp == 0
    for rows, chunk in ((agent_rows, c.agent_prefill_rows), (env_rows, c.env_prefill_rows)):
      assert chunk == 0 or (chunk < rows and rows % chunk == 0 and chunk % c.fsdp == 0)
  # Qwen2.5-1.5B has 12 heads: a tensor axis of 8 would leave a remainder
  assert {(c.fsdp, c.tensor) for c in cands} == {(8, 1), (4, 2), (2, 4)}
  assert {c.minibatches for c in cands if c.fsdp == 8} == {1, 2, 4, 8, 16, 32, 64}  # 512/128 = 4 rows < 8 shards
  assert {c.env_prefill_rows for c in cands if c.fsdp == 8} == {0, 8, 16}
  assert {c.agent_kv_cache for c in cands} == {c.env_kv_cache for c in cands} == {"auto", "int8"}
  assert {c.agent_remat for c in cands} == {"none", "full", "save_dots", "save_all_dots"}
  for c in cands[:: len(cands) // 40]:  # the run's own checks pass on every candidate
    assert problems(fit.apply(paper.config, c)) == []


def test_candidates_fix_the_knobs_of_an_env_that_neither_samples_nor_trains():
  c = _v6e8()
  c.mode = "grpo"
  basis = fit.basis_of(c, CHIPS, "v6e")
  cands = fit.candidates(c, basis)
  assert {(x.env_prefill_rows, x.env_remat, x.env_kv_cache) for x in cands} == {(0, "full", "auto")}
  assert {x.agent_kv_cache for x in cands} == {"auto", "int8"}


# ---- ranking ---------------------------------------------------------------------------------------------------------


def _figures(step_s, peak, fits):
  return fit.Figures(step_s, peak, fits, 0.5, "agent update", {"temporaries": peak})


def test_rank_orders_fitting_by_time_then_the_rest_by_peak_then_fewer_changes():
  own = fit.Candidate(4, 0, 0, "full", "full", "auto", "auto", 1, 8, 1)
  one_change = dataclasses.replace(own, minibatches=8)
  two_changes = dataclasses.replace(own, minibatches=8, agent_kv_cache="int8")
  ranked = fit.rank(
    [
      (dataclasses.replace(own, fsdp=4, tensor=2), _figures(1.0, 9 * GIB, False)),  # fastest, but does not fit
      (two_changes, _figures(2.0, 5 * GIB, True)),
      (one_change, _figures(2.0, 6 * GIB, True)),  # same time, fewer changes: before two_changes
      (own, _figures(3.0, 7 * GIB, True)),
      (dataclasses.replace(own, agent_remat="none"), _figures(0.5, 30 * GIB, False)),
    ],
    own,
  )
  assert [(r.figures.step_s, r.changes) for r in ranked] == [(2.0, 1), (2.0, 2), (3.0, 0), (1.0, 2), (0.5, 1)]


def test_ranking_picks_the_fastest_fitting_candidate_where_int8_is_needed(long_prompt):
  s = long_prompt
  given = fit.evaluate(s.basis, s.own)
  assert not given.fits  # the config as given does not fit ...
  assert not any(f.fits for c, f in s.evaluated if c.agent_kv_cache == "auto")  # ... nor does any bf16 agent cache
  best = s.ranked[0]
  assert best.figures.fits and best.candidate.agent_kv_cache == "int8"
  assert best.figures.step_s == min(f.step_s for _, f in s.evaluated if f.fits)
  assert best.figures.peak <= 0.9 * 32 * GIB


def test_evaluate_gives_what_plan_nocompile_gives_for_the_overridden_config(long_prompt):
  s = long_prompt
  for r in (s.ranked[0], s.ranked[len(s.ranked) // 2], s.ranked[-1]):
    res = planner.plan(fit.apply(s.config, r.candidate), CHIPS, "v6e", compile_program=False, log=None)
    assert res["analytic"]["step_serial_s"] == pytest.approx(r.figures.step_s, rel=1e-12)
    assert res["memory"]["peak"] == r.figures.peak
    assert res["fits"] == r.figures.fits
    assert res["components"] == dict(r.figures.components)
    assert res["config"]["mesh"] == {"data": 1, "fsdp": r.candidate.fsdp, "tensor": r.candidate.tensor}


# ---- confirmation by the (fake) compiler -----------------------------------------------------------------------------


class FakeCompiler:
  """planner.plan's result for a config: fits unless the config's knobs are one of `rejected`."""

  def __init__(self, rejected=()):
    self.rejected, self.seen = set(rejected), []

  def __call__(self, config):
    knobs = fit.given(config, CHIPS)
    self.seen.append(knobs)
    fits = knobs not in self.rejected
    peak = int((20 if fits else 31) * GIB)
    components = {"parameters": 1 * GIB, "optimizer": 2 * GIB, "temporaries": peak - 3 * GIB}
    return {"fits": fits, "memory": {"peak": peak}, "utilisation": peak / (32 * GIB), "components": components}


def test_confirm_drops_a_candidate_the_compiler_rejects_and_takes_the_next(long_prompt):
  s = long_prompt
  first, second = s.ranked[0].candidate, s.ranked[1].candidate
  compiler = FakeCompiler(rejected=[first])
  checked = fit.confirm(s.ranked, s.config, compiler, 3, log=None)
  assert compiler.seen == [first, second]  # stops at the first that fits
  assert [(c.rank, c.fits) for c in checked] == [(0, False), (1, True)]
  assert checked[1].peak == 20 * GIB
  assert fit.confirm(s.ranked, s.config, compiler, 0, log=None) == []
  with pytest.raises(ValueError, match="fit_confirm must be an integer >= 0"):
    fit.confirm(s.ranked, s.config, compiler, -1, log=None)


def test_search_reports_the_confirmed_fallback_and_its_override_line(long_prompt):
  s, config = long_prompt, long_prompt.config
  compiler = FakeCompiler(rejected=[s.ranked[0].candidate])
  lines = []
  r = fit.search(config, CHIPS, "v6e", confirm_n=2, compile_fn=compiler, log=lines.append)
  assert r["best_compiled"] and r["best"]["rank"] == 2
  assert r["best"]["knobs"] == dataclasses.asdict(s.ranked[1].candidate)
  assert [c["fits"] for c in r["confirmed"]] == [False, True]
  assert r["ranked"][0]["knobs"] == dataclasses.asdict(s.ranked[0].candidate) and len(r["ranked"]) == fit.KEEP
  assert r["candidates"] == len(s.ranked) and r["fitting_analytic"] == sum(x.figures.fits for x in s.ranked)
  report = lines[-1]
  assert "best: #2" in report and "compiled peak 20.00 GiB" in report
  assert report.rstrip().endswith(r["best"]["override_line"])
  json.dumps(r)  # what --json writes


def test_search_says_none_fits_and_names_the_biggest_component(long_prompt):
  s, config = long_prompt, long_prompt.config
  compiler = FakeCompiler(rejected=[x.candidate for x in s.ranked[:2]])
  lines = []
  r = fit.search(config, CHIPS, "v6e", confirm_n=2, compile_fn=compiler, log=lines.append)
  assert r["best"] is None and r["none_fits"]["component"] == "temporaries"
  assert r["none_fits"]["bytes"] == 28 * GIB and r["none_fits"]["judged"] == "by the compiler"
  assert "no candidate fits (the 2 compiled)" in lines[-1] and "temporaries (28.00 GiB)" in lines[-1]


def test_search_names_the_biggest_component_when_nothing_fits_the_analytic_model():
  config = _v6e8(agent_prompt_len=64000)
  lines = []
  r = fit.search(config, CHIPS, "v6e", confirm_n=2, compile_fn=FakeCompiler(), log=lines.append)
  assert r["fitting_analytic"] == 0 and r["confirmed"] == [] and r["best"] is None
  assert r["none_fits"]["judged"] == "by the analytic model"
  assert r["none_fits"]["component"] == max(r["ranked"][0]["components"].items(), key=lambda kv: kv[1])[0]
  assert "no candidate fits (analytic)" in lines[-1]


def test_confirm_counts_a_compile_refused_for_memory_as_not_fitting(long_prompt):
  s = long_prompt
  first = s.ranked[0].candidate
  fits = FakeCompiler()

  def compiler(config):
    if fit.given(config, CHIPS) == first:
      raise RuntimeError("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm.")
    return fits(config)

  checked = fit.confirm(s.ranked, s.config, compiler, 2, log=None)
  assert [(c.rank, c.fits, c.components == {}) for c in checked] == [(0, False, True), (1, True, False)]
  assert checked[0].note.startswith("RESOURCE_EXHAUSTED")
  lines = []
  r = fit.search(s.config, CHIPS, "v6e", confirm_n=2, compile_fn=compiler, log=lines.append)
  assert r["best"]["rank"] == 2 and "compiled #1: the compiler refused it: RESOURCE_EXHAUSTED" in lines[-1]

  def broken(config):
    raise RuntimeError("INTERNAL: something else")

  with pytest.raises(RuntimeError, match="something else"):  # only a want of memory is a verdict
    fit.confirm(s.ranked, s.config, broken, 2, log=None)


# ---- the override line -----------------------------------------------------------------------------------------------


def _parse(argv):
  argv = ["plan", *argv]
  fv = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, "", lock_config=True, flag_values=fv, sys_argv=argv)
  fv(argv)
  return fv.config


def test_override_line_round_trips_through_the_config_flags(long_prompt):
  s = long_prompt
  base = ["--config=configs/qwen2_5_7b.py:v6e-8", "--config.agent.sampling.kv_cache=auto"]
  base.append(f"--config.domain.agent_prompt_len={LONG_PROMPT}")
  picks = [s.ranked[i] for i in (0, 1, 2, len(s.ranked) // 3, len(s.ranked) - 1)]
  cwd = os.getcwd()
  os.chdir(PROJECT_ROOT)
  try:
    for r in picks:
      line = fit.override_line(fit.overrides(s.config, r.candidate))
      assert line  # each changes something: the config as given does not fit
      assert fit.given(_parse(base + line.split()), CHIPS) == r.candidate
  finally:
    os.chdir(cwd)
  assert fit.overrides(s.config, s.own) == {}
  assert fit.override_line({"mesh.fsdp": 4, "agent.sampling.kv_cache": "int8"}) == (
    "--config.mesh.fsdp=4 --config.agent.sampling.kv_cache=int8"
  )


# ---- bad inputs ------------------------------------------------------------------------------------------------------


def test_bad_inputs_give_clear_errors():
  config = _v6e8()
  with pytest.raises(ValueError, match="fit_confirm must be an integer >= 0"):
    fit.search(config, CHIPS, "v6e", confirm_n=-1, log=None)
  with pytest.raises(ValueError, match="no valid setting of the memory knobs for 3 chips"):
    fit.search(_with(config, lambda c: setattr(c.mesh, "fsdp", -1)), 3, "v6e", confirm_n=0, log=None)
  with pytest.raises(ValueError, match="searches remat by policy name"):
    fit.given(_with(config, lambda c: setattr(c.agent.model, "remat", True)), CHIPS)
  # a knob the config lacks reads as the settings tree's one default
  assert fit.given(_with(config, lambda c: c.env.sampling.__delattr__("kv_cache")), CHIPS).env_kv_cache == "auto"


def _with(config, change):
  c = config.copy_and_resolve_references()
  with c.unlocked(), c.ignore_type():
    change(c)
  return c


# ---- the command -----------------------------------------------------------------------------------------------------


def _run_plan(*args):
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
  cmd = [sys.executable, "-m", "genenv_jax.plan", *args]
  return subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=240)


def test_plan_fit_command_prints_the_best_override_line_and_writes_the_ranking(tmp_path):
  out = tmp_path / "fit.json"
  proc = _run_plan("--config=configs/qwen2_5_7b.py:v6e-8", "--fit", "--fit_confirm=0", f"--json={out}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  r = json.loads(out.read_text())
  assert r["best"]["rank"] == 1 and not r["best_compiled"] and r["confirmed"] == []
  assert proc.stdout.rstrip().splitlines()[-1].strip() == r["best"]["override_line"]
  assert "not compiled: --fit_confirm=0" in proc.stdout
  bad = _run_plan("--config=configs/qwen2_5_7b.py:v6e-8", "--fit", "--layers=2,4")
  assert bad.returncode == 2 and "--fit compiles several candidates whole" in bad.stderr
