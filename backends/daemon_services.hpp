// What every daemon is built from and the work daemons share (docs/design_backends.md §Backends):
//   DaemonWiring / ClientWiring  what the node hands a daemon / a client's remote path
//   serve_shard_ipc              the ipc ring of the daemon's shard: execute, reply, wake
//   ParkedRequests               copyrpc requests waiting for another daemon's answer
//   FluxForwarder                flux calls to other daemons, refused ones in a backlog
//   IncomingRequests             copyrpc requests from peers: executed when this daemon
//                                owns the key's shard (or has no flux), else forwarded
//                                over flux to the owner and answered when it responds
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

#include "backends/messages.hpp"
#include "backends/metrics.hpp"
#include "backends/node_config.hpp"
#include "backends/policies/loop_policy.hpp"
#include "core/copyrpc/context.hpp"
#include "core/kv/store.hpp"
#include "core/meter.hpp"
#include "core/shm/flux.hpp"
#include "core/shm/ipc.hpp"

namespace bkv::backend {

using IpcServerT = shm::IpcServer<Request, Response>;
using IpcClientT = shm::IpcClient<Request, Response>;
using FluxNodeT = shm::FluxNode<FluxMsg, CallToken>;
using kv::owner_of;

// Daemon `id` of a node: its context (if it owns endpoints), its channels, the store.
template <Transport T, class Waker>
struct DaemonWiring {
  using Ctx = copyrpc::Context<T, CallToken>;
  const NodeConfig& node;
  const LoopPolicySettings& policy;
  uint32_t id;
  Ctx* ctx;                                 // null when this daemon owns no endpoint
  const std::vector<uint32_t>& ep_of_rank;  // endpoint per remote rank (~0u: none)
  IpcServerT& ipc;                          // the ring of this daemon's shard
  FluxNodeT* flux;                          // null when the node has one daemon
  kv::Store& store;
  typename T::Meter& meter;
  Waker& waker;
};

// Client c of a node, for building its remote path.
template <Transport T>
struct ClientWiring {
  using Ctx = copyrpc::Context<T, CallToken>;
  const NodeConfig& node;
  uint32_t client;
  const std::vector<IpcClientT*>& ipc;      // one connection per daemon
  Ctx* ctx;                                 // the client's own context (null: none)
  const std::vector<uint32_t>& ep_of_rank;  // the client's endpoints per remote rank
  uint64_t& protocol_errors;                // malformed responses the client saw
};

// Node-level resources of a backend that needs none besides ipc and flux.
struct NoNodeResources {
  explicit NoNodeResources(const NodeConfig&) {}
};

// The daemon traits of a backend whose every daemon is a `Daemon` and that needs no
// node resources besides ipc and flux (backends/node.hpp: NodeResources, Daemon0, Worker).
template <template <Transport, class> class Daemon>
struct UniformDaemons {
  using NodeResources = NoNodeResources;
  template <Transport T, class Waker>
  using Daemon0 = Daemon<T, Waker>;
  template <Transport T, class Waker>
  using Worker = Daemon<T, Waker>;
};

// How a daemon scans its clients' ipc rings: every client on every loop (as the
// original's daemon #0 did), or with the server's skip rule (core/shm/ipc.hpp). Every
// client is scanned with poll_hinted(): where the server keeps request hints (one OS
// thread runs it and its clients: the simulator), only the rings of clients that called
// since are read, with the same outcome and the same clients counted as scanned.
enum class IpcScan : uint8_t { kSkipRule, kEveryClient };

// Serves the ipc ring of a daemon's shard: every request executed on the store. Out of
// line (one call per daemon loop) so that bench/real_kv_callgrind.sh sees the ipc stage
// as a function of its own in every build.
template <class Meter, class Waker>
[[gnu::noinline]] inline uint32_t serve_shard_ipc(IpcServerT& ipc, kv::Store& store, Meter& meter, Waker& waker,
                                                  DaemonMetrics& m, IpcScan how = IpcScan::kSkipRule) {
  const uint64_t scanned = ipc.clients_scanned();
  if (how == IpcScan::kEveryClient)
    ipc.poll_hinted();
  else
    ipc.poll_with_skip();
  meter.charge(Op::kPollSlot, static_cast<uint32_t>(ipc.clients_scanned() - scanned));
  const uint32_t n = ipc.serve([&](const Request& req) { return kv::execute(store, req); },
                               [&](uint32_t client) { waker.wake(client); });
  if (n) {
    meter.charge(Op::kRingOp, 2 * n);
    meter.charge(Op::kKvOp, n);
    m.local_ops += n;
  }
  return n;
}

// copyrpc requests a daemon received and forwarded (over flux) to the daemon owning the
// key's shard, waiting for the answer: their handles (without the payload pointer, which
// is only valid until the next flush), indexed by the token sent along.
class ParkedRequests {
 public:
  uint32_t park(copyrpc::RecvHandle&& h) {
    h.drop_payload();
    if (!free_.empty()) {
      const uint32_t i = free_.back();
      free_.pop_back();
      slots_[i] = std::move(h);
      return i;
    }
    slots_.push_back(std::move(h));
    return static_cast<uint32_t>(slots_.size() - 1);
  }
  // The handle parked at i, released; false if i names no parked request. Taking it
  // leaves the slot's handle spent (moved from), which is what marks the slot free.
  bool take(uint32_t i, copyrpc::RecvHandle& out) {
    if (i >= slots_.size() || slots_[i].spent()) return false;
    out = std::move(slots_[i]);
    free_.push_back(i);
    return true;
  }

