#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Installs genenv_jax on every worker of the slice (same steps on all of them, in parallel).
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=tpu.sh
source "${LAUNCH_DIR}/tpu.sh"

usage() {
  cat <<'TEXT'
usage: launch/install.sh --name=NAME --zone=ZONE [--project=PROJECT]
                         [--git-url=URL [--git-ref=REF]] [--dest=genenv_jax] [--venv=genenv_venv] [--dry-run]

Without --git-url the local checkout (git-tracked and untracked, non-ignored files) is packed with tar and copied to
every worker with `gcloud compute tpus tpu-vm scp --worker=all`; with it, every worker clones URL at REF.
Then each worker makes a Python 3.11 virtual environment (~/VENV, via uv) and installs requirements.txt,
jax[tpu]==0.10.2 (libtpu from the jax-releases index), gcsfs, and the project (editable, ~/DEST).
TEXT
}

parse_args "name zone project git-url git-ref dest venv" "" "$@"
((${#CMD[@]} == 0)) || die "install.sh takes no command after --"
validate_target
tpu_install
