#!/usr/bin/env python3
"""Plots the bandwidth and median latency over value size of `benchkv data` runs.

usage: plot_data.py OUT.png LABEL=RUN.summary.json [LABEL=RUN.summary.json ...]
       plot_data.py OUT.png --table TABLE.csv --title TITLE

Each summary's "data" section gives, per value size, GiB/s and the latency percentiles
(docs/data.md). With several runs per size, the mean over runs is plotted. The title
says the configuration the summaries share (transport, nodes, clients, queue depth,
read ratio, data backend); the labels tell the curves apart.
With --table, the figures come from a CSV of summaries' per-size figures instead (the
runs' summaries not kept; docs/figures/data_ucx_real.csv is one): one curve per value of
its column backend (the curve's label), columns value_size, gib_per_s and
latency_p50_us, other columns ignored; TITLE says what the rows share.
"""
import csv
import json
import math
import sys
from collections import defaultdict

from cli_help import help_or_refuse, pyplot, require_modules


def read_summary(path):
    with open(path) as f:
        summary = json.load(f)
    return summary.get("config", {}), per_size(summary["data"]["runs"])


def per_size(runs):
    acc = defaultdict(list)
    for r in runs:
        acc[r["value_size"]].append(r)
    sizes = sorted(acc)
    gib = [sum(r["gib_per_s"] for r in acc[s]) / len(acc[s]) for s in sizes]
    p50 = [sum(r.get("latency_p50_us", 0) for r in acc[s]) / len(acc[s]) for s in sizes]
    return sizes, gib, p50


def read_table(path):
    """[(label, per_size figures)] from a CSV of per-size figures, one curve per backend
    in the order they first appear."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    runs = {}
    for r in rows:
        runs.setdefault(r["backend"], []).append({"value_size": int(r["value_size"]),
                                                 "gib_per_s": float(r["gib_per_s"]),
                                                 "latency_p50_us": float(r["latency_p50_us"])})
    if not runs:
        raise ValueError("no rows")
    return [(label, per_size(r)) for label, r in runs.items()]


def title(configs):
    """The settings every summary shares, in words ("" when none is shared)."""
    def shared(key):
        values = {json.dumps(c.get(key)) for c in configs}
        return configs[0].get(key) if len(values) == 1 else None

    parts = []
    if shared("transport") is not None:
        parts.append(f"--transport {shared('transport')}")
    if shared("np") is not None:
        parts.append(f"{shared('np')} nodes")
    clients, qd = shared("client_threads"), shared("queue_depth")
    if clients is not None and qd is not None:
        parts.append(f"{clients} client{'s' if clients != 1 else ''} x QD {qd} per node")
    if shared("read_ratio") is not None:
        parts.append(f"read ratio {shared('read_ratio'):g}")
    if shared("data_backend") is not None:
        parts.append(f"{shared('data_backend')} backend")
    return "benchkv data" + (": " + ", ".join(parts) if parts else "")


def plain(value, _pos=None):
    """A tick label in plain numbers (3.2, 10, 200), not 3.2x10^0."""
    return f"{value:g}"


def plain_2_5(value, pos=None):
    """A minor tick label at 2 and 5 times a power of ten only: labels at every minor tick
    of a log axis run into each other near the decade's end (600, 700, 800, 900)."""
    mantissa = value / 10 ** math.floor(math.log10(value))
    return plain(value, pos) if round(mantissa, 6) in (2.0, 5.0) else ""


def figure(curves, configs, title_text=None):
    """The figure; its title title_text, else the settings the configs share."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    fig, (bw, lat) = plt.subplots(1, 2, figsize=(11, 4.4))
    for label, (sizes, gib, p50) in curves:
        bw.plot(sizes, gib, marker="o", label=label)
        lat.plot(sizes, p50, marker="o", label=label)
    for ax in (bw, lat):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("value size (bytes)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    bw.set_ylabel("GiB/s (all nodes, puts + gets)")
    lat.set_ylabel("latency p50 (us)")
    lat.set_yscale("log")
    lat.yaxis.set_major_formatter(FuncFormatter(plain))
    lat.yaxis.set_minor_formatter(FuncFormatter(plain_2_5))
    fig.suptitle(title_text if title_text is not None else title(configs))
    fig.tight_layout()
    return fig


def table_args(argv):
    """(TABLE.csv, TITLE) of `OUT.png --table TABLE.csv --title TITLE`; a missing or
    repeated option, or anything else among the arguments, exits 2 naming it."""
    args, given = argv[2:], {}
    while args:
        if args[0] not in ("--table", "--title") or len(args) < 2:
            what = f"{args[0]} needs a value" if args[0] in ("--table", "--title") else f"unexpected {args[0]!r}"
            print(f"plot_data: {what} (usage: plot_data.py OUT.png --table TABLE.csv --title TITLE)", file=sys.stderr)
            sys.exit(2)
        if args[0] in given:
            print(f"plot_data: {args[0]} given twice", file=sys.stderr)
            sys.exit(2)
        given[args[0]] = args[1]
        args = args[2:]
    for option in ("--table", "--title"):
        if option not in given:
            print(f"plot_data: --table needs --title (and --title needs --table): {option} missing", file=sys.stderr)
            sys.exit(2)
    return given["--table"], given["--title"]


def main_table(argv):
    path, title_text = table_args(argv)
    try:
        curves = read_table(path)
    except FileNotFoundError:
        print(f"plot_data: {path}: no such file", file=sys.stderr)
        sys.exit(2)
    except (KeyError, ValueError, TypeError) as e:
        print(f"plot_data: {path}: not a table of per-size figures (columns backend, value_size, gib_per_s, "
              f"latency_p50_us, one row per curve and size): {type(e).__name__} {e}", file=sys.stderr)
        sys.exit(2)
    require_modules("plot_data.py", "the figure")
    figure(curves, [], title_text).savefig(argv[1], dpi=110)


def main(argv):
    help_or_refuse(argv, __doc__, "plot_data.py", options=("--table", "--title"))
    if len(argv) >= 3 and ("--table" in argv[2:] or "--title" in argv[2:]):
        return main_table(argv)
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        sys.exit(__doc__)
    # Every input is read before anything is drawn: a missing file or a summary of another
    # kind is one line naming it (exit status 2), not a traceback.
    curves, configs = [], []
    for arg in argv[2:]:
        label, path = arg.split("=", 1)
        try:
            config, sizes = read_summary(path)
            curves.append((label, sizes))
            configs.append(config)
        except FileNotFoundError:
            print(f"plot_data: {path}: no such file", file=sys.stderr)
            sys.exit(2)
        except (KeyError, TypeError, json.JSONDecodeError):
            print(f"plot_data: {path}: not a benchkv data summary (no data.runs section)", file=sys.stderr)
            sys.exit(2)
    require_modules("plot_data.py", "the figure")
    figure(curves, configs).savefig(argv[1], dpi=110)


if __name__ == "__main__":
    main(sys.argv)
