// Instant loopback transport: several "nodes" in one thread, each an InstantTransport,
// sharing one InstantFabric. A work request takes effect when its queue pair's doorbell
// is rung (a NIC sees nothing before the doorbell, so a missing doorbell shows up as a
// hang in tests rather than being papered over). No time passes.
//
// The software NIC parts are shared with the other software transports
// (transports/software_nic/): completion queues and the poll loop, send-queue slot
// accounting, the SRQ, and the responder with its memory rules. What that gives here,
// because copyrpc depends on it:
//  - RC order per queue pair; WRITE data lands before its receive completion is visible;
//  - a WRITE-with-immediate consumes one receive from the target's shared receive queue;
//    with none posted it does not execute (receiver not ready) and the queue pair's
//    later requests wait behind it until the target posts receives;
//  - send-queue slots: an unsignaled WQE's slot is freed only when the completion of a
//    later signaled WQE on the same QP is polled, so a user that never signals runs
//    the send queue full and gets kSendQueueFull;
//  - rkey/lkey/bounds/permission/owner checks with error completions, which are
//    generated even for unsignaled requests, and the QP moves to the error state
//    (later requests complete with kWrFlushError); after a remote access error the
//    responder's queue pair, which NAKed it, is in the error state too (the reason is
//    at remote_access_error());
//  - a queue pair in the error state, or one not connected, discards inbound requests
//    as an RC QP does: nothing lands, no receive is taken, and the requester, which
//    hears nothing, completes the request with kRetryExceeded (at once: no time passes)
//    and enters the error state. A request waiting for a receive at a queue pair that
//    enters the error state meets the same end. Not RC: a queue pair connected to
//    another one still executes a stranger's requests (tests forge a peer that way).
#pragma once

#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/transport.hpp"
#include "transports/software_nic/completion_queue.hpp"
#include "transports/software_nic/memory_table.hpp"
#include "transports/software_nic/post_verbs.hpp"
#include "transports/software_nic/receive_queue.hpp"
#include "transports/software_nic/responder.hpp"
#include "transports/software_nic/send_queue.hpp"

namespace bkv::loopback {

class InstantTransport;

class InstantFabric {
 public:
  software_nic::MemoryTable& memory() noexcept { return memory_; }

 private:
  friend class InstantTransport;
  struct QpEntry {
    InstantTransport* owner;
    void* qp;
  };
  software_nic::MemoryTable memory_;
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

  class QueuePair : public software_nic::PostVerbs<QueuePair> {
   public:
    uint32_t qp_num() const noexcept { return qpn_; }
    ConnectInfo local_info() const noexcept { return ConnectInfo{owner_->node_id_, qpn_}; }
    void connect(const ConnectInfo& remote) {
      auto& qps = owner_->fabric_.qps_;
      if (remote.qpn == 0 || remote.qpn > qps.size() || qps[remote.qpn - 1].owner->node_id_ != remote.node)
        throw std::invalid_argument("InstantTransport: connect to unknown queue pair " + std::to_string(remote.qpn));
      peer_qpn_ = remote.qpn;
    }
    // Every request posted so far may run now; they run at once unless an earlier one
    // of this queue pair waits for a receive at the target.
    void ring_doorbell() {
      ++doorbells_;
      rung_ = pending_.size();
      owner_->run(*this);
    }
    uint32_t send_queue_free() const noexcept { return slots_.free_slots(); }
    bool in_error() const noexcept { return error_; }
    uint64_t doorbells() const noexcept { return doorbells_; }

