// The threaded runtime of real (non-simulated) benchkv runs (docs/design_backends.md §Step model,
// §Benchmark plumbing, §benchkv command line).
//
// Driver<N> runs the threads of one or more nodes of this process: one thread per daemon
// and per client (runtime::ThreadGroup, pinned per the plan), each calling the node's
// step_daemon(d) / step_client(c) in a loop until the stop flag. N is a node type with
//   bool step_daemon(uint32_t), step_client(uint32_t) -> {completed, issued, ...},
//   void stop_issuing(), const backend::ClientCounters& counters(uint32_t),
//   const backend::DaemonMetrics& daemon_metrics(uint32_t), uint64_t client_protocol_errors()
// (backend::Node<R> and ucx_am::UcxAmNode).
//
// What the main thread may touch while the threads run, and how (no data races; the
// wall-clock tests run this under ThreadSanitizer):
//  - client counters: atomics, read with relaxed loads (epochs, totals, in flight);
//  - daemon metrics: plain fields owned by the daemon thread, so the main thread asks the
//    daemon thread for a copy (snapshot request/acknowledge through two atomics per
//    daemon, checked once per loop) instead of reading them;
//  - client request latency (N with client_latency(c)): plain fields owned by the client
//    thread; copied by the client thread on request (same protocol as the daemons), at
//    the start and end of each run's kept epochs, together with its completed counter in
//    the same step (see Epochs below);
//  - stop_issuing(): the node's clients keep their "stopping" flag in plain fields, so
//    the client threads are first parked (each acknowledges at the top of its next step
//    and spins until released), the main thread sets the flags, then releases them.
//
// run_measurement() is the measurement flow, the same for MPI and in-process clusters;
// what crosses ranks goes through a Coordinator (MPI collectives, or nothing when every
// rank lives in this process: InProcessCoordinator):
//   barrier, start threads; per run: barrier, sample every client's completed counter at
//   each epoch boundary (sleep_until, so no drift), a progress line per epoch; at each
//   run end a snapshot of the daemon metrics and the all-reduce of the run's issued and
//   completed counts; after the last run clients stop issuing and the threads keep
//   stepping until no request is in flight on any rank (all-reduced), then stop. Rank 0
//   gathers every rank's epoch records and daemon metrics: the same RunResults and
//   DaemonReport (same CSV and summary keys) as the simulator fills. A collective that
//   misses its deadline (mpi::PeerLost: a peer stopped or died) ends the flow on this
//   rank instead: wind_down_after_peer_lost (stop every copyrpc endpoint, fail the
//   pending calls back, drain locally) and a result marked incomplete.
//
// Epochs: each rank measures its own epoch durations (duration_ns = the wall time
// between two samples); the counters read at run start open the first epoch, so
// completions between runs (barrier, all-reduce) fall into no epoch, but into the run's
// issued/completed counts. The last run's counts include the drain, so the totals
// satisfy issued == completed. At the two edges of a run's kept epochs (where its
// latency is copied) a client's epoch boundary is not the main thread's read of its
// counter but the completed count the client copied with its latency: so the kept
// requests and the kept latency count the same completions, exactly, however late a
// descheduled client (or main thread) reaches the copy; that client's epoch durations
// end and start at the time of its copy too (its count over its own window), one
// scheduling delay or more after the epoch's end time.
//
// Idle steps (a client step that neither completed nor issued anything, a whole daemon
// loop that did no work) yield the CPU (sched_yield) when the threads outnumber the CPUs: on
// an oversubscribed machine a busy-polling thread would otherwise hold its CPU for a
// whole scheduler slice while the thread it waits for cannot run.
#pragma once

#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "backends/metrics.hpp"
#include "core/metrics/latency_histogram.hpp"
#include "backends/node_config.hpp"
#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/cli/stop_signals.hpp"
#include "apps/benchkv/results/results.hpp"
#include "apps/benchkv/real/cpu_pinning.hpp"
#include "apps/benchkv/real/thread_group.hpp"
#include "apps/benchkv/real/mpi_orchestration.hpp"

