#!/usr/bin/python3
"""Figures and tables of a sweep (`benchkv sweep SWEEP.json`), as its "plot" entries say.

usage: plot_sweep.py SWEEP.json [--csv RESULTS.csv] [--out-dir DIR]
  Reads OUTPUT/results.csv of the sweep (or --csv) and, for each entry of "plot":
    lines    y (one panel per column in y) against x, one line per value of "by";
             columns listed in "logy" get a log scale. Rows that differ only in an axis
             the entry does not plot (a "seed" axis: independent repetitions) are one
             point: their mean, with its 95 % confidence interval (Student's t) as an
             error bar; a run of --repeat N carries its own interval (mops_ci95_low/high).
             A percentile (latency_p50_ns, latency_p99_ns, latency_p999_ns) is instead
             that of every request of the point's runs pooled, read from the latency
             histograms in their summaries (OUTPUT/runs/NNNN/, as benchkv compare reads
             them; no error bar, each run's own figure a dot), when every run of the
             panel's points has them; else the mean of the runs' percentiles. The
             panel's legend title says which
    heatmap  z over the grid x by y (one cell per run, the mean over unplotted axes, or
             a percentile pooled as for lines, the colour bar's label says which; a
             missing run is blank)
    share    the share of runs whose y is above the entry's "above" (which of two states a
             bistable run reached: a mean over seeds would draw a state no run was in),
             against x, one line per value of "by", over the rows an unplotted axis (seed)
             tells apart, with its 95 % Wilson score interval as an error bar; also printed
             on stdout, one line per point: by, x, runs above / runs, share and interval
    table    printed on stdout: one line per value of "by", for each value of x the
             columns in y (the mean over unplotted axes, or a percentile pooled as for
             lines: a line after the table says which)
  "logx": true puts the x axis of a "lines" or "share" entry on a log scale, ticked at the x
  values.
  Axes are named with their units (latency columns are drawn in microseconds); integer
  axes get integer ticks. A figure's title is the entry's "title", else made from the runs'
  configuration (their summaries in OUTPUT/runs/NNNN/, or the sweep file's base and set
  when no run has one): the mode or backend, transport and NP every run shares, and the
  grid's axes. Figures go to OUTPUT/FILE (or DIR/FILE); their paths are
  printed on stderr. benchkv checks the entries when it loads the sweep, so the columns
  named here exist.
"""
import csv
import json
import os
import sys
import textwrap

from cli_help import pyplot, require_modules
from latency_histogram import collect, percentile
from plot_bistability import log_axis


# Column -> axis label with its unit. Latency columns (ns in results.csv) are drawn in us.
LABELS = {
    "mops_total": "throughput, all ranks ({rate})",
    "mops_per_rank": "throughput per rank ({rate})",
    "cqe_per_loop": "daemon #0 CQEs per loop",
    "inflight": "daemon #0 calls in flight",
    "issued": "requests issued",
    "completed": "requests completed",
    "errors": "errors",
    "latency_mean_ns": "latency mean (us)",
    "latency_p50_ns": "latency p50 (us)",
    "latency_p99_ns": "latency p99 (us)",
    "latency_p999_ns": "latency p99.9 (us)",
    "latency_max_ns": "latency max (us)",
    "np": "nodes (NP)",
    "client_threads": "client threads per node",
    "server_threads": "daemon threads per node",
    "queue_depth": "queue depth (requests in flight per client)",
    "message_size": "message size (bytes)",
    "value_size": "value size (bytes)",
    "key_range": "keys per node",
    "read_ratio": "read ratio",
    "duration": "run length (s)",
    "interval_ms": "epoch (ms)",
    "batch_hold_us": "batch hold (us)",
    "start_stagger_us": "start spread (us)",
    "endpoints": "endpoints per server rank",
    "ring_size": "copyrpc ring (bytes)",
    "poll_budget": "poll budget",
    "seed": "seed",
}
# Student's t(0.975, df) for df = 1..30; beyond, the normal's 1.96 (within 2 %).
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042]


# The percentile columns of results.csv, and the fraction each reads.
PERCENTILES = {"latency_p50_ns": 0.5, "latency_p99_ns": 0.99, "latency_p999_ns": 0.999}


