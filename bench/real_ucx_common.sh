# What the real-run benches over UCX share (real_deleg_vs_ucxam.sh, real_kv_side_by_side.sh,
# real_kv_callgrind.sh): sourced, not run. Call real_ucx_setup once, then real_ucx_run and
# real_ucx_mops for each run.
#   env (with these defaults): TLS=sm,self SECS=3 INTERVAL_MS=100 TRIM=3 DAEMONS=1 CLIENTS=1
#        QD=4 ROUNDS=5 KEYS=1024 READ_RATIO=0.5
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/script_args.sh"
script_sourced "${BASH_SOURCE[0]}" ". bench/real_ucx_common.sh (in the bench/real_*.sh scripts)" "$@"

# real_ucx_configs <script name> <least> <arg ...>: reads a command line
# "[build-dir] -- 'LABEL=BACKEND [benchkv options]' ..." into BUILD and CONFIGS; fewer than
# <least> configurations, or one not of that form, is an input error (exit 2).
real_ucx_configs() {
  local name=$1 least=$2 c
  shift 2
  BUILD=build
  if [[ "${1:-}" == -?* && "$1" != "--" ]]; then echo "$name: unknown option $1 (see $name.sh --help)" >&2; exit 2; fi
  if [ $# -gt 0 ] && [ "$1" != "--" ]; then BUILD=$1; shift; fi
  [ "${1:-}" = "--" ] && shift
  [ $# -ge "$least" ] || { echo "$name: give at least $least configuration(s) 'LABEL=BACKEND [options]' after --" >&2; exit 2; }
  for c in "$@"; do
    [[ "$c" == *=* ]] || { echo "$name: configuration '$c' is not LABEL=BACKEND [options]" >&2; exit 2; }
  done
  CONFIGS=("$@")
}

# real_ucx_config <configuration>: its LABEL, the benchkv binary BIN it runs (the build's,
# or PATH for a first word @PATH) and its benchkv options SPEC (an array).
real_ucx_config() {
  LABEL=${1%%=*}
  read -r -a SPEC <<<"${1#*=}"
  BIN=$BENCHKV
  if [[ "${SPEC[0]}" == @* ]]; then BIN=$(realpath "${SPEC[0]#@}"); SPEC=("${SPEC[@]:1}"); fi
}

# real_ucx_setup <script name> <build dir> [tool ...]: BENCHKV, the workload settings, the
# checks that benchkv is built and mpirun (and each tool) is found (exit 2 otherwise), the
# MPI and UCX environment, and WORK, a temporary directory removed on exit.
real_ucx_setup() {
  local name=$1 build=$2 tool
  shift 2
  BENCHKV=$(realpath -m "$build/apps/benchkv/benchkv")
  TLS=${TLS:-sm,self}
  SECS=${SECS:-3}
  INTERVAL_MS=${INTERVAL_MS:-100}
  TRIM=${TRIM:-3}
  DAEMONS=${DAEMONS:-1}
  CLIENTS=${CLIENTS:-1}
  QD=${QD:-4}
  ROUNDS=${ROUNDS:-5}
  KEYS=${KEYS:-1024}
  READ_RATIO=${READ_RATIO:-0.5}
  [ -x "$BENCHKV" ] || { echo "$name: $BENCHKV not built (cmake --build $build --target benchkv)" >&2; exit 2; }
  for tool in mpirun "$@"; do
    command -v "$tool" >/dev/null || { echo "$name: $tool not found (apt-get install openmpi-bin valgrind)" >&2; exit 2; }
  done
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 UCX_TLS=$TLS
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
}

# real_ucx_run <tag> <launch ...> -- <benchkv options ...>: one 2-rank run in WORK over
# --transport ucx with the workload settings; <launch> is the benchkv binary, possibly
# behind a wrapper (taskset, valgrind). Output in WORK/<tag>.{csv,summary.json,out,err};
# a failed run prints its output and exits 1.
real_ucx_run() {
  local tag=$1
  shift
  local -a launch=()
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done
  shift
  (cd "$WORK" && mpirun -np 2 --oversubscribe --bind-to none -x UCX_TLS "${launch[@]}" --transport ucx \
     --queue-depth "$QD" --key-range "$KEYS" --read-ratio "$READ_RATIO" --no-progress -o "$tag.csv" "$@" \
     >"$tag.out" 2>"$tag.err") || { cat "$WORK/$tag.out" "$WORK/$tag.err" >&2; exit 1; }
}

# real_ucx_mops <tag>: prints the run's total_mops; fails unless the run was consistent
# (issued == completed, no error).
real_ucx_mops() {
  /usr/bin/python3 - "$WORK/$1.summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
t = s["totals"]
if t["issued"] != t["completed"] or t["errors"] != 0:
    sys.exit(f"inconsistent run: {t}")
print(f'{s["runs"][0]["total_mops"]:.6f}')
PY
}

# The UCX version, for a bench's set-up line.
real_ucx_version() { ucx_info -v | head -1 | sed 's/# //'; }
