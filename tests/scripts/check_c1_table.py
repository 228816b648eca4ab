#!/usr/bin/env python3
"""scripts/c1_table.py (run by scripts/run_main.sh) names what it prints as the rest of
the repository does, and holds docs/calibration.md's figures:

- its measured C1 figures are docs/calibration.md's C1 table, whose per-loop column is
  named as the script names it ("responses per loop": RPC responses, what C1's notes call
  "CQEs per loop"); the script says "CQEs per loop" only where it says hardware CQEs, the
  quantity benchkv's report gives under that name;
- in the steady-state block every figure stands in a column marked measured or simulated:
  the simulated throughput under "sim", no measured throughput (C1 has none) under "meas",
  each measured band beside the simulated value it is compared with.
Summaries are made by hand, with figures chosen so that each lands in one known place.
usage: check_c1_table.py REPO_ROOT
"""
import json
import os
import re
import subprocess
import sys
import tempfile

SHARES = {"0": 0.5, "1": 0.25, "2-10": 0.125, ">100": 0.125}


def summary(np_, steady_mops_rank, steady_inflight, steady_cpl):
    """A Delegation summary with the fields c1_table.py reads; daemon #0's life figures
    fixed, its steady (kept-epoch) figures chosen."""
    life = [{"daemon": 0, "rank": r, "inflight_avg": 100.0, "completions_per_loop_avg": 2.0, "loops": 1_000_000,
             "completions_per_loop_share": SHARES} for r in range(np_)]
    kept = [{"daemon": 0, "rank": r, "run": 0, "inflight_avg": steady_inflight,
             "completions_per_loop_avg": steady_cpl} for r in range(np_)]
    return {"life": {"total_mops": 5.0 * np_, "life_s": 10, "daemons": life},
            "runs": [{"run": 0, "per_rank_mops": [steady_mops_rank] * np_, "total_mops": steady_mops_rank * np_}],
            "daemons": kept}


def calibration_c1(root):
    """docs/calibration.md's C1 table: (header cells, {NP: row cells})."""
    with open(os.path.join(root, "docs", "calibration.md"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("| NP | total Mops | Mops per rank"))
    cells = lambda line: [c.strip() for c in line.strip().strip("|").split("|")]
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        c = cells(line)
        rows[int(c[0])] = c
    return cells(lines[start]), rows


def number(text):
    """"1,343" -> 1343.0, "14.0M" -> 14.0, "--" -> None."""
    text = text.replace(",", "").rstrip("M")
    return None if text == "--" else float(text)


def main(root):
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    sys.path.insert(0, os.path.join(root, "scripts"))
    import c1_table  # noqa: E402

    # The script's measured figures are the page's, in the column the page names as the
    # script does.
    header, rows = calibration_c1(root)
    check(header[4] == "responses per loop (avg)", f"docs/calibration.md's C1 per-loop column is {header[4]!r}")
    for np_, meas in c1_table.MEASURED.items():
        row = rows.get(np_)
        if row is None:
            failures.append(f"NP={np_}: no row in docs/calibration.md's C1 table")
            continue
        page = {"mops_rank": number(row[2]), "inflight": number(row[3]), "cpl": number(row[4]),
                "loops_M": number(row[5])}
        check(page == meas, f"NP={np_}: c1_table.py {meas}, docs/calibration.md {page}")

    with tempfile.TemporaryDirectory() as d:
        args = []
        for np_, figs in {8: (7.25, 421.5, 161.5), 16: (6.75, 1405.0, 150.5), 2: (3.5, 30.5, 0.25)}.items():
            path = os.path.join(d, f"np{np_}.summary.json")
            with open(path, "w") as f:
                json.dump(summary(np_, *figs), f)
            args.append(f"{np_}={path}")
        p = subprocess.run([sys.executable, os.path.join(root, "scripts", "c1_table.py"), *args],
                           capture_output=True, text=True)
        check(p.returncode == 0, f"c1_table.py: exit {p.returncode}: {p.stderr}")
        out = p.stdout.split("\n")

    # One name per quantity.
    header_line = next((line for line in out if line.startswith(" NP |")), "")
    check("responses per loop" in header_line and "CQE" not in header_line, f"table header {header_line!r}")
    for line in out:
        check("CQEs per loop" not in line or "hardware" in line,
              f"\"CQEs per loop\" for responses: {line!r}")

    # The steady-state block: which figure is measured and which simulated.
    at = next((i for i, line in enumerate(out) if line.startswith("steady state")), None)
    if at is None:
        failures.append(f"no steady-state block in {p.stdout!r}")
    else:
        block = out[at:]
        check("measured" in block[0] and "simulated" in " ".join(block[:2]), f"steady-state heading {block[:2]}")
        cols = next((line for line in block if line.startswith("    |")), "")
        check(re.fullmatch(r"\s+\|\s+meas\s+sim\s+\|\s+meas\s+sim\s+\|\s+meas\s+sim\s*", cols) is not None,
              f"steady-state column marks {cols!r}")
        data = {int(line.split("|")[0]): [c.split() for c in line.split("|")[1:]]
                for line in block if re.match(r"\s*\d+ \|", line)}
        check(data.get(8) == [["--", "7.25"], ["1370-1470", "421.50", "(below)"], ["0.58-0.72", "161.50", "(above)"]],
              f"NP=8 steady state {data.get(8)}")
        check(data.get(16) == [["--", "6.75"], ["1390-1420", "1405.00", "(inside)"], ["107-200", "150.50", "(inside)"]],
              f"NP=16 steady state {data.get(16)}")
        check(data.get(2) == [["--", "3.50"], ["--"], ["--"]], f"NP=2 steady state (no measured band) {data.get(2)}")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failure(s)" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1])))
