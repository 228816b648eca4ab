#!/usr/bin/env python3
"""scripts/plot_sweep.py, scripts/plot_bistability.py, scripts/plot_data.py (summaries, or --table) and
scripts/c1_table.py: a missing or unusable input file, or --table without --title, is one
line on stderr naming it and exit status 2, not a traceback; nothing is drawn.
usage: check_plot_inputs.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile


def run(root, script, *args):
    return subprocess.run([sys.executable, os.path.join(root, "scripts", script), *args],
                          capture_output=True, text=True)


def expect_missing(r, name, failures, what):
    lines = r.stderr.strip().splitlines()
    ok = r.returncode == 2 and len(lines) == 1 and name in lines[0] and "Traceback" not in r.stderr
    if not ok:
        failures.append(f"{what}: status {r.returncode}, stderr {r.stderr!r}")


def main(argv):
    root = argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as d:
        absent = os.path.join(d, "absent.json")
        expect_missing(run(root, "plot_sweep.py", absent), "absent.json", failures, "plot_sweep, no sweep file")
        sweep = os.path.join(d, "s.json")
        with open(sweep, "w") as f:
            json.dump({"grid": {"np": [2]}, "output": "out"}, f)
        expect_missing(run(root, "plot_sweep.py", sweep), os.path.join("out", "results.csv"), failures,
                       "plot_sweep, no results.csv")
        expect_missing(run(root, "plot_sweep.py", sweep, "--csv", os.path.join(d, "r.csv")), "r.csv", failures,
                       "plot_sweep, no --csv file")
        pics = os.path.join(d, "pics")
        expect_missing(run(root, "plot_bistability.py", pics, "a=" + os.path.join(d, "run")), "run.inflight.csv",
                       failures, "plot_bistability, no in-flight samples")
        with open(os.path.join(d, "run.inflight.csv"), "w") as f:
            f.write("t_ns,rank,daemon,inflight\n")
        expect_missing(run(root, "plot_bistability.py", pics, "a=" + os.path.join(d, "run")), "run.summary.json",
                       failures, "plot_bistability, no summary")
        if os.path.exists(pics):
            failures.append("plot_bistability made its output directory although an input was missing")
        png = os.path.join(d, "bw.png")
        expect_missing(run(root, "plot_data.py", png, "a=" + os.path.join(d, "absent.summary.json")),
                       "absent.summary.json", failures, "plot_data, no summary")
        kv = os.path.join(d, "kv.summary.json")
        with open(kv, "w") as f:
            json.dump({"runs": []}, f)
        expect_missing(run(root, "plot_data.py", png, "a=" + kv), "kv.summary.json", failures,
                       "plot_data, a summary without a data section")
        expect_missing(run(root, "plot_data.py", png, "--table", os.path.join(d, "absent.csv"), "--title", "t"),
                       "absent.csv", failures, "plot_data --table, no table")
        expect_missing(run(root, "plot_data.py", png, "--table", sweep, "--title", "t"), "s.json", failures,
                       "plot_data --table, a file that is no table of per-size figures")
        expect_missing(run(root, "plot_data.py", png, "--table", sweep), "--title", failures,
                       "plot_data --table without --title")
        if os.path.exists(png):
            failures.append("plot_data drew a picture although an input was unusable")
        expect_missing(run(root, "c1_table.py", "8=" + absent), "absent.json", failures, "c1_table, no summary")
        expect_missing(run(root, "c1_table.py", "8=" + kv), "kv.summary.json", failures,
                       "c1_table, a summary without daemon figures")
    for f in failures:
        print("FAIL:", f)
    print(f"{14 - len(failures)} passed, {len(failures)} failed")  # 14 checks above
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
