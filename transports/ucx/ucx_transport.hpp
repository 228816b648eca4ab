// The Transport concept (core/transport.hpp) over UCX active messages (UCP AM API).
//
// One UcxTransport = one UCP context + one UCP worker (UCS_THREAD_MODE_SINGLE), owned by
// one thread. Each queue pair has its own UCP endpoint to the peer queue pair's worker.
// The software here plays the part of the RDMA NIC on both sides:
//
//  - RDMA READ and WRITE (no immediate) to a region the peer announced go through UCX
//    RMA: ucp_get_nbx / ucp_put_nbx with the peer's packed remote key, after the
//    requester checked the range and access against the announcement (ucx_rma.hpp:
//    regions, announcements, which request takes which path, counters). Everything
//    else (WRITE+IMM, zero length, an rkey not announced (yet), a range or access
//    outside the announced region, a request behind an outstanding AM request to the
//    same rkey) takes the active-message path below, where the peer's software
//    responder checks it; Config::rma = false keeps every request on that path.
//  - Every AM-path work request becomes one active message (id kAmId) whose user header is an
//    AmHeader {op, dst qp, src qp, imm, dst token, src token, sequence number, remote
//    address, rkey, length}; the two random tokens tie a message to one connection
//    (queue-pair numbers alone repeat across workers); WRITE data travels as the AM payload (eager or rendezvous, as UCX
//    chooses). READ is a request AM answered by a response AM carrying the data.
//  - RC order: AM requests of one queue pair carry consecutive AM sequence numbers (the
//    requester maps them back to send-queue positions), and the responder executes them
//    strictly in that order, parking any that arrive early (UCX may deliver a rendezvous
//    message after a later eager one). Across the two paths: an AM request is handed to
//    UCX only when every earlier RMA operation of its queue pair has completed, a WRITE
//    remotely (its ucp_ep_flush_nbx completed: "completed both at the origin and at the
//    target", ucp.h); so a WRITE+IMM answer never overtakes the value WRITE before it.
//    An RMA operation waits for earlier RMA operations on overlapping bytes of the same
//    region (unless both are READs), and takes the AM path when an AM request to the same
//    rkey is outstanding, so every request that touches the same memory keeps post order.
//    An RMA operation after unacknowledged AM requests is preceded by a NOP asking for an
//    ACK, so its completion is not stuck behind them. (ucp_worker_fence is not relied on:
//    ucp.h does not say it orders active messages after RMA.)
//  - The responder's AM handler validates the header (queue pair, token, peer, sequence)
//    and then runs the software NIC responder (transports/software_nic/responder.hpp):
//    rkey, bounds and permission against its registered regions, copy of the bytes into
//    the registered memory, and for a WRITE+IMM one SRQ receive and a receive completion. A rendezvous
//    payload that is next in order is received straight into the target memory; one
//    that must wait is received into a side buffer and copied when its turn comes. With no receive
//    posted the request waits (receiver-not-ready with infinite retry) until
//    post_receives() is called; later requests of that queue pair wait behind it.
//  - Completion semantics (documented choice): an RMA READ completes when ucp_get_nbx
//    completed (data in the local buffer), an RMA WRITE when the flush issued after it
//    (one per doorbell) completed; an AM-path WRITE completes when the PEER
//    ACKNOWLEDGES it, i.e. after its data was placed in the target memory: signalled
//    requests ask for an ACK (consecutive ACKs of one queue pair are coalesced), and an
//    ACK or READ response for sequence s completes every earlier WRITE as well (in-order
//    execution at the responder). A READ completes when its data was copied into the
//    local buffer. This is the RDMA meaning of a send completion, not UCX's local one.
//  - Send-queue slots follow verbs: a slot is freed when the completion of its request
//    or of a later signalled request on the same queue pair is polled (poll_send), so a
//    user that never signals fills the send queue and sees kSendQueueFull.
//  - Errors: a remote violation (bad rkey, bounds, permission) is answered with a NAK;
//    the request completes with kRemoteAccessError (even if unsignalled), the queue pair
//    moves to the error state on both sides and every later request completes with
//    kWrFlushError: requests not yet sent are flushed locally, requests in flight are
//    answered by the failed responder with a flush NAK (so nobody touches a buffer after
//    its request completed). A local violation (bad lkey or bounds) is sent as a NOP
//    fence; when the peer acknowledges it the request completes with
//    kLocalProtectionError and the queue pair moves to the error state. A UCX-level
//    failure (peer gone, or a failed ucp_get/ucp_put/flush) completes the oldest outstanding
//    request with kRetryExceeded and flushes the rest; an RMA operation still in UCX's hands
//    then completes (kWrFlushError) when UCX gives its buffer back. Zero-length requests
//    touch no memory and are not checked. A responder in the error state answers every
//    active-message request with a flush NAK and executes none; it stands for the
//    silence of an RC queue pair in error, so a requester not in error itself completes
//    that request with kRetryExceeded and enters the error state. RMA operations (WRITE
//    and READ to an announced region) never reach the responder's software: a target
//    queue pair in error does not stop them.
//  - ring_doorbell(): hands every request posted on this queue pair since the previous
//    doorbell to UCX (ucp_am_send_nbx, ucp_get_nbx, ucp_put_nbx), in post order, up to
//    the first one that must wait for an RMA operation (handed over by progress() once
//    that completed). UCX sends what it can at once; the rest leaves as the worker
//    progresses. Over shared memory the transport asks UCX for FIFO elements large
//    enough (kShmFifoElementSize) that a WRITE of up to 416 bytes, header included,
//    leaves by UCX's short path, the cheapest it has.
//  - poll_recv() progresses the worker once (ucp_worker_progress, which runs the AM
//    handlers), sends the ACKs/NAKs/READ responses the handlers queued, then drains the
//    receive completion queue. poll_send() does the same for the send completion queue,
//    except right after a poll_recv(): copyrpc's drain calls the two back to back, and a
//    second progress there costs a UCX progress per daemon loop (about 240 instructions
//    over shared memory) for completions that the next loop's poll_recv() picks up
//    anyway. So poll_send() progresses unless a poll_recv() has since the previous
//    poll_send(): a caller that only polls the send queue still progresses every time.
//
// Contract as on RDMA: the source of a WRITE must stay unchanged, and the destination of
// a READ untouched, until the request (or a later one on the queue pair) has completed
// or the peer has provably consumed it. Messages that fail validation are dropped and
// counted (protocol_errors()), with one line on stderr for the first few.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/transport.hpp"
#include "transports/software_nic/completion_queue.hpp"
#include "transports/software_nic/memory_table.hpp"
#include "transports/software_nic/post_verbs.hpp"
#include "transports/software_nic/receive_queue.hpp"
#include "transports/software_nic/responder.hpp"
#include "transports/software_nic/send_queue.hpp"
#include "transports/ucx/ucx_rma.hpp"

