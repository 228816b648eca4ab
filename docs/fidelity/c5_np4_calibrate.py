#!/usr/bin/env python3
"""The calibration suite (scripts/calibrate.py) on a candidate model run with another loop
order and/or changed model keys, without editing any file of the repository.

Writes a temporary copy of configs/calibration/suite.json whose Delegation experiments
(c1_*, c5_*) get `--loop-order ORDER`, and, with --set, a temporary model directory
(DIR's c1.json with the keys changed; DIR's c2.json, if any, copied as is), then runs
scripts/calibrate.py on them.

usage: c5_np4_calibrate.py --model-dir DIR [--loop-order calibrated|one-flush|calls-first]
                           [--set KEY.PATH=VALUE ...] [-j N] [--csv FILE] [--only REGEX]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from c5_np4_runs import apply_sets  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--loop-order", default="calibrated", choices=["calibrated", "one-flush", "calls-first"])
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("-j", default="1")
    ap.add_argument("--csv", default="")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="c5np4_cal_") as d:
        with open(os.path.join(ROOT, "configs/calibration/suite.json")) as f:
            suite = json.load(f)
        for name, e in suite["experiments"].items():
            if name.startswith(("c1_", "c5_")):
                e["args"] = list(e["args"]) + ["--loop-order", a.loop_order]
        suite_path = os.path.join(d, "suite.json")
        with open(suite_path, "w") as f:
            json.dump(suite, f)
        model_dir = os.path.join(ROOT, a.model_dir)
        if a.set:
            md = os.path.join(d, "model")
            os.makedirs(md)
            with open(os.path.join(model_dir, "c1.json")) as f:
                model = json.load(f)
            apply_sets(model, a.set)
            with open(os.path.join(md, "c1.json"), "w") as f:
                json.dump(model, f)
            if os.path.exists(os.path.join(model_dir, "c2.json")):
                shutil.copy(os.path.join(model_dir, "c2.json"), md)
            model_dir = md
        cmd = [sys.executable, os.path.join(ROOT, "scripts/calibrate.py"), "--suite", suite_path,
               "--model-dir", model_dir, "-j", a.j]
        if a.csv:
            cmd += ["--csv", os.path.abspath(a.csv)]
        if a.only:
            cmd += ["--only", a.only]
        return subprocess.run(cmd, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
