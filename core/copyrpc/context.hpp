// copyrpc Context<Transport, Token>: batched RPC over RDMA WRITE-with-immediate
// (docs/design_channels.md §copyrpc).
//
//   call()/reply()  append a message to the endpoint's send ring (nothing is sent);
//   drain()         polls the ONE receive CQ shared by all endpoints, processes each
//                   batch in order (flow metadata first, then messages), reposts the
//                   shared receive queue when it falls below 2/3, reaps send completions;
//   flush()         emits one WRITE+IMM per endpoint with pending data and rings its
//                   doorbell; posts an RDMA READ of the peer's consumed position when
//                   RingFull persists without news from the peer; publishes the consumed
//                   position of the endpoints whose requests recv() took since the last
//                   flush (their payloads were valid until now);
//   poll()          drain() then flush().
//
// Every call() that returned kOk ends exactly once, through drain(): either its response
// comes (on_response(Token&&, payload), the payload at most
// max_reply_payload(internal_allowance(response_allowance)) bytes: what reply() may send
// for it, checked on receipt) or its endpoint stops first and the call is
// failed back (on_failed_call(Token&&, EndpointError), the reason the endpoint stopped).
// An endpoint stops when a peer's batch breaks a receive-path rule, on an error
// completion of its queue pair, or when its owner stops it (stop_endpoint(): a peer
// declared dead). At that moment every call still pending on it is taken out of its
// pending table, so nothing the peer sends later can complete it a second time (the
// stopped endpoint ignores its completions anyway); the failures are handed out at the
// end of the drain() in which the endpoint stopped (or the next one, when it stopped
// in poll_raw() or stop_endpoint()), in call-id order.
//
// Requests are ingested in order; replies may be sent in any order (slab-indexed).
// `reply()` never fails for space: the credit invariant `in_flight + 2R <= C` reserves it.
// Everything read from a receive ring is validated against the ring and the flow state;
// a violation stops that endpoint with an EndpointError and never reads out of bounds.
//
// This file is the fast path: the calls above, the send stream (batches, wraps, the
// pending WRITE+IMMs), the receive path's walk and the request queue. The other
// concerns of a Context each have their own file:
//   call_status.hpp     what call() and reply() answer
//   recv_handle.hpp     a received request as the user holds it, from recv() to reply()
//   config.hpp          ContextConfig and its checks; the checks of a peer's settings
//   wire.hpp            the bytes of a batch (metadata, headers), immediates, allowances
//   endpoint.hpp        one connection's state, the pending-call slab, ring memory, the
//                       WRITE+IMMs waiting for room in the send queue
//   batch_rules.hpp     batch validation: every rule a received batch must keep, named
//   credits.hpp         flow control: initial credit, grants, the ring-full READ trigger
//   page_give_back.hpp  paged ring memory: pages behind the peer's consumer given back
//   failed_calls.hpp    the calls of a stopped endpoint, failed back by drain()
//   metrics.hpp         ContextStats and the RTT histogram
//   wr_id.hpp           the work-request id encoding (what a send completion belongs to)
//   raw_rdma.hpp        the bookkeeping of raw READs and WRITEs (post_raw_*)
//   qpn_table.hpp       QP number -> endpoint
#pragma once

#include <algorithm>
#include <cassert>
#include <memory>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/copyrpc/batch_rules.hpp"
#include "core/copyrpc/call_status.hpp"
#include "core/copyrpc/config.hpp"
#include "core/copyrpc/credits.hpp"
#include "core/copyrpc/endpoint.hpp"
#include "core/copyrpc/failed_calls.hpp"
#include "core/copyrpc/metrics.hpp"
#include "core/copyrpc/page_give_back.hpp"
#include "core/copyrpc/qpn_table.hpp"
#include "core/copyrpc/raw_rdma.hpp"
#include "core/copyrpc/recv_handle.hpp"
#include "core/copyrpc/wire.hpp"
#include "core/copyrpc/wr_id.hpp"
#include "core/transport.hpp"

namespace bkv::copyrpc {

template <Transport T, class Token>
class Context {
 public:
  using QueuePair = typename T::QueuePair;
  using Info = EndpointInfo<typename T::ConnectInfo>;
  using Ep = Endpoint<QueuePair, Token, T::Meter::kEnabled>;  // calls timed where metered

