#!/usr/bin/env python3
"""Runs the C5 set-up (and optionally C1's) on one model with extra options, and prints per
run: total Mops, Mops per rank, completions per loop, mean loop, and node 0's send path
(WQEs per second, the busiest send-side station's utilisation and mean wait).

The C5 set-up is configs/calibration/suite.json's "c5_npN" (configs/c1_np8.json with
--np N --queue-depth 1 --batch-hold-us 0 -d 0.02 --trim 2); C1 runs configs/c1_npN.json.

usage: c5_np4_runs.py MODEL.json [--np 2,4,8,16,32] [--c1 2,8,16] [--seeds 1]
                      [--set KEY.PATH=VALUE ...] [-- EXTRA...]
  --set changes one model key in a temporary copy of MODEL.json (e.g. nic.send.per_wqe_ns=400)
  e.g. python3 docs/fidelity/c5_np4_runs.py configs/model/candidates/node_serial_send/c1.json \
           --np 4 -- --start-mode staggered --start-stagger-us 1000
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCHKV = os.path.join(ROOT, "build/apps/benchkv/benchkv")
MEASURED_C5 = {2: 13.775, 4: 21.795, 8: 8.17, 16: 14.545, 32: 27.16}  # total Mops
MEASURED_C1 = {2: 7.63, 8: 1.10, 16: 6.88}  # Mops per rank


def apply_sets(model, sets):
    """Applies KEY.PATH=VALUE settings (VALUE is JSON) to a model dict in place."""
    for kv in sets:
        key, value = kv.split("=", 1)
        node = model
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = json.loads(value)


def run(args):
    with tempfile.TemporaryDirectory(prefix="c5np4_") as d:
        cmd = [BENCHKV] + args + ["-o", os.path.join(d, "o.csv"), "--no-progress", "--report", "none"]
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"{' '.join(cmd)}\nexit {p.returncode}: {p.stderr[-2000:]}")
        with open(os.path.join(d, "o.summary.json")) as f:
            return json.load(f)


def describe(s, np_):
    total = s["overall"]["mops"]["mean"] if isinstance(s["overall"].get("mops"), dict) else s["runs"][0]["mops"]
    d0 = [d for d in s["daemons"] if d["daemon"] == 0]
    cpl = sum(d["completions_per_loop_avg"] for d in d0) / len(d0)
    loop = sum(d["extra"]["loop_ns_avg"] for d in d0) / len(d0) / 1000
    nic = s["simulator"]["nics"][0]
    el = nic["elapsed_ns"] / 1e9
    wqe = nic["counters"]["wqes_sent"] / el / 1e6
    st = nic["stations"]
    se = st["send_engines"]
    rt = st["pcie_read_tags"]
    busiest = max(("send_engines", se), ("pcie_read_tags", rt), key=lambda kv: kv[1]["utilization"] if kv[0] == "send_engines" else kv[1]["busy_ns"] / nic["elapsed_ns"])
    util = busiest[1]["utilization"] if busiest[0] == "send_engines" else busiest[1]["busy_ns"] / nic["elapsed_ns"]
    return total, total / np_, cpl, loop, wqe, busiest[0], util, busiest[1]["mean_wait_ns"] / 1000, nic["admission"]["mean_wait_ns"] / 1000


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--np", default="2,4,8,16,32")
    ap.add_argument("--c1", default="")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args(argv)
    tmp = None
    if a.set:
        with open(os.path.join(ROOT, a.model)) as f:
            model = json.load(f)
        apply_sets(model, a.set)
        tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(model, tmp)
        tmp.close()
        print(f"model {a.model} with {', '.join(a.set)}")
        a.model = tmp.name
    print(f"model {a.model}; extra {' '.join(extra) or '(none)'}")
    print(f"{'set-up':<10} {'seed':>4} {'total':>7} {'meas':>7} {'err':>6} {'/rank':>6} {'compl/loop':>10} {'loop us':>8} "
          f"{'M WQE/s':>8} {'station':>15} {'util':>5} {'wait us':>8} {'admit us':>8}")
    sets = [("c5", int(n)) for n in a.np.split(",") if n] + [("c1", int(n)) for n in a.c1.split(",") if n]
    for kind, np_ in sets:
        for seed in a.seeds.split(","):
            if kind == "c5":
                args = ["--config", "configs/c1_np8.json", "--np", str(np_), "--queue-depth", "1",
                        "--batch-hold-us", "0", "-d", "0.02", "--trim", "2", "-r", "1"]
                meas = MEASURED_C5[np_]
            else:
                args = ["--config", f"configs/c1_np{np_}.json", "-r", "1"]
                meas = MEASURED_C1[np_] * np_
            args += ["--model", a.model, "--seed", seed] + extra
            t, pr, cpl, loop, wqe, stn, util, wait, adm = describe(run(args), np_)
            print(f"{kind} NP={np_:<3} {seed:>4} {t:7.2f} {meas:7.2f} {100 * (t / meas - 1):+5.0f}% {pr:6.2f} {cpl:10.2f} {loop:8.2f} "
                  f"{wqe:8.2f} {stn:>15} {util:5.2f} {wait:8.2f} {adm:8.2f}")
    if tmp:
        os.unlink(tmp.name)


if __name__ == "__main__":
    main()
