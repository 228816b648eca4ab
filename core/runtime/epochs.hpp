// Measurement plumbing of a real run (docs/design.md §Benchmark plumbing):
// client threads count completed requests; the main thread samples every client's count
// at each epoch boundary (--interval-ms) for duration / interval epochs; the first and
// last --trim epochs (warm-up, cool-down) are dropped; --runs repeats it.
//
// Counters: one per client, each alone on its cache line, written only by its client
// thread with a relaxed load + store (single writer, no read-modify-write) and read by
// the main thread with relaxed loads. A sample may be one increment stale, which only
// moves that request to the next epoch: nothing is lost or counted twice, because every
// epoch's count is the difference of two samples of a monotonic counter.
#pragma once

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace bkv::runtime {

class CompletionCounters {
 public:
  explicit CompletionCounters(uint32_t clients) : n_(clients), slots_(new Slot[clients]) {}

  // Client thread `client` only.
  void add(uint32_t client, uint64_t n = 1) noexcept {
    std::atomic<uint64_t>& v = slots_[client].value;
    v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // Any thread.
  uint64_t read(uint32_t client) const noexcept { return slots_[client].value.load(std::memory_order_relaxed); }
  uint32_t size() const noexcept { return n_; }

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> value{0};
  };
  static_assert(sizeof(Slot) == 64 && alignof(Slot) == 64, "one counter per cache line");
  uint32_t n_;
  std::unique_ptr<Slot[]> slots_;
};

// One row of the results (the CSV columns run,rank,client_id,epoch,requests,duration_ns).
struct EpochRecord {
  uint32_t run = 0;
  uint32_t rank = 0;
  uint32_t client_id = 0;
  uint32_t epoch = 0;
  uint64_t requests = 0;
  uint64_t duration_ns = 0;
};
static_assert(std::is_trivially_copyable_v<EpochRecord> && sizeof(EpochRecord) == 32);

struct EpochPlan {
  uint32_t epochs = 0;
  uint32_t trim = 0;
  std::chrono::milliseconds interval{1000};
};

// Validates --duration / --interval-ms / --trim: the run must hold at least one epoch
// after trimming both ends. Throws std::invalid_argument naming the option.
inline EpochPlan plan_epochs(double duration_s, uint32_t interval_ms, uint32_t trim) {
  if (!(duration_s > 0) || !std::isfinite(duration_s))
    throw std::invalid_argument("--duration must be a positive number of seconds");
  if (interval_ms == 0) throw std::invalid_argument("--interval-ms must be positive");
  const double epochs = std::floor(duration_s * 1000.0 / interval_ms);
  if (epochs < 1) throw std::invalid_argument("--duration is shorter than one --interval-ms epoch");
  if (epochs > 1e7) throw std::invalid_argument("--duration / --interval-ms gives more than 10^7 epochs");
  const auto e = static_cast<uint32_t>(epochs);
  if (uint64_t{trim} * 2 >= e)
    throw std::invalid_argument("--trim " + std::to_string(trim) + " removes all " + std::to_string(e) +
                                " epochs (need 2*trim < duration/interval)");
  return EpochPlan{e, trim, std::chrono::milliseconds(interval_ms)};
}

// Main thread: samples every client at each epoch boundary for plan.epochs epochs,
// starting now. Returns every epoch (untrimmed), epoch-major. on_epoch(epoch, records of
// that epoch) runs after each sample (a progress line, a stop check).
template <class OnEpoch>
std::vector<EpochRecord> sample_run(const CompletionCounters& counters, const EpochPlan& plan, uint32_t run,
                                    uint32_t rank, OnEpoch&& on_epoch) {
  using clock = std::chrono::steady_clock;
  const uint32_t n = counters.size();
  std::vector<uint64_t> prev(n);
  std::vector<EpochRecord> out;
  out.reserve(uint64_t{plan.epochs} * n);
  auto t_prev = clock::now();
  for (uint32_t c = 0; c < n; ++c) prev[c] = counters.read(c);
  const auto t0 = t_prev;
  for (uint32_t e = 0; e < plan.epochs; ++e) {
    std::this_thread::sleep_until(t0 + plan.interval * (e + 1));
    const auto t = clock::now();
    const auto dur = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t - t_prev).count());
    const size_t first = out.size();
    for (uint32_t c = 0; c < n; ++c) {
      const uint64_t v = counters.read(c);
      out.push_back(EpochRecord{run, rank, c, e, v - prev[c], dur});
      prev[c] = v;
    }
    t_prev = t;
    on_epoch(e, std::span<const EpochRecord>(out.data() + first, n));
  }
  return out;
}
inline std::vector<EpochRecord> sample_run(const CompletionCounters& counters, const EpochPlan& plan, uint32_t run,
                                           uint32_t rank) {
  return sample_run(counters, plan, run, rank, [](uint32_t, std::span<const EpochRecord>) {});
}

// Drops the first and last `trim` epochs (warm-up and cool-down); epoch numbers are kept.
inline std::vector<EpochRecord> trim_epochs(std::span<const EpochRecord> records, const EpochPlan& plan) {
  std::vector<EpochRecord> out;
  for (const EpochRecord& r : records)
    if (r.epoch >= plan.trim && r.epoch + plan.trim < plan.epochs) out.push_back(r);
  return out;
}

struct RunSummary {
  uint64_t requests = 0;     // over every client and kept epoch
  uint64_t window_ns = 0;    // wall time of the kept epochs
  double mops = 0;           // requests per microsecond
};

// Totals of one rank's records of one run (several clients share each epoch's duration).
inline RunSummary summarize(std::span<const EpochRecord> records) {
  RunSummary s;
  if (records.empty()) return s;
  for (const EpochRecord& r : records) {
    s.requests += r.requests;
    if (r.client_id == records.front().client_id) s.window_ns += r.duration_ns;
  }
  s.mops = s.window_ns ? static_cast<double>(s.requests) * 1e3 / static_cast<double>(s.window_ns) : 0.0;
  return s;
}

}  // namespace bkv::runtime
