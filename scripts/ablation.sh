#!/usr/bin/env bash
# Ablation of the calibrated model: neutralize one element at a time and see whether
# the bistability survives. For each variant: NP=8 and NP=16 from a synchronized start,
# NP=16 from a staggered start (Mops per rank, CQEs per loop). Writes out/ablation.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHKV=${BENCHKV:-build/apps/benchkv/benchkv}
[ -x "$BENCHKV" ] || { echo "build benchkv first (bash scripts/run_main.sh builds it)" >&2; exit 2; }
mkdir -p out/ablation
python3 - <<'PY'
import json
base = json.load(open("configs/model/c1.json"))
variants = {
    "calibrated": {},
    "per-QP pipeline (qp_window 8)": {"nic": {"send": {"qp_window": 8}}},
    "BlueFlame + inline (no DMA reads for small WQEs)": {"nic": {"blueflame_max_wqes": 1, "inline_max_bytes": 220}},
    "unloaded PCIe reads (600 ns)": {"nic": {"pcie": {"read_latency_ns": 600}}},
    "no ring-head contention": {"ring_head_contention": False},
}
def merge(a, b):
    for k, v in b.items():
        if isinstance(v, dict): merge(a.setdefault(k, {}), v)
        else: a[k] = v
for i, (name, change) in enumerate(variants.items()):
    m = json.loads(json.dumps(base)); merge(m, change)
    m["description"] = name
    json.dump(m, open(f"out/ablation/model{i}.json", "w"), indent=1)
open("out/ablation/names.txt", "w").write("\n".join(variants) + "\n")
PY
echo "variant,case,mops_per_rank,cqe_per_loop" > out/ablation.csv
i=0
while IFS= read -r name; do
  for case in "8 sync" "16 sync" "16 staggered"; do
    set -- $case
    p=out/ablation/m${i}_np$1_$2
    "$BENCHKV" --config configs/c1_np8.json --model "out/ablation/model$i.json" --np "$1" --start-mode "$2" \
      --start-stagger-us 1000 -d 0.03 --no-progress -o "$p.csv" --inflight-samples "" 2>/dev/null
    python3 - "$p.summary.json" "$name" "NP=$1 $2" >> out/ablation.csv <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); r = s["runs"][0]
d0 = [d for d in s["daemons"] if d["daemon"] == 0]
print(f"\"{sys.argv[2]}\",{sys.argv[3]},{r['total_mops'] / len(r['per_rank_mops']):.3f},"
      f"{sum(d['cqe_per_loop_avg'] for d in d0) / len(d0):.2f}")
PY
  done
  i=$((i + 1))
done < out/ablation/names.txt
python3 - <<'PY'
import csv
rows = list(csv.DictReader(open("out/ablation.csv")))
cases = ["NP=8 sync", "NP=16 sync", "NP=16 staggered"]
print(f"{'variant':50s} | " + " | ".join(f"{c:^22s}" for c in cases))
print(f"{'':50s} | " + " | ".join(f"{'Mops/rank':>10s} {'CQE/loop':>10s}" for _ in cases))
for v in dict.fromkeys(r["variant"] for r in rows):
    cells = []
    for c in cases:
        r = next(x for x in rows if x["variant"] == v and x["case"] == c)
        cells.append(f"{float(r['mops_per_rank']):>10.2f} {float(r['cqe_per_loop']):>10.2f}")
    print(f"{v:50s} | " + " | ".join(cells))
PY
