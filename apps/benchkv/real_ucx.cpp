// benchkv --transport ucx under MPI: the copyrpc backends (meta, delegation, direct) over
// the UCX transport, one UcxTransport (UCP context + worker) per thread that owns a
// copyrpc context; and the pure UCX active-message baseline (ucx-am).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/benchkv/real_mpi.hpp"
#include "apps/benchkv/real_transports.hpp"
#include "backends/ucx_am/ucx_am.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace bkv::real {

namespace {

// Node runtime over UCX: the transport of a thread is created when the node asks for it
// (on the main thread, before the threads start), then used by that thread only.
struct UcxRuntime {
  using Transport = ucx::UcxTransport;
  using Waker = backend::NullWaker;

  explicit UcxRuntime(uint32_t threads) : by_thread(threads) {}
  Transport& transport(uint32_t thread) {
    if (thread >= by_thread.size()) throw std::out_of_range("ucx runtime: thread " + std::to_string(thread));
    if (!by_thread[thread]) by_thread[thread] = std::make_unique<Transport>(ucx::Config{});  // UCX_TLS from the environment
    return *by_thread[thread];
  }
  NullMeter& meter(uint32_t) noexcept { return null_meter; }
  Waker& waker() noexcept { return null_waker; }
  uint64_t protocol_errors() const noexcept {
    uint64_t n = 0;
    for (const auto& t : by_thread)
      if (t) n += t->protocol_errors();
    return n;
  }
  uint32_t transports() const noexcept {
    uint32_t n = 0;
    for (const auto& t : by_thread) n += t != nullptr;
    return n;
  }

  std::vector<std::unique_ptr<Transport>> by_thread;
  NullMeter null_meter;
  Waker null_waker;
};

RealResult run_ucx_am(const mpi::Session& s, const app::Options& o, const RankPlan& plan,
                      const ProgressFn& progress) {
  const uint32_t np = static_cast<uint32_t>(s.size()), rank = static_cast<uint32_t>(s.rank());
  const uint32_t D = o.server_threads, C = o.client_threads;
  const app::NodeSetup ns = app::node_setup(o, rank, np);
  ucx_am::UcxAmNode node(ns.node, ns.workload);
  // Every rank's worker addresses to every rank (the same blob to each peer).
  const std::vector<ucx_am::WorkerAddress> mine = node.local_addresses();
  std::vector<ucx_am::WorkerAddress> out;
  for (uint32_t j = 0; j < np; ++j) out.insert(out.end(), mine.begin(), mine.end());
  const std::vector<ucx_am::WorkerAddress> all =
      s.all_to_all(std::span<const ucx_am::WorkerAddress>(out), mine.size());
  node.connect(all);
  node.start();
  std::vector<Driver<ucx_am::UcxAmNode>::Local> locals{{&node, rank, plan.pins}};
  Driver<ucx_am::UcxAmNode> drv(std::move(locals), D, C, plan.oversubscribed);
  drv.spawn();
  print_pin_notes(drv.pin_notes(), s.rank());
  MpiCoordinator coord{s};
  RealResult res = run_measurement(drv, o, coord, progress);
  s.barrier();
  return res;
}

}  // namespace

int run_ucx(const app::Options& o) {
  mpi::Session s(nullptr, nullptr);
  try {
    const RankPlan plan = plan_rank(o, s, "");
    ProgressFn progress;
    if (s.rank() == 0) progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    RealResult res;
    nlohmann::json extra = {{"transport", "ucx"},
                            {"ranks", s.size()},
                            {"ranks_on_rank0_node", s.local_size()},
                            {"ucx_tls", std::getenv("UCX_TLS") ? std::getenv("UCX_TLS") : ""},
                            {"idle_yield", plan.oversubscribed},
                            {"pinning", plan.pins.warning.empty() ? "pinned" : plan.pins.warning}};
    if (o.backend == backend::BackendKind::kUcxAm) {
      res = run_ucx_am(s, o, plan, progress);
    } else {
      UcxRuntime rt(o.server_threads + o.client_threads);
      res = run_node_mpi(s, o, rt, plan, progress);
      const uint64_t dropped = s.allreduce_sum(rt.protocol_errors());
      extra["transport_protocol_errors"] = dropped;
      extra["ucx_workers_per_rank"] = rt.transports();
      res.errors += dropped;
    }
    return finish_mpi(s, o, res, extra);
  } catch (const std::exception& e) {
    s.abort(1, std::string("benchkv: ") + e.what());
  }
}

}  // namespace bkv::real
