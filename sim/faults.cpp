#include "sim/faults.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace bkv::sim {

namespace {

// The keys of each kind, besides "kind".
std::vector<std::string> keys_of(FaultKind k) {
  switch (k) {
    case FaultKind::kSlowNode: return {"node", "start_us", "end_us", "factor"};
    case FaultKind::kStallDaemon: return {"node", "daemon", "start_us", "end_us"};
    case FaultKind::kLinkDelay: return {"from", "to", "start_us", "end_us", "extra_ns"};
    case FaultKind::kPacketLoss: return {"from", "to", "start_us", "end_us", "loss", "timeout", "retry_cnt"};
    case FaultKind::kQpError: return {"node", "peer", "at_us"};
    case FaultKind::kRnrStorm: return {"node", "start_us", "end_us", "rnr_retry"};
  }
  return {};
}

FaultKind kind_of(const std::string& name, const std::string& where) {
  for (FaultKind k : {FaultKind::kSlowNode, FaultKind::kStallDaemon, FaultKind::kLinkDelay, FaultKind::kPacketLoss,
                      FaultKind::kQpError, FaultKind::kRnrStorm})
    if (name == to_string(k)) return k;
  throw std::runtime_error(where + ".kind: unknown fault kind \"" + name +
                           "\" (expected slow_node, stall_daemon, link_delay, packet_loss, qp_error, rnr_storm)");
}

std::string joined(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k;
  return s;
}

// Sets one key of `f` from a number; `where` names the fault.
void set_key(Fault& f, const std::string& key, double v, const std::string& where) {
  const std::string at = where + "." + key;
  if (!std::isfinite(v)) throw std::runtime_error(at + ": must be a finite number");
  auto index = [&]() -> uint32_t {
    if (v < 0 || v != std::floor(v) || v > 1e6) throw std::runtime_error(at + ": must be an integer in [0, 1000000]");
    return static_cast<uint32_t>(v);
  };
  auto integer_in = [&](uint32_t lo, uint32_t hi) -> uint32_t {
    if (v < lo || v > hi || v != std::floor(v))
      throw std::runtime_error(at + ": must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<uint32_t>(v);
  };
  if (key == "node" || key == "from") f.node = index();
  else if (key == "daemon") f.daemon = index();
  else if (key == "to" || key == "peer") f.to_node = index();
  else if (key == "start_us" || key == "end_us" || key == "at_us") {
    if (v < 0 || v > kMaxFaultTimeUs) throw std::runtime_error(at + ": must be in [0, 3.6e9] microseconds");
    if (key != "end_us") f.start_us = v;
    if (key != "start_us") f.end_us = v;
  } else if (key == "loss") {
    if (!(v > 0 && v <= 1)) throw std::runtime_error(at + ": must be a probability in (0, 1]");
    f.loss = v;
  } else if (key == "timeout") {
    f.timeout = integer_in(kMinAckTimeout, kMaxAckTimeout);  // 0 (no timeout) would never retransmit
  } else if (key == "retry_cnt") {
    f.retry_cnt = integer_in(0, kMaxRetryCount);
  } else if (key == "rnr_retry") {
    f.rnr_retry = integer_in(0, kRnrRetryForever);
  } else if (key == "factor") {
    if (v < 1 || v > 1000) throw std::runtime_error(at + ": must be in [1, 1000]");
    f.factor = v;
  } else if (key == "extra_ns") {
    if (v < 0 || v > 1e9) throw std::runtime_error(at + ": must be in [0, 1e9] nanoseconds");
    f.extra_ns = v;
  }
}

void check_window(const Fault& f, const std::string& where) {
  if (f.kind == FaultKind::kQpError) return;  // an instant (at_us), not a window
  if (!(f.end_us > f.start_us)) throw std::runtime_error(where + ".end_us: must be greater than start_us");
}

}  // namespace

Time Fault::start_ns() const noexcept { return static_cast<Time>(std::llround(start_us * 1000.0)); }
Time Fault::end_ns() const noexcept { return static_cast<Time>(std::llround(end_us * 1000.0)); }

Fault Fault::from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw std::runtime_error(where + ": a fault must be a JSON object");
  const auto kit = j.find("kind");
  if (kit == j.end()) throw std::runtime_error(where + ": missing key \"kind\"");
  if (!kit->is_string()) throw std::runtime_error(where + ".kind: must be a string");
  Fault f;
  f.kind = kind_of(kit->get<std::string>(), where);
  const std::vector<std::string> keys = keys_of(f.kind);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "kind") continue;
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end())
      throw std::runtime_error(where + ": unknown key \"" + it.key() + "\" for a " + to_string(f.kind) +
                               " fault (expected kind, " + joined(keys) + ")");
    if (!it.value().is_number()) throw std::runtime_error(where + "." + it.key() + ": must be a number");
    set_key(f, it.key(), it.value().get<double>(), where);
  }
  for (const auto& k : keys)
    if (!j.contains(k)) throw std::runtime_error(where + ": missing key \"" + k + "\"");
  check_window(f, where);
  return f;
}

