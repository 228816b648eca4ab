// Dispatch of real runs to the transport's entry, or a message naming what this build
// lacks (BKV_REAL_UCX / BKV_REAL_RDMA come from apps/benchkv/CMakeLists.txt: whether
// real/ucx.cpp / real/rdma.cpp were built).
#include "apps/benchkv/real/transports.hpp"

#include <cstdio>
#include <string>

namespace bkv {

namespace {

[[maybe_unused]] int unavailable(const app::Options& o, const char* missing) {
  std::fprintf(stderr, "benchkv: --transport %s is not available in this build: %s was not found at configure time\n",
               std::string(app::to_string(o.transport)).c_str(), missing);
  return 2;
}

}  // namespace

int run_real(const app::Options& o) {
  if (o.backend == backend::BackendKind::kUcxAm && o.transport != app::TransportKind::kUcx) {
    std::fprintf(stderr, "benchkv: the ucx-am backend runs over --transport ucx only (got --transport %s)\n",
                 std::string(app::to_string(o.transport)).c_str());
    return 2;
  }
  switch (o.transport) {
    case app::TransportKind::kUcx:
#if BKV_REAL_UCX
      return real::run_ucx(o);
#else
      return unavailable(o, "UCX (libucx-dev) or MPI (libopenmpi-dev)");
#endif
    case app::TransportKind::kMlx5:
    case app::TransportKind::kVerbs:
#if BKV_REAL_RDMA
      return real::run_rdma(o);
#else
      return unavailable(o, "rdma-core (libibverbs-dev, the RDMA device library) or MPI (libopenmpi-dev)");
#endif
    case app::TransportKind::kSim:
      break;
  }
  std::fprintf(stderr, "benchkv: --transport %s is not a real transport\n",
               std::string(app::to_string(o.transport)).c_str());
  return 2;
}

}  // namespace bkv
