// SweepRanks without MPI: one process. Under mpirun with several ranks every rank would
// run the whole sweep, so that is refused.
#include <stdexcept>

#include "apps/benchkv/sweep/sweep_ranks.hpp"

namespace bkv::app {

namespace {
class SingleRank final : public SweepRanks {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> gather_to_root(const std::string& mine) override { return {mine}; }
  std::vector<uint64_t> all_gather(const std::vector<uint64_t>& mine) override { return mine; }
};
}  // namespace

std::unique_ptr<SweepRanks> make_sweep_ranks(int*, char***) {
  if (started_by_mpirun())
    throw std::runtime_error("benchkv sweep: started by mpirun, but this benchkv was built without MPI");
  return std::make_unique<SingleRank>();
}

}  // namespace bkv::app
