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

Section references too: every "<page>.md §<Section>" in the repository's text files (docs,
code comments, scripts) names a page of the repository (README.md, docs/, docs/log/) that
has a heading starting with that section: a named one word for word ("design_shm.md
§delegationrpc layout"; the reference may run on past the heading's words, or stop early
where a comment wraps), a numbered one by its number ("bistability.md §5" is the heading
"5. ..."). docs/design.md was split into design_*.md pages, and its section names went with
them. In the dated log, a reference to a page outside the log names the section as it was
on the entry's date and is not checked; one to another log entry is.
usage: check_doc_paths.py REPO_ROOT
"""
import glob
import os
import re
import subprocess
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


# "<page>.md §<Section>", "[<page>.md](path) §<Section>", or either with the § on the next line of
# a comment ("// ", "# " or " * " before it).
SECTION_REF = re.compile(r"([\w.-]+\.md)(?:\]\([^)\s]*\))?(?: |[ \t]*\n[ \t]*(?://+|#+|\*)?[ \t]*)§([A-Za-z0-9 /'-]+)")
TEXT_FILES = (".md", ".hpp", ".cpp", ".h", ".py", ".sh", ".cmake", ".txt", ".json")
HEADING = re.compile(r"#{1,6}\s+(.*?)\s*#*\s*$")
NUMBER = re.compile(r"\d+(?:\.\d+)*")


def words(text):
    return re.findall(r"[a-z0-9][a-z0-9'/-]*", text.lower())


def headings(path):
    """The heading texts of a markdown page, outside code fences."""
    out, fence = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fence = not fence
            m = None if fence else HEADING.match(line)
            if m:
                out.append(m.group(1))
    return out


def names_heading(section, page_headings):
    """A numbered section matches a heading of that number; a named one a heading whose
    words it begins with, or which begins with its words (a reference cut by a line break)."""
    number = NUMBER.match(section)
    if number:
        return any(NUMBER.match(h) and NUMBER.match(h).group(0) == number.group(0) for h in page_headings)
    r = words(section)
    for h in map(words, page_headings):
        k = min(len(h), len(r))
        if k and h[:k] == r[:k]:
            return True
    return False


def repository_text_files(root):
    """(directory, file name) of the repository's text files: in a git checkout the files
    git tracks or would track (.gitignore'd outputs such as out/ and build trees left
    out), else every file outside dot directories, build*/, out/ and the fuzz corpora."""
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                capture_output=True, check=True).stdout.decode().split("\0")
        paths = [os.path.join(root, f) for f in listed if f]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for dirpath, dirs, files in os.walk(root):
            top = os.path.samefile(dirpath, root)
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("corpus", "grown") and
                             not (top and (d.startswith("build") or d == "out")))
            paths += [os.path.join(dirpath, f) for f in files]
    return [os.path.split(p) for p in sorted(paths) if p.endswith(TEXT_FILES) and os.path.isfile(p)]


def section_references(root):
    """(references checked, "file:line: ..." for each that names no heading of its page)."""
    pages = {}
    for d in ("docs/log", "docs", ""):
        for f in glob.glob(os.path.join(root, d, "*.md")):
            pages[os.path.basename(f)] = f
    log_dir = os.path.join(root, "docs", "log")
    cache, bad, checked = {}, [], 0
    for dirpath, name in repository_text_files(root):
        path = os.path.join(dirpath, name)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            continue
        in_log = os.path.samefile(dirpath, log_dir) if os.path.isdir(log_dir) else False
        for m in SECTION_REF.finditer(text):
            page, section = m.group(1), m.group(2).strip()
            where = f"{os.path.relpath(path, root)}:{text.count(chr(10), 0, m.start()) + 1}: {page} §{section}"
            if page not in pages:
                bad.append(f"{where}: no page {page} in the repository")
                continue
            if in_log and os.path.dirname(pages[page]) != log_dir:
                continue  # as the page was on the entry's date
            checked += 1
            if page not in cache:
                cache[page] = headings(pages[page])
            if not names_heading(section, cache[page]):
                bad.append(f"{where}: {page} has no such section heading")
    return checked, bad


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
    sections, wrong = section_references(root)
    for w in wrong:
        print(w)
    print(f"check_doc_paths: {sections} section references checked, {len(wrong)} naming no heading of their page")
    return 1 if missing or wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