namespace bkv::real {

using Clock = std::chrono::steady_clock;

inline uint64_t elapsed_ns(Clock::time_point a, Clock::time_point b) noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

// How long the main thread waits for the threads to acknowledge a snapshot or a park,
// and for the last requests to drain: hang guards naming what did not happen, not
// performance limits.
inline constexpr std::chrono::seconds kAckTimeout{30};
inline constexpr std::chrono::seconds kDrainTimeout{60};
inline constexpr std::chrono::milliseconds kDrainPoll{1};

// One daemon's metrics of one run in a fixed layout (gathered to rank 0 as raw bytes).
struct DaemonRecord {
  uint32_t run = 0;
  uint32_t rank = 0;
  uint32_t daemon = 0;
  uint32_t reserved = 0;
  metrics::CqeHistogram cqe, completions;  // loops and CQEs; RPC completions per loop
  uint64_t inflight_sum = 0, busy_loops = 0;
  uint64_t calls = 0, replies = 0, local_ops = 0, responses = 0;
  uint64_t backlog_peak = 0, protocol_errors = 0, holds = 0, held_released = 0;
  uint64_t span_ns = 0;  // wall time the record covers
};
static_assert(std::is_trivially_copyable_v<DaemonRecord>);
inline constexpr size_t kHistogramBytes = 8 * (metrics::kCqeBuckets + 2);
static_assert(sizeof(metrics::CqeHistogram) == kHistogramBytes);
static_assert(sizeof(DaemonRecord) == 16 + 2 * kHistogramBytes + 8 * 10 + 8);
static_assert(offsetof(DaemonRecord, cqe) == 16 && offsetof(DaemonRecord, span_ns) == 16 + 2 * kHistogramBytes + 8 * 10);

// The difference of two snapshots of a daemon's metrics (counters) and the later peak.
inline DaemonRecord daemon_delta(const backend::DaemonMetrics& a, const backend::DaemonMetrics& b, uint32_t run,
                                 uint32_t rank, uint32_t daemon, uint64_t span_ns) {
  DaemonRecord d;
  d.run = run;
  d.rank = rank;
  d.daemon = daemon;
  d.cqe = b.cqe.since(a.cqe);
  d.completions = b.completions.since(a.completions);
  d.inflight_sum = b.inflight_sum - a.inflight_sum;
  d.busy_loops = b.busy_loops - a.busy_loops;
  d.calls = b.calls - a.calls;
  d.replies = b.replies - a.replies;
  d.local_ops = b.local_ops - a.local_ops;
  d.responses = b.responses - a.responses;
  d.backlog_peak = b.backlog_peak;
  d.protocol_errors = b.protocol_errors - a.protocol_errors;
  d.holds = b.holds - a.holds;
  d.held_released = b.held_released - a.held_released;
  d.span_ns = span_ns;
  return d;
}

// The summary's per-daemon entry, with the simulator's keys where they have a wall-clock
// meaning (busy_fraction and the RTT percentiles need the simulator's virtual clock).
inline app::DaemonReport to_metrics(const DaemonRecord& d) {
  app::DaemonReport m;
  m.run = d.run;
  m.rank = d.rank;
  m.daemon = d.daemon;
  m.cqe = d.cqe;
  m.completions = d.completions;
  const double loops = static_cast<double>(d.cqe.loops);
  m.inflight_avg = d.cqe.loops ? static_cast<double>(d.inflight_sum) / loops : 0.0;
  const double secs = static_cast<double>(d.span_ns) * 1e-9;
  m.extra["loops_per_s"] = secs > 0 ? loops / secs : 0.0;
  m.extra["loop_ns_avg"] = d.cqe.loops ? static_cast<double>(d.span_ns) / loops : 0.0;
  m.extra["calls"] = static_cast<double>(d.calls);
  m.extra["replies"] = static_cast<double>(d.replies);
  m.extra["local_ops"] = static_cast<double>(d.local_ops);
  m.extra["responses"] = static_cast<double>(d.responses);
  m.extra["backlog_peak"] = static_cast<double>(d.backlog_peak);
  m.extra["protocol_errors"] = static_cast<double>(d.protocol_errors);
  m.extra["holds"] = static_cast<double>(d.holds);
  m.extra["held_released"] = static_cast<double>(d.held_released);
  m.extra["work_loop_fraction"] = d.cqe.loops ? static_cast<double>(d.busy_loops) / loops : 0.0;
  return m;
}

// ------------------------------------------------------------------------------ Driver

template <class N>
class Driver {
 public:
  struct Local {
    N* node;
    uint32_t rank;
    runtime::PinPlan plan;  // daemon_cpus / client_cpus of this node (-1: unpinned)
  };

  Driver(std::vector<Local> nodes, uint32_t daemons, uint32_t clients, bool yield_when_idle)
      : nodes_(std::move(nodes)), D_(daemons), C_(clients), yield_(yield_when_idle),
        dctl_(new DaemonCtl[nodes_.size() * daemons]), cctl_(new ClientCtl[nodes_.size() * clients]) {
    if (nodes_.empty() || daemons == 0 || clients == 0) throw std::invalid_argument("driver: no node or no thread");
    for (const Local& l : nodes_)
      if (l.plan.daemon_cpus.size() != D_ || l.plan.client_cpus.size() != C_)
        throw std::invalid_argument("driver: the pinning plan does not match the thread counts");
  }
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;
  ~Driver() {
    group_.request_stop();
    resume_.store(true, std::memory_order_release);
  }

  size_t local_nodes() const noexcept { return nodes_.size(); }
  const Local& local(size_t i) const noexcept { return nodes_[i]; }
  uint32_t daemons() const noexcept { return D_; }
  uint32_t clients() const noexcept { return C_; }

  // Spawns every thread (they wait at the gate) and waits until all are ready.
  void spawn() {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const std::string prefix = "r" + std::to_string(nodes_[i].rank);
      for (uint32_t d = 0; d < D_; ++d)
        group_.spawn(prefix + ".d" + std::to_string(d), nodes_[i].plan.daemon_cpus[d],
                     [this, i, d] { daemon_step(i, d); });
      for (uint32_t c = 0; c < C_; ++c)
        group_.spawn(prefix + ".c" + std::to_string(c), nodes_[i].plan.client_cpus[c],
                     [this, i, c] { client_step(i, c); });
    }
    group_.wait_ready();
  }
  void start() { group_.start(); }
  std::vector<std::string> pin_notes() const { return group_.notes(); }

