// MPI orchestration of real (non-simulated) benchkv runs (docs/design_benchkv.md §benchkv command
// line): ranks and the
// node-local rank, all-to-all exchange of fixed-size ConnectInfo blobs, barriers, per-run
// all-reduce of totals, gathering per-client epoch results to rank 0.
//
// Only the main thread calls MPI (MPI_THREAD_FUNNELED). This header does not include
// <mpi.h>: only mpi_orchestration.cpp does, and it is compiled only when MPI was found,
// so the simulator and everything else build without MPI.
//
// Every collective must be called by every rank in the same order (MPI rules). A failed
// MPI call throws std::runtime_error naming the call; bad arguments (sizes that do not
// add up) throw std::invalid_argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bkv::mpi {

// Peer liveness of real runs: a rank whose peer is stopped (SIGSTOP), dead or cut off
// would wait forever in the next collective or for its calls' responses. Two bounds
// (start-up and shut-down have guards of their own, below):
//  - once start_watchdog ran, every collective is started non-blocking and waited for
//    at most the peer timeout (environment variable BENCHKV_PEER_TIMEOUT, seconds,
//    default 60); past it the collective throws PeerLost on this rank, whose caller can
//    wind its rank down without MPI (real/driver.hpp: the measurement ends, endpoints
//    stopped, outputs marked incomplete);
//  - a watchdog thread ends the rank with a message and kPeerLostExitCode when no
//    collective completes for the longest phase between two collectives plus twice the
//    peer timeout: the backstop when the main thread is stuck outside a collective (or
//    in its wind-down); mpirun then ends the other ranks.
// SIGINT and SIGTERM (app::install_stop_signals, installed by start_watchdog) stop the
// measurement: a collective waiting then throws Interrupted, the measurement loop looks
// at the signal at every epoch's end, and the rank writes what it measured marked
// "interrupted" (real/driver.hpp, real/mpi_run.hpp) and exits with 128 + the signal. The
// watchdog thread ends a rank that has not done so kInterruptGraceSeconds after the
// signal (a main thread stuck outside the loop's safe points), with a message.
inline constexpr const char* kPeerTimeoutEnv = "BENCHKV_PEER_TIMEOUT";
inline constexpr double kDefaultPeerTimeoutSeconds = 60;
inline constexpr int kPeerLostExitCode = 3;
inline constexpr double kInterruptGraceSeconds = 5;
// The heartbeat of Session::run_with_heartbeat: a round every kHeartbeatSeconds, or every
// peer timeout / kHeartbeatsPerPeerTimeout when that is shorter, so that a live rank's next
// round comes well within the timeout.
inline constexpr double kHeartbeatSeconds = 1.0;
inline constexpr double kHeartbeatsPerPeerTimeout = 4;
static_assert(kHeartbeatsPerPeerTimeout > 1, "a live rank's round must come before the peer timeout passes");
// BENCHKV_PEER_TIMEOUT, checked: a number of seconds in (0, 86400]; else app::OptionError
// (bad input, exit status 2, as every input error). The Session reads it when it is made,
// before MPI_Init.
double peer_timeout_seconds();

// Start-up: MPI_Init, the node split and whatever comes before the first collective
// (start_watchdog's exchange in the real runs) wait for every rank and cannot be started
// non-blocking, so no collective deadline covers them. A start-up guard thread, started
// by the Session's constructor before MPI_Init, ends the rank with a message naming what
// it waited for and kStartupTimeoutExitCode when the first collective has not completed
// within the start-up bound (environment variable BENCHKV_STARTUP_TIMEOUT, seconds).
// Once it completed every rank is through MPI_Init, and the collective deadline and the
// watchdog (armed by start_watchdog, before that collective) take over. The bound is not
// the peer timeout: a sanitized rank's start-up takes seconds where tests set a peer
// timeout of 0.5 s (measured start-up times: docs/interruptions.md).
inline constexpr const char* kStartupTimeoutEnv = "BENCHKV_STARTUP_TIMEOUT";
inline constexpr double kDefaultStartupTimeoutSeconds = 120;
inline constexpr int kStartupTimeoutExitCode = 4;
static_assert(kStartupTimeoutExitCode != kPeerLostExitCode, "the two endings are told apart by their status");
// BENCHKV_STARTUP_TIMEOUT, checked as BENCHKV_PEER_TIMEOUT.
double startup_timeout_seconds();

// Shut-down: MPI_Finalize (and the communicator's release before it) waits for every rank
// as start-up does, so a peer stopped or dead after the last collective would keep this
// rank in it for ever. The Session's destructor arms a shut-down guard (the start-up
// guard's kind) for the peer timeout, the bound of every other wait for a peer: past it
// the rank prints "benchkv: rank R: shut-down did not finish within
// BENCHKV_PEER_TIMEOUT=T s (waiting in MPI_Finalize): ..." and ends with kPeerLostExitCode.

