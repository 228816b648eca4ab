// Wall-clock threaded loopback transport: several nodes as threads of one process, each
// node a WallclockTransport owned by one thread, all sharing one WallclockFabric. It lets
// every backend run on real threads without MPI or UCX, and under ThreadSanitizer.
//
// How a request travels (the software "NIC" is split between the two owner threads):
//  - post_*() only fills the queue pair's send queue; ring_doorbell() turns every request
//    posted since the previous doorbell into a 64-byte Record and pushes it, in order,
//    into the lock-free SPSC channel from this node to the peer's node (one request
//    channel and one response channel per ordered pair of nodes). A record carries a
//    pointer to the requester's memory, not a copy of the bytes.
//  - The target thread, inside its poll_recv()/poll_send()/progress(), executes records
//    whose delivery time has come, in channel order (RC order per queue pair): it checks
//    rkey, bounds, permission and ownership (software_nic/responder.hpp), copies the bytes
//    (WRITE: from the requester's memory into its own; READ: from its own memory into
//    the requester's), consumes one SRQ receive and queues a receive completion for a
//    WRITE+IMM, and answers with an ACK (signalled requests), a READ response or a NAK.
//    With no receive posted, a WRITE+IMM waits at the head of its channel (receiver not
//    ready, infinite retry), and so do the requests behind it from the same node.
//  - Injected delay: every record is stamped deliver_at = now + one_way_delay_ns when it
//    is pushed, and is not executed before that time (timestamp gating: no sleeping on
//    the data path). Responses are delayed the same way, so a signalled request
//    completes one round trip after its doorbell at the earliest.
//  - Completion semantics: as in the UCX transport, a request completes when the peer
//    acknowledges it (after its data was placed); send-queue slots are freed when the
//    completion of that request or of a later signalled one on the queue pair is polled.
//  - Errors: a remote violation is NAKed; the request completes with kRemoteAccessError
//    (even unsignalled), both ends of the connection move to the error state and later
//    requests complete with kWrFlushError (requests already in flight are answered with
//    a flush NAK by the failed responder, so nobody touches a buffer after its request
//    completed). A local violation (lkey/bounds/local write access) travels as a fence,
//    completes with kLocalProtectionError after everything before it, and moves the
//    queue pair to the error state. Zero-length requests are not checked. A responder
//    in the error state (for whatever reason) answers every request with a flush NAK
//    and executes none; it stands for the silence of an RC queue pair in error, so a
//    requester not in error itself completes that request with kRetryExceeded (its
//    retries would run out) and enters the error state.
//
// Threading rules: memory registration, queue-pair creation and connect() take a fabric
// mutex, but the data path reads the memory table without one, so register memory
// before the threads that use the fabric start. Everything else on a transport is called
// by its owner thread only. The RDMA buffer contract holds as on hardware: a WRITE's
// source stays unchanged and a READ's destination untouched until the request (or a
// later one) completed or the peer provably consumed it; ThreadSanitizer reports a user
// that breaks it, since the peer thread reads or writes that memory.
#pragma once

#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/transport.hpp"
#include "transports/software_nic/completion_queue.hpp"
#include "transports/software_nic/memory_table.hpp"
#include "transports/software_nic/post_verbs.hpp"
#include "transports/software_nic/receive_queue.hpp"
#include "transports/software_nic/responder.hpp"
#include "transports/software_nic/send_queue.hpp"

