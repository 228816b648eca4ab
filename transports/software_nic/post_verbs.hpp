// The three post verbs of a software queue pair, written once: WRITE-with-immediate,
// WRITE and READ are one work request each, differing only in the opcode (and the
// immediate value, which only WRITE-with-immediate carries). A queue pair derives from
// PostVerbs<QueuePair> and provides the one private function
//   PostResult post(WcOpcode, const void* local, uint32_t len, uint32_t lkey,
//                   RemoteBuffer remote, uint32_t imm, uint64_t wr_id, bool signaled) noexcept
// (friend PostVerbs<QueuePair>), which queues the work request in post order
// (make_work_request in software_nic/send_queue.hpp describes it). The instant and
// wall-clock loopback, UCX and the discrete-event transport's queue pairs all do.
#pragma once

#include <cstdint>

#include "core/transport.hpp"

namespace bkv::software_nic {

template <class QP>
class PostVerbs {
 public:
  PostResult post_write_imm(const void* src, uint32_t len, uint32_t lkey, RemoteBuffer dst, uint32_t imm,
                            uint64_t wr_id, bool signaled) noexcept {
    return self().post(WcOpcode::kRdmaWriteImm, src, len, lkey, dst, imm, wr_id, signaled);
  }
  PostResult post_write(const void* src, uint32_t len, uint32_t lkey, RemoteBuffer dst, uint64_t wr_id,
                        bool signaled) noexcept {
    return self().post(WcOpcode::kRdmaWrite, src, len, lkey, dst, 0, wr_id, signaled);
  }
  // READ: `dst` is the local buffer the remote bytes land in.
  PostResult post_read(void* dst, uint32_t len, uint32_t lkey, RemoteBuffer src, uint64_t wr_id,
                       bool signaled) noexcept {
    return self().post(WcOpcode::kRdmaRead, dst, len, lkey, src, 0, wr_id, signaled);
  }

 private:
  QP& self() noexcept { return static_cast<QP&>(*this); }
};

}  // namespace bkv::software_nic
