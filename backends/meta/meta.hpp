// Meta backend (docs/design_backends.md §Meta backend).
//
// Client -> ipc -> daemon. Local requests reach the shard owner (key % D) directly.
// A remote request reaches the client's daemon (client % D), which sends it over
// copyrpc when it owns the endpoint of the target rank (rank % D), or forwards it over
// flux to the daemon that does. Incoming remote requests are executed by the daemon that
// received them when it owns the key's shard, else forwarded over flux to the owner and
// answered when the owner's response comes back.
//
// Loop of daemon d, phase by phase (docs/design_backends.md §Delegation daemon loop names them):
//   ipc             requests of this daemon's clients (execute / copyrpc call / flux forward)
//   poll            copyrpc poll: responses back to ipc clients or flux callers; incoming
//                   requests
//   backlog retry   copyrpc RingFull/InsufficientCredit, full flux rings
//   flux            responses (-> ipc reply / copyrpc reply) and requests (execute / call)
//   flush           one WRITE+IMM per endpoint with pending data
#pragma once

#include <algorithm>
#include <deque>
#include <vector>

#include "backends/backend_kind.hpp"
#include "backends/client.hpp"
#include "backends/daemon_services.hpp"
#include "backends/topology.hpp"
#include "core/copyrpc/context.hpp"

namespace bkv::backend {

// Remote path of a Meta client: an ipc connection to the daemon that serves it
// (client % D). Its responses are collected with those of the other ipc connections
// (poll is a no-op).
struct IpcRemotePath {
  static constexpr bool kSharedHead = false;
  static constexpr bool kDaemonAnswers = true;  // answered over ipc (counted there: poll is a no-op)
  IpcClientT* ipc;

  template <Transport T>
  static IpcRemotePath connect(NoNodeResources&, const ClientWiring<T>& w) {
    return IpcRemotePath{w.ipc[w.client % w.node.daemons]};
  }
  bool try_call(const Request& r, uint64_t token) noexcept { return ipc->call(r, token) == shm::IpcCallStatus::kOk; }
  template <class F>
  uint32_t poll(F&&) {
    return 0;
  }
  void after_issue() noexcept {}
};

template <Transport T, class Waker>
class MetaDaemon {
 public:
  using Ctx = copyrpc::Context<T, CallToken>;
  using Meter = typename T::Meter;

  // w.ctx may be null when this daemon owns no endpoint (np <= daemon id, or np == 1).
  MetaDaemon(const DaemonWiring<T, Waker>& w, NoNodeResources&)
      : node_(w.node), id_(w.id), ctx_(w.ctx), ep_of_rank_(w.ep_of_rank), ipc_(w.ipc), flux_(w.flux),
        store_(w.store), meter_(w.meter), waker_(w.waker), forwarder_(w.flux, FluxForwarder::Order::kInOrder),
        incoming_(node_, w.id, w.flux != nullptr, w.store, w.meter, m_) {}

  bool step() {
    meter_.charge(Op::kLoop, 1);
    uint32_t work = 0, cqes = 0, completions = 0;
    // ipc: this daemon's clients.
    const uint64_t scanned = ipc_.clients_scanned();
    ipc_.poll_with_skip();
    meter_.charge(Op::kPollSlot, static_cast<uint32_t>(ipc_.clients_scanned() - scanned));
    while (auto r = ipc_.recv()) {
      ++work;
      meter_.charge(Op::kRingOp, 1);
      route(r->payload, CallToken::ipc(r->handle));
    }
    // poll: responses, then incoming requests.
    if (ctx_) {
      cqes = ctx_->drain([&](CallToken&& tok, std::span<const std::byte> bytes) {
        Response resp;
        if (!decode(bytes, resp)) {
          ++m_.protocol_errors;
          resp = Response::failure(kv::ErrorCode::kMalformedRequest);
        }
        ++m_.responses;
        ++completions;
        answer(tok, resp);
      }, [&](CallToken&& tok, copyrpc::EndpointError) {
        ++m_.failed_calls;
        answer(tok, Response::failure(kv::ErrorCode::kEndpointStopped));
      });
      incoming_.serve(*ctx_, [&](uint32_t owner, const Request& req, const CallToken& tok) {
        forward(owner, FluxMsg::kExecute, req, tok);
      });
    }
    // backlog retry.
    retry_backlogs();
    // flux.
    if (flux_) {
      flux_->poll([&](const CallToken& tok, const FluxMsg& msg) {
        ++work;
        meter_.charge(Op::kChannelOp, 1);
        if (msg.kind != FluxMsg::kResponse) {
          ++m_.protocol_errors;
          return;
        }
        answer(tok, msg.resp);
      });
      while (auto r = flux_->try_recv()) {
        ++work;
        meter_.charge(Op::kChannelOp, 1);
        const CallToken back = CallToken::flux(r->token);
        if (r->payload.kind == FluxMsg::kExecute) {
          meter_.charge(Op::kKvOp, 1);
          answer(back, kv::execute(store_, r->payload.req));
        } else if (r->payload.kind == FluxMsg::kRemoteCall) {
          call_remote(r->payload.req, back);
        } else {
          ++m_.protocol_errors;
          answer(back, Response::failure(kv::ErrorCode::kMalformedRequest));
        }
      }
    }
    // flush.
    if (ctx_) ctx_->flush();
    meter_.record(Phase::kCqes, cqes);
    m_.record_loop(cqes, completions, ctx_ ? ctx_->calls_in_flight() : 0);
    if (work + cqes) ++m_.busy_loops;
    return true;
  }

