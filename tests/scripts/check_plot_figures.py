#!/usr/bin/env python3
"""Smoke tests of the figures of scripts/plot_data.py, scripts/plot_bistability.py and
scripts/latency_histogram.py --cdf on small simulated runs: each writes a PNG, and what a
reader sees holds. plot_data's title comes from the runs' configuration and its latency
axis is labelled in plain numbers (not 3.2x10^0); from a table of the same runs' per-size
figures (--table) it draws the same curves under the title given; plot_bistability's timeseries_start
draws the first milliseconds after the clients' start also after a start-up phase, and its
subtitle says the span it shows, and its regime map and its timeseries' CQEs-per-loop panel
label at least two ticks when the values span less than a decade, in plain numbers (and in
plain numbers over two decades too); the CDF's long title is wrapped, not cut at the edges.
usage: check_plot_figures.py REPO_ROOT BENCHKV
"""
import json
import os
import subprocess
import sys
import tempfile

from plot_checks import probe, report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SIM = ["--transport", "sim", "--np", "2", "--interval-ms", "1", "--trim", "1", "--no-progress", "--report", "none"]


def is_png(path):
    return os.path.exists(path) and open(path, "rb").read(8) == PNG_MAGIC


# The labels of the y ticks drawn inside the axis' view, major and minor, as a reader sees them.
VISIBLE_Y_LABELS = (
    "def visible_y_labels(fig, ax):\n"
    "    fig.canvas.draw()\n"
    "    lo, hi = ax.get_ylim()\n"
    "    out = []\n"
    "    for minor in (False, True):\n"
    "        ticks = ax.yaxis.get_minor_ticks() if minor else ax.yaxis.get_major_ticks()\n"
    "        for t in ticks:\n"
    "            v = t.get_loc()\n"
    "            if lo <= v <= hi and t.label1.get_visible() and t.label1.get_text():\n"
    "                out.append(t.label1.get_text())\n"
    "    return out\n")


