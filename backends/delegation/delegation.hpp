// Delegation backend (docs/design.md §Delegation backend).
//
// Clients write remote requests straight into the shared MPSC delegation ring of
// daemon #0, which owns all N-1 copyrpc endpoints; local requests go over ipc to the
// shard owner (key % D). Incoming remote requests reach daemon #0 over copyrpc and are
// forwarded over flux to the shard owner when it is another daemon.
//
// Daemon #0's loop (the structure the calibration data was measured with,
// docs/design.md §Delegation daemon loop):
//   A  ipc poll: local requests of shard 0
//   B  delegation ring poll: clients' remote requests, taken in ring order
//   C  copyrpc poll (poll_budget times at most): drain the CQ, responses to the clients'
//      slots (or held, under a batch-hold policy), incoming requests executed or forwarded,
//      then flush (the original copyrpc poll() ends with a flush of every endpoint),
//      so replies leave in this loop's first flush and new calls in step F's. The
//      measured C1 rates need it: at NP=16, 6.4M inbound WRITEs/s over 230K loops/s is 28
//      WQEs per loop from 15 peers, more than one flush per loop can emit.
//   D  delegation requests -> copyrpc call() (RingFull / InsufficientCredit -> backlog)
//   E  call-backlog retry
//   F  flush endpoints: one WRITE+IMM per endpoint with pending data
//   G  flux: responses of forwarded requests -> copyrpc reply; release held responses
// Nothing blocks.
#pragma once

#include <algorithm>
#include <deque>
#include <optional>
#include <vector>

#include "backends/common.hpp"
#include "backends/delegation/hold_policy.hpp"
#include "core/copyrpc/context.hpp"

namespace bkv::backend {

using IpcServerT = shm::IpcServer<Request, Response>;
using DelegServerT = shm::DelegationServer<Request, Response>;
using FluxNodeT = shm::FluxNode<FluxMsg, CallToken>;

// Work common to every daemon: serve the ipc ring of its shard.
template <class Meter, class Waker>
inline uint32_t serve_ipc(IpcServerT& ipc, kv::Store& store, Meter& meter, Waker& waker, DaemonMetrics& m) {
  const uint64_t scanned = ipc.clients_scanned();
  ipc.poll_with_skip();
  meter.charge(Op::kPollSlot, static_cast<uint32_t>(ipc.clients_scanned() - scanned));
  uint32_t n = 0;
  while (auto r = ipc.recv()) {
    const Response resp = kv::execute(store, r->payload);
    ipc.reply(r->handle, resp);
    waker.wake(r->handle.client);
    ++n;
  }
  if (n) {
    meter.charge(Op::kRingOp, 2 * n);
    meter.charge(Op::kKvOp, n);
    m.local_ops += n;
  }
  return n;
}

// Daemon #1..D-1 of Delegation (and of Meta when it owns no endpoint): its shard's ipc
// ring, and requests forwarded over flux by the daemon that received them.
template <class Meter, class Waker>
class WorkerDaemon {
 public:
  WorkerDaemon(IpcServerT& ipc, FluxNodeT& flux, kv::Store& store, Meter& meter, Waker& waker)
      : ipc_(ipc), flux_(flux), store_(store), meter_(meter), waker_(waker) {}

