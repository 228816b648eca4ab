// benchkv --transport ucx under MPI: the copyrpc backends (meta, delegation, direct) over
// the UCX transport, one UcxTransport (UCP context + worker) per thread that owns a
// copyrpc context; and the pure UCX active-message baseline (ucx-am), for the KV
// benchmark and for `benchkv data --data-backend ucx-am`.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/benchkv/node/node_runtime.hpp"
#include "apps/benchkv/real/mpi_run.hpp"
#include "apps/benchkv/real/data.hpp"
#include "apps/benchkv/real/probe_mpi.hpp"
#include "apps/benchkv/real/rpc.hpp"
#include "apps/benchkv/real/transports.hpp"
#include "apps/benchkv/real/ucx_transports.hpp"
#include "backends/ucx_am/ucx_am.hpp"
#include "backends/ucx_am/ucx_am_data.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace bkv::real {

namespace {

// --transport ucx: one UcxTransport per context-owning thread, made when the node asks
// for it (on the main thread, before the threads start), then used by that thread only.
// UCX_TLS comes from the environment.
struct MakeUcxTransport {
  app::OwnedTransports<ucx::UcxTransport> owned;
  ucx::UcxTransport& operator()(uint32_t /*thread*/, NullMeter& /*meter*/) { return owned.emplace(ucx::Config{}); }
};
using UcxRuntime = app::NodeRuntime<app::RealThreads, MakeUcxTransport>;

// The ucx-am data node of one rank, connected to every rank (measure_data_mpi's node).
class UcxAmDataRank {
 public:
  UcxAmDataRank(const mpi::Session& s, const data::DataNodeConfig& cfg) : node_(cfg) {
    const std::vector<ucx_am::WorkerAddress> mine = node_.local_addresses();
    std::vector<ucx_am::WorkerAddress> out;
    for (uint32_t j = 0; j < cfg.np; ++j) out.insert(out.end(), mine.begin(), mine.end());
    node_.connect(s.all_to_all(std::span<const ucx_am::WorkerAddress>(out), mine.size()));
  }
  void step() {
    node_.step_daemon();
    for (uint32_t c = 0; c < node_.clients(); ++c) node_.step_client(c);
  }
  const data::DataClientCounters& counters(uint32_t c) const { return node_.counters(c); }
  const copyrpc::RttHistogram& latency(uint32_t c) const { return node_.latency(c); }
  void restart_latency_max(uint32_t c) { node_.restart_latency_max(c); }
  std::vector<std::string> endpoint_descriptions() const { return node_.endpoint_descriptions(); }
  uint64_t in_flight(uint32_t c) const { return node_.in_flight(c); }
  uint64_t errors() const { return node_.protocol_errors(); }
  uint64_t rejected() const { return node_.server_counters().rejected_total(); }
  void stop_issuing() { node_.stop_issuing(); }

 private:
  ucx_am::UcxAmDataNode node_;
};

// `extra` gets the transports UCX selected (collective, after the endpoints are made).
RealResult run_ucx_am(const mpi::Session& s, const app::Options& o, const RankPlan& plan,
                      const ProgressFn& progress, nlohmann::json& extra) {
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
  extra["ucx_transports"] = gather_ucx_transports(s, node.endpoint_descriptions());
  node.start();
  std::vector<Driver<ucx_am::UcxAmNode>::Local> locals{{&node, rank, plan.pins}};
  Driver<ucx_am::UcxAmNode> drv(std::move(locals), D, C, plan.oversubscribed);
  drv.spawn();
  print_pin_notes(drv.pin_notes(), s.rank());
  MpiCoordinator coord{s};
  RealResult res = run_measurement(drv, o, coord, progress);
  if (!res.incomplete.empty()) {  // this rank's endpoints only, as a copyrpc backend's (run_node_mpi)
    extra["ucx_transports"] = ucx_transports_of(node.endpoint_descriptions()).to_json();
    finish_incomplete(s, o, res, extra, plan);
  }
  s.barrier();
  return res;
}

}  // namespace

