#!/usr/bin/env bash
# The simulator's speed as a user feels it, paired against a named baseline commit.
#
# For each case (C1 at NP 8, 16, 32 and 64, and the regime-map sweep's largest point) it
# runs this tree's benchkv and the baseline's alternately (the order flips every pair so
# drift hits both alike), PAIRS times. Each case runs at two virtual durations, SHORT
# and LONG (whole milliseconds: the epoch is 1 ms), so that the fixed costs (start-up,
# request patterns, rings, outputs) and the steady state are told apart:
#   M requests per CPU-s      LONG run, whole process: simulated requests / (user + system
#                             CPU time): what a user waiting for the run feels
#   steady M requests/CPU-s   (requests LONG - SHORT) / (CPU LONG - SHORT)
#   ns per event              (CPU LONG - SHORT) / (events LONG - SHORT), the engine's
#                             events (the summary's simulator.events): the marginal cost
#   peak RSS                  the LONG run's maximum resident set
# Per binary the medians over pairs; then the median (min-max) over pairs of each pair's
# ratio this / baseline: > 1 is faster for the rates, < 1 cheaper for ns per event.
#
# The baseline is a commit built beside this tree: a detached `git worktree` of it in
# BASE_DIR, configured and built (benchkv only) there once, reused by later calls. Each
# binary runs its own tree's configs, so a change of the default model shows in the mix.
#
# usage: bash bench/sim_speed.sh --base COMMIT [--build DIR] [--base-dir DIR] [--pairs N]
#        [--cases c1_np8,c1_np16,c1_np32,c1_np64,regime_np32] [--scale K]
#        [--build-prefix "CMD ..."] [--callgrind CASE] [--ll BYTES] [--help]
#
#   --pairs N        pairs of runs (default 6: a median of 3 pairs of one binary against
#                    itself moved up to 14% from 1 on a busy machine, of 6 pairs 3%)
#   --scale K        multiplies both durations of every case (an integer, default 1)
#   --build-prefix   a command put before the baseline's build (e.g. a lock and a time limit)
#   --callgrind CASE also counts instructions and simulated cache misses per event and per
#                    request (callgrind --cache-sim=yes: exact for the binary, independent
#                    of the machine's load) of both binaries on CASE, between its SHORT and
#                    LONG runs as above
#   --ll BYTES       the simulated last-level cache of --callgrind (16-way, 64 B lines;
#                    default 1048576, the build machine's 1 MiB L2 per core, past which a
#                    miss costs an L3 access; 33554432 models a 32 MB L3 and counts only
#                    what would go to DRAM)
#   --help           prints this header
#
# Cases (SHORT / LONG virtual time, after the config's simulated start-up):
#   c1_np8       configs/c1_np8.json                                            2 / 10 ms
#   c1_np16      configs/c1_np16.json                                           1 /  4 ms
#   c1_np32      configs/c1_np16.json --np 32                                   1 /  3 ms
#   c1_np64      configs/c1_np16.json --np 64                                   1 /  2 ms
#   regime_np32  configs/sweeps/regime_map.json's largest point: configs/c1_np8.json
#                --np 32, staggered start over 1000 us (the sweep runs 30 ms)   1 /  4 ms
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
base='' build=build base_dir='' pairs=6 scale=1 build_prefix='' cg_case='' ll=1048576
cases=c1_np8,c1_np16,c1_np32,c1_np64,regime_np32
die() { echo "sim_speed: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --base) base=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --base-dir) base_dir=${2:?}; shift 2 ;;
    --pairs) pairs=${2:?}; shift 2 ;;
    --cases) cases=${2:?}; shift 2 ;;
    --scale) scale=${2:?}; shift 2 ;;
    --build-prefix) build_prefix=${2:?}; shift 2 ;;
    --callgrind) cg_case=${2:?}; shift 2 ;;
    --ll) ll=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see the header of bench/sim_speed.sh)" ;;
  esac
done
[ -n "$base" ] || die "--base COMMIT is required (the baseline the runs are paired against)"
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || die "--pairs must be a positive integer (got '$pairs')"
[[ "$scale" =~ ^[1-9][0-9]?$ ]] || die "--scale must be an integer in [1, 99] (got '$scale')"
[[ "$ll" =~ ^[1-9][0-9]*$ ]] && [ $((ll & (ll - 1))) -eq 0 ] && [ "$ll" -ge 65536 ] ||
  die "--ll must be a power of two of at least 65536 bytes (got '$ll')"
