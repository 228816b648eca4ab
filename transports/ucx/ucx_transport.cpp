// UCX side of the UCX transport: context/worker/endpoint control path, the AM handler
// (the responder "NIC") and the reply path. See ucx_transport.hpp for the semantics.
#include "transports/ucx/ucx_transport.hpp"

#include <ucp/api/ucp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "core/ucp_basics.hpp"

namespace bkv::ucx {

namespace {

constexpr uint64_t kMaxParkAhead = 1u << 16;  // a request this far ahead of the expected one is bogus
constexpr uint64_t kMaxReportedErrors = 5;    // protocol errors printed on stderr (all are counted)

[[noreturn]] void fail(const char* what, ucs_status_t status) {
  throw std::runtime_error(std::string("ucx transport: ") + what + " failed: " + ucs_status_string(status));
}

// The AM request that carries a work request of opcode `op` (a table at namespace
// scope: one load, not an array built on the stack per call).
constexpr AmOp kRequestOpByOpcode[] = {AmOp::kWrite, AmOp::kWriteImm, AmOp::kReadRequest};  // indexed by WcOpcode
static_assert(static_cast<int>(WcOpcode::kRdmaWrite) == 0 && static_cast<int>(WcOpcode::kRdmaWriteImm) == 1 &&
              static_cast<int>(WcOpcode::kRdmaRead) == 2);
constexpr AmOp request_op(WcOpcode op) noexcept { return kRequestOpByOpcode[static_cast<uint8_t>(op)]; }

// Whether UCX may use its shared-memory FIFOs (posix, sysv) with this UCX_TLS list ("" =
// UCX's default, all; "^a,b" = all but a and b; "sm"/"shm" = every shared-memory
// transport, "mm" = posix and sysv). A FIFO setting no transport uses makes UCX warn.
bool may_use_shm_fifos(const std::string& tls) {
  if (tls.empty()) return true;
  const bool exclude = tls.front() == '^';
  bool all = false, group = false, posix = false, sysv = false;
  size_t pos = exclude ? 1 : 0;
  while (pos <= tls.size()) {
    const size_t end = std::min(tls.find(',', pos), tls.size());
    const std::string name = tls.substr(pos, end - pos);
    all |= name == "all";
    group |= name == "sm" || name == "shm" || name == "mm";
    posix |= name == "posix";
    sysv |= name == "sysv";
    pos = end + 1;
  }
  if (exclude) return !(group || (posix && sysv));
  return all || group || posix || sysv;
}

// Whether this UCX_TLS list names shared-memory transports (and self) only, none of
// which offers peer error handling in UCX 1.13 ("" and "^..." lists may hold others).
// Whether the transport list rules shared memory out: a list of transports (not UCX's
// default, "all" or an exclusion list "^a,b") none of which moves data through shared
// memory ("self", a worker to itself, is not one).
bool excludes_shared_memory(const std::string& tls) {
  if (tls.empty() || tls.front() == '^') return false;
  size_t pos = 0;
  while (pos <= tls.size()) {
    const size_t end = std::min(tls.find(',', pos), tls.size());
    const std::string name = tls.substr(pos, end - pos);
    if (name == "all" || name == "sm" || name == "shm" || name == "mm" || name == "posix" || name == "sysv" ||
        name == "cma" || name == "knem" || name == "xpmem")
      return false;
    pos = end + 1;
  }
  return true;
}

// What ucp_ep_print_info says about an endpoint: its lanes, each with the transport and
// device it uses and what it carries (the app reads it: provenance.ucx_transports).
std::string describe_endpoint(ucp_ep_h ep) {
  char* text = nullptr;
  size_t length = 0;
  FILE* f = open_memstream(&text, &length);
  if (f == nullptr) return "";
  ucp_ep_print_info(ep, f);
  std::fclose(f);
  std::string out(text, length);
  std::free(text);
  return out;
}

}  // namespace

struct UcxTransport::Impl {
  // ---- helpers shared by both roles ----
  static void protocol_error(UcxTransport& t, const char* what) {
    if (t.protocol_errors_++ < kMaxReportedErrors)
      std::fprintf(stderr, "ucx transport: dropped a message: %s\n", what);
  }

  static AmHeader reply_header(const QueuePair& qp, AmOp op, uint64_t seq) {
    AmHeader h = qp.header_template_;
    h.op = op;
    h.seq = seq;
    return h;
  }

  [[gnu::always_inline]] static SendSlot& spare_send_slot(UcxTransport& t) {
    if (t.spare_send_slot_ != nullptr) [[likely]] return *t.spare_send_slot_;
    return new_spare_send_slot(t);
  }
  static SendSlot& new_spare_send_slot(UcxTransport& t) {
    if (t.free_send_slots_.empty()) {
      t.send_slots_.push_back(std::make_unique<SendSlot>());
      t.spare_send_slot_ = t.send_slots_.back().get();
    } else {
      t.spare_send_slot_ = t.free_send_slots_.back();
      t.free_send_slots_.pop_back();
    }
    return *t.spare_send_slot_;
  }