   private:
    friend class InstantTransport;
    friend class software_nic::PostVerbs<QueuePair>;
    PostResult post(WcOpcode op, const void* local, uint32_t len, uint32_t lkey, RemoteBuffer remote, uint32_t imm,
                    uint64_t wr_id, bool signaled) noexcept {
      return post(Wqe{software_nic::make_work_request(op, local, len, lkey, remote, imm, wr_id, signaled)});
    }
    struct Wqe : software_nic::WorkRequest {
      uint64_t seq = 0;  // in the queue pair's send queue
    };
    PostResult post(Wqe w) {
      if (slots_.full()) return PostResult::kSendQueueFull;
      w.seq = slots_.take();
      pending_.push_back(w);
      return PostResult::kOk;
    }
    InstantTransport* owner_ = nullptr;
    uint32_t qpn_ = 0;
    uint32_t peer_qpn_ = 0;
    software_nic::SendQueueSlots slots_;
    uint64_t doorbells_ = 0;
    bool error_ = false;
    bool waiting_for_receive_ = false;  // the front request met receiver-not-ready
    std::deque<Wqe> pending_;           // posted, not yet executed, in post order
    size_t rung_ = 0;                   // the first rung_ of pending_ were doorbelled
  };

  explicit InstantTransport(InstantFabric& fabric, uint32_t srq_capacity = 4096,
                            uint32_t send_queue_depth = kDefaultSendQueueDepth)
      : fabric_(fabric),
        node_id_(static_cast<uint32_t>(fabric.nodes_.size())),
        sq_depth_(send_queue_depth),
        srq_(srq_capacity),
        responder_(fabric.memory_, node_id_, srq_, recv_cq_) {
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
    qp->slots_ = software_nic::SendQueueSlots(sq_depth_);
    fabric_.qps_.push_back({this, qp.get()});
    qp->qpn_ = static_cast<uint32_t>(fabric_.qps_.size());
    qps_.push_back(std::move(qp));
    return *qps_.back();
  }

  template <class F>
  uint32_t poll_recv(F&& cb, uint32_t max) {
    return software_nic::poll_recv_queue(recv_cq_, max, cb);
  }

  template <class F>
  uint32_t poll_send(F&& cb, uint32_t max) {
    return software_nic::poll_send_queue(
        send_cq_, max, [](const SendEntry& e) -> software_nic::SendQueueSlots& { return e.qp->slots_; }, cb);
  }

  // Adds n receives; queue pairs that wait for one (receiver not ready) resume, in the
  // order they started waiting.
  void post_receives(uint32_t n) {
    srq_.post(n, "InstantTransport");
    while (!srq_.empty() && !rnr_waiting_.empty()) {
      QueuePair* qp = rnr_waiting_.front();
      rnr_waiting_.pop_front();
      qp->waiting_for_receive_ = false;
      qp->owner_->run(*qp);
    }
  }
  uint32_t srq_capacity() const noexcept { return srq_.capacity(); }
  uint32_t srq_posted() const noexcept { return srq_.posted(); }
  uint32_t send_queue_depth() const noexcept { return sq_depth_; }
  Meter& meter() noexcept { return meter_; }
  uint32_t node_id() const noexcept { return node_id_; }
  // Queue pairs (of any node) whose next request waits for a receive here.
  size_t rnr_waiting() const noexcept { return rnr_waiting_.size(); }

 private:
  using SendEntry = software_nic::SendCqEntry<QueuePair*>;

  QueuePair& peer_of(const QueuePair& qp) const { return *static_cast<QueuePair*>(fabric_.qps_[qp.peer_qpn_ - 1].qp); }

  void complete(QueuePair& qp, const QueuePair::Wqe& w, WcStatus st) {
    if (w.signaled || st != WcStatus::kSuccess) send_cq_.push(SendEntry{{qp.qpn_, w.wr_id, w.opcode, st}, &qp, w.seq});
    if (st != WcStatus::kSuccess) enter_error(qp);
  }

  // An RC queue pair in the error state, or one not connected, takes no inbound
  // request. Unlike RC, one connected to another queue pair still takes a stranger's:
  // tests inject a forged peer's batches that way (test_backends_instant).
  static bool discards_inbound(const QueuePair& target) noexcept { return target.error_ || target.peer_qpn_ == 0; }

