// The one simulator runner: what every simulated mode (KV, rpc, data) shares. A mode is a
// class derived from SimRun that builds its threads and nodes on the engine and fabric
// made here, and says how to read its clients' counters; SimRun runs the timeline.
//
// Timeline: a start-up of startup_ms (KV mode: the daemons loop alone, as the original's
// did while its clients were spawned; 0 elsewhere), then run r covers virtual time
// [startup + r*duration, startup + (r+1)*duration), cut into epochs of interval_ms;
// threads keep running across runs (as in the original, where runs are measurement
// windows). At every epoch's end each client's completed requests are
// recorded (RunResults::record, ranks then clients); at a run's end its issued and
// completed counts are closed (RunCounter). After the last run the clients stop
// issuing and the simulation continues until nothing is in flight (the drain, at most
// kDrainLimit of virtual time, less when the mode says nothing in flight can end any
// more: an exactly-once run already refused); what completes then is added to the last
// run.
//
// Interruption: SIGINT or SIGTERM (install_stop_signals) is looked at at every epoch's
// end. The runner then stops measuring: the runs after the current one are dropped, the
// current one keeps its finished epochs (RunResults::set_epochs_done; dropped too when
// none of them is kept), and the clients stop issuing and drain as at a normal end.
// interruption() says which signal came and where; the mode's outputs are marked with it.
//
// Determinism: no wall-clock reads, no threads, no pointer-keyed iteration; every random
// stream is derived from the config seed. Same options and model -> same output bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/cli/stop_signals.hpp"
#include "apps/benchkv/results/results.hpp"
#include "sim/des_transport.hpp"
#include "sim/faults.hpp"
#include "sim/engine.hpp"
#include "sim/model.hpp"
#include "sim/selectable_event_set.hpp"
#include "transports/software_nic/paged_memory.hpp"

namespace bkv::app {

using Progress = std::function<void(const std::string&)>;

// Where a signal stopped a simulated run.
struct Interruption {
  int signal = 0;
  uint32_t run = 0;          // the run being measured (numbered from first_run)
  uint32_t epochs_done = 0;  // its epochs finished (all of them when the signal came during the drain)
  nlohmann::json to_json() const;  // {"signal": "SIGINT", "run", "epochs_done"}
};

// How the simulated rings' paged memory discards consumed pages under --ring-pages
// (release or keep; auto is chosen first, choose_ring_pages).
software_nic::DiscardMode discard_mode(RingPages p);

// --ring-pages auto: keep (kKeep) when the rings, whole (`ring_bytes`: every ring page
// resident, as kept pages end up once a ring has wrapped), take at most half of
// `available_bytes`, the memory available as the simulation starts; release otherwise
// (also when the memory available is unknown: 0). A choice given (release, keep) stays.
RingPages choose_ring_pages(RingPages asked, uint64_t ring_bytes, uint64_t available_bytes);

// MemAvailable of /proc/meminfo in bytes (0 when it cannot be read).
uint64_t available_memory_bytes();

// What heap_to_huge_pages did: the heap's mappings and the kernel's first refusal of each
// request. MADV_COLLAPSE answers with the error of the last 2 MiB block it could not
// collapse (EINVAL for a mapping that holds no whole aligned block), so a non-zero
// collapse_errno does not mean nothing was collapsed, nor 0 that everything was.
struct HeapHugePages {
  uint64_t heap_bytes = 0;     // the [heap] mappings of /proc/self/maps, summed (0: none,
                               // e.g. under a sanitizer's allocator, which does not use brk)
  uint32_t heap_mappings = 0;  // how many
  int hugepage_errno = 0;      // madvise(MADV_HUGEPAGE): 0, or the first errno
  int collapse_errno = 0;      // madvise(MADV_COLLAPSE): 0, or the first errno
  nlohmann::json to_json() const;
};
// The simulation's own objects (clients, simulated threads, endpoints, the NIC model's
// queues: many thousands of small objects, 14 MB of heap at C1 NP=32) are touched a
// few lines at a time by steps that jump from object to object; on 4 KiB pages most of
// those steps miss the TLB as well as the cache. Once the mode has built them, this asks
// the kernel to back the process heap with transparent huge pages (MADV_HUGEPAGE) and to
// collapse the pages already there now (MADV_COLLAPSE). A hint only: no result depends
// on it, and a kernel that refuses (no THP, or older than 6.1) leaves the pages as they
// were; the answers go to the summary's provenance.
HeapHugePages heap_to_huge_pages();
sim::EventSetKind event_set_kind(EventSet e);

class SimRun {
 public:
  static constexpr sim::Time kDrainLimit = sim::kDrainLimitNs;  // 1 s of virtual time

  SimRun(const SimRun&) = delete;
  SimRun& operator=(const SimRun&) = delete;
  virtual ~SimRun() = default;

