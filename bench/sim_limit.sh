#!/usr/bin/env bash
# The simulator's rate beside its own limit (bench/sim_limit.cpp), one after the other in
# one run, on the same config: simulated requests per wall-clock second, the limit (the
# same backend steps with no engine, no cost or NIC model), and their ratio.
# Usage: bash bench/sim_limit.sh [BUILD_DIR=build] [CONFIG=configs/c1_np16.json] [VIRTUAL_S=0.02]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cfg=${2:-configs/c1_np16.json}
virt=${3:-0.02}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "setup: $(nproc) CPUs, $(uname -r), config $cfg, simulator run of $virt s virtual time"
sim_line=$("$build/apps/benchkv/benchkv" --config "$cfg" -d "$virt" --trim 0 --no-progress --report none \
  -o "$out/run.csv" --inflight-samples "" 2>&1 | grep '^simulated ')
echo "simulator: $sim_line"
lim_line=$("$build/bench/bench_sim_limit" "$cfg" | tail -1)
echo "$lim_line"
sim=$(sed -E 's/.*\(([0-9.]+) M simulated requests\/s\).*/\1/' <<<"$sim_line")
lim=$(sed -E 's/.*wall: ([0-9.]+) M requests\/s.*/\1/' <<<"$lim_line")
awk -v s="$sim" -v l="$lim" 'BEGIN { printf "simulator / limit = %.2f (%.3f / %.3f M requests per wall-clock second)\n", s / l, s, l }'
