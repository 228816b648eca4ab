#!/usr/bin/env bash
# The main job. Interim form (until the simulator experiment lands): builds and runs
# copyrpc over the instant loopback and prints its message rate.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target bench_copyrpc_loopback
build/bench/bench_copyrpc_loopback rate 8 32 2
