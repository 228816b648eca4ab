#!/usr/bin/env python3
"""Throughput per epoch of a benchkv run: one line per run (and a rank map with --per-rank).

usage: plot_epochs.py [-h] [--per-rank] [--print] [-o OUT.png] RESULTS.csv

RESULTS.csv is benchkv's per-epoch CSV (-o; simulated or real runs alike, any mode),
columns run,rank,client_id,epoch,requests,duration_ns, one row per client and kept epoch,
led by one more column in three cases: value_size (benchkv data) or message_size
(benchkv rpc with several sizes), whose runs are numbered across the sizes, so that each
run is one size (named in the legend); seed (--repeat), whose runs are numbered per
repetition: each (seed, run) is a line of its own, "seed S run R", printed "S:R". As in
benchkv's summary, an epoch's duration is the longest any client of the run reports for
it, and its Mops are the requests of all clients (or of one rank's clients) over that
duration. With --print the per-epoch totals are printed on stdout, one "run epoch mops"
line each (and "run epoch rank mops" with --per-rank), so the picture's numbers can be
checked; nothing is printed otherwise. --per-rank adds, per run, a map of every rank's
throughput per epoch (one row per rank, colour = M requests/s on one scale from 0 for
all runs): which ranks sit in a low state, and from when, stays readable at NP=64, where
one line per rank would not. An epoch a rank has no row for is left blank. The title names the run's backend,
transport, nodes, clients and queue depth when RESULTS.summary.json (benchkv's summary
next to the CSV) is there. Writes OUT.png (default: RESULTS with .png for .csv).
"""
import argparse
import json
import os
import sys

from cli_help import pyplot, require_modules

COLUMNS = ["run", "rank", "client_id", "epoch", "requests", "duration_ns"]
# A column some benchkv CSVs lead with: a run's size (runs numbered across sizes), or the
# repetition's seed (runs numbered per repetition).
SIZE_LEADS = {"value_size": "B values", "message_size": "B messages"}
SEED_LEAD = "seed"


