# shellcheck shell=bash disable=SC2034  # its variables are read by the scripts that source it
# Shared by every launch script (sourced, never run): argument parsing and validation, the table of TPU slice
# shapes, and the dry-run mode. The gcloud operations themselves live in launch/tpu.sh.
#
# Dry run (`--dry-run`, or DRY_RUN=1 in the environment): every external command is printed to stdout, one per line,
# shell-quoted so that the line can be pasted into a shell, and nothing is run. Progress notes go to stderr.
# Commands whose output a script needs (the slice state) print their command line and return the state given by
# `--dry-run-state` (default: the healthy state), so that each branch of the restart logic can be shown.
#
# Works with bash >= 3.2 (the macOS default): no associative arrays, no ${x^^}, no mapfile.

LAUNCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROJECT_ROOT="$(cd "${LAUNCH_DIR}/.." && pwd)"
SCRIPT_NAME="$(basename "$0")"
GCLOUD="${GCLOUD:-gcloud}"
DRY_RUN="${DRY_RUN:-0}"

# The jax[tpu] install: the same jax version as requirements.txt, libtpu from Google's release index.
JAX_TPU_SPEC="jax[tpu]==0.10.2"
LIBTPU_FIND_LINKS="https://storage.googleapis.com/jax-releases/libtpu_releases.html"

die() {
  printf '%s: error: %s\n' "${SCRIPT_NAME}" "$*" >&2
  exit 2
}

note() {
  printf '%s: %s\n' "${SCRIPT_NAME}" "$*" >&2
}

is_dry_run() {
  [[ "${DRY_RUN}" == "1" ]]
}

# ---- printing and running commands -----------------------------------------------------------------------------------

# One argument as shell input: bare when it holds only safe characters, else single-quoted.
quote_arg() {
  local q="'\\''"
  case $1 in
    '') printf "''" ;;
    *[!A-Za-z0-9_./:=@%+,-]*) printf "'%s'" "${1//\'/$q}" ;;
    *) printf '%s' "$1" ;;
  esac
}

# A whole command line, quoted argument by argument.
show_cmd() {
  local out="" arg
  for arg in "$@"; do
    out="${out}${out:+ }$(quote_arg "${arg}")"
  done
  printf '%s\n' "${out}"
}

# Runs a command, or prints it in a dry run. Real runs echo it to stderr first, so logs show what ran.
run_cmd() {
  if is_dry_run; then
    show_cmd "$@"
  else
    note "+ $(show_cmd "$@")"
    "$@"
  fi
}

# ---- argument parsing ------------------------------------------------------------------------------------------------

# parse_args "VALUED FLAGS" "BOOLEAN FLAGS" "$@"
#
# Flags are `--flag VALUE`, `--flag=VALUE` or (boolean) `--flag`. Each flag --some-flag sets the variable
# OPT_SOME_FLAG; booleans are set to 1. Everything after `--` goes to the array CMD. `--dry-run` and `--help` are
# always accepted. An unknown flag, a positional argument or a valued flag without a value is an error that names the
# flags this script takes.
parse_args() {
  local valued=" $1 " boolean=" $2 dry-run help "
  shift 2
  CMD=()
  local arg flag value var
  while (($#)); do
    arg="$1"
    shift
    case "${arg}" in
      --)
        CMD=("$@")
        break
        ;;
      --*=*)
        flag="${arg%%=*}"
        flag="${flag#--}"
        value="${arg#*=}"
        [[ "${boolean}" != *" ${flag} "* ]] || die "--${flag} takes no value (write --${flag} alone)"
        [[ "${valued}" == *" ${flag} "* ]] || _bad_flag "${arg%%=*}" "${valued}" "${boolean}"
        ;;
      --*)
        flag="${arg#--}"
        if [[ "${boolean}" == *" ${flag} "* ]]; then
          value=1
        elif [[ "${valued}" == *" ${flag} "* ]]; then
          [[ $# -gt 0 && "$1" != --* ]] || die "--${flag} needs a value"
          value="$1"
          shift
        else
          _bad_flag "${arg}" "${valued}" "${boolean}"
        fi
        ;;
      *)
        die "unexpected argument '${arg}' (flags are --name VALUE or --name=VALUE; put a command after --)"
        ;;
    esac
    var="OPT_$(printf '%s' "${flag}" | tr 'a-z-' 'A-Z_')"
    printf -v "${var}" '%s' "${value}"
  done
  if [[ "${OPT_HELP:-0}" == "1" ]]; then
    usage
    exit 0
  fi
  if [[ "${OPT_DRY_RUN:-0}" == "1" ]]; then
    DRY_RUN=1
  fi
  # Exported so that the dry-run mode reaches any launch script that this one calls.
  export DRY_RUN
}

