#!/usr/bin/env bash
# Builds a profile-guided benchkv: g++ compiles an instrumented benchkv, three short
# simulator runs record where it spends its time, and g++ compiles benchkv again using
# that profile. The simulator runs the same code and gives the same output bytes, with
# 7.8% fewer instructions per request at C1 NP=16; its CPU time was 3% lower in a median
# of paired runs, inside the build machine's +-5% noise (docs/simulator_speed.md). It costs two builds of benchkv without the compiler cache
# (8.5 minutes with --jobs 2 on the 2-core build machine): worth it before long sweeps.
#
# usage: bash scripts/build_pgo.sh [--build DIR] [--jobs N] [--check PLAIN_BENCHKV] [--help]
#
#   --build DIR     the build tree (default build-pgo in the repository): new, empty, or one this script
#                   made (it refuses another build tree, whose settings it would
#                   change); the benchkv it leaves is DIR/apps/benchkv/benchkv, and
#                   DIR/profile holds the profile
#   --jobs N        parallel compile jobs (default: the number of cores)
#   --check BIN     afterwards, runs scripts/output_hashes.sh with BIN (a benchkv built
#                   without a profile, e.g. build/apps/benchkv/benchkv) and with the
#                   profiled benchkv, and fails unless every output is byte-identical
#   --help          prints this header
#
# The training runs are none of bench/sim_speed.sh's cases, so that benchmark does not
# measure a binary trained on itself. Exit status: 0 built (and checked), 1 a build, a
# training run or the check failed, 2 a bad option.
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die_usage() { echo "build_pgo.sh: $1 (see --help)" >&2; exit 2; }

build="" jobs=$(nproc) check=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) [[ $# -ge 2 && -n $2 ]] || die_usage "--build needs a directory"; build=$2; shift 2 ;;
    --jobs) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || die_usage "--jobs needs a positive integer, got '${2:-}'"
            jobs=$2; shift 2 ;;
    --check) [[ $# -ge 2 && -x $2 && -f $2 ]] || die_usage "--check needs an executable benchkv, got '${2:-}'"
             check=$(realpath "$2"); shift 2 ;;
    --help|-h) usage; exit 0 ;;
    *) die_usage "unknown option '$1'" ;;
  esac
done
command -v g++ >/dev/null || { echo "build_pgo.sh: g++ not found (run scripts/setup.sh)" >&2; exit 1; }

build=$(realpath -m "${build:-$root/build-pgo}")  # a relative DIR is from where the script was started
cd "$root"
# The tree is reconfigured with profile flags and without tests: only a tree this script
# made (its marker file) or a new or empty one is used.
own_dir build_pgo.sh --build "$build" .build_pgo_tree
profile=$build/profile
bin=$build/apps/benchkv/benchkv
# The compiler cache is off for both builds: a profiled object depends on profile data
# the cache would not see.
export CCACHE_DISABLE=1
configure() {  # configure <extra C++ flags>: the same tree both times, so that the
  # profile's per-object file names (which hold the object's path) match
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBKV_TEST_GROUPS=none \
        -DCMAKE_CXX_FLAGS="$1" >/dev/null
}

echo "build_pgo: 1/3 instrumented build in $build" >&2
rm -rf "$profile"
configure "-fprofile-generate -fprofile-update=single -fprofile-dir=$profile"
cmake --build "$build" -j"$jobs" --target benchkv

echo "build_pgo: 2/3 training runs" >&2
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
train() { (cd "$scratch" && "$bin" "$@" --trim 0 -r 1 --no-progress --report none --inflight-samples "" \
                                       -o "$scratch/t.csv" >/dev/null) \
          || { echo "build_pgo.sh: training run failed: benchkv $*" >&2; exit 1; }; }
train --config "$root/configs/c1_np8.json" --np 12 -d 2e-3
train --config "$root/configs/c1_np16.json" --np 24 -d 1e-3
train --config "$root/configs/c1_np8.json" --np 16 --start-mode staggered --start-stagger-us 1000 -d 2e-3
[[ -n $(find "$profile" -name '*.gcda' -print -quit 2>/dev/null) ]] \
  || { echo "build_pgo.sh: the training runs wrote no profile under $profile" >&2; exit 1; }

echo "build_pgo: 3/3 build with the profile" >&2
configure "-fprofile-use -fprofile-partial-training -fprofile-dir=$profile -Wno-missing-profile"
cmake --build "$build" -j"$jobs" --target benchkv
echo "build_pgo: built $bin" >&2

if [[ -n $check ]]; then
  echo "build_pgo: checking output bytes against $check" >&2
  export BKV_HASH_DIR=$scratch/hashes  # one directory for both: summaries hold resolved paths
  bash scripts/output_hashes.sh "$check" > "$scratch/plain.txt"
  bash scripts/output_hashes.sh "$bin" > "$scratch/pgo.txt"
  if ! diff "$scratch/plain.txt" "$scratch/pgo.txt" >&2; then
    echo "build_pgo.sh: the profiled benchkv's outputs differ from $check's (above)" >&2; exit 1
  fi
  echo "build_pgo: all $(wc -l < "$scratch/pgo.txt") outputs identical" >&2
fi
