// copyrpc metrics: what a Context counts (ContextStats) and the round-trip times of its
// calls (RttHistogram, fed by CallTimes). Counting only: nothing here changes what a
// Context does.
#pragma once

#include <cstdint>
#include <vector>

#include "core/metrics/latency_histogram.hpp"

namespace bkv::copyrpc {

// Round-trip times of calls (call() -> response), in nanoseconds: the log-linear
// histogram of request latency (core/metrics/latency_histogram.hpp, within 0.78 %).
using RttHistogram = metrics::LatencyHistogram;

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
