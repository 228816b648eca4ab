// Real (non-simulated) runs: --transport mlx5 | verbs | ucx.
#pragma once

#include "core/bench/options.hpp"

namespace bkv {

// Runs the benchmark on real hardware / UCX. Returns the process exit status
// (2 when the transport is unavailable on this machine, e.g. no RDMA device).
int run_real(const bench::Options& o);

}  // namespace bkv