 protected:
  // The requests (calls, operations) every client issued and completed so far.
  struct Totals {
    uint64_t issued = 0, completed = 0;
  };

  // fabric_seed seeds the network's random streams; clients_per_rank is the shape of the
  // CSV rows (rank x client); drain_check_ns how often the drain looks for an idle system.
  SimRun(const Options& o, const sim::Model& model, const Progress& progress, uint64_t fabric_seed,
         uint32_t clients_per_rank, sim::Time drain_check_ns);

  // The timeline: epochs of every run, then the drain. runs() holds a RunResults per run,
  // numbered from first_run. Returns whether the drain ended with nothing in flight.
  bool run_timeline(uint32_t first_run);

  // The signal that stopped the timeline, if one did (after run_timeline).
  const std::optional<Interruption>& interruption() const { return interrupted_; }

  // ---- what a mode says
  virtual void start() = 0;                                  // start the threads (at the first run's start)
  virtual void runs_ended() {}                               // the last run's end, before the drain
  virtual void stop_issuing() = 0;                           // clients issue nothing more
  virtual bool idle() const = 0;                             // nothing in flight
  // Asked at each drain check that finds requests in flight: true when they cannot end
  // any more, whatever the drain waits; it stops then instead of at kDrainLimit (the
  // run did not drain).
  virtual bool drain_futile() { return false; }
  virtual uint64_t completed(uint32_t rank, uint32_t client) const = 0;  // a client's completed requests
  virtual Totals totals() const = 0;
  // An epoch was recorded into rr (progress lines, latency windows); the run's figures
  // when it was its last epoch (before the run's counts are closed).
  virtual void epoch_recorded(RunResults& rr, uint32_t run, uint32_t epoch) = 0;
  virtual void run_ended(RunResults& rr, uint32_t run) = 0;
  // A run's kept epochs (the steady state) begin: called at their start, run_start(run) +
  // trim epochs, after the epoch that ends there is recorded and before any thread steps
  // at that time.
  virtual void kept_began(uint32_t /*run*/) {}
  // A run's kept epochs (the steady state) ended: called after their last epoch is recorded.
  virtual void kept_ended(RunResults& /*rr*/, uint32_t /*run*/) {}
  // A signal stopped run `run` after rr.epochs_done() of its epochs, inside its kept
  // window (after at least one kept epoch, before kept_ended): the run's figures over its
  // finished kept epochs (rr's kept epochs end at epochs_done now).
  virtual void run_interrupted(RunResults& /*rr*/, uint32_t /*run*/) {}

  // ---- shared by the modes
  sim::Time run_start(uint32_t r) const { return startup_ + uint64_t(r) * duration_; }
  std::vector<RunResults>& runs() { return runs_; }
  // {events, virtual_end_ns, drain_ns}: the engine's figures once the timeline ran.
  nlohmann::json timeline_json() const;
  // How the rings' consumed pages were handled, for the summary's provenance (it depends
  // on the machine's memory, so it is not part of the output compared byte for byte):
  // {"ring_pages": {"asked", "chosen", "ring_bytes", "available_bytes"}, "heap_huge_pages":
  // HeapHugePages::to_json()}; set by run_timeline.
  const nlohmann::json& setup_provenance() const { return setup_provenance_; }
  // Per-NIC figures, one object per node: the stations' and the admission queue's over
  // each run's kept epochs ("kept", one entry per run: run, window_ns and
  // Network::load_json's figures), and Network::report_json's over the whole simulation,
  // start-up and drain included.
  nlohmann::json nics_json();

  const Options& o_;
  sim::Model model_;
  Progress progress_;
  sim::Engine engine_;
  sim::DesFabric fabric_;
  uint32_t np_, clients_;
  sim::Time duration_, interval_;
  uint32_t epochs_;
  sim::Time startup_;  // the first run starts here

 private:
  void on_epoch(uint32_t idx);
  void on_kept_begin(uint32_t run);
  // The NICs' figures over rr's kept epochs (from on_kept_begin's loads).
  void record_kept_nics(const RunResults& rr);
  void on_drain_check(uint32_t);

  // --ring-pages: the discard mode chosen once the mode has built its rings.
  void choose_ring_pages();

  sim::Time drain_check_ns_;
  nlohmann::json setup_provenance_ = nlohmann::json::object();
  std::vector<RunResults> runs_;
  std::vector<uint64_t> last_completed_;  // per rank x client, at the previous epoch's end
  std::vector<sim::NicLoad> kept_loads_;  // per node, at the current run's kept epochs' start
  std::vector<nlohmann::json> kept_nics_;  // per node: its "kept" array (nics_json)
  RunCounter run_counts_;
  sim::Time end_ = 0, drain_deadline_ = 0;
  sim::TargetId drain_target_{};
  bool drained_ = false;
  uint32_t first_run_ = 0;
  std::optional<Interruption> interrupted_;
};

}  // namespace bkv::app
