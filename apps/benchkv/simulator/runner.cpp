#include "apps/benchkv/simulator/runner.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/random.hpp"

namespace bkv::app {

nlohmann::json Interruption::to_json() const {
  return {{"signal", signal_name(signal)},
          {"run", run},
          {"epochs_done", epochs_done}};
}

sim::EventSetKind event_set_kind(EventSet e) {
  return e == EventSet::kCalendar ? sim::EventSetKind::kCalendarQueue : sim::EventSetKind::kBinaryHeap;
}

software_nic::DiscardMode discard_mode(RingPages p) {
  if (p == RingPages::kAuto) throw std::logic_error("discard_mode: --ring-pages auto is chosen first");
  return p == RingPages::kKeep ? software_nic::DiscardMode::kKeep : software_nic::DiscardMode::kRelease;
}

RingPages choose_ring_pages(RingPages asked, uint64_t ring_bytes, uint64_t available_bytes) {
  if (asked != RingPages::kAuto) return asked;
  return available_bytes > 0 && ring_bytes <= available_bytes / 2 ? RingPages::kKeep : RingPages::kRelease;
}

uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

nlohmann::json HeapHugePages::to_json() const {
  return {{"heap_bytes", heap_bytes},
          {"heap_mappings", heap_mappings},
          {"hugepage_errno", hugepage_errno},
          {"collapse_errno", collapse_errno}};
}

HeapHugePages heap_to_huge_pages() {
#ifndef MADV_COLLAPSE
  constexpr int MADV_COLLAPSE = 25;  // Linux 6.1; older headers lack the name
#endif
  // Every [heap] mapping: once part of the heap is advised, its later growth is a mapping
  // of its own with the same name (a second call, e.g. the next repetition, advises it).
  std::vector<std::pair<unsigned long, unsigned long>> ranges;
  {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    unsigned long lo = 0, hi = 0;
    while (std::getline(maps, line))
      if (line.size() >= 6 && line.compare(line.size() - 6, 6, "[heap]") == 0 &&
          std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && hi > lo)
        ranges.emplace_back(lo, hi);
  }
  HeapHugePages h;
  for (const auto& [lo, hi] : ranges) {
    h.heap_bytes += hi - lo;
    ++h.heap_mappings;
    void* start = reinterpret_cast<void*>(lo);
    if (::madvise(start, hi - lo, MADV_HUGEPAGE) != 0 && h.hugepage_errno == 0) h.hugepage_errno = errno;
    if (::madvise(start, hi - lo, MADV_COLLAPSE) != 0 && h.collapse_errno == 0) h.collapse_errno = errno;
  }
  return h;
}

SimRun::SimRun(const Options& o, const sim::Model& model, const Progress& progress, uint64_t fabric_seed,
               uint32_t clients_per_rank, sim::Time drain_check_ns)
    : o_(o), model_(model), progress_(progress), fabric_(engine_, fabric_seed), np_(o.np), clients_(clients_per_rank),
      duration_(duration_ns(o)), interval_(interval_ns(o)), epochs_(epochs_per_run(o)),
      startup_(static_cast<sim::Time>(std::llround(o.startup_ms * 1e6))), drain_check_ns_(drain_check_ns) {
  fabric_.pages().set_give_back_pages(o.ring_page_batch);
  engine_.event_set_to_configure().select(event_set_kind(o.event_set));
  engine_.set_trace_hash(false);  // a test's check: no output depends on it
  last_completed_.assign(size_t(np_) * clients_, 0);
}

void SimRun::choose_ring_pages() {
  const uint64_t ring_bytes = fabric_.pages().allocated_bytes();
  const uint64_t available = o_.ring_pages == RingPages::kAuto ? available_memory_bytes() : 0;
  const RingPages chosen = app::choose_ring_pages(o_.ring_pages, ring_bytes, available);
  fabric_.pages().set_discard_mode(discard_mode(chosen));
  nlohmann::json j{{"asked", to_string(o_.ring_pages)}, {"chosen", to_string(chosen)}, {"ring_bytes", ring_bytes}};
  if (o_.ring_pages == RingPages::kAuto) j["available_bytes"] = available;
  setup_provenance_["ring_pages"] = std::move(j);
}

bool SimRun::run_timeline(uint32_t first_run) {
  first_run_ = first_run;
  choose_ring_pages();  // the mode has built its rings: their whole size is known
  setup_provenance_["heap_huge_pages"] = heap_to_huge_pages().to_json();  // the mode has built its objects
  for (uint32_t r = 0; r < o_.runs; ++r) runs_.emplace_back(first_run + r, np_, clients_, epochs_, o_.trim);
  const sim::TargetId epoch_target = engine_.add_member<SimRun, &SimRun::on_epoch>(this);
  for (uint32_t r = 0; r < o_.runs; ++r)
    for (uint32_t e = 0; e < epochs_; ++e)
      engine_.schedule(run_start(r) + uint64_t(e + 1) * interval_, epoch_target, r * epochs_ + e);
  // After the epoch ending at the same time, before every step (the threads start next).
  const sim::TargetId kept_target = engine_.add_member<SimRun, &SimRun::on_kept_begin>(this);
  for (uint32_t r = 0; r < o_.runs; ++r) engine_.schedule(run_start(r) + uint64_t(o_.trim) * interval_, kept_target, r);
  kept_nics_.assign(np_, nlohmann::json::array());
  start();
  end_ = run_start(o_.runs);
  engine_.run_until(end_);
  if (interrupted_) {  // the runs after the interrupted one never started
    end_ = engine_.now();
    runs_.erase(runs_.begin() + (interrupted_->run - first_run + 1), runs_.end());
  }
  runs_ended();

  // Drain: clients stop issuing, the simulation continues until nothing is in flight.
  stop_issuing();
  drain_target_ = engine_.add_member<SimRun, &SimRun::on_drain_check>(this);
  drain_deadline_ = end_ + kDrainLimit;
  engine_.schedule(end_, drain_target_, 0);
  engine_.run();
  if (interrupted_ && runs_.back().epochs_done() <= runs_.back().first_kept_epoch()) runs_.pop_back();  // nothing kept
  if (!interrupted_ && stop_signal() != 0)  // came during the drain: every epoch was measured
    interrupted_ = Interruption{stop_signal(), first_run + o_.runs - 1, epochs_};
  return drained_;
}

void SimRun::on_epoch(uint32_t idx) {
  if (interrupted_) return;  // epochs still scheduled after a signal measure nothing
  const uint32_t run = idx / epochs_, epoch = idx % epochs_;
  RunResults& rr = runs_[run];
  for (uint32_t r = 0; r < np_; ++r)
    for (uint32_t c = 0; c < clients_; ++c) {
      const uint64_t now = completed(r, c);
      uint64_t& last = last_completed_[size_t(r) * clients_ + c];
      rr.record(r, c, epoch, now - last, interval_);
      last = now;
    }
  epoch_recorded(rr, run, epoch);
  if (epoch + 1 == rr.end_kept_epoch()) {
    record_kept_nics(rr);
    kept_ended(rr, run);
  }
  if (epoch + 1 == epochs_) {
    run_ended(rr, run);
    const Totals t = totals();
    run_counts_.close_run(rr, t.issued, t.completed);
  }
  if (const int sig = stop_signal(); sig != 0) {
    interrupted_ = Interruption{sig, first_run_ + run, epoch + 1};
    if (epoch + 1 < epochs_) {  // the run ends here
      const bool kept_open = epoch + 1 > rr.first_kept_epoch() && epoch + 1 < rr.end_kept_epoch();
      rr.set_epochs_done(epoch + 1);
      if (kept_open) {  // (a closed kept window had kept_ended)
        record_kept_nics(rr);
        run_interrupted(rr, run);
      }
      const Totals t = totals();
      run_counts_.close_run(rr, t.issued, t.completed);
    }
    engine_.stop();
  }
}

void SimRun::on_kept_begin(uint32_t run) {
  if (interrupted_) return;  // the run was dropped
  kept_loads_.clear();
  for (uint32_t r = 0; r < np_; ++r) kept_loads_.push_back(fabric_.network().load(r));
  kept_began(run);
}

void SimRun::record_kept_nics(const RunResults& rr) {
  for (uint32_t r = 0; r < np_; ++r) {
    nlohmann::json k = sim::Network::load_json(kept_loads_[r], fabric_.network().load(r), rr.kept_duration_ns());
    k["run"] = rr.run();
    k["window_ns"] = rr.kept_duration_ns();
    kept_nics_[r].push_back(std::move(k));
  }
}

void SimRun::on_drain_check(uint32_t) {
  if (idle()) {
    drained_ = true;
    const Totals t = totals();
    run_counts_.add_drain(runs_.back(), t.issued, t.completed);
    engine_.stop();
    return;
  }
  if (engine_.now() >= drain_deadline_ || drain_futile()) {  // give up: the mode reports it
    engine_.stop();
    return;
  }
  engine_.schedule(engine_.now() + drain_check_ns_, drain_target_, 0);
}

nlohmann::json SimRun::timeline_json() const {
  return {{"events", engine_.events_run()}, {"virtual_end_ns", engine_.now()}, {"drain_ns", engine_.now() - end_}};
}

nlohmann::json SimRun::nics_json() {
  nlohmann::json nics = nlohmann::json::array();
  for (uint32_t r = 0; r < np_; ++r) {
    nlohmann::json n = fabric_.network().report_json(r, engine_.now());
    n["kept"] = kept_nics_[r];
    nics.push_back(std::move(n));
  }
  return nics;
}

}  // namespace bkv::app