 private:
  std::vector<copyrpc::RecvHandle> slots_;
  std::vector<uint32_t> free_;
};

// Flux calls to other daemons. A call the flux refuses (max_inflight outstanding to that
// target) waits in a backlog, retried by retry(). Two disciplines:
//   kInOrder   while the backlog is not empty new calls queue behind it, and a retry
//              stops at the first refusal (calls leave in the order they were made);
//   kFirstFit  a new call is tried at once, and a retry tries every backlogged call
//              (a full target does not hold back calls to the others).
class FluxForwarder {
 public:
  enum class Order : uint8_t { kInOrder, kFirstFit };

  FluxForwarder(FluxNodeT* flux, Order order) : flux_(flux), order_(order) {}

  // Charges one channel operation; true if the call went to the backlog.
  template <class Meter>
  bool forward(uint32_t target, uint8_t kind, const Request& req, const CallToken& tok, Meter& meter) {
    FluxMsg msg;
    msg.kind = kind;
    msg.req = req;
    meter.charge(Op::kChannelOp, 1);
    if ((order_ == Order::kInOrder && !backlog_.empty()) || flux_->call(target, msg, tok) != shm::FluxCallStatus::kOk) {
      backlog_.push_back({target, msg, tok});
      return true;
    }
    return false;
  }

  void retry() {
    if (order_ == Order::kInOrder) {
      while (!backlog_.empty()) {
        const Backlogged& b = backlog_.front();
        if (flux_->call(b.target, b.msg, b.tok) != shm::FluxCallStatus::kOk) break;
        backlog_.pop_front();
      }
      return;
    }
    const size_t n = backlog_.size();
    for (size_t i = 0; i < n; ++i) {
      const Backlogged b = backlog_.front();
      backlog_.pop_front();
      if (flux_->call(b.target, b.msg, b.tok) != shm::FluxCallStatus::kOk) backlog_.push_back(b);
    }
  }
  size_t backlog() const noexcept { return backlog_.size(); }

 private:
  struct Backlogged {
    uint32_t target;
    FluxMsg msg;
    CallToken tok;
  };
  FluxNodeT* flux_;
  Order order_;
  std::deque<Backlogged> backlog_;
};

// The copyrpc requests peers send to daemon `self`: executed here when this daemon owns
// the key's shard or the node has one daemon, else forwarded over flux to the owner
// (through `forward(owner, request, token)`, which the daemon supplies), the handle
// parked until the owner's response comes back (answer_parked).
template <class Ctx, class Meter>
class IncomingRequests {
 public:
  IncomingRequests(const NodeConfig& node, uint32_t self, bool has_flux, kv::Store& store, Meter& meter,
                   DaemonMetrics& m)
      : node_(node), self_(self), has_flux_(has_flux), store_(store), meter_(meter), m_(m) {}

  // Serves every request received on `ctx`; returns how many.
  template <class Forward>
  uint32_t serve(Ctx& ctx, Forward&& forward) {
    uint32_t n = 0;
    copyrpc::RecvHandle h;
    while (ctx.recv(h)) {
      ++n;
      Request req;
      if (!decode(h.payload(), req)) {
        ++m_.protocol_errors;
        reply(ctx, std::move(h), Response::failure(kv::ErrorCode::kMalformedRequest));
        continue;
      }
      const uint32_t owner = owner_of(req.key, node_.daemons);
      if (owner == self_ || !has_flux_) {
        meter_.charge(Op::kKvOp, 1);
        reply(ctx, std::move(h), kv::execute(store_, req));
        continue;
      }
      forward(owner, req, CallToken::parked(parked_.park(std::move(h))));
    }
    return n;
  }

  // The owner's response to the request parked at `index`; false if none is parked there.
  bool answer_parked(Ctx& ctx, uint32_t index, const Response& resp) {
    copyrpc::RecvHandle h;
    if (!parked_.take(index, h)) return false;
    reply(ctx, std::move(h), resp);
    return true;
  }

  void reply(Ctx& ctx, copyrpc::RecvHandle&& h, const Response& resp) {
    if (ctx.reply(std::move(h), as_bytes(resp)) == copyrpc::CallStatus::kOk) ++m_.replies;
  }

 private:
  const NodeConfig& node_;
  uint32_t self_;
  bool has_flux_;
  kv::Store& store_;
  Meter& meter_;
  DaemonMetrics& m_;
  ParkedRequests parked_;
};

}  // namespace bkv::backend
