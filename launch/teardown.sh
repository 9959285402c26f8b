#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Deletes the slice (with --queued: the queued resource and its node, --force).
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=tpu.sh
source "${LAUNCH_DIR}/tpu.sh"

usage() {
  cat <<'TEXT'
usage: launch/teardown.sh --name=NAME --zone=ZONE [--project=PROJECT] [--queued] [--dry-run]

Deletes the TPU VM slice NAME (or, with --queued, the queued resource NAME and its node) without asking.
The workdir (gs://...) and its checkpoints are untouched.
TEXT
}

parse_args "name zone project" "queued" "$@"
((${#CMD[@]} == 0)) || die "teardown.sh takes no command after --"
validate_target
tpu_delete