// A collective did not complete within the peer timeout: some rank is stopped, dead or
// unreachable. MPI is unusable for this rank afterwards (the collective stays pending).
struct PeerLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// SIGINT or SIGTERM came (app::stop_signal) while a collective was waited for, or at a
// safe point of the measurement: as after PeerLost, MPI is not used again by this rank.
struct Interrupted : std::runtime_error {
  int signal;
  Interrupted(const std::string& what, int sig) : std::runtime_error(what), signal(sig) {}
};

class Session {
 public:
  // Initializes MPI (unless it already is; then Finalize is left to whoever did it)
  // and splits off the node-local communicator (MPI_Comm_split_type SHARED). Reads
  // BENCHKV_STARTUP_TIMEOUT and BENCHKV_PEER_TIMEOUT and arms the start-up guard first
  // (above); a malformed value throws app::OptionError before MPI is touched.
  Session(int* argc, char*** argv);
  // Releases the communicator and finalizes MPI under the shut-down guard (above).
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  int local_rank() const noexcept { return local_rank_; }  // rank among the ranks on this node
  int local_size() const noexcept { return local_size_; }
  std::string processor_name() const;

  void barrier() const;
  // A barrier in two halves, for a rank that must keep working until every rank has
  // arrived (the probe's target steps until the initiator's plan is done): start_barrier
  // enters it without waiting, barrier_done() tests it (true once every rank entered it;
  // a completed barrier re-arms the watchdog) and may be polled in a loop. One at a time;
  // the other ranks enter it with barrier() or start_barrier().
  void start_barrier() const;
  bool barrier_done() const;

  // Starts the watchdog and the collectives' deadline (header comment) and the
  // SIGINT/SIGTERM handlers, and learns every rank's host and process id (for
  // gone_peers). Collective; call once, on every rank, before the measurement; every
  // collective completed after that re-arms the watchdog.
  void start_watchdog(double longest_phase_seconds);
  // The ranks on this rank's host whose process is no longer running (exited, killed:
  // gone, or a zombie), as this rank sees them now; ranks on other hosts cannot be told
  // apart this way and are never listed. Empty before start_watchdog. Call from the main
  // thread (reads /proc).
  std::vector<int> gone_peers() const;
  // Re-arms the watchdog as a completed collective would: a rank winding down after
  // PeerLost gets another full watchdog period for it.
  void rearm_watchdog() const;
  // The collectives' deadline alone, for a caller that keeps collectives coming itself
  // and handles SIGINT/SIGTERM on its own (the heartbeat of `benchkv sweep` under mpirun,
  // apps/benchkv/sweep/sweep_ranks_mpi.cpp): every later collective waits at most the
  // peer timeout (PeerLost past it); no watchdog thread, no signal handlers, and a stop
  // signal does not end a wait. Not with start_watchdog, which arms the deadline itself.
  void bound_collectives();
  // The peer timeout the collectives wait (0 before start_watchdog or bound_collectives:
  // no deadline).
  double collective_deadline_seconds() const noexcept;

  // Work that takes one rank an unknown time with no collective of its own (rank 0 writing
  // a run's outputs while the others wait for it; a sweep rank's share of runs), bounded
  // by the work's owner being alive rather than by a fixed time. Collective: every rank
  // calls it, each with its own `work` (which may do nothing). `work` runs on a thread of
  // its own while the main thread, the only one calling MPI, takes part in heartbeat
  // rounds: an all-reduce of "my work ended" and its result, one round every
  // kHeartbeatSeconds (or a quarter of the peer timeout when that is shorter), each waited
  // for at most the peer timeout. So a rank whose work is slow keeps the others waiting as
  // long as it is alive (its main thread keeps the rounds coming, and they re-arm the
  // watchdog), and a rank that is stopped, dead or unreachable misses a round: PeerLost on
  // the others within about the peer timeout: a rank whose round missed it calls
  // `on_peer_lost` with the reason (on the main thread, its own work perhaps still
  // running), which may end the process itself (a sweep's share of runs is not waited
  // for); when it returns, the rank waits for its own work to end (rank 0 finishing its
  // outputs) and ends with kPeerLostExitCode, without MPI either way. An MPI call of a
  // round that fails ends the rank with status 1 and the message. A work that
  // blocks for ever (a write to a FIFO nobody reads) keeps every rank waiting, as the same
  // write would on one machine: its rank is alive, and a signal ends the job
  // (docs/interruptions.md). A stop signal does not end a round's wait here: the work is
  // left to end on its own. Returns, once every rank's work ended, the largest of their
  // results (every rank gets the same); an exception from this rank's `work` is rethrown
  // then. Needs the collectives' deadline (start_watchdog or bound_collectives):
  // std::logic_error otherwise.
  uint64_t run_with_heartbeat(const std::function<uint64_t()>& work,
                              const std::function<void(const std::string& why)>& on_peer_lost) const;

