// SweepRanks without MPI: one process. Under mpirun with several ranks every rank would
// run the whole sweep, so that is refused.
#include <stdexcept>

#include "apps/benchkv/sweep/sweep_ranks.hpp"

namespace bkv::app {

std::unique_ptr<SweepRanks> make_sweep_ranks(int*, char***) {
  if (started_by_mpirun())
    throw std::runtime_error("benchkv sweep: started by mpirun, but this benchkv was built without MPI");
  return std::make_unique<SingleRank>();
}

}  // namespace bkv::app
