#!/usr/bin/env bash
# Several benchkv configurations over the UCX transport, 2 MPI ranks on this machine,
# measured side by side in one run: the configurations alternate ROUNDS times (so machine
# drift hits all alike) and each is reported as a ratio to the FIRST one (the baseline).
#
#   usage: bench/real_kv_side_by_side.sh [build-dir] -- 'LABEL=BACKEND [benchkv options]' ...
#     env: TLS=sm,self SECS=3 INTERVAL_MS=100 TRIM=3 DAEMONS=1 CLIENTS=1 QD=4 ROUNDS=5
#          KEYS=1024 READ_RATIO=0.5 PLACEMENT=shared
#
#   e.g. bench/real_kv_side_by_side.sh build -- 'am=ucx-am' 'deleg=delegation' 'direct=direct'
#
# A configuration whose first word is @PATH runs the benchkv binary at PATH instead of the
# build directory's (two builds side by side: 'old=@/tmp/benchkv.old delegation').
#
# PLACEMENT: where the ranks' threads may run (the process CPU mask, set with taskset;
# benchkv leaves threads unpinned when they outnumber the CPUs):
#   shared        every rank on every CPU (what bench/real_deleg_vs_ucxam.sh does)
#   rank-per-cpu  rank r only on CPU r % nproc (a rank's daemon and clients share one CPU)
#   one-cpu       every rank on CPU 0 (all threads time-share one CPU)
# Every run must be consistent (issued == completed, no error). Per configuration: the
# mean Mops, and the median (min, max) of its per-round ratio to the baseline.
set -euo pipefail
. "$(dirname "$0")/../scripts/script_args.sh"
script_help "$0" "$@"
cd "$(dirname "$0")/.."
. bench/real_ucx_common.sh
real_ucx_configs real_kv_side_by_side 2 "$@"
real_ucx_setup real_kv_side_by_side "$BUILD"
PLACEMENT=${PLACEMENT:-shared}
NCPU=$(nproc)
case "$PLACEMENT" in
  shared) CPU_OF_RANK='' ;;
  rank-per-cpu) CPU_OF_RANK="\$((OMPI_COMM_WORLD_RANK % $NCPU))" ;;
  one-cpu) CPU_OF_RANK=0 ;;
  *) echo "real_kv_side_by_side: PLACEMENT must be shared, rank-per-cpu or one-cpu (got '$PLACEMENT')" >&2; exit 2 ;;
esac

labels=() specs=()
for c in "${CONFIGS[@]}"; do labels+=("${c%%=*}"); specs+=("${c#*=}"); done

run() {  # run <index> <tag>: prints total_mops; fails on an inconsistent run
  local i=$1 tag=$2
  real_ucx_config "${CONFIGS[$i]}"
  local -a launch=("$BIN")
  [ -n "$CPU_OF_RANK" ] && launch=(sh -c "exec taskset -c $CPU_OF_RANK \"\$0\" \"\$@\"" "$BIN")
  real_ucx_run "$tag" "${launch[@]}" -- -d "$SECS" --interval-ms "$INTERVAL_MS" --trim "$TRIM" -r 1 \
    --server-threads "$DAEMONS" --client-threads "$CLIENTS" "${SPEC[@]}"
  real_ucx_mops "$tag"
}

echo "setup: 2 ranks x (${DAEMONS} daemon + ${CLIENTS} client threads), QD ${QD}, ${KEYS} keys/rank, read ratio ${READ_RATIO}," \
     "${SECS} s runs in ${INTERVAL_MS} ms epochs (trim ${TRIM}), UCX_TLS=${TLS}, placement ${PLACEMENT}, ${NCPU} CPUs," \
     "UCX $(real_ucx_version), ${ROUNDS} rounds"
for i in "${!labels[@]}"; do echo "  ${labels[$i]}: ${specs[$i]}"; done
for r in $(seq 1 "$ROUNDS"); do
  line="round $r:"
  for i in "${!labels[@]}"; do
    m=$(run "$i" "c${i}r$r")
    echo "$m" >>"$WORK/mops.$i"
    line+=$(printf '  %s %.3f' "${labels[$i]}" "$m")
  done
  echo "$line Mops"
done
for i in "${!labels[@]}"; do
  paste "$WORK/mops.$i" "$WORK/mops.0" | awk '{ print $1, $1 / $2 }' | sort -g -k2 |
    awk -v l="${labels[$i]}" -v b="${labels[0]}" '{ s += $1; v[NR] = $2 } END {
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%-12s mean %7.3f Mops   %s/%s per round: median %.2f (min %.2f, max %.2f)\n", l, s / NR, l, b, m, v[1], v[NR] }'
done
