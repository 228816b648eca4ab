#!/usr/bin/env python3
"""Plots the bandwidth and median latency over value size of `benchkv data` runs.

usage: plot_data.py OUT.png LABEL=RUN.summary.json [LABEL=RUN.summary.json ...]

Each summary's "data" section gives, per value size, GiB/s and the latency percentiles
(docs/data.md). With several runs per size, the mean over runs is plotted. The title
says the configuration the summaries share (transport, nodes, clients, queue depth,
read ratio, data backend); the labels tell the curves apart.
"""
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


def figure(curves, configs):
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
    fig.suptitle(title(configs))
    fig.tight_layout()
    return fig


def main(argv):
    help_or_refuse(argv, __doc__, "plot_data.py")
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