Fault Fault::parse(const std::string& text) {
  const std::string where = "--fault \"" + text + "\"";
  const size_t colon = text.find(':');
  if (colon == std::string::npos)
    throw std::runtime_error(where + ": expected KIND:KEY=VALUE,... (e.g. slow_node:node=1,start_us=100,end_us=300,factor=4)");
  nlohmann::json j = nlohmann::json::object();
  j["kind"] = text.substr(0, colon);
  std::string rest = text.substr(colon + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    const size_t comma = std::min(rest.find(',', pos), rest.size());
    const std::string item = rest.substr(pos, comma - pos);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw std::runtime_error(where + ": \"" + item + "\" is not KEY=VALUE");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (j.contains(key)) throw std::runtime_error(where + ": key \"" + key + "\" given twice");
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (value.empty() || used != value.size())
      throw std::runtime_error(where + "." + key + ": \"" + value + "\" is not a number");
    j[key] = v;
    pos = comma + 1;
  }
  return from_json(j, where);
}

nlohmann::json Fault::to_json() const {
  nlohmann::json j = {{"kind", to_string(kind)}};
  switch (kind) {
    case FaultKind::kSlowNode:
    case FaultKind::kRnrStorm: j["node"] = node; break;
    case FaultKind::kStallDaemon: j["node"] = node; j["daemon"] = daemon; break;
    case FaultKind::kLinkDelay:
    case FaultKind::kPacketLoss: j["from"] = node; j["to"] = to_node; break;
    case FaultKind::kQpError: j["node"] = node; j["peer"] = to_node; break;
  }
  if (kind == FaultKind::kQpError) {
    j["at_us"] = start_us;
    return j;
  }
  j["start_us"] = start_us;
  j["end_us"] = end_us;
  if (kind == FaultKind::kSlowNode) j["factor"] = factor;
  if (kind == FaultKind::kLinkDelay) j["extra_ns"] = extra_ns;
  if (kind == FaultKind::kRnrStorm) j["rnr_retry"] = rnr_retry;
  if (kind == FaultKind::kPacketLoss) {
    j["loss"] = loss;
    j["timeout"] = timeout;
    j["retry_cnt"] = retry_cnt;
  }
  return j;
}

std::vector<Fault> faults_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) throw std::runtime_error(where + ": must be an array of faults");
  std::vector<Fault> out;
  for (size_t i = 0; i < j.size(); ++i) out.push_back(Fault::from_json(j[i], where + "[" + std::to_string(i) + "]"));
  return out;
}

nlohmann::json faults_to_json(const std::vector<Fault>& faults) {
  nlohmann::json a = nlohmann::json::array();
  for (const Fault& f : faults) a.push_back(f.to_json());
  return a;
}

void check_shape(const std::vector<Fault>& faults, uint32_t nodes, uint32_t daemons) {
  for (size_t i = 0; i < faults.size(); ++i) {
    const Fault& f = faults[i];
    const std::string where = "fault " + std::to_string(i) + " (" + to_string(f.kind) + ")";
    const bool link = f.kind == FaultKind::kLinkDelay || f.kind == FaultKind::kPacketLoss;
    const char* node_key = link ? "from" : "node";
    const char* to_key = link ? "to" : "peer";
    if (f.node >= nodes)
      throw std::runtime_error(where + "." + node_key + ": node " + std::to_string(f.node) + " but the run has " +
                               std::to_string(nodes) + " nodes");
    if ((link || f.kind == FaultKind::kQpError) && f.to_node >= nodes)
      throw std::runtime_error(where + "." + to_key + ": node " + std::to_string(f.to_node) + " but the run has " +
                               std::to_string(nodes) + " nodes");
    if ((f.kind == FaultKind::kPacketLoss || f.kind == FaultKind::kQpError) && f.to_node == f.node)
      throw std::runtime_error(where + "." + to_key + ": node " + std::to_string(f.to_node) + " is the fault's own node (no " +
                               "connection joins a node to itself)");
    if (f.kind == FaultKind::kStallDaemon && f.daemon >= daemons)
      throw std::runtime_error(where + ".daemon: daemon " + std::to_string(f.daemon) + " but the nodes have " +
                               std::to_string(daemons) + " daemons");
  }
}

void check_resend_reach(const std::vector<Fault>& faults, Time startup_ns, uint32_t runs, Time duration_ns) {
  const Time last_ns = startup_ns + runs * duration_ns + kDrainLimitNs;
  for (size_t i = 0; i < faults.size(); ++i) {
    const Fault& f = faults[i];
    if (f.kind != FaultKind::kPacketLoss) continue;
    const Time start = f.start_ns();
    if (start + ack_timeout_ns(f.timeout) < last_ns) continue;
    uint32_t best = 0;  // the largest exponent that still resends before last_ns
    for (uint32_t e = kMinAckTimeout; e <= kMaxAckTimeout; ++e)
      if (start + ack_timeout_ns(e) < last_ns) best = e;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%.9g s after it left (4.096 us x 2^%u), at %.9g s, not before the simulation's end at %.9g s "
                  "(start-up %.9g s, %u run%s x %.9g s, at most %.9g s of drain)",
                  double(ack_timeout_ns(f.timeout)) * 1e-9, f.timeout, double(start + ack_timeout_ns(f.timeout)) * 1e-9,
                  double(last_ns) * 1e-9, double(startup_ns) * 1e-9, runs, runs == 1 ? "" : "s",
                  double(duration_ns) * 1e-9, double(kDrainLimitNs) * 1e-9);
    std::string msg = "fault " + std::to_string(i) + " (packet_loss).timeout: " + std::to_string(f.timeout) +
                      " can never take effect: a packet lost at the window's start would be resent " + buf + "; ";
    msg += best == 0 ? "no timeout in [1, 31] resends one in time: start the window earlier or lengthen the run"
                     : "at most " + std::to_string(best) + " here";
    throw std::runtime_error(msg);
  }
}

}  // namespace bkv::sim
