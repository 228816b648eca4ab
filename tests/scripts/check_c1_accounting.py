#!/usr/bin/env python3
"""scripts/c1_accounting.py recovers a known loop cost and per-completion cost.

Rows are built from chosen l0 and c (loops = (10 s - remote completions x c) / l0), written
as a calibration table, and read back through the script: the solved l0 and c must be the
chosen ones, and the third row must account for exactly 10 s. A table without the C1 rows
must be refused. usage: check_c1_accounting.py REPO_ROOT
"""
import csv
import importlib.util
import os
import subprocess
import sys
import tempfile

root = sys.argv[1]
path = os.path.join(root, "scripts", "c1_accounting.py")
spec = importlib.util.spec_from_file_location("c1_accounting", path)
acc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(acc)

L0, C = 0.7, 0.12  # us
mops = {2: 5.0, 8: 2.0, 16: 6.0}
rows = {}
for np_, m in mops.items():
    work = acc.remote_completions_M(np_, m) * C
    rows[np_] = (m, (acc.RUN_S - work) / L0)

with tempfile.TemporaryDirectory() as d:
    table = os.path.join(d, "cal.csv")
    with open(table, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["experiment", "figure", "source", "measured", "simulated", "error_pct", "scored", "note"])
        for np_, (m, loops) in rows.items():
            w.writerow([f"c1_np{np_}", "mops_per_rank", "C1", 1, m, 0, True, ""])
            w.writerow([f"c1_np{np_}", "loops_per_10s_M", "C1", 1, loops, 0, True, ""])
    got = acc.simulated_rows(table)
    l0, c = acc.solve(got)
    assert abs(l0 - L0) < 1e-9 and abs(c - C) < 1e-9, (l0, c)
    m8, loops8 = got[8]
    accounted = loops8 * l0 + acc.remote_completions_M(8, m8) * c
    assert abs(accounted - acc.RUN_S) < 1e-9, accounted
    out = subprocess.run([sys.executable, path, table], capture_output=True, text=True, check=True).stdout
    assert "l0 = 0.700 us" in out and "c = 0.120 us" in out, out

    bad = os.path.join(d, "bad.csv")
    with open(bad, "w", newline="") as f:
        csv.writer(f).writerow(["experiment", "figure", "source", "measured", "simulated", "error_pct", "scored", "note"])
    r = subprocess.run([sys.executable, path, bad], capture_output=True, text=True)
    assert r.returncode != 0 and "has no simulated figure" in r.stderr, (r.returncode, r.stderr)
print("c1_accounting: l0 and c recovered; a table without C1 rows refused")
