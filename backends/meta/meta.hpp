// Meta backend (docs/design.md §Meta backend).
//
// Client -> ipc -> daemon. Local requests reach the shard owner (key % D) directly.
// A remote request reaches the client's daemon (client % D), which sends it over
// copyrpc when it owns the endpoint of the target rank (rank % D), or forwards it over
// flux to the daemon that does. Incoming remote requests are executed by the daemon that
// received them when it owns the key's shard, else forwarded over flux to the owner and
// answered when the owner's response comes back.
//
// Loop of daemon d:
//   A  ipc: requests of this daemon's clients (execute / copyrpc call / flux forward)
//   B  copyrpc poll: responses back to ipc clients or flux callers; incoming requests
//   C  backlog retry (copyrpc RingFull/InsufficientCredit, full flux rings)
//   D  flux: responses (-> ipc reply / copyrpc reply) and requests (execute / call)
//   E  flush endpoints
#pragma once

#include <deque>
#include <vector>

#include "backends/common.hpp"
#include "backends/delegation/delegation.hpp"
#include "core/copyrpc/context.hpp"

namespace bkv::backend {

template <Transport T, class Waker>
class MetaDaemon {
 public:
  using Ctx = copyrpc::Context<T, CallToken>;
  using Meter = typename T::Meter;

  // ctx may be null when this daemon owns no endpoint (np <= daemon id, or np == 1).
  MetaDaemon(const NodeConfig& node, uint32_t id, Ctx* ctx, std::vector<uint32_t> ep_of_rank, IpcServerT& ipc,
             FluxNodeT* flux, kv::Store& store, Meter& meter, Waker& waker)
      : node_(node), id_(id), ctx_(ctx), ep_of_rank_(std::move(ep_of_rank)), ipc_(ipc), flux_(flux), store_(store),
        meter_(meter), waker_(waker) {}

  bool step() {
    meter_.charge(Op::kLoop, 1);
    uint32_t work = 0, cqes = 0;
    // A: this daemon's ipc clients.
    const uint64_t scanned = ipc_.clients_scanned();
    ipc_.poll_with_skip();
    meter_.charge(Op::kPollSlot, static_cast<uint32_t>(ipc_.clients_scanned() - scanned));
    while (auto r = ipc_.recv()) {
      ++work;
      meter_.charge(Op::kRingOp, 1);
      route(r->payload, CallToken{CallToken::kIpc, r->handle.client, r->handle.token});
    }
    // B: copyrpc.
    if (ctx_) {
      cqes = ctx_->drain([&](CallToken&& tok, std::span<const std::byte> bytes) {
        Response resp;
        if (!decode(bytes, resp)) {
          ++m_.protocol_errors;
          resp = Response::failure(kv::ErrorCode::kMalformedRequest);
        }
        ++m_.responses;
        answer(tok, resp);
      });
      copyrpc::RecvHandle h;
      while (ctx_->recv(h)) {
        Request req;
        if (!decode(h.payload(), req)) {
          ++m_.protocol_errors;
          reply_remote(h, Response::failure(kv::ErrorCode::kMalformedRequest));
          continue;
        }
        const uint32_t owner = owner_of(req.key, node_.daemons);
        if (owner == id_ || flux_ == nullptr) {
          meter_.charge(Op::kKvOp, 1);
          reply_remote(h, kv::execute(store_, req));
        } else {
          forward(owner, FluxMsg::kExecute, req, CallToken{CallToken::kPending, pending_.park(h), 0});
        }
      }
    }
    // C: backlogs.
    retry_backlogs();
    // D: flux.
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
        const CallToken back{CallToken::kFlux, r->token.source, r->token.slot};
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
    // E: flush.
    if (ctx_) ctx_->flush();
    meter_.record(Phase::kCqes, cqes);
    m_.record_loop(cqes, ctx_ ? ctx_->calls_in_flight() : 0);
    if (work + cqes) ++m_.busy_loops;
    return true;
  }

  const DaemonMetrics& metrics() const noexcept { return m_; }
  size_t backlog() const noexcept { return call_backlog_.size() + flux_backlog_.size(); }

 private:
  struct PendingCall {
    Request req;
    CallToken tok;
  };
  struct PendingFlux {
    uint32_t target;
    FluxMsg msg;
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
    } else if (r.status == copyrpc::CallStatus::kRingFull || r.status == copyrpc::CallStatus::kInsufficientCredit) {
      call_backlog_.push_back({req, tok});
      m_.backlog_peak = std::max<uint64_t>(m_.backlog_peak, backlog());
    } else {
      ++m_.protocol_errors;
      answer(tok, Response::failure(kv::ErrorCode::kMalformedRequest, req.key));
    }
  }

  void forward(uint32_t target, uint8_t kind, const Request& req, const CallToken& tok) {
    FluxMsg msg;
    msg.kind = kind;
    msg.req = req;
    meter_.charge(Op::kChannelOp, 1);
    if (!flux_backlog_.empty() || flux_->call(target, msg, tok) != shm::FluxCallStatus::kOk) {
      flux_backlog_.push_back({target, msg, tok});
      m_.backlog_peak = std::max<uint64_t>(m_.backlog_peak, backlog());
    }
  }

  // Delivers a response to whoever is waiting for it.
  void answer(const CallToken& tok, const Response& resp) {
    switch (tok.origin) {
      case CallToken::kIpc:
        if (ipc_.reply(shm::IpcHandle{tok.a, tok.b}, resp) != shm::IpcReplyStatus::kOk) ++m_.protocol_errors;
        meter_.charge(Op::kRingOp, 1);
        waker_.wake(tok.a);
        return;
      case CallToken::kFlux: {
        FluxMsg out;
        out.kind = FluxMsg::kResponse;
        out.resp = resp;
        if (flux_->reply(shm::FluxReplyToken{tok.a, tok.b}, out) != shm::FluxReplyStatus::kOk) ++m_.protocol_errors;
        meter_.charge(Op::kChannelOp, 1);
        return;
      }
      case CallToken::kPending:
        if (copyrpc::RecvHandle h; pending_.take(tok.a, h)) reply_remote(h, resp);
        else ++m_.protocol_errors;
        return;
      default:
        ++m_.protocol_errors;
    }
  }

  void reply_remote(const copyrpc::RecvHandle& h, const Response& resp) {
    if (ctx_->reply(h, as_bytes(resp)) == copyrpc::CallStatus::kOk) ++m_.replies;
  }


  void retry_backlogs() {
    const size_t n = call_backlog_.size();
    for (size_t i = 0; i < n; ++i) {
      const PendingCall p = call_backlog_.front();
      call_backlog_.pop_front();
      call_remote(p.req, p.tok);
    }
    while (!flux_backlog_.empty()) {
      const PendingFlux& p = flux_backlog_.front();
      if (flux_->call(p.target, p.msg, p.tok) != shm::FluxCallStatus::kOk) break;
      flux_backlog_.pop_front();
    }
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
  std::deque<PendingCall> call_backlog_;
  std::deque<PendingFlux> flux_backlog_;
  PendingRequests pending_;
};

}  // namespace bkv::backend
