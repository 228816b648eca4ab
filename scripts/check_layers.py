#!/usr/bin/env python3
"""Checks that includes point one way through the layers (docs/architecture.md, "Layers").

    core/        the library: depends on nothing above it
    transports/  core
    sim/         core, transports (the simulated NIC is a software NIC)
    backends/    core
    apps/        anything below
    bench/, tests/, scripts/: anything

Inside apps/benchkv/ the folders (docs/architecture.md, the folder table) include each
other one way too: simulated and real runs do not include each other, and the options
and results include neither:

    cli/        results (the version text)      results/    cli
    node/       cli                             simulator/  cli, node, results
    real/       cli, node, results              sweep/      cli, real, results, simulator

Every quoted #include of a project header is checked; an include that points upward (or
sideways between layers that do not depend on each other) is printed with its file and
line, and the exit status is 1. Usage: check_layers.py [repository root]
"""
import pathlib
import re
import sys

from cli_help import help_or_refuse

ALLOWED = {
    "core": {"core"},
    "transports": {"core", "transports"},
    "sim": {"core", "transports", "sim"},
    "backends": {"core", "backends"},
    "apps": {"core", "transports", "sim", "backends", "apps"},
}
APP = "apps/benchkv/"
APP_ALLOWED = {
    "cli": {"cli", "results"},
    "results": {"cli", "results"},
    "node": {"cli", "node"},
    "simulator": {"cli", "node", "results", "simulator"},
    "real": {"cli", "node", "real", "results"},
    "sweep": {"cli", "real", "results", "simulator", "sweep"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path: str) -> str:
    return path.split("/", 1)[0]


def app_folder_of(path: str) -> str:
    """The apps/benchkv/ folder of a path ("" for a file directly in apps/benchkv/)."""
    rest = path[len(APP):]
    return rest.split("/", 1)[0] if "/" in rest else ""


def main() -> int:
    help_or_refuse(sys.argv, __doc__, "check_layers.py")
    if len(sys.argv) > 2:
        print(f"check_layers.py: one repository root at most, got {sys.argv[1:]}", file=sys.stderr)
        return 2
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    absent = [layer for layer in ALLOWED if not (root / layer).is_dir()]
    if absent:  # a wrong root would pass with nothing checked
        print(f"check_layers.py: {root} is not the repository root (it has no {', '.join(absent)})", file=sys.stderr)
        return 2
    violations = []
    checked = 0
    for layer, allowed in ALLOWED.items():
        for f in sorted((root / layer).rglob("*")):
            if f.suffix not in (".hpp", ".cpp", ".h", ".cc"):
                continue
            rel = f.relative_to(root).as_posix()
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if not (root / target).exists():
                    if (f.parent / target).exists():
                        violations.append(f"{rel}:{n}: include \"{target}\" is relative to the file; "
                                          "name it from the repository root")
                    continue  # a system or generated header
                checked += 1
                if layer_of(target) not in allowed:
                    violations.append(f"{rel}:{n}: {layer}/ may not include {target} "
                                      f"({layer}/ depends on {', '.join(sorted(allowed))} only)")
                elif rel.startswith(APP) and target.startswith(APP):
                    src, dst = app_folder_of(rel), app_folder_of(target)
                    if src in APP_ALLOWED and dst not in APP_ALLOWED[src]:
                        violations.append(f"{rel}:{n}: {APP}{src}/ may not include {target} ({APP}{src}/ "
                                          f"depends on {', '.join(sorted(APP_ALLOWED[src]))} only)")
    for v in violations:
        print(v)
    print(f"check_layers: {checked} project includes checked, {len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