// Opaque UCX handles (ucp/api/ucp_def.h); the UCX headers stay out of this header.
struct ucp_context;
struct ucp_worker;
struct ucp_ep;

namespace bkv::ucx {

inline constexpr uint32_t kAmId = 0x2B;                 // the one AM id this transport uses
inline constexpr uint32_t kMaxWorkerAddress = 992;      // bytes of packed worker address
inline constexpr uint64_t kConnectMagic = 0x3130'5843'5556'4B42ull;  // "BKVUCX01"
inline constexpr uint32_t kQpNumBase = 0x10;            // first queue-pair number handed out

// The blob a peer needs to connect to one queue pair: its worker's packed address, its
// queue-pair number and a random token the peer echoes in every message.
struct ConnectInfo {
  uint64_t magic = 0;
  uint32_t qp_num = 0;
  uint32_t address_length = 0;
  uint64_t token = 0;
  uint64_t reserved = 0;
  std::byte address[kMaxWorkerAddress] = {};
};
static_assert(std::is_trivially_copyable_v<ConnectInfo> && sizeof(ConnectInfo) == 1024);
static_assert(offsetof(ConnectInfo, qp_num) == 8 && offsetof(ConnectInfo, address_length) == 12 &&
              offsetof(ConnectInfo, token) == 16 && offsetof(ConnectInfo, address) == 32);

enum class AmOp : uint8_t {
  kWrite = 1,     // requester -> responder, payload = data
  kWriteImm,      // requester -> responder, payload = data, consumes one SRQ receive
  kReadRequest,   // requester -> responder, no payload
  kNop,           // requester -> responder: fence for a request that failed locally
  kAck,           // responder -> requester: requests up to `seq` executed
  kNak,           // responder -> requester: request `seq` failed with `status`
  kReadResponse,  // responder -> requester, payload = the data read for request `seq`
};
inline constexpr uint8_t kFlagAckRequested = 1u << 0;

// The AM user header (little-endian, native layout). Validated field by field on arrival.
struct AmHeader {
  AmOp op;
  uint8_t flags;
  uint8_t status;       // WcStatus for kNak
  uint8_t reserved;
  uint32_t dst_qp;      // queue-pair number at the receiver of this message
  uint32_t src_qp;      // queue-pair number at the sender of this message
  uint32_t imm;
  uint64_t dst_token;   // the receiving queue pair's token (from its ConnectInfo)
  uint64_t src_token;   // the sending queue pair's token (the receiver learned it at connect)
  uint64_t seq;         // request sequence number (the requester's send-queue position)
  uint64_t remote_addr; // responder address (requests)
  uint32_t rkey;
  uint32_t length;      // payload / READ length
};
static_assert(std::is_trivially_copyable_v<AmHeader> && sizeof(AmHeader) == 56);
static_assert(offsetof(AmHeader, dst_qp) == 4 && offsetof(AmHeader, src_qp) == 8 &&
              offsetof(AmHeader, imm) == 12 && offsetof(AmHeader, dst_token) == 16 &&
              offsetof(AmHeader, src_token) == 24 && offsetof(AmHeader, seq) == 32 &&
              offsetof(AmHeader, remote_addr) == 40 && offsetof(AmHeader, rkey) == 48 &&
              offsetof(AmHeader, length) == 52);

// Which AM ops are requests (run by the responder in sequence order) and which carry data.
constexpr bool is_request(AmOp op) noexcept {
  return op == AmOp::kWrite || op == AmOp::kWriteImm || op == AmOp::kReadRequest || op == AmOp::kNop;
}
constexpr bool carries_data(AmOp op) noexcept {
  return op == AmOp::kWrite || op == AmOp::kWriteImm || op == AmOp::kReadResponse;
}
constexpr bool valid_op(uint8_t op) noexcept {
  return op >= static_cast<uint8_t>(AmOp::kWrite) && op <= static_cast<uint8_t>(AmOp::kReadResponse);
}

// The checks of an arriving AM that need no state, as pure functions of the peer's bytes
// (the AM handler runs them, with the queue-pair and token checks between the two;
// fuzz/ucx_headers.cpp runs them on arbitrary bytes). Each returns the rule the message
// breaks (the message the transport reports), or nullptr.
// The user header: its size and op; `out` receives it when it has the right size.
inline const char* am_header_error(const void* header, size_t header_length, AmHeader& out) noexcept {
  if (header_length != sizeof(AmHeader)) return "AM header has the wrong size";
  std::memcpy(&out, header, sizeof out);
  if (!valid_op(static_cast<uint8_t>(out.op))) return "unknown AM op";
  return nullptr;
}
// The payload's length against the header (data ops carry exactly `length` bytes, the
// others none).
inline const char* am_payload_error(const AmHeader& h, size_t length) noexcept {
  if (carries_data(h.op) ? length != h.length : length != 0) return "payload length does not match the header";
  return nullptr;
}

// UCX's shared-memory transports (posix, sysv) send a message by copying it into one
// element of the receiver's FIFO; a message fits UCX's short path (no request, no pack
// callbacks: about 340 instructions a send against about 720 on the bcopy path, UCX 1.13)
// when the user header, payload and UCX's own headers fit one element. UCX's default
// element (128 bytes) leaves 93 bytes for user header and payload: less than AmHeader
// plus the smallest copyrpc batch (64 bytes). kShmFifoElementSize leaves 477: AmHeader
// plus a batch of up to 416 bytes takes the short path (ucp_ep_print_info shows the
// thresholds). The FIFOs grow from 8 KiB to 32 KiB (64 elements) per worker.
inline constexpr uint32_t kShmFifoElementSize = 512;
inline constexpr uint32_t kMinShmFifoElementSize = 128;   // UCX's default
inline constexpr uint32_t kMaxShmFifoElementSize = 8192;  // about UCX's bcopy segment (8256)
static_assert(kMinShmFifoElementSize <= kShmFifoElementSize && kShmFifoElementSize <= kMaxShmFifoElementSize);

struct Config {
  uint32_t send_queue_depth = 256;  // per queue pair, a power of two
  uint32_t srq_capacity = 4096;     // receives the shared receive queue holds
  std::string tls;                  // UCX_TLS override ("sm,self", "tcp"); empty = environment
  // Bytes of a shared-memory FIFO element (UCX_POSIX_FIFO_ELEM_SIZE and
  // UCX_SYSV_FIFO_ELEM_SIZE), kMinShmFifoElementSize..kMaxShmFifoElementSize; 0 = UCX's
  // setting (environment or default). Applied when the transport list (tls, else
  // UCX_TLS) can include posix or sysv, and not when the environment sets a FIFO element
  // size itself (UCX_MM_, UCX_POSIX_ or UCX_SYSV_FIFO_ELEM_SIZE: the user's choice wins). UCX indexes the peer's FIFO with its own element
  // size: every process of a job must use the same size.
  uint32_t shm_fifo_element_size = kShmFifoElementSize;
  bool rma = true;  // READ/WRITE as UCX RMA where announced (ucx_rma.hpp); false = AM only
};

class UcxTransport;

class QueuePair : public software_nic::PostVerbs<QueuePair> {
 public:
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  uint32_t qp_num() const noexcept { return qp_num_; }
  ConnectInfo local_info() const;
  // Connects to the peer queue pair. Validates the blob; a bad one throws
  // std::invalid_argument naming the problem. Connecting twice throws std::logic_error.
  void connect(const ConnectInfo& remote);

