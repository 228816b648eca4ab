#!/usr/bin/env python3
"""The command-line check the scripts of scripts/ that read sys.argv themselves (no
argparse) share, done before they read or write anything: -h or --help prints the script's
docstring (its usage) and exits 0; an argument starting with "-" that the script does not
take is refused (exit status 2, naming it).
Also shared by the plot scripts: matplotlib (and pandas) are imported only once a figure
is asked for, so that -h/--help and wrong arguments work under any Python 3, and a Python
without them gets one message naming what is missing and where it comes from.
usage: from cli_help import help_or_refuse; help_or_refuse(sys.argv, __doc__, "NAME.py", options=(...))
       from cli_help import require_modules, pyplot   (plot scripts)
"""
import importlib
import re
import sys

# Where the plot scripts' modules come from: Debian's packages, installed by scripts/setup.sh
# for /usr/bin/python3 (another Python 3, e.g. a virtualenv's, does not see them).
PLOT_PYTHON = "/usr/bin/python3"
SETUP_SCRIPT = "scripts/setup.sh"


def help_or_refuse(argv, doc, name, options=()):
    for a in argv[1:]:
        if a in ("-h", "--help"):
            print(doc.strip())
            sys.exit(0)
    for a in argv[1:]:
        if a.startswith("-") and a not in options and not re.fullmatch(r"-[0-9.]+", a):
            print(f"{name}: unknown option {a} (see {name} --help)", file=sys.stderr)
            sys.exit(2)


def missing_modules(modules):
    """The modules of `modules` this Python cannot import (in order)."""
    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing


def require_modules(name, what, modules=("matplotlib",)):
    """Exits 1 with one line naming every module of `modules` this Python lacks, the Debian
    package and the setup script that installs it, when `what` (e.g. "the figure") needs
    them; returns None when all import."""
    missing = missing_modules(modules)
    if not missing:
        return
    packages = " and ".join(f"python3-{m}" for m in missing)
    print(f"{name}: {what} needs {' and '.join(missing)} ({packages}, installed for {PLOT_PYTHON} by "
          f"{SETUP_SCRIPT}), which this Python ({sys.executable}) cannot import", file=sys.stderr)
    sys.exit(1)


def pyplot():
    """matplotlib.pyplot on the Agg backend (files, no window), imported when a figure is
    drawn (the figure functions call it; a script calls require_modules first)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


if __name__ == "__main__":
    help_or_refuse(sys.argv, __doc__, "cli_help.py")
    print(f"cli_help.py: a module for the scripts of scripts/, not run ({sys.argv[1:]})", file=sys.stderr)
    sys.exit(2)
