// Delegation backend (docs/design.md §Delegation backend).
//
// Clients write remote requests straight into the shared MPSC delegation ring of
// daemon #0, which owns all N-1 copyrpc endpoints; local requests go over ipc to the
// shard owner (key % D). Incoming remote requests reach daemon #0 over copyrpc and are
// forwarded over flux to the shard owner when it is another daemon.
//
// Daemon #0's loop, phase by phase (the structure the calibration data was measured
// with, docs/design.md §Delegation daemon loop):
//   ipc               local requests of shard 0
//   delegation ring   the clients' remote requests, taken in ring order
//   poll              copyrpc poll (as many times as the poll budget allows): responses
//                     to the clients' slots (or held, under a batch-hold policy); then
//                     the incoming requests, executed or forwarded; then a flush (the
//                     original copyrpc poll() ends with a flush of every endpoint), so
//                     replies leave in this flush and new calls in the flush phase's.
//                     The measured C1 rates need it: at NP=16, 6.4M inbound WRITEs/s
//                     over 230K loops/s is 28 WQEs per loop from 15 peers, more than one
//                     flush per loop can emit.
//   calls             the delegation requests -> copyrpc call() (RingFull /
//                     InsufficientCredit -> backlog)
//   backlog retry     the calls refused before
//   flush             one WRITE+IMM per endpoint with pending data
//   flux              responses of forwarded requests -> copyrpc replies; flux backlog
//   release held      held responses, when due
// Nothing blocks. That is the calibrated order (LoopOrder::kCalibrated, the default);
// --loop-order one-flush drops the poll phase's flush (replies leave with the calls),
// calls-first moves calls, backlog retry and flush right after the ring read.
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/backend_kind.hpp"
#include "backends/client.hpp"
#include "backends/daemon_services.hpp"
#include "backends/policies/loop_policy.hpp"
#include "backends/topology.hpp"
#include "core/copyrpc/context.hpp"
#include "core/shm/delegationrpc.hpp"
#include "core/shm/segment.hpp"

namespace bkv::backend {

using DelegServerT = shm::DelegationServer<Request, Response>;
using DelegClientT = shm::DelegationClient<Request, Response>;

// The node's delegation ring: daemon #0 serves it, every client connects to it.
struct DelegationRing {
  explicit DelegationRing(const NodeConfig& cfg) {
    const shm::DelegationConfig dcfg{cfg.clients, cfg.deleg_ring_depth, cfg.queue_depth};
    seg = shm::Segment::create_process(shm::DelegationLayout<Request, Response>::segment_size(dcfg));
    server = std::make_unique<DelegServerT>(seg.bytes(), dcfg);
  }
  shm::Segment seg;
  std::unique_ptr<DelegServerT> server;
  std::vector<std::unique_ptr<DelegClientT>> clients;
};

// Remote path of a Delegation client: the shared MPSC ring of daemon #0. try_call never
// spins: a full ring (or no free response slot) leaves the request for the next step.
struct DelegationRemotePath {
  static constexpr bool kSharedHead = true;     // every call is a fetch_add on the ring head
  static constexpr bool kDaemonAnswers = true;  // daemon #0 writes the client's response slot
  DelegClientT* deleg;

  template <Transport T>
  static DelegationRemotePath connect(DelegationRing& ring, const ClientWiring<T>&) {
    ring.clients.push_back(std::make_unique<DelegClientT>(DelegClientT::connect(ring.seg.bytes())));
    return DelegationRemotePath{ring.clients.back().get()};
  }
  // Both always inlined into the client's step, as the DelegationClient functions they
  // wrap: left to GCC, each became a call of its own ([clone .isra.0]) with saved
  // registers, once per client step (poll) and per remote call (try_call).
  // A full ring or no free response slot is "try again next step" (false); a server
  // gone or a forged ring is not, and ends the client with an error naming it.
  [[gnu::always_inline]] bool try_call(const Request& r, uint64_t token) {
    const shm::DelegationCallStatus s = deleg->try_call(r, token).status;
    if (s == shm::DelegationCallStatus::kOk) return true;
    if (s != shm::DelegationCallStatus::kFull && s != shm::DelegationCallStatus::kNoFreeSlot) [[unlikely]]
      call_failed(s);
    return false;
  }
  [[noreturn, gnu::noinline, gnu::cold]] static void call_failed(shm::DelegationCallStatus s) {
    const char* why = s == shm::DelegationCallStatus::kServerDisconnected ? "daemon #0's server is gone (server_alive cleared)"
                      : s == shm::DelegationCallStatus::kRingCorrupted   ? "the ring's tail is beyond this call's position (forged)"
                      : s == shm::DelegationCallStatus::kAbandoned
                          ? "its ring position was marked abandoned before it could write it (a wrong pid in its record)"
                          : "an unexpected status";
    throw std::runtime_error(std::string("delegation client: a remote call failed: ") + why);
  }
  // A response that carried another call's tag (a forged or misdirected request took
  // the slot: shm::DelegationClient, call tags) ends its call with an invalid response,
  // which the client counts as an error (and the oracle as a mismatched answer).
  template <class F>
  [[gnu::always_inline]] uint32_t poll(F&& f) {
    return deleg->poll(f, [&f](uint64_t token) { f(token, Response{}); });
  }
  void after_issue() noexcept {}
};

// Daemons 1..D-1: their shard's ipc ring, and the requests daemon #0 forwards over flux.
template <Transport T, class Waker>
class WorkerDaemon {
 public:
  using Meter = typename T::Meter;