  static void send(UcxTransport& t, QueuePair& qp, const AmHeader& h, const void* data, size_t len) {
    SendSlot& slot = spare_send_slot(t);
    slot.header = h;
    send_slot(t, qp, slot, data, len);
  }

  // Sends the header the caller built in `slot` (the spare slot) and `len` bytes of
  // payload. Inline: submit() builds every request's header in the slot itself.
  [[gnu::always_inline]] static void send_slot(UcxTransport& t, QueuePair& qp, SendSlot& slot, const void* data,
                                               size_t len) {
    slot.qp = &qp;
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = &Impl::on_send_done;
    p.user_data = &slot;
    ucs_status_ptr_t r = ucp_am_send_nbx(qp.ep_, kAmId, &slot.header, sizeof(AmHeader), data, len, &p);
    if (r == nullptr) [[likely]] return;  // done in place: the slot stays the spare
    if (UCS_PTR_IS_ERR(r)) {
      transport_failure(t, qp);
      return;
    }
    t.spare_send_slot_ = nullptr;  // UCX holds the header until on_send_done
    ++t.inflight_requests_;
  }

  static void on_send_done(void* request, ucs_status_t status, void* user_data) {
    auto* slot = static_cast<SendSlot*>(user_data);
    UcxTransport& t = *slot->qp->owner_;
    --t.inflight_requests_;
    t.free_send_slots_.push_back(slot);
    ucp_request_free(request);
    if (status != UCS_OK && status != UCS_ERR_CANCELED && !t.closing_) transport_failure(t, *slot->qp);
  }

  static void on_ep_error(void* arg, ucp_ep_h, ucs_status_t) {
    auto* qp = static_cast<QueuePair*>(arg);
    if (!qp->owner_->closing_) transport_failure(*qp->owner_, *qp);
  }

  // ---- requester role ----

  // The responder executed every request below `end` (it runs them in order): those
  // that wait only for that fact are done. READs wait for their data instead.
  static void executed_below(QueuePair& qp, uint64_t end) {
    for (uint64_t s = qp.completed_; s < end; ++s) {
      QueuePair::Wqe& w = qp.wqe(s);
      if (w.rma) continue;  // completes by its own UCX request
      if (w.opcode != WcOpcode::kRdmaRead || w.status != WcStatus::kSuccess) w.done = true;
    }
  }

  // executed_below(qp, end) and then queue_completions in one pass, for an ACK: while
  // every request before it has completed, a request that became done completes at
  // once; the rest of the range is only marked (queue_completions picks it up later).
  static void acknowledged_below(UcxTransport& t, QueuePair& qp, uint64_t end) {
    for (uint64_t s = qp.completed_; s < end; ++s) {
      QueuePair::Wqe& w = qp.wqe(s);
      if (!w.rma && (w.opcode != WcOpcode::kRdmaRead || w.status != WcStatus::kSuccess)) w.done = true;
      if (s == qp.completed_ && w.done) queue_completion(t, qp, w);
    }
  }

  // The oldest outstanding request is done: its completion (if any) goes to the CQ.
  [[gnu::always_inline]] static void queue_completion(UcxTransport& t, QueuePair& qp, const QueuePair::Wqe& w) {
    if (w.signaled || w.status != WcStatus::kSuccess)
      t.send_cq_.push(SendEntry{SendCompletion{qp.qp_num_, w.wr_id, w.opcode, w.status}, &qp, qp.completed_});
    ++qp.completed_;
  }

  // Queues the completions of finished requests, in send-queue order. Only signalled
  // requests and failures produce a completion (as verbs). Inline: most calls (every
  // doorbell) find the oldest outstanding request not done and return at once.
  [[gnu::always_inline]] static void advance_completions(UcxTransport& t, QueuePair& qp) {
    if (qp.completed_ < qp.submitted_ && qp.wqe(qp.completed_).done) queue_completions(t, qp);
  }
  static void queue_completions(UcxTransport& t, QueuePair& qp) {
    while (qp.completed_ < qp.submitted_ && qp.wqe(qp.completed_).done) queue_completion(t, qp, qp.wqe(qp.completed_));
  }

  static void flush(QueuePair::Wqe& w, WcStatus status) noexcept {
    if (!w.done && !w.receiving) {
      w.done = true;
      w.status = status;
    }
  }

  // Moves the queue pair to the error state: both roles stop. Requests not yet sent are
  // flushed here; those in flight are answered by the peer (ACK/READ response if it ran
  // them first, else a flush NAK), so they still complete in order and the peer never
  // touches a buffer after its request completed.
  static void enter_error(UcxTransport& t, QueuePair& qp) {
    qp.state_ = QueuePair::State::kError;
    stop_responder(t, qp);
    for (uint64_t s = qp.submitted_; s < qp.slots_.posted(); ++s) flush(qp.wqe(s), WcStatus::kWrFlushError);
    qp.submitted_ = qp.slots_.posted();
    advance_completions(t, qp);
  }