class RunHistograms:
    """The latency histograms of a sweep's runs, from their summaries in OUTPUT/runs/NNNN/,
    for the percentiles of several runs pooled. A run's are used only when its row.json
    records the very row of results.csv (the same run, not a rerun or another sweep's) and
    they give back the row's own percentiles; else the run has none (`missing` says why)."""

    def __init__(self, out):
        self.out = out
        self.cache = {}
        self.missing = []  # why runs have none (the first goes on stderr when a figure averages)
        self.averaged = False

    def of(self, row):
        """(counts by bucket lower bound, (min, max) ns, saturated) of the row's run, or None."""
        key = row.get("run")
        if key not in self.cache:
            self.cache[key] = self._read(row)
        return self.cache[key]

    def _read(self, row):
        run = str(row.get("run") or "")
        d = os.path.join(self.out, "runs", f"{int(run):04d}") if run.isdigit() else None
        try:
            with open(os.path.join(d, "row.json")) as f:
                recorded = json.load(f)["row"]
            with open(os.path.join(d, "out.summary.json")) as f:
                summary = json.load(f)
        except (TypeError, OSError, ValueError, KeyError):
            self.missing.append(f"run {run}: no summary and row.json")
            return None
        if not isinstance(recorded, str) or next(csv.reader([recorded]), None) != list(row.values()):
            self.missing.append(f"run {run}: its row.json records another row")
            return None
        try:
            counts, extremes = collect(summary, "all", None, None)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            self.missing.append(f"run {run}: {e}")
            return None
        if not counts:
            self.missing.append(f"run {run}: no histogram")
            return None
        for col, p in PERCENTILES.items():
            if row.get(col, "") == "" or percentile(counts, extremes, p) != float(row[col]):
                self.missing.append(f"run {run}: its histograms do not give the row's {col}")
                return None
        return counts, extremes, saturated(summary)


def saturated(summary):
    """Whether a latency histogram of the summary is marked saturated (its counts too low:
    a percentile of it is off in either direction, docs/outputs.md)."""
    if "rpc" in summary or "data" in summary:
        key = "rtt_saturated" if "rpc" in summary else "latency_saturated"
        section = summary["rpc" if "rpc" in summary else "data"]
        return any(r.get(key) is True for r in section.get("runs", []))
    return any(isinstance(c, dict) and c.get("saturated") is True
               for r in summary.get("runs", []) if isinstance(r.get("latency"), dict)
               for c in r["latency"].values())


def pooled_percentile(col, rows, histograms):
    """The percentile `col` of every request of `rows` pooled, in us, and whether a
    histogram was saturated; None when a row's run has no histograms."""
    hs = [histograms.of(r) for r in rows] if histograms is not None else [None]
    if any(h is None for h in hs):
        return None
    merged = {}
    for counts, _, _ in hs:
        for lower, n in counts.items():
            merged[lower] = merged.get(lower, 0) + n
    extremes = (min(h[1][0] for h in hs), max(h[1][1] for h in hs))
    return percentile(merged, extremes, PERCENTILES[col]) / 1000.0, any(h[2] for h in hs)


def pools(col, points, histograms):
    """Whether the percentile `col` is drawn pooled over `points` (lists of rows, one per
    point): when some point has several runs and every such point's runs have histograms."""
    several = [at for at in points if len(at) > 1]
    return (col in PERCENTILES and bool(several) and
            all(pooled_percentile(col, at, histograms) is not None for at in several))


def how_text(col, points, histograms):
    """What a point of `col` over several runs is, in words (None when no point has
    several): "pooled" or the mean, with the reason."""
    if col not in PERCENTILES or not any(len(at) > 1 for at in points):
        return None
    p = col[len("latency_"):-len("_ns")].replace("p999", "p99.9")
    if pools(col, points, histograms):
        sat = any(pooled_percentile(col, at, histograms)[1] for at in points if len(at) > 1)
        return (f"{p} of every request of a point's runs pooled (their histograms)" +
                ("; a histogram saturated: not exact" if sat else ""))
    if histograms is not None:
        histograms.averaged = True
    return f"mean of a point's runs' {p} (no latency histograms of every run)"


def t975(df):
    return T975[df - 1] if df <= len(T975) else 1.96


def rate_unit(sweep):
    """M requests/s for the KV backends, M calls/s for rpc, M operations/s for data."""
    modes = set()
    for where in (sweep.get("set", {}), sweep.get("base") if isinstance(sweep.get("base"), dict) else {}):
        if isinstance(where, dict) and "backend" in where:
            modes.add(where["backend"])
    axis = sweep.get("grid", {}).get("backend")
    if isinstance(axis, list):
        modes.update(axis)
    if modes == {"rpc"}:
        return "M calls/s"
    if modes == {"data"}:
        return "M operations/s"
    return "M requests/s"