  void ring_doorbell();
  uint32_t send_queue_free() const noexcept { return slots_.free_slots(); }
  bool in_error() const noexcept { return state_ == State::kError; }
  // Whether UCX reports a failed peer on this queue pair (UCP_ERR_HANDLING_MODE_PEER);
  // false over transports without it (shared memory in UCX 1.13).
  bool peer_error_handling() const noexcept { return peer_error_handling_; }
  bool connected() const noexcept { return ep_ != nullptr; }

 private:
  friend class UcxTransport;
  friend class RmaEngine;
  friend class software_nic::PostVerbs<QueuePair>;
  QueuePair(UcxTransport& owner, uint32_t qp_num, uint32_t depth, uint64_t token);
  // Hands posted requests up to the last doorbell to UCX, in order (ring_doorbell, and
  // again when an RMA operation that held later requests completes).
  void submit();

  enum class State : uint8_t { kReady, kErrorPending, kError };
  struct Wqe : software_nic::SendWqe {
    bool receiving = false;  // UCX still uses `local` (READ data by rendezvous, or an RMA operation)
    bool rma = false;        // issued as ucp_get_nbx / ucp_put_nbx (completes on its own, not by ACK)
  };
  // A request that arrived out of order or could not run yet (receiver not ready).
  struct Parked {
    AmHeader header{};
    std::vector<std::byte> data;
    bool receiving = false;  // rendezvous data still on its way
    bool direct = false;     // ... straight into the target memory (checks done, receive taken)
  };

