# shellcheck shell=bash
# gcloud operations on one TPU slice (sourced after common.sh, never run). Each function reads the validated OPT_*
# variables and LOC_FLAGS (--zone=..., --project=...) and runs its commands through run_cmd, so every script prints
# the same command lines in a dry run.
#
# A slice is either a plain TPU VM (`gcloud compute tpus tpu-vm create`) or, with --queued, a queued resource of the
# same name whose one node has that name too (`gcloud compute tpus queued-resources create NAME --node-id=NAME`).

is_queued() {
  [[ "${OPT_QUEUED:-0}" == "1" ]]
}

# ---- create, delete, state -------------------------------------------------------------------------------------------

tpu_create() {
  local cmd
  if is_queued; then
    cmd=("${GCLOUD}" compute tpus queued-resources create "${OPT_NAME}" "--node-id=${OPT_NAME}" "${LOC_FLAGS[@]}"
      "--accelerator-type=${OPT_ACCELERATOR_TYPE}" "--runtime-version=${RUNTIME_VERSION}")
  else
    cmd=("${GCLOUD}" compute tpus tpu-vm create "${OPT_NAME}" "${LOC_FLAGS[@]}"
      "--accelerator-type=${OPT_ACCELERATOR_TYPE}" "--version=${RUNTIME_VERSION}")
  fi
  if [[ "${OPT_SPOT:-0}" == "1" ]]; then
    cmd+=(--spot)
  fi
  if [[ -n "${OPT_VALID_UNTIL_DURATION:-}" ]]; then
    cmd+=("--valid-until-duration=${OPT_VALID_UNTIL_DURATION}")
  fi
  run_cmd "${cmd[@]}"
}

# Checks the creation options before anything runs.
validate_create_opts() {
  if [[ -n "${OPT_VALID_UNTIL_DURATION:-}" ]]; then
    is_queued || die "--valid-until-duration applies to queued resources only: add --queued"
    [[ "${OPT_VALID_UNTIL_DURATION}" =~ ^[0-9]+[smhd]$ ]] ||
      die "bad --valid-until-duration '${OPT_VALID_UNTIL_DURATION}': expected a duration such as 30m, 6h or 2d"
  fi
}

tpu_delete() {
  if is_queued; then
    # --force deletes the node first; without it a queued resource with a live node cannot be deleted.
    run_cmd "${GCLOUD}" compute tpus queued-resources delete "${OPT_NAME}" "${LOC_FLAGS[@]}" --force --quiet
  else
    run_cmd "${GCLOUD}" compute tpus tpu-vm delete "${OPT_NAME}" "${LOC_FLAGS[@]}" --quiet
  fi
}

# The healthy state: READY for a TPU VM, ACTIVE for a queued resource.
healthy_state() {
  if is_queued; then
    printf 'ACTIVE'
  else
    printf 'READY'
  fi
}

# Sets SLICE_STATE to the slice's state (queued resources: state.state), ABSENT when gcloud says it does not exist,
# or UNKNOWN when gcloud fails for another reason (network, auth): a reason to wait, never to delete.
tpu_query_state() {
  local cmd out err
  if is_queued; then
    cmd=("${GCLOUD}" compute tpus queued-resources describe "${OPT_NAME}" "${LOC_FLAGS[@]}"
      "--format=value(state.state)")
  else
    cmd=("${GCLOUD}" compute tpus tpu-vm describe "${OPT_NAME}" "${LOC_FLAGS[@]}" "--format=value(state)")
  fi
  if is_dry_run; then
    # --dry-run-state is what the first query "returns"; later ones (after a create) return the healthy state.
    show_cmd "${cmd[@]}"
    SLICE_STATE="$(healthy_state)"
    if ((${DRY_QUERIES:-0} == 0)); then
      SLICE_STATE="${OPT_DRY_RUN_STATE:-${SLICE_STATE}}"
    fi
    DRY_QUERIES=$((${DRY_QUERIES:-0} + 1))
    return 0
  fi
  err="$(mktemp)"
  if out="$("${cmd[@]}" 2>"${err}")"; then
    SLICE_STATE="${out:-UNKNOWN}"
  elif grep -qiE 'NOT_FOUND|not found|was not found' "${err}"; then
    SLICE_STATE="ABSENT"
  else
    note "describe failed: $(tr '\n' ' ' <"${err}")"
    SLICE_STATE="UNKNOWN"
  fi
  rm -f "${err}"
}