  void step() {
    meter_.charge(Op::kLoop, 1);
    uint32_t work = serve_ipc(ipc_, store_, meter_, waker_, m_);
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
    m_.record_loop(0, 0);
    if (work) ++m_.busy_loops;
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

  // ep_of_rank[r] = endpoint id for remote rank r (ignored for r == rank).
  DelegationDaemon0(const NodeConfig& node, const LoopPolicy& policy, Ctx& ctx, std::vector<uint32_t> ep_of_rank,
                    IpcServerT& ipc, DelegServerT& deleg, FluxNodeT* flux, kv::Store& store, Waker& waker)
      : node_(node), ctx_(ctx), ep_of_rank_(std::move(ep_of_rank)), ipc_(ipc), deleg_(deleg), flux_(flux),
        store_(store), meter_(ctx.transport().meter()), waker_(waker), hold_(policy, node.np), budget_(policy), policy_(policy) {
    if (ep_of_rank_.size() != node.np) throw std::invalid_argument("delegation: ep_of_rank must have np entries");
  }

  // One scheduling quantum. Returns true when a whole loop iteration (A..G) completed.
  // When step C polls more than once (poll_budget > 1, adaptive budget), each further
  // poll is its own quantum, so that it can see completions that arrived meanwhile
  // (under the simulator a quantum sees the world as of its start); a real thread just
  // calls step() again at once, which is the same loop.
  bool step() {
    if (!in_c_) {
      meter_.charge(Op::kLoop, 1);
      work_ = 0;
      // A: local requests of shard 0.
      work_ += serve_ipc(ipc_, store_, meter_, waker_, m_);

      // B: the clients' remote requests, in ring order (stops at a hole). Reading head
      // is one load of the line the clients write: a transfer, not a turn in their queue.
      deleg_.poll();
      meter_.charge(Op::kRingOp, 1);
      while (auto e = deleg_.recv()) {
        batch_.push_back(*e);
        meter_.charge(Op::kRingOp, 1);
      }
      deleg_.advance_tail();
      in_c_ = true;
      c_polls_ = c_cqes_ = c_responses_ = 0;
      c_budget_ = budget_.current(policy_.poll_budget);
      c_until_cqe_ = policy_.adaptive_poll_budget;
    }

    // C: one copyrpc poll (drain the CQ: responses to the clients' slots or held).
    const uint64_t t_c = hold_.needs_clock() ? meter_.now_ns() : 0;
    const uint32_t cqes = ctx_.drain([&](CallToken&& tok, std::span<const std::byte> bytes) {
      ++c_responses_;
      on_response(tok, bytes);
    });
    if (cqes) hold_.on_first_cqe(t_c);
    c_cqes_ += cqes;
    ++c_polls_;
    // poll_budget N: up to N polls, stopping once N responses came (N = 1: one poll).
    // Adaptive budget (docs/design.md §Loop policies): up to u+1 polls, stopping at the first CQE.
    const bool more = c_until_cqe_ ? (c_polls_ < c_budget_ && c_cqes_ == 0)
                                   : (c_polls_ < c_budget_ && c_responses_ < c_budget_);
    if (more) return false;
    in_c_ = false;
    serve_incoming();
    ctx_.flush();
    m_.responses += c_responses_;
    meter_.record(Phase::kCqes, c_cqes_);
    meter_.record(Phase::kResponses, c_responses_);

    // D: the batch of delegation requests -> copyrpc calls.
    uint32_t calls = 0;
    for (const auto& e : batch_) calls += issue(e.payload, CallToken{CallToken::kDelegation, e.client_id, e.resp_slot_idx});
    work_ += static_cast<uint32_t>(batch_.size());
    batch_.clear();

    // E: retry the calls that found the ring full or no credit.
    calls += retry_backlog();
    meter_.record(Phase::kCallsOut, calls);

    // F: one WRITE+IMM per endpoint with pending data.
    const bool sent = ctx_.has_unflushed();
    ctx_.flush();
    if (sent) hold_.on_flush(hold_.needs_clock() ? meter_.now_ns() : 0);

    // G: flux responses (forwarded incoming requests) -> copyrpc replies; held responses.
    if (flux_) work_ += serve_flux();
    release_held(c_responses_);

    work_ += c_cqes_;
    budget_.observe(c_cqes_);
    m_.record_loop(c_cqes_, ctx_.calls_in_flight());
    if (work_) ++m_.busy_loops;
    return true;
  }

  const DaemonMetrics& metrics() const noexcept { return m_; }
  size_t backlog() const noexcept { return backlog_.size(); }
  size_t held() const noexcept { return hold_.held_count(); }
  Ctx& context() noexcept { return ctx_; }
  uint32_t current_poll_budget() const noexcept { return budget_.current(policy_.poll_budget); }
  bool mid_loop() const noexcept { return in_c_; }

 private:
  struct Backlogged {
    Request req;
    CallToken token;
  };

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
    if (hold_.active()) {
      hold_.hold(HeldResponse{tok.a, tok.b, resp}, meter_.now_ns());
      ++m_.holds;
    } else {
      deliver(tok.a, tok.b, resp);
    }
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
    if (!hold_.enabled()) return;
    const uint64_t now = meter_.now_ns();
    const bool idle = ctx_.calls_in_flight() == 0;
    hold_.maybe_release(now, idle, responses_this_loop, [&](const HeldResponse& h) {
      deliver(h.client, h.slot, h.resp);
      ++m_.held_released;
    });
  }

