# What the callgrind benches of one binary share (bench/mlx5_callgrind.sh,
# bench/kv/client_latency_callgrind.sh): sourced, not run.
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/script_args.sh"
script_sourced "${BASH_SOURCE[0]}" ". bench/callgrind_common.sh (in bench/mlx5_callgrind.sh and bench/kv/client_latency_callgrind.sh)" "$@"

# callgrind_setup <build dir> <target>: BIN (the target's binary in the build's bench/),
# the checks that valgrind is installed and BIN built (exit 1 otherwise), and TMP, a
# temporary directory removed on exit.
callgrind_setup() {
  BIN="$1/bench/$2"
  command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
  [ -x "$BIN" ] || { echo "$BIN not found: cmake --build $1 --target $2" >&2; exit 1; }
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
}

# callgrind_ir <function pattern> <BIN's arguments ...>: runs BIN under callgrind counting
# only inside the functions the pattern matches (--toggle-collect) and prints the count;
# BIN's output stays in $TMP/stdout. A failed run prints its stderr and exits 1.
callgrind_ir() {
  local fn=$1; shift
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" --collect-atstart=no \
    --toggle-collect="$fn" "$BIN" "$@" > "$TMP/stdout" 2> "$TMP/stderr" || {
    cat "$TMP/stderr" >&2; exit 1; }
  awk '/^(summary|totals):/ {v=$2} END {print v}' "$TMP/cg.out"
}
