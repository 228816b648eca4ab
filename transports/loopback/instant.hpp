// Instant loopback transport: several "nodes" in one thread, each an InstantTransport,
// sharing one InstantFabric. A work request takes effect when its queue pair's doorbell
// is rung (a NIC sees nothing before the doorbell, so a missing doorbell shows up as a
// hang in tests rather than being papered over). No time passes.
//
// What it models faithfully, because copyrpc depends on it:
//  - RC order per queue pair; WRITE data lands before its receive completion is visible;
//  - a WRITE-with-immediate consumes one receive from the target's shared receive queue;
//    with none posted the write waits (receiver-not-ready) until receives are posted;
//  - send-queue slots: an unsignaled WQE's slot is freed only when the completion of a
//    later signaled WQE on the same QP is polled, so a user that never signals runs
//    the send queue full and gets kSendQueueFull;
//  - rkey/lkey/bounds/permission checks (memory_table.hpp) with error completions, which
//    are generated even for unsignaled requests, and the QP moves to the error state
//    (later requests complete with kWrFlushError).
#pragma once

#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/transport.hpp"
#include "transports/loopback/memory_table.hpp"

namespace bkv::loopback {

class InstantTransport;

class InstantFabric {
 public:
  MemoryTable& memory() noexcept { return memory_; }

 private:
  friend class InstantTransport;
  struct QpEntry {
    InstantTransport* owner;
    void* qp;
  };
  MemoryTable memory_;
  std::vector<InstantTransport*> nodes_;
  std::vector<QpEntry> qps_;  // index = qpn - 1
};

class InstantTransport {
 public:
  using Meter = NullMeter;
  struct ConnectInfo {
    uint32_t node;
    uint32_t qpn;
  };
  static_assert(sizeof(ConnectInfo) == 8);

  static constexpr uint32_t kDefaultSendQueueDepth = 256;

  class QueuePair {
   public:
    uint32_t qp_num() const noexcept { return qpn_; }
    ConnectInfo local_info() const noexcept { return ConnectInfo{owner_->node_id_, qpn_}; }
    void connect(const ConnectInfo& remote) {
      auto& qps = owner_->fabric_.qps_;
      if (remote.qpn == 0 || remote.qpn > qps.size() || qps[remote.qpn - 1].owner->node_id_ != remote.node)
        throw std::invalid_argument("InstantTransport: connect to unknown queue pair " + std::to_string(remote.qpn));
      peer_qpn_ = remote.qpn;
    }
    PostResult post_write_imm(const void* src, uint32_t len, uint32_t lkey, RemoteBuffer dst, uint32_t imm,
                              uint64_t wr_id, bool signaled) {
      return post(Wqe{WcOpcode::kRdmaWriteImm, const_cast<void*>(src), len, lkey, dst, imm, wr_id, signaled, 0});
    }
    PostResult post_write(const void* src, uint32_t len, uint32_t lkey, RemoteBuffer dst, uint64_t wr_id,
                          bool signaled) {
      return post(Wqe{WcOpcode::kRdmaWrite, const_cast<void*>(src), len, lkey, dst, 0, wr_id, signaled, 0});
    }
    PostResult post_read(void* dst, uint32_t len, uint32_t lkey, RemoteBuffer src, uint64_t wr_id, bool signaled) {
      return post(Wqe{WcOpcode::kRdmaRead, dst, len, lkey, src, 0, wr_id, signaled, 0});
    }
    void ring_doorbell() {
      ++doorbells_;
      // Move to a local list first: executing a request may post receives elsewhere
      // but never posts on this QP, so the list cannot change under us.
      for (const Wqe& w : posted_) owner_->execute(*this, w);
      posted_.clear();
    }
    uint32_t send_queue_free() const noexcept {
      const uint64_t used = next_seq_ - retired_seq_;
      return used >= depth_ ? 0 : static_cast<uint32_t>(depth_ - used);
    }
    bool in_error() const noexcept { return error_; }
    uint64_t doorbells() const noexcept { return doorbells_; }

   private:
    friend class InstantTransport;
    struct Wqe {
      WcOpcode op;
      void* local;
      uint32_t len;
      uint32_t lkey;
      RemoteBuffer remote;
      uint32_t imm;
      uint64_t wr_id;
      bool signaled;
      uint64_t seq;
    };
    PostResult post(Wqe w) {
      if (send_queue_free() == 0) return PostResult::kSendQueueFull;
      w.seq = next_seq_++;
      posted_.push_back(w);
      return PostResult::kOk;
    }
    InstantTransport* owner_ = nullptr;
    uint32_t qpn_ = 0;
    uint32_t peer_qpn_ = 0;
    uint32_t depth_ = kDefaultSendQueueDepth;
    uint64_t next_seq_ = 0;
    uint64_t retired_seq_ = 0;
    uint64_t doorbells_ = 0;
    bool error_ = false;
    std::vector<Wqe> posted_;
  };

  explicit InstantTransport(InstantFabric& fabric, uint32_t srq_capacity = 4096,
                            uint32_t send_queue_depth = kDefaultSendQueueDepth)
      : fabric_(fabric), srq_capacity_(srq_capacity), sq_depth_(send_queue_depth) {
    node_id_ = static_cast<uint32_t>(fabric_.nodes_.size());
    fabric_.nodes_.push_back(this);
  }
  InstantTransport(const InstantTransport&) = delete;
  InstantTransport& operator=(const InstantTransport&) = delete;

