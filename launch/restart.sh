#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Keeps a run going through preemptions: checks the slice, recreates and reinstalls it when it was preempted,
# then runs the same command with the same --workdir, so training resumes from the latest checkpoint.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=tpu.sh
source "${LAUNCH_DIR}/tpu.sh"

usage() {
  cat <<'TEXT'
usage: launch/restart.sh --name=NAME --zone=ZONE --accelerator-type=TYPE [--project=PROJECT]
                         [--runtime-version=V] [--spot] [--queued [--valid-until-duration=D]] [--workers=N]
                         [--install] [--git-url=URL [--git-ref=REF]] [--dest=D] [--venv=V]
                         [--run-id=ID] [--log-root=genenv_logs] [--max-restarts=5] [--poll-secs=30]
                         [--dry-run [--dry-run-state=STATE]] -- COMMAND ...

Loop:
  1. read the slice state (gcloud ... describe): READY/ACTIVE -> go on; CREATING, REPAIRING, WAITING_FOR_RESOURCES
     and other transitions -> wait; PREEMPTED, TERMINATED, SUSPENDED, FAILED, ... -> delete and create again;
     absent -> create. A slice that was created or waited on is reinstalled (launch/install.sh steps);
     --install installs on the first pass too.
  2. run COMMAND on all workers (launch/run.sh steps, same --run-id so the per-worker logs continue).
  3. exit 0 when every worker's command exits 0 (gcloud's exit code and each worker's status file);
     otherwise (a preemption dropped the ssh sessions, a maintenance or preemption notice stopped the run after
     its checkpoint, or the command failed) go back to 1, at most --max-restarts times.
COMMAND must name a fixed --workdir (e.g. gs://BUCKET/run): the restart resumes from its latest checkpoint.
--dry-run-state is the state the first describe "returns" in a dry run (e.g. PREEMPTED), to show that path.
TEXT
}

parse_args "name zone project accelerator-type runtime-version valid-until-duration workers poll-secs run-id \
log-root dest venv git-url git-ref max-restarts dry-run-state" "spot queued install" "$@"
validate_target
validate_slice
validate_create_opts
resolve_remote_dirs
require_cmd
[[ -z "${OPT_DRY_RUN_STATE:-}" ]] || is_dry_run || die "--dry-run-state needs --dry-run"
[[ -z "${OPT_DRY_RUN_STATE:-}" || "${OPT_DRY_RUN_STATE}" =~ ^[A-Z_]+$ ]] ||
  die "bad --dry-run-state '${OPT_DRY_RUN_STATE}': expected a state such as READY, PREEMPTED, SUSPENDED, ABSENT"
max_restarts="${OPT_MAX_RESTARTS:-5}"
[[ "${max_restarts}" =~ ^[0-9]+$ ]] || die "bad --max-restarts '${max_restarts}': expected a whole number"
poll="${OPT_POLL_SECS:-30}"
[[ "${poll}" =~ ^[0-9]+$ ]] || die "bad --poll-secs '${poll}': expected whole seconds"
OPT_RUN_ID="${OPT_RUN_ID:-$(default_run_id)}"
validate_run_id
note "run id ${OPT_RUN_ID}; ${OPT_ACCELERATOR_TYPE}: ${TPU_WORKERS} worker(s)"

recreate() {
  if [[ "${SLICE_STATE}" != "ABSENT" ]]; then
    note "slice ${OPT_NAME} is ${SLICE_STATE}: deleting it"
    tpu_delete
  fi
  note "creating slice ${OPT_NAME}"
  tpu_create
  if is_queued; then
    tpu_wait_ready || die "queued resource ${OPT_NAME} is ${SLICE_STATE} after creation"
  fi
  need_install=1
}

# Leaves the slice READY (ACTIVE), and need_install=1 when its workers may have lost the installation.
ensure_slice() {
  tpu_query_state
  case "$(state_class "${SLICE_STATE}")" in
    ready) ;;
    wait)
      note "slice ${OPT_NAME} is ${SLICE_STATE}: waiting"
      tpu_wait_ready || recreate
      need_install=1
      ;;
    absent | lost) recreate ;;
  esac
}

need_install="${OPT_INSTALL:-0}"
attempt=0
while :; do
  ensure_slice
  if ((need_install)); then
    tpu_install
    need_install=0
  fi
  if tpu_run && tpu_all_finished; then
    if is_dry_run; then
      note "dry run: a real run stops here once every worker reports exit=0, else restarts"
    else
      note "the command finished on every worker (run ${OPT_RUN_ID})"
    fi
    exit 0
  fi
  attempt=$((attempt + 1))
  if ((attempt > max_restarts)); then
    die "gave up after ${max_restarts} restart(s); see the worker logs: launch/logs.sh --name=${OPT_NAME} \
--zone=${OPT_ZONE} --workers=${TPU_WORKERS} --run-id=${OPT_RUN_ID}"
  fi
  note "the run stopped (restart ${attempt}/${max_restarts}); checking the slice in ${poll}s"
  sleep "${poll}"
done
