#!/usr/bin/env python3
"""Measured (docs/calibration.md, C1) vs simulated, side by side, like for like.

usage: c1_table.py NP=SUMMARY.json [NP=SUMMARY.json ...]

C1's table figures were taken by the original once per daemon loop over the daemon's
whole life, start-up included, and averaged over loops (calibration notes, C6): they are
compared with the summary's "life" statistics (runs with life_s). C1's time series gives
steady-state bands: those are compared with the kept epochs. Prints the tables and
returns non-zero if a summary is missing or malformed.

"Responses per loop" is what C1's notes call "CQEs per loop": RPC responses handled per
daemon loop (the summary's completions_per_loop_*), not the hardware CQEs that benchkv's
own report calls "CQEs per loop" (cqe_per_loop_*); the table says so.
"""
import json
import sys

from cli_help import help_or_refuse

# docs/calibration.md §C1: Delegation, QD=32, 1 daemon + 46 clients per node (measured).
MEASURED = {
    2: {"mops_rank": 7.63, "inflight": None, "cpl": 4.6, "loops_M": 8.6},
    8: {"mops_rank": 1.10, "inflight": 1343, "cpl": 0.97, "loops_M": 14.0},
    16: {"mops_rank": 6.88, "inflight": 833, "cpl": 28.0, "loops_M": 2.3},
}
# C1's time series (steady state, C6): calls in flight and responses per loop.
STEADY = {
    8: {"inflight": (1370, 1470), "cpl": (0.58, 0.72)},
    16: {"inflight": (1390, 1420), "cpl": (107, 200)},
}
SHARES = {8: {"0": 62.0, "1": 32.4, "2-10": 5.6, ">100": 0.037}, 16: {"0": 93.1, "1": 0.76, "2-10": 0.67, ">100": 3.68}}


def simulated(path):
    with open(path) as f:
        s = json.load(f)
    if "life" not in s:
        raise KeyError("life (the run has no whole-life statistics: set life_s)")
    run = s["runs"][0]
    np_ = len(run["per_rank_mops"])
    life = [d for d in s["life"]["daemons"] if d["daemon"] == 0]
    d0 = [d for d in s["daemons"] if d["daemon"] == 0 and d["run"] == run["run"]]

    def mean(xs):
        xs = list(xs)
        return sum(xs) / len(xs)

    return {
        "mops_rank": s["life"]["total_mops"] / np_,
        "inflight": mean(d["inflight_avg"] for d in life),
        "cpl": mean(d["completions_per_loop_avg"] for d in life),
        "loops_M": mean(d["loops"] for d in life) / 1e6 * 10 / s["life"]["life_s"],
        "shares": {k: 100 * mean(d["completions_per_loop_share"][k] for d in life) for k in ("0", "1", "2-10", ">100")},
        "steady_mops_rank": run["total_mops"] / np_,
        "steady_inflight": mean(d["inflight_avg"] for d in d0),
        "steady_cpl": mean(d["completions_per_loop_avg"] for d in d0),
    }


def cell(meas, sim):
    if meas is None:
        return f"{'--':>8} {sim:>10.2f} {'':>7}"
    dev = (sim - meas) / meas * 100
    return f"{meas:>8.2f} {sim:>10.2f} {dev:>+6.0f}%"


def band(lohi, sim):
    """A measured band, the simulated value and where it lies: "1370-1470    419.90 (below)"."""
    lo, hi = lohi
    where = "inside" if lo <= sim <= hi else ("below" if sim < lo else "above")
    return f"{f'{lo:g}-{hi:g}':>9} {sim:>9.2f} {f'({where})':>12}"


def main(argv):
    help_or_refuse(argv, __doc__, "c1_table.py")
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
    print("C1 (Delegation, QD=32, 1 daemon + 46 clients per node), measured vs simulated, like for like:")
    print("whole-life loop-weighted figures (start-up included, the kept epochs standing for the rest of 10 s);")
    print("responses per loop: RPC responses per daemon loop, C1's \"CQEs per loop\" (not hardware CQEs per loop, benchkv's)")
    print(f"{'NP':>3} | {'Mops per rank':^27} | {'calls in flight (avg)':^27} | {'responses per loop':^27} | {'loops per 10 s (M)':^27}")
    print(f"{'':>3} | " + " | ".join([f"{'meas':>8} {'sim':>10} {'dev':>7}"] * 4))
    for np_, sim in sorted(rows):
        m = MEASURED.get(np_, {})
        print(f"{np_:>3} | " + " | ".join(cell(m.get(k), sim[k]) for k in ("mops_rank", "inflight", "cpl", "loops_M")))
    print("\nshare of loops by responses per loop (whole life), measured -> simulated:")
    for np_, sim in sorted(rows):
        if np_ in SHARES:
            print(f"  NP={np_:<3} " + "  ".join(f"{k}: {SHARES[np_][k]:g}% -> {sim['shares'][k]:.1f}%" for k in SHARES[np_]))
    print("\nsteady state: measured, the bands of C1's time series (no steady-state throughput was measured);")
    print("simulated, the kept epochs")
    print(f"{'NP':>3} | {'Mops per rank':^15} | {'calls in flight':^32} | {'responses per loop':^32}")
    print(f"{'':>3} | {'meas':>5} {'sim':>9} | " + " | ".join([f"{'meas':>9} {'sim':>9} {'':>12}"] * 2))
    for np_, sim in sorted(rows):
        st = STEADY.get(np_)
        line = f"{np_:>3} | {'--':>5} {sim['steady_mops_rank']:>9.2f} | "
        if st:
            line += band(st["inflight"], sim["steady_inflight"]) + " | " + band(st["cpl"], sim["steady_cpl"])
        else:
            line += " | ".join([f"{'--':>9} {'':>9} {'':>12}"] * 2)
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
