// Direct backend (copyrpc-direct, docs/design.md §Direct backend): every client thread
// owns its own copyrpc context with endpoints to the remote daemons (daemon c % D of
// every other rank); no intra-node aggregation. Local requests still go over ipc to the
// shard owner.
// A daemon serves its ipc ring and the requests arriving on its endpoints, executing them
// on the node's store directly (the store is shared and atomic; see docs/architecture.md).
#pragma once

#include <vector>

#include "backends/client.hpp"
#include "backends/common.hpp"
#include "backends/delegation/delegation.hpp"
#include "core/copyrpc/context.hpp"

namespace bkv::backend {

// The remote path of a direct client: its own context.
template <Transport T>
struct DirectRemotePath {
  static constexpr bool kSharedHead = false;
  using Ctx = copyrpc::Context<T, CallToken>;
  Ctx* ctx;
  const std::vector<uint32_t>* ep_of_rank;
  uint64_t* protocol_errors;

  bool try_call(const Request& r) {
    if (r.rank >= ep_of_rank->size() || (*ep_of_rank)[r.rank] == ~0u) {
      ++*protocol_errors;
      return false;
    }
    return ctx->call((*ep_of_rank)[r.rank], as_bytes(r), sizeof(Response), CallToken{CallToken::kClient, 0, 0}).ok();
  }
  template <class F>
  uint32_t poll(F&& f) {
    return ctx->drain([&](CallToken&&, std::span<const std::byte> bytes) {
      Response resp;
      if (!decode(bytes, resp)) {
        ++*protocol_errors;
        resp = Response::failure(kv::ErrorCode::kMalformedRequest);
      }
      f(resp);
    });
  }
  void after_issue() { ctx->flush(); }
};

template <Transport T, class Waker>
class DirectDaemon {
 public:
  using Ctx = copyrpc::Context<T, CallToken>;
  using Meter = typename T::Meter;

  DirectDaemon(const NodeConfig& node, Ctx* ctx, IpcServerT& ipc, kv::Store& store, Meter& meter, Waker& waker)
      : node_(node), ctx_(ctx), ipc_(ipc), store_(store), meter_(meter), waker_(waker) {}

  bool step() {
    meter_.charge(Op::kLoop, 1);
    uint32_t work = serve_ipc(ipc_, store_, meter_, waker_, m_);
    uint32_t cqes = 0;
    if (ctx_) {
      cqes = ctx_->drain([&](CallToken&&, std::span<const std::byte>) { ++m_.protocol_errors; });
      copyrpc::RecvHandle h;
      while (ctx_->recv(h)) {
        Request req;
        Response resp;
        if (decode(h.payload(), req)) {
          meter_.charge(Op::kKvOp, 1);
          resp = kv::execute(store_, req);
        } else {
          ++m_.protocol_errors;
          resp = Response::failure(kv::ErrorCode::kMalformedRequest);
        }
        if (ctx_->reply(h, as_bytes(resp)) == copyrpc::CallStatus::kOk) ++m_.replies;
        ++work;
      }
      ctx_->flush();
    }
    meter_.record(Phase::kCqes, cqes);
    m_.record_loop(cqes, 0);
    if (work + cqes) ++m_.busy_loops;
    return true;
  }
  const DaemonMetrics& metrics() const noexcept { return m_; }

 private:
  NodeConfig node_;
  Ctx* ctx_;
  IpcServerT& ipc_;
  kv::Store& store_;
  Meter& meter_;
  Waker& waker_;
  DaemonMetrics m_;
};

}  // namespace bkv::backend
