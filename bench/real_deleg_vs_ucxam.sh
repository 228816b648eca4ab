#!/usr/bin/env bash
# benchkv Delegation over the UCX transport vs the pure UCX active-message baseline
# (ucx-am), 2 MPI ranks on this machine, measured side by side in one run.
#
#   bench/real_deleg_vs_ucxam.sh [build-dir]
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
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BENCHKV=$(realpath "$BUILD/apps/benchkv/benchkv")
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
read -r -a DELEG_ARGS <<<"${DELEG_ARGS:-}"
[ -x "$BENCHKV" ] || { echo "real_deleg_vs_ucxam: $BENCHKV not built (cmake --build $BUILD --target benchkv)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "real_deleg_vs_ucxam: mpirun not found (apt-get install openmpi-bin)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 UCX_TLS=$TLS
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

run() {  # run <backend> <tag> [options]: prints total_mops; fails on an inconsistent run
  local backend=$1 tag=$2
  shift 2
  (cd "$WORK" && mpirun -np 2 --oversubscribe --bind-to none -x UCX_TLS "$BENCHKV" --transport ucx \
     -d "$SECS" --interval-ms "$INTERVAL_MS" --trim "$TRIM" -r 1 --server-threads "$DAEMONS" \
     --client-threads "$CLIENTS" --queue-depth "$QD" --key-range "$KEYS" --read-ratio "$READ_RATIO" \
     --no-progress -o "$tag.csv" "$@" "$backend" >"$tag.out" 2>"$tag.err") || { cat "$WORK/$tag.out" "$WORK/$tag.err" >&2; exit 1; }
  /usr/bin/python3 - "$WORK/$tag.summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
t = s["totals"]
if t["issued"] != t["completed"] or t["errors"] != 0:
    sys.exit(f"inconsistent run: {t}")
print(f'{s["runs"][0]["total_mops"]:.6f}')
PY
}

echo "setup: 2 ranks x (${DAEMONS} daemon + ${CLIENTS} client threads), QD ${QD}, ${KEYS} keys/rank, read ratio ${READ_RATIO}," \
     "${SECS} s runs in ${INTERVAL_MS} ms epochs (trim ${TRIM}), UCX_TLS=${TLS}, delegation options '${DELEG_ARGS[*]}', $(nproc) CPUs, UCX $(ucx_info -v | head -1 | sed 's/# //'), ${ROUNDS} rounds"
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
