#!/usr/bin/env bash
# copyrpc over the UCX transport vs raw UCX active messages, side by side in one run.
#
#   usage: bench/ucx_compare.sh [build-dir]    (env: SIZE=32 TLS=sm,self SECONDS_PER_MODE=2
#                                          PERF_ITERS=2000000 PORT=13390 CLIENT_CPU SERVER_CPU)
#
# Runs, on the same CPUs, with the same UCX_TLS and payload size:
#   1. ucx_perftest -t ucp_am_bw      (server + client process; message rate, overall)
#   2. bench_ucx_copyrpc_rate          (write_imm mode, then copyrpc mode; two processes)
#   3. ucx_perftest -t ucp_am_bw again (the machine may drift: the baseline is the mean)
# and prints each rate and its ratio to the ucp_am_bw baseline. copyrpc's rate counts
# calls answered (each = one request + one response message of SIZE bytes, batched);
# write_imm counts WRITE+IMM requests acknowledged (one AM each, plus an ACK per 64).
set -euo pipefail
. "$(dirname "$0")/../scripts/script_args.sh"
script_help "$0" "$@"
script_args ucx_compare.sh 1 "$@"
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SIZE=${SIZE:-32}
TLS=${TLS:-sm,self}
SECS=${SECONDS_PER_MODE:-2}
ITERS=${PERF_ITERS:-2000000}
PORT=${PORT:-13390}
NCPU=$(nproc)
CLIENT_CPU=${CLIENT_CPU:-$((NCPU - 1))}
SERVER_CPU=${SERVER_CPU:-$((NCPU > 1 ? NCPU - 2 : 0))}
BENCH="$BUILD/bench/bench_ucx_copyrpc_rate"
command -v ucx_perftest >/dev/null || { echo "ucx_compare: ucx_perftest not found (apt-get install ucx-utils)" >&2; exit 2; }
[ -x "$BENCH" ] || { echo "ucx_compare: $BENCH not built (cmake --build $BUILD --target bench_ucx_copyrpc_rate)" >&2; exit 2; }

perftest() {  # prints the overall message rate of one ucp_am_bw run
  local port=$1 out
  UCX_TLS=$TLS ucx_perftest -t ucp_am_bw -s "$SIZE" -n "$ITERS" -p "$port" -c "$SERVER_CPU" -v >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  out=$(UCX_TLS=$TLS ucx_perftest localhost -t ucp_am_bw -s "$SIZE" -n "$ITERS" -p "$port" -c "$CLIENT_CPU" -v 2>/dev/null)
  wait "$srv" || true
  # CSV: iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr
  echo "$out" | grep -E '^[0-9]+,' | tail -1 | cut -d, -f8
}

echo "setup: payload ${SIZE} B, UCX_TLS=${TLS}, client cpu ${CLIENT_CPU}, server cpu ${SERVER_CPU}, $(nproc) CPUs, UCX $(ucx_info -v | head -1 | sed 's/# //')"
am1=$(perftest "$PORT")
bench_out=$("$BENCH" --size "$SIZE" --seconds "$SECS" --tls "$TLS" --client-cpu "$CLIENT_CPU" --server-cpu "$SERVER_CPU")
am2=$(perftest "$((PORT + 1))")
echo "$bench_out" | grep '^setup:' | sed 's/^/  bench /'
wi=$(echo "$bench_out" | awk '$1=="result:" && $2=="write_imm" {print $3}')
cr=$(echo "$bench_out" | awk '$1=="result:" && $2=="copyrpc" {print $3}')
[ -n "$am1" ] && [ -n "$am2" ] && [ -n "$wi" ] && [ -n "$cr" ] || { echo "ucx_compare: a run produced no number" >&2; exit 1; }
awk -v a1="$am1" -v a2="$am2" -v wi="$wi" -v cr="$cr" -v sz="$SIZE" 'BEGIN {
  base = (a1 + a2) / 2
  printf "ucx_perftest ucp_am_bw        %10.0f msg/s   (runs: %.0f, %.0f; baseline = mean)\n", base, a1, a2
  printf "UCX transport WRITE+IMM       %10.0f req/s   ratio %.2f\n", wi, wi / base
  printf "copyrpc calls (%d B + %d B)    %10.0f call/s  ratio %.2f  (%.2f messages/s per AM msg/s)\n", sz, sz, cr, cr / base, 2 * cr / base
}'