def fail(msg):
    print(f"plot_epochs: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    """The CSV as integers, or an error naming what is wrong with it."""
    import pandas as pd

    try:
        df = pd.read_csv(path, dtype=str)
    except FileNotFoundError:
        fail(f"{path}: no such file")
    except pd.errors.EmptyDataError:
        fail(f"{path}: empty file, not a benchkv per-epoch CSV")
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        fail(f"{path}: not a CSV ({str(e).strip()})")
    lead = df.columns[0] if list(df.columns[1:]) == COLUMNS else None
    if list(df.columns) != COLUMNS and lead not in SIZE_LEADS and lead != SEED_LEAD:
        fail(f"{path}: not a benchkv per-epoch CSV: columns are {','.join(map(str, df.columns))}, "
             f"expected {','.join(COLUMNS)}, led or not by one of {', '.join(list(SIZE_LEADS) + [SEED_LEAD])}")
    if df.empty:
        fail(f"{path}: no rows (a run with every epoch trimmed?)")
    for col in df.columns:
        bad = ~df[col].fillna("").str.fullmatch(r"[0-9]+")
        if bad.any():
            row = int(bad.idxmax())
            fail(f"{path}: line {row + 2}: {col} is '{df[col][row]}', not a non-negative integer")
        df[col] = df[col].astype("int64")
    dup = df.duplicated(([lead] if lead == SEED_LEAD else []) + ["run", "rank", "client_id", "epoch"])
    if dup.any():
        row = int(dup.idxmax())
        fail(f"{path}: line {row + 2}: a second row for run {df['run'][row]}, rank {df['rank'][row]}, "
             f"client {df['client_id'][row]}, epoch {df['epoch'][row]}")
    return with_labels(df, lead, path)


def with_labels(df, lead, path):
    """The frame with COLUMNS only, "run" numbering the lines drawn, and in
    df.attrs["labels"] each line's (printed name, legend label)."""
    if lead == SEED_LEAD:
        pairs = sorted(set(zip(df[SEED_LEAD], df["run"])))
        line = {pair: k for k, pair in enumerate(pairs)}
        df["run"] = [line[pair] for pair in zip(df[SEED_LEAD], df["run"])]
        labels = {k: (f"{seed}:{run}", f"seed {seed} run {run}") for (seed, run), k in line.items()}
    else:
        labels = {int(run): (str(run), f"run {run}") for run in sorted(df["run"].unique())}
        if lead in SIZE_LEADS:
            sizes = df.groupby("run")[lead].nunique()
            if (sizes > 1).any():
                fail(f"{path}: run {int(sizes[sizes > 1].index[0])} has several {lead}s: not benchkv's numbering "
                     f"(one size per run)")
            size = df.groupby("run")[lead].first()
            labels = {run: (name, f"{legend} ({size[run]} {SIZE_LEADS[lead]})") for run, (name, legend) in labels.items()}
    df = df[COLUMNS].copy()
    df.attrs["labels"] = labels
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


def title_of(csv_path):
    """From the run's own configuration (its summary next to the CSV), else the file name."""
    summary = os.path.splitext(csv_path)[0] + ".summary.json"
    try:
        with open(summary) as f:
            c = json.load(f)["config"]
        what = f"{c['backend']} over {c['transport']}, NP={c['np']}"
        if c["backend"] == "rpc":
            what += f", {c['endpoints']} endpoint(s) x QD {c['queue_depth']}"
        else:
            what += f", {c['client_threads']} client(s) x QD {c['queue_depth']} per node"
        return f"Throughput per epoch: {what}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"Throughput per epoch: {os.path.basename(csv_path)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Columns: " + ",".join(COLUMNS) + " (benchkv -o).")
    ap.add_argument("csv", metavar="RESULTS.csv", help="benchkv per-epoch CSV")
    ap.add_argument("-o", "--output", metavar="OUT.png", help="picture to write (default: RESULTS.png)")
    ap.add_argument("--per-rank", action="store_true", help="per run, a map of every rank's throughput per epoch")
    ap.add_argument("--print", action="store_true", help="print the per-epoch figures on stdout")
    args = ap.parse_args()
    require_modules("plot_epochs.py", "the figure", ("pandas", "matplotlib"))
    out = args.output or os.path.splitext(args.csv)[0] + ".png"

    df = load(args.csv)
    total = epoch_mops(df, per_rank=False)
    ranks = epoch_mops(df, per_rank=True) if args.per_rank else None
    fig = figure(total, ranks, title_of(args.csv), args.print, df.attrs["labels"])
    try:
        fig.savefig(out, dpi=120)
    except OSError as e:
        fail(f"cannot write {out}: {e}")
    print(f"wrote {out}", file=sys.stderr)


def from_zero(ax, values):
    """The y axis from 0 to a little above the largest value, so that the markers at the
    top are drawn whole (matplotlib's margin above the data is a share of the data's own
    span, which for nearly flat lines far above 0 is smaller than a marker)."""
    top = max(values, default=0.0)
    ax.set_ylim(0, top * 1.08 if top > 0 else 1.0)


def rank_map(ranks, run):
    """One run's throughput per rank (rows) and epoch (columns), NaN where a rank has no
    row for an epoch, with the epochs and ranks the rows and columns stand for."""
    table = ranks[ranks["run"] == run].pivot(index="rank", columns="epoch", values="mops")
    table = table.reindex(columns=range(int(table.columns.min()), int(table.columns.max()) + 1))
    return table.to_numpy(dtype=float), list(table.columns), list(table.index)


def figure(total, ranks, title, printing=False, labels=None):
    """The figure: total Mops per epoch, and below it, when `ranks` is not None, one map
    per run of every rank's Mops per epoch; with `printing` the figures are printed on
    stdout as they are drawn. labels: run -> (printed name, legend label), as load()
    gives them (default: the run's number, "run N")."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    runs = sorted(total["run"].unique())
    labels = labels or {run: (str(run), f"run {run}") for run in runs}
    panels = 1 + (len(runs) if ranks is not None else 0)
    heights = [3.5] + [1.6 + 0.03 * ranks["rank"].nunique()] * (panels - 1) if ranks is not None else [3.5]
    fig, axs = plt.subplots(panels, 1, figsize=(8, 1.0 + sum(heights)), sharex=True, squeeze=False,
                            gridspec_kw={"height_ratios": heights}, layout="constrained")
    ax = axs[0, 0]
    for run, g in total.groupby("run"):
        ax.plot(g["epoch"], g["mops"], marker="o", label=labels[run][1])
        if printing:
            for r in g.itertuples():
                print(f"{labels[run][0]} {r.epoch} {r.mops:.6f}")
    ax.set_ylabel("throughput, all ranks\n(M requests/s)")
    from_zero(ax, total["mops"])
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    if ranks is not None:
        top = float(ranks["mops"].max())
        for k, run in enumerate(runs, start=1):
            rax = axs[k, 0]
            values, epochs, rank_ids = rank_map(ranks, run)
            image = rax.imshow(values, aspect="auto", interpolation="nearest", origin="lower", cmap="viridis",
                               vmin=0.0, vmax=top if top > 0 else 1.0,
                               extent=(epochs[0] - 0.5, epochs[-1] + 0.5, -0.5, len(rank_ids) - 0.5))
            rax.set_ylabel(f"{labels[run][1]}: rank")
            rax.yaxis.set_major_locator(MaxNLocator(integer=True))
            if printing:
                for r in ranks[ranks["run"] == run].sort_values(["epoch", "rank"]).itertuples():
                    print(f"{labels[run][0]} {r.epoch} {r.rank} {r.mops:.6f}")
        # One scale for every map, beside every panel, so that the panels' epochs line up.
        fig.colorbar(image, ax=axs[:, 0].tolist(), label="M requests/s per rank", pad=0.01, aspect=40)
    axs[-1, 0].set_xlabel("epoch (index in the run, trimmed epochs counted)")
    axs[-1, 0].xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


if __name__ == "__main__":
    main()
