// Real (non-simulated) runs: --transport mlx5 | verbs | ucx, one node per MPI rank.
//
//   mpirun -np N benchkv --transport ucx [options] <meta|delegation|direct|ucx-am>
//   mpirun -np N benchkv --transport mlx5|verbs [--device NAME] [options] <meta|delegation|direct>
//
// Outputs are those of the simulator (same CSV columns, same summary keys, "totals"),
// written by rank 0; the summary's "real" object says how the run was made (transport,
// ranks, pinning, UCX_TLS) and config.np is the number of ranks.
#pragma once

#include "apps/benchkv/cli/options.hpp"

namespace bkv {

// Runs the benchmark on real hardware / UCX. Returns the process exit status: 0 when
// every issued request completed without error and the outputs were written; 1 for a
// failed or inconsistent run; 2 when the transport is unavailable (no RDMA device, or
// the build lacks MPI / UCX / rdma-core), with a message naming what is missing.
int run_real(const app::Options& o);

namespace real {
// The transport-specific entries (each in its own file, built when its libraries exist).
int run_ucx(const app::Options& o);   // real/ucx.cpp: needs MPI and UCX
int run_rdma(const app::Options& o);  // real/rdma.cpp: needs MPI and rdma-core
}  // namespace real

}  // namespace bkv
