#!/usr/bin/env bash
# Instructions per copyrpc request/response pair over the instant loopback, counted by
# callgrind (deterministic). Two runs (N1 and N2 pairs) cancel the setup cost; the
# loopback's own work (InstantTransport::execute: the NIC's memcpy of each batch) is
# subtracted using its inclusive count.
# Mode held: bench_copyrpc_loopback_held, whose server keeps each round's handles in a
# vector before answering them (bench/copyrpc_loopback.cpp).
#   usage: scripts/callgrind_copyrpc.sh [build-dir] [held]
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
script_help "$0" "$@"
script_args callgrind_copyrpc.sh 2 "$@"
B=${1:-build}
case ${2:-} in
  "") BIN=$B/bench/bench_copyrpc_loopback ;;
  held) BIN=$B/bench/bench_copyrpc_loopback_held ;;
  *) echo "unknown mode '$2' (none, or held)" >&2; exit 2 ;;
esac
[ -x "$BIN" ] || { echo "build $BIN first (cmake --build $B --target $(basename "$BIN"))" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed (scripts/setup.sh installs it)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
measure() {  # prints: total_instructions execute_inclusive
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$1" "$BIN" pairs "$1" >/dev/null 2>&1
  local total exe
  total=$(callgrind_annotate "$tmp/cg.$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
  exe=$(callgrind_annotate --inclusive=yes "$tmp/cg.$1" 2>/dev/null | grep 'InstantTransport::execute' | head -1 | awk '{gsub(",","",$1); print $1}')
  echo "$total ${exe:-0}"
}
N1=20000; N2=120000
read -r t1 e1 < <(measure $N1)
read -r t2 e2 < <(measure $N2)
awk -v bin="$(basename "$BIN")" -v t1="$t1" -v t2="$t2" -v e1="$e1" -v e2="$e2" -v n="$((N2-N1))" 'BEGIN {
  all=(t2-t1)/n; nic=(e2-e1)/n;
  printf "setup: %s, 1 endpoint, depth 32, 32 B requests, 16 B responses, instant loopback, callgrind\n", bin;
  printf "instructions per request/response pair: %.1f total, %.1f in the loopback NIC (memcpy), %.1f copyrpc\n", all, nic, all-nic }'