def label(col, rate):
    if col in LABELS:
        return LABELS[col].format(rate=rate)
    if col.startswith("model."):
        return "model " + col[len("model."):]
    return col


def value(col, text):
    """A figure as drawn: latency in us, the rest as written."""
    v = float(text)
    return v / 1000.0 if col.startswith("latency_") and col.endswith("_ns") else v


def is_number(v):
    return sort_key(v)[0] == 0


def integer_axis(values):
    """Whether every value is an integer (then ticks are the values themselves)."""
    try:
        return all(float(v) == int(float(v)) for v in values)
    except ValueError:
        return False


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


def mean_ci(values):
    """Mean and the half-width of its 95 % confidence interval (0 for one value)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, 0.0
    sd = (sum((x - m) ** 2 for x in values) / (n - 1)) ** 0.5
    return m, t975(n - 1) * sd / n ** 0.5


def wilson(k, n):
    """The 95 % Wilson score interval of a share k / n (n > 0): (low, high)."""
    z = 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) + z * z / (4 * n)) / n) ** 0.5 / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def log_x(ax, xs):
    """A log x axis ticked at the x values themselves (a sweep's points, not powers of ten)."""
    ticks = sorted({float(x) for x in xs})
    ax.set_xscale("log")
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.minorticks_off()


def share_points(p, rows):
    """{by value: [(x, runs above, runs, low, high)]} of a "share" entry, x in order."""
    y, above = p["y"], float(p["above"])
    groups = ordered(r[p["by"]] for r in rows) if "by" in p else [None]
    points = {}
    for g in groups:
        rr = [r for r in rows if (g is None or r[p["by"]] == g) and r[y] != ""]
        for x in sorted(ordered(r[p["x"]] for r in rr), key=sort_key):
            at = [value(y, r[y]) for r in rr if r[p["x"]] == x]
            k = sum(v > above for v in at)
            points.setdefault(g, []).append((x, k, len(at)) + wilson(k, len(at)))
    return points


def share_table(p, rows):
    for g, pts in share_points(p, rows).items():
        for x, k, n, low, high in pts:
            name = f"{p['by']}={g} " if g is not None else ""
            print(f"{name}{p['x']}={x}: {p['y']} > {p['above']} in {k} of {n} runs, "
                  f"share {k / n:.2f} (95 % {low:.2f}-{high:.2f})")


def share(p, rows, rate):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.5))
    points = share_points(p, rows)
    for g, pts in points.items():
        xs = [float(q[0]) if is_number(q[0]) else q[0] for q in pts]
        ys = [q[1] / q[2] for q in pts]
        # (rounding can put an end of the interval a hair inside the share: no negative bar)
        err = [[max(0.0, y - q[3]) for y, q in zip(ys, pts)], [max(0.0, q[4] - y) for y, q in zip(ys, pts)]]
        name = f"{label(p['by'], rate)} = {g}" if g is not None else None
        ax.errorbar(xs, ys, yerr=err, fmt="o-", capsize=3, label=name)
    ax.set_xlabel(label(p["x"], rate))
    ax.set_ylabel(f"share of runs:\n{label(p['y'], rate)} > {p['above']:g}")
    ax.set_ylim(-0.05, 1.05)
    if p.get("logx"):
        log_x(ax, [x for pts in points.values() for x, *_ in pts])
    ax.grid(alpha=0.3)
    if "by" in p:
        ax.legend(fontsize=8)
    return fig


