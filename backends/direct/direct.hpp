// Direct backend (copyrpc-direct, docs/design_backends.md §Direct backend), as the original ran
// it: every client thread owns its own copyrpc context with an endpoint to a daemon of
// every rank (daemon c % D), its own rank included: local requests go through the NIC
// too (its loopback), as in the UCX baseline's topology. No intra-node aggregation.
// Client loop: poll (drain the receive CQ, then flush every endpoint), count the
// completions, refill the queue depth; the new calls leave at the next poll's flush.
// Daemon loop: poll (drain; its flush sends the previous pass's replies), then execute
// every received request on the node's store and reply (the store is shared and atomic;
// see docs/architecture.md); replies leave at the next poll.
#pragma once

#include <vector>

#include "backends/backend_kind.hpp"
#include "backends/client.hpp"
#include "backends/daemon_services.hpp"
#include "backends/topology.hpp"
#include "core/copyrpc/context.hpp"

namespace bkv::backend {

// The remote path of a direct client: its own context.
template <Transport T>
struct DirectRemotePath {
  static constexpr bool kSharedHead = false;
  static constexpr bool kDaemonAnswers = false;  // the client's own context: the NIC writes the answers
  static constexpr bool kLocalToo = true;        // its own rank's daemon over the NIC's loopback
  static constexpr bool kRefillAfterPoll = true;
  using Ctx = copyrpc::Context<T, CallToken>;
  Ctx* ctx;
  const std::vector<uint32_t>* ep_of_rank;
  uint64_t* protocol_errors;

  static DirectRemotePath connect(NoNodeResources&, const ClientWiring<T>& w) {
    return DirectRemotePath{w.ctx, &w.ep_of_rank, &w.protocol_errors};
  }
  std::vector<uint32_t> refused;  // tokens of requests whose endpoint had stopped: failed at the next poll

  bool try_call(const Request& r, uint64_t token) {
    if (r.rank >= ep_of_rank->size() || (*ep_of_rank)[r.rank] == ~0u) {
      ++*protocol_errors;
      return false;
    }
    const auto res =
        ctx->call((*ep_of_rank)[r.rank], as_bytes(r), sizeof(Response), CallToken::own_call(static_cast<uint32_t>(token)));
    if (res.status == copyrpc::CallStatus::kEndpointError) [[unlikely]] {
      // The endpoint to that rank stopped: the request is taken and reported failed.
      refused.push_back(static_cast<uint32_t>(token));
      return true;
    }
    return res.ok();
  }
  template <class F>
  uint32_t poll(F&& f) {
    const Response stopped = Response::failure(kv::ErrorCode::kEndpointStopped);
    const uint32_t n = ctx->drain(
        [&](CallToken&& tok, std::span<const std::byte> bytes) {
          Response resp;
          if (!decode(bytes, resp)) {
            ++*protocol_errors;
            resp = Response::failure(kv::ErrorCode::kMalformedRequest);
          }
          f(uint64_t{tok.slot}, resp);
        },
        [&](CallToken&& tok, copyrpc::EndpointError) { f(uint64_t{tok.slot}, stopped); });
    ctx->flush();  // the poll ends with a flush: the calls of the last refill leave now
    if (!refused.empty()) [[unlikely]] {
      // The callback may issue again, and a refused call adds to `refused`: it waits for
      // the next poll.
      std::vector<uint32_t> now;
      now.swap(refused);
      for (uint32_t t : now) f(uint64_t{t}, stopped);
    }
    return n;
  }
  void after_issue() noexcept {}  // calls leave at the next poll's flush
  bool failures_waiting() const noexcept { return !refused.empty(); }
};

template <Transport T, class Waker>
class DirectDaemon {
 public:
  using Ctx = copyrpc::Context<T, CallToken>;
  using Meter = typename T::Meter;

  // Executes every incoming request itself: no flux.
  DirectDaemon(const DaemonWiring<T, Waker>& w, NoNodeResources&)
      : node_(w.node), ctx_(w.ctx), store_(w.store), meter_(w.meter),
        incoming_(node_, w.id, /*has_flux=*/false, w.store, w.meter, m_) {}

  bool step() {
    meter_.charge(Op::kLoop, 1);
    uint32_t work = 0, cqes = 0;
    if (ctx_) {
      // Direct daemons make no calls: a response or a failed call is a protocol error.
      cqes = ctx_->drain([&](CallToken&&, std::span<const std::byte>) { ++m_.protocol_errors; },
                         [&](CallToken&&, copyrpc::EndpointError) { ++m_.protocol_errors; });
      ctx_->flush();  // the previous pass's replies
      work += incoming_.serve(*ctx_, [](uint32_t, const Request&, const CallToken&) {});
    }
    meter_.record(Phase::kCqes, cqes);
    m_.record_loop(cqes, 0, 0);  // direct daemons only serve: no completions
    if (work + cqes) ++m_.busy_loops;
    return true;
  }
  const DaemonMetrics& metrics() const noexcept { return m_; }
  // Loops a scheduler skipped as identical idle ones (the simulator's idle spin).
  void record_idle_loops(uint64_t k) noexcept { m_.record_loop(0, 0, 0, k); }

 private:
  NodeConfig node_;
  Ctx* ctx_;
  kv::Store& store_;
  Meter& meter_;
  DaemonMetrics m_;
  IncomingRequests<Ctx, Meter> incoming_;
};

// The direct backend as Node composes it: every daemon is a DirectDaemon, every client
// owns a context.
struct DirectBackend : UniformDaemons<DirectDaemon>, ClientToDaemonMesh {
  static constexpr BackendKind kKind = BackendKind::kDirect;  // its command-line name: to_string(kKind)
  template <Transport T>
  using RemotePath = DirectRemotePath<T>;
  static constexpr StandingContexts kStandingContexts = StandingContexts::kEveryClient;
};

}  // namespace bkv::backend
