"""What the plot-script tests (check_plot_*.py) share: probe() runs a snippet that draws
with one of scripts/*.py in a fresh interpreter and returns what it printed, so a test
asks matplotlib what a figure holds (ticks, limits, labels) instead of reading pixels;
report() prints the failures and gives the exit status."""
import json
import os
import subprocess
import sys


def probe(root, code):
    """Runs `code` with scripts/ importable (json, os and sys imported); returns (the JSON
    of its last stdout line, "") or (None, its stderr) when it failed."""
    head = f"import json, os, sys\nsys.path.insert(0, {os.path.join(root, 'scripts')!r})\n"
    q = subprocess.run([sys.executable, "-c", head + code], capture_output=True, text=True)
    if q.returncode != 0:
        return None, q.stderr
    return json.loads(q.stdout.strip().splitlines()[-1]), ""


def report(failures):
    """Prints each failure and a closing line ("ok" or the count); 1 when any failed, else 0."""
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failure(s)" if failures else "ok")
    return 1 if failures else 0
