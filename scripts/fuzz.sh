#!/usr/bin/env bash
# Long fuzzing runs (docs/reliability.md): builds the libFuzzer harnesses of fuzz/ with
# clang under ASan+UBSan (build-fuzz/) and runs each for FUZZ_SECONDS seconds (default
# 600) or, with FUZZ_RUNS set, that many executions. The working corpus of each harness
# is build-fuzz/fuzz/work/<name> (seeded from fuzz/corpus/<name>, which is never written);
# a crash is saved as build-fuzz/fuzz/crash-<name>-*, and the script exits non-zero.
# Usage: scripts/fuzz.sh [harness...]   (default: every harness)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
JOBS=${JOBS:-$(nproc)}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_C_COMPILER=clang-14 -DBKV_SANITIZE=address -DBKV_FUZZ=ON -DBKV_TEST_GROUPS=fuzz \
  "-DBKV_SKIP=bench;apps/benchkv;transports/ucx" >/dev/null
cmake --build build-fuzz -j"$JOBS"

harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
  for f in fuzz/corpus/*/; do harnesses+=("$(basename "$f")"); done
fi
limit=(-max_total_time="${FUZZ_SECONDS:-600}")
[ -n "${FUZZ_RUNS:-}" ] && limit=(-runs="$FUZZ_RUNS")
status=0
for h in "${harnesses[@]}"; do
  bin=build-fuzz/fuzz/fuzz_$h
  [ -x "$bin" ] || { echo "fuzz.sh: no harness $h (built: $(ls build-fuzz/fuzz | grep '^fuzz_' | tr '\n' ' '))" >&2; exit 2; }
  work=build-fuzz/fuzz/work/$h
  mkdir -p "$work"
  echo "=== fuzz $h (${limit[*]})"
  if "$bin" "${limit[@]}" -max_len=4096 -timeout=10 -print_final_stats=1 \
       -artifact_prefix="build-fuzz/fuzz/crash-$h-" "$work" "fuzz/corpus/$h" 2>build-fuzz/fuzz/$h.log; then
    grep -E '^stat::number_of_executed_units|^Done' "build-fuzz/fuzz/$h.log" | sed "s/^/$h: /"
  else
    status=1
    echo "fuzz.sh: $h FAILED; see build-fuzz/fuzz/$h.log" >&2
    grep -E 'ERROR|violated|Test unit written' "build-fuzz/fuzz/$h.log" | head -5 >&2
  fi
done
exit $status
