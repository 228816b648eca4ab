// A small simulated cluster for tests: an engine, a DesFabric with N nodes, and per node
// one simulated thread owning one DesTransport. The threads are passive unless a test
// gives them a step (wake-ups from completions then run an empty step).
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/sim_thread.hpp"
#include "sim/des_transport.hpp"

namespace bkv::test {

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

}  // namespace bkv::test
