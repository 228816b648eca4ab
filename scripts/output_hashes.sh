#!/usr/bin/env bash
# Prints the SHA-256 of every output file of a fixed set of short simulator runs, one
# "run/file hash" line each. The set covers every simulated backend, several daemons per
# node, in-flight samples, a trace, both start modes and the C1 and C2 model files, so a
# change that is meant to keep the simulator's behaviour can be checked byte for byte:
#   bash scripts/output_hashes.sh build/apps/benchkv/benchkv > after.txt; diff before.txt after.txt
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
usage() {
  cat <<'EOF'
usage: [BKV_HASH_DIR=DIR] bash scripts/output_hashes.sh [-h|--help] path/to/benchkv
Runs a fixed set of short simulations with the given benchkv and prints "run/file sha256"
for every file they write (a summary without its "provenance"). The runs happen in DIR
(default /tmp/bkv_output_hashes): a summary records the model file's resolved path, so
hashes compare only between invocations with the same DIR. DIR must be new, empty, or
one this script made (it holds the script's marker file): the script clears it before and
after the runs, and removes it at the end if it made it. A directory holding anything
else is refused, and nothing in it is touched.
EOF
}
case ${1:-} in
  -h | --help) usage; exit 0 ;;
  "") usage >&2; exit 2 ;;
  -*) echo "output_hashes: unknown option $1" >&2; usage >&2; exit 2 ;;
esac
[ $# -eq 1 ] || { echo "output_hashes: one argument, the benchkv binary (got $#: $*)" >&2; exit 2; }
[ -f "$1" ] && [ -x "$1" ] || { echo "output_hashes: $1: no executable file there (give path/to/benchkv)" >&2; exit 2; }
bin=$(realpath "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
# A fixed directory: the summary records the effective configuration with the model file's
# resolved path, so every checkout must run from the same place to give the same bytes.
# Only a directory the script made (new, empty, or holding its marker) is ever cleared.
work=${BKV_HASH_DIR:-/tmp/bkv_output_hashes}
marker=.output_hashes_workdir
own_dir output_hashes BKV_HASH_DIR "$work" "$marker"
made=$OWN_DIR_MADE
clear_work() { find "$work" -mindepth 1 -maxdepth 1 -exec rm -rf {} +; }
clear_work
touch "$work/$marker"
trap 'clear_work; if [ "$made" = 1 ]; then rmdir "$work"; fi' EXIT
cp -r "$root/configs" "$work/configs"

small=(--transport sim --np 2 --client-threads 2 --queue-depth 4 -d 0.006 --interval-ms 1 --trim 1 -r 1
       --no-progress --server-threads 2 --inflight-samples inflight.csv --trace trace.json
       --trace-window 1000:1100 -o out.csv)
run() {  # run <name> <args...>
  local name=$1; shift
  mkdir -p "$work/$name"
  # Its messages go beside the run's directory, not into it (every file in it is hashed).
  local status=0
  (cd "$work/$name" && "$bin" "$@" >/dev/null 2>"$work/$name.stderr") || status=$?
  if [ "$status" != 0 ]; then
    echo "output_hashes: run $name failed (exit $status): $bin $*" >&2
    tail -n 5 "$work/$name.stderr" >&2
    exit 1
  fi
  # A summary is hashed without its "provenance" object (host, date, commit: different on
  # every run by design); the rest of it is re-dumped as benchkv writes it (indent 2).
  (cd "$work/$name" && for f in $(ls | sort); do
     case $f in
       *.summary.json) h=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("provenance"); sys.stdout.write(json.dumps(d, indent=2, sort_keys=True, ensure_ascii=False) + "\n")' "$f" | sha256sum | cut -d' ' -f1) ;;
       *) h=$(sha256sum "$f" | cut -d' ' -f1) ;;
     esac
     echo "$name/$f $h"; done)
}
for b in meta delegation direct; do run "small_$b" "${small[@]}" "$b"; done
run c1_np8 --config ../configs/c1_np8.json -d 0.003 --interval-ms 1 --trim 0 -r 1 --no-progress -o out.csv --inflight-samples inflight.csv
run c1_np16_staggered --config ../configs/c1_np16_staggered.json -d 0.002 --interval-ms 1 --trim 0 -r 1 \
    --no-progress -o out.csv --inflight-samples inflight.csv
run c5_np4 --config ../configs/c1_np8.json --np 4 --queue-depth 1 --batch-hold-us 0 -d 0.003 --interval-ms 1 \
    --trim 0 -r 1 --no-progress -o out.csv --inflight-samples inflight.csv
run c2_clients8 --config ../configs/c2_clients8.json -d 0.003 --interval-ms 1 --trim 0 -r 1 --no-progress -o out.csv --inflight-samples inflight.csv
run policies --config ../configs/c1_np8.json --np 4 --adaptive-hold --adaptive-poll-budget -d 0.002 \
    --interval-ms 1 --trim 0 -r 1 --no-progress -o out.csv --inflight-samples inflight.csv
run rtt_hold --config ../configs/c1_np8.json --np 4 --hold-rtt-multiplier 1.5 --poll-budget 4 -d 0.002 \
    --interval-ms 1 --trim 0 -r 1 --no-progress -o out.csv --inflight-samples inflight.csv
