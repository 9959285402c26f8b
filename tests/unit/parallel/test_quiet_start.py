"""A quiet start (genenv_jax.parallel.quiet_start): JAX skips the TPU platform where no TPU can be meant, and only
there, so libtpu prints nothing on a CPU run and still says why where a TPU is expected."""

import subprocess
import sys

from genenv_jax.parallel import quiet_start as qs


def test_no_tpu_expected_skips_the_tpu_platform(monkeypatch):
  monkeypatch.setattr(qs, "tpu_expected", lambda environ: False)
  monkeypatch.setattr(qs, "platforms_without_tpu", lambda: "cpu")
  monkeypatch.setattr(qs.sys, "modules", {k: v for k, v in sys.modules.items() if k != "jax"})
  environ = {}
  assert qs.quiet_start(environ) == "cpu" and environ["JAX_PLATFORMS"] == "cpu"


def test_a_users_choice_or_an_expected_tpu_is_left_alone(monkeypatch):
  environ = {"JAX_PLATFORMS": "tpu"}
  assert qs.quiet_start(environ) is None and environ == {"JAX_PLATFORMS": "tpu"}
  environ = {"TPU_WORKER_HOSTNAMES": "10.0.0.2"}  # a TPU VM: libtpu's messages must show
  assert qs.tpu_expected(environ)
  assert qs.quiet_start(environ) is None and "JAX_PLATFORMS" not in environ


def test_a_command_starts_jax_on_this_hosts_platforms_only():
  code = (
    "import os, sys; from genenv_jax.parallel.quiet_start import quiet_start, tpu_expected;"
    "quiet_start(); import jax; jax.devices(); print(os.environ.get('JAX_PLATFORMS'), tpu_expected())"
  )
  env = {k: v for k, v in __import__("os").environ.items() if k != "JAX_PLATFORMS"}
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
  platforms, expected = proc.stdout.split()
  if expected == "False":
    assert platforms in ("cpu", "cuda,cpu") and "TPU_WORKER_HOSTNAMES" not in proc.stderr
