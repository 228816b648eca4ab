// Memory protection and the responder of the software NIC: what a target NIC does with an
// inbound WRITE, WRITE_IMM or READ when it is that request's turn (keeping requests of
// one queue pair in RC order, and moving bytes across a wire, is the transport's part).
// Used by the instant and wall-clock loopback and UCX; the discrete-event NIC model uses
// the access checks and the SRQ, and spreads the rest over its pipeline stages in time.
//
// Rules, in the order a responder applies them:
//  1. a zero-length request touches no memory, so no key is checked (as on a real NIC);
//  2. the rkey must name a region registered on this node, the range must lie inside it
//     and the region must grant remote write (WRITE, WRITE_IMM) or remote read (READ);
//     otherwise the request fails with a remote access error and touches nothing;
//  3. a WRITE_IMM needs a posted SRQ receive; with none it does not execute at all
//     (receiver not ready: nothing lands, nothing is consumed, the requester retries and
//     the later requests of its queue pair wait behind it);
//  4. a WRITE's bytes are copied into the target range; a WRITE_IMM then consumes one
//     receive and queues a receive completion {queue pair, imm, length}.
// The requester side has the matching local rule: the lkey must name a region of the
// requester's node, the range must lie inside it, and a READ destination needs local
// write access; otherwise a local protection error.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/transport.hpp"
#include "transports/software_nic/completion_queue.hpp"
#include "transports/software_nic/memory_table.hpp"
#include "transports/software_nic/receive_queue.hpp"

namespace bkv::software_nic {

// The outcome of an access check: `ok`, and the host address of the range (nullptr for
// a zero-length request, which needs no memory).
struct Access {
  bool ok = false;
  std::byte* host = nullptr;
};

// Rules 1 and 2: the target range of a request arriving at `node`.
[[gnu::always_inline]] inline Access check_remote_access(const MemoryTable& memory, uint32_t node, WcOpcode op, uint64_t addr,
                                  uint32_t len, uint32_t rkey) noexcept {
  if (len == 0) return Access{true, nullptr};
  const uint32_t need = op == WcOpcode::kRdmaRead ? kAccessRemoteRead : kAccessRemoteWrite;
  std::byte* host = memory.check_remote_owned(addr, len, rkey, need, node);
  return Access{host != nullptr, host};
}

// The requester's local rule: the gather (WRITE) or scatter (READ) range on `node`.
[[gnu::always_inline]] inline Access check_local_access(const MemoryTable& memory, uint32_t node, WcOpcode op, const void* addr,
                                 uint32_t len, uint32_t lkey) noexcept {
  if (len == 0) return Access{true, nullptr};
  std::byte* host = memory.check_local_owned(addr, len, lkey, /*needs_write=*/op == WcOpcode::kRdmaRead, node);
  return Access{host != nullptr, host};
}

enum class ResponderStatus : uint8_t { kExecuted = 0, kRemoteAccessError, kReceiverNotReady };

// An inbound WRITE or WRITE_IMM as the responder sees it.
struct InboundWrite {
  WcOpcode op = WcOpcode::kRdmaWrite;  // kRdmaWrite or kRdmaWriteImm
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;
  uint32_t imm = 0;
};

// The responder of one node: its memory rules, its SRQ and its receive CQ.
class Responder {
 public:
  Responder(const MemoryTable& memory, uint32_t node, SharedReceiveQueue& srq,
            CompletionQueue<RecvCompletion>& recv_cq) noexcept
      : memory_(&memory), node_(node), srq_(&srq), recv_cq_(&recv_cq) {}

  // Rules 1-3 without side effects: where a WRITE would land, or why it cannot run now.
  [[gnu::always_inline]] ResponderStatus check_write(const InboundWrite& w, std::byte** target) const noexcept {
    assert(w.op == WcOpcode::kRdmaWrite || w.op == WcOpcode::kRdmaWriteImm);
    const Access a = check_remote_access(*memory_, node_, w.op, w.remote_addr, w.length, w.rkey);
    if (!a.ok) return ResponderStatus::kRemoteAccessError;
    if (w.op == WcOpcode::kRdmaWriteImm && srq_->empty()) return ResponderStatus::kReceiverNotReady;
    *target = a.host;
    return ResponderStatus::kExecuted;
  }

  // Rule 4 for a WRITE that passed check_write: the bytes land, then a WRITE_IMM takes
  // its receive and completes it on `qp_num` (the responder's queue pair).
  [[gnu::always_inline]] void land_write(uint32_t qp_num, const InboundWrite& w, std::byte* target, const std::byte* data) {
    if (w.length > 0) std::memcpy(target, data, w.length);
    if (w.op == WcOpcode::kRdmaWriteImm) {
      take_receive();
      complete_receive(qp_num, w);
    }
  }

  // Rules 1-4 in one step, for transports that hold the bytes when the request runs.
  // check_write, land_write and write run once per inbound WRITE: always inline.
  [[gnu::always_inline]] ResponderStatus write(uint32_t qp_num, const InboundWrite& w, const std::byte* data) {
    std::byte* target = nullptr;
    const ResponderStatus s = check_write(w, &target);
    if (s == ResponderStatus::kExecuted) land_write(qp_num, w, target, data);
    return s;
  }

  // Rule 4 split for a transport whose bytes land later (UCX rendezvous places them
  // straight into the target): the receive is taken when the request is accepted...
  void take_receive() noexcept { srq_->consume(); }
  // ... and the receive completion is queued once the bytes are there.
  [[gnu::always_inline]] void complete_receive(uint32_t qp_num, const InboundWrite& w) {
    recv_cq_->push(RecvCompletion{qp_num, w.imm, w.length, WcStatus::kSuccess});
  }

  // Rules 1-2 for a READ: the source range, whose bytes the transport returns.
  Access check_read(uint64_t remote_addr, uint32_t length, uint32_t rkey) const noexcept {
    return check_remote_access(*memory_, node_, WcOpcode::kRdmaRead, remote_addr, length, rkey);
  }

 private:
  const MemoryTable* memory_;
  uint32_t node_;
  SharedReceiveQueue* srq_;
  CompletionQueue<RecvCompletion>* recv_cq_;
};

}  // namespace bkv::software_nic
