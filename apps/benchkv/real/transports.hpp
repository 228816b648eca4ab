// Real (non-simulated) runs: --transport mlx5 | verbs | ucx, one node per MPI rank.
//
//   mpirun -np N benchkv --transport ucx [options] <meta|delegation|direct|ucx-am|rpc|data>
//   mpirun -np N benchkv --transport mlx5|verbs [--device NAME] [options] <meta|delegation|direct|rpc|data>
//
// Outputs are those of the simulator (same CSV columns, same summary keys, "totals"),
// written by rank 0; the summary's "real" object says how the run was made (transport,
// ranks, pinning, UCX_TLS) and config.np is the number of ranks.
//
// Each real transport's entry is a file of its own, apps/benchkv/real/<name>.cpp, built
// when its libraries exist; it registers itself for its kind (the names are
// apps/benchkv/cli/transport_kind.hpp) with a RegisterRealTransport object.
#pragma once

#include "apps/benchkv/cli/options.hpp"

namespace bkv {

// Runs the benchmark on real hardware / UCX. Returns the process exit status: 0 when
// every issued request completed without error and the outputs were written; 1 for a
// failed or inconsistent run; 2 when the transport is unavailable (no RDMA device, or
// the build lacks MPI / UCX / rdma-core), with a message naming what is missing.
int run_real(const app::Options& o);

namespace real {

// A transport's entry: runs the mode o.mode over it and returns the exit status.
using RealEntry = int (*)(const app::Options& o);

// Registers `run` as the entry of transport `kind` (at static initialization, from the
// entry's own file: `const RegisterRealTransport kRegistered{TransportKind::kX, &run_x};`).
struct RegisterRealTransport {
  RegisterRealTransport(app::TransportKind kind, RealEntry run);
};

// The entry registered for `kind`, or nullptr when this build has none.
RealEntry real_entry(app::TransportKind kind);

}  // namespace real

}  // namespace bkv
