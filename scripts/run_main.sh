#!/usr/bin/env bash
# The main job: the simulator's bistability experiment on its default config.
#   C1 set-up (Delegation, 1 daemon + 46 clients x QD 32 per node, the original's loop,
#   model configs/model/c1.json): NP=8 and NP=16 from a synchronized start, and NP=16 from
#   a staggered start (the same model and NP ending in the other equilibrium). Prints
#   measured vs simulated like for like, what the model reproduces and what it misses,
#   and writes the pictures to out/figures/.
# Usage: bash scripts/run_main.sh   (no arguments; BENCHKV=PATH runs the experiment with that benchkv
#        instead of build/'s, which it builds in any case)
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
script_help "$0" "$@"
script_args run_main.sh 0 "$@"
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
    print(f"{n:20s} start={start:9s} {m:6.2f} Mops per rank (simulated, steady state: the kept epochs)")
high = lambda m: m > 3.0  # the two equilibria sit near 1 and near 7 Mops per rank
np8, np16, np16s = (rows[n][1] for n in ("c1_np8", "c1_np16", "c1_np16_staggered"))
print()
print("What the default model reproduces here and what it misses (measured: NP=8 collapsed to 1.10, NP=16 held 6.88):")
print(f"  NP=16 from a synchronized start: {'high, as measured' if high(np16) else 'LOW: the measured NP=16 held high'}")
print(f"  NP=16 from a staggered start: {'low: the same NP has two equilibria' if not high(np16s) else 'high (no second equilibrium here)'}")
print(f"  NP=8 from a synchronized start: {'low, as measured' if not high(np8) else 'HIGH: a miss, the measured NP=8 ran low (its own loop figures and throughput disagree by 41%)'}")
# Every other figure: the default model's scored table, as scripts/calibrate.py wrote it.
import csv, statistics
rows = [r for r in csv.DictReader(open("docs/figures/calibration_default.csv")) if r["scored"] == "True"]
errors = [abs(float(r["error_pct"])) for r in rows]
misses = {}
for r in rows:
    if abs(float(r["error_pct"])) > 30:
        misses.setdefault(r["experiment"], []).append(f"{r['figure']} {float(r['error_pct']):+.0f}%")
print(f"  every calibration figure (docs/figures/calibration_default.csv, from bash scripts/calibrate.sh): "
      f"median error {statistics.median(errors):.0f}% over {len(rows)} figures, "
      f"{sum(e <= 30 for e in errors)} within 30%; outside 30%:")
for experiment, figures in misses.items():
    print(f"    {experiment}: {', '.join(figures)}")
print("  docs/bistability.md says what each miss asks for")
PY
/usr/bin/python3 scripts/plot_bistability.py out/figures "NP=8 sync=out/c1_np8" "NP=16 sync=out/c1_np16" \
  "NP=16 staggered=out/c1_np16_staggered"
echo "pictures: out/figures/timeseries.png out/figures/timeseries_start.png out/figures/cqe_histogram.png (regime map: build/apps/benchkv/benchkv sweep configs/sweeps/regime_map.json -j 2, then /usr/bin/python3 scripts/plot_sweep.py configs/sweeps/regime_map.json)"