namespace bkv::loopback {

struct WallclockConfig {
  uint64_t one_way_delay_ns = 0;    // injected one-way delay of every request and response
  uint32_t channel_capacity = 4096; // records per channel (power of two)
};

namespace wallclock {

inline constexpr size_t kCacheLine = 64;
inline constexpr uint32_t kMaxNodes = 1024;              // nodes per fabric
inline constexpr uint32_t kQpIndexBits = 16;             // qp_num = (node + 1) << 16 | index
inline constexpr uint32_t kMaxQpsPerNode = 1u << kQpIndexBits;
static_assert(uint64_t{kMaxNodes + 1} << kQpIndexBits <= UINT32_MAX);

// The queue-pair number encodes its node, so a receiver finds its own queue pair
// without a shared table.
constexpr uint32_t make_qp_num(uint32_t node, uint32_t index) noexcept { return ((node + 1) << kQpIndexBits) | index; }
constexpr uint32_t qp_node(uint32_t qp_num) noexcept { return (qp_num >> kQpIndexBits) - 1; }
constexpr uint32_t qp_index(uint32_t qp_num) noexcept { return qp_num & (kMaxQpsPerNode - 1); }
static_assert(qp_node(make_qp_num(7, 3)) == 7 && qp_index(make_qp_num(7, 3)) == 3);

enum class RecordOp : uint8_t { kWrite = 1, kWriteImm, kReadRequest, kLocalError, kAck, kNak, kReadResponse };
inline constexpr uint8_t kFlagAckRequested = 1u << 0;

// One request or response in a channel.
struct Record {
  RecordOp op;
  uint8_t flags;
  uint8_t status;         // kNak: the WcStatus
  uint8_t reserved;
  uint32_t dst_qp;        // queue pair at the receiving node
  uint32_t src_qp;        // queue pair at the sending node
  uint32_t imm;
  uint64_t seq;           // request sequence number (requester's send-queue position)
  uint64_t remote_addr;   // requests: address in the target's memory
  uint32_t rkey;
  uint32_t length;
  std::byte* local;       // requests: the requester's WRITE source / READ destination
  uint64_t deliver_at_ns; // not executed before this steady-clock time
};
static_assert(std::is_trivially_copyable_v<Record> && sizeof(Record) == 56);
static_assert(offsetof(Record, seq) == 16 && offsetof(Record, local) == 40 && offsetof(Record, deliver_at_ns) == 48);

// Bounded single-producer single-consumer ring of records (Lamport queue with cached
// indices): the producer publishes a slot with a release store of tail, the consumer
// frees it with a release store of head.
class SpscChannel {
 public:
  explicit SpscChannel(uint32_t capacity) : slots_(new Record[capacity]), mask_(capacity - 1) {}

  // Producer side.
  uint64_t free_slots() noexcept {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - cached_head_ > mask_) cached_head_ = head_.load(std::memory_order_acquire);
    return mask_ + 1 - (tail - cached_head_);
  }
  bool try_push(const Record& r) noexcept {
    if (free_slots() == 0) return false;
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    slots_[tail & mask_] = r;
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }
  // Consumer side.
  const Record* peek() noexcept {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head == cached_tail_) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head == cached_tail_) return nullptr;
    }
    return &slots_[head & mask_];
  }
  void pop() noexcept { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

 private:
  std::unique_ptr<Record[]> slots_;
  const uint64_t mask_;
  alignas(kCacheLine) std::atomic<uint64_t> head_{0};  // consumer position
  alignas(kCacheLine) uint64_t cached_tail_ = 0;       // consumer's copy of tail
  alignas(kCacheLine) std::atomic<uint64_t> tail_{0};  // producer position
  alignas(kCacheLine) uint64_t cached_head_ = 0;       // producer's copy of head
};

// Everything node `from` sends to node `to`: its requests and its responses (apart, so
// that draining responses never waits for request space: no deadlock).
struct ChannelPair {
  explicit ChannelPair(uint32_t capacity) : requests(capacity), responses(capacity) {}
  SpscChannel requests;
  SpscChannel responses;
};

inline uint64_t steady_now_ns() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace wallclock

class WallclockTransport;

class WallclockFabric {
 public:
  explicit WallclockFabric(WallclockConfig config = {}) : config_(config) {
    if (!std::has_single_bit(config.channel_capacity))
      throw std::invalid_argument("wallclock loopback: channel_capacity must be a power of two (got " +
                                  std::to_string(config.channel_capacity) + ")");
  }
  WallclockFabric(const WallclockFabric&) = delete;
  WallclockFabric& operator=(const WallclockFabric&) = delete;
  const WallclockConfig& config() const noexcept { return config_; }

