#include "apps/benchkv/real_transports.hpp"

#include <cstdio>

namespace bkv {

int run_real(const bench::Options& o) {
  // The threaded runtime and MPI orchestration for real transports are built in a later
  // step (issue 5); until then benchkv says so instead of pretending to run.
  std::fprintf(stderr,
               "benchkv: --transport %s: real (non-simulated) runs are not available in this build yet; "
               "use --transport sim\n",
               std::string(bench::to_string(o.transport)).c_str());
  return 2;
}

}  // namespace bkv
