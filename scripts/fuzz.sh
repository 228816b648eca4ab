#!/usr/bin/env bash
# Long fuzzing runs (docs/reliability.md): builds the libFuzzer harnesses of fuzz/ with
# clang under ASan+UBSan (build-fuzz/) and runs each for FUZZ_SECONDS seconds (default
# 600) or, with FUZZ_RUNS set, that many executions. The working corpus of each harness
# is build-fuzz/fuzz/work/<name> (seeded from fuzz/corpus/<name>, which is never written);
# a crash is saved as build-fuzz/fuzz/crash-<name>-*, and the script exits non-zero.
# Each harness's run leaves a record, build-fuzz/fuzz/records/<name>.txt (one "key: value"
# a line: the commit, the limit, executions, seconds, coverage and features at the end,
# the corpus libFuzzer held and the working corpus on disk, the result), the figures
# docs/reliability.md quotes for a campaign. After the run the working corpus is
# minimized to edge coverage (libFuzzer -merge=1 -use_counters=0 over the seeds: the
# inputs that reach an edge the seeds do not) into build-fuzz/fuzz/minimized/<name>; with FUZZ_KEEP=1 that minimized set replaces
# fuzz/grown/<name>, the grown corpus kept in the repository, which CI's short runs and
# the next campaign start from.
# Usage: [FUZZ_SECONDS=N | FUZZ_RUNS=N] [FUZZ_KEEP=1] scripts/fuzz.sh [harness...]
#        (default: every harness; a harness is named as its fuzz/corpus/<name>)
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
script_help "$0" "$@"
script_args fuzz.sh 1000 "$@"
cd "$(dirname "$0")/.."
for h in "$@"; do
  [ -d "fuzz/corpus/$h" ] || { echo "fuzz.sh: no harness $h (harnesses: $(ls fuzz/corpus | tr '\n' ' '))" >&2; exit 2; }
done
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
mkdir -p build-fuzz/fuzz/records
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit (with uncommitted changes)"
for h in "${harnesses[@]}"; do
  bin=build-fuzz/fuzz/fuzz_$h
  [ -x "$bin" ] || { echo "fuzz.sh: no harness $h (built: $(ls build-fuzz/fuzz | grep '^fuzz_' | tr '\n' ' '))" >&2; exit 2; }
  work=build-fuzz/fuzz/work/$h
  log=build-fuzz/fuzz/$h.log
  max_len=$(cat "build-fuzz/fuzz/fuzz_$h.max_len")  # per harness (fuzz/CMakeLists.txt, MAX_LEN)
  mkdir -p "$work"
  inputs=("fuzz/corpus/$h")
  [ -d "fuzz/grown/$h" ] && inputs+=("fuzz/grown/$h")
  echo "=== fuzz $h (${limit[*]})"
  started=$(date -u +%Y-%m-%dT%H:%M:%SZ); t0=$(date +%s)
  if "$bin" "${limit[@]}" -max_len="$max_len" -timeout=10 -print_final_stats=1 \
       -artifact_prefix="build-fuzz/fuzz/crash-$h-" "$work" "${inputs[@]}" 2>"$log"; then
    result=ok
    grep -E '^stat::number_of_executed_units|^Done' "$log" | sed "s/^/$h: /"
  else
    status=1
    result="FAILED (see $log)"
    echo "fuzz.sh: $h FAILED; see $log" >&2
    grep -E 'ERROR|violated|Test unit written' "$log" | head -5 >&2
  fi
  seconds=$(( $(date +%s) - t0 ))
  # Minimize: the seeds go first, as what is covered already; -merge=1 adds from the
  # working corpus (and the kept grown corpus) only inputs that reach new edges (hit
  # counts left out: -use_counters=0 keeps a few hundred inputs where counts keep
  # thousands), named by their content's SHA-1. The grown corpus is what it added.
  min=build-fuzz/fuzz/minimized/$h
  rm -rf "$min" "$min.seeds"; mkdir -p "$min"
  cp fuzz/corpus/"$h"/* "$min"/
  ls "$min" >"$min.seeds"
  minimized="not minimized (the run failed)"
  if [ "$result" = ok ]; then
    if "$bin" -merge=1 -use_counters=0 -max_len="$max_len" -timeout=10 "$min" "$work" "${inputs[@]:1}" 2>"$log.merge"; then
      while read -r seed; do rm -f "$min/$seed"; done <"$min.seeds"
      minimized="$(find "$min" -type f | wc -l) files, $(find "$min" -type f -printf '%s\n' | awk '{s+=$1} END{print s+0}') bytes"
      if [ "${FUZZ_KEEP:-0}" = 1 ]; then
        rm -rf "fuzz/grown/$h"; mkdir -p "fuzz/grown/$h"
        cp "$min"/* "fuzz/grown/$h"/ 2>/dev/null || true
        minimized="$minimized, kept in fuzz/grown/$h"
      fi
    else
      status=1
      minimized="merge FAILED (see $log.merge)"
      echo "fuzz.sh: $h: minimizing FAILED; see $log.merge" >&2
    fi
  fi
  # The last status line libFuzzer printed ("#N DONE cov: C ft: F corp: U/Bb ...").
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  field() { sed -nE "s/.* $1: ([^ ]+).*/\1/p" <<<"$last"; }
  {
    echo "harness: $h"
    echo "commit: $commit"
    echo "started: $started"
    echo "limit: ${limit[*]} -max_len=$max_len -timeout=10"
    echo "executions: $(sed -nE 's/^stat::number_of_executed_units: *//p' "$log")"
    echo "seconds: $seconds"
    echo "coverage_edges: $(field cov)"
    echo "features: $(field ft)"
    echo "corpus_in_memory: $(field corp)"
    echo "new_units_added: $(sed -nE 's/^stat::new_units_added: *//p' "$log")"
    echo "working_corpus_files: $(find "$work" -type f | wc -l)"
    echo "working_corpus_bytes: $(find "$work" -type f -printf '%s\n' | awk '{s+=$1} END{print s+0}')"
    echo "grown_corpus_minimized: $minimized"
    echo "result: $result"
  } >"build-fuzz/fuzz/records/$h.txt"
  echo "$h: record in build-fuzz/fuzz/records/$h.txt"
done
exit $status
