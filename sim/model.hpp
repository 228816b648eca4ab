// The simulator's model: the CPU cost model, the NIC/network model and the client-side
// constants, read from the model JSON (`--model`). Errors name the file and the key.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include <vector>

#include "sim/cost_model.hpp"
#include "sim/faults.hpp"
#include "sim/nic_config.hpp"

namespace bkv::sim {

// The simulator's model: CPU costs, NIC and network, and the client wake-up latency.
struct Model {
  CostModel cpu = CostModel::defaults();
  NicConfig nic{};
  double client_wake_ns = 100;   // cache-line transfer from the daemon's core to the client's
  double client_retry_ns = 500;  // a client whose request found the ring full retries after this
  // The delegation ring's head line is one resource per node: fetch_adds (and daemon #0's
  // reads) of it are served one at a time (cost: cpu.ring_reserve each). false: each
  // thread pays the cost without waiting for the others (the ablation).
  bool ring_head_contention = true;
  // Answer handoff (docs/bistability.md §8, "A node-wide answer handoff"): every answer a
  // daemon's core writes into a line a client of its node polls (ipc response, delegation
  // response slot) reaches the client through one node-wide serial stage held this long
  // per answer; the collecting client waits its turn. 0 = off (the default; the key is
  // then absent from to_json(), as in the model files that predate it).
  double response_handoff_ns = 0;
  // Faults injected into the run (sim/faults.hpp); absent from to_json() when empty.
  std::vector<Fault> faults;

  static Model defaults() { return Model{}; }
  static Model from_json(const nlohmann::json& j, const std::string& where);
  static Model load_file(const std::string& path);  // errors name the file and the key
  nlohmann::json to_json() const;
};

}  // namespace bkv::sim
