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
A histogram the summary marks saturated ("saturated" of a KV class, "rtt_saturated",
"latency_saturated": a bucket of a client's 32-bit recorder reached 2^32 - 1 and stopped
counting) has counts that are too low, so a percentile or CDF read from it is off by an
amount the summary does not record, in either direction: each such histogram chosen gets
a "warning:" line on stderr, and the figures are printed (or drawn) all the same.
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


def marked_saturated(at, key, where):
    """Whether `at` carries the saturation mark `key` (absent: no); a mark that is not a
    boolean is not one benchkv writes, and is refused."""
    if key not in at:
        return False
    if not isinstance(at[key], bool):
        raise ValueError(f"{where}: \"{key}\" is {json.dumps(at[key])}, not true or false")
    return at[key]


def run_name(r):
    """A run of the summary, as a message names it ("run 1", "seed 2 run 0")."""
    return (f"seed {r['seed']} " if "seed" in r else "") + f"run {r.get('run')}"


def collect(summary, cls, runs, value_size, message_size=None, seeds=None, saturated=None):
    """(merged counts by bucket lower bound, (minimum, maximum) in ns or None) of the chosen
    runs. The histograms among them marked saturated are appended to the list `saturated`
    (by name: "run 1 get_remote", "rpc run 0"), when given."""
    merged, minima, maxima = {}, [], []

    def add(hist, where, min_ns, max_ns, marked=False):
        for lower, n in parse_buckets(hist, where).items():
            merged[lower] = merged.get(lower, 0) + n
        minima.append(min_ns)
        maxima.append(max_ns)
        if marked and saturated is not None:
            saturated.append(where)

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
            where = f"rpc {run_name(r)}"
            add(r["rtt_histogram"], where, round(r["rtt_min_us"] * 1000), round(r["rtt_max_us"] * 1000),
                marked_saturated(r, "rtt_saturated", where))
    elif "data" in summary:
        if message_size is not None:
            raise ValueError("--message-size is for rpc summaries; a data summary's runs have a --value-size")
        picked = [r for r in summary["data"].get("runs", []) if chosen(r) and "latency_histogram" in r and
                  (value_size is None or r["value_size"] == value_size)]
        check_one_size({r["value_size"] for r in picked}, "value size", "--value-size")
        for r in picked:
            where = f"data {run_name(r)}"
            add(r["latency_histogram"], where, round(r["latency_min_us"] * 1000), round(r["latency_max_us"] * 1000),
                marked_saturated(r, "latency_saturated", where))
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
                    where = f"{run_name(r)} {c}"
                    add(h["histogram"], where, h["min_ns"], h["max_ns"], marked_saturated(h, "saturated", where))
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
        saturated = []
        counts, extremes = collect(summary, a.cls, set(a.run) if a.run else None, a.value_size, a.message_size,
                                   set(a.seed) if a.seed else None, saturated)
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
    for where in saturated:
        print(f"latency_histogram.py: {a.summary}: warning: {where}: the histogram is marked saturated (a bucket of "
              f"a client's recorder reached 2^32 - 1 and stopped counting): its counts are too low, so "
              f"{'the CDF drawn is' if a.cdf else 'the percentiles printed are'} off by an amount the summary does "
              f"not record, in either direction", file=sys.stderr)
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