 private:
  friend class WallclockTransport;
  wallclock::ChannelPair& channel(uint32_t from, uint32_t to) {  // under mutex_
    auto& slot = channels_[{from, to}];
    if (!slot) slot = std::make_unique<wallclock::ChannelPair>(config_.channel_capacity);
    return *slot;
  }

  const WallclockConfig config_;
  std::mutex mutex_;  // control path only
  software_nic::MemoryTable memory_;
  std::vector<WallclockTransport*> nodes_;
  std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<wallclock::ChannelPair>> channels_;
};

class WallclockTransport {
 public:
  using Meter = NullMeter;
  struct ConnectInfo {
    uint64_t fabric_id;  // which fabric the queue pair lives in
    uint32_t node;
    uint32_t qp_num;
  };
  static_assert(std::is_trivially_copyable_v<ConnectInfo> && sizeof(ConnectInfo) == 16);

  static constexpr uint32_t kDefaultSendQueueDepth = 256;

  class QueuePair : public software_nic::PostVerbs<QueuePair> {
   public:
    QueuePair(const QueuePair&) = delete;
    QueuePair& operator=(const QueuePair&) = delete;

    uint32_t qp_num() const noexcept { return qp_num_; }
    ConnectInfo local_info() const noexcept {
      return ConnectInfo{owner_->fabric_id(), owner_->node_id_, qp_num_};
    }
    void connect(const ConnectInfo& remote) { owner_->connect(*this, remote); }

    // Publishes every request posted since the previous doorbell (those that do not fit
    // in a full channel go out at the next doorbell or poll).
    void ring_doorbell() { owner_->submit(*this); }
    uint32_t send_queue_free() const noexcept { return slots_.free_slots(); }
    bool in_error() const noexcept { return error_; }
    bool connected() const noexcept { return out_ != nullptr; }

   private:
    friend class WallclockTransport;
    friend class software_nic::PostVerbs<QueuePair>;
    QueuePair(WallclockTransport& owner, uint32_t qp_num, uint32_t depth)
        : owner_(&owner), qp_num_(qp_num), slots_(depth), sq_(depth) {}

    using Wqe = software_nic::SendWqe;
    PostResult post(WcOpcode op, const void* local, uint32_t len, uint32_t lkey, RemoteBuffer remote, uint32_t imm,
                    uint64_t wr_id, bool signaled) noexcept {
      if (slots_.full()) return PostResult::kSendQueueFull;
      wqe(slots_.take()) = Wqe{software_nic::make_work_request(op, local, len, lkey, remote, imm, wr_id, signaled)};
      return PostResult::kOk;
    }
    // The send-queue ring (depth a power of two) indexed by sequence number.
    Wqe& wqe(uint64_t seq) noexcept { return sq_[seq & (slots_.depth() - 1)]; }

    WallclockTransport* owner_;
    uint32_t qp_num_;
    software_nic::SendQueueSlots slots_;
    bool error_ = false;            // requester side stopped (flushes)
    bool responder_error_ = false;  // responder side stopped (drops)
    bool backlogged_ = false;       // has requests waiting for channel space
    wallclock::ChannelPair* out_ = nullptr;  // this node -> the peer's node
    uint32_t remote_qp_ = 0;
    std::vector<Wqe> sq_;
    // Sequence numbers: slots_.freed() <= completed_ <= submitted_ <= slots_.posted().
    uint64_t submitted_ = 0, completed_ = 0;
  };

