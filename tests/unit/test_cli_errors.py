"""User errors on the command line: one `error:` line and exit status 2, no traceback unless --verbosity asks."""

import os
import subprocess
import sys

import pytest
from absl import flags
from conftest import PROJECT_ROOT

from genenv_jax import cli, compare, evaluate, export, main, plan, sweep
from genenv_jax.bench import attention, compile_depth, device, sampler, sgemm, step, torch_side
from genenv_jax.data import __main__ as data_cli


def run(*argv, timeout=120):
  return subprocess.run(
    [sys.executable, "-m", *argv],
    cwd=PROJECT_ROOT,
    env={**os.environ, "JAX_PLATFORMS": "cpu"},
    capture_output=True,
    text=True,
    timeout=timeout,
  )


SMOKE = ["--config=configs/default.py:smoke", "--workdir=/nonexistent/never-created"]


@pytest.mark.parametrize(
  "argv,message",
  [
    (["genenv_jax.main", *SMOKE, "--config.nonexistent=1"], "no config key 'nonexistent'"),
    (["genenv_jax.main", *SMOKE, "--config.agent.optimizer.lr=abc"], "could not convert string to float: 'abc'"),
    (["genenv_jax.main", *SMOKE, "--bogus=1"], "Unknown command line flag 'bogus'"),
    (["genenv_jax.main", "--config=configs/nothere.py", "--workdir=/tmp/x"], "the --config file did not load"),
    (["genenv_jax.plan", "--config=configs/default.py:nosuch"], "unknown variant 'nosuch' of configs/default.py"),
    (["genenv_jax.main", *SMOKE, "--config.total_steps=0"], "total_steps = 0: must be an integer >= 1"),
    (["genenv_jax.evaluate", "--benchmark=bamboogle", "--bogus"], "Unknown command line flag 'bogus'"),
    (["genenv_jax.evaluate", "--benchmark=nope", "--agent=oracle"], "unknown benchmark 'nope'"),
    (["genenv_jax.evaluate", "--agent=oracle"], "Flag --benchmark must have a value"),
    (
      ["genenv_jax.evaluate", "--benchmark=bamboogle", "--agent=oracle", "--data_dir=/nonexistent/data"],
      "Bamboogle data (bamboogle) is missing",
    ),
    (["genenv_jax.evaluate", "--benchmark=bamboogle", "--agent=oracle", "stray"], "unexpected arguments ['stray']"),
    (
      ["genenv_jax.export", "--workdir=/nonexistent/run", "--out=/nonexistent/hf", "--bogus"],
      "Unknown command line flag 'bogus'",
    ),
    (
      ["genenv_jax.export", "--workdir=/nonexistent/run", "--out=/nonexistent/hf"],
      "--workdir /nonexistent/run is not a training run",
    ),
    (
      ["genenv_jax.export", "--workdir=/nonexistent/run", "--out=/nonexistent/hf", "--role=critic"],
      "flag --role=critic: value should be one of <agent|env>",
    ),
    (["genenv_jax.bench.device", "--bogus"], "Unknown command line flag 'bogus'"),
    (["genenv_jax.bench.device", "--chip=nosuch"], "unknown chip 'nosuch'"),
    (["genenv_jax.data", "list", "nope"], "unknown dataset 'nope'; the datasets are: api_bank"),
  ],
)
def test_a_user_error_is_one_line_and_exit_2(argv, message):
  proc = run(*argv)
  assert proc.returncode == 2, proc.stderr
  assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
  assert proc.stderr.startswith(f"{argv[0]}: error: ")


@pytest.mark.parametrize(
  "argv",
  [
    ["genenv_jax.main", *SMOKE, "--config.nonexistent=1"],
    ["genenv_jax.evaluate", "--benchmark=nope", "--agent=oracle"],
    ["genenv_jax.export", "--workdir=/nonexistent/run", "--out=/nonexistent/hf"],
  ],
)
def test_verbosity_asks_for_the_traceback(argv):
  proc = run(*argv, "--verbosity=1")
  assert proc.returncode != 0 and "Traceback" in proc.stderr


