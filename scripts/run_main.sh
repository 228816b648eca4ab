#!/usr/bin/env bash
# The main job: the simulator's bistability experiment on its default config.
#   C1 set-up (Delegation, 1 daemon + 46 clients x QD 32 per node, model configs/model/c1.json):
#   NP=8 and NP=16 from a synchronized start, and NP=16 from a staggered start (the same
#   model and NP ending in the other equilibrium). Prints measured vs simulated and
#   writes the pictures to out/figures/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target benchkv
mkdir -p out
BENCHKV=${BENCHKV:-build/apps/benchkv/benchkv}
for cfg in c1_np8 c1_np16 c1_np16_staggered; do
  echo "=== benchkv --config configs/$cfg.json" >&2
  "$BENCHKV" --config "configs/$cfg.json" --no-progress
done
echo
python3 scripts/c1_table.py 8=out/c1_np8.summary.json 16=out/c1_np16.summary.json
echo
python3 - <<'PY'
import json
for name in ("c1_np16", "c1_np16_staggered"):
    s = json.load(open(f"out/{name}.summary.json"))
    r = s["runs"][0]
    print(f"{name:20s} start={s['config']['start_mode']:9s} {r['total_mops'] / len(r['per_rank_mops']):6.2f} Mops per rank")
print("(same model, same NP: the start decides the equilibrium)")
PY
/usr/bin/python3 scripts/plot_bistability.py out/figures "NP=8 sync=out/c1_np8" "NP=16 sync=out/c1_np16" \
  "NP=16 staggered=out/c1_np16_staggered"
echo "caveat: this model misses C5, C3, C4 and NP=16's texture, and its NP=16 high state needs clients' re-issues written"
echo "        at their step's start (with model key client_issue \"paced\" it collapses): docs/bistability.md, opening and section 8"
echo "pictures: out/figures/timeseries.png out/figures/timeseries_start.png out/figures/cqe_histogram.png (regime map: benchkv sweep configs/sweeps/regime_map.json)"
