// The shape of one node, the same on every node of a run, and the waker of runtimes whose
// clients spin.
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

#include <cstdint>

namespace bkv::backend {

struct NullWaker {
  void wake(uint32_t /*client*/) noexcept {}
};

struct NodeConfig {
  uint32_t rank = 0;
  uint32_t np = 1;             // number of nodes
  uint32_t daemons = 1;        // daemon threads per node (server_threads)
  uint32_t clients = 1;        // client threads per node
  uint32_t queue_depth = 4;    // requests in flight per client (power of two)
  uint64_t key_range = 1024;   // keys per node
  uint32_t deleg_ring_depth = 1024;
};

}  // namespace bkv::backend
