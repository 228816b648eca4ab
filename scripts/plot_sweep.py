#!/usr/bin/python3
"""Figures and tables of a sweep (`benchkv sweep SWEEP.json`), as its "plot" entries say.

usage: plot_sweep.py SWEEP.json [--csv RESULTS.csv] [--out-dir DIR]
  Reads OUTPUT/results.csv of the sweep (or --csv) and, for each entry of "plot":
    lines    y (one panel per column in y) against x, one line per value of "by";
             columns listed in "logy" get a log scale
    heatmap  z over the grid x by y (one cell per run; a missing run is blank)
    table    printed on stdout: one line per value of "by", for each value of x the
             columns in y
  Figures go to OUTPUT/FILE (or DIR/FILE). benchkv checks the entries when it loads the
  sweep, so the columns named here exist.
"""
import csv
import json
import os
import sys



def pyplot():
    """matplotlib, loaded only for figures (a table needs none)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def as_list(v):
    return v if isinstance(v, list) else [v]


def sort_key(v):
    try:
        return (0, float(v), "")
    except ValueError:
        return (1, 0.0, v)


def ordered(values):
    """Distinct values in first-seen order (the sweep's grid order)."""
    return list(dict.fromkeys(values))


def lines(p, rows, out_dir):
    plt = pyplot()
    ys = as_list(p["y"])
    logy = set(as_list(p.get("logy", [])))
    groups = ordered(r[p["by"]] for r in rows) if "by" in p else [None]
    fig, axes = plt.subplots(len(ys), 1, figsize=(8, 3.5 * len(ys)), sharex=True, squeeze=False)
    for ax, y in zip(axes[:, 0], ys):
        for g in groups:
            rr = [r for r in rows if g is None or r[p["by"]] == g]
            rr.sort(key=lambda r: sort_key(r[p["x"]]))
            xs = [float(r[p["x"]]) if sort_key(r[p["x"]])[0] == 0 else r[p["x"]] for r in rr]
            ax.plot(xs, [float(r[y]) for r in rr], "o-", label=f"{p['by']}={g}" if g is not None else y)
        ax.set_ylabel(y)
        if y in logy:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[-1, 0].set_xlabel(p["x"])
    return fig


def heatmap(p, rows, out_dir):
    plt = pyplot()
    xs = sorted(ordered(r[p["x"]] for r in rows), key=sort_key)
    ys = sorted(ordered(r[p["y"]] for r in rows), key=sort_key)
    grid = [[float("nan")] * len(xs) for _ in ys]
    for r in rows:
        grid[ys.index(r[p["y"]])][xs.index(r[p["x"]])] = float(r[p["z"]])
    fig, ax = plt.subplots(figsize=(1.2 * len(xs) + 3, 0.8 * len(ys) + 2))
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(xs)), xs)
    ax.set_yticks(range(len(ys)), ys)
    ax.set_xlabel(p["x"])
    ax.set_ylabel(p["y"])
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            if v == v:
                ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=8, color="w")
    fig.colorbar(im, ax=ax, label=p["z"])
    return fig


def table(p, rows):
    ys = as_list(p["y"])
    cols = ordered(r[p["x"]] for r in rows)
    groups = ordered(r[p["by"]] for r in rows) if "by" in p else [None]
    width = max([len(str(g)) for g in groups] + [8])
    print(f"{'':{width}s} | " + " | ".join(f"{c:^{11 * len(ys)}s}" for c in cols))
    print(f"{'':{width}s} | " + " | ".join(" ".join(f"{y[:10]:>10s}" for y in ys) for _ in cols))
    for g in groups:
        cells = []
        for c in cols:
            r = next((x for x in rows if x[p["x"]] == c and (g is None or x[p["by"]] == g)), None)
            cells.append(" ".join(f"{float(r[y]):>10.3f}" if r else f"{'-':>10s}" for y in ys))
        print(f"{str(g if g is not None else ''):{width}s} | " + " | ".join(cells))


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    sweep_path = argv[1]
    if not os.path.isfile(sweep_path):
        print(f"plot_sweep: {sweep_path}: no such sweep file", file=sys.stderr)
        return 2
    try:
        with open(sweep_path) as f:
            sweep = json.load(f)
    except (OSError, ValueError) as e:
        print(f"plot_sweep: {sweep_path}: cannot read the sweep file ({e})", file=sys.stderr)
        return 2
    if not isinstance(sweep, dict) or not isinstance(sweep.get("output"), str):
        print(f"plot_sweep: {sweep_path}: not a sweep file (no \"output\")", file=sys.stderr)
        return 2
    out = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(sweep_path)), sweep["output"]))
    csv_path = argv[argv.index("--csv") + 1] if "--csv" in argv else os.path.join(out, "results.csv")
    out_dir = argv[argv.index("--out-dir") + 1] if "--out-dir" in argv else out
    if not os.path.isfile(csv_path):
        print(f"plot_sweep: {csv_path}: no such file (has the sweep run? benchkv sweep {sweep_path})",
              file=sys.stderr)
        return 2
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        print(f"plot_sweep: {csv_path} has no rows", file=sys.stderr)
        return 1
    os.makedirs(out_dir, exist_ok=True)
    for i, p in enumerate(sweep.get("plot", [])):
        if p["kind"] == "table":
            table(p, rows)
            continue
        fig = lines(p, rows, out_dir) if p["kind"] == "lines" else heatmap(p, rows, out_dir)
        if "title" in p:
            fig.suptitle(p["title"])
        fig.tight_layout()
        path = os.path.join(out_dir, p.get("file", f"plot{i}.png"))
        fig.savefig(path, dpi=110)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
