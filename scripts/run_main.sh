#!/usr/bin/env bash
# The main job: the simulator's bistability experiment on its default config.
#   C1 set-up (Delegation, 1 daemon + 46 clients x QD 32 per node, the original's loop,
#   model configs/model/c1.json): NP=8 and NP=16 from a synchronized start, and NP=16 from
#   a staggered start (the same model and NP ending in the other equilibrium). Prints
#   measured vs simulated like for like, what the model reproduces and what it misses,
#   and writes the pictures to out/figures/.
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
def mops(name):
    s = json.load(open(f"out/{name}.summary.json"))
    r = s["runs"][0]
    return s["config"]["start_mode"], r["total_mops"] / len(r["per_rank_mops"])
rows = {n: mops(n) for n in ("c1_np8", "c1_np16", "c1_np16_staggered")}
for n, (start, m) in rows.items():
    print(f"{n:20s} start={start:9s} {m:6.2f} Mops per rank (steady state)")
high = lambda m: m > 3.0  # the two equilibria sit near 1 and near 7 Mops per rank
np8, np16, np16s = (rows[n][1] for n in ("c1_np8", "c1_np16", "c1_np16_staggered"))
print()
print("What the default model reproduces here and what it misses (measured: NP=8 collapsed to 1.10, NP=16 held 6.88):")
print(f"  NP=16 from a synchronized start: {'high, as measured' if high(np16) else 'LOW: the measured NP=16 held high'}")
print(f"  NP=16 from a staggered start: {'low: the same NP has two equilibria' if not high(np16s) else 'high (no second equilibrium here)'}")
print(f"  NP=8 from a synchronized start: {'low, as measured' if not high(np8) else 'HIGH: a miss, the measured NP=8 collapsed within ~1 ms'}")
print("  elsewhere (docs/calibration.md, bash scripts/calibrate.sh): median error 9% over 74 figures, 56 within 30%;")
print("  C5 within 12%, the C7 reply holds within 13%, C2 at 1-4 clients and C3 at QD=1 within 7%;")
print("  missed: C7's poll budget at NP=16 (stays high), C1's loop textures (fewer, longer loops; requests queued")
print("  outside copyrpc), C3 at QD=256 with 1 or 32-64 endpoints, C2 at 8-16 clients; docs/bistability.md")
print("  says what each miss asks for")
PY
/usr/bin/python3 scripts/plot_bistability.py out/figures "NP=8 sync=out/c1_np8" "NP=16 sync=out/c1_np16" \
  "NP=16 staggered=out/c1_np16_staggered"
echo "pictures: out/figures/timeseries.png out/figures/timeseries_start.png out/figures/cqe_histogram.png (regime map: benchkv sweep configs/sweeps/regime_map.json)"
