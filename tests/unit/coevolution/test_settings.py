"""The settings tree (genenv_jax/coevolution/settings.py): it mirrors the config, lists every bad value at once, is
hashable, reads configs saved before a key existed, and is the only place that writes a curriculum default."""

import ast
import dataclasses
import pathlib

import jax
import pytest

from configs.default import VARIANTS, get_config
from genenv_jax.coevolution import settings as st

PACKAGE = pathlib.Path(st.__file__).parents[1]
CONFIGS = PACKAGE.parent / "configs"


def config_values(node, section) -> dict:
  """The config's values of a section's keys (its sampling as the config's sampling keys)."""
  return {k: node[k] for k in st.to_config(section)}


def flat(tree: dict, prefix: str = "") -> dict:
  """{"agent.model.dtype": value, ...}, lists as tuples."""
  out = {}
  for k, v in tree.items():
    if isinstance(v, dict):
      out.update(flat(v, f"{prefix}{k}."))
    else:
      out[prefix + k] = tuple(v) if isinstance(v, list) else v
  return out


def shipped_configs():
  from configs import default, qwen2_5_7b, tools

  yield from (default.get_config(v) for v in VARIANTS)
  yield from (tools.get_config(v) for v in tools.LENGTHS)
  yield from (qwen2_5_7b.get_config(v) for v in ("", *qwen2_5_7b.SLICES, "api_bank"))


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_tree_mirrors_every_variant_of_the_default_config(variant):
  config = get_config(variant)
  tree, given = flat(st.to_config(st.from_config(config)).to_dict()), flat(config.to_dict())
  assert {k: tree[k] for k in given} == given  # every value the config writes; the tree's defaults for the rest
  assert set(tree) - set(given) <= {f"{who}.model.{k}" for who in ("agent", "env") for k in ("arch", "vocab_size")} | {
    f"{who}.model.{k}" for who in ("agent", "env") for k in ("qkv_bias", "attention")
  } | {"slice"}


def test_every_key_of_every_shipped_config_is_declared_in_the_tree():
  """No setting is named outside the tree: a shipped config's keys are the tree's, except a benchmark domain's own
  (benchmarks.registry: its TEXT_SETTINGS and its family's options, which the family checks)."""
  from genenv_jax.benchmarks.registry import FAMILY_OPTIONS, TEXT_SETTINGS

  declared = set(flat(st.to_config(st.Settings()).to_dict()))
  domain_own = {f"domain.{k}" for k in TEXT_SETTINGS} | {f"domain.{k}" for o in FAMILY_OPTIONS.values() for k in o}
  for config in shipped_configs():
    assert set(flat(config.to_dict())) - declared <= domain_own


def test_importing_the_settings_loads_no_step_or_rl_module():
  """The settings are the lower layer: the choices they share with the rl maths live in genenv_jax.choices, below
  both, so a fresh process that imports them has loaded no genenv_jax.rl module and no step."""
  import subprocess
  import sys

  code = "import sys, genenv_jax.coevolution.settings; print('\\n'.join(sorted(sys.modules)))"
  loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
  assert "genenv_jax.coevolution.settings" in loaded and "genenv_jax.choices" in loaded
  banned = ("genenv_jax.rl", "genenv_jax.coevolution.step")
  assert [m for m in loaded if m in banned or m.startswith("genenv_jax.rl.") or "step" in m] == []


def test_every_bad_value_is_listed_at_once_with_its_key():
  config = get_config()
  config.env.curriculum.alpha = 1.5
  config.agent.optimizer.lr = -1.0
  config.pools.env_admits = "all"
  config.agent.grpo.group_size = 1
  with pytest.raises(st.SettingsError) as e:
    st.from_config(config)
  lines = str(e.value).splitlines()[1:]
  assert [line.split(" = ")[0].strip() for line in lines] == [
    "agent.grpo.group_size",
    "agent.optimizer.lr",
    "env.curriculum.alpha",
    "pools.env_admits",
  ]
  assert "pools.env_admits = 'all': must be one of 'band', 'valid'" in str(e.value)


def test_constraints_within_a_section_and_across_the_tree():
  with pytest.raises(st.SettingsError, match=r"alpha ± k_min = 0.95 ± 0.1: the band \[0.85, 1.05\] must lie inside"):
    st.CurriculumSettings(alpha=0.95)
  config = get_config("grpo")
  config.pools.num_replay = 0
  assert st.problems(config) == [
    "pools.num_replay = 0: mode 'grpo' trains only on replayed tasks, so it needs pools.num_replay >= 1"
  ]


def test_settings_are_hashable_static_arguments_of_a_jit():
  a, b = st.from_config(get_config()), st.from_config(get_config())
  assert a == b and hash(a) == hash(b) and a != st.from_config(get_config("pg"))
  band_width = jax.jit(lambda x, c: x * (c.band[1] - c.band[0]), static_argnums=1)
  assert float(band_width(1.0, a.env.curriculum)) == pytest.approx(0.2)


def test_a_key_absent_from_an_older_config_reads_as_its_one_default():
  config = get_config()
  del config.pools["env_admits"]  # configs written before it existed
  del config.env.optimizer["lr"]
  s = st.from_config(config)
  assert s.pools.env_admits == st.PoolSettings().env_admits == "band"
  assert s.env.optimizer.lr == st.EnvSettings().optimizer.lr == 5e-7  # the env section's own default, not AdamW's


