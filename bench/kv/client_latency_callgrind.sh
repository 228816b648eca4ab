#!/usr/bin/env bash
# Instructions per completed request, without and with latency recording, counted by
# callgrind in the timed loop of bench_client_latency --one (timed_*: the client's steps,
# and for the path setups the daemons' steps too). Deterministic: the same binary gives
# the same counts on every run, unlike wall time on a shared machine. What it does not
# see: an instruction's cost (RDTSC counts as one instruction and takes ~25 cycles).
# Under callgrind the TSC calibration (core/tsc_clock.hpp) sometimes finds its brackets
# too wide and the meter falls back to the steady clock (clock_gettime, ~30 instructions
# a read, not what real runs read): such a run is repeated (up to 10 times) until the
# meter reads the TSC, as on real runs. bare-rawtsc reads the raw TSC in any case.
#
# Usage: bench/kv/client_latency_callgrind.sh [build-dir] [requests]   (default: build 200000)
# Setups as in bench/kv/bench_client_latency.cpp (ipc-2t is left out: under valgrind the
# threads run one at a time and the spinning daemon's count means nothing).
set -euo pipefail
. "$(dirname "$0")/../../scripts/script_args.sh"
script_help "$0" "$@"
script_args client_latency_callgrind.sh 2 "$@"
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
N=${2:-200000}
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "client_latency_callgrind.sh: requests '$N' is not a positive integer" >&2; exit 2; }
. bench/callgrind_common.sh
callgrind_setup "$BUILD" bench_client_latency

# count <setup> <qd> <with|without>: instructions per request (with the TSC clock)
count() {
  local try ir
  for try in 1 2 3 4 5 6 7 8 9 10; do
    ir=$(callgrind_ir '*timed_*' --one "$1" "$2" "$3" "$N") || exit 1
    grep -q '(meter clock: TSC' "$TMP/stdout" && break
    [ "$try" = 10 ] && { echo "$1 qd $2 $3: the meter never used the TSC under callgrind" >&2; exit 1; }
  done
  awk -v ir="$ir" -v n="$N" 'BEGIN { printf "%.1f", ir / n }'
}

echo "instructions per request (callgrind, $N timed requests after $((N / 10)) warm-up)"
printf "%-10s %4s %10s %10s %8s %8s\n" setup qd without with added ratio
for setup in bare bare-rawtsc ipc-1t deleg-1t; do
  for qd in 1 4 32; do
    wo=$(count "$setup" "$qd" without)
    wi=$(count "$setup" "$qd" with)
    awk -v s="$setup" -v q="$qd" -v a="$wo" -v b="$wi" 'BEGIN {
      printf "%-10s %4s %10.1f %10.1f %8.1f %8.3f\n", s, q, a, b, b - a, b / a }'
  done
done