  // After a lost peer (PeerLost: this rank makes no collective again), each surviving rank
  // writes its own outputs, and the others wait for rank 0's, bounded by rank 0 being
  // alive, as under run_with_heartbeat, not by a fixed time. No collective can do it (one
  // needs every rank, and which one is lost is not known), so it goes by point-to-point
  // messages on MPI_COMM_WORLD (tags of their own; MPI_ERRORS_RETURN set on it here, so
  // that a failed call is this rank's error, not the job's abort):
  //  - rank 0 runs `work` on a thread while its main thread answers each poll another rank
  //    sends: "still working", then "done" to the polls that came before the work ended;
  //    returns "" once `work` ended (and the reason if answering failed: the work still
  //    ran to its end).
  //  - another rank runs `work` first, then polls rank 0 every heartbeat period (as
  //    run_with_heartbeat's rounds) and waits for each answer at most the peer timeout,
  //    the first at most twice that (rank 0 may still be in its wind-down, which lasts up
  //    to the peer timeout, before it writes). Each answer re-arms the watchdog. Returns ""
  //    once rank 0 answered "done"; else why it stopped waiting: no answer in time (rank
  //    0 stopped, dead or unreachable, or it never lost a peer), SIGINT or SIGTERM (mpirun
  //    ending the job), or a failed MPI call.
  // Rank 0's own wait is its work: bounded by its watchdog, which its answers do not re-arm
  // (as after a peer lost under run_with_heartbeat). An exception from `work` is rethrown
  // once it ended. Needs the collectives' deadline (std::logic_error otherwise).
  std::string write_after_peer_lost(const std::function<void()>& work) const;

  // All-to-all of fixed-size blobs: `outgoing` holds size() slots of `blob_size` bytes,
  // slot j goes to rank j. Returns size() slots, slot j came from rank j.
  std::vector<std::byte> all_to_all(std::span<const std::byte> outgoing, size_t blob_size) const;
  // Typed form: `per_peer` holds size() * count values, values [j*count, (j+1)*count)
  // go to rank j (e.g. count ConnectInfos, one per queue pair towards rank j).
  template <class T>
  std::vector<T> all_to_all(std::span<const T> per_peer, size_t count = 1) const {
    static_assert(std::is_trivially_copyable_v<T>, "MPI exchanges raw bytes");
    std::vector<std::byte> in = all_to_all(std::as_bytes(per_peer), sizeof(T) * count);
    std::vector<T> out(in.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), in.data(), out.size() * sizeof(T));
    return out;
  }
  // Every rank's `mine` to every rank (slot j from rank j).
  template <class T>
  std::vector<T> all_gather(const T& mine) const {
    static_assert(std::is_trivially_copyable_v<T>, "MPI exchanges raw bytes");
    std::vector<std::byte> in = all_gather_bytes(std::as_bytes(std::span<const T>(&mine, 1)));
    std::vector<T> out(static_cast<size_t>(size_));
    std::memcpy(out.data(), in.data(), out.size() * sizeof(T));
    return out;
  }

  uint64_t allreduce_sum(uint64_t v) const;
  double allreduce_sum(double v) const;
  uint64_t allreduce_max(uint64_t v) const;
  uint64_t allreduce_min(uint64_t v) const;

  // Concatenates every rank's bytes on rank 0, in rank order (other ranks get nothing).
  std::vector<std::byte> gather_to_root(std::span<const std::byte> mine) const;
  template <class T>
  std::vector<T> gather_to_root(std::span<const T> mine) const {
    static_assert(std::is_trivially_copyable_v<T>, "MPI exchanges raw bytes");
    std::vector<std::byte> in = gather_to_root(std::as_bytes(mine));
    std::vector<T> out(in.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), in.data(), out.size() * sizeof(T));  // non-root: nothing
    return out;
  }

  // Prints `message` on stderr and aborts every rank with `code` (a rank that failed
  // alone must not leave the others waiting in a collective).
  [[noreturn]] void abort(int code, std::string_view message) const;

 private:
  std::vector<std::byte> all_gather_bytes(std::span<const std::byte> mine) const;

  struct Impl;  // holds the MPI handles
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace bkv::mpi
