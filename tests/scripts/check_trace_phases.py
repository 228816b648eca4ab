#!/usr/bin/env python3
"""scripts/trace_phases.py tells aligned rounds from independent ones, and counts idle time.

Synthetic traces of daemon #0's loops (the shape benchkv's --trace writes): 8 nodes with
100 us rounds, each round one poll-ending loop (cqes > 0) of 60 us then 39 us of steps
without completions, and another thread's loops that must be ignored. Aligned: every
node's loop within 1 us of the round's start: round 100 us, spread under 2 us, R above
0.95. Independent: node n at a fixed offset n x 12.5 us: spread near a quarter of the
round, R below 0.3. A trace without a poll-ending loop is refused with status 1.
usage: check_trace_phases.py REPO_ROOT
"""
import json
import os
import random
import subprocess
import sys
import tempfile

root = sys.argv[1]
script = os.path.join(root, "scripts", "trace_phases.py")
ROUND, NODES, ROUNDS = 100.0, 8, 30


def trace(offset_of):
    ev = []
    for n in range(NODES):
        for k in range(ROUNDS):
            t = k * ROUND + offset_of(n)
            ev.append({"name": "loop", "ph": "X", "pid": n, "tid": 0, "ts": t, "dur": 60.0, "args": {"cqes": 15}})
            ev.append({"name": "loop", "ph": "X", "pid": n, "tid": 0, "ts": t + 60.0, "dur": 39.0, "args": {"cqes": 0}})
            ev.append({"name": "loop", "ph": "X", "pid": n, "tid": 1, "ts": t, "dur": 99.0, "args": {"cqes": 3}})
    return {"displayTimeUnit": "ns", "traceEvents": ev}


def run(tr, d, name):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump(tr, f)
    return subprocess.run([sys.executable, script, path], capture_output=True, text=True)


def figures(out):
    # "...: round R us over N nodes, spread S us (F of the round), phase concentration R = X; ..."
    words = out.replace(",", " ").replace(";", " ").split()
    spread = float(words[words.index("spread") + 1])
    r = float(words[words.index("=") + 1])
    rnd = float(words[words.index("round") + 1])
    return rnd, spread, r


rng = random.Random(7)
with tempfile.TemporaryDirectory() as d:
    p = run(trace(lambda n: rng.uniform(0.0, 1.0)), d, "aligned.json")
    assert p.returncode == 0, p.stderr
    rnd, spread, r = figures(p.stdout)
    assert abs(rnd - ROUND) < 1.0, p.stdout
    assert spread < 2.0 and r > 0.95, p.stdout

    p = run(trace(lambda n: n * ROUND / NODES), d, "independent.json")
    assert p.returncode == 0, p.stderr
    rnd, spread, r = figures(p.stdout)
    assert abs(rnd - ROUND) < 1.0, p.stdout
    assert 0.15 * ROUND < spread < 0.35 * ROUND and r < 0.3, p.stdout

    empty = {"traceEvents": [{"name": "loop", "ph": "X", "pid": 0, "tid": 0, "ts": 0.0, "dur": 1.0, "args": {"cqes": 0}}]}
    p = run(empty, d, "empty.json")
    assert p.returncode == 1 and "no node" in p.stderr, (p.returncode, p.stderr)
print("trace_phases: aligned, independent and empty traces read as expected")
