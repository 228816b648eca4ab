#!/usr/bin/env python3
"""How far apart in phase the daemons' rounds run, from a simulated run's trace.

Reads a Chrome/Perfetto trace that benchkv wrote (--trace FILE --trace-window A:B) and
takes, for daemon #0 of every node, the loops whose poll phase ended with completions
(one per round in a high state). The round is the median time between two of them on one
node. Each such loop gets a phase in [0, 1) on node 0's round grid; the script prints:
  - the round, in us;
  - the spread: for every such loop of node 0, the distance to the nearest such loop of
    each other node, as a median over all of them and as a share of the round: 0 when the
    nodes' rounds are aligned, about 0.25 when their phases are independent (it needs no
    fixed round, so rounds whose length wanders do not spread it);
  - the phase concentration R = |mean of exp(2 pi i phase)| on node 0's round grid: 1
    when every loop falls at the same point of a fixed round, near 0 when they are spread
    over it (or when the round's length wanders, which the spread is not fooled by);
  - each node's mean phase offset in us (circular mean).
Whether the daemons wait between waves is not read from the trace (a daemon that spins
idle is skipped and accounted in bulk, so its idle loops are not traced one by one): the
run's summary counts them, as loops with no response (completions_per_loop_hist "0").

usage: trace_phases.py TRACE.json [TRACE.json ...]
Exit status 1 when a trace has no daemon loop that ended a poll phase with completions.
"""
import collections
import json
import math
import statistics
import sys


def phases(trace):
    """(round_us, spread_us, R, per-node offsets in us) of one trace's daemon #0 loops."""
    ends = collections.defaultdict(list)  # node -> start times of poll-ending loops
    for e in trace["traceEvents"]:
        if e.get("name") != "loop" or e.get("tid") != 0:
            continue
        if e["args"]["cqes"] > 0:
            ends[e["pid"]].append(e["ts"])
    nodes = sorted(n for n in ends if len(ends[n]) >= 2)
    if not nodes:
        raise ValueError("no node has two daemon #0 loops that ended a poll phase with completions")
    period = statistics.median(b - a for n in nodes for a, b in zip(sorted(ends[n]), sorted(ends[n])[1:]))
    ref = min(ends[nodes[0]])

    def circular(ts):
        c = sum(math.cos(2 * math.pi * (t - ref) / period) for t in ts) / len(ts)
        s = sum(math.sin(2 * math.pi * (t - ref) / period) for t in ts) / len(ts)
        return c, s

    dist = []
    for n in nodes[1:]:
        other = sorted(ends[n])
        for t in ends[nodes[0]]:
            dist.append(min(abs(t - u) for u in other))
    spread = statistics.median(dist) if dist else 0.0
    c, s = circular([t for n in nodes for t in ends[n]])
    offsets = []
    for n in nodes:
        cn, sn = circular(ends[n])
        offsets.append((math.atan2(sn, cn) / (2 * math.pi)) % 1.0 * period)
    return period, spread, math.hypot(c, s), offsets


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    status = 0
    for path in argv[1:]:
        try:
            with open(path) as f:
                period, spread, r, offsets = phases(json.load(f))
        except (OSError, ValueError, KeyError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            status = 1
            continue
        print(f"{path}: round {period:.1f} us over {len(offsets)} nodes, spread {spread:.1f} us "
              f"({spread / period:.2f} of the round), phase concentration R = {r:.3f}; "
              f"node offsets (us): " + " ".join(f"{o:.1f}" for o in offsets))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
