// What a node's threads count: per daemon (plain fields, owned by the daemon thread) and
// per client (relaxed atomics, read by whoever samples epochs).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/metrics/cqe_histogram.hpp"

namespace bkv::backend {

struct DaemonMetrics {
  metrics::CqeHistogram cqe;             // loops and hardware CQEs per loop (0, 1, 2-10, 11-100, >100)
  metrics::CqeHistogram completions;     // RPC completions (responses to callers) per loop
  uint64_t inflight_sum = 0;           // copyrpc calls in flight, summed over loops
  uint64_t busy_loops = 0;             // loops that did any work
  uint64_t calls = 0, replies = 0, local_ops = 0, responses = 0;
  uint64_t backlog_peak = 0;
  uint64_t protocol_errors = 0;        // malformed messages from peers or clients
  uint64_t failed_calls = 0;           // requests answered kEndpointStopped: their copyrpc
                                       // endpoint stopped (failed back, or refused at call)
  uint64_t holds = 0, held_released = 0;

  // One loop's sample, taken at its end (`times` identical loops at once).
  void record_loop(uint32_t cqes_this_loop, uint32_t completions_this_loop, uint64_t inflight,
                   uint64_t times = 1) noexcept {
    cqe.add(cqes_this_loop, times);
    completions.add(completions_this_loop, times);
    inflight_sum += inflight * times;
  }
};

// Per-client counters. Written by the client thread only, read by whoever samples
// epochs: relaxed atomics, each client's on its own cache line.
struct alignas(64) ClientCounters {
  std::atomic<uint64_t> issued{0};
  std::atomic<uint64_t> completed{0};  // answered, requests reported failed not included
  std::atomic<uint64_t> errors{0};  // error responses (never expected in a correct run)
  std::atomic<uint64_t> failed{0};  // reported failed (kEndpointStopped: the path to the target
                                    // rank stopped; expected under faults, not an error)
  void add_completed(uint64_t n) noexcept { completed.store(completed.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  void add_issued(uint64_t n) noexcept { issued.store(issued.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
};

}  // namespace bkv::backend
