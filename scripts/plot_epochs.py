#!/usr/bin/env python3
"""Throughput per epoch of a benchkv run: one line per run (and per rank with --per-rank).

usage: plot_epochs.py [-h] [--per-rank] [-o OUT.png] RESULTS.csv

RESULTS.csv is benchkv's per-epoch CSV (-o; simulated or real runs alike), columns
run,rank,client_id,epoch,requests,duration_ns (benchkv data's leads with value_size, which
is not used: its runs count over the sizes): one row per client and kept epoch. As in
benchkv's summary, an epoch's duration is the longest any client of the run reports for
it, and its Mops are the requests of all clients (or of one rank's clients) over that
duration. The per-epoch totals are also printed, one "run epoch mops" line each (and
"run epoch rank mops" with --per-rank), so the picture's numbers can be checked.
Writes OUT.png (default: RESULTS with .png for .csv).
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

COLUMNS = ["run", "rank", "client_id", "epoch", "requests", "duration_ns"]


def fail(msg):
    print(f"plot_epochs: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    """The CSV as integers, or an error naming what is wrong with it."""
    try:
        df = pd.read_csv(path, dtype=str)
    except FileNotFoundError:
        fail(f"{path}: no such file")
    except pd.errors.EmptyDataError:
        fail(f"{path}: empty file, not a benchkv per-epoch CSV")
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        fail(f"{path}: not a CSV ({str(e).strip()})")
    if list(df.columns) == ["value_size"] + COLUMNS:  # benchkv data: each run is one value size
        df = df.drop(columns=["value_size"])
    if list(df.columns) != COLUMNS:
        fail(f"{path}: not a benchkv per-epoch CSV: columns are {','.join(map(str, df.columns))}, "
             f"expected {','.join(COLUMNS)}")
    if df.empty:
        fail(f"{path}: no rows (a run with every epoch trimmed?)")
    for col in COLUMNS:
        bad = ~df[col].fillna("").str.fullmatch(r"[0-9]+")
        if bad.any():
            row = int(bad.idxmax())
            fail(f"{path}: line {row + 2}: {col} is '{df[col][row]}', not a non-negative integer")
        df[col] = df[col].astype("int64")
    dup = df.duplicated(["run", "rank", "client_id", "epoch"])
    if dup.any():
        row = int(dup.idxmax())
        fail(f"{path}: line {row + 2}: a second row for run {df['run'][row]}, rank {df['rank'][row]}, "
             f"client {df['client_id'][row]}, epoch {df['epoch'][row]}")
    return df


def epoch_mops(df, per_rank):
    """Mops per (run, epoch) or per (run, epoch, rank): requests over the epoch's duration
    (the longest any client of the run reports for it)."""
    duration = df.groupby(["run", "epoch"])["duration_ns"].max().rename("epoch_ns")
    zero = duration[duration == 0]
    if not zero.empty:
        run, epoch = zero.index[0]
        fail(f"run {run} epoch {epoch}: every client reports a duration of 0 ns")
    keys = ["run", "epoch", "rank"] if per_rank else ["run", "epoch"]
    req = df.groupby(keys)["requests"].sum().rename("requests").reset_index()
    req = req.join(duration, on=["run", "epoch"])
    req["mops"] = req["requests"] / req["epoch_ns"] * 1e3
    return req


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Columns: " + ",".join(COLUMNS) + " (benchkv -o).")
    ap.add_argument("csv", metavar="RESULTS.csv", help="benchkv per-epoch CSV")
    ap.add_argument("-o", "--output", metavar="OUT.png", help="picture to write (default: RESULTS.png)")
    ap.add_argument("--per-rank", action="store_true", help="one line per run and rank (dashed) as well")
    args = ap.parse_args()
    out = args.output or os.path.splitext(args.csv)[0] + ".png"

    df = load(args.csv)
    total = epoch_mops(df, per_rank=False)
    ranks = epoch_mops(df, per_rank=True) if args.per_rank else None

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run, g in total.groupby("run"):
        line, = ax.plot(g["epoch"], g["mops"], marker="o", label=f"run {run}")
        for r in g.itertuples():
            print(f"{run} {r.epoch} {r.mops:.6f}")
        if ranks is not None:
            for rank, rg in ranks[ranks["run"] == run].groupby("rank"):
                ax.plot(rg["epoch"], rg["mops"], linestyle="--", color=line.get_color(), alpha=0.6,
                        label=f"run {run} rank {rank}")
                for r in rg.itertuples():
                    print(f"{run} {r.epoch} {rank} {r.mops:.6f}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("Mops")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Throughput per epoch: {os.path.basename(args.csv)}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", ncol=2 if args.per_rank else 1)
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=120)
    except OSError as e:
        fail(f"cannot write {out}: {e}")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
