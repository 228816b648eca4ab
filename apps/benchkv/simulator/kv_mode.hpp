// The simulator's KV mode (meta, delegation, direct): NP nodes of a backend on simulated
// threads over the simulated NIC/network, run by the one simulator runner
// (apps/benchkv/simulator/runner.hpp: runs, epochs, drain); returns what benchkv writes
// (the same CSV/summary as real runs), plus the KV mode's own outputs: daemon in-flight
// samples, a Chrome trace, the step log, the exactly-once oracle's verdict, faults.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/results/results.hpp"
#include "core/kv/history_oracle.hpp"
#include "sim/model.hpp"
#include "transports/software_nic/paged_memory.hpp"

namespace bkv::app {

struct InflightSample {
  uint64_t t_ns;
  uint32_t rank;
  uint32_t daemon;
  uint64_t calls_in_flight;
  uint32_t cqes_since_last;  // CQEs drained by that daemon since the previous sample
  uint64_t loops_since_last;
  uint64_t rank_completed;   // requests completed by the rank's clients so far
};

struct ExperimentResult {
  std::vector<app::RunResults> runs;
  std::vector<app::DaemonReport> daemons;
  std::vector<InflightSample> inflight;  // when requested
  std::string trace_json;                // when requested
  uint64_t trace_events = 0;             // events inside the trace window (metadata and fault spans not counted)
  nlohmann::json extra;                  // simulator statistics (events, NIC, totals)
  nlohmann::json setup_provenance;       // machine-dependent set-up choices (SimRun::setup_provenance)
  nlohmann::json life;                   // with life_s: the whole-life loop statistics (summary "life")
  nlohmann::json interrupted;            // a signal stopped the run: Interruption::to_json (summary "interrupted")
  uint64_t total_issued = 0, total_completed = 0, errors = 0;
  uint64_t failed = 0;  // requests reported failed (their copyrpc endpoint stopped)
  // --check-exactly-once: the oracle's record of the run and its verdict, and the number
  // of copyrpc endpoint checks (credit invariant, no endpoint error) that failed.
  std::shared_ptr<kv::HistoryOracle> oracle;
  std::optional<kv::HistoryOracle::Verdict> exactly_once;
  uint64_t credit_checks = 0, credit_violations = 0;
  std::vector<std::string> credit_examples;
};

// Runs the experiment `o` (transport must be sim). progress(line) gets the per-epoch
// lines (nullptr: none). Throws std::runtime_error with a clear message on a model or
// configuration the simulator cannot run (e.g. ucx-am, which has no simulated form).
ExperimentResult run_experiment(const app::Options& o, const sim::Model& model,
                                const std::function<void(const std::string&)>& progress);

// The memory a simulation of `o` needs, estimated before it is built (a run that
// cannot fit is refused up front instead of being killed by the kernel). The constants
// are measured (docs/simulator_speed.md, "Simulator memory"): an endpoint costs its
// bookkeeping and the ring pages its traffic touches, a thread its state and workload.
inline constexpr uint64_t kEstimateEndpointBytes = 4 << 10;
inline constexpr uint64_t kEstimateRingPageBytes = 4 << 10;  // touched per ring, at least
inline constexpr uint64_t kEstimateThreadBytes = 56 << 10;
inline constexpr uint64_t kEstimateKeyBytes = 64;
inline constexpr uint64_t kEstimateBaseBytes = 16 << 20;
struct MemoryEstimate {
  uint64_t bytes = 0;
  uint64_t endpoints = 0;  // copyrpc endpoints, both sides of every connection
  uint64_t threads = 0;
};
MemoryEstimate estimate_memory(const app::Options& o);
// MemAvailable of /proc/meminfo in bytes; 0 when unknown.
uint64_t available_memory_bytes();
// Throws OptionError (key "np": an input error, exit status 2) naming the estimate and the
// memory available when the estimate exceeds what the machine has available
// (MemAvailable); run_experiment calls it.
void check_simulation_fits(const app::Options& o);

void write_inflight_csv(const std::string& path, const std::vector<InflightSample>& samples);

// Writes what a simulated run writes (CSV, summary JSON, in-flight samples and trace when
// asked for) and returns the summary.
nlohmann::json write_experiment_outputs(const app::Options& o, const ExperimentResult& res);

}  // namespace bkv::app