  // A thread threw (the group raised its stop flag): join and rethrow its exception.
  void rethrow_if_failed() {
    if (group_.stop_requested() && !stopping_) {
      resume_.store(true, std::memory_order_release);
      group_.join();
      throw std::runtime_error("driver: a thread stopped without an error");  // join() rethrows first
    }
  }

  // ---- client counters (atomics)
  uint64_t completed(size_t i, uint32_t c) const noexcept {
    return nodes_[i].node->counters(c).completed.load(std::memory_order_relaxed);
  }
  // One counter summed over every local client.
  uint64_t client_total(std::atomic<uint64_t> backend::ClientCounters::*counter) const noexcept {
    uint64_t s = 0;
    for (const Local& l : nodes_)
      for (uint32_t c = 0; c < C_; ++c) s += (l.node->counters(c).*counter).load(std::memory_order_relaxed);
    return s;
  }
  uint64_t issued_total() const noexcept { return client_total(&backend::ClientCounters::issued); }
  uint64_t completed_total() const noexcept { return client_total(&backend::ClientCounters::completed); }
  uint64_t failed_total() const noexcept { return client_total(&backend::ClientCounters::failed); }
  uint64_t client_errors_total() const noexcept { return client_total(&backend::ClientCounters::errors); }
  // Requests issued and not answered yet. Exact once the clients stopped issuing (the
  // completed counter is read first, so the difference never goes negative).
  uint64_t in_flight() const noexcept {
    const uint64_t done = completed_total() + failed_total();
    const uint64_t issued = issued_total();
    return issued > done ? issued - done : 0;
  }

  // ---- daemon metrics, copied by the daemon threads themselves
  // Returns one copy per daemon, node-major. Blocks until every daemon served it.
  std::vector<backend::DaemonMetrics> snapshot_daemons() {
    const size_t n = nodes_.size() * D_;
    request_copies(dctl_.get(), n, ++snapshot_seq_, "a daemon metrics snapshot");
    std::vector<backend::DaemonMetrics> out;
    out.reserve(n);
    for (size_t k = 0; k < n; ++k) out.push_back(dctl_[k].copy);
    return out;
  }

  // Whether the nodes record request latency (ucx-am does not).
  static constexpr bool kHasLatency = requires(N& n) { n.client_latency(0u); };

  // Every client's latency (since the start: each client restarts its maximum after the
  // copy), merged per local node, and every client's completed counter copied in the
  // same step as its latency (node-major; read by this thread where the nodes record no
  // latency). Blocks until every client served it.
  struct LatencySnapshot {
    std::vector<metrics::MergedRequestLatency> latency;  // per local node
    std::vector<uint64_t> completed;                     // per client, node-major
    std::vector<Clock::time_point> at;                   // when each client copied
  };
  LatencySnapshot snapshot_latency() {
    LatencySnapshot out{std::vector<metrics::MergedRequestLatency>(nodes_.size()),
                        std::vector<uint64_t>(nodes_.size() * C_), std::vector<Clock::time_point>(nodes_.size() * C_)};
    if constexpr (kHasLatency) {
      request_copies(cctl_.get(), nodes_.size() * C_, ++latency_seq_, "a client latency snapshot");
      for (size_t i = 0; i < nodes_.size(); ++i)
        for (uint32_t c = 0; c < C_; ++c) {
          out.latency[i].merge(cctl_[i * C_ + c].copy);
          out.completed[i * C_ + c] = cctl_[i * C_ + c].completed_at_copy;
          out.at[i * C_ + c] = cctl_[i * C_ + c].copied_at;
        }
    } else {
      for (size_t i = 0; i < nodes_.size(); ++i)
        for (uint32_t c = 0; c < C_; ++c) {
          out.completed[i * C_ + c] = completed(i, c);
          out.at[i * C_ + c] = Clock::now();
        }
    }
    return out;
  }

  // Every thread of every local node stops the copyrpc endpoints it owns (a peer was
  // declared lost): each thread does it in its next step, as the endpoints' owner, and
  // their pending calls are failed back to the clients (kEndpointStopped). Nodes without
  // copyrpc endpoints (ucx-am) have nothing to stop.
  void stop_endpoints() noexcept { stop_endpoints_.store(true, std::memory_order_release); }

  // Clients stop issuing (see the header comment: park, set, release). Once: the clients
  // park only once, so a second call (a peer lost in the all-reduce after the drain, whose
  // wind-down stops issuing again) would write the flags while the clients read them, a
  // data race ThreadSanitizer reported (test_real_mpi, a rank stopped mid-run, ucx-am).
  void stop_issuing() {
    if (issuing_stopped_) return;
    issuing_stopped_ = true;
    park_.store(true, std::memory_order_release);
    const uint64_t n = nodes_.size() * C_;
    wait_until("the client threads to pause", [&] { return parked_.load(std::memory_order_acquire) == n; });
    for (const Local& l : nodes_) l.node->stop_issuing();
    resume_.store(true, std::memory_order_release);
  }