def test_sampling_takes_the_domain_lengths_and_the_tokenizer_ids():
  from coevolution_configs import arithmetic_domain

  from genenv_jax.models.tokenizer import load_tokenizer

  domain, tokenizer = arithmetic_domain(), load_tokenizer()
  s = st.from_config(get_config(), domain, tokenizer)
  assert s.agent.sampling.max_new_tokens == domain.agent_answer_len
  assert s.env.sampling.max_new_tokens == domain.env_output_len
  assert s.env.sampling.eos_ids == tuple(tokenizer.eos_ids) and s.agent.sampling.vocab_limit == tokenizer.vocab_size


# calls whose `alpha` is another library's (matplotlib's opacity, optax's final learning-rate fraction)
OTHER_ALPHAS = {"fill_between", "cosine_decay_schedule"}
# files that may default such a name, and why
ALLOWED = {
  "genenv_jax/tasks/text_domain.py": "the text domains' own success threshold (1.0, a final pass); configs set it",
}
CURRICULUM_NAMES = {"alpha", "beta", "k_min", "rwr_lambda", "lam", "success_threshold", "threshold", "max_kl"}


def _callee(call: ast.Call) -> str:
  return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def literal_defaults(path: pathlib.Path) -> list[str]:
  """Numbers written for a curriculum setting: keyword arguments, parameter defaults, dict entries, `.get(key, n)`
  fallbacks and constants named for one (DEFAULT_ALPHA = 0.5)."""
  number = lambda node: isinstance(node, ast.Constant) and isinstance(node.value, (int, float))  # noqa: E731
  named = lambda name: name.lower() in CURRICULUM_NAMES or name.lower().removeprefix("default_") in CURRICULUM_NAMES  # noqa: E731
  found = []
  for node in ast.walk(ast.parse(path.read_text())):
    where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"
    if isinstance(node, ast.Call) and _callee(node) not in OTHER_ALPHAS:
      found += [f"{where} {k.arg}={k.value.value}" for k in node.keywords if k.arg and named(k.arg) and number(k.value)]
    if isinstance(node, (ast.FunctionDef, ast.Lambda)):
      args = node.args
      positional = args.posonlyargs + args.args
      pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
      pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
      found += [f"{where} def {a.arg}={d.value}" for a, d in pairs if named(a.arg) and number(d)]
    elif isinstance(node, ast.Dict):
      for k, v in zip(node.keys, node.values):
        if isinstance(k, ast.Constant) and isinstance(k.value, str) and named(k.value) and number(v):
          found.append(f"{where} {k.value!r}: {v.value}")
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
      if len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        if named(node.args[0].value) and number(node.args[1]):
          found.append(f"{where} .get({node.args[0].value!r}, {node.args[1].value})")
    elif isinstance(node, ast.Assign) and number(node.value):
      found += [f"{where} {t.id} = {node.value.value}" for t in node.targets if isinstance(t, ast.Name) and named(t.id)]
  return found


def test_the_curriculum_defaults_are_written_only_in_the_settings_tree():
  files = sorted(PACKAGE.rglob("*.py")) + sorted(CONFIGS.glob("*.py"))
  found = [
    hit
    for path in files
    if path != pathlib.Path(st.__file__) and str(path.relative_to(PACKAGE.parent)) not in ALLOWED
    for hit in literal_defaults(path)
  ]
  assert found == []


def test_the_literal_search_finds_what_it_looks_for(tmp_path):
  planted = PACKAGE / "_planted_for_the_test.py"
  try:
    planted.write_text(
      "DEFAULT_ALPHA = 0.5\n"
      "def f(x, k_min=0.1, *, beta=10.0): return x\n"
      "f(1, threshold=0.5)\n"
      "c = {'rwr_lambda': 1.0}\n"
      "c.get('alpha', 0.5)\n"
    )
    assert len(literal_defaults(planted)) == 6
  finally:
    planted.unlink()
  assert dataclasses.fields(st.CurriculumSettings)  # the tree itself declares them


# files whose `.get(key, default)` reads something other than a run's config: a checkpoint's config.json, a tool
# call's arguments, a saved summary.json
OTHER_MAPPINGS = {"genenv_jax/models/hf.py", "genenv_jax/scripts/bfcl_agreement.py", "genenv_jax/sweep.py"}


def test_no_setting_is_defaulted_outside_the_tree():
  """A `.get("key", default)` on a config section re-declares a setting's default (plan's logprob_chunk once fell back
  to 0 where the run used 512): every reader takes the tree's value instead."""
  import re

  keys = {k.rsplit(".", 1)[-1] for k in flat(st.to_config(st.Settings()).to_dict())}
  found = []
  for path in sorted(PACKAGE.rglob("*.py")):
    name = str(path.relative_to(PACKAGE.parent))
    if path == pathlib.Path(st.__file__) or name in OTHER_MAPPINGS:
      continue
    for i, line in enumerate(path.read_text().splitlines(), 1):
      found += [f"{name}:{i}" for m in re.finditer(r'\.get\(\s*"([a-z_]+)"\s*,', line) if m.group(1) in keys]
  assert found == []


def test_the_env_losses_borrowing_of_the_agents_clip_and_kl_estimator_is_declared():
  """The env's losses use agent.grpo's clip range and KL estimator (EnvSettings says why): the tree names them."""
  config = get_config()
  config.agent.grpo.clip_low, config.agent.grpo.kl_estimator = 0.1, "k1"
  s = st.from_config(config)
  assert s.env_loss == (0.1, s.agent.grpo.clip_high, "k1")
  assert "clip_low" not in {f.name for f in dataclasses.fields(st.EnvSettings)}
  assert all(name in st.EnvSettings.__doc__ for name in ("agent.grpo.clip_low", "clip_high", "kl_estimator"))
