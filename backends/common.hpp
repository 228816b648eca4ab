// Pieces every backend shares: the node's configuration, the messages daemons send each
// other, the copyrpc call token, per-daemon metrics and the client's request logic.
//
// Backends are written once and templated over the Transport (for daemons that own a
// copyrpc context) and over a Meter (for threads that do not). Each thread has a
// `step()`: one iteration of its event loop. The real runtime calls it in a loop on a
// pinned thread; the simulator schedules it on a simulated thread. Nothing in a step
// blocks: full rings park work in backlogs and report "try again".
//
// A Waker is told when a daemon writes a response into a client's slot: the simulator
// wakes that (event-driven) client; the real runtime's clients spin, so NullWaker.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/metrics/cqe_histogram.hpp"
#include "core/copyrpc/context.hpp"
#include "core/kv/store.hpp"
#include "core/kv/types.hpp"
#include "core/kv/workload.hpp"
#include "core/meter.hpp"
#include "core/shm/delegationrpc.hpp"
#include "core/shm/flux.hpp"
#include "core/shm/ipc.hpp"

namespace bkv::backend {

using kv::Request;
using kv::Response;

struct NullWaker {
  void wake(uint32_t /*client*/) noexcept {}
};

// Shape of one node, the same on every node of a run.
struct NodeConfig {
  uint32_t rank = 0;
  uint32_t np = 1;             // number of nodes
  uint32_t daemons = 1;        // daemon threads per node (server_threads)
  uint32_t clients = 1;        // client threads per node
  uint32_t queue_depth = 4;    // requests in flight per client (power of two)
  uint64_t key_range = 1024;   // keys per node
  uint32_t deleg_ring_depth = 1024;
};

// Delegation daemon #0's loop policies (docs/design.md §Loop policies),
// defaults = calibration runs.
struct LoopPolicy {
  uint32_t poll_budget = 1;          // step C polls up to N times, stops at N responses
  double batch_hold_us = 0;          // 0 = off
  bool adaptive_hold = false;        // hold = NP / EWMA(release rate)
  double hold_rtt_multiplier = 0;    // 0 = off; hold = m * EWMA(flush -> first CQE)
  bool adaptive_poll_budget = false; // EWMA + hysteresis controller (§Loop policies)
};

// ---------------------------------------------------------------- messages
// Requests travel as the kv::Request bytes (copyrpc payload = RemoteRequest), responses
// as kv::Response bytes: both fixed size and validated by the receiver.
using kv::as_bytes;
// Decodes bytes from a peer (kv::decode_*: size and validity checked).
inline bool decode(std::span<const std::byte> b, Request& out) noexcept {
  const auto r = kv::decode_request(b);
  if (r) out = *r;
  return r.has_value();
}
inline bool decode(std::span<const std::byte> b, Response& out) noexcept {
  const auto r = kv::decode_response(b);
  if (r) out = *r;
  return r.has_value();
}

// Inter-daemon (flux) message: a request to execute on the target's shard, a request to
// send over copyrpc on the caller's behalf (Meta), or a response.
struct FluxMsg {
  enum Kind : uint8_t { kExecute = 1, kRemoteCall = 2, kResponse = 3 };
  uint8_t kind = 0;
  uint8_t pad[7] = {};
  Request req{};
  Response resp{};
};
static_assert(sizeof(FluxMsg) == 48 && std::is_trivially_copyable_v<FluxMsg>);

// What a daemon remembers about a copyrpc call it issued, returned with the response.
struct CallToken {
  // kDelegation: answer delegation client a, response slot b
  // kIpc:        answer ipc client a, slot b
  // kFlux:       answer the flux request of daemon a, slot b
  // kClient:     a direct client's own call
  // kPending:    a copyrpc request received from a peer, parked at index a
  enum Origin : uint8_t { kDelegation = 1, kIpc = 2, kFlux = 3, kClient = 4, kPending = 5 };
  uint8_t origin = 0;
  uint32_t a = 0;
  uint32_t b = 0;
};

// ---------------------------------------------------------------- metrics
struct DaemonMetrics {
  metrics::CqeHistogram cqe;             // loops and CQEs per loop (0, 1, 2-10, 11-100, >100)
  uint64_t inflight_sum = 0;           // copyrpc calls in flight, summed over loops
  uint64_t busy_loops = 0;             // loops that did any work
  uint64_t calls = 0, replies = 0, local_ops = 0, responses = 0;
  uint64_t backlog_peak = 0;
  uint64_t protocol_errors = 0;        // malformed messages from peers or clients
  uint64_t holds = 0, held_released = 0;

  void record_loop(uint32_t cqes_this_loop, uint64_t inflight) noexcept {
    cqe.add(cqes_this_loop);
    inflight_sum += inflight;
  }
};

// Per-client counters. Written by the client thread only, read by whoever samples
// epochs: relaxed atomics, each client's on its own cache line.
struct alignas(64) ClientCounters {
  std::atomic<uint64_t> issued{0};
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> errors{0};  // error responses (never expected in a correct run)
  void add_completed(uint64_t n) noexcept { completed.store(completed.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  void add_issued(uint64_t n) noexcept { issued.store(issued.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
};

using kv::owner_of;

// copyrpc requests a daemon received and forwarded (over flux) to the daemon owning the
// key's shard, waiting for the answer: their handles (without the payload pointer, which
// is only valid until the next flush), indexed by the token sent along.
class PendingRequests {
 public:
  uint32_t park(copyrpc::RecvHandle h) {
    h.data = nullptr;
    if (!free_.empty()) {
      const uint32_t i = free_.back();
      free_.pop_back();
      slots_[i] = h;
      return i;
    }
    slots_.push_back(h);
    return static_cast<uint32_t>(slots_.size() - 1);
  }
  // The handle parked at i, released; false if i names no parked request.
  bool take(uint32_t i, copyrpc::RecvHandle& out) {
    if (i >= slots_.size() || slots_[i].allowance == 0) return false;
    out = slots_[i];
    slots_[i].allowance = 0;  // a parked handle always has an allowance (>= 64)
    free_.push_back(i);
    return true;
  }

 private:
  std::vector<copyrpc::RecvHandle> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace bkv::backend