  const DaemonMetrics& metrics() const noexcept { return m_; }
  // Loops a scheduler skipped as identical idle ones (the simulator's idle spin).
  void record_idle_loops(uint64_t k) noexcept { m_.record_loop(0, 0, 0, k); }
  size_t backlog() const noexcept { return call_backlog_.size() + forwarder_.backlog(); }

 private:
  struct BackloggedCall {
    Request req;
    CallToken tok;
  };

  // A request from one of this daemon's ipc clients.
  void route(const Request& req, const CallToken& tok) {
    if (!req.valid() || req.rank >= node_.np) {
      ++m_.protocol_errors;
      return answer(tok, Response::failure(kv::ErrorCode::kMalformedRequest, req.key));
    }
    if (req.rank == node_.rank) {
      const uint32_t owner = owner_of(req.key, node_.daemons);
      if (owner == id_ || flux_ == nullptr) {
        meter_.charge(Op::kKvOp, 1);
        return answer(tok, kv::execute(store_, req));
      }
      return forward(owner, FluxMsg::kExecute, req, tok);
    }
    const uint32_t owner = req.rank % node_.daemons;
    if (owner == id_) return call_remote(req, tok);
    forward(owner, FluxMsg::kRemoteCall, req, tok);
  }

  void call_remote(const Request& req, const CallToken& tok) {
    if (ctx_ == nullptr || req.rank >= ep_of_rank_.size() || ep_of_rank_[req.rank] == ~0u) {
      ++m_.protocol_errors;
      return answer(tok, Response::failure(kv::ErrorCode::kWrongRank, req.key));
    }
    const auto r = ctx_->call(ep_of_rank_[req.rank], as_bytes(req), sizeof(Response), tok);
    if (r.ok()) {
      ++m_.calls;
    } else if (copyrpc::retry_after_poll(r.status)) {
      call_backlog_.push_back({req, tok});
      m_.backlog_peak = std::max<uint64_t>(m_.backlog_peak, backlog());
    } else if (r.status == copyrpc::CallStatus::kEndpointError) {
      ++m_.failed_calls;
      answer(tok, Response::failure(kv::ErrorCode::kEndpointStopped, req.key));
    } else {
      ++m_.protocol_errors;
      answer(tok, Response::failure(kv::ErrorCode::kMalformedRequest, req.key));
    }
  }

  void forward(uint32_t target, uint8_t kind, const Request& req, const CallToken& tok) {
    if (forwarder_.forward(target, kind, req, tok, meter_)) m_.backlog_peak = std::max<uint64_t>(m_.backlog_peak, backlog());
  }

  // Delivers a response to whoever is waiting for it.
  void answer(const CallToken& tok, const Response& resp) {
    switch (tok.origin) {
      case CallToken::kIpc:
        if (ipc_.reply(tok.ipc_handle(), resp) != shm::IpcReplyStatus::kOk) ++m_.protocol_errors;
        meter_.charge(Op::kRingOp, 1);
        waker_.wake(tok.waiter);
        return;
      case CallToken::kFlux: {
        FluxMsg out;
        out.kind = FluxMsg::kResponse;
        out.resp = resp;
        if (flux_->reply(tok.flux_reply(), out) != shm::FluxReplyStatus::kOk) ++m_.protocol_errors;
        meter_.charge(Op::kChannelOp, 1);
        return;
      }
      case CallToken::kParked:
        if (!incoming_.answer_parked(*ctx_, tok.waiter, resp)) ++m_.protocol_errors;
        return;
      default:
        ++m_.protocol_errors;
    }
  }

  void retry_backlogs() {
    const size_t n = call_backlog_.size();
    for (size_t i = 0; i < n; ++i) {
      const BackloggedCall p = call_backlog_.front();
      call_backlog_.pop_front();
      call_remote(p.req, p.tok);
    }
    forwarder_.retry();
  }

  NodeConfig node_;
  uint32_t id_;
  Ctx* ctx_;
  std::vector<uint32_t> ep_of_rank_;
  IpcServerT& ipc_;
  FluxNodeT* flux_;
  kv::Store& store_;
  Meter& meter_;
  Waker& waker_;
  DaemonMetrics m_;
  std::deque<BackloggedCall> call_backlog_;
  FluxForwarder forwarder_;
  IncomingRequests<Ctx, Meter> incoming_;
};

// The Meta backend as Node composes it: every daemon is a MetaDaemon.
struct MetaBackend : UniformDaemons<MetaDaemon>, DaemonByRankMesh {
  static constexpr BackendKind kKind = BackendKind::kMeta;  // its command-line name: to_string(kKind)
  template <Transport T>
  using RemotePath = IpcRemotePath;
  static constexpr StandingContexts kStandingContexts = StandingContexts::kNone;
};

}  // namespace bkv::backend
