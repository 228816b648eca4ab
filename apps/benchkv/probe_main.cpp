#include "apps/benchkv/probe_main.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/cli/single_options.hpp"
#include "apps/benchkv/real/transports.hpp"
#include "apps/benchkv/results/probe_report.hpp"
#include "apps/benchkv/simulator/probe_mode.hpp"
#include "apps/benchkv/sweep/sweep_ranks.hpp"
#include "core/strict_json.hpp"
#include "sim/model.hpp"
#ifdef BKV_PROBE_UCX
#include "apps/benchkv/real/probe_ucx.hpp"
#endif
#ifdef BKV_PROBE_EMULATOR
#include "apps/benchkv/real/probe_emulator.hpp"
#endif

namespace bkv::app {

namespace {

constexpr const char* kProbeUsage =
    "Usage: benchkv probe [--transport sim|ucx|mlx5|verbs|mlx5-emu] [--np 2] [--model FILE] [--device NAME] [--port N]\n"
    "                     [--gid-index N] [--scale X] [--seed N] [-o FILE]\n"
    "Micro-benchmarks of what the simulator's NIC and CPU model needs (docs/your_cluster.md): WQE rate with\n"
    "one WRITE+IMM per doorbell over 1..64 queue pairs, with batched doorbells and from 2 and 4 posting\n"
    "threads (simulator and mpirun; not the one-process ucx probe, whose one thread skips them), the posting\n"
    "thread's busy fraction and loop rate, WRITE+IMM and READ latency over sizes, the CPU cost of a post, a\n"
    "doorbell, a CQ poll and a completion. Prints a table; -o writes the JSON of measured parameters.\n"
    "  --transport sim   two simulated nodes of --model (default: the built-in model), in this process\n"
    "  mpirun -np 2 benchkv probe --transport ucx|mlx5|verbs\n"
    "                    between two processes (hosts): rank 0 posts and measures, rank 1 is the target\n"
    "                    (one thread each; one transport and one thread per posting thread on each side\n"
    "                    for the tests with several);\n"
    "                    ucx takes UCX_TLS from the environment; mlx5 and verbs open --device (default: the\n"
    "                    first RDMA device), its port --port (1-255, default 1) and GID --gid-index (-1, the\n"
    "                    default: LID on InfiniBand, a RoCE v2 GID on Ethernet; else 0-255). Exactly two ranks.\n"
    "                    (Not yet run on RDMA hardware: the machine it was developed on has none.)\n"
    "  --transport ucx   without mpirun: the UCX transport's code, two workers in this process (UCX_TLS,\n"
    "                    default sm,self)\n"
    "                    Over UCX the numbers are the UCX transport's software NIC, not hardware numbers.\n"
    "  --transport mlx5-emu  the mlx5 transport's data path against the software NIC emulator, two emulated\n"
    "                    NICs in this process, one thread alternating the sides (no tests with several\n"
    "                    posting threads; not under mpirun: the emulator is in-process only). The numbers\n"
    "                    are the emulator's and this CPU's, not a NIC's: not hardware numbers.\n"
    "  --scale X         multiplies every test's iterations (default 1)\n";

// The probe's own --transport name for the NIC emulator (not in kTransportNames: it runs
// in one process only).
const std::string kEmulatorTransport = "mlx5-emu";

constexpr const char* kCalibrateUsage =
    "Usage: benchkv calibrate [--from PROBE.json] [--from-run SUMMARY.json...] [--base MODEL.json] -o MODEL.json\n"
    "Fits a simulator model file; every parameter not fitted keeps the base model's value (default: the built-in\n"
    "model) and is listed in the model's basis as such; each fitted one names its measurement there.\n"
    "  --from PROBE.json  a benchkv probe JSON: cpu.loop, cpu.cq_poll, cpu.cqe, cpu.flush, cpu.doorbell and the\n"
    "                     per-node send path (nic.send.engines = 1, nic.send.per_wqe_ns)\n"
    "  --from-run FILE... summaries of short benchkv delegation runs with one daemon per node (--server-threads 1),\n"
    "                     simulated or real, at several loads (client counts, queue depths, node counts): a least\n"
    "                     squares of the daemons' time on their loops, client rings looked at, CQEs, calls and\n"
    "                     local ops gives cpu.loop (replacing the probe's) and cpu.poll_slot; a count the runs do\n"
    "                     not vary apart from the others is not fitted (the basis says why). Several files may\n"
    "                     follow one --from-run; it may be repeated. At least one of --from and --from-run.\n";

int usage_error(const std::string& what, const char* usage) {
  std::fprintf(stderr, "benchkv: %s\n%s", what.c_str(), usage);
  return 2;
}

nlohmann::json read_json_file(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(std::string(what) + " " + path + ": cannot be opened");
  try {
    return parse_json_without_duplicate_keys(in, std::string(what) + " " + path);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(std::string(what) + " " + path + ": malformed JSON: " + e.what());
  }
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << j.dump(1) << "\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int probe_main(int argc, char** argv) {
  std::string transport = "sim", model_file, output, device;
  uint32_t np = 2, port = 1;
  int32_t gid_index = -1;
  bool port_given = false, gid_given = false;
  double scale = 1.0;
  uint64_t seed = 1;
  SingleOptions given;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kProbeUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return usage_error("probe: " + std::string(a) + ": unknown option or missing value", kProbeUsage);
    if (!given.first(a == "-o" ? "--output" : a)) return usage_error(SingleOptions::twice("probe", a), kProbeUsage);
    const std::string v = argv[++i];
    char* end = nullptr;
    if (a == "--transport") transport = v;
    else if (a == "--model") model_file = v;
    else if (a == "--device") device = v;
    else if (a == "-o" || a == "--output") output = v;
    else if (a == "--np") {
      const long n = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n != 2)
        return usage_error("probe: --np " + v + ": the probe runs between two nodes (--np 2)", kProbeUsage);
      np = 2;
    } else if (a == "--port") {
      const long n = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < 1 || n > static_cast<long>(kMaxPort))
        return usage_error("probe: --port " + v + ": must be an integer in [1, " + std::to_string(kMaxPort) + "]", kProbeUsage);
      port = static_cast<uint32_t>(n);
      port_given = true;
    } else if (a == "--gid-index") {
      const long n = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < -1 || n > kMaxGidIndex)
        return usage_error("probe: --gid-index " + v + ": must be -1 (LID) or an integer in [0, " +
                               std::to_string(kMaxGidIndex) + "]",
                           kProbeUsage);
      gid_index = static_cast<int32_t>(n);
      gid_given = true;
    } else if (a == "--scale") {
      scale = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !std::isfinite(scale) || scale <= 0 || scale > 100)
        return usage_error("probe: --scale " + v + ": must be a number in (0, 100]", kProbeUsage);
    } else if (a == "--seed") {
      seed = std::strtoull(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0') return usage_error("probe: --seed " + v + ": not an integer", kProbeUsage);
    } else {
      return usage_error("probe: unknown option " + std::string(a), kProbeUsage);
    }
  }
  if (transport != "sim" && !model_file.empty())
    return usage_error("probe: --model applies to --transport sim only", kProbeUsage);
  // The names of --transport's table (apps/benchkv/cli/transport_kind.hpp), and one only
  // the probe has: the NIC emulator, which is no transport between processes.
  const TransportName* named = nullptr;
  std::string names;
  for (const TransportName& t : kTransportNames) {
    if (t.name == transport) named = &t;
    names += std::string(t.name) + ", ";
  }
  if (named == nullptr && transport != kEmulatorTransport)
    return usage_error("probe: --transport " + transport + ": expected " + names.substr(0, names.size() - 2) + " or " +
                           kEmulatorTransport,
                       kProbeUsage);
  if (transport == kEmulatorTransport && started_by_mpirun())
    return usage_error("probe: --transport mlx5-emu runs in one process: the NIC emulator keeps both NICs' memory in "
                       "it and is stepped by one thread, so it cannot join two processes (run it without mpirun)",
                       kProbeUsage);
  const bool rdma = named != nullptr && named->rdma_device;
  if (!device.empty() && !rdma) return usage_error("probe: --device applies to --transport mlx5 and verbs only", kProbeUsage);
  if (port_given && !rdma) return usage_error("probe: --port applies to --transport mlx5 and verbs only", kProbeUsage);
  if (gid_given && !rdma) return usage_error("probe: --gid-index applies to --transport mlx5 and verbs only", kProbeUsage);
  // Between two processes: a transport of an RDMA device always (its entry opens the
  // device first, and without mpirun says the probe needs two ranks), the other real
  // transports when mpirun started this process (ucx without it: the one-process probe
  // below).
  const bool one_process_ucx = named != nullptr && named->kind == TransportKind::kUcx && !started_by_mpirun();
  if (named != nullptr && named->kind != TransportKind::kSim && !one_process_ucx) {
    real::ProbeRequest r;
    r.transport = named->kind;
    r.scale = scale;
    r.output = output;
    r.device = device;
    r.port = port;
    r.gid_index = gid_index;
    try {
      return run_real_probe(r);
    } catch (const OptionError& e) {  // a malformed BENCHKV_*_TIMEOUT, found before MPI starts
      std::fprintf(stderr, "benchkv: %s\n", e.what());
      return 2;
    } catch (const std::exception& e) {  // before MPI or its exchanges started (MPI_Init failed, say)
      std::fprintf(stderr, "benchkv: %s\n", e.what());
      return 1;
    }
  }
  try {
    ProbeRun run;
    run.transport = transport;
    const std::vector<probe::TestSpec> plan = probe_plan(scale);
    if (transport == "sim") {
      sim::Model model;
      try {
        model = model_file.empty() ? sim::Model::defaults() : sim::Model::load_file(model_file);
      } catch (const std::exception& e) {
        return usage_error(std::string("probe: ") + e.what(), kProbeUsage);
      }
      run.simulated = true;
      run.note = "simulated: the model's numbers read back through the probe, CPU costs on the virtual clock";
      run.conditions = {{"model", model_file.empty() ? "built-in defaults" : model_file}, {"np", np}, {"seed", seed},
                        {"nic_inline_max_bytes", model.nic.inline_max_bytes}, {"scale", scale},
                        {"clock", "virtual time"}};
      run.results = run_probe_sim(plan, model, seed);
    } else if (transport == kEmulatorTransport) {
#ifdef BKV_PROBE_EMULATOR
      run.results = real::run_probe_emulator(plan, &run.conditions);
      run.note = "the mlx5 transport's data path against the software NIC emulator in one process, initiator and "
                 "target alternating on one thread: the emulator's and this CPU's numbers, not hardware numbers";
      run.conditions["scale"] = scale;
      run.conditions["clock"] = "steady clock (TSC where constant)";
      run.conditions["one_thread"] = true;
      run.conditions["several_posting_threads"] = "not run: both sides alternate on one thread";
#else
      return usage_error("probe: --transport mlx5-emu: this build has no NIC emulator (it needs rdma-core's headers: "
                         "install libibverbs-dev and rebuild)",
                         kProbeUsage);
#endif
    } else {
#ifdef BKV_PROBE_UCX
      std::string tls;
      run.results = real::run_probe_ucx(plan, &tls);
      run.note = "UCX transport code in one process, initiator and target alternating on one thread: not hardware numbers";
      run.conditions = {{"UCX_TLS", tls}, {"scale", scale}, {"clock", "steady clock (TSC where constant)"},
                        {"one_thread", true},
                        {"several_posting_threads", "not run: both sides alternate on one thread"}};
#else
      return usage_error("probe: --transport ucx: this build has no UCX (install libucx-dev and rebuild)", kProbeUsage);
#endif
    }
    write_probe_outputs(run, output);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchkv: %s\n", e.what());
    return 1;
  }
}

