// Real (non-simulated) runs: --transport mlx5 | verbs | ucx, one node per MPI rank.
//
//   mpirun -np N benchkv --transport ucx [options] <meta|delegation|direct|ucx-am>   (mode kv)
//   mpirun -np N benchkv --transport mlx5|verbs [--device NAME] [options] <meta|delegation|direct>
//   mpirun -np N benchkv <rpc|data> --transport ucx|mlx5|verbs [options]          (modes rpc, data)
//
// Outputs are those of the simulator (same CSV columns, same summary keys, "totals"),
// written by rank 0; the summary's "real" object says how the run was made (transport,
// ranks, pinning, UCX_TLS) and config.np is the number of ranks.
//
// Each real transport's entry is a file of its own, apps/benchkv/real/<name>.cpp, built
// when its libraries exist; it registers itself for its kind (the names are
// apps/benchkv/cli/transport_kind.hpp) with a RegisterRealTransport object.
#pragma once

#include <string>

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

// `benchkv probe` between two ranks (mpirun -np 2) over a real transport
// (apps/benchkv/real/probe_mpi.hpp): what the command line asked for.
struct ProbeRequest {
  app::TransportKind transport = app::TransportKind::kUcx;
  double scale = 1;     // --scale
  std::string output;   // -o; empty: the table only
  std::string device;   // --device (mlx5, verbs); empty: the first RDMA device
  uint32_t port = 1;    // --port (mlx5, verbs): the device's port, 1..255
  int32_t gid_index = -1;  // --gid-index (mlx5, verbs): -1 = the device's choice (LID on InfiniBand, RoCE v2 on Ethernet)
};
// A transport's probe entry, registered from the same file as its RealEntry.
using ProbeEntry = int (*)(const ProbeRequest& r);
struct RegisterRealProbe {
  RegisterRealProbe(app::TransportKind kind, ProbeEntry run);
};

}  // namespace real

// Runs the probe between two ranks over r.transport; the exit status as run_real's
// (2 when this build lacks the transport, or for an input error: a job of other than 2
// ranks, no RDMA device).
int run_real_probe(const real::ProbeRequest& r);

}  // namespace bkv
