// The client thread of every backend: a closed loop that keeps `queue_depth` requests in
// flight, replaying its pre-generated pattern. Local requests (target rank = this node)
// go over ipc straight to the shard owner (key % D); remote requests take the backend's
// remote path (its traits' RemotePath): ipc to a daemon (Meta), the delegation ring of
// daemon #0 (Delegation), or the client's own copyrpc context (direct). A remote path has
//   static constexpr bool kSharedHead   every call contends on one shared ring head
//   static RemotePath connect(NodeResources&, const ClientWiring<T>&)
//   bool try_call(const Request&); uint32_t poll(F on_response); void after_issue()
//
// step(): collect responses, then issue requests into the freed slots. It never blocks:
// a remote path that is full (delegation ring) leaves the request for the next step and
// says so in the result, so an event-driven scheduler retries it.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/daemon_services.hpp"
#include "core/kv/workload.hpp"

namespace bkv::backend {

struct ClientStepResult {
  uint32_t completed = 0;
  uint32_t issued = 0;
  bool blocked = false;  // a request could not be posted: retry without waiting for a response
};

template <class Meter, class RemotePath>
class Client {
 public:
  // ipc: one connection per daemon of this node (index d = daemon d).
  Client(const NodeConfig& node, kv::Pattern pattern, std::vector<IpcClientT*> ipc, RemotePath remote, Meter& meter,
         ClientCounters& counters)
      : node_(node), pattern_(std::move(pattern)), ipc_(std::move(ipc)), remote_(remote), meter_(meter),
        counters_(counters) {}

  ClientStepResult step() {
    ClientStepResult res;
    auto on_resp = [&](const Response& r) {
      ++res.completed;
      if (!r.valid() || r.is_error()) counters_.errors.store(counters_.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    };
    for (IpcClientT* c : ipc_) c->poll([&](uint64_t, const Response& r) { on_resp(r); });
    remote_.poll(on_resp);
    if (res.completed) {
      in_flight_ -= res.completed;
      counters_.add_completed(res.completed);
      meter_.charge(Op::kRingOp, res.completed);
    }
    while (!stopping_ && in_flight_ < node_.queue_depth) {
      const Request req = pattern_.peek();
      bool ok;
      if (req.rank == node_.rank) {
        ok = ipc_[owner_of(req.key, node_.daemons)]->call(req) == shm::IpcCallStatus::kOk;
      } else {
        ok = remote_.try_call(req);
        if constexpr (RemotePath::kSharedHead) meter_.charge(Op::kRingReserve, 1);
      }
      if (!ok) {
        res.blocked = true;
        break;
      }
      pattern_.advance();
      ++in_flight_;
      ++res.issued;
    }
    remote_.after_issue();  // a path that batches (copyrpc) sends what was issued
    if (res.issued) {
      counters_.add_issued(res.issued);
      meter_.charge(Op::kClientRequest, res.issued);
      meter_.charge(Op::kRingOp, res.issued);
    }
    return res;
  }

  void stop_issuing() noexcept { stopping_ = true; }
  uint32_t in_flight() const noexcept { return in_flight_; }
  Meter& meter() noexcept { return meter_; }

 private:
  NodeConfig node_;
  kv::Pattern pattern_;
  std::vector<IpcClientT*> ipc_;
  RemotePath remote_;
  Meter& meter_;
  ClientCounters& counters_;
  uint32_t in_flight_ = 0;
  bool stopping_ = false;
};

}  // namespace bkv::backend