  WorkerDaemon(const DaemonWiring<T, Waker>& w, DelegationRing&)
      : ipc_(w.ipc), flux_(*w.flux), store_(w.store), meter_(w.meter), waker_(w.waker) {}

  bool step() {
    meter_.charge(Op::kLoop, 1);
    uint32_t work = serve_shard_ipc(ipc_, store_, meter_, waker_, m_);
    flux_.poll([](const CallToken&, const FluxMsg&) {});  // workers issue no flux calls
    while (auto r = flux_.try_recv()) {
      FluxMsg out;
      out.kind = FluxMsg::kResponse;
      out.resp = r->payload.kind == FluxMsg::kExecute ? kv::execute(store_, r->payload.req)
                                                      : Response::failure(kv::ErrorCode::kMalformedRequest);
      if (r->payload.kind != FluxMsg::kExecute) ++m_.protocol_errors;
      flux_.reply(r->token, out);
      meter_.charge(Op::kChannelOp, 2);
      meter_.charge(Op::kKvOp, 1);
      ++work;
    }
    m_.record_loop(0, 0, 0);
    if (work) ++m_.busy_loops;
    return true;
  }
  const DaemonMetrics& metrics() const noexcept { return m_; }

 private:
  IpcServerT& ipc_;
  FluxNodeT& flux_;
  kv::Store& store_;
  Meter& meter_;
  Waker& waker_;
  DaemonMetrics m_;
};

template <Transport T, class Waker>
class DelegationDaemon0 {
 public:
  using Ctx = copyrpc::Context<T, CallToken>;
  using Meter = typename T::Meter;

  DelegationDaemon0(const DaemonWiring<T, Waker>& w, DelegationRing& ring)
      : node_(w.node), ctx_(*checked(w.ctx)), ep_of_rank_(w.ep_of_rank), ipc_(w.ipc), deleg_(*ring.server),
        flux_(w.flux), store_(w.store), meter_(w.meter), waker_(w.waker), policies_(w.policy, w.node.np),
        forwarder_(w.flux, FluxForwarder::Order::kFirstFit), incoming_(node_, 0, w.flux != nullptr, w.store, w.meter, m_) {
    if (ep_of_rank_.size() != node_.np) throw std::invalid_argument("delegation: ep_of_rank must have np entries");
  }

  // One scheduling quantum. Returns true when a whole loop iteration completed. When the
  // poll phase polls more than once (poll budget > 1, adaptive budget), each further poll
  // is its own quantum, so that it can see completions that arrived meanwhile (under the
  // simulator a quantum sees the world as of its start); a real thread just calls step()
  // again at once, which is the same loop.
  bool step() {
    if (!in_poll_phase_) {
      meter_.charge(Op::kLoop, 1);
      work_ = 0;
      // ipc: local requests of shard 0.
      work_ += serve_shard_ipc(ipc_, store_, meter_, waker_, m_);

      // delegation ring: the clients' remote requests, in ring order (stops at a hole).
      // The head snapshot is inline: a loop that finds the ring empty (most of them at a
      // low queue depth) makes no call.
      deleg_.snapshot_head();  // recv() stops at a hole: poll()'s count is not needed
      if (deleg_.has_unread()) {
        read_ring();
      } else {
        meter_.charge(Op::kRingOp, 1);
      }
      // calls-first order: the batch leaves before the poll phase.
      if (policies_.order() == LoopOrder::kCallsFirst) issue_and_flush_calls();
      in_poll_phase_ = true;
      poll_ = {};
    }

    // poll: one copyrpc poll (drain the CQ: responses to the clients' slots or held).
    const uint64_t poll_start = policies_.needs_clock() ? meter_.now_ns() : 0;
    const uint32_t cqes = ctx_.drain(
        [&](CallToken&& tok, std::span<const std::byte> bytes) {
          ++poll_.responses;
          on_response(tok, bytes);
        },
        [&](CallToken&& tok, copyrpc::EndpointError) { on_failed_call(tok); });
    if (cqes) policies_.on_cqes(poll_start);
    poll_.cqes += cqes;
    ++poll_.polls;
    if (policies_.poll_again(poll_.polls, poll_.cqes, poll_.responses)) return false;
    in_poll_phase_ = false;
    incoming_.serve(ctx_, [&](uint32_t owner, const Request& req, const CallToken& tok) {
      forwarder_.forward(owner, FluxMsg::kExecute, req, tok, meter_);
    });
    // The poll phase's flush (the replies), except when they wait for the calls' flush.
    if (policies_.order() != LoopOrder::kOneFlush) ctx_.flush();
    m_.responses += poll_.responses;
    meter_.record(Phase::kCqes, poll_.cqes);
    meter_.record(Phase::kResponses, poll_.responses);

    // calls, backlog retry, flush (calibrated and one-flush orders).
    if (policies_.order() != LoopOrder::kCallsFirst) issue_and_flush_calls();

    // flux: responses of forwarded incoming requests -> copyrpc replies.
    if (flux_) work_ += serve_flux();
    // release held: held responses, when due.
    release_held(poll_.responses);

    work_ += poll_.cqes;
    policies_.end_of_loop(poll_.cqes);
    m_.record_loop(poll_.cqes, poll_.responses, ctx_.calls_in_flight());
    if (work_) ++m_.busy_loops;
    return true;
  }