  PostResult post(WcOpcode op, const void* local, uint32_t len, uint32_t lkey, RemoteBuffer remote, uint32_t imm,
                  uint64_t wr_id, bool signaled) noexcept {
    if (slots_.full()) return PostResult::kSendQueueFull;
    wqe(slots_.take()) = Wqe{{software_nic::make_work_request(op, local, len, lkey, remote, imm, wr_id, signaled)}};
    return PostResult::kOk;
  }
  // The send-queue ring (depth a power of two) indexed by sequence number.
  Wqe& wqe(uint64_t seq) noexcept { return sq_[seq & (slots_.depth() - 1)]; }

  UcxTransport* owner_;
  uint32_t qp_num_;
  uint64_t token_;
  State state_ = State::kReady;
  ucp_ep* ep_ = nullptr;
  uint32_t remote_qp_ = 0;
  bool peer_error_handling_ = false;
  uint64_t remote_token_ = 0;
  AmHeader header_template_{};  // connect(): the queue-pair numbers and tokens every message carries
  // Requester side. Sequence numbers:
  //   slots_.freed() <= completed_ <= submitted_ <= slots_.posted().
  software_nic::SendQueueSlots slots_;
  std::vector<Wqe> sq_;
  uint64_t submitted_ = 0;  // next request to hand to UCX
  uint64_t completed_ = 0;  // next request whose completion is not yet queued
  uint64_t fence_seq_ = 0;  // kErrorPending: the request that failed locally
  uint64_t doorbell_end_ = 0;  // requests below this were rung
  // AM requests carry their own consecutive numbers (the responder runs them in that
  // order); am_position_ maps the last `depth` of them to send-queue positions.
  uint64_t am_next_ = 0;
  std::vector<uint64_t> am_position_;
  uint32_t rma_inflight_ = 0;  // RMA operations not yet complete (a WRITE: not yet flushed)
  bool am_unacknowledged_ = false;  // the last AM request asked for no ACK
  bool resume_queued_ = false;
  // Responder side.
  uint64_t expected_ = 0;   // next request sequence number to execute
  bool responder_error_ = false;
  std::map<uint64_t, Parked> parked_;  // by sequence number (rare: out of order or RNR)
};

class UcxTransport {
 public:
  using ConnectInfo = ucx::ConnectInfo;
  using QueuePair = ucx::QueuePair;
  using Meter = NullMeter;