# ready | wait | absent | lost (preempted, terminated, suspended, failed, ...: delete and create again).
state_class() {
  case "$1" in
    READY | ACTIVE) printf 'ready' ;;
    CREATING | STARTING | RESTARTING | REPAIRING | STOPPING | UNHIDING | PROVISIONING | WAITING_FOR_RESOURCES | \
      ACCEPTED | DELETING | SUSPENDING | UNKNOWN) printf 'wait' ;;
    ABSENT) printf 'absent' ;;
    *) printf 'lost' ;;
  esac
}

# Polls until the slice is ready (returns 0) or is lost or absent (returns 1). A dry run queries once and treats a
# transitional state as ready.
tpu_wait_ready() {
  local poll="${OPT_POLL_SECS:-30}" class
  while :; do
    tpu_query_state
    class="$(state_class "${SLICE_STATE}")"
    case "${class}" in
      ready) return 0 ;;
      absent | lost) return 1 ;;
    esac
    if is_dry_run; then
      note "dry run: state ${SLICE_STATE}; a real run polls every ${poll}s until $(healthy_state)"
      return 0
    fi
    note "slice ${OPT_NAME} is ${SLICE_STATE}; checking again in ${poll}s"
    sleep "${poll}"
  done
}

# ---- commands on the workers -----------------------------------------------------------------------------------------

# Runs one shell command line on every worker at once (gcloud prints each worker's output prefixed by its number).
tpu_ssh_all() {
  run_cmd "${GCLOUD}" compute tpus tpu-vm ssh "${OPT_NAME}" "${LOC_FLAGS[@]}" --worker=all "--command=$1"
}

# Install locations on the workers (validated; see validate_remote_path).
resolve_remote_dirs() {
  OPT_DEST="${OPT_DEST:-genenv_jax}"
  OPT_VENV="${OPT_VENV:-genenv_venv}"
  OPT_LOG_ROOT="${OPT_LOG_ROOT:-genenv_logs}"
  validate_remote_path dest "${OPT_DEST}"
  validate_remote_path venv "${OPT_VENV}"
  validate_remote_path log-root "${OPT_LOG_ROOT}"
  REMOTE_DEST="$(remote_path "${OPT_DEST}")"
  REMOTE_VENV="$(remote_path "${OPT_VENV}")"
  REMOTE_LOG_ROOT="$(remote_path "${OPT_LOG_ROOT}")"
}

# The files to ship: what git tracks plus untracked files it does not ignore (so local edits travel too), or the
# package's own folders outside a git checkout.
_project_files() {
  local f
  if git -C "${PROJECT_ROOT}" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    while IFS= read -r f; do
      if [[ -f "${PROJECT_ROOT}/${f}" ]]; then
        printf '%s\n' "${f}"
      fi
    done < <(git -C "${PROJECT_ROOT}" ls-files --cached --others --exclude-standard)
  else
    (cd "${PROJECT_ROOT}" && find genenv_jax configs launch pyproject.toml requirements.txt README.md LICENSE \
      -type f ! -path '*/__pycache__/*' 2>/dev/null)
  fi
}