  const DaemonMetrics& metrics() const noexcept { return m_; }
  size_t backlog() const noexcept { return backlog_.size(); }
  size_t held() const noexcept { return policies_.held_count(); }
  Ctx& context() noexcept { return ctx_; }
  uint32_t current_poll_budget() const noexcept { return policies_.polls(); }
  bool in_poll_phase() const noexcept { return in_poll_phase_; }

 private:
  struct Backlogged {
    Request req;
    CallToken token;
  };
  // The poll phase so far (it may span several steps).
  struct PollPhase {
    uint32_t polls = 0, cqes = 0, responses = 0;
  };

  static Ctx* checked(Ctx* ctx) {
    if (ctx == nullptr) throw std::invalid_argument("delegation: daemon #0 needs a copyrpc context");
    return ctx;
  }

  void on_response(const CallToken& tok, std::span<const std::byte> bytes) {
    Response resp;
    if (!decode(bytes, resp)) {
      ++m_.protocol_errors;
      resp = Response::failure(kv::ErrorCode::kMalformedRequest);
    }
    if (tok.origin != CallToken::kDelegation) {
      ++m_.protocol_errors;
      return;
    }
    if (policies_.holding()) {
      policies_.hold(HeldResponse{tok.waiter, tok.slot, resp}, meter_.now_ns());
      ++m_.holds;
    } else {
      deliver(tok.waiter, tok.slot, resp);
    }
  }

  // A call failed back (its endpoint stopped): the client gets kEndpointStopped at once
  // (never held: no response batch is coming to release it with).
  void on_failed_call(const CallToken& tok, uint64_t key = 0) {
    if (tok.origin != CallToken::kDelegation) {
      ++m_.protocol_errors;
      return;
    }
    ++m_.failed_calls;
    deliver(tok.waiter, tok.slot, Response::failure(kv::ErrorCode::kEndpointStopped, key));
  }

  void deliver(uint32_t client, uint32_t slot, const Response& resp) {
    if (deleg_.reply(client, slot, resp) != shm::DelegationReplyStatus::kOk) {
      ++m_.protocol_errors;  // a client id or slot out of range came through the ring
      return;
    }
    meter_.charge(Op::kRingOp, 1);
    waker_.wake(client);
  }

  void release_held(uint32_t responses_this_loop) {
    if (!policies_.hold_enabled()) return;
    const uint64_t now = meter_.now_ns();
    const bool idle = ctx_.calls_in_flight() == 0;
    policies_.release(now, idle, responses_this_loop, [&](const HeldResponse& h) {
      deliver(h.client, h.slot, h.resp);
      ++m_.held_released;
    });
  }

  uint32_t serve_flux() {
    uint32_t n = 0;
    flux_->poll([&](const CallToken& tok, const FluxMsg& msg) {
      ++n;
      meter_.charge(Op::kChannelOp, 1);
      if (tok.origin != CallToken::kParked || msg.kind != FluxMsg::kResponse ||
          !incoming_.answer_parked(ctx_, tok.waiter, msg.resp))
        ++m_.protocol_errors;
    });
    // Daemon #0 receives no flux requests in Delegation; drain defensively.
    while (auto r = flux_->try_recv()) {
      ++m_.protocol_errors;
      FluxMsg out;
      out.kind = FluxMsg::kResponse;
      out.resp = Response::failure(kv::ErrorCode::kMalformedRequest);
      flux_->reply(r->token, out);
    }
    forwarder_.retry();
    return n;
  }

