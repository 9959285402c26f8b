"""The kill -9 script's pieces (the full loop is a script: python -m genenv_jax.scripts.kill_resume --kills 20)."""

import pytest

from genenv_jax.scripts import kill_resume


def test_phase_of_reads_the_furthest_phase_from_the_output():
  assert kill_resume.phase_of("") == "start-up"
  assert kill_resume.phase_of("held-out accuracy before the warm start: 0.1\nwarm start agent: 5/20") == "warm start"
  assert kill_resume.phase_of("warm start env: 20/20 loss 1.0\nstep 2/6 (33%)") == "steps or a checkpoint write"
  assert kill_resume.phase_of("step 6/6\nfinished at step 6 in 30 s") == "done"


def test_arguments_are_checked():
  with pytest.raises(SystemExit):
    kill_resume.main(["--workdir", "/tmp/x", "--bogus"])
  with pytest.raises(SystemExit):
    kill_resume.main(["--workdir", "/tmp/x", "--kills", "-1"])
