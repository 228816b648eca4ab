#!/usr/bin/env python3
"""Percentiles and a CDF from the raw latency histograms a benchkv summary holds.

    /usr/bin/python3 scripts/latency_histogram.py SUMMARY.json [--class all] [--seed S] [--run N]
        [--message-size B | --value-size B] [--percentiles 50,90,95,99,99.9,99.99] [--cdf FILE.png]

Every histogram in the summary is read (docs/outputs.md, "Raw latency histograms"):
  - KV backends: runs[*].latency.<class>.histogram, class get_local, get_remote, put_local
    or put_remote ("all" merges the four);
  - rpc: rpc.runs[*].rtt_histogram (the caller's round trips; --class is ignored), of
    one message size (--message-size);
  - data: data.runs[*].latency_histogram, of one value size (--value-size).
A summary whose runs have several message or value sizes needs the size chosen: pooling
the latencies of different sizes would give a distribution of none of them, so, as
benchkv gives no aggregate over sizes, the script refuses (exit status 2, naming the
sizes). The runs chosen (--run, counted from 0 as the summary's "run"; default: every
run) are merged. A --repeat summary holds several repetitions, each with its own runs
counted from 0 and its "seed": --seed picks repetitions (default: every one), and --run
without --seed on such a summary is refused, as "run 0" names one run of each repetition
(give every seed to merge them). The percentiles are read as benchkv reads them: the nearest rank, the
midpoint of its bucket, kept within the minimum and the maximum (within 0.78 % of the
exact value from 1 ns to 2^37 ns), so a percentile the summary also gives comes back
identical.
Prints one line per percentile on stdout ("p99.9 12.345 us"); --cdf draws the
cumulative distribution (log-scale latency) into FILE.png and prints nothing else.
"""
import argparse
import json
import math
import sys
import textwrap

from cli_help import pyplot, require_modules

SUB = 64          # sub-buckets per power of two (core/metrics/latency_histogram.hpp)
EXACT_BELOW = 128  # one bucket per value below
OVERFLOW_NS = 1 << 37


def width(lower):
    """The number of values of the bucket starting at `lower` (0: the overflow bucket)."""
    if lower >= OVERFLOW_NS:
        return 0
    if lower < EXACT_BELOW:
        return 1
    return 1 << (lower.bit_length() - 1 - 6)


def midpoint(lower):
    w = width(lower)
    return lower if w == 0 else lower + (w - 1) // 2


def parse_buckets(hist, where):
    if not isinstance(hist, dict) or hist.get("sub_buckets") != SUB or not isinstance(hist.get("buckets"), str):
        raise ValueError(f"{where}: not a benchkv latency histogram with {SUB} sub-buckets")
    counts = {}
    for pair in hist["buckets"].split():
        lower, n = pair.split(":")
        counts[int(lower)] = counts.get(int(lower), 0) + int(n)
    return counts


def one_size(config_size):
    """A summary config's message size when it names one ("32" or 32), else None."""
    text = str(config_size).strip()
    return int(text) if text.isdigit() else None


def check_one_size(sizes, what, option):
    """Refuses runs of several sizes: their latencies pooled describe no size."""
    if len(sizes) > 1:
        listed = ", ".join(str(x) for x in sorted(sizes))
        raise ValueError(f"the runs chosen have {len(sizes)} {what}s ({listed} B): percentiles over them would pool "
                         f"different sizes, which benchkv does not aggregate either; choose one with {option}")


def check_seeds(all_runs, runs, seeds):
    """Refuses a seed the summary lacks, and --run alone where it names a run of several
    repetitions (a --repeat summary counts each repetition's runs from 0)."""
    present = sorted({r["seed"] for r in all_runs if "seed" in r})
    listed = ", ".join(str(x) for x in present)
    if seeds is not None:
        if not present:
            raise ValueError("--seed: this summary has no repetitions (it was not run with --repeat)")
        absent = sorted(seeds - set(present))
        if absent:
            raise ValueError(f"--seed {absent[0]}: no repetition has it (the summary's seeds: {listed})")
    elif runs is not None and len(present) > 1:
        raise ValueError(f"--run: the summary holds {len(present)} repetitions (seeds {listed}), each with its runs "
                         f"counted from 0, so --run {min(runs)} names one run of each; choose a repetition with "
                         f"--seed (give every seed to merge them)")