  explicit UcxTransport(const Config& config = {});
  ~UcxTransport();
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  MemoryRegion register_memory(void* ptr, size_t len, uint32_t access) {
    const MemoryRegion mr = memory_.register_memory(ptr, len, access, kNode);
    if (rma_) rma_->on_register(mr, access);
    return mr;
  }
  QueuePair& create_queue_pair();

  template <class F>
  uint32_t poll_recv(F&& on_recv, uint32_t max) {
    progress();
    recv_progressed_ = true;
    return software_nic::poll_recv_queue(recv_cq_, max, on_recv);
  }

  template <class F>
  uint32_t poll_send(F&& on_send, uint32_t max) {
    if (!recv_progressed_) progress();  // a poll_recv since the last poll_send has progressed
    recv_progressed_ = false;
    return software_nic::poll_send_queue(
        send_cq_, max, [](const SendEntry& e) -> software_nic::SendQueueSlots& { return e.qp->slots_; }, on_send);
  }

  // Adds n zero-length receives to the shared receive queue. More than srq_capacity()
  // outstanding is a programming error (std::logic_error).
  void post_receives(uint32_t n);
  uint32_t srq_capacity() const noexcept { return srq_.capacity(); }
  uint32_t srq_posted() const noexcept { return srq_.posted(); }
  uint32_t send_queue_depth() const noexcept { return config_.send_queue_depth; }
  Meter& meter() noexcept { return meter_; }

  // Drives the worker once and sends what the handlers queued (the polls call this).
  void progress();
  // Messages dropped because they failed validation (should stay 0 between honest peers).
  uint64_t protocol_errors() const noexcept { return protocol_errors_; }
  // Payloads UCX delivered by rendezvous, and requests that had to wait (out of order or
  // receiver not ready): for tests that must exercise those paths.
  uint64_t rendezvous_receives() const noexcept { return rendezvous_receives_; }
  uint64_t parked_requests() const noexcept { return parked_requests_; }
  // Test hook: queue pair by number (nullptr if unknown).
  QueuePair* find_queue_pair(uint32_t qp_num) noexcept;
  // The RMA path (nullptr when Config::rma is false) and what it did.
  RmaEngine* rma() noexcept { return rma_.get(); }
  RmaCounters rma_counters() const noexcept { return rma_ ? rma_->counters() : RmaCounters{}; }
  // ucp_ep_print_info's text for each queue pair's endpoint, in connect order (kept after
  // the queue pair is gone): which transports and devices UCX selected.
  const std::vector<std::string>& endpoint_descriptions() const noexcept { return endpoint_descriptions_; }

