#!/usr/bin/env bash
# benchkv Delegation over the UCX transport vs the pure UCX active-message baseline
# (ucx-am), 2 MPI ranks on this machine, measured side by side in one run.
#
#   usage: bench/real_deleg_vs_ucxam.sh [build-dir]
#     env: TLS=sm,self SECS=3 INTERVAL_MS=100 TRIM=3 DAEMONS=1 CLIENTS=1 QD=4 ROUNDS=5
#          KEYS=1024 READ_RATIO=0.5 DELEG_ARGS=
#
# Both backends run the same workload (same seed, pattern, key range, read ratio, thread
# counts and queue depth) with the same UCX_TLS, alternating delegation / ucx-am ROUNDS
# times so machine drift hits both alike. Each run's throughput is the summary's
# total_mops (kept epochs of all ranks); the ratio is delegation / ucx-am per round,
# their median, and the ratio of the means. Every run must also be consistent (issued == completed, no error).
# DELEG_ARGS: extra benchkv options of the delegation runs (e.g. "--loop-order one-flush").
# On a machine with fewer CPUs than threads the ranks' threads share CPUs and idle steps
# yield (benchkv prints a pinning warning): the numbers are then CPU-scheduling bound.
set -euo pipefail
. "$(dirname "$0")/../scripts/script_args.sh"
script_help "$0" "$@"
script_args real_deleg_vs_ucxam.sh 1 "$@"
cd "$(dirname "$0")/.."
BUILD=${1:-build}
. bench/real_ucx_common.sh
real_ucx_setup real_deleg_vs_ucxam "$BUILD"
read -r -a DELEG_ARGS <<<"${DELEG_ARGS:-}"

run() {  # run <backend> <tag> [options]: prints total_mops; fails on an inconsistent run
  local backend=$1 tag=$2
  shift 2
  real_ucx_run "$tag" "$BENCHKV" -- -d "$SECS" --interval-ms "$INTERVAL_MS" --trim "$TRIM" -r 1 \
    --server-threads "$DAEMONS" --client-threads "$CLIENTS" "$@" "$backend"
  real_ucx_mops "$tag"
}

echo "setup: 2 ranks x (${DAEMONS} daemon + ${CLIENTS} client threads), QD ${QD}, ${KEYS} keys/rank, read ratio ${READ_RATIO}," \
     "${SECS} s runs in ${INTERVAL_MS} ms epochs (trim ${TRIM}), UCX_TLS=${TLS}, delegation options '${DELEG_ARGS[*]}', $(nproc) CPUs, UCX $(real_ucx_version), ${ROUNDS} rounds"
d_all=() a_all=()
for r in $(seq 1 "$ROUNDS"); do
  d=$(run delegation "d$r" ${DELEG_ARGS[@]+"${DELEG_ARGS[@]}"})
  a=$(run ucx-am "a$r")
  d_all+=("$d"); a_all+=("$a")
  awk -v r="$r" -v d="$d" -v a="$a" 'BEGIN { printf "round %d: delegation %8.3f Mops   ucx-am %8.3f Mops   ratio %.2f\n", r, d, a, d / a }'
done
pinning=$(grep -h "CPU pinning" "$WORK"/d1.err | head -1 || true)
[ -n "$pinning" ] && echo "note: ${pinning#benchkv: }"
printf '%s\n' "${d_all[@]}" > "$WORK/d.txt"
printf '%s\n' "${a_all[@]}" > "$WORK/a.txt"
paste "$WORK/d.txt" "$WORK/a.txt" | awk '{ d += $1; a += $2; n++ } END {
  printf "mean:    delegation %8.3f Mops   ucx-am %8.3f Mops   ratio of the means %.2f\n", d / n, a / n, d / a }'
paste "$WORK/d.txt" "$WORK/a.txt" | awk '{ print $1 / $2 }' | sort -g |
  awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
        printf "median of the per-round ratios delegation/ucx-am: %.2f (min %.2f, max %.2f)\n", m, v[1], v[NR] }'