int calibrate_main(int argc, char** argv) {
  std::string from, base, output;
  std::vector<std::string> run_files;
  SingleOptions given;  // all but --from-run, which may be repeated
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kCalibrateUsage, stdout);
      return 0;
    }
    if (a == "--from-run") {
      const size_t before = run_files.size();
      while (i + 1 < argc && argv[i + 1][0] != '-') run_files.emplace_back(argv[++i]);
      if (run_files.size() == before)
        return usage_error("calibrate: --from-run needs at least one run summary file", kCalibrateUsage);
      continue;
    }
    if (i + 1 >= argc) return usage_error("calibrate: " + std::string(a) + ": unknown option or missing value", kCalibrateUsage);
    if (!given.first(a == "-o" ? "--output" : a))
      return usage_error(SingleOptions::twice("calibrate", a), kCalibrateUsage);
    const std::string v = argv[++i];
    if (a == "--from") from = v;
    else if (a == "--base") base = v;
    else if (a == "-o" || a == "--output") output = v;
    else return usage_error("calibrate: unknown option " + std::string(a), kCalibrateUsage);
  }
  if (from.empty() && run_files.empty())
    return usage_error("calibrate: --from PROBE.json or --from-run SUMMARY.json... is required", kCalibrateUsage);
  if (output.empty()) return usage_error("calibrate: -o MODEL.json is required", kCalibrateUsage);
  nlohmann::json model;
  try {
    nlohmann::json probe;
    if (!from.empty()) probe = read_json_file(from, "probe JSON (--from)");
    std::vector<NamedSummary> runs;
    for (const std::string& f : run_files) runs.emplace_back(f, read_json_file(f, "run summary (--from-run)"));
    const nlohmann::json base_model = base.empty() ? sim::Model::defaults().to_json() : read_json_file(base, "base model (--base)");
    model = fit_model(from.empty() ? nullptr : &probe, runs, base_model, base.empty() ? "built-in defaults" : base);
  } catch (const std::exception& e) {
    return usage_error(std::string("calibrate: ") + e.what(), kCalibrateUsage);
  }
  try {
    write_json_file(output, model);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchkv: calibrate: %s\n", e.what());
    return 1;
  }
  std::printf("wrote %s\n", output.c_str());
  for (auto it = model.at("basis").begin(); it != model.at("basis").end(); ++it)
    std::printf("  %s: %s\n", it.key().c_str(), it.value().get<std::string>().c_str());
  return 0;
}

}  // namespace bkv::app
