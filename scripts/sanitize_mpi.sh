#!/usr/bin/env bash
# The mpirun tests under the sanitizers, which CI leaves out (docs/reliability.md,
# "Sanitizers"): benchkv's real runs, the data benchmark and the probe between two
# ranks, and the MPI smoke and watchdog tests, built with MPI under clang 14
# ASan+UBSan (build-asan-mpi/), and the MPI smoke test under g++ 12 TSan
# (build-tsan-mpi/). Open MPI's own reports are suppressed by tests/sanitizers/*.supp,
# which name only Open MPI's libraries (and libevent, which only Open MPI links): the
# variables set here reach every rank through ctest and mpirun.
# Usage: scripts/sanitize_mpi.sh [asan|tsan]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
JOBS=${JOBS:-$(nproc)}
which=${1:-both}
status=0
if [ "$which" = asan ] || [ "$which" = both ]; then
  # The flags of CI's build-clang-asan (the compiler cache reuses its objects), with MPI.
  cmake -S . -B build-asan-mpi -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DBKV_WERROR=ON -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_C_COMPILER=clang-14 -DBKV_SANITIZE=address -DBKV_FUZZ=ON -DBKV_TEST_GROUPS=e2e -DBKV_SKIP=bench >/dev/null
  cmake --build build-asan-mpi -j"$JOBS" --target benchkv test_mpi_smoke test_real_mpi test_data_mpi test_probe_mpi
  # The full unwinder: Open MPI's stacks run through components it unloads at
  # MPI_Finalize; the fast one stops there, before the Open MPI library the entries name.
  export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan_openmpi.supp:fast_unwind_on_malloc=0"
  (cd build-asan-mpi && ctest --output-on-failure -R '^(mpi_|test_real_mpi|test_data_mpi|test_probe_mpi)' --timeout 900) || status=1
fi
if [ "$which" = tsan ] || [ "$which" = both ]; then
  # As CI's build-tsan (UCX's memory hooks off), with the e2e group for the MPI smoke test.
  export UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none
  export TSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/tsan_openmpi.supp"
  cmake -S . -B build-tsan-mpi -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBKV_WERROR=ON -DBKV_SANITIZE=thread \
    -DBKV_TEST_GROUPS=e2e "-DBKV_SKIP=bench;apps/benchkv;sim;transports/mlx5" >/dev/null
  cmake --build build-tsan-mpi -j"$JOBS" --target test_mpi_smoke
  (cd build-tsan-mpi && ctest --output-on-failure -R '^mpi_' --timeout 900) || status=1
fi
exit $status