  // UCX reported a failure on this queue pair's endpoint (peer gone, connection lost):
  // no answer will come, so requests in flight are flushed too, the oldest with
  // kRetryExceeded.
  static void transport_failure(UcxTransport& t, QueuePair& qp) {
    if (qp.completed_ < qp.submitted_) flush(qp.wqe(qp.completed_), WcStatus::kRetryExceeded);
    for (uint64_t s = qp.completed_; s < qp.submitted_; ++s) flush(qp.wqe(s), WcStatus::kWrFlushError);
    enter_error(t, qp);
  }

  static ucs_status_t handle_response(UcxTransport& t, QueuePair& qp, const AmHeader& h, void* data,
                                      size_t length, bool rndv) {
    if (h.seq >= qp.am_next_) {
      protocol_error(t, "response for a request that was never sent");
      return UCS_OK;
    }
    // The AM number back to the send-queue position; one older than the last `depth` AM
    // requests lies below completed_ (at most `depth` requests are outstanding).
    if (qp.am_next_ - h.seq > qp.slots_.depth()) return UCS_OK;
    const uint64_t pos = qp.am_position_[h.seq & (qp.slots_.depth() - 1)];
    if (pos < qp.completed_) return UCS_OK;  // already settled
    switch (h.op) {
      case AmOp::kAck:
        acknowledged_below(t, qp, pos + 1);  // pos < submitted_: the request was sent
        if (qp.state_ == QueuePair::State::kErrorPending && qp.fence_seq_ <= pos) {
          advance_completions(t, qp);
          enter_error(t, qp);
        }
        break;
      case AmOp::kNak: {
        if (h.status == static_cast<uint8_t>(WcStatus::kRemoteAccessError)) {
          executed_below(qp, pos);  // the responder ran everything before it
        } else if (h.status != static_cast<uint8_t>(WcStatus::kWrFlushError)) {
          protocol_error(t, "NAK with an invalid status");
          return UCS_OK;
        }
        QueuePair::Wqe& w = qp.wqe(pos);
        if (w.receiving) {
          protocol_error(t, "NAK for a READ whose data is arriving");
          return UCS_OK;
        }
        w.done = true;
        w.status = static_cast<WcStatus>(h.status);
        // A flush NAK stands for the silence of an RC queue pair in the error state: a
        // requester not in error itself hears nothing and its retries run out.
        if (w.status == WcStatus::kWrFlushError && qp.state_ == QueuePair::State::kReady)
          w.status = WcStatus::kRetryExceeded;
        advance_completions(t, qp);
        enter_error(t, qp);
        break;
      }
      case AmOp::kReadResponse: {
        QueuePair::Wqe& w = qp.wqe(pos);
        if (w.opcode != WcOpcode::kRdmaRead || w.rma || w.done || w.receiving || w.length != h.length) {
          protocol_error(t, "READ response does not match the READ request");
          return UCS_OK;
        }
        executed_below(qp, pos);
        if (rndv) {
          w.receiving = true;
          t.queue_rndv(RndvRecv{data, w.local, length, &qp, pos, true});
          advance_completions(t, qp);
          return UCS_INPROGRESS;
        }
        if (length > 0) std::memcpy(w.local, data, length);
        w.done = true;
        break;
      }
      default:
        protocol_error(t, "unexpected response op");
        return UCS_OK;
    }
    advance_completions(t, qp);
    return UCS_OK;
  }

  // ---- responder role ----

  static software_nic::InboundWrite inbound_write(const AmHeader& h) noexcept {
    return software_nic::InboundWrite{h.op == AmOp::kWriteImm ? WcOpcode::kRdmaWriteImm : WcOpcode::kRdmaWrite,
                                      h.remote_addr, h.rkey, h.length, h.imm};
  }

  static void queue_ack(UcxTransport& t, QueuePair& qp, uint64_t seq) {
    if (!t.outgoing_.empty()) {
      Outgoing& last = t.outgoing_.back();
      if (last.qp == &qp && last.header.op == AmOp::kAck) {  // coalesce: a later ACK covers the earlier
        last.header.seq = seq;
        return;
      }
    }
    t.queue_outgoing(Outgoing{&qp, reply_header(qp, AmOp::kAck, seq), nullptr});
  }

  static void queue_nak(UcxTransport& t, QueuePair& qp, uint64_t seq, WcStatus status) {
    AmHeader h = reply_header(qp, AmOp::kNak, seq);
    h.status = static_cast<uint8_t>(status);
    t.queue_outgoing(Outgoing{&qp, h, nullptr});
  }

  // The responder role stops: waiting requests are answered with a flush NAK (one whose
  // payload UCX is still writing gets it when the payload has arrived).
  static void stop_responder(UcxTransport& t, QueuePair& qp) {
    qp.responder_error_ = true;
    for (auto it = qp.parked_.begin(); it != qp.parked_.end();) {
      if (it->second.receiving) {
        ++it;
        continue;
      }
      queue_nak(t, qp, it->first, WcStatus::kWrFlushError);
      it = qp.parked_.erase(it);
    }
  }

  // A request violated the responder's memory protection.
  static void nak(UcxTransport& t, QueuePair& qp, uint64_t seq, WcStatus status) {
    queue_nak(t, qp, seq, status);
    enter_error(t, qp);
  }

