// The portable verbs transport: the same Transport concept over plain ibverbs
// (ibv_post_send, ibv_poll_cq, ibv_post_srq_recv), for non-mlx5 NICs and SoftRoCE.
// The control path is shared with the direct mlx5 provider (verbs_common.hpp).
//
// Work requests are queued by post_*() and handed to ibv_post_send as one chained list
// by ring_doorbell() (one doorbell per batch, as on the direct path). Send-queue slots:
// an unsignaled request's slot is freed when the completion of a later signalled request
// of the same QP is polled, as on hardware (software_nic::SendQueueSlots keeps count). Light header: ibverbs types are forward-declared.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/transport.hpp"
#include "transports/mlx5/descriptors.hpp"
#include "transports/mlx5/device.hpp"
#include "transports/software_nic/send_queue.hpp"

struct ibv_qp;

namespace bkv::mlx5 {

struct VerbsOptions {
  uint32_t sq_depth = 256;
  uint32_t max_inline = 64;  // requests up to this size are sent with IBV_SEND_INLINE
  uint32_t srq_size = 4096;
  uint32_t recv_cq_entries = 0;  // 0: the SRQ size
  uint32_t send_cq_entries = 16384;
  uint8_t max_rd_atomic = 16;
};

class VerbsTransport {
 public:
  using Meter = NullMeter;
  using ConnectInfo = mlx5::ConnectInfo;

  class QueuePair {
   public:
    uint32_t qp_num() const noexcept { return qpn_; }
    ConnectInfo local_info() const;
    void connect(const ConnectInfo& remote);
    PostResult post_write_imm(const void* src, uint32_t len, uint32_t lkey, RemoteBuffer dst, uint32_t imm,
                              uint64_t wr_id, bool signaled) {
      return queue(Pending{kWriteImm, const_cast<void*>(src), len, lkey, dst.addr, dst.rkey, imm, wr_id, signaled});
    }
    PostResult post_write(const void* src, uint32_t len, uint32_t lkey, RemoteBuffer dst, uint64_t wr_id,
                          bool signaled) {
      return queue(Pending{kWrite, const_cast<void*>(src), len, lkey, dst.addr, dst.rkey, 0, wr_id, signaled});
    }
    PostResult post_read(void* dst, uint32_t len, uint32_t lkey, RemoteBuffer src, uint64_t wr_id, bool signaled) {
      return queue(Pending{kRead, dst, len, lkey, src.addr, src.rkey, 0, wr_id, signaled});
    }
    void ring_doorbell();
    uint32_t send_queue_free() const noexcept { return slots_.free_slots(); }
    bool in_error() const noexcept { return error_; }

   private:
    friend class VerbsTransport;
    enum Kind : uint8_t { kWrite = 0, kWriteImm, kRead };
    struct Pending {
      Kind kind;
      void* local;
      uint32_t len;
      uint32_t lkey;
      uint64_t raddr;
      uint32_t rkey;
      uint32_t imm;
      uint64_t wr_id;
      bool signaled;
    };
    struct Sent {  // what a completion needs to know about its request
      uint64_t wr_id;
      uint64_t seq;
      Kind kind;
    };
    PostResult queue(const Pending& p) {
      if (!connected_) throw std::logic_error("verbs: post on queue pair " + std::to_string(qpn_) + " before connect()");
      if (slots_.full()) return PostResult::kSendQueueFull;
      slots_.take();
      pending_.push_back(p);
      return PostResult::kOk;
    }

    VerbsTransport* owner_ = nullptr;
    ibv_qp* qp_ = nullptr;
    uint32_t qpn_ = 0;
    uint32_t index_ = 0;  // in the owner's QP list
    software_nic::SendQueueSlots slots_;  // requests accepted by post_*() and freed again
    uint64_t sent_seq_ = 0;               // requests handed to ibv_post_send
    bool connected_ = false;
    bool error_ = false;
    std::vector<Pending> pending_;
    std::vector<Sent> sent_;  // by sequence % depth
  };

  // Opens the verbs resources on `dev` (which must outlive the transport).
  explicit VerbsTransport(Device& dev, const VerbsOptions& opts = {});
  ~VerbsTransport();
  VerbsTransport(const VerbsTransport&) = delete;
  VerbsTransport& operator=(const VerbsTransport&) = delete;

  MemoryRegion register_memory(void* ptr, size_t len, uint32_t access);
  QueuePair& create_queue_pair();

  template <class F>
  uint32_t poll_recv(F&& cb, uint32_t max) {
    return poll_in_chunks<RecvCompletion>(&VerbsTransport::poll_recv_batch, cb, max);
  }
  template <class F>
  uint32_t poll_send(F&& cb, uint32_t max) {
    return poll_in_chunks<SendCompletion>(&VerbsTransport::poll_send_batch, cb, max);
  }
  void post_receives(uint32_t n);

  uint32_t srq_capacity() const noexcept { return srq_capacity_; }
  uint32_t srq_posted() const noexcept { return srq_posted_; }
  uint32_t send_queue_depth() const noexcept { return opts_.sq_depth; }
  Meter& meter() noexcept { return meter_; }

 private:
  static constexpr uint32_t kPollChunk = 32;
  uint32_t poll_recv_batch(RecvCompletion* out, uint32_t max);
  uint32_t poll_send_batch(SendCompletion* out, uint32_t max);
  // Up to `max` completions, a chunk at a time from `batch` (poll_recv_batch or
  // poll_send_batch), each passed to cb; stops at the first chunk that comes back short.
  template <class Completion, class F>
  uint32_t poll_in_chunks(uint32_t (VerbsTransport::*batch)(Completion*, uint32_t), F& cb, uint32_t max) {
    Completion buf[kPollChunk];
    uint32_t total = 0;
    while (total < max) {
      const uint32_t want = std::min<uint32_t>(kPollChunk, max - total);
      const uint32_t got = (this->*batch)(buf, want);
      for (uint32_t i = 0; i < got; ++i) cb(buf[i]);
      total += got;
      if (got < want) break;
    }
    return total;
  }

  struct Impl;
  std::unique_ptr<Impl> impl_;
  VerbsOptions opts_;
  uint32_t srq_capacity_ = 0;
  uint32_t srq_posted_ = 0;
  Meter meter_;
  std::deque<QueuePair> qps_;
};

static_assert(Transport<VerbsTransport>);

}  // namespace bkv::mlx5