base_sha=$(git rev-parse --verify --quiet "$base^{commit}") || die "--base '$base' names no commit"
this_sha=$(git rev-parse HEAD)
[ -n "$(git status --porcelain --untracked-files=no)" ] && this_sha="$this_sha+uncommitted"
base_dir=${base_dir:-${TMPDIR:-/tmp}/bkv_sim_speed_${base_sha:0:12}}
this_bin=$(realpath "$build/apps/benchkv/benchkv" 2>/dev/null) || die "$build/apps/benchkv/benchkv not built"
[ -x "$this_bin" ] || die "$this_bin is not executable"
[ -x /usr/bin/time ] || die "/usr/bin/time not found (apt-get install time)"

# The baseline tree and its build.
if [ ! -d "$base_dir" ]; then git worktree add --detach "$base_dir" "$base_sha" >/dev/null; fi
[ "$(git -C "$base_dir" rev-parse HEAD)" = "$base_sha" ] || die "$base_dir is not at $base_sha (remove it or give --base-dir)"
base_bin=$base_dir/build/apps/benchkv/benchkv
if [ ! -x "$base_bin" ]; then
  echo "sim_speed: building the baseline $base_sha in $base_dir/build" >&2
  # Configured as scripts/test.sh configures a tree (with -DBKV_WERROR=ON): the same
  # flags, so the compiler cache serves the objects the two trees share.
  (cd "$base_dir" && export CCACHE_BASEDIR=$base_dir CCACHE_NOHASHDIR=true &&
   $build_prefix bash -c 'cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBKV_WERROR=ON >/dev/null &&
                          cmake --build build -j2 --target benchkv >/dev/null') || die "baseline build failed"
fi

case_args() {  # case_args <case> <short|long>: the benchkv options of a case (from the tree root)
  local ds dl
  case $1 in
    c1_np8) ds=2 dl=10; echo -n "--config configs/c1_np8.json" ;;
    c1_np16) ds=1 dl=4; echo -n "--config configs/c1_np16.json" ;;
    c1_np32) ds=1 dl=3; echo -n "--config configs/c1_np16.json --np 32" ;;
    c1_np64) ds=1 dl=2; echo -n "--config configs/c1_np16.json --np 64" ;;
    regime_np32) ds=1 dl=4; echo -n "--config configs/c1_np8.json --np 32 --start-mode staggered --start-stagger-us 1000" ;;
    *) die "unknown case '$1' (c1_np8, c1_np16, c1_np32, c1_np64, regime_np32)" ;;
  esac
  if [ "$2" = short ]; then echo " -d $((ds * scale))e-3"; else echo " -d $((dl * scale))e-3"; fi
}
IFS=, read -r -a case_list <<<"$cases"
for c in "${case_list[@]}"; do case_args "$c" long >/dev/null; done
[ -z "$cg_case" ] || case_args "$cg_case" long >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=$work/results.tsv
one() {  # one <which> <case> <len> <out> [prefix...]: runs a binary on a case, outputs at <out>.*
  local which=$1 c=$2 len=$3 out=$4 bin tree
  shift 4
  if [ "$which" = this ]; then bin=$this_bin tree=$root; else bin=$base_bin tree=$base_dir; fi
  # shellcheck disable=SC2046
  (cd "$tree" && "$@" "$bin" $(case_args "$c" "$len") --trim 0 -r 1 --no-progress --report none \
      -o "$out.csv" --inflight-samples "" >/dev/null 2>"$out.err") ||
    { cat "$out.err" >&2; die "$which run of $c ($len) failed"; }
  echo "$(sed -nE 's/^simulated ([0-9]+) requests.*/\1/p' "$out.err")" \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["simulator"]["events"])' "$out.summary.json")"
  rm -f "$out.csv" "$out.summary.json"
}
run() {  # run <which> <case> <pair> <short|long>: a line "which case pair len requests events cpu_s rss_kb"
  local out=$work/$1.$2.$3.$4 req events u s m
  one "$1" "$2" "$4" "$out" /usr/bin/time -f '%U %S %M' -o "$out.time" >"$out.n"
  read -r req events <"$out.n"
  read -r u s m < <(tail -1 "$out.time")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$req" "$events" \
    "$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')" "$m" >>"$results"
}
pair_runs() {  # pair_runs <which> <case> <pair>
  run "$1" "$2" "$3" short
  run "$1" "$2" "$3" long
}

