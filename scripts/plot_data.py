#!/usr/bin/env python3
"""Plots the bandwidth and median latency over value size of `benchkv data` runs.

usage: plot_data.py OUT.png LABEL=RUN.summary.json [LABEL=RUN.summary.json ...]

Each summary's "data" section gives, per value size, GiB/s and the latency percentiles
(docs/data.md). With several runs per size, the mean over runs is plotted.
"""
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def per_size(path):
    with open(path) as f:
        runs = json.load(f)["data"]["runs"]
    acc = defaultdict(list)
    for r in runs:
        acc[r["value_size"]].append(r)
    sizes = sorted(acc)
    gib = [sum(r["gib_per_s"] for r in acc[s]) / len(acc[s]) for s in sizes]
    p50 = [sum(r.get("latency_p50_us", 0) for r in acc[s]) / len(acc[s]) for s in sizes]
    return sizes, gib, p50


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        sys.exit(__doc__)
    # Every input is read before anything is drawn: a missing file or a summary of another
    # kind is one line naming it (exit status 2), not a traceback.
    curves = []
    for arg in argv[2:]:
        label, path = arg.split("=", 1)
        try:
            curves.append((label, per_size(path)))
        except FileNotFoundError:
            print(f"plot_data: {path}: no such file", file=sys.stderr)
            sys.exit(2)
        except (KeyError, TypeError, json.JSONDecodeError):
            print(f"plot_data: {path}: not a benchkv data summary (no data.runs section)", file=sys.stderr)
            sys.exit(2)
    fig, (bw, lat) = plt.subplots(1, 2, figsize=(11, 4))
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
    fig.tight_layout()
    fig.savefig(argv[1], dpi=110)


if __name__ == "__main__":
    main(sys.argv)