  // q enters the error state. Requests that wait for a receive at q (receiver not
  // ready) are retried now and meet a queue pair that discards them.
  static void enter_error(QueuePair& q) {
    if (q.error_) return;
    q.error_ = true;
    std::deque<QueuePair*>& waiting = q.owner_->rnr_waiting_;
    std::vector<QueuePair*> resume;
    for (auto it = waiting.begin(); it != waiting.end();) {
      if ((*it)->peer_qpn_ == q.qpn_) {
        resume.push_back(*it);
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
    for (QueuePair* r : resume) {
      r->waiting_for_receive_ = false;
      r->owner_->run(*r);
    }
  }

  // The responder NAKed w: both ends of the connection enter the error state. The
  // responder too because the IBA classes an R_Key or access violation of an RC request
  // as a responder error that moves its QP to Error (with an affiliated asynchronous
  // event, which ConnectX reports as IBV_EVENT_QP_ACCESS_ERR; SoftRoCE does the same).
  // The stricter choice: code that needs the NAKing side to keep working fails here.
  void remote_access_error(QueuePair& qp, const QueuePair::Wqe& w) {
    enter_error(peer_of(qp));
    complete(qp, w, WcStatus::kRemoteAccessError);
  }

  // Executes the doorbelled requests of qp in order, until one waits for a receive.
  void run(QueuePair& qp) {
    while (!qp.waiting_for_receive_ && qp.rung_ > 0) {
      if (!execute(qp, qp.pending_.front())) {
        qp.waiting_for_receive_ = true;
        fabric_.qps_[qp.peer_qpn_ - 1].owner->rnr_waiting_.push_back(&qp);
        return;
      }
      qp.pending_.pop_front();
      --qp.rung_;
    }
  }

  // One request, as requester and (on the peer) responder. False: receiver not ready.
  bool execute(QueuePair& qp, const QueuePair::Wqe& w) {
    if (qp.error_ || qp.peer_qpn_ == 0) {
      complete(qp, w, WcStatus::kWrFlushError);
      return true;
    }
    const software_nic::Access local =
        software_nic::check_local_access(fabric_.memory_, node_id_, w.opcode, w.local, w.length, w.lkey);
    if (!local.ok) {
      complete(qp, w, WcStatus::kLocalProtectionError);
      return true;
    }
    if (discards_inbound(peer_of(qp))) {
      complete(qp, w, WcStatus::kRetryExceeded);  // nothing answers; the retries run out
      return true;
    }
    InstantTransport& target = *fabric_.qps_[qp.peer_qpn_ - 1].owner;
    if (w.opcode == WcOpcode::kRdmaRead) {
      const software_nic::Access src = target.responder_.check_read(w.remote_addr, w.length, w.rkey);
      if (!src.ok) {
        remote_access_error(qp, w);
        return true;
      }
      if (w.length > 0) std::memcpy(local.host, src.host, w.length);
    } else {
      const software_nic::InboundWrite in{w.opcode, w.remote_addr, w.rkey, w.length, w.imm};
      switch (target.responder_.write(qp.peer_qpn_, in, local.host)) {
        case software_nic::ResponderStatus::kReceiverNotReady:
          return false;
        case software_nic::ResponderStatus::kRemoteAccessError:
          remote_access_error(qp, w);
          return true;
        case software_nic::ResponderStatus::kExecuted:
          break;
      }
    }
    complete(qp, w, WcStatus::kSuccess);
    return true;
  }

  InstantFabric& fabric_;
  uint32_t node_id_;
  uint32_t sq_depth_;
  software_nic::SharedReceiveQueue srq_;
  software_nic::CompletionQueue<RecvCompletion> recv_cq_;
  software_nic::CompletionQueue<SendEntry> send_cq_;
  software_nic::Responder responder_;
  Meter meter_;
  std::vector<std::unique_ptr<QueuePair>> qps_;
  std::deque<QueuePair*> rnr_waiting_;
};

static_assert(Transport<InstantTransport>);

}  // namespace bkv::loopback
