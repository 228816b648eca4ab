// The ranks a sweep runs on: one process (rank 0 of 1), or the MPI ranks when benchkv
// sweep was started by mpirun. sweep_ranks_mpi.cpp provides it when MPI was found,
// sweep_ranks_single.cpp otherwise (which refuses to run under mpirun with more ranks).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace bkv::app {

class SweepRanks {
 public:
  virtual ~SweepRanks() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank's `mine`, in rank order, on rank 0 (the other ranks get nothing).
  virtual std::vector<std::string> gather_to_root(const std::string& mine) = 0;
  // Every rank's `mine` (the same number of words on every rank), on every rank, in rank
  // order: rank j's words at [j * mine.size(), (j + 1) * mine.size()).
  virtual std::vector<uint64_t> all_gather(const std::vector<uint64_t>& mine) = 0;
  // Runs `share` (this rank's runs) and returns once every rank's share has ended. Under
  // mpirun the share runs on a thread of its own while the main thread exchanges a
  // heartbeat with the other ranks (sweep_ranks_mpi.cpp), so that a peer stopped or dead
  // mid-sweep ends this rank (below) instead of leaving it waiting at the end for ever.
  virtual void run_share(const std::function<void()>& share) = 0;
  // Rank 0 runs `write` (results.csv) while the other ranks wait for it under the same
  // heartbeat, so a slow write keeps them waiting while rank 0 is alive. A peer lost
  // meanwhile ends every rank with status 3, rank 0 once its write is done (not through
  // before_peer_lost_exit). Collective.
  virtual void root_writes(const std::function<void()>& write) = 0;

  // A peer lost (a collective or a heartbeat not completed within BENCHKV_PEER_TIMEOUT)
  // ends the rank with a message naming it and status 3 (mpi::kPeerLostExitCode), without
  // MPI; before that it calls this, on the main thread while the share may still run
  // (rank 0 writes results.csv with the rows of the runs finished).
  std::function<void()> before_peer_lost_exit;
};

// One process: rank 0 of 1, whose gathers return its own values.
class SingleRank final : public SweepRanks {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> gather_to_root(const std::string& mine) override { return {mine}; }
  std::vector<uint64_t> all_gather(const std::vector<uint64_t>& mine) override { return mine; }
  void run_share(const std::function<void()>& share) override { share(); }
  void root_writes(const std::function<void()>& write) override { write(); }
};

// True when the environment says this process is one of several started by mpirun.
bool started_by_mpirun();

std::unique_ptr<SweepRanks> make_sweep_ranks(int* argc, char*** argv);

}  // namespace bkv::app