 private:
  friend ucx::QueuePair;
  friend class RmaEngine;
  // An RMA operation of `qp` at send-queue position `seq` completed (ok) or failed.
  void rma_done(QueuePair& qp, uint64_t seq, bool ok);
  // progress() after ucp_worker_progress, when the handlers queued something: starts
  // rendezvous receives, sends queued replies, resumes held requests.
  [[gnu::noinline]] void after_progress();
  static constexpr uint32_t kNode = 0;  // owner of every region in memory_
  using SendEntry = software_nic::SendCqEntry<QueuePair*>;
  struct Outgoing {  // a reply the handlers queued, sent after ucp_worker_progress returns
    QueuePair* qp;
    AmHeader header;
    const void* data;
  };
  struct SendSlot {  // keeps an AM header alive until UCX completes the send
    QueuePair* qp;
    AmHeader header;
  };
  struct RndvRecv {  // a rendezvous payload to fetch after ucp_worker_progress returns
    void* desc;
    void* buffer;
    size_t length;
    QueuePair* qp;
    uint64_t seq;
    bool is_response;
  };
  struct Impl;  // the UCX-facing functions (ucx_transport.cpp)
  // Work for after_progress(): the only ways onto rndv_, outgoing_ and rma_resume_, so
  // that work_queued_ is set whenever one of them is non-empty.
  void queue_rndv(const RndvRecv& r) {
    rndv_.push_back(r);
    work_queued_ = true;
  }
  void queue_outgoing(const Outgoing& o) {
    outgoing_.push_back(o);
    work_queued_ = true;
  }
  void queue_resume(QueuePair* qp) {
    rma_resume_.push_back(qp);
    work_queued_ = true;
  }

  Config config_;
  ucp_context* context_ = nullptr;
  ucp_worker* worker_ = nullptr;
  std::vector<std::byte> address_;  // packed worker address
  software_nic::MemoryTable memory_;  // this worker's regions only: the owner is always kNode
  std::vector<std::unique_ptr<QueuePair>> qps_;
  software_nic::SharedReceiveQueue srq_;
  software_nic::CompletionQueue<RecvCompletion> recv_cq_;
  software_nic::CompletionQueue<SendEntry> send_cq_;
  software_nic::Responder responder_;
  std::vector<Outgoing> outgoing_;
  std::vector<RndvRecv> rndv_;
  std::vector<std::unique_ptr<SendSlot>> send_slots_;
  std::vector<SendSlot*> free_send_slots_;
  // The slot the next send uses: a send UCX completes in place leaves it here for the
  // one after (the common case: UCX's short and bcopy paths).
  SendSlot* spare_send_slot_ = nullptr;
  bool closing_ = false;
  bool recv_progressed_ = false;  // a poll_recv() progressed since the last poll_send()
  // rndv_, outgoing_ or rma_resume_ may be non-empty: set by queue_*(), recomputed by
  // after_progress(), so that progress() tests one flag.
  bool work_queued_ = false;
  // Whether a queue pair's endpoint may ask for peer error handling: only when the
  // transport list rules shared memory out (UCX_TLS=tcp, say: none offers it over shared
  // memory in UCX 1.13, and asking for it elsewhere makes UCX avoid shared memory), and
  // not once UCX refused it on this worker (a refusal logs a UCX error line; one is enough).
  bool try_peer_error_handling_ = false;
  std::vector<std::string> endpoint_descriptions_;
  uint64_t inflight_requests_ = 0;  // UCX requests not yet completed
  uint64_t protocol_errors_ = 0;
  uint64_t rendezvous_receives_ = 0;
  uint64_t parked_requests_ = 0;
  Meter meter_;
  std::unique_ptr<RmaEngine> rma_;         // destroyed before the worker (explicitly, in the destructor)
  std::vector<QueuePair*> rma_resume_;     // queue pairs whose held requests may go now
};

static_assert(Transport<UcxTransport>);

}  // namespace bkv::ucx