  // Raises the stop flag and joins every thread (rethrows a thread's exception).
  bool stopped() const noexcept { return stopping_; }
  void stop() {
    stopping_ = true;
    group_.request_stop();
    resume_.store(true, std::memory_order_release);
    group_.join();
  }

 private:
  struct alignas(runtime::kCacheLineSize) DaemonCtl {
    std::atomic<uint64_t> want{0};  // snapshot number the main thread asks for
    std::atomic<uint64_t> done{0};  // snapshot number `copy` holds
    uint64_t served = 0;            // daemon thread only
    bool endpoints_stopped = false;  // daemon thread only
    backend::DaemonMetrics copy;
  };
  struct alignas(runtime::kCacheLineSize) ClientCtl {
    bool parked = false;  // client thread only
    bool endpoints_stopped = false;  // client thread only
    std::atomic<uint64_t> want{0};  // latency snapshot number the main thread asks for
    std::atomic<uint64_t> done{0};  // snapshot number `copy` holds
    uint64_t served = 0;            // client thread only
    metrics::RequestLatency copy;
    uint64_t completed_at_copy = 0;  // the client's completed counter when it made `copy`
    Clock::time_point copied_at{};   // and the time
  };

  // The thread `thread` (daemons 0..D-1, then clients) stops its endpoints once asked.
  template <class Ctl>
  void stop_endpoints_if_asked(N& node, uint32_t thread, Ctl& ctl) {
    if constexpr (requires { node.stop_thread_endpoints(thread); }) {
      if (!ctl.endpoints_stopped && stop_endpoints_.load(std::memory_order_acquire)) [[unlikely]] {
        node.stop_thread_endpoints(thread);
        ctl.endpoints_stopped = true;
      }
    }
  }

  void daemon_step(size_t i, uint32_t d) {
    N& node = *nodes_[i].node;
    DaemonCtl& ctl = dctl_[i * D_ + d];
    stop_endpoints_if_asked(node, d, ctl);
    const uint64_t busy_before = yield_ ? node.daemon_metrics(d).busy_loops : 0;
    const bool whole_loop = node.step_daemon(d);  // false: a loop split into several steps
    const uint64_t want = ctl.want.load(std::memory_order_acquire);
    if (want != ctl.served) {
      ctl.copy = node.daemon_metrics(d);
      ctl.served = want;
      ctl.done.store(want, std::memory_order_release);
    }
    if (yield_ && whole_loop && node.daemon_metrics(d).busy_loops == busy_before) sched_yield();
  }

  void client_step(size_t i, uint32_t c) {
    ClientCtl& ctl = cctl_[i * C_ + c];
    if (!ctl.parked && park_.load(std::memory_order_acquire)) {
      ctl.parked = true;
      parked_.fetch_add(1, std::memory_order_acq_rel);
      while (!resume_.load(std::memory_order_acquire)) {
        if (group_.stop_requested()) return;
        sched_yield();
      }
    }
    stop_endpoints_if_asked(*nodes_[i].node, D_ + c, ctl);
    const auto r = nodes_[i].node->step_client(c);
    if constexpr (kHasLatency) {
      const uint64_t want = ctl.want.load(std::memory_order_acquire);
      if (want != ctl.served) {
        ctl.copy = nodes_[i].node->client_latency(c);
        ctl.completed_at_copy = completed(i, c);  // this thread is the counter's only writer
        ctl.copied_at = Clock::now();
        nodes_[i].node->restart_client_latency_max(c);
        ctl.served = want;
        ctl.done.store(want, std::memory_order_release);
      }
    }
    if (yield_ && r.completed == 0 && r.issued == 0) sched_yield();
  }

