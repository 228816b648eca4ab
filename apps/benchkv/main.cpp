// benchkv: the distributed KV benchmark (docs/design.md §benchkv command line).
//
//   benchkv [options] <meta|delegation|direct|ucx-am>       (see --help)
//   benchkv --config configs/c1_np8.json                       (an experiment file)
//
// --transport sim runs NP simulated nodes in this process (no MPI, no RDMA device).
// --transport mlx5|verbs need an RDMA device; without one benchkv exits with status 2.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/benchkv/real_transports.hpp"
#include "apps/benchkv/options.hpp"
#include "apps/benchkv/results.hpp"
#include "apps/benchkv/data_runner.hpp"
#include "apps/benchkv/rpc_runner.hpp"
#include "apps/benchkv/sim_runner.hpp"

using namespace bkv;

namespace {

int run_sim(const app::Options& o) {
  const sim::Model model = o.model.empty() ? sim::Model::defaults() : sim::Model::load_file(o.model);
  std::function<void(const std::string&)> progress;
  if (o.progress) progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const auto t0 = std::chrono::steady_clock::now();
  app::ExperimentResult res = app::run_experiment(o, model, progress);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  app::write_csv_file(o.output, res.runs);
  nlohmann::json summary = app::summary_json(o, res.runs, res.daemons);
  summary["simulator"] = res.extra;
  summary["totals"] = {{"issued", res.total_issued}, {"completed", res.total_completed}, {"errors", res.errors}};
  app::write_summary_file(o.summary, summary);
  if (!o.inflight_samples.empty()) app::write_inflight_csv(o.inflight_samples, res.inflight);
  if (!o.trace.empty()) {
    std::ofstream t(o.trace);
    t << res.trace_json;
    if (!t) throw std::runtime_error("cannot write the trace to " + o.trace);
  }
  for (const auto& r : res.runs)
    std::fprintf(stderr, "run %u: %.3f Mops total (%u ranks)\n", r.run(), r.total_mops(), r.num_ranks());
  // Wall-clock figures go to stderr only: output files stay byte-identical across runs.
  std::fprintf(stderr, "simulated %llu requests, %.3f s of virtual time, in %.2f s wall (%.2f M simulated requests/s)\n",
               static_cast<unsigned long long>(res.total_completed), double(res.extra["virtual_end_ns"].get<uint64_t>()) * 1e-9,
               wall, double(res.total_completed) / wall / 1e6);
  std::fprintf(stderr, "wrote %s and %s\n", o.output.c_str(), o.summary.c_str());
  return app::consistency_status(res.total_issued, res.total_completed, res.errors);
}

// benchkv rpc --transport sim: copyrpc alone in the simulator.
int run_rpc_sim(const app::Options& o) {
  const sim::Model model = o.model.empty() ? sim::Model::defaults() : sim::Model::load_file(o.model);
  std::function<void(const std::string&)> progress;
  if (o.progress) progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const app::RpcResult res = app::run_rpc_sim(o, model, progress);
  return app::write_rpc_outputs(o, res, "simulator", res.extra);
}

// benchkv data --transport sim: bulk values in the simulator.
int run_data_sim(const app::Options& o) {
  const sim::Model model = o.model.empty() ? sim::Model::defaults() : sim::Model::load_file(o.model);
  std::function<void(const std::string&)> progress;
  if (o.progress) progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const app::DataResult res = app::run_data_sim(o, model, progress);
  return app::write_data_outputs(o, res, "simulator", res.extra);
}

}  // namespace

int main(int argc, char** argv) {
  app::ParseResult pr = app::parse_command_line(argc, argv);
  if (!pr.should_run()) {
    if (!pr.error.empty()) std::fprintf(stderr, "benchkv: %s\n", pr.error.c_str());
    return pr.exit_status;
  }
  const app::Options& o = pr.options;
  try {
    if (o.transport == app::TransportKind::kSim) app::prepare_output_files(o);
    if (o.transport == app::TransportKind::kSim) {
      if (o.backend == backend::BackendKind::kData) return run_data_sim(o);
      return o.backend == backend::BackendKind::kRpc ? run_rpc_sim(o) : run_sim(o);
    }
    if (o.backend == backend::BackendKind::kData && o.transport != app::TransportKind::kUcx) {
      std::fprintf(stderr, "benchkv: data runs only with --transport sim or ucx so far (mlx5 and verbs are not "
                           "wired to it; see docs/data.md)\n");
      return 2;
    }
    return run_real(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchkv: %s\n", e.what());
    return 1;
  }
}
