#!/usr/bin/env python3
"""The trace examples of the documentation trace something: every benchkv command line
with --trace-window in README.md and docs/*.md, run as written (in a scratch directory,
the repository's files named by absolute path), writes a trace holding events other than
its metadata, and benchkv does not warn that no event fell in the window (a window
before the clients' start, startup_ms, traces nothing).
usage: check_doc_traces.py REPO_ROOT BENCHKV
"""
import glob
import json
import os
import shlex
import subprocess
import sys
import tempfile


def examples(root):
    """(page, line number, argv after the program) of each documented traced run."""
    pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    out = []
    for page in pages:
        with open(page, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                words = shlex.split(line.split("#")[0]) if "--trace-window" in line else []
                if words and os.path.basename(words[0]) == "benchkv":
                    out.append((os.path.relpath(page, root), n, words[1:]))
    return out


def main(root, benchkv):
    failures = []
    found = examples(root)
    if not found:
        failures.append("no benchkv command with --trace-window in README.md or docs/*.md")
    for page, n, args in found:
        where = f"{page}:{n}"
        with tempfile.TemporaryDirectory() as d:
            args = [os.path.join(root, a) if os.path.exists(os.path.join(root, a)) else a for a in args]
            trace = args[args.index("--trace") + 1]
            p = subprocess.run([benchkv, *args, "--no-progress", "--report", "none"], cwd=d,
                               capture_output=True, text=True)
            if p.returncode != 0:
                failures.append(f"{where}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
                continue
            if "no event fell in the trace window" in p.stderr:
                failures.append(f"{where}: {p.stderr.strip()}")
            with open(os.path.join(d, trace)) as f:
                events = [e for e in json.load(f)["traceEvents"] if e.get("ph") != "M"]
            if not events:
                failures.append(f"{where}: {trace} holds only metadata")
            else:
                print(f"{where}: {len(events)} events")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1]), sys.argv[2]))
