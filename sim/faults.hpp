// Faults injected into a simulated run (docs/reliability.md, "Fault injection"): a layer
// over the simulator that changes when threads run and how long packets fly, never what
// the code under test does. Each fault has a window of virtual time [start_us, end_us).
//
//   slow_node     node R: every step of its threads (daemons and clients) that starts in
//                 the window takes `factor` times its charged CPU time (the extra time is
//                 added at the end of the step: what the step posted carries the
//                 timestamps of the normal speed)
//   stall_daemon  daemon D of node R does not run in the window: a step due in it waits
//                 until end_us (the thread is busy for the stall)
//   link_delay    packets node R sends to node S (data, acks, read responses) that leave
//                 in the window fly `extra_ns` longer one way
//
// JSON (the model's "faults", an array): {"kind": "slow_node", "node": 1, "start_us": 100,
// "end_us": 300, "factor": 4}; {"kind": "stall_daemon", "node": 0, "daemon": 0, ...};
// {"kind": "link_delay", "from": 0, "to": 1, ..., "extra_ns": 5000}. Command line
// (--fault, repeatable): "slow_node:node=1,start_us=100,end_us=300,factor=4", the same
// keys. Every key is required, none other is allowed; errors name the fault and the key.
// Nodes and daemons are checked against the run's shape by check_shape().
//
// Faults are explicit, so a run with faults is as deterministic as one without: the same
// configuration, seed and faults give the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/engine.hpp"

namespace bkv::sim {

enum class FaultKind : uint8_t { kSlowNode = 0, kStallDaemon, kLinkDelay };

constexpr const char* to_string(FaultKind k) noexcept {
  switch (k) {
    case FaultKind::kSlowNode: return "slow_node";
    case FaultKind::kStallDaemon: return "stall_daemon";
    case FaultKind::kLinkDelay: return "link_delay";
  }
  return "unknown";
}

struct Fault {
  FaultKind kind = FaultKind::kSlowNode;
  uint32_t node = 0;      // slow_node, stall_daemon: the node; link_delay: the sender
  uint32_t daemon = 0;    // stall_daemon
  uint32_t to_node = 0;   // link_delay: the receiver
  double start_us = 0;
  double end_us = 0;
  double factor = 1;      // slow_node: >= 1
  double extra_ns = 0;    // link_delay: >= 0

  Time start_ns() const noexcept;
  Time end_ns() const noexcept;
  bool active(Time t) const noexcept { return t >= start_ns() && t < end_ns(); }

  static Fault from_json(const nlohmann::json& j, const std::string& where);
  // "kind:key=value,..." (the --fault syntax).
  static Fault parse(const std::string& text);
  nlohmann::json to_json() const;
};

// Largest window end accepted (an hour of virtual time): keeps every time exact in ns.
inline constexpr double kMaxFaultTimeUs = 3.6e9;

std::vector<Fault> faults_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json faults_to_json(const std::vector<Fault>& faults);
// Throws std::runtime_error naming the fault when a node or daemon is outside the run.
void check_shape(const std::vector<Fault>& faults, uint32_t nodes, uint32_t daemons);

}  // namespace bkv::sim
