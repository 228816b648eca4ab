#!/usr/bin/env bash
# The simulator's rate beside its own limits (bench/sim_limit.cpp), one after the other in
# one run, on the same config: simulated requests per wall-clock second, then the two
# limits (the same backend steps with no engine, no cost or NIC model):
#   round robin  every thread stepped once per round (larger batches than simulated)
#   replay       the simulated run's own sequence of thread steps (its step log,
#                recorded in the simulator run above: batch shapes like the simulated run's)
# and the simulator / limit ratio for each.
# Retired as the yardstick of the simulator's speed (docs/simulator_speed.md): bench/sim_speed.sh
# measures what a user waits for, paired against a baseline commit.
# Usage: bash bench/sim_limit.sh [BUILD_DIR=build] [CONFIG=configs/c1_np16.json] [VIRTUAL_S=0.02] [BENCHKV OPTIONS...]
#   options after the third argument go to the simulator run (e.g. --ring-page-batch 1 --event-set heap)
set -euo pipefail
. "$(dirname "$0")/../scripts/script_args.sh"
script_help "$0" "$@"
script_args sim_limit.sh 3 "${@:1:3}"  # the three positional arguments; benchkv's options follow
cd "$(dirname "$0")/.."
build=${1:-build}
cfg=${2:-configs/c1_np16.json}
virt=${3:-0.02}
shift $(( $# < 3 ? $# : 3 ))
for b in "$build/apps/benchkv/benchkv" "$build/bench/bench_sim_limit"; do
  [ -x "$b" ] || { echo "sim_limit.sh: $b not found (cmake --build $build --target benchkv bench_sim_limit)" >&2; exit 2; }
done
[ -f "$cfg" ] || { echo "sim_limit.sh: no config file $cfg" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "setup: $(nproc) CPUs, $(uname -r), config $cfg, simulator run of $virt s virtual time${*:+, simulator options: $*}"
"$build/apps/benchkv/benchkv" --config "$cfg" -d "$virt" --trim 0 --no-progress --report none \
  -o "$out/run.csv" --inflight-samples "" --step-log "$out/steps.bin" "$@" >"$out/sim.log" 2>&1 ||
  { echo "sim_limit.sh: the simulator run failed:" >&2; cat "$out/sim.log" >&2; exit 1; }
sim_line=$(grep '^simulated ' "$out/sim.log")
echo "simulator: $sim_line"
lim=$("$build/bench/bench_sim_limit" "$cfg" 2000 "$out/steps.bin" | grep '^sim limit, ')
echo "$lim"
sim=$(sed -E 's/.*\(([0-9.]+) M simulated requests\/s\).*/\1/' <<<"$sim_line")
rr=$(grep 'round robin' <<<"$lim" | sed -E 's/.*wall: ([0-9.]+) M requests\/s.*/\1/')
rp=$(grep 'replay' <<<"$lim" | sed -E 's/.*wall: ([0-9.]+) M requests\/s.*/\1/')
awk -v s="$sim" -v l="$rr" 'BEGIN { printf "simulator / limit (round robin) = %.2f (%.3f / %.3f M requests per wall-clock second)\n", s / l, s, l }'
awk -v s="$sim" -v l="$rp" 'BEGIN { printf "simulator / limit (replay)      = %.2f (%.3f / %.3f M requests per wall-clock second)\n", s / l, s, l }'