  explicit WallclockTransport(WallclockFabric& fabric, uint32_t srq_capacity = 4096,
                              uint32_t send_queue_depth = kDefaultSendQueueDepth)
      : fabric_(fabric), sq_depth_(send_queue_depth), srq_(srq_capacity),
        inbound_(new std::atomic<wallclock::ChannelPair*>[wallclock::kMaxNodes]),
        responder_(fabric.memory_, 0, srq_, recv_cq_) {
    if (!std::has_single_bit(send_queue_depth))
      throw std::invalid_argument("wallclock loopback: send_queue_depth must be a power of two (got " +
                                  std::to_string(send_queue_depth) + ")");
    if (srq_capacity == 0) throw std::invalid_argument("wallclock loopback: srq_capacity must be positive");
    for (uint32_t i = 0; i < wallclock::kMaxNodes; ++i) inbound_[i].store(nullptr, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(fabric_.mutex_);
    if (fabric_.nodes_.size() >= wallclock::kMaxNodes)
      throw std::length_error("wallclock loopback: more than " + std::to_string(wallclock::kMaxNodes) + " nodes");
    node_id_ = static_cast<uint32_t>(fabric_.nodes_.size());
    fabric_.nodes_.push_back(this);
    responder_ = software_nic::Responder(fabric_.memory_, node_id_, srq_, recv_cq_);
    delay_ns_ = fabric_.config_.one_way_delay_ns;
  }
  WallclockTransport(const WallclockTransport&) = delete;
  WallclockTransport& operator=(const WallclockTransport&) = delete;

  MemoryRegion register_memory(void* ptr, size_t len, uint32_t access) {
    std::lock_guard<std::mutex> lock(fabric_.mutex_);
    return fabric_.memory_.register_memory(ptr, len, access, node_id_);
  }

  QueuePair& create_queue_pair() {
    std::lock_guard<std::mutex> lock(fabric_.mutex_);
    if (qps_.size() >= wallclock::kMaxQpsPerNode)
      throw std::length_error("wallclock loopback: too many queue pairs on one node");
    const uint32_t num = wallclock::make_qp_num(node_id_, static_cast<uint32_t>(qps_.size()));
    qps_.push_back(std::unique_ptr<QueuePair>(new QueuePair(*this, num, sq_depth_)));
    qp_count_.store(static_cast<uint32_t>(qps_.size()), std::memory_order_release);
    return *qps_.back();
  }

  template <class F>
  uint32_t poll_recv(F&& on_recv, uint32_t max) {
    progress();
    return software_nic::poll_recv_queue(recv_cq_, max, on_recv);
  }

  template <class F>
  uint32_t poll_send(F&& on_send, uint32_t max) {
    progress();
    return software_nic::poll_send_queue(
        send_cq_, max, [](const SendEntry& e) -> software_nic::SendQueueSlots& { return e.qp->slots_; }, on_send);
  }

  // Adds n receives; a WRITE+IMM waiting at the head of a channel runs at the next poll.
  void post_receives(uint32_t n) { srq_.post(n, "wallclock loopback"); }
  uint32_t srq_capacity() const noexcept { return srq_.capacity(); }
  uint32_t srq_posted() const noexcept { return srq_.posted(); }
  uint32_t send_queue_depth() const noexcept { return sq_depth_; }
  Meter& meter() noexcept { return meter_; }
  uint32_t node_id() const noexcept { return node_id_; }
  uint64_t protocol_errors() const noexcept { return protocol_errors_; }

  // The software NIC: executes due inbound requests and responses, retries requests
  // held back by full channels. The polls call it; a node with nothing to poll may too.
  void progress() {
    const uint64_t now = delay_ns_ != 0 ? wallclock::steady_now_ns() : 0;
    const uint32_t peers = inbound_count_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < peers; ++i) {
      wallclock::ChannelPair& ch = *inbound_[i].load(std::memory_order_relaxed);
      while (const wallclock::Record* r = ch.responses.peek()) {
        if (r->deliver_at_ns > now) break;
        handle_response(*r);
        ch.responses.pop();
      }
      while (const wallclock::Record* r = ch.requests.peek()) {
        if (r->deliver_at_ns > now) break;
        if (!handle_request(*r, now)) break;  // receiver not ready or no room to answer
        ch.requests.pop();
      }
    }
    if (backlogged_ > 0)
      for (auto& qp : qps_)
        if (qp->backlogged_) submit(*qp);
  }

