"""Every script of genenv_jax/scripts is a command like the others (genenv_jax.cli): its flags are absl flags spelled
with underscores, defined in `_define_flags`, and a user error is one `error:` line with exit status 2."""

import importlib
import os
import subprocess
import sys

import pytest
from absl import flags
from conftest import PROJECT_ROOT

from genenv_jax import cli

SCRIPTS = [
  "bfcl_agreement",
  "env_tracking",
  "env_validity",
  "fuzz_scorers",
  "kill_resume",
  "numerics_digest",
  "replay_alfworld",
  "step_memory",
  "task_rate_spread",
  "train_tokenizer",
]


def test_every_script_is_listed():
  names = {p.stem for p in (PROJECT_ROOT / "genenv_jax" / "scripts").glob("*.py")} - {"__init__"}
  assert names == set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_defines_underscored_flags_and_an_unknown_flag_is_one_error_line(name, capsys):
  module = importlib.import_module(f"genenv_jax.scripts.{name}")
  assert "argparse" not in vars(module)
  defined = flags.FlagValues()
  module._define_flags(defined)
  assert list(defined), name
  assert [n for n in defined if "-" in n] == []
  assert all(defined[n].help and len(defined[n].help) > 10 for n in defined), name
  assert (
    not set(defined)
    & {"per_level", "mid_size", "source_edits", "vocab_size", "kills", "shuffle_operands"}
    & set(flags.FLAGS)
  )  # importing a script defines nothing in absl's global registry
  assert cli.call(module, ["--bogus"]) == 2
  err = capsys.readouterr().err
  assert err == f"genenv_jax.scripts.{name}: error: Unknown command line flag 'bogus'\nPass --help to see the flags.\n"


def test_a_script_runs_as_a_program_through_cli_run():
  """`python -m` goes through cli.run: --help lists the underscored flags (absl's --help exits 1); kill_resume's
  --config.* overrides skip its own parsing (cli's pass_through) and any other extra argument is one `error:` line."""
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  argv = [sys.executable, "-m", "genenv_jax.scripts.kill_resume"]
  kwargs = dict(cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120)
  proc = subprocess.run([*argv, "--help"], **kwargs)
  assert "--kills:" in proc.stdout and "--workdir:" in proc.stdout, proc.stderr
  proc = subprocess.run([*argv, "--workdir=/nonexistent/kills", "--config.total_steps=4", "stray"], **kwargs)
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr == (
    "genenv_jax.scripts.kill_resume: error: extra arguments must be --config.KEY=VALUE overrides, got ['stray']\n"
  )