  Context(T& transport, ContextConfig cfg = {})
      : t_(transport), cfg_(checked_config(cfg, transport.srq_capacity(), transport.send_queue_depth())) {
    t_.post_receives(cfg_.srq_size);
    srq_posted_ = cfg_.srq_size;
    cqe_buf_.resize(cfg_.cq_poll_batch);
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // ---------------------------------------------------------------- control path
  uint32_t create_endpoint() {
    if (eps_.size() >= RecvHandle::kSpent) throw std::length_error("copyrpc: no endpoint id left");
    auto ep = std::make_unique<Ep>();
    ep->id = static_cast<uint32_t>(eps_.size());
    ep->qp = &t_.create_queue_pair();
    ep->send_ring = make_ring_memory(t_, cfg_.ring_size);
    ep->recv_ring = make_ring_memory(t_, cfg_.ring_size);
    ep->send_mr = t_.register_memory(ep->send_ring.data(), cfg_.ring_size, kAccessLocalWrite);
    ep->recv_mr = t_.register_memory(ep->recv_ring.data(), cfg_.ring_size, kAccessLocalWrite | kAccessRemoteWrite);
    ep->consumer_mr = t_.register_memory(&ep->consumer_word, 8, kAccessLocalWrite | kAccessRemoteRead);
    ep->read_mr = t_.register_memory(&ep->read_buffer, 8, kAccessLocalWrite);
    ep->max_resp_reservation = cfg_.max_resp_reservation;
    qpn_table_.set(ep->qp->qp_num(), ep->id);
    eps_.push_back(std::move(ep));
    endpoint_count_ = static_cast<uint32_t>(eps_.size());
    dirty_.resize(endpoint_count_);  // room for every endpoint: each is on the list at most once
    publish_list_.resize(endpoint_count_);  // the same for the publish list
    return eps_.back()->id;
  }

  Info local_info(uint32_t id) const {
    const Ep& e = *eps_.at(id);
    Info info{};
    info.qp = e.qp->local_info();
    info.recv_ring_addr = reinterpret_cast<uint64_t>(e.recv_ring.data());
    info.recv_ring_size = e.recv_ring.size();
    info.recv_ring_rkey = e.recv_mr.rkey;
    info.consumer_addr = reinterpret_cast<uint64_t>(&e.consumer_word);
    info.consumer_rkey = e.consumer_mr.rkey;
    info.initial_credit = initial_credit();
    return info;
  }

  void connect(uint32_t id, const Info& remote) {
    Ep& e = *eps_.at(id);
    if (e.connected) throw std::logic_error("copyrpc: endpoint already connected");
    check_peer_settings(cfg_, remote.recv_ring_size, remote.initial_credit);
    e.qp->connect(remote.qp);
    e.remote_ring = RemoteBuffer{remote.recv_ring_addr, remote.recv_ring_rkey, 0, remote.recv_ring_size};
    e.remote_consumer_word = RemoteBuffer{remote.consumer_addr, remote.consumer_rkey, 0, 8};
    // Initial R and credit = min(max_R, ring/4): set at connect, no handshake.
    e.resp_reservation = initial_credit();
    e.peer_credit = remote.initial_credit;
    // The largest response allowance whose credit the peer ever holds out at once (its
    // initial credit, min(max_R, ring/4)): a larger one could never be granted.
    e.max_response_allowance = std::min<uint64_t>(max_payload(), max_reply_payload(remote.initial_credit));
    e.refresh_call_fast_end();
    e.connected = true;
    e.takes_calls = e.error == EndpointError::kNone;
  }

  // ---------------------------------------------------------------- data path
  // Always inlined: left to the heuristic, GCC inlines it into a caller's loop or not
  // depending on a few instructions anywhere in it (scripts/callgrind_copyrpc.sh: 193.7
  // instructions per pair inlined, 247.5 not).
  [[gnu::always_inline]] CallResult call(uint32_t id, std::span<const std::byte> payload, uint32_t response_allowance,
                                         Token token) {
    Ep& e = *eps_[id];
    if (!e.takes_calls) return {CallStatus::kEndpointError, 0};  // not connected, or stopped
    // TooLarge: a payload above ring/8, or a response allowance above ring/8 or above what
    // the peer's whole grant covers (max_response_allowance, set at connect).
    if (payload.size() > max_payload() || response_allowance > e.max_response_allowance)
      return {CallStatus::kTooLarge, 0};
    const uint64_t need_credit = internal_allowance(response_allowance);
    if (e.peer_credit < need_credit) {
      mark_dirty(e);  // pending data goes out, so the peer can answer and grant again
      return {CallStatus::kInsufficientCredit, 0};
    }
    const uint64_t msg = padded_message_size(payload.size());
    assert(e.call_fast_end <= e.computed_call_fast_end());
    // Below call_fast_end the message joins the open batch, without a wrap and within
    // the credit invariant: one test. At or past it (once per batch: the message opens
    // one; or rarely, near the ring end or the send limit), the precise tests, which
    // bring call_fast_end up to date (a reply raises the send limit without raising it).
    const bool joins = e.producer + msg < e.call_fast_end;
    if (!joins) [[unlikely]] {
      if (!call_fits(e, msg)) return {CallStatus::kRingFull, 0};
    }
    const uint32_t call_id = e.pending.make_free_slot();
    if (call_id == decltype(e.pending)::kNone) [[unlikely]] {  // every call id is pending
      note_ring_full(e);
      return {CallStatus::kRingFull, 0};
    }
    e.peer_credit -= need_credit;
    // The endpoint's stream state is all updated before the slab insert (its stores may
    // alias anything, so the compiler would reload the state after them).
    std::byte* const at = joins ? join_open_batch(e, msg) : reserve_message(e, plan_append(e, msg), msg);
    // The slot keeps the allowance: the response's payload is checked against it.
    if constexpr (T::Meter::kEnabled)
      e.pending.insert(call_id, std::move(token), static_cast<uint32_t>(need_credit), t_.meter().now_ns());
    else
      e.pending.insert(call_id, std::move(token), static_cast<uint32_t>(need_credit));
    ++in_flight_calls_;
    write_message(at, call_id, static_cast<uint32_t>(need_credit / kAlignment), payload);
    t_.meter().charge(Op::kCallEncode, 1);
    return {CallStatus::kOk, call_id};
  }

  // Takes the next received request (in arrival order), if any.
  bool recv(RecvHandle& out) {
    if (recv_head_ == recv_end_) return false;
    QueuedRequest& q = *recv_head_++;
    out.f_ = q.handle;
    out.owner_ = this;
    // Only its endpoint's last queued request unpins the endpoint: the others need no
    // endpoint lookup.
    if (q.releases_pin) [[unlikely]] release_pin(q);
    return true;
  }

  // Answers a request and spends its handle (RecvHandle). Never fails for space; fails
  // for a spent handle (kInvalidHandle: the request was answered already, or the handle
  // was moved from or never filled), for a handle another Context filled
  // (kInvalidHandle; the handle stays live), for a reply larger than the caller's
  // allowance (kTooLarge; the handle stays live) and on a failed endpoint (kEndpointError).
  CallStatus reply(RecvHandle&& handle, std::span<const std::byte> payload) {
    const RecvHandle::Fields h = handle.f_;
    // A spent handle's endpoint (kSpent) is never below the count (create_endpoint).
    if (h.endpoint >= endpoint_count_ || handle.owner_ != this) return CallStatus::kInvalidHandle;
    Ep& e = *eps_[h.endpoint];
    if (e.error != EndpointError::kNone) return CallStatus::kEndpointError;
    if (payload.size() > max_reply_payload(h.allowance)) return CallStatus::kTooLarge;
    // Each request's allowance is committed once when parsed and released once here.
    // With the handle spent below this cannot fail for a handle recv() filled; it stays
    // as the credit invariant's check (R >= committed always holds, so R covers the
    // allowance too).
    assert(e.resp_committed <= e.resp_reservation);
    if (e.resp_committed < h.allowance) return CallStatus::kInvalidHandle;
    handle.f_.endpoint = RecvHandle::kSpent;
    const uint64_t msg = padded_message_size(payload.size());
    // Joins the open batch without a wrap, or (once per batch, or at the ring end) takes
    // the append plan.
    std::byte* const at = e.producer + msg < e.open_batch_end ? join_open_batch(e, msg)
                                                              : reserve_message(e, plan_append(e, msg), msg);
    write_message(at, to_response_id(h.call_id), 0, payload);
    e.resp_reservation -= h.allowance;
    e.resp_committed -= h.allowance;
    assert(e.in_flight() <= e.remote_ring.length);
    t_.meter().charge(Op::kReplyEncode, 1);
    return CallStatus::kOk;
  }

  // The poll phase of a daemon loop: drain the receive CQ (up to max_cqes completions),
  // process each batch in order, calling on_response(Token&&, span payload) for each
  // response; repost the SRQ; reap send completions; then on_failed_call(Token&&,
  // EndpointError) for each call failed back because its endpoint stopped. Returns
  // completions drained.
  // Left to the compiler's inlining choice: forcing it inline gained nothing measurable
  // for Delegation over UCX (docs/log/2026-11-28-copyrpc-instructions.md).
  template <class OnResponse, class OnFailedCall>
  uint32_t drain(OnResponse&& on_response, OnFailedCall&& on_failed_call, uint32_t max_cqes = ~0u) {
    uint32_t total = 0;
    auto& meter = t_.meter();
    while (total < max_cqes) {
      const uint32_t want = std::min(cfg_.cq_poll_batch, max_cqes - total);
      uint32_t got = 0;
      RecvCompletion* buf = cqe_buf_.data();
      const uint32_t n = t_.poll_recv([buf, &got](const RecvCompletion& c) { buf[got++] = c; }, want);
      meter.charge(Op::kCqPoll, 1);
      if (n == 0) break;
      meter.charge(Op::kCqe, n);
      total += n;
      for (uint32_t i = 0; i < n; ++i) process_completion(buf[i], on_response);
      srq_posted_ -= std::min(srq_posted_, n);
      if (n < want) break;
    }
    // Repost to full when fewer than 2/3 remain: one doorbell for many receives. The
    // transport may still count receives whose completions were polled (the direct
    // mlx5 path: a compressed session read in part keeps its CQ entries), so the
    // refill is as many as it accepts now; the rest follows at a later drain.
    if (srq_posted_ * 3 < cfg_.srq_size * 2) {
      const uint32_t n = std::min(cfg_.srq_size - srq_posted_, t_.srq_capacity() - t_.srq_posted());
      if (n != 0) t_.post_receives(n);
      srq_posted_ += n;
    }
    reap_send_completions();
    stats_.cqes += total;
    if (!failed_calls_.empty()) [[unlikely]] failed_calls_.hand_back(on_failed_call);
    return total;
  }

  // The flush phase of a daemon loop: one WRITE+IMM per endpoint with pending data,
  // then its doorbell; and the consumed position published for the endpoints whose
  // requests recv() took since the last flush. The test is inline (a daemon loop flushes
  // twice, often with nothing to do); the flush itself is out of line.
  void flush() {
    if ((dirty_count_ | publish_count_) != 0) flush_lists();
  }

  [[gnu::noinline]] void flush_lists() {
    if (publish_count_ != 0) publish_listed();
    if (dirty_count_ != 0) flush_dirty();
  }

  void flush_dirty() {
    // No endpoint is marked dirty while flushing (flush_endpoint never marks one), so the
    // list ends with the endpoints kept on it.
    const uint32_t n = dirty_count_;
    uint32_t keep = 0;
    for (uint32_t i = 0; i < n; ++i) {
      Ep& e = *eps_[dirty_[i]];
      e.dirty = false;
      if (!flush_endpoint(e)) {
        e.dirty = true;
        dirty_[keep++] = e.id;
      }
    }
    assert(dirty_count_ == n);
    dirty_count_ = keep;
  }

  template <class OnResponse, class OnFailedCall>
  uint32_t poll(OnResponse&& on_response, OnFailedCall&& on_failed_call) {
    const uint32_t n = drain(on_response, on_failed_call);
    flush();
    return n;
  }

  // Stops endpoint `id` (its owner gave up on the peer: declared dead). Its pending calls
  // are failed back with kStoppedByOwner by the next drain(); an endpoint stopped
  // already keeps its first reason.
  void stop_endpoint(uint32_t id) { fail(*eps_.at(id), EndpointError::kStoppedByOwner); }

  // ---------------------------------------------------------------- raw RDMA (bulk data)
  // Raw READ/WRITE on an endpoint's queue pair, always signalled; their completions are
  // kept apart from RPC completions and returned by poll_raw().
  PostResult post_raw_write(uint32_t id, const void* local, uint32_t len, uint32_t lkey, RemoteBuffer dst,
                            uint64_t user_id) {
    return post_raw(id, false, const_cast<void*>(local), len, lkey, dst, user_id);
  }
  PostResult post_raw_read(uint32_t id, void* local, uint32_t len, uint32_t lkey, RemoteBuffer src,
                           uint64_t user_id) {
    return post_raw(id, true, local, len, lkey, src, user_id);
  }
  // Calls cb(user_id, WcStatus) for each raw completion reaped so far.
  template <class F>
  uint32_t poll_raw(F&& cb) {
    reap_send_completions();
    return raw_.hand_back(cb);
  }
  uint64_t raw_pending() const noexcept { return raw_.pending(); }

  // ---------------------------------------------------------------- inspection
  T& transport() noexcept { return t_; }
  uint32_t endpoint_count() const noexcept { return static_cast<uint32_t>(eps_.size()); }
  const Ep& endpoint(uint32_t id) const { return *eps_.at(id); }
  EndpointError error(uint32_t id) const { return eps_.at(id)->error; }
  uint32_t calls_in_flight(uint32_t id) const { return eps_.at(id)->pending.size(); }
  uint64_t calls_in_flight() const noexcept { return in_flight_calls_; }
  uint64_t max_payload() const noexcept { return max_payload_for(cfg_); }
  static constexpr uint64_t max_payload_for(const ContextConfig& c) noexcept { return c.ring_size / 8; }
  // Data not yet handed to the NIC (a consumed position waiting for the flush to publish
  // it does not count: a flush for it alone sends nothing).
  bool has_unflushed() const noexcept { return dirty_count_ != 0; }
  const ContextStats& stats() const noexcept { return stats_; }
  const ContextConfig& config() const noexcept { return cfg_; }

  // ---------------------------------------------------------------- response prefetch
  // A hint for a caller whose response handler touches memory of its own chosen by the
  // call's token (a waiter's slot, its thread): before a batch's messages are walked,
  // hint(ctx, token) is called for each response of the batch whose call is pending, in
  // batch order, so that it can issue cache prefetches for all of them at once rather
  // than miss once per response in turn. It must change nothing the caller or this
  // context reads (a prefetch only): the walk then handles the batch as without it. The
  // pre-walk reads only headers inside the batch and tokens of pending calls, and stops
  // at the first framing break (a header or message that does not fit in the batch); past
  // an unknown call id or a bad allowance it goes on hinting, which is harmless for a
  // prefetch, while the walk fails the endpoint there. nullptr (the default) turns it off.
  using ResponsePrefetch = void (*)(void* ctx, const Token& token);
  void set_response_prefetch(ResponsePrefetch hint, void* ctx) noexcept {
    response_prefetch_ = hint;
    response_prefetch_ctx_ = ctx;
  }

 private:
  // A request waiting for recv(). `releases_pin`: it is its endpoint's last queued
  // request (Endpoint::last_queued), so taking it unpins the endpoint's batches; the
  // flag is set only there (publish_requests moves it, recv() clears it).
  struct QueuedRequest {
    RecvHandle::Fields handle;
    bool releases_pin = false;
  };

  uint64_t initial_credit() const noexcept { return credits::initial_credit(cfg_.max_resp_reservation, cfg_.ring_size); }

  void mark_dirty(Ep& e) {
    if (!e.dirty) {
      e.dirty = true;
      assert(dirty_count_ < dirty_.size());
      dirty_[dirty_count_++] = e.id;
    }
  }

  // Where a message of `msg` padded bytes goes: the producer, its ring offset, the
  // metadata bytes it adds (32 when it opens a batch), and whether the message with
  // them would reach the ring end, so a wrap comes first (the strict `<` keeps a batch
  // off the ring end). Used by the messages that do not simply join the open batch
  // (join_open_batch): one that opens a batch or wraps, and a call at its precise test
  // (call_fits derives the credit cost from it).
  struct AppendPlan {
    uint64_t producer;
    uint64_t off;
    uint64_t open_cost;
    bool wraps;
  };
  static AppendPlan plan_append(const Ep& e, uint64_t msg) noexcept {
    const uint64_t mask = e.ring_mask();
    const uint64_t off = e.producer & mask;
    const uint64_t open_cost = e.batch_open_cost;
    return {e.producer, off, open_cost, off + open_cost + msg > mask};  // > mask: reaches the ring end
  }

  // call()'s precise test, out of line (call() stays small enough to be inlined): does
  // the message fit the credit invariant where the append plan puts it?
  // in_flight + added + 2R <= C, with `added` the bytes the message adds to the stream:
  // its batch's metadata if it opens one; if it wraps, the skipped ring tail and a new
  // batch's metadata instead. No room: noted (note_ring_full). Room: call_fast_end is
  // brought up to date (opening a batch or a wrap refreshes it again).
  [[gnu::noinline]] bool call_fits(Ep& e, uint64_t msg) {
    const AppendPlan a = plan_append(e, msg);
    const uint64_t added = a.wraps ? (e.ring_size() - a.off) + kFlowMetadataSize + msg : a.open_cost + msg;
    if (e.producer + added > e.send_limit()) {
      note_ring_full(e);
      return false;
    }
    e.refresh_call_fast_end();
    return true;
  }

  // Appends a message of `msg` padded bytes to the open batch, which it fits without a
  // wrap (call_fast_end or open_batch_end said so). The batch's endpoint is on the
  // flush list already (see reserve_message).
  [[gnu::always_inline]] inline std::byte* join_open_batch(Ep& e, uint64_t msg) noexcept {
    assert(e.batch_open() && e.producer + msg < e.open_batch_end && e.dirty);
    std::byte* const at = e.send_ring.at(e.producer);
    e.producer += msg;
    ++e.batch_count;
    return at;
  }

  // Takes the bytes of a planned message at the producer (wrapping first if planned,
  // opening a batch if none is open) and returns where the message goes. The
  // endpoint's state is all read and written here, before the bytes are stored (byte
  // stores may alias anything, so the compiler would reload it after them).
  [[gnu::always_inline]] inline std::byte* reserve_message(Ep& e, AppendPlan a, uint64_t msg) {
    if (a.wraps) [[unlikely]] {
      wrap(e, msg);  // continues at offset 0 of the next cycle, no batch open
      a.producer = e.producer;
      a.off = 0;
      a.open_cost = kFlowMetadataSize;
    }
    std::byte* const ring = e.send_ring.data();
    if (a.open_cost == 0) {
      // An open batch of a live endpoint is always on the flush list (flush_endpoint
      // keeps it there until the batch is finished), so only opening one marks it.
      assert(e.dirty);
      e.producer = a.producer + msg;
      ++e.batch_count;
      return ring + a.off;
    }
    e.meta_pos = a.producer;
    e.batch_open_cost = 0;
    e.open_batch_end = (a.producer | e.ring_mask()) + 1;
    e.batch_count = 1;
    e.producer = a.producer + kFlowMetadataSize + msg;
    e.refresh_call_fast_end();  // a batch is open: calls may join it
    mark_dirty(e);
    return ring + a.off + kFlowMetadataSize;
  }

  // Stores a message (header and payload) where reserve_message() said.
  [[gnu::always_inline]] static inline void write_message(std::byte* p, uint32_t call_id,
                                                          uint32_t response_allowance_units,
                                                          std::span<const std::byte> payload) noexcept {
    store_header(p, MessageHeader{call_id, response_allowance_units, static_cast<uint32_t>(payload.size())});
    copy_payload(p + kHeaderSize, payload.data(), payload.size());
  }

  // Flow metadata for a batch (or wrap marker) whose stream ends at `end`, with the credit
  // return and grant it carries (credits::grant_on_batch).
  void fill_metadata(Ep& e, uint64_t at, uint64_t end, uint32_t count) {
    const credits::BatchCredit c = credits::grant_on_batch(e, end);
    store_metadata(e.send_ring.at(at), c.credit_return, c.grant, count);
  }

  // Closes the open batch (its metadata written) and returns the WRITE+IMM that carries
  // it. `stream_end`: where our stream will end once the operation in progress is done;
  // the grant must leave room for those bytes too.
  PendingEmit close_batch(Ep& e, uint64_t stream_end) {
    fill_metadata(e, e.meta_pos, stream_end, e.batch_count);
    stats_.messages_sent += e.batch_count;
    const uint64_t len = e.producer - e.meta_pos;
    const PendingEmit pe{e.meta_pos, static_cast<uint32_t>(len), encode_imm(len)};
    e.flush_start = e.producer;
    e.batch_open_cost = kFlowMetadataSize;
    e.open_batch_end = 0;
    e.call_fast_end = 0;  // no batch open: the next call opens one (the precise path)
    e.batch_count = 0;
    return pe;
  }
  void finish_batch(Ep& e, uint64_t stream_end) { e.emits.push(close_batch(e, stream_end)); }

  // The batch would reach the ring end: emit it, then a wrap marker whose immediate
  // covers the bytes up to the ring end, and continue at offset 0 of the next cycle.
  // Grants given here already count the `msg`-byte message about to follow (and its
  // batch metadata), or R would grow into space that message then takes.
  void wrap(Ep& e, uint64_t msg) {
    const uint64_t marker = e.producer;
    const uint64_t next_cycle = (marker | (e.ring_size() - 1)) + 1;
    const uint64_t stream_end = next_cycle + kFlowMetadataSize + msg;
    if (e.batch_open()) finish_batch(e, stream_end);
    fill_metadata(e, marker, stream_end, kWrapMessageCount);
    e.emits.push(PendingEmit{marker, kFlowMetadataSize, encode_imm(next_cycle - marker)});
    e.producer = next_cycle;
    e.flush_start = next_cycle;
    e.refresh_call_fast_end();
    ++stats_.wraps;
  }

  // Posts the pending WQEs of one endpoint: first the ranges already finished (by a
  // wrap), then the open batch. Returns false if the send queue filled; what is left
  // waits for the next flush, and the open batch stays open meanwhile, so messages keep
  // joining it (batches grow while the NIC is behind).
  bool flush_endpoint(Ep& e) {
    if (e.error != EndpointError::kNone) return true;
    bool posted_any = false;
    bool done = post_pending_emits(e, posted_any);
    if (done && e.batch_open()) {
      if (e.qp->send_queue_free() == 0) {
        done = false;
      } else {
        // Nothing else is pending (done): the batch is posted without passing through
        // the pending-emit queue, and joins it only if the post fails.
        const PendingEmit pe = close_batch(e, e.producer);
        if (post_emit(e, pe)) {
          posted_any = true;
        } else {
          e.emits.push(pe);
          done = false;
        }
      }
    }
    if (e.need_read && !e.read_outstanding && done) {
      const PostResult r = e.qp->post_read(&e.read_buffer, 8, e.read_mr.lkey, e.remote_consumer_word,
                                           encode_wr_id(WrKind::kConsumerRead, e.id), true);
      if (r == PostResult::kOk) {
        e.need_read = false;
        e.read_outstanding = true;
        e.unsignaled = 0;  // a signalled WQE retires every earlier one
        posted_any = true;
        ++stats_.reads_posted;
      } else {
        done = false;
      }
    }
    if (posted_any) {
      e.qp->ring_doorbell();
      t_.meter().charge(Op::kDoorbell, 1);
      ++stats_.doorbells;
    }
    return done;
  }

  bool post_pending_emits(Ep& e, bool& posted_any) {
    for (; !e.emits.empty(); e.emits.pop()) {
      if (!post_emit(e, e.emits.front())) return false;
      posted_any = true;
    }
    return true;
  }

  // Posts one WRITE+IMM (no doorbell); false if the send queue is full.
  bool post_emit(Ep& e, const PendingEmit& pe) {
    const bool signaled = e.unsignaled + 1 >= kSignalInterval;
    const RemoteBuffer dst{e.remote_ring.addr + (pe.start & (e.remote_ring.length - 1)), e.remote_ring.rkey, 0,
                           pe.write_len};
    const PostResult r = e.qp->post_write_imm(e.send_ring.at(pe.start), pe.write_len, e.send_mr.lkey, dst, pe.imm,
                                              encode_wr_id(WrKind::kBatch, e.id), signaled);
    if (r != PostResult::kOk) return false;
    e.unsignaled = signaled ? 0 : e.unsignaled + 1;
    t_.meter().charge(Op::kFlush, 1);
    ++stats_.wqes_posted;
    return true;
  }

  // RingFull: noted for the consumer-position READ (credits::note_ring_full), and the
  // endpoint flushed, so that pending data goes out and the peer can answer.
  void note_ring_full(Ep& e) {
    credits::note_ring_full(e);
    mark_dirty(e);
  }

  // The peer's consumed position may have moved: with paged ring memory, the pages it
  // passed are given back (page_give_back.hpp).
  static_assert(kMinRingSize % PageGiveBack::kRingPage == 0);
  void give_back_passed_pages(Ep& e) {
    if constexpr (PagedRingMemory<T>) e.pages.consumer_moved(t_, e);
  }

  void publish_consumed(Ep& e) noexcept {
    // The peer's NIC may READ this word at any time: a single aligned 8-byte store.
    __atomic_store_n(&e.consumer_word, e.consumed(), __ATOMIC_RELEASE);
  }

  // The end of a received batch or wrap marker with no request of the endpoint left
  // queued: the consumed position is published at once, unless recv() took requests
  // since the last flush (publish_due): their payloads are held until the next flush,
  // which publishes it then. (Requests taken by recv() in the response callback of this
  // very batch set publish_due too.)
  void publish_unless_held(Ep& e) noexcept {
    if (!e.has_queued_requests() && !e.publish_due) publish_consumed(e);
  }

  // flush(): the consumed position of each endpoint on the publish list.
  void publish_listed() noexcept {
    for (uint32_t i = 0; i < publish_count_; ++i) {
      Ep& e = *eps_[publish_list_[i]];
      e.publish_due = false;
      publish_consumed(e);
    }
    publish_count_ = 0;
  }

  // Stops an endpoint (the first reason stays) and takes its pending calls out, to be
  // failed back by drain() (failed_calls.hpp).
  void fail(Ep& e, EndpointError err) {
    if (e.error != EndpointError::kNone) return;
    e.error = err;
    e.takes_calls = false;
    const uint32_t n = failed_calls_.take_all(e.pending, err);
    in_flight_calls_ -= n;
    stats_.failed_calls += n;
  }

  template <class OnResponse>
  void process_completion(const RecvCompletion& c, OnResponse& on_response) {
    const uint32_t idx = qpn_table_.get(c.qp_num);
    if (idx == 0) return;  // a QP we do not own: nothing of ours to update
    Ep& e = *eps_[idx - 1];
    if (e.error != EndpointError::kNone) return;
    if (c.status != WcStatus::kSuccess) return fail(e, EndpointError::kCompletionError);
    process_batch(e, c.imm, c.byte_len, on_response);
  }

  // One received batch: its head checked (batch_rules.hpp), the flow metadata applied,
  // then the messages in order, each checked as the walk reaches it.
  template <class OnResponse>
  [[gnu::noinline]] void process_batch(Ep& e, uint32_t imm, uint32_t written, OnResponse& on_response) {
    const uint64_t size = e.recv_ring.size();
    const uint64_t delta = decode_imm(imm);
    const uint64_t start = e.recv_producer;
    // Every earlier batch was parsed to its end (a batch that breaks a rule stops the
    // endpoint), so `parsed` is this batch's start while it is walked.
    assert(e.parsed == start);
    const uint64_t end = start + delta;
    const uint64_t start_off = start & (size - 1);
    // The metadata is read before the rules are checked: it lies in the ring whatever the
    // immediate says (a 32-aligned position through the ring mask), and a non-zero
    // immediate always covers it (wire.hpp: decode_imm(1) == kFlowMetadataSize). Until
    // the rules hold (write_covers_batch last), it may be an earlier cycle's: only read.
    const FlowMetadata meta = load_metadata(e.recv_ring.at(start));
    const EndpointError head = batch_rules::check_batch_head(e, delta, meta, written);
    if (head != EndpointError::kNone) return fail(e, head);

    // Flow metadata first: it frees credit that the messages below may need.
    credits::take_peer_flow(e, meta.ring_credit_return, meta.credit_grant);
    give_back_passed_pages(e);
    e.recv_producer = end;
    ++e.batches_received;
    ++stats_.batches_received;

    if (meta.message_count == kWrapMessageCount) {
      e.parsed = end;
      publish_unless_held(e);
      return;
    }

    // Messages. The batch is contiguous in the ring (checked above), so it is walked by
    // pointer, each message checked by the message rules (batch_rules.hpp) before it is
    // used. Room for every request the batch can carry (message_count_fits, checked
    // above) is made once, before the walk; a queue whose requests have all been taken
    // starts over at its beginning. (Written out here: as a function of its own, always
    // inlined, it cost 2.2 instructions per pair in scripts/callgrind_copyrpc.sh.)
    if (recv_head_ == recv_end_) recv_head_ = recv_end_ = recv_queue_.data();
    const size_t queue_end = static_cast<size_t>(recv_end_ - recv_queue_.data());
    if (queue_end + meta.message_count > recv_queue_.size()) {
      const size_t queue_head = static_cast<size_t>(recv_head_ - recv_queue_.data());
      recv_queue_.resize(std::max<size_t>(64, 2 * (queue_end + meta.message_count)));
      recv_head_ = recv_queue_.data() + queue_head;
      recv_end_ = recv_queue_.data() + queue_end;
    }
    const std::byte* p = e.recv_ring.data() + start_off + kFlowMetadataSize;
    const std::byte* const limit = e.recv_ring.data() + start_off + delta;
    if (response_prefetch_ != nullptr) prefetch_responses(e, p, limit, meta.message_count);
    auto& meter = t_.meter();
    // Requests are queued through locals (`queued`, `committed`) and published before
    // anything that may look at the endpoint: the response callback, a failure, the end
    // of the batch. The callback may reply (credit: `committed` is read again after it)
    // or take requests (recv() only advances the queue head, so `queued` and `published`
    // stay valid); it must not drain this context.
    QueuedRequest* queued = recv_end_;
    const QueuedRequest* published = queued;
    uint64_t committed = e.resp_committed;
    EndpointError broken = EndpointError::kNone;
    // Counted for the whole batch up front; a walk that stops early takes back the
    // messages it did not reach (so the count is not kept live through the walk).
    stats_.messages_received += meta.message_count;
    uint32_t left = meta.message_count;
    for (; left != 0; --left) {
      if (!batch_rules::header_in_batch(p, limit)) {
        broken = EndpointError::kBadLength;
        break;
      }
      const MessageHeader h = load_header(p);
      // The cursor moves past the message at the end of each branch, once its payload
      // address is taken (the cursor's one register holds both).
      const uint64_t padded = padded_message_size(h.payload_len);
      if (!batch_rules::message_in_batch(p, padded, limit)) {
        broken = EndpointError::kBadLength;
        break;
      }
      meter.charge(Op::kMsgParse, 1);
      if (!is_response(h.call_id)) [[likely]] {
        // A request (its id is at most kMaxCallId: the response bit is clear).
        const uint64_t allowance = uint64_t{h.response_allowance_units} * kAlignment;
        if (!batch_rules::allowance_granted(allowance, committed, e.resp_reservation)) {
          broken = EndpointError::kBadAllowance;
          break;
        }
        committed += allowance;
        RecvHandle::Fields& r = (queued++)->handle;
        r.endpoint = e.id;
        r.call_id = h.call_id;
        r.data = p + kHeaderSize;
        r.len = h.payload_len;
        r.allowance = static_cast<uint32_t>(allowance);
        p += padded;
        continue;
      }
      const uint32_t id = from_response_id(h.call_id);
      Token* slot = e.pending.find(id);
      const std::byte* const payload = p + kHeaderSize;
      p += padded;
      if (slot == nullptr) {  // a response to no pending call
        broken = EndpointError::kUnknownCallId;
        break;
      }
      if (!batch_rules::response_within_allowance(h.payload_len, e.pending.allowance(id))) {
        broken = EndpointError::kBadResponseLength;  // the call is failed back, not answered
        break;
      }
      Token tok = std::move(*slot);
      e.pending.release(id);
      --in_flight_calls_;
      if constexpr (T::Meter::kEnabled) stats_.rtt.record(e.pending.elapsed_ns(id, meter.now_ns()));
      if (queued != published) {
        publish_requests(e, static_cast<uint32_t>(queued - published), committed);
        published = queued;
      }
      on_response(std::move(tok), std::span<const std::byte>(payload, h.payload_len));
      if (e.error != EndpointError::kNone) {
        stats_.messages_received -= left - 1;
        return;
      }
      committed = e.resp_committed;
    }
    if (queued != published) publish_requests(e, static_cast<uint32_t>(queued - published), committed);
    stats_.messages_received -= left;
    if (broken != EndpointError::kNone) return fail(e, broken);
    if (!batch_rules::batch_filled(p, limit)) return fail(e, EndpointError::kBadMessageCount);
    e.parsed = end;
    publish_unless_held(e);
  }

  // The pre-walk of set_response_prefetch: the batch's lines [p, limit) are asked for
  // (up to kPrefetchBatchBytes), then its headers walked as the walk checks them (a
  // header and its padded message inside the batch) once: the pending-call slots of the
  // responses are asked for as their ids are read (the slots went cold while the calls
  // were out), then each pending response's token (of the first kPrefetchIds) is handed
  // to the hint, from the ids kept on the way. Reads only; stops at the first framing
  // break.
  static constexpr uint64_t kPrefetchBatchBytes = 4096;
  static constexpr uint64_t kPrefetchLineBytes = 64;
  static constexpr uint32_t kPrefetchIds = 64;  // a C1 batch carries 20-36 responses
  static_assert(kPrefetchBatchBytes % kPrefetchLineBytes == 0);
  [[gnu::noinline]] void prefetch_responses(Ep& e, const std::byte* p, const std::byte* limit, uint32_t count) {
    const uint64_t bytes = std::min(static_cast<uint64_t>(limit - p), kPrefetchBatchBytes);
    for (uint64_t off = 0; off < bytes; off += kPrefetchLineBytes) prefetch_line(p + off);
    uint32_t ids[kPrefetchIds];
    uint32_t n = 0;
    for_each_response_id(p, limit, count, [&](uint32_t id) {
      e.pending.prefetch(id);
      if (n < kPrefetchIds) ids[n++] = id;
    });
    for (uint32_t i = 0; i < n; ++i)
      if (const Token* tok = e.pending.find(ids[i])) response_prefetch_(response_prefetch_ctx_, *tok);
  }
  template <class F>
  [[gnu::always_inline]] static void for_each_response_id(const std::byte* p, const std::byte* limit, uint32_t count,
                                                          F&& f) {
    for (; count != 0 && batch_rules::header_in_batch(p, limit); --count) {
      const MessageHeader h = load_header(p);
      const uint64_t padded = padded_message_size(h.payload_len);
      if (!batch_rules::message_in_batch(p, padded, limit)) return;
      p += padded;
      if (is_response(h.call_id)) f(from_response_id(h.call_id));
    }
  }

  // `n` requests written to the receive queue (of the batch being walked) become
  // visible, with the response credit committed so far.
  [[gnu::always_inline]] inline void publish_requests(Ep& e, uint32_t n, uint64_t committed) noexcept {
    e.resp_committed = committed;
    // Pin this batch until recv() takes its requests (`parsed` is its start: process_batch).
    // The last request queued now releases the pin; an earlier last one (still queued,
    // since the pin is held) no longer does. Indices stay valid: the queue grows by
    // copying and starts over only when every request has been taken (no pin held).
    if (!e.has_queued_requests())
      e.hold_pos = e.parsed;
    else
      recv_queue_[e.last_queued].releases_pin = false;
    recv_end_ += n;
    recv_end_[-1].releases_pin = true;
    e.last_queued = static_cast<uint64_t>(recv_end_ - 1 - recv_queue_.data());
  }

  // recv() took the last queued request of its endpoint: the endpoint's batches are
  // unpinned. The peer may overwrite them once the consumed position is published, and
  // the payloads recv() handed out stay valid until the next flush: the endpoint goes on
  // the publish list, which that flush publishes (never here: the peer may READ the
  // word at any time). Out of line (once per batch at most), so recv() stays small
  // where it is inlined.
  [[gnu::noinline]] void release_pin(QueuedRequest& q) noexcept {
    q.releases_pin = false;
    Ep& e = *eps_[q.handle.endpoint];
    e.last_queued = Ep::kNoQueuedRequest;
    if (!e.publish_due) {
      e.publish_due = true;
      assert(publish_count_ < publish_list_.size());
      publish_list_[publish_count_++] = e.id;
    }
  }

  // Most drains find no send completion (copyrpc signals one WRITE in kSignalInterval):
  // the per-completion work is out of line, so that this stays small enough to be
  // inlined into drain().
  void reap_send_completions() {
    t_.poll_send([this](const SendCompletion& c) { on_send_completion(c); }, ~0u);
  }

  [[gnu::noinline]] void on_send_completion(const SendCompletion& c) {
    const WrKind kind = wr_kind(c.wr_id);
    const uint64_t v = wr_value(c.wr_id);
    if (kind == WrKind::kRaw) return raw_.completed(v, c.status);
    if (v >= eps_.size()) return;
    Ep& e = *eps_[v];
    if (c.status != WcStatus::kSuccess) return fail(e, EndpointError::kCompletionError);
    if (kind == WrKind::kConsumerRead) {
      e.read_outstanding = false;
      const uint64_t pos = __atomic_load_n(&e.read_buffer, __ATOMIC_ACQUIRE);
      if (pos > e.producer) return fail(e, EndpointError::kBadConsumerRead);
      if (pos > e.consumer_by_read) {
        e.consumer_by_read = pos;
        give_back_passed_pages(e);
      }
      e.refresh_call_fast_end();
    }
  }

  PostResult post_raw(uint32_t id, bool read, void* local, uint32_t len, uint32_t lkey, RemoteBuffer remote,
                      uint64_t user_id) {
    Ep& e = *eps_.at(id);
    const uint32_t slot = raw_.open(user_id);
    const uint64_t wr = encode_wr_id(WrKind::kRaw, slot);
    const PostResult r = read ? e.qp->post_read(local, len, lkey, remote, wr, true)
                              : e.qp->post_write(local, len, lkey, remote, wr, true);
    if (r != PostResult::kOk) {
      raw_.cancel(slot);
      return r;
    }
    e.unsignaled = 0;  // a signalled WQE retires every earlier one
    raw_.posted();
    e.qp->ring_doorbell();
    t_.meter().charge(Op::kDoorbell, 1);
    return r;
  }

  T& t_;
  ContextConfig cfg_;
  std::vector<std::unique_ptr<Ep>> eps_;
  uint32_t endpoint_count_ = 0;  // eps_.size()
  QpnTable qpn_table_;
  // The endpoints marked dirty: dirty_[0, dirty_count_). dirty_ has one entry per
  // endpoint (an endpoint is on the list at most once: Ep::dirty), so marking one is a
  // store, never a growth.
  std::vector<uint32_t> dirty_;
  uint32_t dirty_count_ = 0;
  // The endpoints whose consumed position the next flush publishes:
  // publish_list_[0, publish_count_), each at most once (Ep::publish_due).
  std::vector<uint32_t> publish_list_;
  uint32_t publish_count_ = 0;
  std::vector<RecvCompletion> cqe_buf_;
  // [recv_head_, recv_end_) not yet taken; both point into recv_queue_ (or are null
  // while it has no storage), so recv() takes a handle without indexing.
  std::vector<QueuedRequest> recv_queue_;
  QueuedRequest* recv_head_ = nullptr;
  QueuedRequest* recv_end_ = nullptr;
  uint32_t srq_posted_ = 0;
  uint64_t in_flight_calls_ = 0;
  ContextStats stats_;
  RawOperations raw_;
  FailedCalls<Token> failed_calls_;  // taken from stopped endpoints, not yet handed back
  ResponsePrefetch response_prefetch_ = nullptr;  // set_response_prefetch
  void* response_prefetch_ctx_ = nullptr;
};

}  // namespace bkv::copyrpc
