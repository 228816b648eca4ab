#!/usr/bin/env bash
# The whole calibration suite (configs/calibration/suite.json): builds benchkv, runs every
# experiment in the simulator and prints simulated against measured for every figure of
# docs/calibration.md, with the error of each and one score (median and worst error).
# Extra arguments go to scripts/calibrate.py (e.g. --model-dir DIR, --only c5, --csv FILE),
# which checks them before anything is installed or built.
# Usage: bash scripts/calibrate.sh [calibrate.py options]   (--help: these and calibrate.py's)
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
cd "$(dirname "$0")/.."
for a in "$@"; do
  case $a in -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; echo; exec python3 scripts/calibrate.py --help ;; esac
done
python3 scripts/calibrate.py --check-args "$@"
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target benchkv
exec python3 scripts/calibrate.py --csv out/calibration.csv "$@"
