// benchkv: the distributed KV benchmark (docs/design_benchkv.md §benchkv command line).
//
// Run modes (apps/benchkv/cli/run_mode.hpp):
//   benchkv [options] <meta|delegation|direct|ucx-am>           kv, over that backend (see --help)
//   benchkv <rpc|data> [options]                                copyrpc alone, bulk values
//   benchkv --config configs/c1_np8.json                       (an experiment file)
//   benchkv sweep configs/sweeps/regime_map.json [-j N]        (a grid of simulated runs)
//   benchkv compare A.summary.json B.summary.json              (two results side by side)
//   benchkv probe --transport sim --np 2 -o probe.json          (what the model needs, measured)
//   benchkv calibrate --from probe.json [--from-run a.summary.json ...] -o model.json
//                                                              (a model file fitted to a probe and runs)
//
// --transport sim runs NP simulated nodes in this process (no MPI, no RDMA device).
// --transport mlx5|verbs need an RDMA device; without one benchkv exits with status 2.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "apps/benchkv/real/transports.hpp"
#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/probe_main.hpp"
#include "apps/benchkv/results/provenance.hpp"
#include "apps/benchkv/results/results.hpp"
#include "core/strict_json.hpp"
#include "apps/benchkv/simulator/data_mode.hpp"
#include "apps/benchkv/simulator/rpc_mode.hpp"
#include "apps/benchkv/simulator/kv_mode.hpp"
#include "apps/benchkv/simulator/repetitions.hpp"
#include "apps/benchkv/simulator/runner.hpp"
#include "apps/benchkv/sweep/sweep.hpp"

using namespace bkv;

namespace {

// A simulation's wall time is unknown beforehand (it grows with the nodes, clients and
// virtual time): after the first epoch, the projected total is printed once on stderr
// when it exceeds kEstimateAboveSeconds, so a long run announces itself early.
constexpr double kEstimateAboveSeconds = 10;

// The simulator's model: the built-in defaults or the --model file. A file that cannot be
// read or holds a bad key is an input error (OptionError: exit status 2).
sim::Model load_model(const app::Options& o) {
  if (o.model.empty()) return sim::Model::defaults();
  try {
    return sim::Model::load_file(o.model);
  } catch (const std::exception& e) {
    throw app::OptionError("model", e.what());
  }
}

// Progress lines on stderr, or none without --progress.
std::function<void(const std::string&)> stderr_progress(const app::Options& o) {
  if (!o.progress) return {};
  return [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
}

int run_sim(const app::Options& o, const sim::Model& model) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t total_epochs = uint64_t{o.runs} * o.repeat * app::epochs_per_run(o);
  uint64_t epochs_done = 0;
  std::function<void(const std::string&)> progress = [&](const std::string& line) {
    if (o.progress) std::fprintf(stderr, "%s\n", line.c_str());
    if (++epochs_done != 1) return;
    const double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double projected = first * static_cast<double>(total_epochs);
    if (projected > kEstimateAboveSeconds)
      std::fprintf(stderr,
                   "benchkv: %u run(s) x %g s of virtual time (%llu epochs); the first epoch took %.2f s of wall "
                   "time, so the simulation needs about %.0f s\n",
                   o.runs * o.repeat, o.duration, static_cast<unsigned long long>(total_epochs), first, projected);
  };
  // SIGINT/SIGTERM stop measuring at the next epoch's end; the finished epochs are written
  // (with --repeat, the repetitions after the interrupted one do not start).
  app::install_stop_signals();
  const std::vector<app::ExperimentResult> reps = app::run_repeated_experiment(o, model, progress);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const nlohmann::json summary = app::write_repeated_outputs(o, reps);
  if (!reps.back().runs.empty() || reps.size() > 1) {  // (no run only when a signal stopped the first repetition before any kept epoch finished)
    const std::string report = app::format_report(summary, o.report);
    std::fwrite(report.data(), 1, report.size(), stdout);
    std::fflush(stdout);
  }
  uint64_t issued = 0, completed = 0, errors = 0, failed = 0, virtual_ns = 0;
  for (const app::ExperimentResult& res : reps) {
    issued += res.total_issued;
    completed += res.total_completed;
    errors += res.errors;
    failed += res.failed;
    virtual_ns += res.extra["virtual_end_ns"].get<uint64_t>();
  }
  // Wall-clock figures go to stderr only: output files stay byte-identical across runs.
  std::fprintf(stderr, "simulated %llu requests, %.3f s of virtual time, in %.2f s wall (%.2f M simulated requests/s)\n",
               static_cast<unsigned long long>(completed), double(virtual_ns) * 1e-9, wall, double(completed) / wall / 1e6);
  std::string also;
  for (const std::string* f : {&o.inflight_samples, &o.trace, &o.step_log})
    if (!f->empty()) also += ", " + *f;
  std::fprintf(stderr, "wrote %s%s and %s\n", o.output.c_str(), also.c_str(), o.summary.c_str());
  const int consistent = app::consistency_status(issued, completed, errors, "requests", failed);
  const nlohmann::json& interrupted = reps.back().interrupted;
  const std::string repetition = o.repeat > 1 && !interrupted.is_null()
      ? fmt::format(" of the repetition with seed {}", o.seed + reps.size() - 1) : std::string();
  if (const int status = app::report_interruption(interrupted, o.output, o.summary, repetition); status != 0)
    return status;
  return consistent;
}

// benchkv rpc --transport sim: copyrpc alone in the simulator (--repeat N: N seeds).
int run_rpc_sim(const app::Options& o, const sim::Model& model) {
  app::install_stop_signals();  // SIGINT/SIGTERM: the finished epochs are written (as in run_sim)
  const std::vector<app::RpcResult> reps = app::run_repetitions<app::RpcResult>(
      o, stderr_progress(o), [&model](const app::Options& one, const std::function<void(const std::string&)>& p) {
        return app::run_rpc_sim(one, model, p);
      });
  return app::write_rpc_repeated_outputs(o, reps);
}

// benchkv data --transport sim: bulk values in the simulator (--repeat N: N seeds).
int run_data_sim(const app::Options& o, const sim::Model& model) {
  app::install_stop_signals();
  const std::vector<app::DataResult> reps = app::run_repetitions<app::DataResult>(
      o, stderr_progress(o), [&model](const app::Options& one, const std::function<void(const std::string&)>& p) {
        return app::run_data_sim(one, model, p);
      });
  return app::write_data_repeated_outputs(o, reps);
}

}  // namespace

