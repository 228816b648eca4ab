#!/usr/bin/env python3
"""Sensitivity of a model's calibration results to each of its parameters.

For every continuous parameter of the model (every float in the effective model the
simulator reports, defaults included), runs a subset of the calibration suite with that
parameter at -20% and +20% (and at -10% and +10% where +-20% changes a result), and prints
one markdown table: the figures at each setting, and whether the results still hold.

"Holds" means: every figure that the unperturbed model reproduces within 30% is still
within 30%, and each C1 regime that the unperturbed model reproduces stays as measured
(NP=8 low, under 3 Mops per rank; NP=16 high, over 3). A result that breaks at +-10% sits
on a knife edge.

usage: sensitivity.py [--benchkv PATH] [--model-dir DIR] [--only REGEX] [--csv FILE] [-j N]
  --model-dir DIR  the model to perturb (DIR/c1.json; default configs/model)
  --only REGEX     perturb only the parameters whose path matches (e.g. '^cpu\\.')
"""
import concurrent.futures
import copy
import csv
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calibrate  # noqa: E402

ROOT = calibrate.ROOT
TOLERANCE = 0.30
# The figures judged: C1's three rows and their loop texture, and C5's two regimes.
FIGURES = [("c1_np2", "mops_per_rank", 7.63), ("c1_np2", "completions_per_loop", 4.6),
           ("c1_np8", "mops_per_rank", 1.10), ("c1_np16", "mops_per_rank", 6.88),
           ("c1_np8", "completions_per_loop", 0.97), ("c1_np16", "completions_per_loop", 28.0),
           ("c5_np2", "total_mops", 13.775), ("c5_np8", "total_mops", 8.17)]


def leaves(tree, path=""):
    """(dotted path, value) of every float leaf of the effective model."""
    for k, v in tree.items():
        p = f"{path}.{k}" if path else k
        if isinstance(v, dict):
            yield from leaves(v, p)
        elif isinstance(v, float) and v > 0:
            yield p, v


def set_path(tree, path, value):
    """Sets a dotted path in a model JSON, creating the objects on the way."""
    keys = path.split(".")
    for k in keys[:-1]:
        tree = tree.setdefault(k, {})
    tree[keys[-1]] = value


def run_variant(benchkv, suite, model_json, tag):
    """Runs the judged experiments with one model; returns {(exp, metric): value}."""
    with tempfile.TemporaryDirectory(prefix="bkv_sens_") as d:
        with open(os.path.join(d, "c1.json"), "w") as f:
            json.dump(model_json, f)
        out = {}
        for exp in sorted({e for e, _, _ in FIGURES}):
            _, s = calibrate.run_experiment(benchkv, exp, suite["experiments"][exp]["args"], d)
            if isinstance(s, Exception):
                raise RuntimeError(f"{tag}: {exp}: {s}")
            for e, m, _ in FIGURES:
                if e == exp:
                    out[(e, m)] = calibrate.metric(s, m)
        return out


def judge(base, res):
    """True when every figure the base reproduces is still within tolerance and each C1
    regime the base reproduces stays as measured."""
    for e, m, measured in FIGURES:
        if abs(base[(e, m)] / measured - 1) <= TOLERANCE and abs(res[(e, m)] / measured - 1) > TOLERANCE:
            return False
    low8, high16 = ("c1_np8", "mops_per_rank"), ("c1_np16", "mops_per_rank")
    if base[low8] < 3 and res[low8] >= 3:
        return False
    return not (base[high16] > 3 and res[high16] <= 3)


def main(argv):
    def add(ap):
        ap.add_argument("--model-dir", metavar="DIR", default=os.path.join(ROOT, "configs/model"),
                        help="the model to perturb (DIR/c1.json; default configs/model)")
        ap.add_argument("--only", metavar="REGEX", default="",
                        help="perturb only the parameters whose path matches (e.g. '^cpu\\.')")

    a, bad = calibrate.suite_arguments(__doc__, argv, add)
    if bad:
        print(f"sensitivity: {bad}", file=sys.stderr)
        return 2
    with open(os.path.join(ROOT, "configs/calibration/suite.json")) as f:
        suite = json.load(f)
    model_file = os.path.join(a.model_dir, "c1.json")
    with open(model_file) as f:
        model = json.load(f)
    # The effective model (defaults included) as the simulator reports it.
    _, s = calibrate.run_experiment(a.benchkv, "c1_np8", suite["experiments"]["c1_np8"]["args"], a.model_dir)
    if isinstance(s, Exception):
        print(f"sensitivity: {s}", file=sys.stderr)
        return 1
    effective = s["simulator"]["model"]
    params = [(p, v) for p, v in leaves(effective) if re.search(a.only, p)]
    if not params:
        print(f"sensitivity: no parameter matches --only {a.only!r}", file=sys.stderr)
        return 2

    def variant(path, value, factor):
        m = copy.deepcopy(model)
        m.pop("basis", None)
        parent_path, _, key = path.rpartition(".")
        parent = effective
        for k in parent_path.split(".") if parent_path else []:
            parent = parent[k]
        if "kind" in parent:  # a distribution: the model file must name it whole
            dist = dict(parent)
            dist[key] = value * factor
            set_path(m, parent_path, dist)
        else:
            set_path(m, path, value * factor)
        return m

    base = run_variant(a.benchkv, suite, {k: v for k, v in model.items() if k != "basis"}, "base")
    results = {}

    def sweep(chosen, factors):
        jobs = [(p, v, fct) for p, v in chosen for fct in factors if (p, fct) not in results]
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.j) as pool:
            futs = {pool.submit(run_variant, a.benchkv, suite, variant(p, v, fct), f"{p} x{fct}"): (p, fct)
                    for p, v, fct in jobs}
            for k, fut in enumerate(concurrent.futures.as_completed(futs), 1):
                p, fct = futs[fut]
                results[(p, fct)] = fut.result()
                print(f"[{k}/{len(jobs)}] {p} x{fct}", file=sys.stderr)

    sweep(params, (0.8, 1.2))
    # Where +-20% changes a result, +-10% tells whether it sits on a knife edge.
    sweep([(p, v) for p, v in params if not (judge(base, results[(p, 0.8)]) and judge(base, results[(p, 1.2)]))],
          (0.9, 1.1))

    heads = [f"{e.replace('_', ' ')} {m.replace('_', ' ')}" for e, m, _ in FIGURES]
    print(f"model: {os.path.relpath(model_file, ROOT)}; measured: "
          + ", ".join(f"{h} {v}" for h, (_, _, v) in zip(heads, FIGURES)))
    print("\n| parameter | value | setting | " + " | ".join(heads) + " | holds |")
    print("|---|---:|---|" + "---:|" * len(FIGURES) + "---|")
    fmt = lambda r: " | ".join(f"{r[(e, m)]:.3g}" for e, m, _ in FIGURES)  # noqa: E731
    print(f"| (none) | | base | {fmt(base)} | {'yes' if judge(base, base) else 'no'} |")
    rows = []
    for p, v in params:
        for fct in (0.8, 0.9, 1.1, 1.2):
            if (p, fct) not in results:
                continue
            r = results[(p, fct)]
            ok = judge(base, r)
            print(f"| {p} | {v:g} | x{fct} | {fmt(r)} | {'yes' if ok else '**no**'} |")
            rows.append({"parameter": p, "value": v, "factor": fct, "holds": ok,
                         **{f"{e}.{m}": r[(e, m)] for e, m, _ in FIGURES}})
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