def main(root, benchkv):
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    def bench(args, cwd):
        b = subprocess.run([benchkv, *args], cwd=cwd, capture_output=True, text=True)
        check(b.returncode == 0, f"benchkv {' '.join(args)}: {b.stderr}")
        return b.returncode == 0

    def script(name, *args, cwd):
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", name), *args], cwd=cwd,
                           capture_output=True, text=True)
        check(p.returncode == 0, f"{name}: exit {p.returncode}: {p.stderr}")
        check(p.stdout == "", f"{name}: printed on stdout: {p.stdout!r}")
        return p

    with tempfile.TemporaryDirectory() as d:
        # plot_data: two data runs over three value sizes (queue depth 4 and 8).
        for qd in ("4", "8"):
            bench(["data", *SIM, "-d", "0.004", "-r", "1", "--key-range", "8", "--value-size", "64,1024,16384",
                   "--queue-depth", qd, "-o", f"qd{qd}.csv"], d)
        script("plot_data.py", "data.png", "qd4=qd4.summary.json", "qd8=qd8.summary.json", cwd=d)
        check(is_png(os.path.join(d, "data.png")), "plot_data: data.png is not a PNG")
        got, err = probe(root, VISIBLE_Y_LABELS + (
            "import plot_data\n"
            f"runs = [plot_data.read_summary(os.path.join({d!r}, f'qd{{q}}.summary.json')) for q in (4, 8)]\n"
            "fig = plot_data.figure([(f'qd{q}', r[1]) for q, r in zip((4, 8), runs)], [r[0] for r in runs])\n"
            "print(json.dumps({'title': fig._suptitle.get_text(), 'labels': visible_y_labels(fig, fig.axes[1])}))\n"
        ))
        check(got is not None, f"plot_data probe: {err}")
        if got:
            # The shared settings in the title; the queue depth, which differs, left to the labels.
            check(got["title"] == "benchkv data: --transport sim, 2 nodes, read ratio 0.5, delegation backend",
                  f"plot_data title {got['title']!r}")
            check(len(got["labels"]) >= 2, f"plot_data latency tick labels {got['labels']}")
            for label in got["labels"]:
                check(all(c in "0123456789.e+-" for c in label) and "$" not in label,
                      f"plot_data latency tick label {label!r} is not a plain number")

        # plot_data --table: the same runs' per-size figures as a CSV (as docs/figures/
        # data_ucx_real.csv keeps them) give the same curves, under the title given.
        with open(os.path.join(d, "table.csv"), "w") as f:
            f.write("backend,value_size,ops_per_s,gib_per_s,latency_p50_us,latency_p99_us\n")
            for qd in ("4", "8"):
                with open(os.path.join(d, f"qd{qd}.summary.json")) as sf:
                    for r in json.load(sf)["data"]["runs"]:
                        f.write(f"qd{qd},{r['value_size']},{r['ops_per_s']!r},{r['gib_per_s']!r},"
                                f"{r['latency_p50_us']!r},{r['latency_p99_us']!r}\n")
        script("plot_data.py", "table.png", "--table", "table.csv", "--title", "a given title", cwd=d)
        check(is_png(os.path.join(d, "table.png")), "plot_data --table: table.png is not a PNG")
        got, err = probe(root, (
            "import plot_data\n"
            f"table = plot_data.read_table(os.path.join({d!r}, 'table.csv'))\n"
            f"runs = [(f'qd{{q}}', plot_data.read_summary(os.path.join({d!r}, f'qd{{q}}.summary.json'))[1]) "
            "for q in (4, 8)]\n"
            "fig = plot_data.figure(table, [], 'a given title')\n"
            "print(json.dumps({'same': table == runs, 'title': fig._suptitle.get_text()}))\n"
        ))
        check(got is not None, f"plot_data --table probe: {err}")
        if got:
            check(got["same"], "plot_data --table: the table's curves differ from the summaries'")
            check(got["title"] == "a given title", f"plot_data --table title {got['title']!r}")

        # plot_bistability: a KV run with in-flight samples, and a hand-made regime map whose
        # CQEs per loop span less than a decade (1.2 to 11; with the margins
        # matplotlib's log axis spans a little more than one and labels 10 alone).
        # With a start-up phase of 5 ms: the samples start when the clients do.
        bench([*SIM, "--client-threads", "2", "--queue-depth", "4", "-d", "0.004", "-r", "1", "-o", "run.csv",
               "--inflight-samples", "run.inflight.csv", "--startup-ms", "5", "delegation"], d)
        # A meta run whose CQEs per loop sit between 1 and 2 (0.4 s).
        bench(["meta", "--transport", "sim", "--np", "4", "--client-threads", "4", "--queue-depth", "4", "-d", "0.004",
               "--interval-ms", "1", "--trim", "1", "-r", "1", "--no-progress", "--report", "none", "-o", "meta.csv",
               "--inflight-samples", "meta.inflight.csv"], d)
        with open(os.path.join(d, "regime.csv"), "w") as f:
            f.write("run,np,start_mode,mops_per_rank,cqe_per_loop\n"
                    "0,2,sync,1.5,1.2\n1,4,sync,1.4,3.0\n2,2,staggered,1.6,6.0\n3,4,staggered,1.2,11.0\n")
        script("plot_bistability.py", "pics", "d=run", "--regime", "regime.csv", cwd=d)
        for name in ("timeseries.png", "timeseries_start.png", "cqe_histogram.png", "regime_map.png"):
            check(is_png(os.path.join(d, "pics", name)), f"plot_bistability: {name} is not a PNG")
        got, err = probe(root, VISIBLE_Y_LABELS + (
            "import csv, plot_bistability\n"
            f"series = [('d', os.path.join({d!r}, 'run'))]\n"
            "t = plot_bistability.load_series(series[0][1], 20.0)[0]\n"
            "start = plot_bistability.timeseries_figure(series, 'shared', 20.0, 3.0)\n"
            f"meta = [('m', os.path.join({d!r}, 'meta'))]\n"
            "whole = plot_bistability.timeseries_figure(meta, 'shared', 100.0)\n"
            "cpl = plot_bistability.load_series(meta[0][1], 100.0)[3]\n"
            f"regime = plot_bistability.regime_figure(list(csv.DictReader(open(os.path.join({d!r}, 'regime.csv')))))\n"
            "drawn = [list(line.get_xdata()) for line in start.axes[0].get_lines()]\n"
            "print(json.dumps({'subtitle': start._suptitle.get_text(), 'last': max(x - t[0] for x in t if x - t[0] <= 3.0),\n"
            "                  't0': t[0], 'drawn': drawn,\n"
            "                  'cqe_labels': visible_y_labels(regime, regime.axes[1]),\n"
            "                  'cpl': [min(cpl), max(cpl)], 'cpl_labels': visible_y_labels(whole, whole.axes[2])}))\n"
        ))
        check(got is not None, f"plot_bistability probe: {err}")
        if got:
            check(got["subtitle"] == f"shared: first {got['last']:.3g} ms, 20 us bins",
                  f"timeseries_start subtitle {got['subtitle']!r} (last bin at {got['last']} ms)")
            # The samples start at the clients' start (5 ms), and the start figure draws them
            # from 0: bins up to 3 ms after it, not an empty window before it.
            check(abs(got["t0"] - 5.0) < 0.05, f"first sample at {got['t0']} ms, not at the clients' start (5 ms)")
            xs = got["drawn"][0] if got["drawn"] else []
            check(len(xs) >= 100 and min(xs) == 0.0 and max(xs) <= 3.0,
                  f"timeseries_start draws {len(xs)} bins from {min(xs) if xs else None} to {max(xs) if xs else None} ms")
            check(len(got["cqe_labels"]) >= 2, f"regime map CQE tick labels {got['cqe_labels']}")
            for label in got["cqe_labels"]:
                check("$" not in label, f"regime map CQE tick label {label!r} is not a plain number")
            # The timeseries' CQEs per loop (symlog, linear below 1): the meta run's bins sit
            # within one decade above 1, where the log part alone labels at most "10^0".
            lo, hi = got["cpl"]
            check(lo >= 1 and hi < 10, f"timeseries CQEs per loop span {lo}..{hi}: not the case checked")
            check(len(got["cpl_labels"]) >= 2, f"timeseries CQEs per loop tick labels {got['cpl_labels']}")
            for label in got["cpl_labels"]:
                check("$" not in label, f"timeseries CQEs per loop tick label {label!r} is not a plain number")

        # Values spanning two decades (as the main job's CQEs per loop, 0.3 to 15): both axes
        # still label in plain numbers (the log formatter's default is 10^0, 10^1).
        got, err = probe(root, VISIBLE_Y_LABELS + (
            "import plot_bistability\n"
            "plt = plot_bistability.pyplot()\n"
            "fig, (a, b) = plt.subplots(2, 1)\n"
            "values = [0.0, 0.3, 2.0, 15.0, 40.0]\n"
            "a.plot(range(5), values)\n"
            "plot_bistability.symlog_axis(a, values)\n"
            "b.plot(range(4), values[1:])\n"
            "plot_bistability.log_axis(b, values[1:])\n"
            "print(json.dumps({'symlog': visible_y_labels(fig, a), 'log': visible_y_labels(fig, b)}))\n"
        ))
        check(got is not None, f"plot_bistability axes probe: {err}")
        if got:
            for axis in ("symlog", "log"):
                check(len(got[axis]) >= 2, f"{axis} axis over two decades: tick labels {got[axis]}")
                for label in got[axis]:
                    check(all(c in "0123456789.e+-" for c in label) and "$" not in label,
                          f"{axis} axis over two decades: tick label {label!r} is not a plain number")

        # latency_histogram --cdf: a KV run's title is longer than one line of the figure.
        cdf = os.path.join(d, "cdf.png")
        script("latency_histogram.py", "run.summary.json", "--cdf", cdf, cwd=d)
        check(is_png(cdf), "cdf.png is not a PNG")
        got, err = probe(root, (
            "import latency_histogram\n"
            f"s = json.load(open({os.path.join(d, 'run.summary.json')!r}))\n"
            "counts, _ = latency_histogram.collect(s, 'all', None, None)\n"
            "title = latency_histogram.title_of(s, 'all', sum(counts.values()))\n"
            "fig = latency_histogram.cdf_figure(counts, title)\n"
            "fig.canvas.draw()\n"
            "box = fig.axes[0].title.get_window_extent()\n"
            "print(json.dumps({'title': title, 'x0': box.x0, 'x1': box.x1, 'width': fig.bbox.width}))\n"))
        check(got is not None, f"latency_histogram probe: {err}")
        if got:
            check(len(got["title"]) > 60, f"the CDF title is short ({got['title']!r}): the check checks nothing")
            check(got["x0"] >= 0 and got["x1"] <= got["width"],
                  f"the CDF title spans x {got['x0']:.0f}..{got['x1']:.0f} of a {got['width']:.0f} px figure")

    return report(failures)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], os.path.abspath(sys.argv[2])))
