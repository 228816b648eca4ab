#!/usr/bin/env python3
"""Measured (docs/calibration.md, C1) vs simulated, side by side, from benchkv summaries.

usage: c1_table.py NP=SUMMARY.json [NP=SUMMARY.json ...]
Prints a table and returns non-zero if a summary is missing or malformed.
"""
import json
import sys

# docs/calibration.md §C1: Delegation, QD=32, 1 daemon + 46 clients per node (measured).
MEASURED = {
    2: {"mops_rank": 7.63, "inflight": None, "cqe_loop": 4.6, "loops_10s_M": 8.6},
    8: {"mops_rank": 1.10, "inflight": 1343, "cqe_loop": 0.97, "loops_10s_M": 14.0},
    16: {"mops_rank": 6.88, "inflight": 833, "cqe_loop": 28.0, "loops_10s_M": 2.3},
}


def simulated(path):
    with open(path) as f:
        s = json.load(f)
    run = s["runs"][0]
    d0 = [d for d in s["daemons"] if d["daemon"] == 0 and d["run"] == run["run"]]
    n = len(d0)
    loops_per_s = sum(d["extra"]["loops_per_s"] for d in d0) / n
    return {
        "mops_rank": run["total_mops"] / len(run["per_rank_mops"]),
        "inflight": sum(d["inflight_avg"] for d in d0) / n,
        # C1's "CQEs per loop" is compared with RPC completions per loop (docs/calibration.md,
        # "What CQEs per loop counts"); hardware CQEs per loop are printed beside it.
        "cqe_loop": sum(d["completions_per_loop_avg"] for d in d0) / n,
        "hw_cqe_loop": sum(d["cqe_per_loop_avg"] for d in d0) / n,
        "loops_10s_M": loops_per_s * 10 / 1e6,
        "hist": {k: sum(d["completions_per_loop_hist"][k] for d in d0) / sum(d["loops"] for d in d0)
                 for k in ("0", "1", "2-10", "11-100", ">100")},
    }


def cell(meas, sim):
    if meas is None:
        return f"{'--':>8} {sim:>10.2f} {'':>7}"
    dev = (sim - meas) / meas * 100
    return f"{meas:>8.2f} {sim:>10.2f} {dev:>+6.0f}%"


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = []
    for arg in argv[1:]:
        np_s, sep, path = arg.partition("=")
        if not sep or not np_s.isdigit():
            print(f"c1_table.py: {arg!r} is not NP=SUMMARY.json", file=sys.stderr)
            return 2
        try:
            rows.append((int(np_s), simulated(path)))
        except OSError as e:
            print(f"c1_table.py: cannot read {path}: {e.strerror}", file=sys.stderr)
            return 2
        except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError) as e:
            print(f"c1_table.py: {path} is not a Delegation KV summary with daemon #0 figures "
                  f"({type(e).__name__}: {e})", file=sys.stderr)
            return 2
    print("C1 (Delegation, QD=32, 1 daemon + 46 clients): measured vs simulated "
          "(model configs/model/c1.json, synchronized start)")
    print(f"{'NP':>3} | {'Mops per rank':^27} | {'calls in flight (avg)':^27} | {'completions per loop':^27} | {'loops per 10 s (M)':^27}")
    print(f"{'':>3} | " + " | ".join([f"{'meas':>8} {'sim':>10} {'dev':>7}"] * 4))
    for np_, sim in sorted(rows):
        m = MEASURED.get(np_, {})
        print(f"{np_:>3} | " + " | ".join(cell(m.get(k), sim[k]) for k in ("mops_rank", "inflight", "cqe_loop", "loops_10s_M")))
    print()
    print("Hardware CQEs per loop (simulated; the other reading of the measured figure): "
          + ", ".join(f"NP={np_} {sim['hw_cqe_loop']:.2f}" for np_, sim in sorted(rows)))
    print("Completions per loop, share of loops (simulated):")
    for np_, sim in sorted(rows):
        print(f"  NP={np_:<3} " + "  ".join(f"{k}: {100 * v:5.1f}%" for k, v in sim["hist"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
