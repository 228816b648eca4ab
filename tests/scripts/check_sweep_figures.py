#!/usr/bin/env python3
"""The sweep results docs/sweeps.md names in its table of sweeps (`docs/figures/X.csv`)
have the form of the sweep's own results.csv: the columns `run`, the sweep file's grid
axes in order, then the figures docs/outputs.md (§A sweep's `results.csv`) lists, and one
row per run of the grid, in the grid's order (the last axis varying fastest), so that a
file said to be the sweep's output or to equal its rows can be compared with it as it is
(a digest with other column names or rounded figures cannot).
usage: check_sweep_figures.py REPO_ROOT
"""
import csv
import itertools
import json
import os
import re
import sys


def figure_columns(root):
    """The figure columns of a sweep's results.csv, as docs/outputs.md lists them."""
    with open(os.path.join(root, "docs", "outputs.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## A sweep's `results.csv`"):]
    m = re.search(r"then one column per grid axis, then\s*`([^`]+)`", section)
    return m.group(1).split(",")


def named_results(root):
    """(sweep file, figures CSV) pairs of docs/sweeps.md's table of sweeps."""
    with open(os.path.join(root, "docs", "sweeps.md"), encoding="utf-8") as f:
        for line in f:
            sweep = re.match(r"\| `([\w.]+\.json)` \|", line)
            figure = re.search(r"`(docs/figures/[\w.]+\.csv)`", line)
            if sweep and figure:
                yield os.path.join("configs", "sweeps", sweep.group(1)), figure.group(1)


def same(value, cell):
    """A grid value and the CSV cell written for it (numbers compared as numbers)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(cell) == float(value)
        except ValueError:
            return False
    return cell == (json.dumps(value) if isinstance(value, bool) else str(value))


def main(root):
    failures = []
    figures = figure_columns(root)
    pairs = list(named_results(root))
    if len(pairs) < 2:
        failures.append(f"docs/sweeps.md names {len(pairs)} sweep results in docs/figures/")
    for sweep_path, csv_path in pairs:
        with open(os.path.join(root, sweep_path)) as f:
            grid = json.load(f)["grid"]
        axes = list(grid)
        values = [list(v) if isinstance(v, dict) else v for v in grid.values()]
        with open(os.path.join(root, csv_path), newline="") as f:
            rows = list(csv.reader(f))
        want = ["run"] + axes + figures
        if rows[0] != want:
            failures.append(f"{csv_path}: columns {','.join(rows[0])}; {sweep_path}'s results.csv has {','.join(want)}")
            continue
        points = list(itertools.product(*values))
        if len(rows) - 1 != len(points):
            failures.append(f"{csv_path}: {len(rows) - 1} rows, {sweep_path} has {len(points)} runs")
        for k, (row, point) in enumerate(zip(rows[1:], points)):
            if row[0] != str(k) or not all(same(v, c) for v, c in zip(point, row[1:1 + len(axes)])):
                failures.append(f"{csv_path}: row {k + 1} is {row[:1 + len(axes)]}, run {k} of {sweep_path} is {point}")
                break
        print(f"{csv_path}: the form of {sweep_path}'s results.csv, {len(points)} runs")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1])))
