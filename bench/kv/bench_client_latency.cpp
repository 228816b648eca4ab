// What recording request latency costs a client: the same backend::Client with and
// without recording (its kRecordLatency parameter), side by side, on real threads
// (NullMeter: the steady clock). The remote path answers every call at the client's
// next poll, so the time per request is the client's own work (pattern, issue, poll,
// counters) and the ratio is the share recording adds to it. Goal: < 2 %.
//
//   bench_client_latency [requests]      (default 20000000 per measurement)
//
// Each configuration is measured 7 times, alternating with and without recording, and
// the fastest of each is compared (the least disturbed by the shared machine).
//
// Also printed: what one read of the steady clock and of the meter's clock
// (core/tsc_clock.hpp) cost, back to back, and which clock the meter uses.
//
// Measured on the 2-core development VM (5e6 requests, GCC 12 -O2), without / with
// recording in ns per request (docs/benchmarks.md has the table and the history):
// 7.1-7.3 / 22.6 at queue depth 1, 5.3 / 12.2 at 4, 5.2 / 10.0 at 32 (steady clock before
// the TSC clock: 7.4 / 40.5, 5.3 / 18.0, 5.2 / 11.8). One clock read per client step
// (shared by the requests of the step: ~9.5 ns for RDTSC here) plus ~3-5 ns of histogram
// and token bookkeeping per request; against this bare client (no shared memory, no
// network) that is far above the 2 % goal; against a real path's per-request cost (an
// ipc round trip is ~270 ns, docs/benchmarks.md) it is ~5 % at depth 1.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/client.hpp"
#include "core/meter.hpp"
#include "core/tsc_clock.hpp"

using namespace bkv;
using Clock = std::chrono::steady_clock;

namespace {

volatile uint64_t clock_sink = 0;  // keeps the timed clock reads

// Answers every call at the next poll (a ring of the tokens in flight).
struct InstantRemotePath {
  static constexpr bool kSharedHead = false;
  static constexpr bool kDaemonAnswers = false;
  std::vector<uint64_t>* tokens;
  bool try_call(const kv::Request&, uint64_t token) {
    tokens->push_back(token);
    return true;
  }
  template <class F>
  uint32_t poll(F&& f) {
    const auto n = static_cast<uint32_t>(tokens->size());
    for (uint64_t t : *tokens) f(t, kv::Response::put_ok());
    tokens->clear();
    return n;
  }
  void after_issue() noexcept {}
};

template <bool kRecord>
double ns_per_request(uint32_t queue_depth, uint64_t requests) {
  backend::NodeConfig node;
  node.rank = 2;  // not a rank of the workload: every request takes the remote path
  node.np = 2;
  node.queue_depth = queue_depth;
  kv::WorkloadConfig wl;
  wl.num_ranks = 2;
  wl.key_range = 1024;
  wl.pattern_len = 4096;
  NullMeter meter;
  backend::ClientCounters counters;
  std::vector<uint64_t> tokens;
  tokens.reserve(queue_depth);
  backend::Client<NullMeter, InstantRemotePath, kRecord> client(node, kv::Pattern(wl, 0, 0), {},
                                                                InstantRemotePath{&tokens}, meter, counters);
  const auto t0 = Clock::now();
  while (counters.completed.load(std::memory_order_relaxed) < requests) client.step();
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  if constexpr (kRecord) {
    if (client.latency().all().count() != counters.completed.load()) {
      fmt::print(stderr, "bench_client_latency: recorded {} latencies for {} requests\n",
                 client.latency().all().count(), counters.completed.load());
      std::exit(1);
    }
  }
  return ns / static_cast<double>(counters.completed.load());
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t requests = 20'000'000;
  if (argc > 1) {
    char* end = nullptr;
    requests = std::strtoull(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || requests == 0) {
      fmt::print(stderr, "bench_client_latency: requests must be a positive integer, got \"{}\"\n", argv[1]);
      return 2;
    }
  }
  {
    constexpr int kReads = 10'000'000;
    NullMeter meter;
    uint64_t sink = meter.now_ns();  // calibrates the TSC clock before timing
    const auto t0 = Clock::now();
    for (int i = 0; i < kReads; ++i) sink += static_cast<uint64_t>(Clock::now().time_since_epoch().count());
    const auto t1 = Clock::now();
    for (int i = 0; i < kReads; ++i) sink += meter.now_ns();
    const auto t2 = Clock::now();
    const tsc_clock::Scale& s = tsc_clock::scale();
    fmt::print("clock read: steady {:.2f} ns, meter {:.2f} ns ({})\n",
               std::chrono::duration<double, std::nano>(t1 - t0).count() / kReads,
               std::chrono::duration<double, std::nano>(t2 - t1).count() / kReads,
               s.usable ? fmt::format("TSC, {:.1f} MHz", s.tsc_hz() / 1e6) : std::string("steady clock"));
    clock_sink = sink;
  }
  fmt::print("{:>11} {:>16} {:>16} {:>8}\n", "queue_depth", "without (ns/req)", "with (ns/req)", "ratio");
  for (uint32_t qd : {1u, 4u, 32u}) {
    double without = 1e300, with = 1e300;
    for (int rep = 0; rep < 7; ++rep) {
      without = std::min(without, ns_per_request<false>(qd, requests));
      with = std::min(with, ns_per_request<true>(qd, requests));
    }
    fmt::print("{:>11} {:>16.2f} {:>16.2f} {:>8.3f}\n", qd, without, with, with / without);
  }
  return 0;
}