  // Incoming remote requests: executed here when shard 0 owns the key, else forwarded
  // over flux to the owner (the copyrpc handle waits in pending_).
  void serve_incoming() {
    copyrpc::RecvHandle h;
    while (ctx_.recv(h)) {
      Request req;
      if (!decode(h.payload(), req)) {
        ++m_.protocol_errors;
        reply_remote(h, Response::failure(kv::ErrorCode::kMalformedRequest));
        continue;
      }
      const uint32_t owner = owner_of(req.key, node_.daemons);
      if (owner == 0 || flux_ == nullptr) {
        meter_.charge(Op::kKvOp, 1);
        reply_remote(h, kv::execute(store_, req));
        continue;
      }
      const uint32_t idx = pending_.park(h);
      FluxMsg msg;
      msg.kind = FluxMsg::kExecute;
      msg.req = req;
      meter_.charge(Op::kChannelOp, 1);
      if (flux_->call(owner, msg, CallToken{CallToken::kPending, idx, 0}) != shm::FluxCallStatus::kOk)
        flux_backlog_.push_back({owner, msg, idx});
    }
  }

  void reply_remote(const copyrpc::RecvHandle& h, const Response& resp) {
    if (ctx_.reply(h, as_bytes(resp)) == copyrpc::CallStatus::kOk) ++m_.replies;
  }


  uint32_t serve_flux() {
    uint32_t n = 0;
    flux_->poll([&](const CallToken& tok, const FluxMsg& msg) {
      ++n;
      meter_.charge(Op::kChannelOp, 1);
      copyrpc::RecvHandle h;
      if (tok.origin != CallToken::kPending || msg.kind != FluxMsg::kResponse || !pending_.take(tok.a, h)) {
        ++m_.protocol_errors;
        return;
      }
      reply_remote(h, msg.resp);
    });
    // Daemon #0 receives no flux requests in Delegation; drain defensively.
    while (auto r = flux_->try_recv()) {
      ++m_.protocol_errors;
      FluxMsg out;
      out.kind = FluxMsg::kResponse;
      out.resp = Response::failure(kv::ErrorCode::kMalformedRequest);
      flux_->reply(r->token, out);
    }
    size_t keep = 0;
    for (size_t i = 0; i < flux_backlog_.size(); ++i) {
      auto& b = flux_backlog_[i];
      if (flux_->call(b.target, b.msg, CallToken{CallToken::kPending, b.idx, 0}) != shm::FluxCallStatus::kOk)
        flux_backlog_[keep++] = b;
    }
    flux_backlog_.resize(keep);
    return n;
  }

  // One copyrpc call; on a retryable refusal the request waits in the backlog.
  uint32_t issue(const Request& req, const CallToken& tok) {
    if (req.rank >= node_.np || req.rank == node_.rank || !req.valid()) {
      ++m_.protocol_errors;
      deliver(tok.a, tok.b, Response::failure(kv::ErrorCode::kWrongRank, req.key));
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
    } else {
      ++m_.protocol_errors;
      deliver(tok.a, tok.b, Response::failure(kv::ErrorCode::kMalformedRequest, req.key));
    }
    return 0;
  }

  uint32_t retry_backlog() {
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

  struct FluxBacklogged {
    uint32_t target;
    FluxMsg msg;
    uint32_t idx;
  };

  NodeConfig node_;
  Ctx& ctx_;
  std::vector<uint32_t> ep_of_rank_;
  IpcServerT& ipc_;
  DelegServerT& deleg_;
  FluxNodeT* flux_;
  kv::Store& store_;
  Meter& meter_;
  Waker& waker_;
  HoldPolicy hold_;
  AdaptiveBudget budget_;
  LoopPolicy policy_;
  DaemonMetrics m_;
  // resumable step C
  bool in_c_ = false;
  bool c_until_cqe_ = false;
  uint32_t c_polls_ = 0, c_cqes_ = 0, c_responses_ = 0, c_budget_ = 1, work_ = 0;
  std::vector<shm::DelegationEntry<Request>> batch_;
  std::deque<Backlogged> backlog_;
  PendingRequests pending_;
  std::vector<FluxBacklogged> flux_backlog_;
};

}  // namespace bkv::backend