  // Executes one request in order. Returns false when it must wait (no receive posted).
  // Inline: it runs once per request (handle_request, and drain for parked ones).
  [[gnu::always_inline]] static bool execute(UcxTransport& t, QueuePair& qp, const AmHeader& h, const std::byte* data) {
    const bool ack = (h.flags & kFlagAckRequested) != 0;
    switch (h.op) {
      case AmOp::kNop:
        break;
      case AmOp::kWrite:
      case AmOp::kWriteImm: {
        switch (t.responder_.write(qp.qp_num_, inbound_write(h), data)) {
          case software_nic::ResponderStatus::kReceiverNotReady:
            return false;  // retried after post_receives
          case software_nic::ResponderStatus::kRemoteAccessError:
            nak(t, qp, h.seq, WcStatus::kRemoteAccessError);
            return true;
          case software_nic::ResponderStatus::kExecuted:
            break;
        }
        break;
      }
      case AmOp::kReadRequest: {
        const software_nic::Access src = t.responder_.check_read(h.remote_addr, h.length, h.rkey);
        if (!src.ok) {
          nak(t, qp, h.seq, WcStatus::kRemoteAccessError);
          return true;
        }
        AmHeader r = reply_header(qp, AmOp::kReadResponse, h.seq);
        r.length = h.length;
        t.queue_outgoing(Outgoing{&qp, r, src.host});
        return true;  // the response acknowledges everything before it
      }
      default:
        break;
    }
    if (ack) queue_ack(t, qp, h.seq);
    return true;
  }

  // A WRITE whose rendezvous payload UCX placed directly: only the completion is left.
  static void finish_direct(UcxTransport& t, QueuePair& qp, const AmHeader& h) {
    if (h.op == AmOp::kWriteImm) t.responder_.complete_receive(qp.qp_num_, inbound_write(h));
    if ((h.flags & kFlagAckRequested) != 0) queue_ack(t, qp, h.seq);
  }

  // Runs parked requests that are now in order and runnable.
  static void drain(UcxTransport& t, QueuePair& qp) {
    while (!qp.parked_.empty() && !qp.responder_error_) {
      auto it = qp.parked_.begin();
      if (it->first != qp.expected_ || it->second.receiving) break;
      const uint64_t seq = it->first;
      QueuePair::Parked p = std::move(it->second);
      qp.parked_.erase(it);  // out of the map first: a failure below flushes the rest
      if (p.direct) {
        finish_direct(t, qp, p.header);
      } else if (!execute(t, qp, p.header, p.data.data())) {
        qp.parked_.emplace(seq, std::move(p));  // receiver not ready: stays first in line
        break;
      }
      if (!qp.responder_error_) ++qp.expected_;
    }
  }

  // The request handler. Inline in on_am: the common case is the next request in order
  // with its payload here, nothing parked and the responder running; equal to expected_
  // it lies inside the window, and with nothing parked it is no duplicate.
  [[gnu::always_inline]] static ucs_status_t handle_request(UcxTransport& t, QueuePair& qp, const AmHeader& h,
                                                            void* data, size_t length, bool rndv) {
    if (!rndv && h.seq == qp.expected_ && qp.parked_.empty() && !qp.responder_error_) [[likely]] {
      if (execute(t, qp, h, static_cast<const std::byte*>(data))) {
        if (!qp.responder_error_) ++qp.expected_;
        return UCS_OK;
      }
      return park(t, qp, h, data, length, false);  // receiver not ready
    }
    return handle_other_request(t, qp, h, data, length, rndv);
  }

  // Every other request: responder in error, out of order, or a rendezvous payload.
  static ucs_status_t handle_other_request(UcxTransport& t, QueuePair& qp, const AmHeader& h, void* data,
                                           size_t length, bool rndv) {
    if (qp.responder_error_) {  // RC responder in error: flush it (a payload is dropped)
      queue_nak(t, qp, h.seq, WcStatus::kWrFlushError);
      return UCS_OK;
    }
    if (h.seq < qp.expected_ || h.seq - qp.expected_ > kMaxParkAhead || qp.parked_.count(h.seq) != 0) {
      protocol_error(t, "request sequence number out of window or duplicated");
      return UCS_OK;
    }
    const bool in_order = h.seq == qp.expected_ && qp.parked_.empty();
    // (in order without rendezvous is handle_request's case: not here)
    if (rndv && in_order && (h.op == AmOp::kWrite || h.op == AmOp::kWriteImm) &&
        (h.op == AmOp::kWrite || !t.srq_.empty())) {
      // Next in order: check now, take the receive, and let UCX place the bytes.
      std::byte* dst = nullptr;
      if (t.responder_.check_write(inbound_write(h), &dst) != software_nic::ResponderStatus::kExecuted) {
        nak(t, qp, h.seq, WcStatus::kRemoteAccessError);
        return UCS_OK;  // the rendezvous payload is dropped
      }
      if (h.op == AmOp::kWriteImm) t.responder_.take_receive();
      QueuePair::Parked& p = qp.parked_[h.seq];
      p.header = h;
      p.receiving = true;
      p.direct = true;
      t.queue_rndv(RndvRecv{data, dst, length, &qp, h.seq, false});
      return UCS_INPROGRESS;
    }
    const ucs_status_t status = park(t, qp, h, data, length, rndv);
    // The expected request itself, with its payload here, behind later ones parked
    // before it: it and the ones after it run now (nothing else would start them).
    if (!rndv && h.seq == qp.expected_) drain(t, qp);
    return status;
  }

