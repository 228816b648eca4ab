#!/usr/bin/env python3
"""Every script of scripts/ and bench/ (and check_doc_paths.py, run before every landing)
answers -h and --help with its usage and exit status 0, and a wrong argument with a message
naming it and a non-zero status, in both cases at once and without side effects: no build,
no package install, no benchmark run (the commands that would do one are replaced, on PATH,
by stubs that record their call; a call fails the check), nothing new in the repository's
top directory, within a few seconds. Scripts used to treat --help as a file, a build
directory or a repository root, or to install packages and build before reading their
arguments at all.
The argparse scripts' --help must also describe every option and positional argument it
lists (argparse lists an option given no help= alone on its line).
All of it runs with matplotlib and pandas unimportable (a stub of each, first on
PYTHONPATH, raises ModuleNotFoundError), as under a Python 3 other than /usr/bin/python3:
--help and wrong arguments must not need them (the plot scripts used to import matplotlib
first thing, and failed with a traceback), and each plot script asked for a figure must say
in one line what it lacks, naming matplotlib and scripts/setup.sh, exit non-zero and draw
nothing.
usage: check_script_help.py REPO_ROOT
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


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


# What a script must not start when asked for help or given a wrong argument: the build,
# the package manager, and the tools a benchmark runs.
STUBBED = ["cmake", "ninja", "make", "apt-get", "sudo", "valgrind", "callgrind_annotate", "mpirun", "mpiexec",
           "ucx_perftest", "taskset", "perf", "clang++-14", "g++"]
# Wrong arguments beyond an unknown option, for scripts whose first argument is a path.
WRONG = {
    "scripts/check_layers.py": [["/nonexistent-repository-root"]],
    "bench/sim_limit.sh": [["/nonexistent-build-dir"]],
    "scripts/plot_bistability.py": [["out", "a=run", "--regime"]],  # --regime without its file
    "scripts/callgrind_copyrpc.sh": [["build", "no-such-mode"]],
    "tests/scripts/check_doc_paths.py": [["/nonexistent-repository-root"]],
    # build_pgo.sh reconfigures (and clears the profile of) its tree: a directory it did not
    # make is refused, and so is a path that is no directory. {foreign_dir} is a scratch
    # directory holding one file, {foreign_file} a scratch file, made here: never a real
    # directory, which a broken script would change.
    "scripts/build_pgo.sh": [["--build", "{foreign_dir}"], ["--build", "{foreign_file}"]],
    # calibrate.sh checks the values calibrate.py will need before it installs or builds
    "scripts/calibrate.sh": [["-j", "0"], ["--only", "no-such-experiment"], ["--suite", "/nonexistent-suite.json"],
                             ["--model-dir", "/nonexistent-model-dir"]],
}


def scripts(root):
    found = sorted(glob.glob(os.path.join(root, "scripts", "*.py")) + glob.glob(os.path.join(root, "scripts", "*.sh")) +
                   glob.glob(os.path.join(root, "bench", "**", "*.sh"), recursive=True))
    return found + [os.path.join(root, "tests", "scripts", "check_doc_paths.py")]


# The modules a Python other than /usr/bin/python3 lacks: stubbed out (a package of that name
# whose import fails) for every run.
UNIMPORTABLE = ["matplotlib", "pandas"]


def run(root, path, args, stub_dir, log):
    """(exit status, stdout, stderr, stubbed commands called, new top-level entries of root)."""
    before = set(os.listdir(root))
    if os.path.exists(log):
        os.remove(log)
    cmd = (["bash", path] if path.endswith(".sh") else [sys.executable, path]) + args
    python_path = os.pathsep.join([os.path.join(stub_dir, "python")] + ([os.environ["PYTHONPATH"]]
                                                                         if os.environ.get("PYTHONPATH") else []))
    env = dict(os.environ, PATH=stub_dir + os.pathsep + os.environ.get("PATH", ""), STUB_LOG=log,
               PYTHONPATH=python_path)
    with tempfile.TemporaryDirectory() as cwd:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               timeout=20)
            status, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            status, out, err = "timeout (20 s)", "", ""
    called = open(log).read().split("\n")[:-1] if os.path.exists(log) else []
    return status, out, err, called, sorted(set(os.listdir(root)) - before)


def make_stubs(stub_dir):
    for name in STUBBED:
        path = os.path.join(stub_dir, name)
        with open(path, "w") as f:
            f.write('#!/bin/sh\necho "$(basename "$0") $*" >> "$STUB_LOG"\nexit 97\n')
        os.chmod(path, 0o755)
    for module in UNIMPORTABLE:
        os.makedirs(os.path.join(stub_dir, "python", module))
        with open(os.path.join(stub_dir, "python", module, "__init__.py"), "w") as f:
            f.write(f"raise ModuleNotFoundError(\"No module named '{module}' (stubbed out by check_script_help)\", "
                    f"name={module!r})\n")


def stubs_hide_modules(stub_dir):
    """The modules of UNIMPORTABLE that still import with the stubs on PYTHONPATH (none, or the
    check below would prove nothing)."""
    code = ("import importlib, sys\n"
            "for m in sys.argv[1:]:\n"
            "    try:\n        importlib.import_module(m)\n        print(m)\n"
            "    except ImportError:\n        pass\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(stub_dir, "python"))
    p = subprocess.run([sys.executable, "-c", code, *UNIMPORTABLE], capture_output=True, text=True, env=env)
    return p.stdout.split()


def plot_requests(d):
    """Each plot script asked for a figure from small valid inputs made in d: {script: (args,
    the paths it would write)}."""
    def write(name, text):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
        return os.path.join(d, name)

    data = write("data.summary.json", json.dumps({"config": {}, "data": {"runs": [
        {"run": 0, "value_size": 64, "gib_per_s": 1.0, "latency_p50_us": 5.0, "latency_min_us": 1.0,
         "latency_max_us": 1.0, "latency_histogram": {"sub_buckets": 64, "buckets": "1000:3"}}]}}))
    write("run.inflight.csv", "t_us,rank,daemon,calls_in_flight\n")
    write("run.summary.json", "{}")
    epochs = write("epochs.csv", "run,rank,client_id,epoch,requests,duration_ns\n0,0,0,0,10,1000\n")
    os.mkdir(os.path.join(d, "sweep"))
    write(os.path.join("sweep", "results.csv"), "np,mops\n2,1.0\n")
    sweep = write("sweep.json", json.dumps({"grid": {"np": [2]}, "output": "sweep",
                                            "plot": [{"kind": "lines", "x": "np", "y": "mops", "file": "s.png"}]}))
    out = os.path.join(d, "out")
    return {
        "scripts/plot_data.py": ([out + ".png", "a=" + data], [out + ".png"]),
        "scripts/plot_bistability.py": ([out, "a=" + os.path.join(d, "run")], [out]),
        "scripts/plot_epochs.py": ([epochs, "-o", out + ".png"], [out + ".png"]),
        "scripts/plot_sweep.py": ([sweep], [os.path.join(d, "sweep", "s.png")]),
        "scripts/latency_histogram.py": ([data, "--cdf", out + ".png"], [out + ".png"]),
    }


def check_missing_modules(root, stub_dir, log, failures):
    """Each plot script, asked for a figure without matplotlib: one line naming matplotlib
    and scripts/setup.sh, a non-zero status, no traceback, nothing written."""
    with tempfile.TemporaryDirectory() as d:
        for name, (args, outputs) in plot_requests(d).items():
            status, out, err, called, new = run(root, os.path.join(root, name), args, stub_dir, log)
            lines = err.strip().splitlines()
            written = [p for p in outputs if os.path.exists(p)]
            if (status in (0, "timeout (20 s)") or len(lines) != 1 or "matplotlib" not in err
                    or "scripts/setup.sh" not in err or called or new or written):
                failures.append(f"{name} {' '.join(args)} without matplotlib: exit {status}, wrote {written}, "
                                f"stderr (one line naming matplotlib and scripts/setup.sh expected): "
                                f"{err.strip()[-300:]}")


def main(root):
    failures, checked, argparse_checked = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        stub_dir, log = os.path.join(tmp, "stubs"), os.path.join(tmp, "stub.log")
        os.mkdir(stub_dir)
        make_stubs(stub_dir)
        foreign_dir = os.path.join(tmp, "foreign")
        os.mkdir(foreign_dir)
        with open(os.path.join(foreign_dir, "profile"), "w") as f:
            f.write("not the script's\n")
        foreign_file = os.path.join(tmp, "foreign_file")
        with open(foreign_file, "w") as f:
            f.write("not the script's\n")
        for path in scripts(root):
            name = os.path.relpath(path, root)
            checked += 1
            help_text = ""
            for flag in ("-h", "--help"):
                status, out, err, called, new = run(root, path, [flag], stub_dir, log)
                help_text = out
                if status != 0 or "usage:" not in out.lower() or called or new:
                    failures.append(f"{name} {flag}: exit {status}, usage printed: {'usage:' in out.lower()}, "
                                    f"started: {called}, made: {new}: {err.strip()[-300:]}")
            for args in [["--no-such-option"]] + WRONG.get(name, []):
                args = [a.replace("{foreign_dir}", foreign_dir).replace("{foreign_file}", foreign_file) for a in args]
                status, out, err, called, new = run(root, path, args, stub_dir, log)
                named = args[-1] in err or ": error: " in err  # argparse names a missing positional first
                if status == 0 or not named or called or new:
                    failures.append(f"{name} {' '.join(args)}: exit {status}, started: {called}, made: {new}, "
                                    f"stderr does not name {args[-1]!r}: {err.strip()[-300:]}")
            if not path.endswith(".py"):
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if "argparse" not in text and "suite_arguments(" not in text:
                continue
            argparse_checked += 1
            for entry in undescribed(help_text):
                failures.append(f"{name} --help: {entry} has no description")
        hidden = stubs_hide_modules(stub_dir)
        if hidden:
            failures.append(f"the stubs on PYTHONPATH do not hide {hidden}: the runs above had them")
        check_missing_modules(root, stub_dir, log, failures)
        if not os.path.isdir(foreign_dir) or os.listdir(foreign_dir) != ["profile"]:
            failures.append(f"a script changed {foreign_dir}, a directory it was told is not its own")
        with open(foreign_file) as f:
            if f.read() != "not the script's\n":
                failures.append(f"a script changed {foreign_file}, a file it was given as a directory")
    if checked < 25 or argparse_checked < 3:
        failures.append(f"only {checked} scripts ({argparse_checked} with argparse) found in scripts/ and bench/")
    for f in failures:
        print("FAIL:", f)
    print(f"check_script_help: {checked} scripts ({argparse_checked} with argparse), {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip().split("\n")[-1], file=sys.stdout if len(sys.argv) == 2 else sys.stderr)
        sys.exit(0 if len(sys.argv) == 2 else 2)
    sys.exit(main(os.path.abspath(sys.argv[1])))
