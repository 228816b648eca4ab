// SweepRanks over MPI (apps/benchkv/real/mpi_orchestration.hpp) when started by mpirun; one
// process otherwise.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string_view>
#include <span>
#include <thread>

#include "apps/benchkv/real/mpi_orchestration.hpp"
#include "apps/benchkv/sweep/sweep_ranks.hpp"

namespace bkv::app {

namespace {

// The heartbeat of the ranks' shares: a round every kHeartbeatSeconds, or a quarter of
// the peer timeout when that is shorter, so that a live peer's next round comes well
// within the timeout.
constexpr double kHeartbeatSeconds = 1.0;
constexpr double kHeartbeatsPerPeerTimeout = 4;

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
  // The share on a worker thread; the main thread (the only one that calls MPI) meanwhile
  // takes part in heartbeat rounds, an all-reduce of "my share ended" each, until a round
  // finds every share ended. From here on every collective has the peer timeout as its
  // deadline, and a SIGINT/SIGTERM does not end a wait: the runs stop at their next
  // epoch's end (the share then ends) and the rounds go on.
  void run_share(const std::function<void()>& share) override {
    session_.bound_collectives();
    const double period =
        std::min(kHeartbeatSeconds, session_.collective_deadline_seconds() / kHeartbeatsPerPeerTimeout);
    std::atomic<bool> ended{false};
    std::exception_ptr error;
    std::thread worker([&] {
      try {
        share();
      } catch (...) {
        error = std::current_exception();
      }
      ended.store(true);
    });
    try {
      while (session_.allreduce_min(uint64_t{ended.load() ? 1u : 0u}) == 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(period));
    } catch (const mpi::PeerLost& e) {
      peer_lost(e.what());  // (ends the process, the worker with it)
    }
    worker.join();
    if (error) std::rethrow_exception(error);
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