  MemoryRegion register_memory(void* ptr, size_t len, uint32_t access) {
    return fabric_.memory_.register_memory(ptr, len, access, node_id_);
  }

  QueuePair& create_queue_pair() {
    auto qp = std::make_unique<QueuePair>();
    qp->owner_ = this;
    qp->depth_ = sq_depth_;
    fabric_.qps_.push_back({this, qp.get()});
    qp->qpn_ = static_cast<uint32_t>(fabric_.qps_.size());
    qps_.push_back(std::move(qp));
    return *qps_.back();
  }

  template <class F>
  uint32_t poll_recv(F&& cb, uint32_t max) {
    uint32_t n = 0;
    while (n < max && !recv_cq_.empty()) {
      const RecvCompletion c = recv_cq_.front();
      recv_cq_.pop_front();
      cb(c);
      ++n;
    }
    return n;
  }

  template <class F>
  uint32_t poll_send(F&& cb, uint32_t max) {
    uint32_t n = 0;
    while (n < max && !send_cq_.empty()) {
      const Completion c = send_cq_.front();
      send_cq_.pop_front();
      // Polling a completion frees its WQE's slot and every earlier one on the QP.
      QueuePair& qp = qp_by_num(c.wc.qp_num);
      if (c.seq + 1 > qp.retired_seq_) qp.retired_seq_ = c.seq + 1;
      cb(c.wc);
      ++n;
    }
    return n;
  }

  void post_receives(uint32_t n) {
    if (uint64_t{srq_posted_} + n > srq_capacity_)
      throw std::logic_error("InstantTransport: posting more receives than the SRQ holds");
    srq_posted_ += n;
    // Receiver-not-ready writes waiting for a receive now complete, in order.
    while (srq_posted_ > 0 && !rnr_waiting_.empty()) {
      const RecvCompletion c = rnr_waiting_.front();
      rnr_waiting_.pop_front();
      --srq_posted_;
      recv_cq_.push_back(c);
    }
  }
  uint32_t srq_capacity() const noexcept { return srq_capacity_; }
  uint32_t srq_posted() const noexcept { return srq_posted_; }
  uint32_t send_queue_depth() const noexcept { return sq_depth_; }
  Meter& meter() noexcept { return meter_; }
  uint32_t node_id() const noexcept { return node_id_; }
  size_t rnr_waiting() const noexcept { return rnr_waiting_.size(); }

 private:
  struct Completion {
    SendCompletion wc;
    uint64_t seq;
  };

  QueuePair& qp_by_num(uint32_t qpn) {
    return *static_cast<QueuePair*>(fabric_.qps_.at(qpn - 1).qp);
  }

  void complete(QueuePair& qp, const QueuePair::Wqe& w, WcStatus st) {
    if (st != WcStatus::kSuccess) qp.error_ = true;
    if (w.signaled || st != WcStatus::kSuccess) send_cq_.push_back({{qp.qpn_, w.wr_id, w.op, st}, w.seq});
  }

  void execute(QueuePair& qp, const QueuePair::Wqe& w) {
    if (qp.error_ || qp.peer_qpn_ == 0) return complete(qp, w, WcStatus::kWrFlushError);
    const MemoryTable& mem = fabric_.memory_;
    const bool is_read = w.op == WcOpcode::kRdmaRead;
    std::byte* local = mem.check_local(w.local, w.len, w.lkey, /*needs_write=*/is_read);
    if (local == nullptr && w.len > 0) return complete(qp, w, WcStatus::kLocalProtectionError);
    InstantTransport& target = *fabric_.qps_[qp.peer_qpn_ - 1].owner;
    const uint32_t need = is_read ? kAccessRemoteRead : kAccessRemoteWrite;
    // A zero-length request touches no memory, so no key is checked (as on a real NIC).
    std::byte* remote = nullptr;
    if (w.len > 0) {
      remote = mem.check_remote(w.remote.addr, w.len, w.remote.rkey, need);
      if (remote == nullptr || mem.lookup(w.remote.rkey)->owner != target.node_id_)
        return complete(qp, w, WcStatus::kRemoteAccessError);
    }
    if (is_read) {
      if (w.len) std::memcpy(local, remote, w.len);
    } else {
      if (w.len) std::memcpy(remote, local, w.len);
      if (w.op == WcOpcode::kRdmaWriteImm) target.deliver(RecvCompletion{qp.peer_qpn_, w.imm, w.len, WcStatus::kSuccess});
    }
    complete(qp, w, WcStatus::kSuccess);
  }

  void deliver(const RecvCompletion& c) {
    if (srq_posted_ == 0 || !rnr_waiting_.empty()) {
      rnr_waiting_.push_back(c);
      return;
    }
    --srq_posted_;
    recv_cq_.push_back(c);
  }

  InstantFabric& fabric_;
  uint32_t node_id_ = 0;
  uint32_t srq_capacity_;
  uint32_t sq_depth_;
  uint32_t srq_posted_ = 0;
  Meter meter_;
  std::vector<std::unique_ptr<QueuePair>> qps_;
  std::deque<RecvCompletion> recv_cq_;
  std::deque<Completion> send_cq_;
  std::deque<RecvCompletion> rnr_waiting_;
};

static_assert(Transport<InstantTransport>);

}  // namespace bkv::loopback