  // The delegation ring's committed entries up to the head snapshot step() took ->
  // batch_, in ring order (stops at a hole). Reading head is one load of the line the
  // clients write: a transfer, not a turn in their queue. Out of line (one call per loop
  // that finds the ring non-empty, recv() inlined in it) so that
  // bench/real_kv_callgrind.sh sees the ring read as a function of its own.
  [[gnu::noinline]] void read_ring() {
    meter_.charge(Op::kRingOp, 1);
    while (auto e = deleg_.recv()) {
      batch_.push_back(*e);
      meter_.charge(Op::kRingOp, 1);
    }
    deleg_.advance_tail();
  }

  // calls: the batch of delegation requests -> copyrpc calls; backlog retry: the calls
  // that found the ring full or no credit; flush: one WRITE+IMM per endpoint with
  // pending data. Inlined into step() (once per loop): a call of its own saved and
  // restored registers that step() has saved already.
  [[gnu::always_inline]] void issue_and_flush_calls() {
    uint32_t calls = 0;
    for (const auto& e : batch_) calls += issue(e.payload, CallToken::delegation(e.client_id, e.resp_slot_idx));
    work_ += static_cast<uint32_t>(batch_.size());
    batch_.clear();
    calls += retry_backlog();
    meter_.record(Phase::kCallsOut, calls);
    const bool sent = ctx_.has_unflushed();
    ctx_.flush();
    if (sent) policies_.on_flush(policies_.needs_clock() ? meter_.now_ns() : 0);
  }

  // One copyrpc call; on a retryable refusal the request waits in the backlog.
  uint32_t issue(const Request& req, const CallToken& tok) {
    if (req.rank >= node_.np || req.rank == node_.rank || !req.valid()) {
      ++m_.protocol_errors;
      deliver(tok.waiter, tok.slot, Response::failure(kv::ErrorCode::kWrongRank, req.key));
      return 0;
    }
    const auto r = ctx_.call(ep_of_rank_[req.rank], as_bytes(req), sizeof(Response), tok);
    if (r.ok()) {
      ++m_.calls;
      return 1;
    }
    if (r.status == copyrpc::CallStatus::kRingFull || r.status == copyrpc::CallStatus::kInsufficientCredit) {
      backlog_.push_back({req, tok});
      m_.backlog_peak = std::max<uint64_t>(m_.backlog_peak, backlog_.size());
    } else if (r.status == copyrpc::CallStatus::kEndpointError) {
      on_failed_call(tok, req.key);
    } else {
      ++m_.protocol_errors;
      deliver(tok.waiter, tok.slot, Response::failure(kv::ErrorCode::kMalformedRequest, req.key));
    }
    return 0;
  }

  uint32_t retry_backlog() {
    // Most loops have no backlog: empty() compares two iterators, where size() does the
    // deque's node arithmetic.
    if (backlog_.empty()) {
      meter_.record(Phase::kBacklog, 0);
      return 0;
    }
    const size_t n = backlog_.size();
    uint32_t done = 0;
    for (size_t i = 0; i < n; ++i) {
      const Backlogged b = backlog_.front();
      backlog_.pop_front();
      done += issue(b.req, b.token);  // a refusal puts it back at the end
    }
    meter_.record(Phase::kBacklog, done);
    return done;
  }

  NodeConfig node_;
  Ctx& ctx_;
  std::vector<uint32_t> ep_of_rank_;
  IpcServerT& ipc_;
  DelegServerT& deleg_;
  FluxNodeT* flux_;
  kv::Store& store_;
  Meter& meter_;
  Waker& waker_;
  LoopPolicies policies_;
  DaemonMetrics m_;
  FluxForwarder forwarder_;
  IncomingRequests<Ctx, Meter> incoming_;
  bool in_poll_phase_ = false;
  PollPhase poll_;
  uint32_t work_ = 0;
  std::vector<shm::DelegationEntry<Request>> batch_;
  std::deque<Backlogged> backlog_;
};

// The Delegation backend as Node composes it.
struct DelegationBackend {
  static constexpr BackendKind kKind = BackendKind::kDelegation;  // its command-line name: to_string(kKind)
  using NodeResources = DelegationRing;
  template <Transport T, class Waker>
  using Daemon0 = DelegationDaemon0<T, Waker>;
  template <Transport T, class Waker>
  using Worker = WorkerDaemon<T, Waker>;
  template <Transport T>
  using RemotePath = DelegationRemotePath;
  static constexpr StandingContexts kStandingContexts = StandingContexts::kDaemon0;
  static std::vector<Connection> connections(uint32_t np, uint32_t /*daemons*/, uint32_t /*clients*/) {
    return daemon0_mesh(np);
  }
  static uint64_t connection_count(uint32_t np, uint32_t /*daemons*/, uint32_t /*clients*/) {
    return daemon0_mesh_size(np);
  }
};

}  // namespace bkv::backend
