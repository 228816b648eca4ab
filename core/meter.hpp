// Cost metering: how the same backend code runs on real threads and in the simulator.
//
// Every operation whose CPU cost the simulator models is reported with
// meter.charge(Op, count). On real transports the meter is NullMeter, whose calls are
// empty inline functions and vanish; under the simulator the meter is the simulated
// thread, which advances its virtual clock by cost_model[op] * count. Messages a thread
// posts mid-step therefore carry the mid-step virtual time.
//
// meter.record(Phase, items) reports how much work each phase of a loop did (for the
// CQEs-per-loop histogram and friends); it also compiles to nothing on real runs.
// meter.now_ns() is the thread's clock: virtual time under the simulator; on real runs
// the steady clock's nanoseconds, read from the TSC where that is a clock
// (core/tsc_clock.hpp). Readers: the clients' latency recording, loop policies that
// hold work for a time, the rpc and data benchmarks' round trips.
#pragma once

#include <concepts>
#include <cstdint>

#include "core/tsc_clock.hpp"

namespace bkv {

// The costed operations. The JSON cost model has one key per entry (see sim/cost_model).
enum class Op : uint8_t {
  kLoop = 0,       // fixed cost of one event-loop iteration (loop head, stop check)
  kCqPoll,         // one poll of a completion queue (reading the owner byte)
  kCqe,            // handling one completion entry
  kMsgParse,       // parsing one copyrpc message out of a receive ring
  kCallEncode,     // encoding one copyrpc request into a send ring
  kReplyEncode,    // encoding one copyrpc response into a send ring
  kFlush,          // building one WRITE+IMM work request (WQE) for a batch
  kDoorbell,       // the MMIO doorbell / BlueFlame write for a queue pair
  kKvOp,           // one key-value store operation
  kRingOp,         // one shared-memory ring operation (slot read or write, fence)
  kChannelOp,      // one inter-daemon (flux) channel operation
  kClientRequest,  // client side: build one request and account one response
  kRingReserve,    // fetch_add on the shared MPSC ring head (a line every producer writes)
  kPollSlot,       // checking one other thread's queue for new work (one ipc client's ring)
  kCount
};

inline constexpr const char* kOpNames[] = {
    "loop",         "cq_poll", "cqe",   "msg_parse", "call_encode", "reply_encode",
    "flush",        "doorbell", "kv_op", "ring_op",  "channel_op",  "client_request", "ring_reserve", "poll_slot"};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == static_cast<int>(Op::kCount));

// Loop phases whose per-iteration item counts are recorded (the phases of
// docs/design_backends.md §Delegation daemon loop).
enum class Phase : uint8_t {
  kCqes = 0,      // completions drained in this loop (the "CQEs per loop" metric)
  kResponses,     // copyrpc responses delivered
  kRequestsIn,    // copyrpc requests received
  kCallsOut,      // copyrpc calls issued
  kLocalOps,      // local KV operations served
  kBacklog,       // items retried from backlogs
  kCount
};

// meter.answers_arrive(n, visits) reports that n answers written by a daemon's core were
// just collected by this (client) thread, found in `visits` response areas (one per
// daemon ipc ring or delegation slot set that held any; visits <= n); a simulated thread
// may make that a use of a node-wide serial resource (sim::Model::response_handoff_ns,
// per answer or per visit), a real one does nothing.

template <class M>
concept CostMeter = requires(M& m, Op op, Phase ph, uint32_t n) {
  { m.charge(op, n) } -> std::same_as<void>;
  { m.answers_arrive(n, n) } -> std::same_as<void>;
  { m.record(ph, n) } -> std::same_as<void>;
  { m.now_ns() } -> std::same_as<uint64_t>;
  { M::kEnabled } -> std::convertible_to<bool>;
};

struct NullMeter {
  static constexpr bool kEnabled = false;
  void charge(Op, uint32_t = 1) noexcept {}
  void record(Phase, uint32_t) noexcept {}
  void answers_arrive(uint32_t, uint32_t) noexcept {}
  uint64_t now_ns() const noexcept { return tsc_clock::now_ns(); }
};
static_assert(CostMeter<NullMeter>);

}  // namespace bkv
