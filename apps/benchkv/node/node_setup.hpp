// From benchkv options to what a node is built from, for every mode (simulator, threaded
// loopback, MPI ranks, ucx-am): the one place where options become node parameters.
#pragma once

#include <cstdint>

#include "apps/benchkv/cli/options.hpp"
#include "backends/node_config.hpp"
#include "backends/policies/loop_policy.hpp"
#include "core/copyrpc/context.hpp"
#include "core/kv/workload.hpp"

namespace bkv::app {

// Delegation ring slots per node and zero-length receives kept posted per context.
inline constexpr uint32_t kDelegRingDepth = 1024;
inline constexpr uint32_t kSrqSize = 1024;

struct NodeSetup {
  backend::NodeConfig node;
  backend::LoopPolicySettings loop;
  kv::WorkloadConfig workload;
  copyrpc::ContextConfig context;
};

// Node `rank` of a run of `np` nodes.
inline NodeSetup node_setup(const Options& o, uint32_t rank, uint32_t np) {
  NodeSetup s;
  s.node = backend::NodeConfig{rank, np, o.server_threads, o.client_threads, o.queue_depth, o.key_range,
                               kDelegRingDepth};
  s.loop = o.loop;
  s.workload = workload_config(o, np);
  s.context.ring_size = o.ring_size;
  s.context.srq_size = kSrqSize;
  return s;
}

}  // namespace bkv::app
