#!/usr/bin/env python3
"""scripts/output_hashes.sh clears only a directory it made, names a missing binary, and
prints the same "run/file sha256" lines from the same directory on every invocation:

- a BKV_HASH_DIR holding files the script did not put there is refused (exit 2) and left
  as it was (the script used to delete it whole, with whatever it held);
- a path that is no executable is named as such (it used to read "run small_meta failed"),
  before anything is touched;
- a run that fails is named with the binary's own message;
- with benchkv, two invocations (a new directory, then an existing empty one) print the
  same 30 lines of the old format; the new directory is removed afterwards, the existing
  one is left there, empty; one left with the script's marker (a killed run) is reused.
usage: check_output_hashes.py REPO_ROOT BENCHKV
"""
import os
import re
import subprocess
import sys
import tempfile


def main(root, benchkv):
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    script = os.path.join(root, "scripts", "output_hashes.sh")

    def run(hash_dir, *args):
        env = dict(os.environ, BKV_HASH_DIR=hash_dir)
        return subprocess.run(["bash", script, *args], capture_output=True, text=True, env=env)

    with tempfile.TemporaryDirectory() as d:
        # Someone's data in the directory named.
        mine = os.path.join(d, "mine")
        os.makedirs(os.path.join(mine, "mydata"))
        precious = os.path.join(mine, "mydata", "results.csv")
        with open(precious, "w") as f:
            f.write("precious\n")

        p = run(mine, benchkv)
        check(p.returncode == 2 and "not empty and was not made by this script" in p.stderr,
              f"a foreign non-empty BKV_HASH_DIR: exit {p.returncode}, {p.stderr.strip()!r}")
        check(os.path.isfile(precious), "a foreign BKV_HASH_DIR's file was deleted")
        check(os.path.isdir(mine) and sorted(os.listdir(mine)) == ["mydata"], "a foreign BKV_HASH_DIR was changed")

        missing = os.path.join(d, "no_such_benchkv")
        p = run(mine, missing)
        check(p.returncode == 2 and f"{missing}: no executable file there" in p.stderr,
              f"a missing binary: exit {p.returncode}, {p.stderr.strip()!r}")
        p = run(os.path.join(d, "fresh_for_missing"), missing)
        check(p.returncode == 2 and not os.path.exists(os.path.join(d, "fresh_for_missing")),
              f"a missing binary: exit {p.returncode}, or the work directory was made")

        for args in (["--help"], ["-h"]):
            p = run(os.path.join(d, "help"), *args)
            check(p.returncode == 0 and p.stdout.startswith("usage:") and not os.path.exists(os.path.join(d, "help")),
                  f"{args}: exit {p.returncode}, {p.stdout[:60]!r}, or it made its directory")
        p = run(os.path.join(d, "bogus"), "--bogus")
        check(p.returncode == 2 and "unknown option --bogus" in p.stderr, f"--bogus: exit {p.returncode}")

        # A binary that fails: its message is shown.
        failing = os.path.join(d, "failing_benchkv")
        with open(failing, "w") as f:
            f.write("#!/bin/sh\necho 'boom: the fake benchkv fails' >&2\nexit 3\n")
        os.chmod(failing, 0o755)
        p = run(os.path.join(d, "work_fail"), failing)
        check(p.returncode == 1 and "run small_meta failed (exit 3)" in p.stderr and "boom: the fake" in p.stderr,
              f"a failing run: exit {p.returncode}, {p.stderr.strip()!r}")
        check(not os.path.exists(os.path.join(d, "work_fail")), "a failed invocation left its new directory")

        if benchkv:
            work = os.path.join(d, "work")
            first = run(work, benchkv)
            check(first.returncode == 0, f"first invocation: exit {first.returncode}: {first.stderr[-300:]}")
            check(not os.path.exists(work), "the directory the script made is still there")
            lines = first.stdout.split("\n")
            check(lines[-1] == "" and len(lines) == 31, f"{len(lines) - 1} lines, not 30")
            bad = [line for line in lines[:-1] if not re.fullmatch(r"[a-z0-9_]+/[a-z0-9_.]+ [0-9a-f]{64}", line)]
            check(not bad, f"lines not in the 'run/file sha256' format: {bad[:3]}")
            check("small_meta/out.summary.json" in first.stdout, "no summary hashed")
            os.makedirs(work)  # an existing empty directory, then one a killed run left
            second = run(work, benchkv)
            check(second.stdout == first.stdout, "a second invocation from the same directory differs")
            check(os.path.isdir(work) and os.listdir(work) == [], f"the existing directory: {os.listdir(work) if os.path.isdir(work) else 'removed'}")
            for name in (".output_hashes_workdir", "leftover"):
                open(os.path.join(work, name), "w").close()
            third = run(work, benchkv)
            check(third.returncode == 0 and third.stdout == first.stdout,
                  f"a directory holding the marker: exit {third.returncode}, {third.stderr[-300:]}")

    for f in failures:
        print("FAIL:", f)
    print(f"check_output_hashes: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else ""))
