// A whole benchkv cluster in one process over the wall-clock loopback transport
// (transports/loopback/wallclock.hpp): NP nodes of a backend, each thread of each
// node on its own ThreadGroup thread, measured by the same runtime as MPI runs
// (real/driver.hpp) with an InProcessCoordinator. No MPI, no UCX: the tests run it
// under ThreadSanitizer. Threads are not pinned and idle steps yield (the cluster has
// more threads than a test machine has CPUs).
#pragma once

#include <memory>
#include <stdexcept>
#include <vector>

#include "apps/benchkv/node/node_runtime.hpp"
#include "apps/benchkv/node/node_setup.hpp"
#include "apps/benchkv/real/driver.hpp"
#include "backends/node_backends.hpp"
#include "transports/loopback/wallclock.hpp"

namespace bkv::real {

// The wall-clock loopback: one WallclockTransport per context-owning thread, on one
// fabric shared by every node of the process.
struct MakeWallclockTransport {
  loopback::WallclockFabric* fabric;
  uint32_t srq_capacity;
  app::OwnedTransports<loopback::WallclockTransport> owned;
  loopback::WallclockTransport& operator()(uint32_t /*thread*/, NullMeter& /*meter*/) {
    return owned.emplace(*fabric, srq_capacity);
  }
};
using WallclockRuntime = app::NodeRuntime<app::RealThreads, MakeWallclockTransport>;

// Runs o.np nodes of o.backend (meta, delegation or direct) in this process; every
// other option as for benchkv. Returns the full results (this process is every rank).
// `oracle` (optional, made with HistoryOracle::Threads::kSharedByThreads) records every
// issue, store operation and answer of the whole run, drain included, for its check().
inline RealResult run_wallclock_cluster(const app::Options& o, const loopback::WallclockConfig& wc = {},
                                        kv::HistoryOracle* oracle = nullptr) {
  if (!o.backend) throw std::invalid_argument("no backend given");
  return backend::with_node_backend(*o.backend, [&]<class B>() {
    using NodeT = backend::Node<B, WallclockRuntime>;
    const uint32_t np = o.np, D = o.server_threads, C = o.client_threads;
    loopback::WallclockFabric fabric(wc);
    std::vector<std::unique_ptr<WallclockRuntime>> rts;
    std::vector<std::unique_ptr<NodeT>> nodes;
    for (uint32_t r = 0; r < np; ++r) {
      const app::NodeSetup ns = app::node_setup(o, r, np);
      rts.push_back(std::make_unique<WallclockRuntime>(D + C, app::RealThreads{},
                                                       MakeWallclockTransport{&fabric, ns.context.srq_size, {}}));
      nodes.push_back(std::make_unique<NodeT>(ns.node, ns.loop, ns.workload, ns.context, *rts.back()));
    }
    backend::connect_in_process(nodes);
    if (oracle != nullptr)
      for (auto& n : nodes) n->attach_oracle(oracle);

    std::vector<typename Driver<NodeT>::Local> locals;
    for (uint32_t r = 0; r < np; ++r) {
      runtime::PinPlan unpinned;
      unpinned.daemon_cpus.assign(D, -1);
      unpinned.client_cpus.assign(C, -1);
      locals.push_back({nodes[r].get(), r, std::move(unpinned)});
    }
    Driver<NodeT> drv(std::move(locals), D, C, /*yield_when_idle=*/true);
    drv.spawn();
    InProcessCoordinator coord{np};
    return run_measurement(drv, o, coord, {});  // its threads are joined: the oracle's record is whole
  });
}

}  // namespace bkv::real
