#!/usr/bin/env python3
"""Every repository path the documentation names exists.

Checked: README.md and docs/*.md, the pages that say what holds now. In the dated log
(docs/log/) only the targets of relative markdown links are checked, as a link is
followed (bistability.md sends readers into the log): its code spans name paths as
they were on the entry's date, and a file removed since is named with the commit that
removed it, not linked. A path is a `code span` whose
first segment is a top-level directory of the repository (core/, sim/, configs/, ...),
and the target of a relative markdown link. Braces expand (`configs/c1_np{8,16}.json`),
a `*` matches as a glob (`sim/nic_model.*`); a span holding a placeholder (`<name>`,
`...`, an all-capitals segment such as DIR or SWEEP.json) or naming an output under
out/ is not a path of the repository and is skipped. A missing path is printed with
its file and line, and the exit status is 1.
usage: check_doc_paths.py REPO_ROOT
"""
import glob
import os
import re
import sys

TOP = ("apps", "backends", "bench", "cmake", "configs", "core", "docs", "fuzz", "scripts", "sim", "tests",
       "transports")
SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w.{},*/-]*)" % "|".join(TOP))


def expand(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    out = []
    for alt in m.group(1).split(","):
        out += expand(p[:m.start()] + alt + p[m.end():])
    return out


def placeholder(p):
    return "..." in p or "/out/" in p or p.endswith("/out") or any(
        re.fullmatch(r"[A-Z][A-Z0-9_]*(\.\w+)?", seg) for seg in p.split("/") if seg)


def exists(root, p):
    full = os.path.join(root, p)
    return bool(glob.glob(full)) if "*" in p else os.path.exists(full)


def main(argv):
    if len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) != 2 or argv[1].startswith("-"):
        print(f"check_doc_paths.py: one argument, the repository root (got {argv[1:]}); see --help", file=sys.stderr)
        return 2
    root = argv[1]
    if not os.path.isfile(os.path.join(root, "README.md")) or not os.path.isdir(os.path.join(root, "docs")):
        print(f"check_doc_paths.py: {root} is not the repository root (no README.md and docs/ there)", file=sys.stderr)
        return 2
    docs = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    log = sorted(glob.glob(os.path.join(root, "docs", "log", "*.md")))
    missing, checked = [], 0
    for doc in docs + log:
        rel = os.path.relpath(doc, root)
        with open(doc, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for n, line in enumerate(lines, 1):
            found = []
            for span in SPAN.findall(line) if doc not in log else []:
                if "<" in span:
                    continue
                found += [(m.group(1).rstrip(".,:;/"), root) for m in PATH.finditer(span)]
            for target in LINK.findall(line):
                if "://" not in target and not target.startswith("mailto:"):
                    found.append((target, os.path.dirname(doc)))
            for p, base in found:
                if not p or placeholder(p):
                    continue
                for q in expand(p):
                    checked += 1
                    if not exists(base, q):
                        missing.append(f"{rel}:{n}: {q} does not exist")
    for m in missing:
        print(m)
    print(f"check_doc_paths: {checked} paths checked in {len(docs)} pages and {len(log)} log entries, "
          f"{len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
