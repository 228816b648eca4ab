#!/usr/bin/env bash
# Instructions per posted WRITE+IMM (with its doorbell) and per polled CQE on the direct
# mlx5 data path, over the software NIC emulator, counted by callgrind (deterministic:
# the same binary gives the same counts on every run). Only the measured functions
# (bkvbench::measured_*) are counted; the emulated NIC's work is outside them. Each
# count includes the call into the noinline measured function.
#
# Usage: bench/mlx5_callgrind.sh [build-dir]      (default: build)
# Targets: <= 60 instructions per post with its doorbell and <= 45 per post when 16 share one
# doorbell (no payload copy); <= 25 per received CQE, <= 40 per send CQE.
set -euo pipefail
. "$(dirname "$0")/../scripts/script_args.sh"
script_help "$0" "$@"
script_args mlx5_callgrind.sh 1 "$@"
cd "$(dirname "$0")/.."
. bench/callgrind_common.sh
BUILD=${1:-build}
callgrind_setup "$BUILD" bench_mlx5_instructions

# count <function> <args...>: prints instructions per unit (callgrind total / units=).
count() {
  local fn=$1; shift
  local ir units
  ir=$(callgrind_ir "bkvbench::$fn*" "$@") || exit 1
  units=$(sed -n 's/^units=\([0-9]*\)$/\1/p' "$TMP/stdout")
  awk -v ir="$ir" -v u="$units" 'BEGIN { printf "%.1f", ir / u }'
}

# row <label> <target or -> <subtract> <function> <args...>
row() {
  local label=$1 target=$2 sub=$3; shift 3
  local raw; raw=$(count "$@")
  awk -v l="$label" -v raw="$raw" -v base="$sub" -v t="$target" 'BEGIN {
    net = raw - base
    verdict = (t == "-") ? "" : (net <= t ? "target <= " t ": met" : "target <= " t ": MISSED")
    printf "%-56s %7.1f %7.1f  %s\n", l, raw, net, verdict }'
}

echo "direct mlx5 data path over the NIC emulator; binary: $BIN"
grep -o -m1 -- '-O[0-3s][^"]*-std=c++20' "$BUILD/compile_commands.json" 2>/dev/null | head -1 | sed 's/^/flags: /' || true
BASE=$(count measured_baseline baseline)
printf "%-56s %7s %7s\n" "per post (WRITE+IMM and its doorbell) / per CQE" "raw" "net"
echo "-- flush: one post + doorbell on each of 64 QPs per call (as copyrpc's flush)"
row "gather entry only (no payload copy)" 60 0 measured_flush flush 64 0
row "4 KiB gather entry (no payload copy)" 60 0 measured_flush flush 4096 0
row "32 B fully inline (copy included)" - 0 measured_flush flush 32 220
row "220 B fully inline (copy included)" - 0 measured_flush flush 220 220
row "1 KiB: 204 B inline + gather entry (copy included)" - 0 measured_flush flush 1024 220
echo "-- 16 posts on one QP, then one (8-byte) doorbell: the post alone, doorbell amortized"
row "gather entry only (no payload copy)" 45 0 measured_batch batch 64 0 16
row "32 B fully inline (copy included)" - 0 measured_batch batch 32 220 16
echo "-- new harness (measured_*_local): the same posts, arguments copied into locals first"
row "flush, gather entry only (no payload copy)" 60 0 measured_flush_local flush-local 64 0
row "flush, 32 B fully inline (copy included)" - 0 measured_flush_local flush-local 32 220
row "16 posts then one doorbell, gather entry only" 45 0 measured_batch_local batch-local 64 0 16
echo "-- the flush and batch harnesses alone (loop, argument loads, signaled; no post, no doorbell)"
FLUSH_HARNESS=$(count measured_flush_harness flush-harness 64 0)
BATCH_HARNESS=$(count measured_batch_harness batch-harness 64 0 16)
printf "%-56s %7.1f\n" "flush harness, per QP" "$FLUSH_HARNESS"
printf "%-56s %7.1f\n" "16-post batch harness, per post" "$BATCH_HARNESS"
row "flush, gather entry: the post + doorbell alone (net)" - "$FLUSH_HARNESS" measured_flush flush 64 0
row "batch, gather entry: the post alone (net)" - "$BATCH_HARNESS" measured_batch batch 64 0 16
echo "-- one post + doorbell per call; net = raw - $BASE (the empty call)"
row "gather entry only (no payload copy)" 60 "$BASE" measured_post post 64 0
echo "-- polling"
row "poll_recv per CQE, batches of 64" 25 0 measured_poll_recv poll 64
row "poll_recv per CQE, batches of 8" 25 0 measured_poll_recv poll 8
row "poll_recv per CQE, batches of 1 (whole call)" - 0 measured_poll_recv poll 1
row "poll_recv per CQE, compressed sessions, batches of 64" 25 0 measured_poll_recv poll 64 compressed
row "poll_send per CQE, batches of 64" 40 0 measured_poll_send poll-send 64
