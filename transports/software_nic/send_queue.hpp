// Send-queue slot accounting of one RC queue pair, shared by every software transport
// (instant and wall-clock loopback, UCX, and the discrete-event NIC model), and the work
// request each of them keeps per WQE.
//
// Rule (verbs): a WQE holds its send-queue slot from post until the user polls the
// completion of that WQE or of a later WQE on the same queue pair. Only signalled WQEs
// and failed ones produce a completion, so polling a signalled completion frees this
// slot and all before it, and a user that never signals fills the send queue and gets
// PostResult::kSendQueueFull.
//
// WQEs are numbered by a sequence number (0, 1, 2, ... in post order); the two counters:
//
//   freed <= posted <= freed + depth
//   [ free again | occupied: posted, not yet freed by a polled completion | free ]
//            freed                                                 posted
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>

#include "core/transport.hpp"

namespace bkv::software_nic {

// What a posted send work request asks for, as one of the post verbs gave it: the one
// description every software queue pair (and the discrete-event NIC model) keeps per
// WQE, extended with what each tracks of it afterwards. Its default member initializers
// make it a non-POD for layout, so a derived WQE packs its first small fields into this
// one's tail padding.
struct WorkRequest {
  std::byte* local = nullptr;  // WRITE source or READ destination
  uint64_t wr_id = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t lkey = 0;
  uint32_t length = 0;
  uint32_t imm = 0;
  WcOpcode opcode = WcOpcode::kRdmaWrite;
  bool signaled = false;
};

// The work request one of PostVerbs' verbs describes (software_nic/post_verbs.hpp).
inline WorkRequest make_work_request(WcOpcode op, const void* local, uint32_t len, uint32_t lkey, RemoteBuffer remote,
                                     uint32_t imm, uint64_t wr_id, bool signaled) noexcept {
  return WorkRequest{static_cast<std::byte*>(const_cast<void*>(local)), wr_id, remote.addr, remote.rkey, lkey, len, imm,
                     op, signaled};
}

// A posted send work request as a software queue pair keeps it in its send-queue ring
// (indexed by sequence number): what was posted, and how it ended.
struct SendWqe : WorkRequest {
  bool done = false;  // its completion may be queued
  WcStatus status = WcStatus::kSuccess;
};

class SendQueueSlots {
 public:
  SendQueueSlots() = default;  // depth 0: every post finds the queue full
  explicit SendQueueSlots(uint32_t depth) noexcept : depth_(depth) {}

  uint32_t depth() const noexcept { return depth_; }
  // Sequence number the next posted WQE gets (= WQEs posted so far).
  uint64_t posted() const noexcept { return posted_; }
  // Every WQE below this sequence number has released its slot.
  uint64_t freed() const noexcept { return freed_; }
  uint32_t free_slots() const noexcept { return depth_ - static_cast<uint32_t>(posted_ - freed_); }
  bool full() const noexcept { return posted_ - freed_ >= depth_; }

  // Takes the slot of a new WQE and returns its sequence number. The caller checked
  // full() (and answers kSendQueueFull instead).
  uint64_t take() noexcept {
    assert(!full());
    return posted_++;
  }
  // A completion of WQE `seq` was polled: its slot and every earlier one are free.
  // Completions of one queue pair come in order, but an older one may be polled after a
  // newer one's effect (several CQ entries of one QP): the counter only moves forward.
  void free_through(uint64_t seq) noexcept {
    assert(seq < posted_);
    if (seq + 1 > freed_) freed_ = seq + 1;
    assert(freed_ <= posted_ && posted_ - freed_ <= depth_);
  }

 private:
  uint32_t depth_ = 0;
  uint64_t posted_ = 0;
  uint64_t freed_ = 0;
};

}  // namespace bkv::software_nic
