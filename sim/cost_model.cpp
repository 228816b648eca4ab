#include "sim/cost_model.hpp"

#include <cstring>
#include <limits>

#include "sim/json_fields.hpp"
#include "sim/nic_config.hpp"

namespace bkv::sim {

int op_index(const std::string& name) noexcept {
  for (size_t i = 0; i < kOpCount; ++i)
    if (name == kOpNames[i]) return static_cast<int>(i);
  return -1;
}

CostModel CostModel::defaults() {
  CostModel m;
  // One event-loop iteration: loop head, stop flag load, a few well-predicted branches
  // and calls into the phases: ~30-40 cycles at 3 GHz. (Also the minimum step length.)
  m[Op::kLoop] = 10;
  // Polling a CQ that has nothing new: one load of the owner byte of the next CQE, an
  // L1/L2 hit while the NIC has not written the line: a few ns.
  m[Op::kCqPoll] = 8;
  // Handling one CQE: the line was written by the NIC (DDIO puts it in the LLC), so an
  // LLC hit on the mesh (~20-30 ns) plus decoding opcode/qpn/imm and the QPN lookup.
  m[Op::kCqe] = 30;
  // Parsing one copyrpc message: header loads from the receive ring (DMA'd into the LLC,
  // mostly prefetched after the first line), bounds checks, dispatch.
  m[Op::kMsgParse] = 20;
  // Encoding a request/response into the send ring: a 12-byte header + small payload
  // store into a hot line, credit arithmetic.
  m[Op::kCallEncode] = 20;
  m[Op::kReplyEncode] = 15;
  // Building one WRITE+IMM WQE (ctrl + raddr + data segments, 64 B, in a hot SQ line):
  // together with the doorbell below this is the measured 56.4 ns per posted WRITE+IMM
  // (docs/calibration.md §C4).
  m[Op::kFlush] = 20;
  // Doorbell record store + the BlueFlame write-combining MMIO copy and its fence:
  // the MMIO store drains through the write-combining buffer (~30-40 ns of core time).
  m[Op::kDoorbell] = 36;
  // One KV operation on a 1024-key store that stays in L1/L2 (relaxed atomic u64).
  m[Op::kKvOp] = 12;
  // One shared-memory ring operation between cores: the slot's cache line moves between
  // cores over the mesh (~60-80 ns core-to-core on a 32-core Xeon); half of that is
  // hidden on average by the pipelined request/response slot use.
  m[Op::kRingOp] = 40;
  // One inter-daemon (flux) channel operation: same cross-core line transfer.
  m[Op::kChannelOp] = 40;
  // Client side: draw the next (rank, key, op) of the pre-generated pattern, fill the
  // request, account one response.
  m[Op::kClientRequest] = 30;
  // fetch_add on the delegation ring's head: one RMW on a line every client writes. The
  // cost here is the line's ownership transfer (~70-100 ns core to core on the mesh,
  // more across sockets); the simulator can make it a serialized resource per node
  // (SimThread::bind_shared), so 46 producers queue for the line as they do in hardware.
  m[Op::kRingReserve] = 80;
  // Checking one client's ipc request ring: a load of a line the client writes. Unchanged
  // lines hit the daemon's L2 (~5 ns); the scan over every client is what makes an empty
  // daemon loop cost hundreds of ns with dozens of clients.
  m[Op::kPollSlot] = 8;
  return m;
}

CostModel CostModel::from_json(const nlohmann::json& j, const std::string& path) {
  using json_detail::fail;
  CostModel m = defaults();
  json_detail::ObjectReader r(j, path);
  for (size_t i = 0; i < kOpCount; ++i) m.ns[i] = r.number(kOpNames[i], m.ns[i], 0.0, kMaxModelNs);
  if (const nlohmann::json* jj = r.get("jitter"); jj != nullptr && !jj->is_null()) {
    const std::string jpath = r.path_of("jitter");
    json_detail::ObjectReader jr(*jj, jpath);
    const std::string mode = jr.string("mode", "");
    if (mode == "relative") {
      m.jitter.mode = JitterMode::kRelative;
    } else if (mode == "absolute") {
      m.jitter.mode = JitterMode::kAbsolute;
    } else if (mode == "none") {
      m.jitter.mode = JitterMode::kNone;
    } else {
      fail(jr.path_of("mode"), mode.empty() ? "missing (relative, absolute or none)"
                                            : "must be relative, absolute or none (got '" + mode + "')");
    }
    if (m.jitter.mode != JitterMode::kNone) {
      const nlohmann::json* dj = jr.get("distribution");
      if (dj == nullptr) fail(jr.path_of("distribution"), "missing");
      m.jitter.dist = distribution_from_json(*dj, jr.path_of("distribution"),
                                             m.jitter.mode == JitterMode::kRelative ? -1.0 : 0.0);
    }
    jr.finish();
  }
  r.finish();
  return m;
}

nlohmann::json CostModel::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < kOpCount; ++i) j[kOpNames[i]] = ns[i];
  if (jitter.mode != JitterMode::kNone) {
    j["jitter"] = {{"mode", jitter.mode == JitterMode::kRelative ? "relative" : "absolute"},
                   {"distribution", distribution_to_json(jitter.dist)}};
  }
  return j;
}

}  // namespace bkv::sim
