// SweepRanks over MPI (apps/benchkv/real/mpi_orchestration.hpp) when started by mpirun; one
// process otherwise.
#include <unistd.h>

#include <cstdio>
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
    try {
      return gather_texts(mine);
    } catch (const mpi::PeerLost& e) {
      peer_lost(e.what());
    }
  }
  std::vector<uint64_t> all_gather(const std::vector<uint64_t>& mine) override {
    std::vector<uint64_t> out;  // the same words to every rank
    for (int j = 0; j < session_.size(); ++j) out.insert(out.end(), mine.begin(), mine.end());
    try {
      return session_.all_to_all(std::span<const uint64_t>(out), mine.size());
    } catch (const mpi::PeerLost& e) {
      peer_lost(e.what());
    }
  }
  // The share on a worker thread while the main thread (the only one that calls MPI)
  // takes part in heartbeat rounds until every rank's share ended
  // (mpi::Session::run_with_heartbeat). From here on every collective has the peer
  // timeout as its deadline, and a SIGINT/SIGTERM does not end a wait: the runs stop at
  // their next epoch's end (the share then ends) and the rounds go on. A lost peer ends
  // the rank at once (peer_lost), its run going cut.
  void run_share(const std::function<void()>& share) override {
    session_.bound_collectives();
    session_.run_with_heartbeat(
        [&] {
          share();
          return uint64_t{0};
        },
        [&](const std::string& why) { peer_lost(why); });
  }
  // Rank 0's write under the same heartbeat; a peer lost meanwhile: the message, rank 0
  // finishes its write, status 3.
  void root_writes(const std::function<void()>& write) override {
    session_.bound_collectives();
    session_.run_with_heartbeat(
        [&] {
          if (session_.rank() == 0) write();
          return uint64_t{0};
        },
        [&](const std::string& why) {
          std::fprintf(stderr, "benchkv sweep: rank %d: %s; ending this rank%s\n", session_.rank(), why.c_str(),
                       session_.rank() == 0 ? " once results.csv is written" : " (rank 0 writes results.csv)");
        });
  }

 private:
  // Ends this rank after a lost peer: the message, before_peer_lost_exit, status 3.
  [[noreturn]] void peer_lost(const std::string& why) {
    std::fprintf(stderr,
                 "benchkv sweep: rank %d: %s; ending this rank (the runs finished keep their outputs: rerun the "
                 "sweep to run the rest)\n",
                 session_.rank(), why.c_str());
    std::fflush(stderr);
    if (before_peer_lost_exit) {
      try {
        before_peer_lost_exit();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "benchkv sweep: rank %d: %s\n", session_.rank(), e.what());
      }
    }
    std::fflush(nullptr);
    ::_exit(mpi::kPeerLostExitCode);  // without MPI: MPI_Finalize would wait for the lost peer
  }
  std::vector<std::string> gather_texts(const std::string& mine) {
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