@pytest.mark.parametrize("module", [evaluate, export, data_cli, device])
def test_help_describes_every_flag(module):
  """`--help` lists each of the command's flags with its help text (absl wraps the text; whitespace is ignored)."""
  defined = flags.FlagValues()
  module._define_flags(defined)
  proc = run(module.__name__, "--help")
  listed = "".join(proc.stdout.split())
  for name in defined:
    flag = defined[name]
    assert flag.help and len(flag.help) > 10, name
    assert f"--{name}:" in proc.stdout or f"--[no]{name}:" in proc.stdout, (name, proc.stdout)
    assert "".join(flag.help.split()) in listed, (name, flag.help)


# those cli.call runs
COMMANDS = [evaluate, export, data_cli, attention, compile_depth, device, sampler, sgemm, step, torch_side]
EVERY_COMMAND = [main, plan, sweep, compare, *COMMANDS]


def test_every_flag_name_has_one_spelling():
  """Every command's flags are spelled with underscores (absl's convention, and the --config.key overrides'), never
  dashes: an option shared by two commands (--fast_compile in plan and bench.step) is one name in both."""
  dashed = {}
  for module in EVERY_COMMAND:
    defined = flags.FlagValues()
    module._define_flags(defined)
    assert list(defined), module.__name__
    dashed.update({f"{module.__name__} --{name}": defined[name].help for name in defined if "-" in name})
  assert dashed == {}


def test_the_commands_flags_stay_out_of_absls_global_registry():
  """Importing every command (as pytest does) defines none of their flags; cli.call defines them on a fresh
  FlagValues each time, so commands with flags of the same name (--workdir, --model, --repeats) run one after the
  other in one process."""
  assert not {"benchmark", "out", "lengths", "tiny", "configs", "data_dir", "warm_start"} & set(flags.FLAGS)
  for module in COMMANDS:
    for _ in range(2):
      assert cli.call(module, ["--bogus"]) == 2
  assert not {"benchmark", "out", "lengths", "tiny", "configs", "data_dir", "warm_start"} & set(flags.FLAGS)


def test_call_reports_user_errors_in_process(capsys):
  assert cli.call(evaluate, ["--benchmark=nope", "--agent=oracle"]) == 2
  assert capsys.readouterr().err == (
    "genenv_jax.evaluate: error: unknown benchmark 'nope'; choose one of: api_bank, bfcl, bamboogle, travelplanner, "
    "alfworld\n"
  )
  assert cli.call(export, ["--workdir=/nonexistent/run"]) == 2  # --out is required
  assert capsys.readouterr().err.startswith("genenv_jax.export: error: flag --out=None: ")
  assert cli.call(device, ["--repeats=0"]) == 2
  assert capsys.readouterr().err == "genenv_jax.bench.device: error: --repeats must be positive, got 0\n"
  with pytest.raises(ValueError, match="unknown benchmark 'nope'"):  # --verbosity: the exception itself
    cli.call(evaluate, ["--benchmark=nope", "--agent=oracle", "--verbosity=1"])


def test_wants_traceback_reads_verbosity_before_parsing():
  assert cli.wants_traceback(["--verbosity=1"]) and cli.wants_traceback(["-v", "2"])
  assert not cli.wants_traceback(["--verbosity=0"]) and not cli.wants_traceback(["--config=x"])
  assert not cli.wants_traceback(["--verbosity=high"])


def test_messages_are_reduced_to_their_reason():
  assert cli.message_of(KeyError("'lr'")) == "lr"
  loaded = OSError(
    "Failed loading config file x\n  Attempted:\n    c.py\n      [Errno 2] No such file or directory: 'c.py'"
  )
  assert cli.message_of(loaded) == "the --config file did not load: [Errno 2] No such file or directory: 'c.py'"
  nested = ValueError("flag --config=c.py:v: Error whilst parsing config file:\n\nTraceback (most recent call last):\n"
                      '  File "c.py", line 1\nValueError: unknown variant')  # fmt: skip
  assert cli.message_of(nested) == "flag --config=c.py:v: Error whilst parsing config file: ValueError: unknown variant"
