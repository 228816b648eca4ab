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

// What one hold of the answer handoff stands for (Model::response_handoff_unit).
//  kAnswer  every answer a client collects is one transfer (the element as first built);
//  kVisit   the answers a client collects from one response area in one step (the lines
//           one daemon wrote into that client's ipc ring, or into its delegation response
//           slots, since the client's last look) are one transfer: the daemon writes them
//           back to back and the client reads them back to back, so their line transfers
//           overlap (several outstanding ownership requests / misses between the same two
//           cores) and cost about one transfer's latency. Every answer has a line of its
//           own in both layouts (core/shm/stamped_ring.hpp, core/shm/delegationrpc.hpp),
//           so counting distinct lines would count answers: the amortization C4's ipc
//           figures show (docs/log/2026-11-24-bistability-first-round.md §8) can only
//           come from overlap per visit.
enum class HandoffUnit : uint8_t { kAnswer = 0, kVisit };

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
  // Answer handoff (docs/bistability.md §3; its history in
  // docs/log/2026-11-24-bistability-first-round.md §8): every answer a daemon's core
  // writes into a line a client of its node polls (ipc response, delegation response
  // slot) reaches the client through one node-wide serial stage held this long per
  // answer; the collecting client waits its turn. 0 = off (the code's default; the key
  // is then absent from to_json(); configs/model/c1.json sets 140).
  double response_handoff_ns = 0;
  // The unit the stage is held per (HandoffUnit). Key "response_handoff_unit": "answer"
  // (the default; absent from to_json() then) or "visit"; only with response_handoff_ns > 0.
  HandoffUnit response_handoff_unit = HandoffUnit::kAnswer;
  // Faults injected into the run (sim/faults.hpp); absent from to_json() when empty.
  std::vector<Fault> faults;
  // The responders' duplicate detection (sim/nic_model.hpp, "Faults"): a resent request
  // the responder executed already is not executed again. Key "psn_duplicate_detection";
  // false is a planted bug (the exactly-once oracle must catch it), absent from
  // to_json() when true.
  bool psn_duplicate_detection = true;

  static Model defaults() { return Model{}; }
  static Model from_json(const nlohmann::json& j, const std::string& where);
  static Model load_file(const std::string& path);  // errors name the file and the key
  nlohmann::json to_json() const;
};

}  // namespace bkv::sim
