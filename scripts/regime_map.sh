#!/usr/bin/env bash
# Regime map: the equilibrium reached from a synchronized and from a staggered start, for
# NP from 2 to 32, with the calibrated model (configs/c1_np8.json, NP overridden).
# Writes out/regime.csv (np,start,mops_per_rank,cqe_per_loop,inflight) and
# out/figures/regime_map.png. Takes a few minutes (NP=32 is the slowest).
#   usage: scripts/regime_map.sh [extra benchkv options, e.g. --model other.json]
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHKV=${BENCHKV:-build/apps/benchkv/benchkv}
[ -x "$BENCHKV" ] || { echo "build benchkv first (bash scripts/run_main.sh builds it)" >&2; exit 2; }
mkdir -p out/regime
NPS=${NPS:-"2 4 6 8 10 12 14 16 20 24 28 32"}
echo "np,start,mops_per_rank,cqe_per_loop,inflight" > out/regime.csv
for np in $NPS; do
  for start in sync staggered; do
    p=out/regime/np${np}_$start
    "$BENCHKV" --config configs/c1_np8.json --np "$np" --start-mode "$start" --start-stagger-us 1000 \
      -d 0.03 --trim 5 --no-progress -o "$p.csv" --inflight-samples "" "$@" 2>/dev/null
    python3 - "$p.summary.json" "$np" "$start" >> out/regime.csv <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); r = s["runs"][0]
d0 = [d for d in s["daemons"] if d["daemon"] == 0]
print(f"{sys.argv[2]},{sys.argv[3]},{r['total_mops'] / len(r['per_rank_mops']):.4f},"
      f"{sum(d['cqe_per_loop_avg'] for d in d0) / len(d0):.4f},{sum(d['inflight_avg'] for d in d0) / len(d0):.1f}")
PY
    tail -1 out/regime.csv >&2
  done
done
/usr/bin/python3 - <<'PY'
import csv, os
import matplotlib; matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open("out/regime.csv")))
fig, axes = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
for start in ("sync", "staggered"):
    rr = sorted((int(r["np"]), float(r["mops_per_rank"]), float(r["cqe_per_loop"])) for r in rows if r["start"] == start)
    axes[0].plot([r[0] for r in rr], [r[1] for r in rr], "o-", label=f"{start} start")
    axes[1].plot([r[0] for r in rr], [r[2] for r in rr], "o-", label=f"{start} start")
axes[0].set_ylabel("Mops per rank"); axes[1].set_ylabel("CQEs per loop"); axes[1].set_yscale("log")
axes[1].set_xlabel("NP (nodes)")
for ax in axes: ax.grid(alpha=0.3); ax.legend(fontsize=8)
fig.suptitle("Regime map (model configs/model/c1.json): synchronized vs staggered start")
fig.tight_layout(); os.makedirs("out/figures", exist_ok=True); fig.savefig("out/figures/regime_map.png", dpi=110)
print("wrote out/regime.csv and out/figures/regime_map.png")
PY