 private:
  using SendEntry = software_nic::SendCqEntry<QueuePair*>;

  uint64_t fabric_id() const noexcept { return reinterpret_cast<uint64_t>(&fabric_); }

  void connect(QueuePair& qp, const ConnectInfo& remote) {
    std::lock_guard<std::mutex> lock(fabric_.mutex_);
    if (qp.out_ != nullptr)
      throw std::logic_error("wallclock loopback: queue pair " + std::to_string(qp.qp_num_) + " is already connected");
    if (remote.fabric_id != fabric_id())
      throw std::invalid_argument("wallclock loopback: connect: the peer belongs to another fabric");
    if (remote.node >= fabric_.nodes_.size() || wallclock::qp_node(remote.qp_num) != remote.node ||
        wallclock::qp_index(remote.qp_num) >= fabric_.nodes_[remote.node]->qps_.size())
      throw std::invalid_argument("wallclock loopback: connect to unknown queue pair " +
                                  std::to_string(remote.qp_num) + " on node " + std::to_string(remote.node));
    WallclockTransport& peer = *fabric_.nodes_[remote.node];
    wallclock::ChannelPair& out = fabric_.channel(node_id_, remote.node);
    peer.add_inbound(&out);
    qp.remote_qp_ = remote.qp_num;
    qp.out_ = &out;
  }