def collect(summary, cls, runs, value_size, message_size=None, seeds=None):
    """(merged counts by bucket lower bound, (minimum, maximum) in ns or None) of the chosen runs."""
    merged, minima, maxima = {}, [], []

    def add(hist, where, min_ns, max_ns):
        for lower, n in parse_buckets(hist, where).items():
            merged[lower] = merged.get(lower, 0) + n
        minima.append(min_ns)
        maxima.append(max_ns)

    def chosen(r):
        return (runs is None or r.get("run") in runs) and (seeds is None or r.get("seed") in seeds)

    kind = "rpc" if "rpc" in summary else "data" if "data" in summary else None
    check_seeds(summary[kind].get("runs", []) if kind else summary.get("runs", []), runs, seeds)
    if "rpc" in summary:
        if value_size is not None:
            raise ValueError("--value-size is for data summaries; an rpc summary's runs have a --message-size")
        default = one_size(summary.get("config", {}).get("message_size"))
        picked = [r for r in summary["rpc"].get("runs", []) if chosen(r) and "rtt_histogram" in r and
                  (message_size is None or r.get("message_size", default) == message_size)]
        check_one_size({r.get("message_size", default) for r in picked}, "message size", "--message-size")
        for r in picked:
            add(r["rtt_histogram"], f"rpc run {r.get('run')}", round(r["rtt_min_us"] * 1000),
                round(r["rtt_max_us"] * 1000))
    elif "data" in summary:
        if message_size is not None:
            raise ValueError("--message-size is for rpc summaries; a data summary's runs have a --value-size")
        picked = [r for r in summary["data"].get("runs", []) if chosen(r) and "latency_histogram" in r and
                  (value_size is None or r["value_size"] == value_size)]
        check_one_size({r["value_size"] for r in picked}, "value size", "--value-size")
        for r in picked:
            add(r["latency_histogram"], f"data run {r.get('run')}", round(r["latency_min_us"] * 1000),
                round(r["latency_max_us"] * 1000))
    else:
        if value_size is not None or message_size is not None:
            raise ValueError("--value-size and --message-size are for data and rpc summaries; this is a KV summary")
        classes = ["get_local", "get_remote", "put_local", "put_remote"] if cls == "all" else [cls]
        for r in summary.get("runs", []):
            if not chosen(r) or not isinstance(r.get("latency"), dict):
                continue
            for c in classes:
                h = r["latency"].get(c)
                if h is None:
                    raise ValueError(f"no latency class {c!r} (classes: get_local, get_remote, put_local, put_remote, all)")
                if h.get("count", 0) and "histogram" in h:
                    add(h["histogram"], f"run {r.get('run')} {c}", h["min_ns"], h["max_ns"])
    return merged, ((min(minima), max(maxima)) if maxima else None)


def percentile(counts, extremes, p):
    """benchkv's reading: the nearest rank's bucket midpoint, kept within [minimum, maximum]."""
    n = sum(counts.values())
    if n == 0:
        return 0
    lo, hi = extremes if extremes is not None else (None, None)
    if p >= 1.0 and hi is not None:
        return hi
    rank = max(1, math.ceil(p * n))
    seen = 0
    for lower in sorted(counts):
        seen += counts[lower]
        if seen >= rank:
            if width(lower) == 0 and hi is not None:
                return hi
            value = midpoint(lower)
            if hi is not None:
                value = max(min(lo, hi), min(value, hi))
            return value
    return hi if hi is not None else max(counts)


def plot_cdf(counts, path, title):
    cdf_figure(counts, title).savefig(path, dpi=120)


def cdf_figure(counts, title):
    """The CDF; a long title is wrapped onto several lines so that none is cut at the
    figure's edges."""
    plt = pyplot()
    n = sum(counts.values())
    xs, ys, seen = [], [], 0
    for lower in sorted(counts):
        seen += counts[lower]
        upper = lower + max(width(lower), 1)
        xs.append(upper / 1000.0)
        ys.append(seen / n)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.step(xs, ys, where="post", color="tab:blue")
    ax.set_xscale("log")
    ax.set_xlabel("latency (us, log scale)")
    ax.set_ylabel("fraction of requests at or below")
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(textwrap.fill(title, 60), fontsize=11)
    fig.tight_layout()
    return fig


def title_of(summary, cls, n, size=None):
    c = summary.get("config", {})
    if "rpc" in summary:
        what = (f"rpc round trips, {c.get('endpoints')} endpoint(s) x QD {c.get('queue_depth')}, "
                f"{size or c.get('message_size')} B")
    elif "data" in summary:
        what = f"data ({summary['data'].get('backend')}) operations" + (f", {size} B values" if size else "")
    else:
        what = f"{c.get('backend')} {cls} requests, NP={c.get('np')}, {c.get('client_threads')} clients x QD {c.get('queue_depth')}"
    return f"{what} over {c.get('transport')}: CDF of {n} values"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("summary", help="a benchkv summary (KV, rpc or data)")
    ap.add_argument("--class", dest="cls", default="all", help="KV latency class, or all (default)")
    ap.add_argument("--run", type=int, action="append",
                    help="a run to include (repeatable; default: every run); of a --repeat summary, with --seed")
    ap.add_argument("--seed", type=int, action="append",
                    help="--repeat summaries: the repetition of this seed (repeatable; default: every repetition)")
    ap.add_argument("--message-size", type=int, metavar="BYTES",
                    help="rpc summaries: this message size only (required when the runs have several)")
    ap.add_argument("--value-size", type=int, metavar="BYTES",
                    help="data summaries: this value size only (required when the runs have several)")
    ap.add_argument("--percentiles", default="50,90,95,99,99.9",
                    help="comma-separated, in percent (default: 50,90,95,99,99.9)")
    ap.add_argument("--cdf", help="draw the CDF into this PNG instead of printing percentiles")
    a = ap.parse_args(argv)
    try:
        with open(a.summary) as f:
            summary = json.load(f)
        counts, extremes = collect(summary, a.cls, set(a.run) if a.run else None, a.value_size, a.message_size,
                                   set(a.seed) if a.seed else None)
        wanted = [float(x) for x in a.percentiles.split(",") if x.strip()]
        if any(not 0 <= x <= 100 for x in wanted):
            raise ValueError("--percentiles: each must be in [0, 100]")
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"latency_histogram.py: {a.summary}: {e}", file=sys.stderr)
        return 2
    n = sum(counts.values())
    if n == 0:
        print(f"latency_histogram.py: {a.summary}: no latency histogram with values for this choice", file=sys.stderr)
        return 2
    if a.cdf:
        require_modules("latency_histogram.py", "--cdf")
        plot_cdf(counts, a.cdf, title_of(summary, a.cls, n, a.message_size or a.value_size))
        return 0
    for p in wanted:
        label = f"p{p:g}"
        print(f"{label} {percentile(counts, extremes, p / 100.0) / 1000.0:.3f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