echo "sim_speed: this = $this_sha ($this_bin)"
echo "sim_speed: base = $base_sha ($base_bin)"
echo "sim_speed: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $pairs pairs, scale $scale"
for p in $(seq "$pairs"); do
  for c in "${case_list[@]}"; do
    if [ $((p % 2)) = 1 ]; then pair_runs base "$c" "$p"; pair_runs this "$c" "$p"
    else pair_runs this "$c" "$p"; pair_runs base "$c" "$p"; fi
  done
done
echo "sim_speed: load at the end $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$results" "${case_list[@]}" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
cases = sys.argv[2:]
def figures(w, c):  # pair -> (rate, steady rate, ns per event, rss MB, requests, events)
    out = {}
    for p in sorted({int(r[2]) for r in rows if r[0] == w and r[1] == c}):
        s, l = ([r for r in rows if r[0] == w and r[1] == c and int(r[2]) == p and r[3] == k][0] for k in ("short", "long"))
        req_s, ev_s, cpu_s = int(s[4]), int(s[5]), float(s[6])
        req_l, ev_l, cpu_l, rss = int(l[4]), int(l[5]), float(l[6]), int(l[7]) / 1024
        d_cpu = max(cpu_l - cpu_s, 1e-3)
        out[p] = (req_l / cpu_l / 1e6, (req_l - req_s) / d_cpu / 1e6, d_cpu / max(ev_l - ev_s, 1) * 1e9, rss, req_l, ev_l)
    return out
print("| case | binary | requests (LONG) | events (LONG) | M requests per CPU-s | steady M requests per CPU-s | ns per event | peak RSS (MB) |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
ratios = {}
for c in cases:
    f = {w: figures(w, c) for w in ("base", "this")}
    for w in ("base", "this"):
        v = list(f[w].values())
        med = [st.median(x[i] for x in v) for i in range(4)]
        print(f"| {c} | {w} | {v[0][4]} | {v[0][5]} | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.0f} | {med[3]:.0f} |")
    ratios[c] = [[f["this"][p][i] / f["base"][p][i] for p in f["this"] if p in f["base"]] for i in range(3)]
print()
print("| case | this / base: M requests per CPU-s | steady M requests per CPU-s | ns per event |")
print("|---|---:|---:|---:|")
for c in cases:
    print("| " + c + " | " + " | ".join(f"{st.median(r):.3f} ({min(r):.3f}-{max(r):.3f})" for r in ratios[c]) + " |")
PY

if [ -n "$cg_case" ]; then
  command -v valgrind >/dev/null || die "valgrind not found (apt-get install valgrind)"
  echo
  echo "callgrind (last level $ll B, 16-way, 64 B lines), $cg_case from '$(case_args "$cg_case" short)' to '$(case_args "$cg_case" long)': per added event and per added request"
  for which in base this; do
    for len in short long; do
      out=$work/cg.$which.$len
      one "$which" "$cg_case" "$len" "$out" valgrind --tool=callgrind --cache-sim=yes --LL="$ll",16,64 \
        --callgrind-out-file="$out.cg" >"$out.re"
      read -r req events <"$out.re"
      # summary: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
      echo "$req $events $(sed -nE 's/^summary: (.*)/\1/p' "$out.cg")" >"$out.n"
    done
    paste -d' ' "$work/cg.$which.short.n" "$work/cg.$which.long.n" | awk -v w="$which" '{
      n = NF / 2; de = $(n + 2) - $2; dr = $(n + 1) - $1
      ir = $(n + 3) - $3; d1 = $(n + 7) + $(n + 8) - $7 - $8; ll = $(n + 10) + $(n + 11) - $10 - $11
      printf "%s: +%d events, +%d requests: per event %.1f instructions, %.2f D1 misses, %.3f LL misses (data); per request %.1f instructions, %.2f LL misses (data)\n",
        w, de, dr, ir / de, d1 / de, ll / de, ir / dr, ll / dr }'
  done
fi
