#!/usr/bin/env python3
"""Predictions of the simulator's models for experiments outside the calibration data.

The original system was also measured in set-ups whose results are withheld from this
project. This script runs those set-ups in the simulator, for each model given, and prints
the predicted figures as markdown tables (and, with --csv, one tidy CSV). The output is
committed in docs/predictions.md before any comparison with measurements: nothing here is
fitted to them.

Set-ups (the C1/C5 cluster: 46 clients per node, 1 daemon, 1024 keys, read ratio 0.5,
uniform, the original's loop and client, C1's start-up and 10 s life):
  direct     QD=1, NP 2..32: the direct backend as the original ran it (every client an
             endpoint to a daemon of every rank, its own included; 4 MiB rings)
  rtt_hold   QD=1, NP=8: the RTT-based reply hold, hold = M x the flush-to-CQE RTT,
             M = 1.0, 1.5, 2.0
  next_poll  QD=32, NP=8: the older loop (calls leave at the next loop's poll), no poll
             budget

usage: predictions.py [--benchkv PATH] [--model-dir DIR ...] [--only direct|rtt_hold|next_poll]
                      [--csv FILE] [-j N]
Prints the sha256 of each model file it used: the predictions belong to those bytes.
"""
import concurrent.futures
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calibrate  # noqa: E402  (run_experiment, metric)

ROOT = calibrate.ROOT
C5 = ["--config", "configs/c1_np8.json", "--queue-depth", "1", "-d", "0.02", "--trim", "2"]
NPS = (2, 4, 8, 16, 32)
GROUPS = ("direct", "rtt_hold", "next_poll")


def setups(only):
    """(group, label, parameters, benchkv args) for every predicted run."""
    out = []
    if only in ("", "direct"):
        for np_ in NPS:
            out.append(("direct", f"np{np_}_direct", {"np": np_, "backend": "direct"},
                        C5 + ["direct", "--np", str(np_), "--ring-size", "4194304"]))
    if only in ("", "rtt_hold"):
        for m in ("1.0", "1.5", "2.0"):
            out.append(("rtt_hold", f"np8_rtt_hold{m}", {"np": 8, "hold_rtt_multiplier": m},
                        C5 + ["--np", "8", "--batch-hold-us", "0", "--hold-rtt-multiplier", m]))
    if only in ("", "next_poll"):
        out.append(("next_poll", "np8_next_poll", {"np": 8, "loop_order": "next-poll"},
                    ["--config", "configs/c1_np8.json", "--loop-order", "next-poll"]))
    return out


def figures(s):
    """The predicted figures of one run: total Mops over the original's 10 s life
    (start-up included), the steady state's Mops per rank, and daemon #0's figures."""
    np_ = len(s["runs"][0]["per_rank_mops"])
    f = {"total_mops": calibrate.metric(s, "life_total_mops"), "mops_per_rank": calibrate.metric(s, "mops_per_rank")}
    ds = calibrate.daemons0(s)
    if ds and "life" in s and s["config"]["backend"] == "delegation":
        f["completions_per_loop"] = calibrate.metric(s, "life_completions_per_loop")
        f["calls_in_flight"] = calibrate.metric(s, "life_calls_in_flight")
    f["np"] = np_
    return f


def sha256(path):
    import hashlib
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def main(argv):
    def add(ap):
        ap.add_argument("--model-dir", metavar="DIR", action="append", default=[],
                        help="a model directory (DIR/c1.json; repeatable; default configs/model)")
        ap.add_argument("--only", default="", choices=["", *GROUPS], help="one group of predictions only")

    a, bad = calibrate.suite_arguments(__doc__, argv, add)
    if bad:
        print(f"predictions: {bad}", file=sys.stderr)
        return 2
    models = a.model_dir or [os.path.join(ROOT, "configs/model")]
    for m in models:
        if not os.path.isfile(os.path.join(m, "c1.json")):
            print(f"predictions: {m} has no c1.json", file=sys.stderr)
            return 2
    for m in models:
        print(f"model {os.path.relpath(os.path.join(m, 'c1.json'), ROOT)} sha256 {sha256(os.path.join(m, 'c1.json'))}")
    runs = [(m, s) for m in models for s in setups(a.only)]
    results, failed = {}, []
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.j) as pool:
        futs = {pool.submit(calibrate.run_experiment, a.benchkv, s[1], s[3], m): (m, s) for m, s in runs}
        for k, fut in enumerate(concurrent.futures.as_completed(futs), 1):
            m, s = futs[fut]
            _, res = fut.result()
            ok = not isinstance(res, Exception)
            print(f"[{k}/{len(runs)}] {os.path.relpath(m, ROOT)} {s[1]}: {'ok' if ok else 'FAILED'}", file=sys.stderr)
            if ok:
                results[(m, s[1])] = figures(res)
            else:
                failed.append((m, s[1], res))
    rows = []
    for m in models:
        for group, label, params, _ in setups(a.only):
            if (m, label) in results:
                rows.append({"model": os.path.relpath(m, ROOT), "group": group, "setup": label, **params,
                             **results[(m, label)]})
    # Markdown: one table per group, one column of Mops per rank per model.
    for group in GROUPS:
        labels = [s[1] for s in setups(a.only) if s[0] == group]
        if not labels:
            continue
        names = [os.path.relpath(m, ROOT) for m in models]
        print(f"\n#### {group}\n")
        print("| set-up | " + " | ".join(f"{n}: total Mops (completions/loop)" for n in names) + " |")
        print("|---|" + "---:|" * len(names))
        for label in labels:
            cells = []
            for m in models:
                r = results.get((m, label))
                if r is None:
                    cells.append("failed")
                elif "completions_per_loop" in r:
                    cells.append(f"{r['total_mops']:.2f} ({r['completions_per_loop']:.1f})")
                else:
                    cells.append(f"{r['total_mops']:.2f}")
            print(f"| {label} | " + " | ".join(cells) + " |")
    if a.csv:
        keys = []
        for r in rows:
            keys += [k for k in r if k not in keys]
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
    for m, label, err in failed:
        print(f"predictions: {label} with {m} failed: {err}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
