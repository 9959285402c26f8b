#!/usr/bin/env bash
# Runs on each TPU worker (launch/run.sh starts it on all of them through `gcloud ... ssh --worker=all`):
#
#   bash launch/worker.sh --log-dir DIR [--venv DIR] [--poll-secs 5] [--grace-secs 120] -- COMMAND ...
#
# - activates the virtual environment that launch/install.sh made, so `python` is its interpreter;
# - tees COMMAND's output to DIR/worker-N.log (N = this worker's number from the metadata server) and writes
#   DIR/worker-N.status (exit code and reason) when it ends;
# - stops a trainer that an earlier, disconnected launch left running (SIGTERM, so it checkpoints, then waits);
# - polls the metadata server for a host maintenance event (instance/maintenance-event other than NONE) or a Spot
#   preemption (instance/preempted = TRUE) and sends COMMAND one SIGTERM. genenv_jax turns SIGTERM into "checkpoint
#   and exit" (genenv_jax/training/checkpointing.py, PreemptionGuard); with jax.distributed initialised, jaxlib's preemption
#   sync manager takes the signal and every host saves at the same step. JAX's notifier listens to SIGTERM only, so
#   without this relay a maintenance event is seen only if the VM's shutdown delivers SIGTERM in time;
# - forwards SIGTERM, SIGINT and SIGHUP (a hang-up of an ssh session with a terminal) to COMMAND as SIGTERM, so it
#   checkpoints. If the ssh session just drops (no terminal), COMMAND keeps running and logging to the file;
# - exits with COMMAND's status, or 75 (EX_TEMPFAIL) when a notice was relayed and COMMAND exited 0: the run did not
#   finish, and launch/restart.sh starts it again.
#
# For tests, METADATA_URL may point elsewhere (a file:// tree), and TPU_WORKER_ID overrides the worker number.
set -euo pipefail

SCRIPT_NAME="$(basename "$0")"
METADATA_URL="${METADATA_URL:-http://metadata.google.internal/computeMetadata/v1}"
EX_NOTICE=75

die() {
  printf '%s: error: %s\n' "${SCRIPT_NAME}" "$*" >&2
  exit 2
}

log_dir="" venv="" poll_secs=5 grace_secs=120
usage="usage: worker.sh --log-dir DIR [--venv DIR] [--poll-secs N] [--grace-secs N] -- COMMAND ..."
while (($#)); do
  case "$1" in
    --)
      shift
      break
      ;;
    --log-dir | --venv | --poll-secs | --grace-secs)
      (($# >= 2)) || die "$1 needs a value; ${usage}"
      set -- "$1=$2" "${@:3}"
      continue
      ;;
    --log-dir=*) log_dir="${1#*=}" ;;
    --venv=*) venv="${1#*=}" ;;
    --poll-secs=*) poll_secs="${1#*=}" ;;
    --grace-secs=*) grace_secs="${1#*=}" ;;
    *) die "unknown argument '$1'; ${usage}" ;;
  esac
  shift
done
(($#)) || die "no command after --; ${usage}"
[[ -n "${log_dir}" ]] || die "missing --log-dir DIR; ${usage}"
[[ "${poll_secs}" =~ ^[0-9]+$ && "${grace_secs}" =~ ^[0-9]+$ ]] || die "--poll-secs and --grace-secs take whole seconds"

metadata() {
  curl -sf --max-time 2 -H 'Metadata-Flavor: Google' "${METADATA_URL}/$1" 2>/dev/null || true
}

worker_id="${TPU_WORKER_ID:-$(metadata instance/attributes/agent-worker-number)}"
worker_id="${worker_id:-$(hostname)}"
mkdir -p "${log_dir}"
log_file="${log_dir}/worker-${worker_id}.log"
status_file="${log_dir}/worker-${worker_id}.status"
pid_file="$(dirname "${log_dir}")/trainer-${worker_id}.pid"

stamp() {
  date -u +%Y-%m-%dT%H:%M:%SZ
}

# A line for the log file and for gcloud's terminal; the terminal may be gone (ssh dropped), the file stays.
say() {
  local line
  line="$(printf '[%s worker %s] %s' "$(stamp)" "${worker_id}" "$*")"
  printf '%s\n' "${line}" >>"${log_file}"
  printf '%s\n' "${line}" >&2 2>/dev/null || true
}

# If the ssh session drops, writes to it fail (EPIPE) instead of killing this script; tee -p keeps writing the log.
trap '' PIPE

# A trainer from an earlier launch whose ssh session dropped may still run: let it checkpoint and stop first.
if [[ -f "${pid_file}" ]]; then
  old_pid="$(cat "${pid_file}")"
  if [[ "${old_pid}" =~ ^[0-9]+$ ]] && kill -0 "${old_pid}" 2>/dev/null; then
    say "stopping the earlier trainer (pid ${old_pid}) with SIGTERM; waiting up to ${grace_secs}s for its checkpoint"
    kill -TERM "${old_pid}" 2>/dev/null || true
    for ((i = 0; i < grace_secs; i++)); do
      kill -0 "${old_pid}" 2>/dev/null || break
      sleep 1
    done
    if kill -0 "${old_pid}" 2>/dev/null; then
      say "earlier trainer still alive after ${grace_secs}s; SIGKILL"
      kill -KILL "${old_pid}" 2>/dev/null || true
    fi
  fi
fi

if [[ -n "${venv}" ]]; then
  [[ -f "${venv}/bin/activate" ]] || die "no virtual environment at ${venv}: run launch/install.sh first"
  # shellcheck disable=SC1091
  source "${venv}/bin/activate"
fi

say "start: $*"
"$@" > >(tee -p -a "${log_file}") 2>&1 &
child=$!
printf '%s\n' "${child}" >"${pid_file}"

reason=""
signalled=0
relay() {
  reason="$1"
  if ((signalled == 0)); then
    signalled=1
    kill -TERM "${child}" 2>/dev/null || true
    say "${reason}: sent SIGTERM to pid ${child} (checkpoint and exit)"
  fi
}
trap 'relay "worker.sh got SIGTERM"' TERM
trap 'relay "worker.sh got SIGINT"' INT
trap 'relay "worker.sh got SIGHUP (ssh session closed)"' HUP

while kill -0 "${child}" 2>/dev/null; do
  if ((signalled == 0)); then
    event="$(metadata instance/maintenance-event)"
    preempted="$(metadata instance/preempted)"
    if [[ -n "${event}" && "${event}" != "NONE" ]]; then
      relay "maintenance event ${event}"
    elif [[ "${preempted}" == "TRUE" ]]; then
      relay "spot preemption notice"
    fi
  fi
  # `wait` on a background sleep returns at once when a trapped signal arrives.
  sleep "${poll_secs}" &
  wait $! 2>/dev/null || true
done

set +e
wait "${child}"
rc=$?
set -e
rm -f "${pid_file}"
if ((signalled == 1 && rc == 0)); then
  rc=${EX_NOTICE}
fi
printf 'exit=%s reason=%s time=%s\n' "${rc}" "${reason:-none}" "$(stamp)" >"${status_file}"
say "end: exit ${rc}${reason:+ after ${reason}}"
exit "${rc}"
