#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Copies each worker's log and status of one run back here, or shows their last lines.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=tpu.sh
source "${LAUNCH_DIR}/tpu.sh"

usage() {
  cat <<'TEXT'
usage: launch/logs.sh --name=NAME --zone=ZONE --run-id=ID (--accelerator-type=TYPE | --workers=N)
                      [--project=PROJECT] [--log-root=genenv_logs] [--out=logs] [--tail=LINES] [--dry-run]

Copies ~/LOG_ROOT/ID/worker-I.log and worker-I.status from worker I (for every I) into OUT/ID/.
With --tail, prints the last LINES lines of every worker's log instead (through ssh --worker=all).
TEXT
}

parse_args "name zone project run-id log-root accelerator-type workers out tail" "" "$@"
((${#CMD[@]} == 0)) || die "logs.sh takes no command after --"
validate_target
resolve_workers
require_opt run-id "the run id that launch/run.sh or launch/restart.sh printed"
validate_run_id
resolve_remote_dirs
remote_dir="${OPT_LOG_ROOT}/${OPT_RUN_ID}"

if [[ -n "${OPT_TAIL:-}" ]]; then
  [[ "${OPT_TAIL}" =~ ^[1-9][0-9]*$ ]] || die "bad --tail '${OPT_TAIL}': expected a number of lines"
  tpu_ssh_all "tail -n ${OPT_TAIL} ${REMOTE_LOG_ROOT}/${OPT_RUN_ID}/worker-*.log"
  exit 0
fi

out="${OPT_OUT:-logs}/${OPT_RUN_ID}"
run_cmd mkdir -p "${out}"
for ((i = 0; i < TPU_WORKERS; i++)); do
  run_cmd "${GCLOUD}" compute tpus tpu-vm scp "${OPT_NAME}:${remote_dir}/worker-${i}.*" "${out}/" "${LOC_FLAGS[@]}" \
    "--worker=${i}"
done
