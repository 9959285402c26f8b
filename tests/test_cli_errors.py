"""User errors on the command line: one `error:` line and exit status 2, no traceback unless --verbosity asks."""

import os
import subprocess
import sys

import pytest
from conftest import PROJECT_ROOT

from genenv_jax import cli


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
  ],
)
def test_a_user_error_is_one_line_and_exit_2(argv, message):
  proc = run(*argv)
  assert proc.returncode == 2, proc.stderr
  assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
  assert proc.stderr.startswith(f"{argv[0]}: error: ")


def test_verbosity_asks_for_the_traceback():
  proc = run("genenv_jax.main", *SMOKE, "--config.nonexistent=1", "--verbosity=1")
  assert proc.returncode != 0 and "Traceback" in proc.stderr


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
