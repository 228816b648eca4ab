#!/usr/bin/env python3
"""Every option a script of scripts/ takes is described in its --help: each script whose
command line argparse reads (directly, or through calibrate.py's suite_arguments) prints,
for every option and positional argument its help lists, a description beside or under
it (argparse lists an option given no help= alone on its line).
usage: check_script_help.py REPO_ROOT
"""
import glob
import os
import re
import subprocess
import sys


def undescribed(help_text):
    """The entries of argparse's argument sections that have no description."""
    lines = help_text.split("\n")
    out, section = [], False
    for i, line in enumerate(lines):
        if re.fullmatch(r"(options|optional arguments|positional arguments):", line):
            section = True
            continue
        if line and not line.startswith(" "):
            section = False  # another heading, or the epilog
        if not section or not re.match(r"  \S", line):
            continue  # outside the sections, a blank line or a continuation (indented further)
        entry, _, description = line[2:].partition("  ")
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if not description.strip() and not re.match(r"   +\S", following):
            out.append(entry.strip())
    return out


def main(root):
    failures, checked = [], 0
    for path in sorted(glob.glob(os.path.join(root, "scripts", "*.py"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if "argparse" not in text and "suite_arguments(" not in text:
            continue
        p = subprocess.run([sys.executable, path, "--help"], capture_output=True, text=True)
        name = os.path.relpath(path, root)
        if p.returncode != 0 or "usage:" not in p.stdout:
            failures.append(f"{name} --help: exit {p.returncode}: {p.stderr.strip()[-300:]}")
            continue
        checked += 1
        for entry in undescribed(p.stdout):
            failures.append(f"{name} --help: {entry} has no description")
    if checked < 3:
        failures.append(f"only {checked} scripts with argparse found in scripts/")
    for f in failures:
        print("FAIL:", f)
    print(f"check_script_help: {checked} scripts, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1])))
