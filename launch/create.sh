#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Creates a TPU VM slice: a plain TPU VM, or with --queued a queued resource (waits until it is ACTIVE).
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=tpu.sh
source "${LAUNCH_DIR}/tpu.sh"

usage() {
  cat <<'TEXT'
usage: launch/create.sh --name=NAME --zone=ZONE --accelerator-type=TYPE [--project=PROJECT]
                        [--runtime-version=VERSION] [--spot] [--queued [--valid-until-duration=6h]]
                        [--workers=N] [--poll-secs=30] [--dry-run]

  --accelerator-type  v2-8 ... v3-2048, v4-8 ... v4-8192, v5p-8 ... v5p-12288 (TensorCores),
                      v5litepod-1 ... v5litepod-256, v6e-1 ... v6e-256 (chips)
  --runtime-version   TPU software version; default per generation (v5p: v2-alpha-tpuv5,
                      v5litepod: v2-alpha-tpuv5-lite, v6e: v2-alpha-tpuv6e, v2-v4: tpu-ubuntu2204-base)
  --spot              Spot capacity (cheaper, preemptible; use launch/restart.sh)
  --queued            request through a queued resource named NAME whose node is NAME
  --workers           the number of hosts you expect; an error if TYPE has another number
  --dry-run           print the gcloud commands and run nothing (also DRY_RUN=1)
TEXT
}

parse_args "name zone project accelerator-type runtime-version valid-until-duration workers poll-secs" \
  "spot queued" "$@"
((${#CMD[@]} == 0)) || die "create.sh takes no command after --"
validate_target
validate_slice
validate_create_opts
note "${OPT_ACCELERATOR_TYPE}: ${TPU_WORKERS} worker(s), runtime ${RUNTIME_VERSION}"
tpu_create
if is_queued; then
  tpu_wait_ready || die "queued resource ${OPT_NAME} is ${SLICE_STATE}, not ACTIVE"
fi
