#!/usr/bin/env python3
"""Pictures of the bistability experiment (run by scripts/run_main.sh).

usage: plot_bistability.py OUTDIR LABEL=PREFIX [LABEL=PREFIX ...] [--regime REGIME.csv]
  REGIME.csv: the results.csv of `benchkv sweep configs/sweeps/regime_map.json`
  (columns np, start_mode, mops_per_rank, cqe_per_loop; docs/figures/regime.csv is one).
  PREFIX is a benchkv output path without extension: PREFIX.csv, PREFIX.summary.json,
  PREFIX.inflight.csv must exist. Writes OUTDIR/timeseries.png, OUTDIR/timeseries_start.png,
  OUTDIR/cqe_histogram.png
  and, with --regime, OUTDIR/regime_map.png.
"""
import csv
import json
import os
import sys
import textwrap

from cli_help import help_or_refuse, pyplot, require_modules

BUCKETS = ("0", "1", "2-10", "11-100", ">100")


def load_series(prefix, bin_us=100.0):
    """Per-rank-averaged series from the in-flight samples: time (ms), throughput per
    rank (Mops, over bins of bin_us), calls in flight (daemon 0), CQEs per loop."""
    rows = list(csv.DictReader(open(prefix + ".inflight.csv")))
    ranks = sorted({int(r["rank"]) for r in rows})
    by_t = {}
    for r in rows:
        if r["daemon"] != "0":
            continue
        t = float(r["t_us"])
        e = by_t.setdefault(t, {"inflight": 0.0, "cqes": 0, "loops": 0, "completed": 0})
        e["inflight"] += float(r["calls_in_flight"]) / len(ranks)
        e["cqes"] += int(r["cqes"])
        e["loops"] += int(r["loops"])
        e["completed"] += int(r["rank_completed"])
    ts = sorted(by_t)
    t_ms, mops, infl, cpl = [], [], [], []
    last_t, last_c, cq, lp = None, None, 0, 0
    for t in ts:
        e = by_t[t]
        cq += e["cqes"]
        lp += e["loops"]
        if last_t is None:
            last_t, last_c = t, e["completed"]
            continue
        if t - last_t >= bin_us:
            t_ms.append(t / 1000.0)
            mops.append((e["completed"] - last_c) / len(ranks) / (t - last_t))  # per us = Mops
            infl.append(e["inflight"])
            cpl.append(cq / lp if lp else 0.0)
            last_t, last_c, cq, lp = t, e["completed"], 0, 0
    return t_ms, mops, infl, cpl


def hist(prefix):
    s = json.load(open(prefix + ".summary.json"))
    d0 = [d for d in s["daemons"] if d["daemon"] == 0]
    loops = sum(d["loops"] for d in d0)
    # RPC completions per loop: the reading C1's "CQEs per loop" is compared with
    # (docs/calibration.md §How the figures were taken (C6)).
    return [100.0 * sum(d["completions_per_loop_hist"][b] for d in d0) / loops for b in BUCKETS]


def configuration(prefix):
    """The run's own description: backend, clients x queue depth per node, and NP."""
    c = json.load(open(prefix + ".summary.json"))["config"]
    return {"backend": str(c.get("backend")).capitalize(), "shape": f"{c.get('client_threads')} clients x QD "
            f"{c.get('queue_depth')} per node", "np": f"NP={c.get('np')}"}


def title_and_labels(series):
    """A title from what every run shares (backend, clients, queue depth), and legend labels
    that add what differs between them (the LABEL given first)."""
    configs = [configuration(prefix) for _, prefix in series]
    shared = [k for k in ("backend", "shape", "np") if len({c[k] for c in configs}) == 1]
    title = ", ".join(configs[0][k] for k in shared) or "runs"
    labels = []
    for (label, _), c in zip(series, configs):
        extra = [c[k] for k in ("backend", "shape", "np") if k not in shared and c[k] not in label]
        labels.append(label + (f" ({', '.join(extra)})" if extra else ""))
    return title, labels


def plain(value, _pos=None):
    """A tick label in plain numbers (0.5, 2, 30), not 10^0 or 2x10^0."""
    return f"{value:g}"


def log_axis(ax, values):
    """A log y axis labelled in plain numbers (1, 10, 100, not 10^0) that labels enough
    ticks to be read: when the values span less than a decade (one labelled power of ten
    at most), the minor ticks are labelled too."""
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(plain))
    positive = [v for v in values if v > 0]
    if positive and max(positive) < 10 * min(positive):
        ax.yaxis.set_minor_formatter(FuncFormatter(plain))


