// Delegation backend (docs/design_backends.md §Delegation backend).
//
// Clients write remote requests straight into the shared MPSC delegation ring of
// daemon #0, which owns all N-1 copyrpc endpoints; local requests go over ipc to the
// shard owner (key % D). Incoming remote requests reach daemon #0 over copyrpc and are
// forwarded over flux to the shard owner when it is another daemon.
//
// Daemon #0's loop, phase by phase, as the original system's loop ran it
// (docs/design_backends.md §Delegation daemon loop; LoopOrder says where the messages leave):
//   poll              drain the receive CQ until a poll finds it empty: each response
//                     goes at once into its client's slot (or is held, under a
//                     batch-hold policy), each request is queued; then a flush (the
//                     original copyrpc poll() ends with one). A poll budget polls again.
//   answer            the queued requests, executed (or forwarded over flux) and answered
//   backlog retry     the calls refused before (RingFull / InsufficientCredit)
//   delegation ring   every committed entry, in ring order (stops at a hole) -> copyrpc
//                     call(); a refusal goes to the backlog
//   flush             (LoopOrder::kOriginal) one WRITE+IMM per endpoint: the loop's
//                     replies and calls together; kNextPoll leaves them to the next poll
//   ipc               local requests of shard 0, executed and answered
//   flux              responses of forwarded requests -> copyrpc replies
//   release held      held responses, when due; then the loop's sample (in flight)
// Nothing blocks. A phase that reads what other threads write (the CQ, the delegation
// ring, the ipc rings) starts a new step when the phases before it in the loop did work,
// so that under the simulator, where a step sees the world as of its start, it sees
// what arrived while that work ran; a real thread calls step() again at once, which is
// the same loop. A loop that finds nothing is one step.
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

  // Over a transport whose threads all run on one OS thread (T::kOneOsThread: the
  // simulator), the client's rescans poll with reply hints (poll_hinted below): only the
  // slots daemon #0 answered since, the same calls ended in the same order.
  template <Transport T>
  static DelegationRemotePath connect(DelegationRing& ring, const ClientWiring<T>&) {
    ring.clients.push_back(std::make_unique<DelegClientT>(DelegClientT::connect(ring.seg.bytes())));
    DelegClientT* c = ring.clients.back().get();
    if constexpr (requires { T::kOneOsThread; }) {
      if constexpr (T::kOneOsThread) {
        ring.server->keep_reply_hints();
        c->use_reply_hints(ring.server->reply_hints(c->client_id()));
      }
    }
    return DelegationRemotePath{c};
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
  // The same answers in the same order, reading only the slots answered since (reply
  // hints, when connect gave them; else poll()): the client's scans between timed steps.
  template <class F>
  [[gnu::always_inline]] uint32_t poll_hinted(F&& f) {
    return deleg->poll_hinted(f, [&f](uint64_t token) { f(token, Response{}); });
  }
  void after_issue() noexcept {}
  // Cache hints for the simulator's next-step prefetch (Client::add_stable_step_lines,
  // add_next_step_lines): the Delegation client's two lines a call and a poll read, the
  // next call's response slot and call record, and the lines found from the segment
  // (DelegationClient::StepHint).
  void add_stable_lines(LineList& out) const noexcept {
    out.add(deleg);
    out.add(reinterpret_cast<const std::byte*>(deleg) + shm::kCacheLine);
  }
  DelegClientT::NextCallLines next_call_lines() const noexcept { return deleg->next_call_lines(); }
  DelegClientT::StepHint step_hint() const noexcept { return deleg->step_hint(); }
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
  // Loops a scheduler skipped as identical idle ones (the simulator's idle spin).
  void record_idle_loops(uint64_t k) noexcept { m_.record_loop(0, 0, 0, k); }

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
    // Its loops scan every client's ipc ring (IpcScan::kEveryClient); where one OS thread
    // runs the daemons and clients (the simulator), the clients, connected after it, hint
    // their calls (core/shm/ipc.hpp, request hints) and a loop reads only their rings.
    if constexpr (requires { T::kOneOsThread; })
      if constexpr (T::kOneOsThread) {
        ipc_.keep_request_hints();
        // Answer prefetch: a response batch's client slots (and, where the waker can,
        // the clients' threads) are asked for before the walk answers them one by one,
        // so their misses overlap. Only where the clients run on this OS thread: on
        // separate cores the lines would be pulled away from clients polling them.
        ctx_.set_response_prefetch(&prefetch_answer, this);
      }
  }

  // One step of the loop: returns true when it ended a whole loop iteration (false: the
  // loop continues in the next step; see the header).
  bool step() {
    switch (stage_) {
      case Stage::kPoll:
        return poll_stage();
      case Stage::kRing:
        return ring_stage();
      case Stage::kIpc:
        break;
    }
    return ipc_stage();
  }

  const DaemonMetrics& metrics() const noexcept { return m_; }
  // Loops a scheduler skipped as identical idle ones (the simulator's idle spin).
  void record_idle_loops(uint64_t k) noexcept { m_.record_loop(0, 0, 0, k); }
  size_t backlog() const noexcept { return backlog_.size(); }
  size_t held() const noexcept { return policies_.held_count(); }
  Ctx& context() noexcept { return ctx_; }
  uint32_t current_poll_budget() const noexcept { return policies_.polls(); }
  bool in_poll_phase() const noexcept { return stage_ == Stage::kPoll && loop_started_; }

 private:
  struct Backlogged {
    Request req;
    CallToken token;
  };
  // The poll phase so far (it may span several steps).
  struct PollPhase {
    uint32_t polls = 0, cqes = 0, responses = 0;
  };

  // Where the loop continues at the next step.
  enum class Stage : uint8_t { kPoll, kRing, kIpc };

  // poll (one drain per step while the CQ yields completions), the poll's flush, the poll
  // budget, answer. Then the ring stage, in this step when nothing was found so far.
  bool poll_stage() {
    if (!loop_started_) {
      meter_.charge(Op::kLoop, 1);
      loop_started_ = true;
      work_ = 0;
      poll_ = {};
    }
    const uint64_t poll_start = policies_.needs_clock() ? meter_.now_ns() : 0;
    const uint32_t cqes = ctx_.drain(
        [&](CallToken&& tok, std::span<const std::byte> bytes) {
          ++poll_.responses;
          on_response(tok, bytes);
        },
        [&](CallToken&& tok, copyrpc::EndpointError) { on_failed_call(tok); });
    if (cqes) {
      policies_.on_cqes(poll_start);
      poll_.cqes += cqes;
      return false;  // the drain polls again: completions may have arrived meanwhile
    }
    // A poll found the CQ empty: the poll ends with its flush.
    ++poll_.polls;
    flush_and_note();
    if (policies_.poll_again(poll_.polls, poll_.cqes, poll_.responses)) return false;
    m_.responses += poll_.responses;
    meter_.record(Phase::kCqes, poll_.cqes);
    meter_.record(Phase::kResponses, poll_.responses);
    work_ += poll_.cqes;
    // answer: the requests the poll queued.
    work_ += incoming_.serve(ctx_, [&](uint32_t owner, const Request& req, const CallToken& tok) {
      forwarder_.forward(owner, FluxMsg::kExecute, req, tok, meter_);
    });
    stage_ = Stage::kRing;
    if (work_) return false;
    return ring_stage();
  }

  // backlog retry, the delegation ring -> calls, the flush of kOriginal. Then the ipc
  // stage, in this step when this stage found nothing.
  bool ring_stage() {
    uint32_t calls = retry_backlog();
    deleg_.snapshot_head();  // recv() stops at a hole: poll()'s count is not needed
    uint32_t entries = 0;
    if (deleg_.has_unread()) {
      entries = read_ring();
      std::vector<shm::DelegationEntry<Request>>& batch = ring_batch();
      for (const auto& e : batch) calls += issue(e.payload, CallToken::delegation(e.client_id, e.resp_slot_idx));
      batch.clear();
    } else {
      meter_.charge(Op::kPollSlot, 1);  // the head line, unchanged since the last look
    }
    meter_.record(Phase::kCallsOut, calls);
    if (policies_.order() == LoopOrder::kOriginal) flush_and_note();
    work_ += entries;
    stage_ = Stage::kIpc;
    if (entries || calls) return false;
    return ipc_stage();
  }

  // ipc, flux, release held, the loop's sample.
  bool ipc_stage() {
    work_ += serve_shard_ipc(ipc_, store_, meter_, waker_, m_, IpcScan::kEveryClient);
    if (flux_) work_ += serve_flux();
    release_held(poll_.responses);
    policies_.end_of_loop(poll_.cqes);
    m_.record_loop(poll_.cqes, poll_.responses, ctx_.calls_in_flight());
    if (work_) ++m_.busy_loops;
    stage_ = Stage::kPoll;
    loop_started_ = false;
    return true;
  }

  // A flush of every endpoint with pending data; the RTT-based hold times from the
  // flushes that sent something.
  void flush_and_note() {
    const bool sent = ctx_.has_unflushed();
    ctx_.flush();
    if (sent) policies_.on_flush(policies_.needs_clock() ? meter_.now_ns() : 0);
  }

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

  // The context's response prefetch (set in the constructor): the lines deliver() will
  // touch for the call of `tok`.
  static void prefetch_answer(void* self, const CallToken& tok) {
    auto& d = *static_cast<DelegationDaemon0*>(self);
    if (tok.origin != CallToken::kDelegation) return;
    d.deleg_.prefetch_reply(tok.waiter, tok.slot);
    if constexpr (requires { d.waker_.prefetch(tok.waiter); }) d.waker_.prefetch(tok.waiter);
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
  // ring_batch(), in ring order (stops at a hole). Reading head is one load of the line the
  // clients write: a transfer, not a turn in their queue. Out of line (one call per loop
  // that finds the ring non-empty, recv() inlined in it) so that
  // bench/real_kv_callgrind.sh sees the ring read as a function of its own.
  [[gnu::noinline]] uint32_t read_ring() {
    meter_.charge(Op::kRingOp, 1);
    std::vector<shm::DelegationEntry<Request>>& batch = ring_batch();
    batch.clear();  // empty unless a step before threw while issuing
    while (auto e = deleg_.recv()) {
      batch.push_back(*e);
      meter_.charge(Op::kRingOp, 1);
    }
    deleg_.advance_tail();
    return static_cast<uint32_t>(batch.size());
  }
  // The entries read_ring() read, used up by the calls of the same step (ring_stage) and
  // empty between steps. Where one OS thread runs every daemon (the simulator), steps
  // never nest and the daemons share one: a batch of its own was cold at each loop of a
  // daemon (the thousands of client steps between two of its loops evict it), about a
  // write miss per 1.6 entries, where one written by every daemon's loop stays cached.
  std::vector<shm::DelegationEntry<Request>>& ring_batch() noexcept {
    if constexpr (requires { T::kOneOsThread; })
      if constexpr (T::kOneOsThread) {
        static thread_local std::vector<shm::DelegationEntry<Request>> shared;
        return shared;
      }
    return batch_;
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
    if (copyrpc::retry_after_poll(r.status)) {
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
  Stage stage_ = Stage::kPoll;
  bool loop_started_ = false;
  PollPhase poll_;
  uint32_t work_ = 0;
  std::vector<shm::DelegationEntry<Request>> batch_;  // ring_batch(), unless shared
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
