// Faults injected into a simulated run (docs/exactly_once.md, "Fault injection"): a layer
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
//   packet_loss   request packets (WRITE, WRITE+IMM, READ request) node R sends to node S
//                 that leave in the window are lost with probability `loss`; the RC
//                 requester retransmits a lost one after its local ACK timeout,
//                 4.096 us x 2^timeout (IB spec: the QP's 5-bit Local ACK Timeout,
//                 0 = infinite, not accepted here), its later WQEs waiting behind it
//                 (go-back-N), at most retry_cnt times (the QP's 3-bit Retry Count, 0..7);
//                 one more loss completes the WQE with RETRY_EXC_ERR and puts the QP in
//                 the error state (its connection fails, below)
//   qp_error      at at_us, every QP of node R connected to node S goes to the error
//                 state (a fatal QP error): its connection fails
//   rnr_storm     node R's receive queue is treated as empty in the window (a receiver
//                 that stopped reposting receives): every WRITE+IMM landing on a QP of
//                 node R is RNR NAKed, and its requester resends it after the RNR timer
//                 (the NIC model's rnr.delay_ns, the responder's min_rnr_timer; it starts
//                 when the NAK is back, and the resend travels out again), the QP's
//                 later WQEs waiting behind it, at most rnr_retry times (the requester
//                 QP's 3-bit RNR Retry Count; 7 = retry forever); one more NAK completes
//                 the WQE with a retry-exceeded error when the NAK reaches the requester,
//                 and its connection fails (below). Plain WRITEs and READs need no
//                 receive and pass.
// A connection fails (sim/nic_model.hpp, Network::fail_connection): both QPs end in the
// error state, unfinished WQEs complete with flush errors, and each owner gets an error
// completion on its receive CQ, the peer's one wire latency later; copyrpc stops the
// endpoint and fails back its pending calls.
//
// JSON (the model's "faults", an array): {"kind": "slow_node", "node": 1, "start_us": 100,
// "end_us": 300, "factor": 4}; {"kind": "stall_daemon", "node": 0, "daemon": 0, ...};
// {"kind": "link_delay", "from": 0, "to": 1, ..., "extra_ns": 5000}; {"kind": "packet_loss",
// "from": 0, "to": 1, ..., "loss": 0.01, "timeout": 1, "retry_cnt": 7}; {"kind": "qp_error",
// "node": 0, "peer": 1, "at_us": 500}; {"kind": "rnr_storm", "node": 1, "start_us": 100,
// "end_us": 300, "rnr_retry": 7}. Command line
// (--fault, repeatable): "slow_node:node=1,start_us=100,end_us=300,factor=4", the same
// keys. Every key is required, none other is allowed; errors name the fault and the key.
// Nodes and daemons are checked against the run's shape by check_shape().
//
// Faults are explicit and packet losses are drawn from a stream of their own (seeded from
// the run's seed, drawn only for packets a packet_loss window covers), so a run with
// faults is as deterministic as one without: the same configuration, seed and faults
// give the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/engine.hpp"

namespace bkv::sim {

enum class FaultKind : uint8_t { kSlowNode = 0, kStallDaemon, kLinkDelay, kPacketLoss, kQpError, kRnrStorm };

constexpr const char* to_string(FaultKind k) noexcept {
  switch (k) {
    case FaultKind::kSlowNode: return "slow_node";
    case FaultKind::kStallDaemon: return "stall_daemon";
    case FaultKind::kLinkDelay: return "link_delay";
    case FaultKind::kPacketLoss: return "packet_loss";
    case FaultKind::kQpError: return "qp_error";
    case FaultKind::kRnrStorm: return "rnr_storm";
  }
  return "unknown";
}

// IB local ACK timeout: 4.096 us x 2^exponent (the QP attribute `timeout`, 5 bits; 0
// means no timeout, which would never retransmit).
inline constexpr Time kAckTimeoutUnitNs = 4096;
inline constexpr uint32_t kMinAckTimeout = 1, kMaxAckTimeout = 31;
inline constexpr uint32_t kMaxRetryCount = 7;  // the QP attribute `retry_cnt`, 3 bits
// The QP attribute `rnr_retry` (3 bits): RNR NAKs a WQE may get before it fails; the
// largest value means no limit (IB semantics).
inline constexpr uint32_t kRnrRetryForever = 7;
constexpr Time ack_timeout_ns(uint32_t exponent) noexcept { return kAckTimeoutUnitNs << exponent; }
static_assert(ack_timeout_ns(kMaxAckTimeout) == 4096ull * (1ull << 31));

struct Fault {
  FaultKind kind = FaultKind::kSlowNode;
  uint32_t node = 0;      // slow_node, stall_daemon, qp_error: the node; link_delay, packet_loss: the sender
  uint32_t daemon = 0;    // stall_daemon
  uint32_t to_node = 0;   // link_delay, packet_loss: the receiver; qp_error: the peer
  double start_us = 0;    // qp_error: at_us
  double end_us = 0;      // qp_error: at_us
  double factor = 1;      // slow_node: >= 1
  double extra_ns = 0;    // link_delay: >= 0
  double loss = 0;        // packet_loss: probability in (0, 1]
  uint32_t timeout = 0;   // packet_loss: local ACK timeout exponent, 1..31
  uint32_t retry_cnt = 0; // packet_loss: retransmissions before the error, 0..7
  uint32_t rnr_retry = 0; // rnr_storm: RNR NAKs a WQE may get, 0..7 (7: no limit)

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
// Throws std::runtime_error naming the fault when a node or daemon is outside the run, or
// a packet_loss / qp_error names one node twice (no connection joins a node to itself).
void check_shape(const std::vector<Fault>& faults, uint32_t nodes, uint32_t daemons);
// A simulated run's timeline (apps/benchkv/simulator/runner.hpp): a start-up, runs back
// to back, then a drain of at most kDrainLimitNs.
inline constexpr Time kDrainLimitNs = 1'000'000'000;  // 1 s of virtual time
// Throws std::runtime_error naming the fault and its `timeout` when a packet_loss's
// retransmission timeout cannot take effect: a packet lost at the window's start would be
// resent (start + 4.096 us x 2^timeout) no earlier than the simulation's last instant,
// startup_ns + runs x duration_ns + kDrainLimitNs, so no lost packet is ever resent.
void check_resend_reach(const std::vector<Fault>& faults, Time startup_ns, uint32_t runs, Time duration_ns);

}  // namespace bkv::sim
