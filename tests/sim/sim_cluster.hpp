// A small simulated cluster for tests: an engine, a DesFabric with N nodes, and per node
// one simulated thread owning one DesTransport. The threads are passive unless a test
// gives them a step (wake-ups from completions then run an empty step).
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/sim_thread.hpp"
#include "sim/des_transport.hpp"

namespace bkv::test {

// The simulator's names the tests on a SimCluster use.
using sim::NicConfig;
using sim::SimThread;
using sim::StepResult;
using sim::Time;

inline sim::StepResult idle_step(void*, sim::SimThread&) { return sim::StepResult::kIdle; }

struct SimCluster {
  sim::Engine engine;
  sim::CostModel costs = sim::CostModel::defaults();
  sim::DesFabric fabric;
  std::deque<sim::SimThread> threads;
  std::vector<sim::DesTransport*> t;

  SimCluster(uint32_t nodes, const sim::NicConfig& nic, uint64_t seed = 1, const sim::DeviceContextConfig& cc = {})
      : SimCluster(std::vector<sim::NicConfig>(nodes, nic), seed, cc) {}
  // One node per NIC configuration (nodes whose NICs differ).
  explicit SimCluster(const std::vector<sim::NicConfig>& nics, uint64_t seed = 1,
                      const sim::DeviceContextConfig& cc = {})
      : fabric(engine, seed) {
    for (uint32_t i = 0; i < nics.size(); ++i) {
      fabric.add_node(nics[i]);
      threads.emplace_back(engine, costs, derive_seed(seed, {i, 77}), "node" + std::to_string(i));
      threads.back().set_step(&idle_step, nullptr);
      t.push_back(&fabric.create_transport(i, threads.back(), cc));
    }
  }
  sim::Network& net() { return fabric.network(); }
  // A new queue pair on node `a` connected to a new one on node `b`.
  std::pair<sim::DesTransport::QueuePair&, sim::DesTransport::QueuePair&> connected_pair(uint32_t a = 0,
                                                                                         uint32_t b = 1) {
    auto& qa = t[a]->create_queue_pair();
    auto& qb = t[b]->create_queue_pair();
    sim::DesFabric::connect(qa, qb);
    return {qa, qb};
  }
  static RemoteBuffer remote(const MemoryRegion& mr, uint64_t offset = 0) {
    return RemoteBuffer{reinterpret_cast<uint64_t>(mr.addr) + offset, mr.rkey, 0, mr.length - offset};
  }
};

// A NIC without jitter, for exact timing checks.
inline sim::NicConfig quiet_nic() {
  sim::NicConfig c;
  c.latency.jitter = sim::Distribution::constant(0);
  return c;
}

// The set-up of most NIC tests: on a cluster of at least two nodes, a connected queue
// pair (qa on node 0, qb on node 1), a source buffer on node 0 registered for local
// access and a target buffer on node 1 registered for remote writes, in that order.
struct WritePair {
  sim::DesTransport::QueuePair& qa;
  sim::DesTransport::QueuePair& qb;
  std::vector<std::byte> src, dst;
  MemoryRegion smr, dmr;

  WritePair(SimCluster& c, size_t src_bytes, size_t dst_bytes, std::byte src_fill = std::byte{0},
            std::byte dst_fill = std::byte{0})
      : qa(c.t[0]->create_queue_pair()), qb(c.t[1]->create_queue_pair()), src(src_bytes, src_fill),
        dst(dst_bytes, dst_fill) {
    sim::DesFabric::connect(qa, qb);
    smr = c.t[0]->register_memory(src.data(), src.size(), kAccessLocalWrite);
    dmr = c.t[1]->register_memory(dst.data(), dst.size(), kAccessRemoteWrite);
  }
  RemoteBuffer target(uint64_t offset = 0) const { return SimCluster::remote(dmr, offset); }

  // What a thread of node 0 needs to post the pair's WRITEs: its transport, the queue
  // pair, the source and its key, the target.
  struct Poster {
    sim::DesTransport* t;
    sim::DesTransport::QueuePair* qp;
    const std::byte* src;
    uint32_t lkey;
    RemoteBuffer dst;
    // An 8-byte WRITE of the source's first bytes to the target's.
    PostResult write8(uint64_t wr_id, bool signaled) const { return qp->post_write(src, 8, lkey, dst, wr_id, signaled); }
  };
  Poster poster(SimCluster& c) { return Poster{c.t[0], &qa, src.data(), smr.lkey, target()}; }
};

}  // namespace bkv::test
