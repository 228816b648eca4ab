#!/usr/bin/env python3
"""Time accounting of C1's daemon loops: what the measured rows say about the daemon's costs.

A polling daemon is always inside some loop, so over a run of T seconds
    T = loops x l0 + remote completions x c
where l0 is the cost of a loop that finds nothing and c the daemon's cost per remote
completion (the call it issued, the request it served for the peer, the answer it handed
back: one of each per remote completion in a symmetric run; local requests ride along in
proportion). C1 gives loops and Mops per rank at NP=2, 8 and 16 (docs/calibration.md), so two
rows determine l0 and c, and the third is a check with no free parameter.

usage: c1_accounting.py [CALIBRATION.csv ...]
  With no argument: the measured rows only. With calibration tables written by
  scripts/calibrate.py: the same accounting applied to each model's simulated C1 rows.
Exit status 1 if a table lacks one of the C1 figures used here.
"""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # also when loaded as a module from elsewhere
from cli_help import help_or_refuse  # noqa: E402

RUN_S = 10.0  # C1 runs 10 s; loops are quoted per 10 s

# docs/calibration.md §C1 (measured): Mops per rank, daemon loops per 10 s (millions).
MEASURED = {2: (7.63, 8.6), 8: (1.10, 14.0), 16: (6.88, 2.3)}


def remote_completions_M(np_, mops_rank):
    """Remote completions per 10 s at one node's daemon #0, in millions (uniform ranks:
    a request is remote with probability (NP-1)/NP)."""
    return mops_rank * (np_ - 1) / np_ * RUN_S


def solve(rows, a=2, b=16):
    """l0 and c (both in us) from rows a and b of {np: (mops_rank, loops_M)}."""
    la, ra = rows[a][1], remote_completions_M(a, rows[a][0])
    lb, rb = rows[b][1], remote_completions_M(b, rows[b][0])
    det = la * rb - lb * ra
    l0 = RUN_S * (rb - ra) / det
    c = RUN_S * (la - lb) / det
    return l0, c


def report(name, rows):
    l0, c = solve(rows)
    print(f"{name}: empty loop l0 = {l0:.3f} us, cost per remote completion c = {c:.3f} us (from NP=2 and NP=16)")
    if l0 <= 0:
        print("  not determined: at NP=2 and NP=16 nearly all of the time is work (c x r ~ 1),"
              " so the two rows cannot separate the loop's cost from the work's")
    print(f"  {'NP':>3} {'Mops/rank':>10} {'loops/10s (M)':>14} {'c x r':>7} {'loop (us)':>10} {'accounted (s of 10)':>20}")
    for np_ in sorted(rows):
        mops, loops = rows[np_]
        r = remote_completions_M(np_, mops) / RUN_S  # per us, i.e. M/s
        accounted = loops * l0 + remote_completions_M(np_, mops) * c
        print(f"  {np_:>3} {mops:>10.2f} {loops:>14.2f} {c * r:>7.2f} {RUN_S / loops:>10.3f} {accounted:>20.2f}")
    # One WRITE+IMM per flush with data: at NP=2 (one endpoint) a loop that answers and
    # calls flushes twice, so the node posts about 2 WQEs per loop.
    print(f"  NP=2: ~2 WQEs per loop = {2 * rows[2][1] / RUN_S:.2f} M WQEs/s per node")
    return l0, c


def simulated_rows(path):
    fig = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            fig[(r["experiment"], r["figure"])] = float(r["simulated"])
    rows = {}
    for np_ in (2, 8, 16):
        try:
            rows[np_] = (fig[(f"c1_np{np_}", "mops_per_rank")], fig[(f"c1_np{np_}", "loops_per_10s_M")])
        except KeyError as e:
            sys.exit(f"c1_accounting: {path} has no simulated figure {e.args[0]}")
    return rows


def main():
    help_or_refuse(sys.argv, __doc__, "c1_accounting.py")
    for path in sys.argv[1:]:
        if not os.path.isfile(path):
            print(f"c1_accounting.py: {path}: no such calibration table", file=sys.stderr)
            sys.exit(2)
    report("measured (C1)", MEASURED)
    for path in sys.argv[1:]:
        print()
        report(f"simulated ({path})", simulated_rows(path))


if __name__ == "__main__":
    main()