  // The request must wait (out of order, or receiver not ready): parked with a copy of
  // its payload, or with a buffer its rendezvous payload is received into.
  static ucs_status_t park(UcxTransport& t, QueuePair& qp, const AmHeader& h, void* data, size_t length, bool rndv) {
    ++t.parked_requests_;
    QueuePair::Parked& p = qp.parked_[h.seq];
    p.header = h;
    if (rndv) {
      p.data.resize(length);
      p.receiving = true;
      t.queue_rndv(RndvRecv{data, p.data.data(), length, &qp, h.seq, false});
      return UCS_INPROGRESS;
    }
    const auto* bytes = static_cast<const std::byte*>(data);
    p.data.assign(bytes, bytes + length);
    return UCS_OK;
  }

  // ---- the AM handler: validates the header, then dispatches by role ----
  static ucs_status_t on_am(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param) {
    UcxTransport& t = *static_cast<UcxTransport*>(arg);
    if (t.closing_) return UCS_OK;
    const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    AmHeader h;
    if (const char* error = am_header_error(header, header_length, h)) {
      protocol_error(t, error);
      return UCS_OK;
    }
    QueuePair* qp = t.find_queue_pair(h.dst_qp);
    if (qp == nullptr || !qp->connected() || h.dst_token != qp->token_ || h.src_qp != qp->remote_qp_ ||
        h.src_token != qp->remote_token_) {
      protocol_error(t, "message for an unknown queue pair or from a stranger");
      return UCS_OK;
    }
    if (const char* error = am_payload_error(h, length)) {
      protocol_error(t, error);
      return UCS_OK;
    }
    return is_request(h.op) ? handle_request(t, *qp, h, data, length, rndv)
                            : handle_response(t, *qp, h, data, length, rndv);
  }

  // ---- rendezvous payloads: fetched after ucp_worker_progress returns ----
  struct RecvCtx {
    UcxTransport* t;
    QueuePair* qp;
    uint64_t seq;
    bool is_response;
  };

  static void finish_recv(const RecvCtx& c, ucs_status_t status) {
    UcxTransport& t = *c.t;
    QueuePair& qp = *c.qp;
    if (c.is_response) {
      QueuePair::Wqe& w = qp.wqe(c.seq);
      w.receiving = false;
      w.done = true;
      if (status != UCS_OK) w.status = WcStatus::kGeneralError;
      advance_completions(t, qp);
      if (status != UCS_OK) enter_error(t, qp);
      return;
    }
    auto it = qp.parked_.find(c.seq);
    if (it == qp.parked_.end()) return;
    it->second.receiving = false;
    if (status != UCS_OK) {
      protocol_error(t, "rendezvous payload could not be received");
      enter_error(t, qp);  // answers it (and everything waiting) with a flush NAK
      return;
    }
    if (qp.responder_error_) {
      stop_responder(t, qp);
      return;
    }
    drain(t, qp);
  }

  static void on_recv_done(void* request, ucs_status_t status, size_t, void* user_data) {
    auto* ctx = static_cast<RecvCtx*>(user_data);
    --ctx->t->inflight_requests_;
    ucp_request_free(request);
    if (!ctx->t->closing_) finish_recv(*ctx, status);
    delete ctx;
  }

  static void start_rndv(UcxTransport& t) {
    std::vector<RndvRecv> pending;
    pending.swap(t.rndv_);
    for (const RndvRecv& r : pending) {
      ++t.rendezvous_receives_;
      auto* ctx = new RecvCtx{&t, r.qp, r.seq, r.is_response};
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.recv_am = &Impl::on_recv_done;
      p.user_data = ctx;
      ucs_status_ptr_t s = ucp_am_recv_data_nbx(t.worker_, r.desc, r.buffer, r.length, &p);
      if (UCS_PTR_IS_PTR(s)) {
        ++t.inflight_requests_;
        continue;
      }
      finish_recv(*ctx, UCS_PTR_STATUS(s));
      delete ctx;
    }
  }

