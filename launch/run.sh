#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Runs the same command on every worker of the slice, each worker keeping its own log.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=tpu.sh
source "${LAUNCH_DIR}/tpu.sh"

usage() {
  cat <<'TEXT'
usage: launch/run.sh --name=NAME --zone=ZONE [--project=PROJECT] [--run-id=ID] [--log-root=genenv_logs]
                     [--dest=genenv_jax] [--venv=genenv_venv] [--dry-run] -- COMMAND ...

Runs COMMAND in ~/DEST on all workers (`gcloud compute tpus tpu-vm ssh NAME --worker=all`) through
launch/worker.sh: worker N writes ~/LOG_ROOT/ID/worker-N.log and worker-N.status (fetch them with
launch/logs.sh). Exits non-zero if any worker's command failed or was stopped by a maintenance or
preemption notice (after its checkpoint). Example:

  launch/run.sh --name=genenv-v5p-32 --zone=us-east5-a -- python -m genenv_jax.main \
      --config=configs/qwen2_5_7b.py --workdir=gs://BUCKET/run --config.distributed=True
TEXT
}

parse_args "name zone project run-id log-root dest venv" "" "$@"
validate_target
require_cmd
OPT_RUN_ID="${OPT_RUN_ID:-$(default_run_id)}"
validate_run_id
note "run id ${OPT_RUN_ID}"
tpu_run