namespace {

int run_ucx(const app::Options& o) {
  mpi::Session s(nullptr, nullptr);
  if (const int status = real_ranks_checked(s, o); status != 0) return status;
  try {
    // A stopped or dead peer ends this rank too (mpi_orchestration.hpp): the longest
    // phase between two collectives is one run.
    s.start_watchdog(o.duration);
    // Every rank the same build and options, before anything sized by them is exchanged.
    check_same_run(s, o);
    // Rank 0 writes the outputs: their directories are made and each is checked writable
    // before the run, so a bad path ends every rank now (abort below), not after the run.
    if (s.rank() == 0) app::prepare_output_files(o);
    const nlohmann::json tls = std::getenv("UCX_TLS") ? std::getenv("UCX_TLS") : "";
    switch (o.mode) {
      case app::Mode::kData:  // one thread per rank, left unpinned
        if (o.data_backend == backend::BackendKind::kUcxAm)
          return measure_data_mpi(
              s, o, [&](const data::DataNodeConfig& cfg) { return std::make_unique<UcxAmDataRank>(s, cfg); },
              {{"transport", "ucx"},
               {"ucx_tls", tls},
               {"pinning", "unpinned (the main thread steps daemon #0 and every client in turn)"}});
        return run_data_mpi<ucx::UcxTransport>(
            s, o, [] { return std::make_unique<ucx::UcxTransport>(ucx::Config{}); },
            {{"transport", "ucx"},
             {"ucx_tls", tls},
             {"pinning", "unpinned (the main thread steps daemon #0 and every client in turn)"}});
      case app::Mode::kRpc: {  // one thread per rank, left unpinned
        UcxRuntime rt(1, {}, {});
        return run_rpc_mpi(s, o, rt,
                           {{"transport", "ucx"}, {"ucx_tls", tls}, {"pinning", "unpinned (the rpc thread is the main thread)"}});
      }
      case app::Mode::kKv: break;
      case app::Mode::kSweep:
      case app::Mode::kCompare: throw std::logic_error("benchkv: sweep and compare are not real runs");
    }
    const RankPlan plan = plan_rank(o, s, "");
    ProgressFn progress;
    if (s.rank() == 0) progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    RealResult res;
    nlohmann::json extra = {{"transport", "ucx"},
                            {"ranks", s.size()},
                            {"ranks_on_rank0_node", s.local_size()},
                            {"ucx_tls", tls},
                            {"idle_yield", plan.oversubscribed},
                            {"pinning", plan.pins.warning.empty() ? "pinned" : plan.pins.warning}};
    if (o.backend == backend::BackendKind::kUcxAm) {
      res = run_ucx_am(s, o, plan, progress, extra);
    } else {
      UcxRuntime rt(o.server_threads + o.client_threads, {}, {});
      res = run_node_mpi(s, o, rt, plan, progress, extra);
      uint64_t protocol_errors = 0;
      std::vector<std::string> descriptions;  // recorded when each queue pair connected
      rt.for_each_transport([&](const ucx::UcxTransport& t) {
        protocol_errors += t.protocol_errors();
        descriptions.insert(descriptions.end(), t.endpoint_descriptions().begin(), t.endpoint_descriptions().end());
      });
      extra["ucx_transports"] = gather_ucx_transports(s, descriptions);
      const uint64_t dropped = s.allreduce_sum(protocol_errors);
      extra["transport_protocol_errors"] = dropped;
      extra["ucx_workers_per_rank"] = rt.transports();
      res.errors += dropped;
    }
    return finish_mpi(s, o, res, extra, plan);
  } catch (...) {
    end_after_exception(s);
  }
}

const RegisterRealTransport kRegistered{app::TransportKind::kUcx, &run_ucx};

// `mpirun -np 2 benchkv probe --transport ucx` (real/probe_mpi.hpp): one UcxTransport per
// rank, on the main thread, and one per posting thread of the tests with several; UCX_TLS
// comes from the environment.
int probe_ucx(const ProbeRequest& r) {
  mpi::Session s(nullptr, nullptr);
  if (const int status = probe_ranks_checked(s); status != 0) return status;
  try {
    s.start_watchdog(kProbePhaseSecondsPerScale * std::max(1.0, r.scale));
    const char* tls = std::getenv("UCX_TLS");
    ucx::UcxTransport t(ucx::Config{});
    return run_probe_mpi(s, t, [] { return std::make_unique<ucx::UcxTransport>(ucx::Config{}); }, r,
                         {{"transport", "ucx"}, {"UCX_TLS", tls != nullptr ? tls : ""}, {"ucx_workers_per_rank", 1},
                          {"ucx_workers_per_posting_thread", 1}});
  } catch (...) {
    end_after_exception(s);
  }
}

const RegisterRealProbe kProbeRegistered{app::TransportKind::kUcx, &probe_ucx};

}  // namespace

}  // namespace bkv::real
