// From benchkv options to what a node is built from, for every mode (simulator, threaded
// loopback, MPI ranks, ucx-am): the one place where options become node parameters.
#pragma once

#include <cstdint>

#include "apps/benchkv/cli/options.hpp"
#include "backends/data/data_node.hpp"
#include "backends/node_config.hpp"
#include "backends/policies/loop_policy.hpp"
#include "backends/rpc/rpc_bench.hpp"
#include "core/copyrpc/context.hpp"
#include "core/kv/workload.hpp"

namespace bkv::app {

// Delegation ring slots per node and zero-length receives kept posted per context.
inline constexpr uint32_t kSrqSize = 1024;

// Delegation ring slots per node, as the original sized its ring: the next power of two
// of the node's client slots (clients x queue depth), at least 1,024. More than a node
// can have outstanding, so the ring never fills (2,048 at 46 clients x 32, 1,024 at 46 x 1).
constexpr uint32_t deleg_ring_depth(uint32_t clients, uint32_t queue_depth) {
  const uint64_t slots = uint64_t{clients} * queue_depth;
  uint64_t depth = 1024;
  while (depth < slots) depth *= 2;
  return static_cast<uint32_t>(depth);
}
static_assert(deleg_ring_depth(46, 32) == 2048 && deleg_ring_depth(46, 1) == 1024 && deleg_ring_depth(64, 16) == 1024 &&
              deleg_ring_depth(65, 16) == 2048);

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
                               deleg_ring_depth(o.client_threads, o.queue_depth)};
  s.loop = o.loop;
  s.workload = workload_config(o, np);
  s.context.ring_size = o.ring_size;
  s.context.srq_size = kSrqSize;
  return s;
}

// `benchkv rpc`: the benchmark's shape for one message size (rpc_message_sizes(o)) and
// the copyrpc context of its threads.
inline rpc::RpcConfig rpc_config(const Options& o, uint32_t message_size) {
  return rpc::RpcConfig{o.endpoints, o.queue_depth, message_size};
}
inline copyrpc::ContextConfig rpc_context_config(const Options& o) {
  copyrpc::ContextConfig cc;
  cc.ring_size = o.ring_size;
  cc.srq_size = kSrqSize;  // as the KV backends
  return cc;
}

// `benchkv data`: the node configuration for one rank and one value size.
inline data::DataNodeConfig data_node_config(const Options& o, uint32_t rank, uint32_t np, uint32_t value_size) {
  data::DataNodeConfig c;
  c.rank = rank;
  c.np = np;
  c.clients = o.client_threads;
  c.queue_depth = o.queue_depth;
  c.max_value_bytes = value_size;
  c.value_bytes = value_size;
  c.key_range = o.key_range;
  c.read_ratio = o.read_ratio;
  c.remote_only = true;
  c.seed = o.seed;
  switch (o.data_backend) {
    case BackendKind::kDelegation: c.backend = data::DataBackend::kDelegation; break;
    case BackendKind::kMeta: c.backend = data::DataBackend::kMeta; break;
    case BackendKind::kDirect: c.backend = data::DataBackend::kDirect; break;
    case BackendKind::kUcxAm: c.backend = data::DataBackend::kUcxAm; break;
  }
  c.validate();
  return c;
}

}  // namespace bkv::app
