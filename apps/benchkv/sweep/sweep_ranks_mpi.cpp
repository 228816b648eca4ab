// SweepRanks over MPI (apps/benchkv/real/mpi_orchestration.hpp) when started by mpirun; one
// process otherwise.
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <span>

#include "apps/benchkv/real/mpi_orchestration.hpp"
#include "apps/benchkv/sweep/sweep_ranks.hpp"

namespace bkv::app {

namespace {
class MpiRanks final : public SweepRanks {
 public:
  MpiRanks(int* argc, char*** argv) : session_(argc, argv) {}
  int rank() const override { return session_.rank(); }
  int size() const override { return session_.size(); }
  std::vector<std::string> gather_to_root(const std::string& mine) override {
    const std::vector<uint64_t> sizes = session_.all_gather<uint64_t>(mine.size());
    const std::vector<std::byte> all =
        session_.gather_to_root(std::as_bytes(std::span<const char>(mine.data(), mine.size())));
    std::vector<std::string> out;
    if (session_.rank() != 0) return out;
    size_t at = 0;
    for (uint64_t n : sizes) {
      out.emplace_back(reinterpret_cast<const char*>(all.data()) + at, n);
      at += n;
    }
    return out;
  }
  std::vector<uint64_t> all_gather(const std::vector<uint64_t>& mine) override {
    std::vector<uint64_t> out;  // the same words to every rank
    for (int j = 0; j < session_.size(); ++j) out.insert(out.end(), mine.begin(), mine.end());
    return session_.all_to_all(std::span<const uint64_t>(out), mine.size());
  }

 private:
  mpi::Session session_;
};
}  // namespace

std::unique_ptr<SweepRanks> make_sweep_ranks(int* argc, char*** argv) {
  // One rank: no MPI, so that -j may fork (forking after MPI_Init is not supported).
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!started_by_mpirun() || (world != nullptr && std::string_view(world) == "1"))
    return std::make_unique<SingleRank>();
  return std::make_unique<MpiRanks>(argc, argv);
}

}  // namespace bkv::app
