// `benchkv probe` results (docs/your_cluster.md): the plan, the JSON of measured parameters,
// the perftest-like table; and `benchkv calibrate`, the fit of a probe JSON to a model
// file.
//
// The probe JSON:
//   {"kind": "benchkv-probe", "version": 1,
//    "transport": "sim" | "ucx", "note": what kind of numbers these are,
//    "conditions": run-wide conditions (model file, NIC inline limit, UCX_TLS ...),
//    "provenance": as in every summary (apps/benchkv/results/provenance.hpp),
//    "tests": [{"name", "kind", "qps", "batch", "size", "wqes", "window_ns",
//               "rate_wqe_per_s", "busy_fraction", "loop_rate_per_s", "loops",
//               "latency_ns": {"n", "mean", "p50", "p99", "min", "max"}}],
//    "parameters": {NAME: {"value", "unit", "from": [test names], "method", "conditions"}}}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/results/daemon_fit.hpp"
#include "backends/probe/probe.hpp"

namespace bkv::app {

// The tests a probe runs: rate over k in {1,2,3,4,8,16,32,64} QPs one WQE per doorbell;
// batched doorbells (4 and 16 WQEs) over 1 and 8 QPs; WRITE+IMM ping-pong latency over
// sizes; READ latency over sizes. `scale` multiplies the iterations (1 = the default).
std::vector<probe::TestSpec> probe_plan(double scale = 1.0);

// The queue pairs and the largest message a plan needs.
uint32_t plan_qps(const std::vector<probe::TestSpec>& plan);
uint32_t plan_max_size(const std::vector<probe::TestSpec>& plan);

std::string test_name(const probe::TestSpec& s);

struct ProbeRun {
  std::string transport;       // "sim", "ucx"
  std::string note;            // what kind of numbers these are (simulated, not hardware ...)
  nlohmann::json conditions = nlohmann::json::object();  // run-wide conditions
  bool simulated = false;
  std::vector<probe::TestResult> results;
};

// The whole probe JSON (tests, derived parameters, provenance).
nlohmann::json probe_json(const ProbeRun& run);
// The parameters derived from the tests (the "parameters" object).
nlohmann::json probe_parameters(const std::vector<probe::TestResult>& results);
// The perftest-like table of a probe JSON.
std::string probe_table(const nlohmann::json& probe);
// Prints the table of `run` on stdout and, when `output` is not empty, writes its JSON
// there ("wrote FILE" on stderr). Returns 0; throws std::runtime_error when the file
// cannot be written.
int write_probe_outputs(const ProbeRun& run, const std::string& output);

// `benchkv calibrate`: a model file from a probe JSON (`probe`, may be null) and benchkv
// run summaries (`runs`, may be empty; not both) over a base model (its JSON, and a name
// for it in the basis). Writes the parameters the probe determines (cpu.loop,
// cpu.cq_poll, cpu.cqe, cpu.flush, cpu.doorbell, nic.send.engines = 1 and
// nic.send.per_wqe_ns: the per-node send path) and those the runs' daemon loop metrics
// determine (cpu.loop, replacing the probe's, and cpu.poll_slot: daemon_fit.hpp), each
// with its basis naming the measurement; every other parameter keeps the base's value and
// is listed under basis["left at the base model"]. Throws std::invalid_argument naming
// what is missing or unusable in the inputs.
nlohmann::json fit_model(const nlohmann::json* probe, const std::vector<NamedSummary>& runs,
                         const nlohmann::json& base_model, const std::string& base_name);

}  // namespace bkv::app
