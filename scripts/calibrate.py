#!/usr/bin/env python3
"""The calibration suite: every figure of docs/calibration.md, simulated against measured.

Runs each experiment of configs/calibration/suite.json with benchkv (the simulator),
reads the value each figure compares from the run's summary, and prints one table:
experiment, figure, measured, simulated, error. The score is the median and the worst
|error| over the scored figures (a figure is left out of the score when the suite says
why: a share under 1% of loops, or a set-up the simulator does not reproduce).

usage: calibrate.py [--benchkv PATH] [--suite FILE] [--model-dir DIR] [--only REGEX] [--csv FILE] [-j N]
  --benchkv PATH   the benchkv binary (default build/apps/benchkv/benchkv)
  --suite FILE     the suite (default configs/calibration/suite.json)
  --model-dir DIR  use DIR/c1.json and DIR/c2.json instead of configs/model/ (to judge
                   a candidate model without editing the configs; a file DIR lacks keeps
                   the configured one)
  --only REGEX     run only the experiments whose name matches
  --csv FILE       also write the table as CSV (pandas.read_csv reads it)
  -j N             experiments run N at a time (default 1)
Exit status: 0 when every experiment ran, 1 when one failed (its error is printed).
"""
import argparse
import concurrent.futures
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUCKETS = ("0", "1", "2-10", "11-100", ">100")


def daemons0(s):
    """The summary entries of daemon #0 of every rank, first run."""
    run = s["runs"][0]["run"]
    return [d for d in s["daemons"] if d["daemon"] == 0 and d["run"] == run]


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def life_daemons0(s):
    """The "life" entries of daemon #0 of every rank (runs with life_s)."""
    if "life" not in s:
        raise KeyError("the run has no whole-life statistics (set life_s in its config)")
    return [d for d in s["life"]["daemons"] if d["daemon"] == 0]


def metric(s, name):
    """The value of one figure from a benchkv summary."""
    run = s["runs"][0]
    np_ = len(run["per_rank_mops"])
    if name == "total_mops":
        return run["total_mops"]
    if name == "mops_per_rank":
        return run["total_mops"] / np_
    # Like for like with the original's whole-life figures (docs/calibration.md).
    if name == "life_total_mops":
        return s["life"]["total_mops"] if "life" in s else run["total_mops"]
    if name == "life_mops_per_rank":
        return s["life"]["total_mops"] / np_
    if name == "life_calls_in_flight":
        return mean(d["inflight_avg"] for d in life_daemons0(s))
    if name == "life_completions_per_loop":
        return mean(d["completions_per_loop_avg"] for d in life_daemons0(s))
    if name == "life_loops_M":
        return mean(d["loops"] for d in life_daemons0(s)) / 1e6 * 10 / s["life"]["life_s"]
    m = re.fullmatch(r"life_share_pct\[(.+)\]", name)
    if m:
        return 100.0 * mean(d["completions_per_loop_share"][m.group(1)] for d in life_daemons0(s))
    # The steady state: the kept epochs.
    if name in ("calls_in_flight", "steady_calls_in_flight"):
        return mean(d["inflight_avg"] for d in daemons0(s))
    if name in ("completions_per_loop", "steady_completions_per_loop"):
        return mean(d["completions_per_loop_avg"] for d in daemons0(s))
    if name == "hw_cqe_per_loop":
        return mean(d["cqe_per_loop_avg"] for d in daemons0(s))
    if name == "loops_per_10s_M":
        return mean(d["extra"]["loops_per_s"] for d in daemons0(s)) * 10 / 1e6
    m = re.fullmatch(r"completions_share_pct\[(.+)\]", name)
    if m:
        ds = daemons0(s)
        loops = sum(d["loops"] for d in ds)
        return 100.0 * sum(d["completions_per_loop_hist"][m.group(1)] for d in ds) / loops if loops else float("nan")
    if name in ("daemon_rtt_p50_us", "daemon_rtt_mean_us"):
        key = "rtt_p50_us" if name.endswith("p50_us") else "rtt_mean_us"
        return mean(d["extra"][key] for d in s["daemons"] if key in d["extra"])
    if name == "remote_mops_per_rank":
        c = s["config"]  # the daemons' figures cover the kept epochs
        epochs = round(c["duration"] * 1000 / c["interval_ms"])
        seconds = (epochs - 2 * c["trim"]) * c["interval_ms"] / 1000
        return sum(d["extra"]["calls"] for d in s["daemons"] if d["run"] == run["run"]) / np_ / seconds / 1e6
    if name == "rpc_mrps":
        return s["rpc"]["runs"][0]["mrps"]
    if name == "rpc_rtt_mean_us":
        return s["rpc"]["runs"][0]["rtt_mean_us"]
    raise KeyError(f"unknown metric {name}")