def symlog_axis(ax, values):
    """The CQEs-per-loop axis: symmetric log with a linear part below 1 (a bin can have no
    loop: 0). When the values span less than a decade above 1, the log part has at most
    one power of ten in view and no minor tick: ticks at round values instead. Labels in
    plain numbers (0, 1, 10), as log_axis gives them."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.set_yscale("symlog", linthresh=1)
    if values and max(values) < 10 * max(min(values), 1.0):
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
    ax.yaxis.set_major_formatter(FuncFormatter(plain))


def regime_figure(rows):
    """The regime map from the sweep's results.csv rows (dicts)."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    cqes = []
    for start in ("sync", "staggered"):
        rr = sorted((int(r["np"]), float(r["mops_per_rank"]), float(r["cqe_per_loop"]))
                    for r in rows if r["start_mode"] == start)
        if not rr:
            continue
        axes[0].plot([r[0] for r in rr], [r[1] for r in rr], "o-", label=f"{start} start")
        axes[1].plot([r[0] for r in rr], [r[2] for r in rr], "o-", label=f"{start} start")
        cqes += [r[2] for r in rr]
    axes[0].set_ylabel("throughput per rank\n(M requests/s)")
    axes[1].set_ylabel("CQEs per loop")
    log_axis(axes[1], cqes)
    axes[1].set_xlabel("NP (nodes)")
    axes[1].xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Regime map: equilibrium reached from a synchronized vs a staggered start")
    fig.tight_layout()
    return fig


def timeseries_figure(series, shared, bin_us, t_max=None):
    """Throughput, calls in flight and CQEs per loop over virtual time, in bins of bin_us,
    up to t_max ms (None: the whole run). The subtitle says what is shown."""
    plt = pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    shown = 0.0  # the last bin drawn (ms)
    cqes = []
    for label, prefix in series:
        t, mops, infl, cpl = load_series(prefix, bin_us)
        if t_max is not None:
            # The start is counted from the clients' start, the first sample: a run with a
            # start-up phase (idle daemon loops first) samples from its clients' start on.
            t0 = t[0] if t else 0.0
            keep = [i for i, x in enumerate(t) if x - t0 <= t_max]
            t, mops, infl, cpl = ([v[i] for i in keep] for v in (t, mops, infl, cpl))
            t = [x - t0 for x in t]
        shown = max([shown] + t)
        axes[0].plot(t, mops, label=label)
        axes[1].plot(t, infl, label=label)
        axes[2].plot(t, cpl, label=label)
        cqes += cpl
    axes[0].set_ylabel("throughput per rank\n(M requests/s)")
    axes[1].set_ylabel("copyrpc calls in flight\n(daemon #0, rank avg)")
    axes[2].set_ylabel("CQEs per loop")
    symlog_axis(axes[2], cqes)
    axes[2].set_xlabel("virtual time (ms)" if t_max is None else "virtual time since the clients' start (ms)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    span = "whole run" if t_max is None else f"first {shown:.3g} ms"
    fig.suptitle(f"{shared}: {span}, {bin_us:g} us bins")
    fig.tight_layout()
    return fig


def main(argv):
    help_or_refuse(argv, __doc__, "plot_bistability.py", options=("--regime",))
    args = argv[1:]
    regime = None
    if "--regime" in args:
        i = args.index("--regime")
        if i + 1 == len(args):
            print("plot_bistability: --regime needs a file (REGIME.csv)", file=sys.stderr)
            return 2
        regime = args[i + 1]
        del args[i:i + 2]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    outdir, series = args[0], [a.rsplit("=", 1) for a in args[1:]]
    for a, s in zip(args[1:], series):
        if len(s) != 2:
            print(f"plot_bistability: \"{a}\" is not LABEL=PREFIX", file=sys.stderr)
            return 2
    # Every input is checked before anything is drawn: one line naming a missing file.
    inputs = [prefix + ext for _, prefix in series for ext in (".inflight.csv", ".summary.json")]
    inputs += [regime] if regime else []
    for path in inputs:
        if not os.path.isfile(path):
            print(f"plot_bistability: {path}: no such file", file=sys.stderr)
            return 2
    require_modules("plot_bistability.py", "the figures")
    plt = pyplot()
    os.makedirs(outdir, exist_ok=True)
    shared, labels = title_and_labels(series)
    series = [(lab, prefix) for lab, (_, prefix) in zip(labels, series)]

    for name, bin_us, t_max in (("timeseries.png", 100.0, None), ("timeseries_start.png", 20.0, 3.0)):
        fig = timeseries_figure(series, shared, bin_us, t_max)
        fig.savefig(os.path.join(outdir, name), dpi=110)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(series)
    for i, (label, prefix) in enumerate(series):
        h = hist(prefix)
        ax.bar([x + i * width for x in range(len(BUCKETS))], h, width, label=label)
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(BUCKETS))])
    ax.set_xticklabels(BUCKETS)
    ax.set_xlabel("RPC completions handed back in one daemon loop")
    ax.set_ylabel("share of loops (%)")
    # Wrapped: the configuration's words and this figure's would not fit one line of it.
    ax.set_title(textwrap.fill(f"{shared}: completions per loop (kept epochs, daemon #0 of every rank)", 70),
                 fontsize=11)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "cqe_histogram.png"), dpi=110)

    if regime:
        regime_figure(list(csv.DictReader(open(regime)))).savefig(os.path.join(outdir, "regime_map.png"), dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