# Installs the project on every worker: a Python 3.11 virtual environment (uv fetches the interpreter where the TPU VM
# image has an older python3), the pinned requirements.txt plus jax[tpu] at the same version with libtpu from
# Google's release index, gcsfs (gs:// workdirs: orbax's epath and the metrics upload go through fsspec), and the
# project itself as an editable install. Source: the local checkout (tar + scp) or, with --git-url, a clone.
tpu_install() {
  resolve_remote_dirs
  # shellcheck disable=SC2088  # the tilde is for the remote shell to expand
  local uv="~/.local/bin/uv" py="${REMOTE_VENV}/bin/python" fetch
  if [[ -n "${OPT_GIT_URL:-}" ]]; then
    local ref="${OPT_GIT_REF:-main}"
    fetch="rm -rf ${REMOTE_DEST} && git clone --quiet $(quote_arg "${OPT_GIT_URL}") ${REMOTE_DEST}"
    fetch="${fetch} && git -C ${REMOTE_DEST} checkout --quiet $(quote_arg "${ref}")"
  else
    [[ -z "${OPT_GIT_REF:-}" ]] || die "--git-ref needs --git-url"
    local archive="${TMPDIR:-/tmp}/genenv_jax-${OPT_NAME}.tar.gz" list
    list="${archive%.tar.gz}.files"
    if ! is_dry_run; then
      _project_files >"${list}"
      [[ -s "${list}" ]] || die "found no project files under ${PROJECT_ROOT}"
    fi
    run_cmd tar -czf "${archive}" -C "${PROJECT_ROOT}" -T "${list}"
    run_cmd "${GCLOUD}" compute tpus tpu-vm scp "${archive}" "${OPT_NAME}:genenv_jax.tar.gz" "${LOC_FLAGS[@]}" \
      --worker=all
    fetch="rm -rf ${REMOTE_DEST}.new && mkdir -p ${REMOTE_DEST}.new"
    fetch="${fetch} && tar -xzf ~/genenv_jax.tar.gz -C ${REMOTE_DEST}.new && rm -rf ${REMOTE_DEST}"
    fetch="${fetch} && mv ${REMOTE_DEST}.new ${REMOTE_DEST}"
  fi
  local steps=(
    "${fetch}"
    "cd ${REMOTE_DEST}"
    "python3 -m pip install --user --quiet uv"
    "{ test -x ${py} || ${uv} venv --python 3.11 ${REMOTE_VENV}; }"
    "${uv} pip install --python ${py} -r requirements.txt $(quote_arg "${JAX_TPU_SPEC}") -f ${LIBTPU_FIND_LINKS} gcsfs"
    "${uv} pip install --python ${py} --no-deps -e ."
    "${py} -c $(quote_arg 'import jax, genenv_jax; print("genenv_jax installed; jax", jax.__version__)')"
  )
  local script="set -euo pipefail" step
  for step in "${steps[@]}"; do
    script="${script}; ${step}"
  done
  tpu_ssh_all "${script}"
}

# Runs CMD (the array) on every worker through launch/worker.sh, which keeps a per-worker log under
# LOG_ROOT/RUN_ID on that worker, relays maintenance and preemption notices as SIGTERM, and reports them.
tpu_run() {
  resolve_remote_dirs
  require_cmd
  validate_run_id
  local remote
  # Space-separated so that the remote shell expands the leading ~ of the paths.
  remote="cd ${REMOTE_DEST} && bash launch/worker.sh --log-dir ${REMOTE_LOG_ROOT}/${OPT_RUN_ID} --venv ${REMOTE_VENV}"
  remote="${remote} -- $(show_cmd "${CMD[@]}")"
  tpu_ssh_all "${remote}"
}

# True when every worker's status file for this run says exit=0: the check that the run finished, independent of how
# gcloud folds the workers' exit codes into its own. Dry runs print the command and assume so.
tpu_all_finished() {
  local cmd=("${GCLOUD}" compute tpus tpu-vm ssh "${OPT_NAME}" "${LOC_FLAGS[@]}" --worker=all
    "--command=cat ${REMOTE_LOG_ROOT}/${OPT_RUN_ID}/worker-*.status")
  if is_dry_run; then
    show_cmd "${cmd[@]}"
    return 0
  fi
  local out done_count
  out="$("${cmd[@]}" 2>/dev/null || true)"
  done_count="$(printf '%s\n' "${out}" | grep -c '^exit=0 ' || true)"
  note "${done_count} of ${TPU_WORKERS} worker(s) report exit=0"
  ((done_count == TPU_WORKERS))
}

default_run_id() {
  printf 'run-%s' "$(date -u +%Y%m%d-%H%M%S)"
}
