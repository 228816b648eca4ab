#!/usr/bin/env python3
"""Checks that includes point one way through the layers (docs/architecture.md, "Layers").

    core/        the library: depends on nothing above it
    transports/  core
    sim/         core, transports (the simulated NIC is a software NIC)
    backends/    core
    apps/        anything below
    bench/, tests/, scripts/: anything

Every quoted #include of a project header is checked; an include that points upward (or
sideways between layers that do not depend on each other) is printed with its file and
line, and the exit status is 1. Usage: check_layers.py [repository root]
"""
import pathlib
import re
import sys

ALLOWED = {
    "core": {"core"},
    "transports": {"core", "transports"},
    "sim": {"core", "transports", "sim"},
    "backends": {"core", "backends"},
    "apps": {"core", "transports", "sim", "backends", "apps"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path: str) -> str:
    return path.split("/", 1)[0]


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
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
    for v in violations:
        print(v)
    print(f"check_layers: {checked} project includes checked, {len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
