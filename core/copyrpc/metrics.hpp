// copyrpc metrics: what a Context counts (ContextStats) and the round-trip times of its
// calls (RttHistogram, fed from the call times its pending-call slabs keep under a
// metering transport, endpoint.hpp). Counting only: nothing here changes what a Context
// does.
#pragma once

#include <cstdint>

#include "core/metrics/latency_histogram.hpp"

namespace bkv::copyrpc {

// Round-trip times of calls (call() -> response), in nanoseconds: the log-linear
// histogram of request latency (core/metrics/latency_histogram.hpp, within 0.78 %).
using RttHistogram = metrics::LatencyHistogram;

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