def identity_ratio(np_, mops_per_rank, completions_per_loop, loops_m, life_s=10.0):
    """C6's accounting identity for one C1 run: responses counted by the loop figures
    (responses per loop x loops) over the remote completions the throughput gives
    ((NP-1)/NP of a rank's requests over the life). 1 when a run's figures agree."""
    remote = (np_ - 1) / np_ * mops_per_rank * 1e6 * life_s
    return completions_per_loop * loops_m * 1e6 / remote if remote else float("nan")


IDENTITY_FIGURES = ("life_mops_per_rank", "life_completions_per_loop", "life_loops_M")


def identity_table(suite, summaries):
    """(experiment, NP, measured ratio, simulated ratio) for every experiment whose three
    identity figures are measured as single values."""
    out = []
    for name, s in summaries.items():
        meas = {fg["metric"]: fg["measured"] for fg in suite["figures"] if fg["experiment"] == name}
        if not all(isinstance(meas.get(k), (int, float)) for k in IDENTITY_FIGURES):
            continue
        np_ = len(s["runs"][0]["per_rank_mops"])
        m = identity_ratio(np_, *(meas[k] for k in IDENTITY_FIGURES))
        sim = identity_ratio(np_, *(metric(s, k) for k in IDENTITY_FIGURES))
        out.append((name, np_, m, sim))
    return sorted(out, key=lambda r: r[1])


def error(sim, measured):
    """Relative error against a value, or against a band [lo, hi] (0 inside it)."""
    if isinstance(measured, list):
        lo, hi = measured
        if lo <= sim <= hi:
            return 0.0
        ref = lo if sim < lo else hi
        return (sim - ref) / ref
    return (sim - measured) / measured if measured else float("nan")


def run_experiment(benchkv, name, args, model_dir):
    """Runs one experiment in a scratch directory; returns (name, summary) or (name, error)."""
    args = list(args)
    if model_dir:
        # --model after --config overrides the config's model; configs name c1 or c2.
        cfg = next((args[i + 1] for i, a in enumerate(args) if a == "--config"), None)
        which = None
        if cfg:
            with open(os.path.join(ROOT, cfg)) as f:
                which = os.path.basename(json.load(f).get("model", ""))
        elif "--model" in args:
            which = os.path.basename(args[args.index("--model") + 1])
            i = args.index("--model")
            del args[i:i + 2]
        if which:
            candidate = os.path.join(os.path.abspath(model_dir), which)
            # A directory without a model for this set-up leaves the configured one.
            args += ["--model", candidate if os.path.exists(candidate) else os.path.join(ROOT, "configs/model", which)]
    args = [os.path.join(ROOT, a) if a.startswith("configs/") else a for a in args]
    with tempfile.TemporaryDirectory(prefix="bkv_cal_") as d:
        cmd = [benchkv] + args + ["-o", os.path.join(d, "out.csv"), "--no-progress"]
        if "rpc" not in args:
            cmd += ["--inflight-samples", ""]
        p = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
        if p.returncode != 0:
            return name, RuntimeError(f"{' '.join(cmd)}\nexit {p.returncode}: {p.stderr.strip()[-2000:]}")
        with open(os.path.join(d, "out.summary.json")) as f:
            return name, json.load(f)


