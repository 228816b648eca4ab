// copyrpc metrics: what a Context counts (ContextStats) and the round-trip times of its
// calls (RttHistogram, fed by CallTimes). Counting only: nothing here changes what a
// Context does.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace bkv::copyrpc {

// Round-trip times of calls (call() -> response), in a log2-linear histogram: 16 linear
// sub-buckets per power of two of nanoseconds, so percentiles are within ~6%.
struct RttHistogram {
  static constexpr uint32_t kSub = 16;
  static constexpr uint32_t kBuckets = 64 * kSub;
  std::vector<uint64_t> counts;
  uint64_t n = 0;
  double sum_ns = 0;
  static uint32_t bucket(uint64_t ns) noexcept {
    if (ns < kSub) return static_cast<uint32_t>(ns);
    const uint32_t e = 63 - static_cast<uint32_t>(__builtin_clzll(ns));  // ns in [2^e, 2^(e+1))
    const uint32_t sub = static_cast<uint32_t>((ns >> (e - 4)) & (kSub - 1));
    return (e - 3) * kSub + sub;
  }
  static double lower_bound_ns(uint32_t b) noexcept {
    if (b < kSub) return b;
    const uint32_t e = b / kSub + 3, sub = b % kSub;
    return std::ldexp(1.0 + sub / double(kSub), static_cast<int>(e));
  }
  void add(uint64_t ns) {
    if (counts.empty()) counts.assign(kBuckets, 0);
    ++counts[std::min(bucket(ns), kBuckets - 1)];
    ++n;
    sum_ns += static_cast<double>(ns);
  }
  double mean_ns() const noexcept { return n ? sum_ns / double(n) : 0.0; }
  double percentile_ns(double p) const noexcept {
    if (n == 0) return 0;
    const uint64_t target = static_cast<uint64_t>(std::ceil(p * double(n)));
    uint64_t acc = 0;
    for (uint32_t b = 0; b < counts.size(); ++b) {
      acc += counts[b];
      if (acc >= target) return lower_bound_ns(b);
    }
    return lower_bound_ns(kBuckets - 1);
  }
};

// When each pending call of one endpoint was made, by call id, so its response can be
// timed. Kept only under a metering (simulated) transport: the Context asks the meter
// for the time only there.
class CallTimes {
 public:
  void started(uint32_t call_id, uint64_t now_ns) {
    if (call_id >= started_ns_.size()) started_ns_.resize(call_id + 1);
    started_ns_[call_id] = now_ns;
  }
  uint64_t elapsed_ns(uint32_t call_id, uint64_t now_ns) const noexcept { return now_ns - started_ns_[call_id]; }

 private:
  std::vector<uint64_t> started_ns_;
};

struct ContextStats {
  uint64_t cqes = 0;
  uint64_t batches_received = 0;
  uint64_t messages_received = 0;  // requests queued and responses dispatched (per batch)
  uint64_t wqes_posted = 0;
  uint64_t doorbells = 0;
  uint64_t messages_sent = 0;      // messages in finished batches (counted per batch)
  uint64_t reads_posted = 0;
  uint64_t wraps = 0;
  uint64_t failed_calls = 0;  // calls failed back because their endpoint stopped
  RttHistogram rtt;  // filled only under a metering (simulated) transport
};

}  // namespace bkv::copyrpc
