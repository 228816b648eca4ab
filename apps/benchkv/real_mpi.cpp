// The rank-level pieces of real runs that need no transport: pinning plan, outputs.
#include "apps/benchkv/real_mpi.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/bench/results.hpp"

namespace bkv::real {

RankPlan plan_rank(const bench::Options& o, const mpi::Session& s, std::string_view device) {
  const std::vector<int> allowed = runtime::allowed_cpus();
  const runtime::CpuTopology topo = runtime::read_topology("/sys", device, &allowed);
  runtime::PinRequest req;
  req.daemons = o.server_threads;
  req.clients = o.client_threads;
  req.local_rank = static_cast<uint32_t>(s.local_rank());
  req.local_size = static_cast<uint32_t>(s.local_size());
  RankPlan rp;
  rp.pins = runtime::plan_pinning(topo, req);
  const uint64_t threads = uint64_t{req.daemons + req.clients} * req.local_size;
  rp.oversubscribed = threads > topo.cpus.size();
  if (s.local_rank() == 0 && !rp.pins.warning.empty()) {
    std::fprintf(stderr, "benchkv: %s%s\n", rp.pins.warning.c_str(),
                 rp.oversubscribed ? " (idle threads yield the CPU)" : "");
  }
  return rp;
}

int finish_mpi(const mpi::Session& s, const bench::Options& o, const RealResult& res, const nlohmann::json& extra) {
  uint64_t status = 0;
  if (s.rank() == 0) {
    try {
      bench::Options eff = o;
      eff.np = static_cast<uint32_t>(s.size());  // a real run's node count is the MPI size
      bench::write_csv_file(eff.output, res.runs);
      nlohmann::json summary = bench::summary_json(eff, res.runs, res.daemons);
      summary["real"] = extra;
      summary["real"]["wall_s"] = bench::round6(res.wall_s);
      summary["real"]["drain_ns"] = res.drain_ns;
      summary["totals"] = {{"issued", res.issued}, {"completed", res.completed}, {"errors", res.errors}};
      bench::write_summary_file(eff.summary, summary);
      for (const auto& r : res.runs)
        std::fprintf(stderr, "run %u: %.3f Mops total (%u ranks)\n", r.run(), r.total_mops(), r.num_ranks());
      std::fprintf(stderr, "wrote %s and %s\n", eff.output.c_str(), eff.summary.c_str());
      if (res.issued != res.completed || res.errors != 0) {
        std::fprintf(stderr, "benchkv: %llu issued, %llu completed, %llu errors: the run is not consistent\n",
                     static_cast<unsigned long long>(res.issued), static_cast<unsigned long long>(res.completed),
                     static_cast<unsigned long long>(res.errors));
        status = 1;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "benchkv: %s\n", e.what());
      status = 1;
    }
  }
  return static_cast<int>(s.allreduce_max(status));  // every rank exits with rank 0's verdict
}

}  // namespace bkv::real