def suite_arguments(doc, argv, add, check=None):
    """The command line of a script that runs benchkv over the suite (this one,
    sensitivity.py, predictions.py): --benchkv, --csv and -j, plus what add(parser) adds,
    whose values check(args) checks (it returns a message for bad input, or None).
    Returns (args, None), or (args, message) when an argument is bad input. With
    --check-args it exits 0 once every argument but --benchkv (which the caller may be
    about to build) has passed."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--benchkv", metavar="PATH", default=os.path.join(ROOT, "build/apps/benchkv/benchkv"),
                    help="the benchkv binary (default: build/apps/benchkv/benchkv)")
    add(ap)
    ap.add_argument("--csv", metavar="FILE", default="", help="also write the table as CSV into FILE")
    ap.add_argument("-j", type=int, metavar="N", default=1, help="experiments run N at a time (default 1)")
    ap.add_argument("--check-args", action="store_true",
                    help="only check this command line and exit (scripts/calibrate.sh does, before it builds)")
    a = ap.parse_args(argv[1:])
    if a.j < 1:
        return a, f"-j must be >= 1 (got {a.j})"
    bad = check(a) if check else None
    if bad:
        return a, bad
    if a.check_args:
        sys.exit(0)
    if not os.access(a.benchkv, os.X_OK):
        return a, f"benchkv not found at {a.benchkv} (build it, or pass --benchkv)"
    a.benchkv = os.path.abspath(a.benchkv)  # the experiments run in their own directories
    return a, None


def main(argv):
    def add(ap):
        ap.add_argument("--suite", metavar="FILE", default=os.path.join(ROOT, "configs/calibration/suite.json"),
                        help="the experiments and figures (default: configs/calibration/suite.json)")
        ap.add_argument("--model-dir", metavar="DIR", default="",
                        help="use DIR/c1.json and DIR/c2.json instead of configs/model/ (a file DIR lacks keeps "
                             "the configured one)")
        ap.add_argument("--only", metavar="REGEX", default="", help="run only the experiments whose name matches")

    loaded = {}

    def check(a):  # the suite, --only and --model-dir, before anything is built or run
        try:
            with open(a.suite) as f:
                loaded["suite"] = json.load(f)
            names = list(loaded["suite"]["experiments"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            return f"--suite {a.suite}: not a readable suite file ({e})"
        try:
            loaded["exps"] = {n: e for n, e in loaded["suite"]["experiments"].items() if re.search(a.only, n)}
        except re.error as e:
            return f"--only {a.only!r} is not a regular expression ({e})"
        if not loaded["exps"]:
            return f"no experiment matches --only {a.only!r}"
        if a.model_dir and not os.path.isdir(a.model_dir):
            return f"--model-dir {a.model_dir}: no such directory"
        return None

    a, bad = suite_arguments(__doc__, argv, add, check)
    if bad:
        print(f"calibrate: {bad}", file=sys.stderr)
        return 2
    suite, exps = loaded["suite"], loaded["exps"]
    summaries, failed = {}, []
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.j) as pool:
        futs = [pool.submit(run_experiment, a.benchkv, n, e["args"], a.model_dir) for n, e in exps.items()]
        for k, fut in enumerate(concurrent.futures.as_completed(futs), 1):
            name, res = fut.result()
            print(f"[{k}/{len(futs)}] {name}: {'FAILED' if isinstance(res, Exception) else 'ok'}", file=sys.stderr)
            if isinstance(res, Exception):
                failed.append((name, res))
            else:
                summaries[name] = res

    rows = []
    for fg in suite["figures"]:
        if fg["experiment"] not in summaries:
            continue
        sim = metric(summaries[fg["experiment"]], fg["metric"])
        meas = fg["measured"]
        err = error(sim, meas)
        rows.append({"experiment": fg["experiment"], "figure": fg["metric"], "source": fg["source"],
                     "measured": meas, "simulated": sim, "error_pct": 100 * err, "scored": fg["score"],
                     "note": fg.get("note", "")})
    def shown(v):
        return f"{v[0]:.4g}-{v[1]:.4g}" if isinstance(v, list) else f"{v:.4g}"
    print(f"{'experiment':<18} {'figure':<28} {'measured':>11} {'simulated':>10} {'error':>8}")
    for r in rows:
        mark = "" if r["scored"] else "  (not scored)"
        print(f"{r['experiment']:<18} {r['figure']:<28} {shown(r['measured']):>11} {r['simulated']:>10.4g} "
              f"{r['error_pct']:>+7.0f}%{mark}")
    scored = [abs(r["error_pct"]) for r in rows if r["scored"] and not math.isnan(r["error_pct"])]
    if scored:
        worst = max((r for r in rows if r["scored"]), key=lambda r: abs(r["error_pct"]))
        print(f"\nscore over {len(scored)} figures: median |error| {statistics.median(scored):.0f}%, "
              f"worst {abs(worst['error_pct']):.0f}% ({worst['experiment']} {worst['figure']}); "
              f"within 30%: {sum(e <= 30 for e in scored)} of {len(scored)}")
    directions = [d for d in suite.get("directions", []) if d["higher"] in summaries and d["lower"] in summaries]
    if directions:
        print("\ndirections measured (C7; right = the higher side at least 5% above):")
        right = 0
        for d in directions:
            hi = metric(summaries[d["higher"]], d["metric"])
            lo = metric(summaries[d["lower"]], d["metric"])
            # Right when the higher side is at least 5% above the other: the measured
            # directions differ by 23% to 560%, so a tie or a wiggle is not one.
            ok = hi > lo * 1.05
            right += ok
            print(f"  {'right' if ok else 'WRONG'}: {d['what']} ({d['higher']} {hi:.4g} vs {d['lower']} {lo:.4g})")
        print(f"  {right} of {len(directions)} right")
    ident = identity_table(suite, summaries)
    if ident:
        print("\nC6's identity: responses per loop x loops / remote completions over the life "
              "(1 when a run's figures agree with one another):")
        for name, np_, m, sim in ident:
            print(f"  {name} (NP={np_}): measured {m:.2f}, simulated {sim:.2f}")
    if a.csv:
        os.makedirs(os.path.dirname(os.path.abspath(a.csv)), exist_ok=True)
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows else ["experiment"])
            w.writeheader()
            for r in rows:
                m = r["measured"]
                w.writerow(dict(r, measured=f"{m[0]}-{m[1]}" if isinstance(m, list) else m))
    for name, err in failed:
        print(f"calibrate: experiment {name} failed: {err}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
