"""The kill -9 script's pieces (the full loop is a script: python -m genenv_jax.scripts.kill_resume --kills 20)."""

from genenv_jax import cli
from genenv_jax.scripts import kill_resume


def test_phase_of_reads_the_furthest_phase_from_the_output():
  assert kill_resume.phase_of("") == "start-up"
  assert kill_resume.phase_of("held-out accuracy before the warm start: 0.1\nwarm start agent: 5/20") == "warm start"
  assert kill_resume.phase_of("warm start env: 20/20 loss 1.0\nstep 2/6 (33%)") == "steps or a checkpoint write"
  assert kill_resume.phase_of("step 6/6\nfinished at step 6 in 30 s") == "done"


def test_arguments_are_checked(capsys):
  """A bad flag is one `error:` line and exit status 2, before any run starts; --config.KEY=VALUE overrides reach main
  unparsed (they go on to genenv_jax.main), other extra arguments do not."""
  assert cli.call(kill_resume, ["--workdir", "/tmp/x", "--bogus"]) == 2
  assert "error: Unknown command line flag 'bogus'" in capsys.readouterr().err
  assert cli.call(kill_resume, ["--workdir", "/tmp/x", "--kills", "-1"]) == 2
  assert "error: flag --kills=-1" in capsys.readouterr().err
  assert cli.call(kill_resume, ["--workdir", "/tmp/x", "--config.total_steps=4", "stray"]) == 2
  assert "error: extra arguments must be --config.KEY=VALUE overrides, got ['stray']" in capsys.readouterr().err


def test_config_overrides_reach_the_runs(monkeypatch):
  seen = []
  monkeypatch.setattr(kill_resume, "run", lambda workdir, extra, kill_after: seen.append(list(extra)) or (1, "failed"))
  assert cli.call(kill_resume, ["--workdir", "/nonexistent/kills", "--config.total_steps=4", "--kills=0"]) == 1
  assert seen == [["--config.total_steps=4"]]