def run_configs(out):
    """The "config" of every run's summary under OUTPUT/runs/ (none before the sweep ran)."""
    configs = []
    runs = os.path.join(out, "runs")
    for name in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
        path = os.path.join(runs, name, "out.summary.json")
        try:
            with open(path) as f:
                configs.append(json.load(f)["config"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return configs


def sweep_config(sweep, sweep_path):
    """The settings the sweep file gives every run: its base (an object, or a config file)
    updated with its set (when no run's summary is there to say more)."""
    base = sweep.get("base", {})
    if isinstance(base, str):
        try:
            with open(os.path.join(os.path.dirname(os.path.abspath(sweep_path)), base)) as f:
                base = json.load(f)
        except (OSError, ValueError):
            base = {}
    config = dict(base) if isinstance(base, dict) else {}
    config.update(sweep.get("set", {}) if isinstance(sweep.get("set"), dict) else {})
    return config


def config_title(sweep, configs):
    """What every run shares, in words, then the grid's axes: "benchkv rpc: --transport sim,
    NP=2; over message_size, 3 seeds per point". `configs` are the runs' effective
    configurations (or the one the sweep file gives them all)."""
    grid = sweep.get("grid", {}) if isinstance(sweep.get("grid"), dict) else {}

    def shared(key):
        values = {json.dumps(c.get(key)) for c in configs}
        return configs[0].get(key) if configs and len(values) == 1 and key not in grid else None

    backend = shared("backend")
    if backend in ("rpc", "data"):
        head = f"benchkv {backend}"
        if backend == "data" and shared("data_backend") is not None:
            head += f" ({shared('data_backend')} backend)"
    elif backend is not None:
        head = f"{str(backend).capitalize()} backend"
    else:
        head = "benchkv sweep"
    parts = []
    if shared("transport") is not None:
        parts.append(f"--transport {shared('transport')}")
    if shared("np") is not None:
        parts.append(f"NP={shared('np')}")
    axes = [k for k in grid if k != "seed"]
    over = []
    if axes:
        over.append("over " + " x ".join(axes))
    if "seed" in grid and isinstance(grid["seed"], list):
        over.append(f"{len(grid['seed'])} seeds per point")
    title = head + (": " + ", ".join(parts) if parts else "")
    return title + ("; " + ", ".join(over) if over else "")


def lines(p, rows, rate, histograms=None):
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator
    ys = as_list(p["y"])
    logy = set(as_list(p.get("logy", [])))
    groups = ordered(r[p["by"]] for r in rows) if "by" in p else [None]
    xs_all = ordered(r[p["x"]] for r in rows)
    fig, axes = plt.subplots(len(ys), 1, figsize=(8, 3.5 * len(ys)), sharex=True, squeeze=False)
    for ax, y in zip(axes[:, 0], ys):
        drawn = []  # the panel's means, for its log axis
        panel = {}  # (group, x) -> the rows of the point
        for g in groups:
            rr = [r for r in rows if (g is None or r[p["by"]] == g) and r[y] != ""]
            for x in sorted(ordered(r[p["x"]] for r in rr), key=sort_key):
                panel[(g, x)] = [r for r in rr if r[p["x"]] == x]
        pooled = pools(y, panel.values(), histograms)
        for g in groups:
            points, dots = [], []
            for (pg, x), at in panel.items():
                if pg != g:
                    continue
                xv = float(x) if is_number(x) else x
                if pooled and len(at) > 1:  # the runs' requests pooled: no interval; each run a dot
                    m, half = pooled_percentile(y, at, histograms)[0], 0.0
                    dots += [(xv, value(y, r[y])) for r in at]
                else:
                    m, half = mean_ci([value(y, r[y]) for r in at])
                if len(at) == 1 and y == "mops_total" and at[0].get("mops_ci95_low", "") != "":
                    half = (float(at[0]["mops_ci95_high"]) - float(at[0]["mops_ci95_low"])) / 2
                points.append((xv, m, half))
            if not points:
                continue
            drawn += [q[1] for q in points]
            name = f"{label(p['by'], rate)} = {g}" if g is not None else label(y, rate)
            bars = ax.errorbar([q[0] for q in points], [q[1] for q in points], yerr=[q[2] for q in points], fmt="o-",
                               capsize=3, label=name)
            if dots:
                ax.plot([d[0] for d in dots], [d[1] for d in dots], ".", alpha=0.5, color=bars[0].get_color())
        ax.set_ylabel(label(y, rate))
        if y in logy:
            log_axis(ax, drawn)  # labelled in plain numbers (1, 10), as plot_bistability's
        ax.grid(alpha=0.3)
        how = how_text(y, panel.values(), histograms)
        if how and pooled:
            how += "; dots: each run's"
        elif how:
            how += ", 95 % interval"
        ax.legend(fontsize=8, title=textwrap.fill(how, 60) if how else None, title_fontsize=8)
    xax = axes[-1, 0]
    xax.set_xlabel(label(p["x"], rate))
    if p.get("logx"):
        log_x(xax, xs_all)
    elif all(is_number(x) for x in xs_all) and integer_axis(xs_all):
        if len(xs_all) <= 16:
            xax.set_xticks(sorted(float(x) for x in xs_all))
            xax.set_xticklabels([str(int(float(x))) for x in sorted(xs_all, key=float)])
        else:
            xax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def heatmap(p, rows, rate, histograms=None):
    plt = pyplot()
    xs = sorted(ordered(r[p["x"]] for r in rows), key=sort_key)
    ys = sorted(ordered(r[p["y"]] for r in rows), key=sort_key)
    cells = {}
    for r in rows:
        if r[p["z"]] != "":
            cells.setdefault((r[p["y"]], r[p["x"]]), []).append(r)
    pooled = pools(p["z"], cells.values(), histograms)
    grid = [[float("nan")] * len(xs) for _ in ys]
    for (yv, xv), at in cells.items():
        vals = [value(p["z"], r[p["z"]]) for r in at]
        grid[ys.index(yv)][xs.index(xv)] = (pooled_percentile(p["z"], at, histograms)[0] if pooled and len(at) > 1
                                            else sum(vals) / len(vals))
    fig, ax = plt.subplots(figsize=(1.2 * len(xs) + 3, 0.8 * len(ys) + 2))
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(xs)), xs)
    ax.set_yticks(range(len(ys)), ys)
    ax.set_xlabel(label(p["x"], rate))
    ax.set_ylabel(label(p["y"], rate))
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            if v == v:
                # Dark text on light cells, light text on dark ones (readable on every colour).
                r, g, b, _ = im.cmap(im.norm(v))
                dark_cell = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=8,
                        color="white" if dark_cell else "black")
    how = how_text(p["z"], cells.values(), histograms)
    bar = fig.colorbar(im, ax=ax, label=label(p["z"], rate) + (f"\n{textwrap.fill(how, 40)}" if how else ""))
    if how:
        bar.ax.yaxis.label.set_fontsize(8)
    return fig