_bad_flag() {
  local flags="" f
  for f in $2 $3; do
    flags="${flags}${flags:+ }--${f}"
  done
  die "unknown flag $1 for ${SCRIPT_NAME}; it takes: ${flags}"
}

# ---- validation ------------------------------------------------------------------------------------------------------

require_cmd() {
  ((${#CMD[@]})) ||
    die "no command to run: put it after --, e.g. -- python -m genenv_jax.main --config=... --workdir=gs://BUCKET/run"
}

validate_run_id() {
  [[ "${OPT_RUN_ID}" =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad --run-id '${OPT_RUN_ID}': use letters, digits, '_', '-', '.'"
}

require_opt() {
  local flag="$1" what="$2" var
  var="OPT_$(printf '%s' "${flag}" | tr 'a-z-' 'A-Z_')"
  [[ -n "${!var:-}" ]] || die "missing --${flag} (${what})"
}

# --name and --zone are needed by every script; --project is optional (gcloud's configured project otherwise).
validate_target() {
  require_opt name "the TPU VM name, e.g. --name=genenv-v5p-32"
  require_opt zone "the zone of the slice, e.g. --zone=us-east5-a"
  [[ "${OPT_NAME}" =~ ^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$ ]] ||
    die "bad --name '${OPT_NAME}': use lowercase letters, digits and hyphens, starting with a letter (at most 63)"
  [[ "${OPT_ZONE}" =~ ^[a-z]+-[a-z]+[0-9]+-[a-z]$ ]] ||
    die "bad --zone '${OPT_ZONE}': expected a zone such as us-east5-a or europe-west4-b"
  if [[ -n "${OPT_PROJECT:-}" ]]; then
    [[ "${OPT_PROJECT}" =~ ^[a-z][-a-z0-9:.]{4,62}$ ]] ||
      die "bad --project '${OPT_PROJECT}': expected a project id such as my-project-123"
  fi
  LOC_FLAGS=("--zone=${OPT_ZONE}")
  if [[ -n "${OPT_PROJECT:-}" ]]; then
    LOC_FLAGS+=("--project=${OPT_PROJECT}")
  fi
}

# A path on the workers: relative (to the remote home directory) or absolute, in plain characters only, because it is
# written unquoted into the remote command so that `~/` expands there.
validate_remote_path() {
  local flag="$1" value="$2"
  [[ "${value}" =~ ^[A-Za-z0-9_./-]+$ && "${value}" != *..* ]] ||
    die "bad --${flag} '${value}': use letters, digits, '_', '-', '.' and '/' only (no '..')"
}

# The path as the remote shell should see it: `~/` prefixed unless absolute.
remote_path() {
  if [[ "$1" == /* ]]; then
    printf '%s' "$1"
  else
    # shellcheck disable=SC2088  # the tilde is for the remote shell to expand
    printf '~/%s' "$1"
  fi
}

# ---- TPU slice shapes ------------------------------------------------------------------------------------------------

# parse_accelerator TYPE sets TPU_GEN, TPU_SIZE, TPU_WORKERS (TPU VMs, i.e. hosts, in the slice) and
# TPU_DEFAULT_RUNTIME, or dies naming what is wrong.
#
# The number after the generation counts TensorCores for v2, v3, v4 and v5p (2 per chip on v4/v5p, 8 per host, so
# v5p-32 is 16 chips on 4 hosts) and chips for v5litepod (v5e) and v6e (1, 4 and 8 chips are one host; multi-host
# slices are made of 4-chip hosts, so v6e-16 has 4 workers). Source: Cloud TPU system architecture and per-version
# pages (v4, v5p, v5e, v6e); runtime versions from the Cloud TPU "TPU software versions" page.
parse_accelerator() {
  local acc="$1"
  [[ -n "${acc}" ]] || die "missing --accelerator-type (e.g. v5p-32, v4-16, v5litepod-16, v6e-16)"
  [[ "${acc}" =~ ^(v[0-9]+[a-z]*)-([0-9]+)$ ]] ||
    die "malformed --accelerator-type '${acc}': expected GENERATION-SIZE such as v5p-32, v4-16, v5litepod-16, v6e-16"
  TPU_GEN="${BASH_REMATCH[1]}"
  TPU_SIZE=$((10#${BASH_REMATCH[2]}))
  local valid_sizes="" per_host=8 unit="TensorCores"
  case "${TPU_GEN}" in
    v2)
      valid_sizes="8 32 128 256 512"
      TPU_DEFAULT_RUNTIME="tpu-ubuntu2204-base"
      ;;
    v3)
      valid_sizes="8 32 64 128 256 512 1024 2048"
      TPU_DEFAULT_RUNTIME="tpu-ubuntu2204-base"
      ;;
    v4)
      TPU_DEFAULT_RUNTIME="tpu-ubuntu2204-base"
      _check_multiple "${acc}" 8 8192 "v4 sizes count TensorCores (2 per chip, 8 per host)"
      ;;
    v5p)
      TPU_DEFAULT_RUNTIME="v2-alpha-tpuv5"
      _check_multiple "${acc}" 8 12288 "v5p sizes count TensorCores (2 per chip, 8 per host)"
      ;;
    v5litepod | v6e)
      valid_sizes="1 4 8 16 32 64 128 256"
      per_host=4
      unit="chips"
      if [[ "${TPU_GEN}" == "v5litepod" ]]; then
        TPU_DEFAULT_RUNTIME="v2-alpha-tpuv5-lite"
      else
        TPU_DEFAULT_RUNTIME="v2-alpha-tpuv6e"
      fi
      ;;
    v5e)
      die "unknown TPU generation 'v5e' in '${acc}': Cloud TPU names v5e slices v5litepod-N (e.g. v5litepod-16)"
      ;;
    *)
      die "unknown TPU generation '${TPU_GEN}' in '${acc}'; known: v2, v3, v4, v5p, v5litepod (v5e), v6e"
      ;;
  esac
  if [[ -n "${valid_sizes}" && " ${valid_sizes} " != *" ${TPU_SIZE} "* ]]; then
    die "no ${TPU_GEN} slice of ${TPU_SIZE} ${unit} ('${acc}'); valid sizes: ${valid_sizes// /, }"
  fi
  if ((TPU_SIZE <= 8)); then
    TPU_WORKERS=1
  else
    TPU_WORKERS=$((TPU_SIZE / per_host))
  fi
}

_check_multiple() {
  local acc="$1" step="$2" max="$3" why="$4"
  if ((TPU_SIZE < step || TPU_SIZE > max || TPU_SIZE % step != 0)); then
    die "invalid size in '${acc}': ${why}; use a multiple of ${step} from ${step} to ${max}," \
      "e.g. ${TPU_GEN}-8, ${TPU_GEN}-32"
  fi
}

# --accelerator-type (required) and the optional --workers cross-check and --runtime-version override.
validate_slice() {
  parse_accelerator "${OPT_ACCELERATOR_TYPE:-}"
  if [[ -n "${OPT_WORKERS:-}" ]]; then
    [[ "${OPT_WORKERS}" =~ ^[0-9]+$ ]] || die "bad --workers '${OPT_WORKERS}': expected a whole number"
    ((10#${OPT_WORKERS} == TPU_WORKERS)) ||
      die "--workers=${OPT_WORKERS} does not match ${OPT_ACCELERATOR_TYPE}, which has ${TPU_WORKERS} worker(s) (hosts)"
  fi
  RUNTIME_VERSION="${OPT_RUNTIME_VERSION:-${TPU_DEFAULT_RUNTIME}}"
  [[ "${RUNTIME_VERSION}" =~ ^[a-z0-9][-a-z0-9.]*$ ]] ||
    die "bad --runtime-version '${RUNTIME_VERSION}': expected a TPU software version such as ${TPU_DEFAULT_RUNTIME}"
}

# The worker count from --accelerator-type, or from --workers alone (scripts that need only the count).
resolve_workers() {
  if [[ -n "${OPT_ACCELERATOR_TYPE:-}" ]]; then
    validate_slice
  elif [[ -n "${OPT_WORKERS:-}" ]]; then
    [[ "${OPT_WORKERS}" =~ ^[1-9][0-9]*$ ]] || die "bad --workers '${OPT_WORKERS}': expected a positive whole number"
    TPU_WORKERS=$((10#${OPT_WORKERS}))
  else
    die "missing --accelerator-type (e.g. v5p-32) or --workers (the number of hosts in the slice)"
  fi
}