// benchkv compare [--allow-different-transports] [--allow-different-builds] [--allow-partial] A.summary.json B.summary.json
int compare(int argc, char** argv) {
  app::CompareOptions options;
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "Usage: benchkv compare [--allow-different-transports] [--allow-different-builds] [--allow-partial]\n"
          "       A.summary.json B.summary.json\n"
          "Prints the overall figures of two summaries side by side with the ratio B / A: Mops (Mrps for rpc)\n"
          "mean and std dev, and their 95%% confidence interval with --repeat; daemon CQEs per loop and calls in\n"
          "flight; latency mean, p50, p99 and p99.9 in microseconds. Then a verdict per figure (Mops, and with\n"
          "repetitions the latency mean and p99; rpc: the round trip's; data: per value size, ops/s and the\n"
          "latency), over the repetitions of each summary (benchkv --repeat N, simulated runs, N >= 2 on each\n"
          "side), two-sided, significant when p < 0.05. When both sides' repetitions ran the same seeds they\n"
          "are pairs (common random numbers): the paired t-test over the per-seed differences B - A; else\n"
          "Welch's t-test (unequal variances) of two independent samples. The line names the test, why, and\n"
          "the 95%% interval of B - A. The runs (-r) of one execution are back-to-back windows, not\n"
          "independent: with fewer than 2 repetitions a side gets no verdict, and the line says why.\n"
          "Settings that differ are listed in warning: lines. Refused (exit status 2): summaries of different\n"
          "kinds (KV, rpc, data); summaries whose runs went over different transports (config.transport:\n"
          "sim against ucx, say) or different UCX transports (provenance.ucx_transports: the active-message\n"
          "lanes, and the RMA lanes when a run moved data by ucp_get/ucp_put), unless\n"
          "--allow-different-transports; and a partial result, a summary marked\n"
          "\"interrupted\" (a signal stopped the run: what came after is missing) or \"incomplete\" (a real run\n"
          "that ended early: only the ranks that reported), unless --allow-partial, when a warning: line says\n"
          "so. rpc summaries are compared per message size and data summaries per value size, for the sizes\n"
          "both have (none in common is refused): the rate (Mrps; ops/s, GiB/s) over the runs of the size, and\n"
          "the latency (round trips; operations) of every sample of them, read from their merged histograms:\n"
          "a p99 of several runs is the p99 of their samples pooled, not a mean of the runs' p99s\n"
          "(docs/outputs.md, \"Comparing two results\").\n"
          "A latency figure from a saturated histogram (a bucket's count stopped at 2^32 - 1: the mean reads\n"
          "high, a percentile is off in either direction) ends its row with \"saturated: A\" (or B) and gets no\n"
          "verdict: its bias is not noise, and a p-value would count it as a difference.\n"
          "Two measurements (real runs) by builds that differ in build type, compiler, sanitizer or C++ flags\n"
          "(provenance) are refused too, unless --allow-different-builds: those change the timing. A simulated\n"
          "figure does not depend on the build (same bytes), so there a note: line only names the difference.\n"
          "A field a summary does not record (an older benchkv's) is unknown, not a difference: two\n"
          "measurements are refused naming it, unless --allow-different-builds. A profile-guided build's\n"
          "-fprofile-dir=PATH is compared without its path.\n"
          "Different commits get a warning: line, a build with uncommitted changes a note: line.\n"
          "daemon_cqe_per_loop is left out between ucx-am (request messages per loop: its daemons poll no\n"
          "CQ) and a copyrpc backend (CQEs per loop).\n");
      return 0;
    }
    if (a == "--allow-different-transports") {
      options.allow_different_transports = true;
    } else if (a == "--allow-different-builds") {
      options.allow_different_builds = true;
    } else if (a == "--allow-partial") {
      options.allow_partial = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "benchkv compare: unknown option \"%s\" (see benchkv compare --help)\n", argv[i]);
      return 2;
    } else {
      files.emplace_back(a);
    }
  }
  if (files.size() != 2) {
    std::fprintf(stderr,
                 "benchkv: usage: benchkv compare [--allow-different-transports] [--allow-different-builds] "
                 "[--allow-partial] A.summary.json B.summary.json\n");
    return 2;
  }
  try {
    nlohmann::json s[2];
    for (int i = 0; i < 2; ++i) {
      std::ifstream in(files[i]);
      if (!in) throw std::runtime_error("compare: cannot open " + files[i]);
      try {
        s[i] = parse_json_bounded(in, "compare: " + files[i]);
      } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error("compare: " + files[i] + " is not valid JSON: " + e.what());
      }
    }
    const std::string text = app::compare_summaries(s[0], s[1], files[0], files[1], options);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchkv: %s\n", e.what());
    return 2;
  }
}