def table(p, rows, histograms=None):
    ys = as_list(p["y"])
    cols = ordered(r[p["x"]] for r in rows)
    groups = ordered(r[p["by"]] for r in rows) if "by" in p else [None]
    width = max([len(str(g)) for g in groups] + [8])
    print(f"{'':{width}s} | " + " | ".join(f"{c:^{11 * len(ys)}s}" for c in cols))
    print(f"{'':{width}s} | " + " | ".join(" ".join(f"{y[:10]:>10s}" for y in ys) for _ in cols))
    points = {y: [[x for x in rows if x[p["x"]] == c and (g is None or x[p["by"]] == g) and x[y] != ""]
                  for g in groups for c in cols] for y in ys}
    pooled = {y: pools(y, points[y], histograms) for y in ys}
    for g in groups:
        cells = []
        for c in cols:
            at = [x for x in rows if x[p["x"]] == c and (g is None or x[p["by"]] == g)]
            texts = []
            for y in ys:  # the mean over the rows an unplotted axis (seed) tells apart, or pooled
                with_y = [x for x in at if x[y] != ""]
                vals = [value(y, x[y]) for x in with_y]
                if pooled[y] and len(with_y) > 1:
                    vals = [pooled_percentile(y, with_y, histograms)[0]]
                texts.append(f"{sum(vals) / len(vals):>10.3f}" if vals else f"{'-':>10s}")
            cells.append(" ".join(texts))
        print(f"{str(g if g is not None else ''):{width}s} | " + " | ".join(cells))
    for y in ys:
        how = how_text(y, points[y], histograms)
        if how:
            print(f"{y}: {how}")


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
    rate = rate_unit(sweep)
    title = config_title(sweep, run_configs(out) or [sweep_config(sweep, sweep_path)])
    histograms = RunHistograms(out)
    if any(p["kind"] != "table" for p in sweep.get("plot", [])):
        require_modules("plot_sweep.py", "the figures", ("matplotlib",))  # a table needs none
    for i, p in enumerate(sweep.get("plot", [])):
        if p["kind"] == "table":
            table(p, rows, histograms)
            continue
        if p["kind"] == "share":
            share_table(p, rows)
            fig = share(p, rows, rate)
        else:
            fig = {"lines": lines, "heatmap": heatmap}[p["kind"]](p, rows, rate, histograms)
        fig.suptitle(p.get("title") or title)
        fig.tight_layout()
        path = os.path.join(out_dir, p.get("file", f"plot{i}.png"))
        fig.savefig(path, dpi=110)
        print(f"wrote {path}", file=sys.stderr)
    if histograms.averaged and histograms.missing:
        print(f"plot_sweep: percentiles over several runs are the mean of the runs', not pooled from their "
              f"histograms ({histograms.missing[0]})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
