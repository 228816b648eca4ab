#!/usr/bin/env bash
# Installs the Debian 12 packages the project builds and tests with (docs/design.md §Dependencies).
# Idempotent: when every package is already installed it returns in well under a second.
# Usage: bash scripts/setup.sh   (no arguments; run as root or with sudo when packages are missing)
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
script_help "$0" "$@"
script_args setup.sh 0 "$@"

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libibverbs-dev rdma-core ibverbs-providers
  libucx-dev ucx-utils
  libopenmpi-dev openmpi-bin
  libfmt-dev catch2 nlohmann-json3-dev libcli11-dev libhwloc-dev
  python3-matplotlib python3-pandas valgrind
  clang-14 libclang-rt-14-dev  # libFuzzer and the sanitizer runtimes (fuzz/, scripts/fuzz.sh)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${#missing[@]} missing package(s): ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