int main(int argc, char** argv) {
  // sweep and compare are commands with arguments of their own; the other modes are
  // described by the options.
  if (argc >= 2) {
    if (std::string_view(argv[1]) == "probe") return app::probe_main(argc, argv);
    if (std::string_view(argv[1]) == "calibrate") return app::calibrate_main(argc, argv);
    const std::optional<app::Mode> command = app::mode_named(argv[1]);
    if (command == app::Mode::kSweep) return app::sweep_main(argc, argv);
    if (command == app::Mode::kCompare) return compare(argc, argv);
  }
  app::ParseResult pr = app::parse_command_line(argc, argv);
  for (const std::string& w : pr.warnings) std::fprintf(stderr, "benchkv: warning: %s\n", w.c_str());
  if (!pr.should_run()) {
    if (!pr.error.empty()) std::fprintf(stderr, "benchkv: %s\n", pr.error.c_str());
    return pr.exit_status;
  }
  const app::Options& o = pr.options;
  try {
    if (o.transport != app::TransportKind::kSim) return run_real(o);
    // Input errors (a bad model file, an output path that cannot be written) before any
    // output file is made.
    const sim::Model model = load_model(o);
    switch (o.mode) {
      case app::Mode::kKv:
        app::check_simulation_fits(o);
        app::prepare_output_files(o);
        return run_sim(o, model);
      case app::Mode::kRpc:
        app::prepare_output_files(o);
        return run_rpc_sim(o, model);
      case app::Mode::kData:
        app::prepare_output_files(o);
        return run_data_sim(o, model);
      case app::Mode::kSweep:
      case app::Mode::kCompare: break;  // commands, handled above
    }
    throw std::logic_error("benchkv: the options describe no runnable mode");
  } catch (const app::OptionError& e) {  // bad input found after parsing: status 2 as at parsing
    std::fprintf(stderr, "benchkv: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchkv: %s\n", e.what());
    return 1;
  }
}