  static void flush_outgoing(UcxTransport& t) {
    std::vector<Outgoing> out;
    out.swap(t.outgoing_);
    for (const Outgoing& o : out) {
      if (o.qp->ep_ == nullptr) continue;
      send(t, *o.qp, o.header, o.data, o.header.op == AmOp::kReadResponse ? o.header.length : 0);
    }
    out.clear();
    if (t.outgoing_.empty()) t.outgoing_.swap(out);  // keep the capacity
  }
};

// ---------------------------------------------------------------------------------------

QueuePair::QueuePair(UcxTransport& owner, uint32_t qp_num, uint32_t depth, uint64_t token)
    : owner_(&owner), qp_num_(qp_num), token_(token), slots_(depth), sq_(depth), am_position_(depth) {}

ConnectInfo QueuePair::local_info() const {
  ConnectInfo info{};
  info.magic = kConnectMagic;
  info.qp_num = qp_num_;
  info.address_length = static_cast<uint32_t>(owner_->address_.size());
  info.token = token_;
  std::memcpy(info.address, owner_->address_.data(), owner_->address_.size());
  return info;
}

void QueuePair::connect(const ConnectInfo& remote) {
  if (ep_ != nullptr) throw std::logic_error("ucx transport: queue pair " + std::to_string(qp_num_) + " is already connected");
  if (remote.magic != kConnectMagic)
    throw std::invalid_argument("ucx transport: connect: the blob is not a UCX ConnectInfo (bad magic)");
  if (remote.address_length == 0 || remote.address_length > kMaxWorkerAddress)
    throw std::invalid_argument("ucx transport: connect: worker address length " +
                                std::to_string(remote.address_length) + " is outside 1.." +
                                std::to_string(kMaxWorkerAddress));
  if (remote.qp_num < kQpNumBase)
    throw std::invalid_argument("ucx transport: connect: invalid peer queue-pair number " +
                                std::to_string(remote.qp_num));
  ucp_ep_params_t p{};
  // Peer error handling (a failed peer fails this endpoint's requests and calls
  // on_ep_error, which puts the queue pair in error) where the transports offer it;
  // UCX 1.13 has none over shared memory, where ucp_ep_create refuses PEER mode: then
  // mode NONE, and a lost peer is caught by the run's watchdog (docs/interruptions.md).
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                 UCP_EP_PARAM_FIELD_ERR_HANDLER;
  p.address = reinterpret_cast<const ucp_address_t*>(remote.address);
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = &UcxTransport::Impl::on_ep_error;
  p.err_handler.arg = this;
  ucp_ep_h ep = nullptr;
  ucs_status_t st = UCS_ERR_UNSUPPORTED;
  if (owner_->try_peer_error_handling_) {
    st = ucp_ep_create(owner_->worker_, &p, &ep);
    owner_->try_peer_error_handling_ = st == UCS_OK;
  }
  peer_error_handling_ = st == UCS_OK;
  if (st != UCS_OK) {
    p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    st = ucp_ep_create(owner_->worker_, &p, &ep);
  }
  if (st != UCS_OK) fail("ucp_ep_create", st);
  ep_ = ep;
  owner_->endpoint_descriptions_.push_back(describe_endpoint(ep));
  remote_qp_ = remote.qp_num;
  remote_token_ = remote.token;
  header_template_.dst_qp = remote_qp_;
  header_template_.src_qp = qp_num_;
  header_template_.dst_token = remote_token_;
  header_template_.src_token = token_;
  if (owner_->rma_) owner_->rma_->on_connect(*this);
}

void QueuePair::ring_doorbell() {
  doorbell_end_ = slots_.posted();
  submit();
}

void QueuePair::submit() {
  UcxTransport& t = *owner_;
  bool rma_issued = false;  // an RMA operation left this doorbell: its WRITEs need a flush
  while (submitted_ < doorbell_end_) {
    const uint64_t seq = submitted_;
    Wqe& w = wqe(seq);
    if (state_ != State::kReady || ep_ == nullptr) [[unlikely]] {
      if (state_ == State::kErrorPending) break;  // held until the fence is acknowledged
      w.done = true;  // kError, or not connected
      w.status = WcStatus::kWrFlushError;
      ++submitted_;
      continue;
    }
    const bool is_read = w.opcode == WcOpcode::kRdmaRead;
    // Local protection (lkey, bounds, write access for a READ destination), checked
    // when the "NIC" picks the request up.
    const bool local_ok =
        software_nic::check_local_access(t.memory_, UcxTransport::kNode, w.opcode, w.local, w.length, w.lkey).ok;
    // ---- RMA hook (ucx_rma.hpp): READ / WRITE as ucp_get / ucp_put where announced ----
    if (w.opcode != WcOpcode::kRdmaWriteImm && t.rma_ && local_ok) {
      const RmaEngine::Route route = t.rma_->route(*this, seq);
      if (route == RmaEngine::Route::kHold) break;
      if (route == RmaEngine::Route::kRma) {
        // Earlier AM requests sent without an ACK request complete only when an ACK
        // covers them: ask for one (a NOP) so this request's completion is not stuck
        // behind them.
        if (am_unacknowledged_) {
          AmHeader nop = header_template_;
          nop.op = AmOp::kNop;
          nop.flags = kFlagAckRequested;
          am_position_[am_next_ & (slots_.depth() - 1)] = seq - 1;  // covers everything before this request
          nop.seq = am_next_++;
          am_unacknowledged_ = false;
          UcxTransport::Impl::send(t, *this, nop, nullptr, 0);
          if (state_ != State::kReady) continue;  // the send failed: the queue pair flushed this request
        }
        ++submitted_;  // handed over first: the engine may complete (or fail) it at once
        rma_issued = true;
        t.rma_->issue(*this, seq);
        continue;
      }
    }
    if (rma_inflight_ > 0) [[unlikely]] {  // an AM request goes after every earlier RMA operation completed
      t.rma_->flush_writes(*this);
      if (rma_inflight_ > 0) {  // resumed by rma_done
        t.rma_->count_hold();
        break;
      }
    }
    // ---- end of the RMA hook ----
    // The header is built in the send slot UCX reads it from (no copy of it).
    UcxTransport::SendSlot& slot = UcxTransport::Impl::spare_send_slot(t);
    AmHeader& h = slot.header;
    h = header_template_;
    am_position_[am_next_ & (slots_.depth() - 1)] = seq;
    h.seq = am_next_++;
    h.remote_addr = w.remote_addr;
    h.rkey = w.rkey;
    h.length = w.length;
    h.imm = w.imm;
    h.flags = w.signaled ? kFlagAckRequested : 0;
    am_unacknowledged_ = !w.signaled;
    if (!local_ok) [[unlikely]] {
      w.status = WcStatus::kLocalProtectionError;
      h.op = AmOp::kNop;
      h.flags = kFlagAckRequested;
      h.length = 0;
      state_ = State::kErrorPending;
      fence_seq_ = seq;
      ++submitted_;
      UcxTransport::Impl::send_slot(t, *this, slot, nullptr, 0);
      break;
    }
    h.op = request_op(w.opcode);
    ++submitted_;
    UcxTransport::Impl::send_slot(t, *this, slot, is_read ? nullptr : w.local, is_read ? 0 : w.length);
  }
  // The WRITEs of this doorbell complete at their flush (issue() is called only here, and
  // every submit() ends with this flush: no earlier WRITE is left unflushed).
  if (rma_issued) t.rma_->flush_writes(*this);
  UcxTransport::Impl::advance_completions(t, *this);
}

void UcxTransport::rma_done(QueuePair& qp, uint64_t seq, bool ok) {
  if (closing_) return;
  QueuePair::Wqe& w = qp.wqe(seq);
  if (!w.rma || !w.receiving) return;  // already settled (a failed WRITE's later flush)
  w.receiving = false;
  --qp.rma_inflight_;
  if (!ok) {
    Impl::transport_failure(*this, qp);  // the oldest request: kRetryExceeded, the rest flushed
  } else {
    w.done = true;
    if (qp.state_ == QueuePair::State::kError) w.status = WcStatus::kWrFlushError;
  }
  Impl::advance_completions(*this, qp);
  if (qp.submitted_ < qp.doorbell_end_ && !qp.resume_queued_) {
    qp.resume_queued_ = true;
    queue_resume(&qp);
  }
}

// ---------------------------------------------------------------------------------------

UcxTransport::UcxTransport(const Config& config)
    : config_(config), srq_(config.srq_capacity), responder_(memory_, kNode, srq_, recv_cq_) {
  if (!std::has_single_bit(config.send_queue_depth))
    throw std::invalid_argument("ucx transport: send_queue_depth must be a power of two (got " +
                                std::to_string(config.send_queue_depth) + ")");
  if (config.srq_capacity == 0) throw std::invalid_argument("ucx transport: srq_capacity must be positive");
  if (config.shm_fifo_element_size != 0 && (config.shm_fifo_element_size < kMinShmFifoElementSize ||
                                            config.shm_fifo_element_size > kMaxShmFifoElementSize))
    throw std::invalid_argument("ucx transport: shm_fifo_element_size " + std::to_string(config.shm_fifo_element_size) +
                                " is outside " + std::to_string(kMinShmFifoElementSize) + ".." +
                                std::to_string(kMaxShmFifoElementSize) + " (0 = UCX's setting)");
  ucp_config_t* cfg = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &cfg);
  if (st != UCS_OK) fail("ucp_config_read", st);
  if (!config.tls.empty()) {
    st = ucp_config_modify(cfg, "TLS", config.tls.c_str());
    if (st != UCS_OK) {
      ucp_config_release(cfg);
      throw std::invalid_argument("ucx transport: bad transport list '" + config.tls + "': " + ucs_status_string(st));
    }
  }
  const char* env_tls = std::getenv("UCX_TLS");
  const std::string tls = !config.tls.empty() ? config.tls : env_tls != nullptr ? env_tls : "";
  // A FIFO size the user set in the environment wins: the transport's own is a default.
  // Peer error handling only where shared memory cannot be chosen: UCX 1.13 has none over
  // shared memory, and asking for it makes UCX pick TCP even between ranks of one host,
  // where the ucx-am baseline (mode NONE) gets shared memory: both modes select the same
  // transports whenever the list rules shared memory out (docs/interruptions.md).
  try_peer_error_handling_ = excludes_shared_memory(tls);
  const bool env_sets_fifo = std::getenv("UCX_MM_FIFO_ELEM_SIZE") != nullptr ||
                             std::getenv("UCX_POSIX_FIFO_ELEM_SIZE") != nullptr ||
                             std::getenv("UCX_SYSV_FIFO_ELEM_SIZE") != nullptr;
  if (config.shm_fifo_element_size != 0 && !env_sets_fifo && may_use_shm_fifos(tls)) {
    const std::string size = std::to_string(config.shm_fifo_element_size);
    // "MM_" reaches the table posix and sysv share (UCX 1.13 ignores "POSIX_..."/"SYSV_..." here).
    st = ucp_config_modify(cfg, "MM_FIFO_ELEM_SIZE", size.c_str());
    if (st != UCS_OK) {
      ucp_config_release(cfg);
      throw std::invalid_argument("ucx transport: bad shared-memory FIFO element size " + size + ": " +
                                  ucs_status_string(st));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | (config.rma ? UCP_FEATURE_RMA : 0);
  st = ucp_init(&params, cfg, &context_);
  ucp_config_release(cfg);
  if (st != UCS_OK) fail("ucp_init", st);
  try {
    st = ucp::create_single_thread_worker(context_, &worker_);
    if (st != UCS_OK) fail("ucp_worker_create", st);
    ucp_worker_attr_t attr{};
    attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    st = ucp_worker_query(worker_, &attr);
    if (st != UCS_OK) fail("ucp_worker_query", st);
    const size_t addr_len = attr.address_length;
    address_.assign(reinterpret_cast<const std::byte*>(attr.address),
                    reinterpret_cast<const std::byte*>(attr.address) + addr_len);
    ucp_worker_release_address(worker_, attr.address);
    if (addr_len == 0 || addr_len > kMaxWorkerAddress)
      throw std::length_error("ucx transport: the worker address is " + std::to_string(addr_len) +
                              " bytes; ConnectInfo holds at most " + std::to_string(kMaxWorkerAddress) +
                              " (restrict UCX_TLS or raise kMaxWorkerAddress)");
    if (attr.max_am_header < sizeof(AmHeader))
      throw std::runtime_error("ucx transport: UCX allows AM headers of " + std::to_string(attr.max_am_header) +
                               " bytes; this transport needs " + std::to_string(sizeof(AmHeader)));
    st = ucp::set_am_handler(worker_, kAmId, UCP_AM_FLAG_WHOLE_MSG, &Impl::on_am, this);
    if (st != UCS_OK) fail("ucp_worker_set_am_recv_handler", st);
    if (config.rma) rma_ = std::make_unique<RmaEngine>(*this, context_, worker_);
  } catch (...) {
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    throw;
  }
}

UcxTransport::~UcxTransport() {
  closing_ = true;
  if (rma_) rma_->release_remote_keys();  // before the endpoints they were unpacked on
  // Force-close: no handshake with peers that may already be gone. Outstanding sends
  // complete with UCS_ERR_CANCELED.
  for (auto& qp : qps_) {
    if (qp->ep_ == nullptr) continue;
    ucp::force_close(qp->ep_, worker_);
    qp->ep_ = nullptr;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (inflight_requests_ > 0 && std::chrono::steady_clock::now() < deadline) ucp_worker_progress(worker_);
  for (const RndvRecv& r : rndv_) ucp_am_data_release(worker_, r.desc);
  rma_.reset();  // unmaps the regions
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

QueuePair& UcxTransport::create_queue_pair() {
  static thread_local std::mt19937_64 token_rng{std::random_device{}()};
  const uint32_t num = kQpNumBase + static_cast<uint32_t>(qps_.size());
  qps_.push_back(std::unique_ptr<QueuePair>(new QueuePair(*this, num, config_.send_queue_depth, token_rng() | 1)));
  return *qps_.back();
}

QueuePair* UcxTransport::find_queue_pair(uint32_t qp_num) noexcept {
  if (qp_num < kQpNumBase) return nullptr;
  const uint64_t idx = uint64_t{qp_num} - kQpNumBase;
  return idx < qps_.size() ? qps_[idx].get() : nullptr;
}

void UcxTransport::post_receives(uint32_t n) {
  srq_.post(n, "ucx transport");
  for (auto& qp : qps_) Impl::drain(*this, *qp);  // receiver-not-ready requests retry now
}

void UcxTransport::progress() {
  ucp_worker_progress(worker_);
  // Most calls find nothing queued: the work below is out of line, so this stays a
  // leaf-sized function (no registers to save) on that path.
  if (work_queued_) [[unlikely]] after_progress();
}

void UcxTransport::after_progress() {
  if (!rndv_.empty()) Impl::start_rndv(*this);
  if (!outgoing_.empty()) Impl::flush_outgoing(*this);
  if (!rma_resume_.empty()) {  // requests held behind RMA operations that completed
    std::vector<QueuePair*> resume;
    resume.swap(rma_resume_);
    for (QueuePair* qp : resume) {
      qp->resume_queued_ = false;
      qp->submit();
    }
  }
  // What the steps above queued (or left queued) is for the next progress().
  work_queued_ = !rndv_.empty() || !outgoing_.empty() || !rma_resume_.empty();
}

}  // namespace bkv::ucx