  // Asks the threads of ctl[0, n) for copy number `seq` (want) and waits until each has
  // made it (done); `what` names the wait in a timeout's message.
  template <class Ctl>
  void request_copies(Ctl* ctl, size_t n, uint64_t seq, const char* what) {
    for (size_t k = 0; k < n; ++k) ctl[k].want.store(seq, std::memory_order_release);
    wait_until(what, [&] {
      for (size_t k = 0; k < n; ++k)
        if (ctl[k].done.load(std::memory_order_acquire) != seq) return false;
      return true;
    });
  }
  template <class Pred>
  void wait_until(const char* what, Pred&& done) {
    const auto deadline = Clock::now() + kAckTimeout;
    while (!done()) {
      rethrow_if_failed();
      if (Clock::now() > deadline)
        throw std::runtime_error(std::string("benchkv: timed out waiting for ") + what);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::vector<Local> nodes_;
  uint32_t D_, C_;
  bool yield_;
  bool stopping_ = false;
  bool issuing_stopped_ = false;  // main thread only
  uint64_t snapshot_seq_ = 0;
  uint64_t latency_seq_ = 0;
  std::unique_ptr<DaemonCtl[]> dctl_;
  std::unique_ptr<ClientCtl[]> cctl_;
  alignas(runtime::kCacheLineSize) std::atomic<bool> park_{false};
  std::atomic<bool> resume_{false};
  std::atomic<bool> stop_endpoints_{false};
  alignas(runtime::kCacheLineSize) std::atomic<uint64_t> parked_{0};
  runtime::ThreadGroup group_;  // last: destroyed (joined) first
};

// ------------------------------------------------------------------------ coordinators

// Every rank lives in this process (the wall-clock loopback cluster): the local values
// already are the global ones. Local nodes are ranks 0..N-1 in order.
struct InProcessCoordinator {
  uint32_t ranks = 1;
  uint32_t num_ranks() const noexcept { return ranks; }
  bool is_root() const noexcept { return true; }
  void barrier() const noexcept {}
  uint64_t sum(uint64_t v) const noexcept { return v; }
  uint64_t max(uint64_t v) const noexcept { return v; }
  // Concatenation of every rank's values in rank order (here: the local ones).
  template <class T>
  std::vector<T> gather(std::span<const T> local) const {
    return std::vector<T>(local.begin(), local.end());
  }
  template <class T>
  std::vector<T> all_gather(std::span<const T> local) const {
    return std::vector<T>(local.begin(), local.end());
  }
};

// ------------------------------------------------------------------------- measurement

// One rank's requests over the whole measurement (all runs and the drain).
struct RankTotals {
  uint64_t issued = 0;
  uint64_t completed = 0;
  uint64_t failed = 0;  // reported failed (kEndpointStopped): neither completed nor an error
};
static_assert(std::is_trivially_copyable_v<RankTotals> && sizeof(RankTotals) == 24);

struct RealResult {
  std::vector<app::RunResults> runs;        // complete on the root
  std::vector<app::DaemonReport> daemons;  // complete on the root
  std::vector<RankTotals> per_rank;           // by rank, complete on the root
  uint64_t issued = 0, completed = 0, errors = 0;  // all ranks (all-reduced)
  uint64_t failed = 0;  // requests reported failed (their copyrpc endpoint stopped), all ranks
  uint64_t drain_ns = 0;                      // this rank's drain time
  double wall_s = 0;                          // this rank: measurement start to stop
  // Set when a collective missed its deadline (mpi::PeerLost): the measurement ended
  // early on this rank and every field above is this rank's alone (runs: its own epochs,
  // the other ranks' left at zero; per_rank: this rank only). Holds the reason.
  std::string incomplete;
  uint64_t unanswered = 0;  // incomplete only: requests still in flight when the wind-down gave up
  // incomplete only: the backend's remote calls were failed back when the endpoints
  // stopped (copyrpc backends); false for a backend without that (ucx-am), whose calls
  // to the lost peer stay unanswered.
  bool calls_failed_back = false;
  // Where the measurement is: run at_run, at_epochs of its epochs recorded (all of them
  // once the run ended). Kept up to date by run_measurement.
  uint32_t at_run = 0, at_epochs = 0;
  // Set when SIGINT/SIGTERM stopped the measurement (mpi::Interrupted; `incomplete` is set
  // too): the signal, the runs after at_run dropped and at_run cut at at_epochs (dropped
  // when none of its kept epochs finished), the peers on this host that were gone when the
  // signal was handled (mpi::Session::gone_peers) and the copyrpc endpoints that had
  // stopped before it (the transport saw their connection fail, or a peer broke a rule).
  int interrupted_by = 0;
  std::vector<int> gone_peers;
  std::vector<std::string> failed_endpoints;
};

// "interrupted by SIGTERM", followed by "; rank 1 died before it (its process is gone)"
// when peers on this host are gone (`gone`, from mpi::Session::gone_peers): the reason
// the KV measurement (run_measurement) and rank 0 of the rpc and data modes give.
inline std::string interrupted_reason(int sig, const std::vector<int>& gone) {
  // (Appended piece by piece: GCC 12's -Wrestrict false positive on inlined literal +
  // std::string chains at -O3.)
  std::string why = "interrupted by ";
  why += app::signal_name(sig);
  if (!gone.empty()) {
    why += gone.size() == 1 ? "; rank" : "; ranks";
    for (size_t k = 0; k < gone.size(); ++k) {
      why += k ? ", " : " ";
      why += std::to_string(gone[k]);
    }
    why += gone.size() == 1 ? " died before it (its process is gone)" : " died before it (their processes are gone)";
  }
  return why;
}

// After SIGINT/SIGTERM, the local drain of the wind-down waits at most this long (mpirun
// follows its SIGTERM with SIGKILL 1 s later by default: the outputs come first).
inline constexpr double kInterruptDrainSeconds = 0.2;

using ProgressFn = std::function<void(const std::string&)>;

// What one rank's clients did so far (its own counters).
template <class N>
RankTotals local_totals(const Driver<N>& drv, size_t i) {
  RankTotals t;
  for (uint32_t c = 0; c < drv.clients(); ++c) {
    t.issued += drv.local(i).node->counters(c).issued.load(std::memory_order_relaxed);
    t.completed += drv.completed(i, c);
    t.failed += drv.local(i).node->counters(c).failed.load(std::memory_order_relaxed);
  }
  return t;
}

// A collective missed its deadline (mpi::PeerLost): this rank ends its measurement
// without MPI. Its threads stop every copyrpc endpoint they own (the rank cannot tell
// which peer is gone, so the calls to every peer are failed back: kEndpointStopped,
// counted failed by the clients), the clients stop issuing, and the threads keep
// stepping until nothing is in flight here (the requests of local clients to local
// daemons complete, the failed-back ones end as failed) or `wait_s` passed; what is
// still in flight then is reported unanswered. `res` keeps the epochs recorded so far.
template <class N>
void wind_down_after_peer_lost(Driver<N>& drv, RealResult& res, const std::string& why, double wait_s,
                               Clock::time_point t_start) {
  res.incomplete = why;
  res.calls_failed_back = requires(N& n) { n.stop_thread_endpoints(uint32_t{0}); };
  if (!drv.stopped()) {  // lost before the drain ended (else only the gathers were left)
    if (t_start == Clock::time_point{}) {  // lost in the first barrier: the threads never ran
      drv.start();
      t_start = Clock::now();
    }
    drv.stop_endpoints();
    const auto t_drain = Clock::now();
    drv.stop_issuing();
    const auto limit = std::chrono::duration<double>(wait_s);
    while (drv.in_flight() > 0 && Clock::now() - t_drain < limit) {
      drv.rethrow_if_failed();
      std::this_thread::sleep_for(kDrainPoll);
    }
    res.drain_ns = elapsed_ns(t_drain, Clock::now());
    drv.stop();
    res.wall_s = static_cast<double>(elapsed_ns(t_start, Clock::now())) * 1e-9;
  }
  res.unanswered = drv.in_flight();
  res.per_rank.clear();
  res.issued = res.completed = res.failed = 0;
  for (size_t i = 0; i < drv.local_nodes(); ++i) {
    const RankTotals t = local_totals(drv, i);
    res.per_rank.push_back(t);
    res.issued += t.issued;
    res.completed += t.completed;
    res.failed += t.failed;
  }
  uint64_t errors = drv.client_errors_total();
  for (size_t i = 0; i < drv.local_nodes(); ++i) {
    errors += drv.local(i).node->client_protocol_errors();
    for (uint32_t d = 0; d < drv.daemons(); ++d) errors += drv.local(i).node->daemon_metrics(d).protocol_errors;
  }
  res.errors = errors;
  for (app::RunResults& r : res.runs) r.set_counts(0, 0);  // no run's counts were agreed on
}

// The collective part of run_measurement (below).
template <class N, class Coord>
void run_measurement_collective(Driver<N>& drv, const app::Options& o, Coord& coord, const ProgressFn& progress,
                                RealResult& res, Clock::time_point& t_start_out) {
  const uint32_t np = coord.num_ranks();
  const uint32_t C = drv.clients(), D = drv.daemons();
  const uint32_t epochs = app::epochs_per_run(o);
  const auto interval = std::chrono::nanoseconds(app::interval_ns(o));
  const size_t L = drv.local_nodes();

  for (uint32_t r = 0; r < o.runs; ++r) res.runs.emplace_back(r, np, C, epochs, o.trim);
  std::vector<DaemonRecord> local_daemons;
  std::vector<uint64_t> run_issued(o.runs), run_completed(o.runs);

  coord.barrier();
  drv.start();
  const auto t_start = Clock::now();
  t_start_out = t_start;
  std::vector<backend::DaemonMetrics> snap = drv.snapshot_daemons();
  auto t_snap = Clock::now();
  // Counted from the start of the threads: run 0 includes the start-up.
  uint64_t issued_mark = 0, completed_mark = 0;
  std::vector<uint64_t> prev(L * C);
  std::vector<Clock::time_point> prev_at(L * C);  // each client's last epoch boundary
  std::vector<uint64_t> epoch_sum(L);

  // Latency over each run's kept epochs, merged over this rank's clients (per run).
  std::vector<metrics::MergedRequestLatency> local_latency(o.runs);
  std::vector<metrics::MergedRequestLatency> kept_start;
  // A signal at a safe point (an epoch's end, or during its wait): the measurement stops.
  const auto stop_if_signalled = [](const char* where) {
    if (const int sig = app::stop_signal(); sig != 0) throw mpi::Interrupted(app::signal_name(sig) + " came " + where, sig);
  };
  for (uint32_t run = 0; run < o.runs; ++run) {
    app::RunResults& rr = res.runs[run];
    res.at_run = run;
    res.at_epochs = 0;
    coord.barrier();
    if (o.trim == 0) {
      typename Driver<N>::LatencySnapshot snap = drv.snapshot_latency();
      kept_start = std::move(snap.latency);
      prev = std::move(snap.completed);
      prev_at = std::move(snap.at);
    } else {
      for (size_t i = 0; i < L; ++i)
        for (uint32_t c = 0; c < C; ++c) prev[i * C + c] = drv.completed(i, c);
    }
    const auto t0 = Clock::now();
    if (o.trim != 0) prev_at.assign(L * C, t0);
    auto t_prev = t0;
    for (uint32_t e = 0; e < epochs; ++e) {
      // Slept in slices of at most 10 ms, so that a signal is seen within one (the epoch
      // it cuts short is not recorded).
      for (const auto end = t0 + interval * (e + 1); Clock::now() < end;) {
        stop_if_signalled("during an epoch");
        std::this_thread::sleep_until(std::min(end, Clock::now() + std::chrono::milliseconds(10)));
      }
      const auto t = Clock::now();
      const uint64_t dur = elapsed_ns(t_prev, t);
      t_prev = t;
      // At a kept edge the boundary is where each client copied its latency (header
      // comment, Epochs), elsewhere the read of its counter.
      const bool kept_edge = e + 1 == rr.first_kept_epoch() || e + 1 == rr.end_kept_epoch();
      typename Driver<N>::LatencySnapshot edge;
      if (kept_edge) edge = drv.snapshot_latency();
      for (size_t i = 0; i < L; ++i) {
        epoch_sum[i] = 0;
        for (uint32_t c = 0; c < C; ++c) {
          const uint64_t v = kept_edge ? edge.completed[i * C + c] : drv.completed(i, c);
          const Clock::time_point at = kept_edge ? edge.at[i * C + c] : t;
          rr.record(drv.local(i).rank, c, e, v - prev[i * C + c], elapsed_ns(prev_at[i * C + c], at));
          prev_at[i * C + c] = at;
          epoch_sum[i] += v - prev[i * C + c];
          prev[i * C + c] = v;
        }
      }
      res.at_epochs = e + 1;
      drv.rethrow_if_failed();
      if (e + 1 == rr.first_kept_epoch()) kept_start = std::move(edge.latency);
      if (e + 1 == rr.end_kept_epoch())
        for (size_t i = 0; i < L; ++i) local_latency[run].merge(edge.latency[i].since(kept_start[i]));
      if (o.progress) {
        const std::vector<uint64_t> by_rank = coord.all_gather(std::span<const uint64_t>(epoch_sum));
        if (coord.is_root() && progress) {
          app::ProgressLine p;
          p.run = run;
          p.runs = o.runs;
          p.epoch = e;
          p.epochs = epochs;
          p.trim = o.trim;
          p.duration_ns = dur;
          p.rank_requests = by_rank;
          progress(app::format_progress(p));
        }
      }
      if (e + 1 < epochs) stop_if_signalled("at an epoch's end");
    }
    // Run end: daemon metrics of the run (from the previous snapshot) and its counts.
    std::vector<backend::DaemonMetrics> now = drv.snapshot_daemons();
    const auto t_now = Clock::now();
    for (size_t i = 0; i < L; ++i)
      for (uint32_t d = 0; d < D; ++d)
        local_daemons.push_back(
            daemon_delta(snap[i * D + d], now[i * D + d], run, drv.local(i).rank, d, elapsed_ns(t_snap, t_now)));
    snap = std::move(now);
    t_snap = t_now;
    if (run + 1 < o.runs) {
      const uint64_t issued = drv.issued_total(), completed = drv.completed_total();
      run_issued[run] = coord.sum(issued - issued_mark);
      run_completed[run] = coord.sum(completed - completed_mark);
      issued_mark = issued;
      completed_mark = completed;
    }
  }

  // Drain: clients stop issuing; every thread keeps stepping until nothing is in flight
  // anywhere (daemons keep serving the peers' last requests).
  const auto t_drain = Clock::now();
  drv.stop_issuing();
  for (;;) {
    drv.rethrow_if_failed();
    const uint64_t in_flight = coord.sum(drv.in_flight());
    if (in_flight == 0) break;
    const uint64_t late = coord.max(Clock::now() - t_drain > kDrainTimeout ? 1 : 0);
    if (late)
      throw std::runtime_error("benchkv: " + std::to_string(in_flight) + " requests still in flight " +
                               std::to_string(kDrainTimeout.count()) + " s after the clients stopped issuing");
    std::this_thread::sleep_for(kDrainPoll);
  }
  res.drain_ns = elapsed_ns(t_drain, Clock::now());
  drv.stop();
  res.wall_s = static_cast<double>(elapsed_ns(t_start, Clock::now())) * 1e-9;

  // The last run's counts include the drain.
  const uint64_t issued = drv.issued_total(), completed = drv.completed_total();
  run_issued[o.runs - 1] = coord.sum(issued - issued_mark);
  run_completed[o.runs - 1] = coord.sum(completed - completed_mark);
  for (uint32_t r = 0; r < o.runs; ++r) {
    res.runs[r].set_counts(run_issued[r], run_completed[r]);
    res.issued += run_issued[r];
    res.completed += run_completed[r];
  }
  // Errors: error responses, malformed messages seen by clients and by daemons.
  uint64_t errors = drv.client_errors_total();
  for (size_t i = 0; i < L; ++i) {
    errors += drv.local(i).node->client_protocol_errors();
    for (uint32_t d = 0; d < D; ++d) errors += drv.local(i).node->daemon_metrics(d).protocol_errors;
    // A stopped copyrpc endpoint is an error of its own (its calls fail, and are
    // counted above, only if any were made after it stopped): named on stderr.
    if constexpr (requires { drv.local(i).node->failed_endpoints(); }) {  // copyrpc nodes only
      for (const std::string& line : drv.local(i).node->failed_endpoints()) {
        std::fprintf(stderr, "benchkv: %s\n", line.c_str());
        ++errors;
      }
    }
  }
  res.errors = coord.sum(errors);
  res.failed = coord.sum(drv.failed_total());

  std::vector<RankTotals> mine_totals;
  for (size_t i = 0; i < L; ++i) mine_totals.push_back(local_totals(drv, i));
  res.per_rank = coord.gather(std::span<const RankTotals>(mine_totals));

  // Rank 0 gathers every rank's epoch records (one contiguous block per rank and run).
  for (uint32_t r = 0; r < o.runs; ++r) {
    std::vector<app::EpochRecord> mine;
    for (size_t i = 0; i < L; ++i) {
      const auto block = res.runs[r].rank_records(drv.local(i).rank);
      mine.insert(mine.end(), block.begin(), block.end());
    }
    const std::vector<app::EpochRecord> all = coord.gather(std::span<const app::EpochRecord>(mine));
    if (coord.is_root()) {
      const size_t block = size_t{C} * epochs;
      if (all.size() != block * np)
        throw std::runtime_error("benchkv: gathered " + std::to_string(all.size()) + " epoch records, expected " +
                                 std::to_string(block * np));
      for (uint32_t rank = 0; rank < np; ++rank)
        std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(rank * block), block,
                    res.runs[r].rank_records(rank).begin());
    }
  }
  // Rank 0 merges every rank's latency (one RequestLatency per rank and run).
  if constexpr (Driver<N>::kHasLatency) {
    for (uint32_t r = 0; r < o.runs; ++r) {
      const std::vector<metrics::MergedRequestLatency> all =
          coord.gather(std::span<const metrics::MergedRequestLatency>(&local_latency[r], 1));
      if (coord.is_root()) {
        if (all.size() != np / L)  // one per gathering rank (in-process: one for every node)
          throw std::runtime_error("benchkv: gathered " + std::to_string(all.size()) + " latency records");
        metrics::MergedRequestLatency merged;
        for (const auto& l : all) merged.merge(l);
        res.runs[r].set_latency(merged);
      }
    }
  }
  const std::vector<DaemonRecord> all_daemons = coord.gather(std::span<const DaemonRecord>(local_daemons));
  if (coord.is_root())
    for (const DaemonRecord& d : all_daemons) res.daemons.push_back(to_metrics(d));
}

// The measurement flow (header comment). The driver's threads must be spawned (not yet
// started). Every rank calls it with the same options; collectives happen in the same
// order everywhere. `progress` (root only, may be empty) gets the per-epoch lines when
// o.progress is set. A collective that misses its deadline (MPI runs: mpi::PeerLost)
// ends the measurement on this rank (wind_down_after_peer_lost): the result is marked
// incomplete and holds this rank's values only.
template <class N, class Coord>
RealResult run_measurement(Driver<N>& drv, const app::Options& o, Coord& coord, const ProgressFn& progress) {
  RealResult res;
  Clock::time_point t_start{};
  try {
    run_measurement_collective(drv, o, coord, progress, res, t_start);
  } catch (const mpi::PeerLost& e) {
    if constexpr (requires { coord.s.rearm_watchdog(); }) coord.s.rearm_watchdog();
    double wait_s = 60;
    if constexpr (requires { coord.s.collective_deadline_seconds(); }) wait_s = coord.s.collective_deadline_seconds();
    wind_down_after_peer_lost(drv, res, e.what(), wait_s, t_start);
  } catch (const mpi::Interrupted& e) {
    if constexpr (requires { coord.s.rearm_watchdog(); }) coord.s.rearm_watchdog();
    res.interrupted_by = e.signal;
    if constexpr (requires { coord.s.gone_peers(); }) res.gone_peers = coord.s.gone_peers();
    for (size_t i = 0; i < drv.local_nodes(); ++i)  // before the wind-down stops every endpoint
      if constexpr (requires { drv.local(i).node->failed_endpoints(); })
        for (std::string& line : drv.local(i).node->failed_endpoints()) res.failed_endpoints.push_back(std::move(line));
    wind_down_after_peer_lost(drv, res, interrupted_reason(e.signal, res.gone_peers), kInterruptDrainSeconds, t_start);
    // The finished epochs only: the runs after the current one never started, the current
    // one ends at its last finished epoch (and is left out when none of its kept epochs is).
    if (res.at_run + 1 < res.runs.size()) res.runs.erase(res.runs.begin() + res.at_run + 1, res.runs.end());
    if (!res.runs.empty()) {
      app::RunResults& last = res.runs.back();
      if (res.at_epochs < last.epochs()) last.set_epochs_done(res.at_epochs);
      if (last.epochs_done() <= last.first_kept_epoch()) res.runs.pop_back();
    }
  }
  return res;
}

}  // namespace bkv::real
