#!/usr/bin/env bash
# The whole calibration suite (configs/calibration/suite.json): builds benchkv, runs every
# experiment in the simulator and prints simulated against measured for every figure of
# docs/calibration.md, with the error of each and one score (median and worst error).
# Extra arguments go to scripts/calibrate.py (e.g. --model-dir DIR, --only c5, --csv FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target benchkv
exec python3 scripts/calibrate.py --csv out/calibration.csv "$@"