  void add_inbound(wallclock::ChannelPair* ch) {  // under the fabric mutex
    const uint32_t n = inbound_count_.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < n; ++i)
      if (inbound_[i].load(std::memory_order_relaxed) == ch) return;
    inbound_[n].store(ch, std::memory_order_relaxed);
    inbound_count_.store(n + 1, std::memory_order_release);
  }

  // The queue pair a record addresses, if it is ours and connected to the sender.
  QueuePair* addressed_qp(const wallclock::Record& r) noexcept {
    const uint32_t idx = wallclock::qp_index(r.dst_qp);
    if (wallclock::qp_node(r.dst_qp) != node_id_ || idx >= qp_count_.load(std::memory_order_acquire)) return nullptr;
    QueuePair* qp = qps_[idx].get();
    return qp->out_ != nullptr && qp->remote_qp_ == r.src_qp ? qp : nullptr;
  }

  void protocol_error(const char* what) noexcept {
    if (protocol_errors_++ < 5) std::fprintf(stderr, "wallclock loopback: dropped a record: %s\n", what);
  }

  // The requester's local rule (software_nic/responder.hpp).
  bool local_range_ok(const QueuePair::Wqe& w) const noexcept {
    return software_nic::check_local_access(fabric_.memory_, node_id_, w.opcode, w.local, w.length, w.lkey).ok;
  }

  static wallclock::RecordOp request_op(WcOpcode op) noexcept {
    return op == WcOpcode::kRdmaRead       ? wallclock::RecordOp::kReadRequest
           : op == WcOpcode::kRdmaWriteImm ? wallclock::RecordOp::kWriteImm
                                           : wallclock::RecordOp::kWrite;
  }

  wallclock::Record reply(const QueuePair& qp, wallclock::RecordOp op, uint64_t seq, uint64_t now) const noexcept {
    wallclock::Record r{};
    r.op = op;
    r.dst_qp = qp.remote_qp_;
    r.src_qp = qp.qp_num_;
    r.seq = seq;
    r.deliver_at_ns = now + delay_ns_;
    return r;
  }

  // ---- requester role ----

  void submit(QueuePair& qp) {
    const uint64_t now = delay_ns_ != 0 ? wallclock::steady_now_ns() : 0;
    bool blocked = false;
    while (qp.submitted_ < qp.slots_.posted()) {
      QueuePair::Wqe& w = qp.wqe(qp.submitted_);
      if (qp.error_ || qp.out_ == nullptr) {
        w.done = true;
        w.status = WcStatus::kWrFlushError;
        ++qp.submitted_;
        continue;
      }
      // A request that breaks the local rule goes out as a fence, so that it fails in
      // order, after the requests before it.
      const bool local_ok = local_range_ok(w);
      if (!local_ok) w.status = WcStatus::kLocalProtectionError;
      const wallclock::Record r{
          .op = local_ok ? request_op(w.opcode) : wallclock::RecordOp::kLocalError,
          .flags = w.signaled || !local_ok ? wallclock::kFlagAckRequested : uint8_t{0}, .status = 0, .reserved = 0,
          .dst_qp = qp.remote_qp_, .src_qp = qp.qp_num_, .imm = w.imm, .seq = qp.submitted_, .remote_addr = w.remote_addr,
          .rkey = w.rkey, .length = local_ok ? w.length : 0, .local = local_ok ? w.local : nullptr,
          .deliver_at_ns = now + delay_ns_};
      if (!qp.out_->requests.try_push(r)) {
        blocked = true;
        break;
      }
      ++qp.submitted_;
      if (r.op == wallclock::RecordOp::kLocalError) {
        qp.error_ = true;  // later requests are flushed; they complete after the fence
        qp.responder_error_ = true;
      }
    }
    if (blocked != qp.backlogged_) {
      qp.backlogged_ = blocked;
      backlogged_ += blocked ? 1 : -1;
    }
    advance_completions(qp);
  }

  static void executed_below(QueuePair& qp, uint64_t end) noexcept {
    for (uint64_t s = qp.completed_; s < end; ++s) {
      QueuePair::Wqe& w = qp.wqe(s);
      if (w.opcode != WcOpcode::kRdmaRead || w.status != WcStatus::kSuccess) w.done = true;
    }
  }

  void advance_completions(QueuePair& qp) {
    while (qp.completed_ < qp.submitted_ && qp.wqe(qp.completed_).done) {
      const QueuePair::Wqe& w = qp.wqe(qp.completed_);
      if (w.signaled || w.status != WcStatus::kSuccess)
        send_cq_.push(SendEntry{SendCompletion{qp.qp_num_, w.wr_id, w.opcode, w.status}, &qp, qp.completed_});
      ++qp.completed_;
    }
  }

  // Error state: both roles stop. Requests not yet sent are flushed here; those in
  // flight are answered by the peer (an ACK or READ response if it ran them first, else a
  // flush NAK), so every request still completes in order and no peer touches a buffer
  // after its request completed.
  void enter_error(QueuePair& qp) {
    qp.error_ = true;
    qp.responder_error_ = true;
    submit(qp);
  }

  void handle_response(const wallclock::Record& r) {
    QueuePair* qp = addressed_qp(r);
    if (qp == nullptr) return protocol_error("response for an unknown queue pair");
    if (r.seq >= qp->submitted_) return protocol_error("response for a request that was never sent");
    if (r.seq < qp->completed_) return;  // already settled (e.g. flushed)
    switch (r.op) {
      case wallclock::RecordOp::kAck: {
        executed_below(*qp, r.seq + 1);
        advance_completions(*qp);
        break;
      }
      case wallclock::RecordOp::kNak: {
        QueuePair::Wqe& w = qp->wqe(r.seq);
        if (r.status == static_cast<uint8_t>(WcStatus::kRemoteAccessError)) {
          executed_below(*qp, r.seq);  // the responder ran everything before it
        } else if (r.status != static_cast<uint8_t>(WcStatus::kWrFlushError)) {
          return protocol_error("NAK with an invalid status");
        }
        w.done = true;
        w.status = static_cast<WcStatus>(r.status);
        // A flush NAK stands for the silence of an RC queue pair in the error state: a
        // requester not in error itself hears nothing and its retries run out.
        if (w.status == WcStatus::kWrFlushError && !qp->error_) w.status = WcStatus::kRetryExceeded;
        advance_completions(*qp);
        enter_error(*qp);
        break;
      }
      case wallclock::RecordOp::kReadResponse: {
        QueuePair::Wqe& w = qp->wqe(r.seq);
        if (w.opcode != WcOpcode::kRdmaRead || w.done) return protocol_error("READ response without its READ");
        executed_below(*qp, r.seq);
        w.done = true;  // the responder already copied the data into w.local
        advance_completions(*qp);
        break;
      }
      default:
        protocol_error("unexpected response op");
    }
  }

  // ---- responder role ----

  // Executes one request. Returns false if it must stay at the head of its channel.
  bool handle_request(const wallclock::Record& r, uint64_t now) {
    QueuePair* qp = addressed_qp(r);
    if (qp == nullptr) {
      protocol_error("request for an unknown queue pair or from a stranger");
      return true;
    }
    wallclock::SpscChannel& answers = qp->out_->responses;
    if (answers.free_slots() == 0) return false;  // every request may need an answer
    if (qp->responder_error_) {                   // RC responder in error: flush it
      wallclock::Record n = reply(*qp, wallclock::RecordOp::kNak, r.seq, now);
      n.status = static_cast<uint8_t>(WcStatus::kWrFlushError);
      answers.try_push(n);
      return true;
    }
    const bool ack = (r.flags & wallclock::kFlagAckRequested) != 0;
    switch (r.op) {
      case wallclock::RecordOp::kLocalError:
        break;
      case wallclock::RecordOp::kWrite:
      case wallclock::RecordOp::kWriteImm: {
        const software_nic::InboundWrite in{
            r.op == wallclock::RecordOp::kWriteImm ? WcOpcode::kRdmaWriteImm : WcOpcode::kRdmaWrite, r.remote_addr,
            r.rkey, r.length, r.imm};
        switch (responder_.write(qp->qp_num_, in, r.local)) {
          case software_nic::ResponderStatus::kReceiverNotReady:
            return false;
          case software_nic::ResponderStatus::kRemoteAccessError:
            nak(*qp, r.seq, now);
            return true;
          case software_nic::ResponderStatus::kExecuted:
            break;
        }
        break;
      }
      case wallclock::RecordOp::kReadRequest: {
        const software_nic::Access src = responder_.check_read(r.remote_addr, r.length, r.rkey);
        if (!src.ok) {
          nak(*qp, r.seq, now);
          return true;
        }
        if (r.length > 0) std::memcpy(r.local, src.host, r.length);
        answers.try_push(reply(*qp, wallclock::RecordOp::kReadResponse, r.seq, now));
        return true;
      }
      default:
        protocol_error("unexpected request op");
        return true;
    }
    if (ack) answers.try_push(reply(*qp, wallclock::RecordOp::kAck, r.seq, now));
    return true;
  }

  void nak(QueuePair& qp, uint64_t seq, uint64_t now) {
    wallclock::Record n = reply(qp, wallclock::RecordOp::kNak, seq, now);
    n.status = static_cast<uint8_t>(WcStatus::kRemoteAccessError);
    qp.out_->responses.try_push(n);  // room was checked by the caller
    enter_error(qp);
  }

  WallclockFabric& fabric_;
  uint32_t node_id_ = 0;
  uint32_t sq_depth_;
  uint64_t delay_ns_ = 0;
  software_nic::SharedReceiveQueue srq_;
  uint32_t backlogged_ = 0;
  uint64_t protocol_errors_ = 0;
  Meter meter_;
  std::vector<std::unique_ptr<QueuePair>> qps_;
  std::atomic<uint32_t> qp_count_{0};
  std::unique_ptr<std::atomic<wallclock::ChannelPair*>[]> inbound_;
  std::atomic<uint32_t> inbound_count_{0};
  software_nic::CompletionQueue<RecvCompletion> recv_cq_;
  software_nic::CompletionQueue<SendEntry> send_cq_;
  software_nic::Responder responder_;  // its node is set once the node id is known
};

static_assert(Transport<WallclockTransport>);

}  // namespace bkv::loopback
