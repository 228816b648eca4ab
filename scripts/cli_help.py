#!/usr/bin/env python3
"""The command-line check the scripts of scripts/ that read sys.argv themselves (no
argparse) share, done before they read or write anything: -h or --help prints the script's
docstring (its usage) and exits 0; an argument starting with "-" that the script does not
take is refused (exit status 2, naming it).
usage: from cli_help import help_or_refuse; help_or_refuse(sys.argv, __doc__, "NAME.py", options=(...))
"""
import re
import sys


def help_or_refuse(argv, doc, name, options=()):
    for a in argv[1:]:
        if a in ("-h", "--help"):
            print(doc.strip())
            sys.exit(0)
    for a in argv[1:]:
        if a.startswith("-") and a not in options and not re.fullmatch(r"-[0-9.]+", a):
            print(f"{name}: unknown option {a} (see {name} --help)", file=sys.stderr)
            sys.exit(2)


if __name__ == "__main__":
    help_or_refuse(sys.argv, __doc__, "cli_help.py")
    print(f"cli_help.py: a module for the scripts of scripts/, not run ({sys.argv[1:]})", file=sys.stderr)
    sys.exit(2)
