#!/usr/bin/env python3
"""scripts/plot_sweep.py on a hand-made results.csv (no benchkv needed): a "lines" entry
over an integer NP axis with a seed axis it does not plot, a "heatmap", a "share" (runs
above a threshold, strictly: the boundary value is not above it) and a "table".
The PNGs are written (PNG signature), stdout holds the table only (the "wrote" lines go
to stderr), the seeds of one point are averaged (the table shows their mean), and the
lines figure's x ticks are the NP values themselves, not 2.25, 2.5, a "logy" column's
ticks are labelled in plain numbers (10, not 10^1), and the figures' title
comes from the runs' configuration (hand-made summaries under out/runs/), not the file name.
A percentile over seeds is that of every request of the seeds' runs pooled, read from the
latency histograms of their summaries (two runs of 100 requests: p99 100 ns pooled where
the mean of the runs' p99s is 110), said in the legend, the colour bar and after the
table; where a run's histograms are absent or its row.json records another row, the mean
of the runs' percentiles, said there too and on stderr.
usage: check_plot_sweep.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

from plot_checks import probe, report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def main(root):
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        sweep = {
            "base": {"backend": "delegation"},
            "grid": {"np": [2, 3, 4], "seed": [1, 2, 3], "queue_depth": [1, 4]},
            "output": "out",
            "description": "smoke test sweep",
            "plot": [
                {"kind": "lines", "x": "np", "y": ["mops_per_rank", "latency_p99_ns"], "by": "queue_depth",
                 "file": "lines.png"},
                {"kind": "heatmap", "x": "np", "y": "queue_depth", "z": "mops_per_rank", "file": "heat.png"},
                {"kind": "share", "x": "np", "y": "mops_per_rank", "above": 10, "by": "queue_depth",
                 "logx": True, "file": "share.png"},
                {"kind": "table", "x": "np", "y": ["mops_per_rank"], "by": "queue_depth"},
            ],
        }
        sweep_path = os.path.join(d, "sweep.json")
        with open(sweep_path, "w") as f:
            json.dump(sweep, f)
        os.makedirs(os.path.join(d, "out"))
        header = ("run,np,seed,queue_depth,mops_total,mops_per_rank,cqe_per_loop,inflight,issued,completed,"
                  "errors,latency_mean_ns,latency_p50_ns,latency_p99_ns,latency_p999_ns,latency_max_ns,"
                  "mops_ci95_low,mops_ci95_high\n")
        run = 0
        with open(os.path.join(d, "out", "results.csv"), "w") as f:
            f.write(header)
            for np_ in (2, 3, 4):
                for seed in (1, 2, 3):
                    for qd in (1, 4):
                        per_rank = np_ * qd + seed  # seeds 1, 2, 3: mean np * qd + 2
                        f.write(f"{run},{np_},{seed},{qd},{per_rank * np_},{per_rank},1.5,2.5,100,100,0,"
                                f"1000,900,{2000 + 100 * seed},3000,4000,,\n")
                        run += 1
        # The runs' summaries (their configuration alone): what the title is made from.
        for i, np_ in enumerate((2, 3, 4)):
            os.makedirs(os.path.join(d, "out", "runs", f"{i:04d}"))
            with open(os.path.join(d, "out", "runs", f"{i:04d}", "out.summary.json"), "w") as f:
                json.dump({"config": {"backend": "delegation", "transport": "sim", "np": np_, "queue_depth": 1,
                                      "seed": 1}}, f)
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", "plot_sweep.py"), sweep_path],
                           capture_output=True, text=True, cwd=d)
        check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
        for name in ("lines.png", "heat.png", "share.png"):
            path = os.path.join(d, "out", name)
            ok = os.path.exists(path) and open(path, "rb").read(8) == PNG_MAGIC
            check(ok, f"{name} is not a PNG")
            check(f"wrote {path}" in p.stderr, f"stderr does not name {name}: {p.stderr!r}")
        check("wrote" not in p.stdout, f"stdout has the 'wrote' lines: {p.stdout!r}")
        # The share: per QD and NP, the seeds' runs above 10 (QD 4, NP 2: 9, 10, 11, so one of
        # three, 10 itself not above), with the Wilson interval of 1/3 (0.06-0.79).
        check("queue_depth=4 np=2: mops_per_rank > 10 in 1 of 3 runs, share 0.33 (95 % 0.06-0.79)" in p.stdout,
              f"share line for QD 4, NP 2 missing: {p.stdout!r}")
        check("queue_depth=4 np=3: mops_per_rank > 10 in 3 of 3 runs, share 1.00 (95 % 0.44-1.00)" in p.stdout,
              f"share line for QD 4, NP 3 missing: {p.stdout!r}")
        check("queue_depth=1 np=4: mops_per_rank > 10 in 0 of 3 runs, share 0.00 (95 % 0.00-0.56)" in p.stdout,
              f"share line for QD 1, NP 4 missing: {p.stdout!r}")
        # The table: one line per queue depth, the mean over the seeds for each NP.
        lines = [line for line in p.stdout.splitlines() if "|" in line]
        by_qd = {}
        for line in lines:
            cells = [c.strip() for c in line.split("|")]
            try:
                by_qd[cells[0]] = [float(c) for c in cells[1:]]
            except ValueError:  # the header lines
                pass
        check(by_qd.get("1") == [4.0, 5.0, 6.0], f"table for QD 1: {by_qd.get('1')} (stdout {p.stdout!r})")
        check(by_qd.get("4") == [10.0, 14.0, 18.0], f"table for QD 4: {by_qd.get('4')}")

        # The x ticks of the lines figure: ask matplotlib what plot_sweep drew.
        got, err = probe(root, (
            "import csv\n"
            "import plot_sweep\n"
            f"sweep = json.load(open({sweep_path!r}))\n"
            f"rows = list(csv.DictReader(open({os.path.join(d, 'out', 'results.csv')!r})))\n"
            "fig = plot_sweep.lines(sweep['plot'][0], rows, 'M requests/s')\n"
            "ax = fig.axes[-1]\n"
            "share = plot_sweep.share(sweep['plot'][2], rows, 'M requests/s').axes[0]\n"
            f"title = plot_sweep.config_title(sweep, plot_sweep.run_configs({os.path.join(d, 'out')!r}))\n"
            f"unrun = plot_sweep.config_title(sweep, [plot_sweep.sweep_config(sweep, {sweep_path!r})])\n"
            "logy = dict(sweep['plot'][0], y=['mops_per_rank'], logy=['mops_per_rank'])\n"
            "logfig = plot_sweep.lines(logy, rows, 'M requests/s')\n"
            "logfig.canvas.draw()\n"
            "lax = logfig.axes[0]\n"
            "lo, hi = lax.get_ylim()\n"
            "loglabels = [t.label1.get_text() for minor in (False, True)\n"
            "             for t in (lax.yaxis.get_minor_ticks() if minor else lax.yaxis.get_major_ticks())\n"
            "             if lo <= t.get_loc() <= hi and t.label1.get_visible() and t.label1.get_text()]\n"
            "print(json.dumps({'ticks': [float(t) for t in ax.get_xticks()], 'xlabel': ax.get_xlabel(),\n"
            "                  'logscale': lax.get_yscale(), 'loglabels': loglabels,\n"
            "                  'ylabels': [a.get_ylabel() for a in fig.axes], 'title': title, 'unrun': unrun,\n"
            "                  'share_scale': share.get_xscale(), 'share_ticks': [float(t) for t in share.get_xticks()],\n"
            "                  'share_ylabel': share.get_ylabel()}))\n"))
        check(got is not None, f"probe: {err}")
        if got is not None:
            check(got["ticks"] == [2.0, 3.0, 4.0], f"x ticks {got['ticks']}")
            check(got["xlabel"] == "nodes (NP)", f"x label {got['xlabel']!r}")
            # "logy" over values spanning a decade (4 to 18 M requests/s): ticks labelled in
            # plain numbers (10, not 10^1), at least two of them.
            check(got["logscale"] == "log" and len(got["loglabels"]) >= 2, f"log y axis: {got['logscale']}, "
                  f"labels {got['loglabels']}")
            for lab in got["loglabels"]:
                check("$" not in lab and all(c in "0123456789.e+-" for c in lab),
                      f"log y tick label {lab!r} is not a plain number")
            # "logx": a log axis ticked at the NP values, not at powers of ten.
            check(got["share_scale"] == "log" and got["share_ticks"] == [2.0, 3.0, 4.0],
                  f"share x axis {got['share_scale']} ticks {got['share_ticks']}")
            check(got["share_ylabel"] == "share of runs:\nthroughput per rank (M requests/s) > 10",
                  f"share y label {got['share_ylabel']!r}")
            check(got["ylabels"] == ["throughput per rank (M requests/s)", "latency p99 (us)"],
                  f"y labels {got['ylabels']}")
            # What every run shares (NP, an axis, left to the axis), then the grid.
            check(got["title"] == "Delegation backend: --transport sim; over np x queue_depth, 3 seeds per point",
                  f"title {got['title']!r}")
            # Before any run: what the sweep file gives them all.
            check(got["unrun"] == "Delegation backend; over np x queue_depth, 3 seeds per point",
                  f"title before the runs {got['unrun']!r}")
    check_pooled(root, check)
    return report(failures)


def kv_summary(np_, seed, buckets, lo, hi, saturated=False):
    """A KV summary of one run whose get_local requests have the histogram `buckets`."""
    empty = {"count": 0, "min_ns": 0, "max_ns": 0, "histogram": {"sub_buckets": 64, "buckets": ""}}
    n = sum(int(pair.split(":")[1]) for pair in buckets.split())
    local = {"count": n, "min_ns": lo, "max_ns": hi, "histogram": {"sub_buckets": 64, "buckets": buckets}}
    if saturated:
        local["saturated"] = True
    return {"config": {"backend": "delegation", "transport": "sim", "np": np_, "seed": seed},
            "runs": [{"run": 0, "latency": {"get_local": local, "get_remote": empty, "put_local": empty,
                                            "put_remote": empty}}]}


def check_pooled(root, check):
    """Percentiles over seeds from the runs' histograms pooled, or the mean where absent."""
    with tempfile.TemporaryDirectory() as d:
        sweep = {"base": {"backend": "delegation"}, "grid": {"np": [2, 4], "seed": [1, 2]}, "output": "out",
                 "plot": [{"kind": "lines", "x": "np", "y": ["latency_p99_ns"], "file": "p99.png"},
                          {"kind": "heatmap", "x": "np", "y": "seed", "z": "latency_p99_ns", "file": "heat.png"},
                          {"kind": "heatmap", "x": "np", "y": "np", "z": "latency_p99_ns", "file": "heat2.png"},
                          {"kind": "table", "x": "np", "y": ["latency_p99_ns", "latency_p999_ns"]}]}
        sweep_path = os.path.join(d, "sweep.json")
        with open(sweep_path, "w") as f:
            json.dump(sweep, f)
        # NP 2: seed 1 has 98 requests at 100 ns and 2 at 120 (p99 and p99.9 120), seed 2
        # 100 at 100 ns (100): pooled, the 198th of 200 is 100 ns and the 200th 120; the
        # means of the seeds' are 110 and 110. NP 4: 100 ns throughout.
        runs = [(2, 1, "100:98 120:2", 120, 120), (2, 2, "100:100", 100, 100),
                (4, 1, "100:100", 100, 100), (4, 2, "100:100", 100, 100)]
        header = ("run,np,seed,mops_total,mops_per_rank,cqe_per_loop,inflight,issued,completed,errors,"
                  "latency_mean_ns,latency_p50_ns,latency_p99_ns,latency_p999_ns,latency_max_ns,"
                  "mops_ci95_low,mops_ci95_high")
        out = os.path.join(d, "out")
        rows = []
        for i, (np_, seed, buckets, p99, top) in enumerate(runs):
            row = f"{i},{np_},{seed},8.0,4.0,1.5,2.5,100,100,0,100.2,100,{p99},{top},{top},,"
            rows.append(row)
            run_dir = os.path.join(out, "runs", f"{i:04d}")
            os.makedirs(run_dir)
            with open(os.path.join(run_dir, "row.json"), "w") as f:
                json.dump({"params": {"np": str(np_), "seed": str(seed)}, "row": row}, f)
            with open(os.path.join(run_dir, "out.summary.json"), "w") as f:
                json.dump(kv_summary(np_, seed, buckets, 100, top), f)
        with open(os.path.join(out, "results.csv"), "w") as f:
            f.write(header + "\n" + "\n".join(rows) + "\n")

        def drawn():
            """What the lines, the heatmap over NP and the table show, and the stderr."""
            got, err = probe(root, (
                "import csv, io, contextlib\n"
                "import plot_sweep\n"
                f"sweep = json.load(open({sweep_path!r}))\n"
                f"rows = list(csv.DictReader(open({os.path.join(out, 'results.csv')!r})))\n"
                f"h = plot_sweep.RunHistograms({out!r})\n"
                "ax = plot_sweep.lines(sweep['plot'][0], rows, 'M requests/s', h).axes[0]\n"
                "legend = ax.get_legend().get_title().get_text()\n"
                "heat = plot_sweep.heatmap(sweep['plot'][2], rows, 'M requests/s', h)\n"
                "cells = [float(v) for v in heat.axes[0].get_images()[0].get_array().ravel() if v == v]\n"
                "text = io.StringIO()\n"
                "with contextlib.redirect_stdout(text):\n"
                "    plot_sweep.table(sweep['plot'][3], rows, h)\n"
                "print(json.dumps({'ys': [float(v) for v in ax.lines[0].get_ydata()], 'legend': legend,\n"
                "                  'bar': heat.axes[-1].get_ylabel(), 'cells': cells, 'table': text.getvalue()}))\n"))
            check(got is not None, f"probe: {err}")
            return got or {"ys": [], "legend": "", "bar": "", "cells": [], "table": ""}

        def table_row(text):
            """The figures of the table's one row (no "by"): its line after the two header lines."""
            body = [line for line in text.splitlines() if line.startswith(" " * 8 + " | ")][2:]
            return [float(c) for line in body for cell in line.split("|")[1:] for c in cell.split()]

        got = drawn()
        check(got["ys"] == [0.1, 0.1], f"pooled p99 over seeds: drew {got['ys']}, not [0.1, 0.1] (the mean of the "
                                       f"seeds' p99s is 0.11 at NP 2)")
        check("p99 of every request of a point's runs pooled" in got["legend"].replace("\n", " "),
              f"legend title {got['legend']!r}")
        check(got["cells"] == [0.1, 0.1], f"heatmap over NP: {got['cells']}")
        check("pooled" in got["bar"], f"colour bar label {got['bar']!r}")
        check(table_row(got["table"]) == [0.1, 0.12, 0.1, 0.1], f"table {got['table']!r}")
        check("latency_p999_ns: p99.9 of every request of a point's runs pooled" in got["table"],
              f"table does not say pooled: {got['table']!r}")
        # The whole script: exit 0, and no line on stderr about averaging.
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", "plot_sweep.py"), sweep_path],
                           capture_output=True, text=True, cwd=d)
        check(p.returncode == 0 and "not pooled" not in p.stderr, f"exit {p.returncode}: {p.stderr}")
        check(table_row(p.stdout) == [0.1, 0.12, 0.1, 0.1], f"plot_sweep.py's table {p.stdout!r}")
        # A histogram marked saturated: pooled still, and said.
        with open(os.path.join(out, "runs", "0001", "out.summary.json"), "w") as f:
            json.dump(kv_summary(2, 2, "100:100", 100, 100, saturated=True), f)
        got = drawn()
        check("saturated" in got["legend"], f"legend title with a saturated histogram {got['legend']!r}")
        # A run's row.json recording another row (a rerun): its histograms are not this
        # row's, so the percentiles are the seeds' mean, said on the figure and stderr.
        with open(os.path.join(out, "runs", "0001", "row.json"), "w") as f:
            json.dump({"row": rows[1].replace(",100,100,100,100,,", ",100,100,101,101,,")}, f)
        got = drawn()
        check(got["ys"] == [0.11, 0.1], f"p99 without run 1's histograms: {got['ys']}")
        check("mean of a point's runs' p99" in got["legend"].replace("\n", " "), f"legend {got['legend']!r}")
        check(table_row(got["table"]) == [0.11, 0.11, 0.1, 0.1], f"table {got['table']!r}")
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", "plot_sweep.py"), sweep_path],
                           capture_output=True, text=True, cwd=d)
        check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
        check("run 1: its row.json records another row" in p.stderr, f"stderr {p.stderr!r}")
        # No row.json (a results.csv given with --csv, the runs elsewhere): the mean.
        os.remove(os.path.join(out, "runs", "0001", "row.json"))
        check(drawn()["ys"] == [0.11, 0.1], "p99 without run 1's row.json")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
