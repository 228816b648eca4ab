// The results of `benchkv rpc`: copyrpc alone (backends/rpc/rpc_bench.hpp), in the
// simulator (apps/benchkv/simulator/rpc_mode.hpp) and over real transports
// (apps/benchkv/real/rpc.hpp). Results use benchkv's CSV and summary: one "client" per rank (its one
// thread); rank 0, the caller, completes every call, servers record 0. The summary's
// "rpc" section has, per run, the call rate and the round-trip percentiles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/results/results.hpp"
#include "core/copyrpc/context.hpp"

namespace bkv::app {

// One run's figures at the caller.
struct RpcRunStats {
  uint32_t run = 0;          // the CSV's run index (it counts over the message sizes)
  uint32_t message_size = 0;
  uint64_t calls = 0;        // completed in the kept epochs
  uint64_t duration_ns = 0;  // of the kept epochs
  copyrpc::RttHistogram rtt; // the calls completed in the kept epochs
  double mrps() const noexcept { return duration_ns ? double(calls) * 1e3 / double(duration_ns) : 0.0; }
};

struct RpcResult {
  std::vector<RunResults> runs;
  std::vector<RpcRunStats> stats;
  nlohmann::json extra;  // simulator statistics, when simulated (several sizes: "sizes", one entry each)
  nlohmann::json setup_provenance;  // simulated: machine-dependent set-up choices, added to the provenance
  uint64_t issued = 0, completed = 0, errors = 0;
  nlohmann::json interrupted;  // a signal stopped the run: {"signal", "run", "epochs_done"} (summary "interrupted")
  // A real run a signal stopped (real/rpc.hpp): the summary's "incomplete" ({"reason",
  // "ranks_reported"}) and the calls still in flight when rank 0 stopped waiting for them
  // (totals "unanswered"); null and 0 otherwise.
  nlohmann::json incomplete;
  uint64_t unanswered = 0;
};

// The summary's "rpc" section (per run: calls, Mrps, and the round trips' mean, p50, p90,
// p95, p99, p99.9 and max in microseconds with their raw histogram) and the table printed
// at the end of a run (--report text; runs count from 1 there, as in all human text):
//   endpoints  QD  size  run  Mrps  MB/s  mean p50 p90 p99 p99.9 max (us)
// MB/s is the request payload moved per second (10^6 bytes; the responses move as much).
nlohmann::json rpc_summary(const Options& o, const RpcResult& r);
std::string rpc_table(const Options& o, const RpcResult& r);

// Writes the CSV and the summary (with the "rpc" section, `section` = `details`, and the
// totals), prints the report --report asks for on stdout (text: format_report and the
// table; csv: format_report's CSV, latency from the RTTs; none: nothing); returns the
// exit status: 128 + the signal when a signal stopped the run (the summary is marked
// "interrupted", report_interruption), else 1 when the run is not consistent (a call lost
// or an error), else 0.
int write_rpc_outputs(const Options& o, const RpcResult& r, const std::string& section, const nlohmann::json& details);
// The files alone (the CSV, led by message_size when several sizes ran, and the summary),
// nothing printed; returns the summary (a sweep's run).
nlohmann::json rpc_outputs(const Options& o, const RpcResult& r, const std::string& section,
                           const nlohmann::json& details);

// --repeat N (simulated): the outputs of the repetitions `reps` (repetition k ran with
// seed o.seed + k; the last one may have been stopped by a signal). With one repetition
// measured, exactly rpc_outputs' files (the "interrupted" mark gets the seed under
// --repeat). Else the CSV led by a seed column, and the summary of
// repeated_summary_json (results.hpp) with the "rpc" section's runs of every repetition
// (each with its "seed"), each "repetitions" entry's round trips "rtt" {mean_us, p50_us,
// p90_us, p95_us, p99_us, p999_us, max_us} (every call of its runs) and "overall"
// "rtt_over_repetitions" (the spread of each over the repetitions). Returns the summary.
nlohmann::json rpc_repeated_outputs(const Options& o, const std::vector<RpcResult>& reps);
// The same, then the report (--report) on stdout and the exit status, as write_rpc_outputs.
int write_rpc_repeated_outputs(const Options& o, const std::vector<RpcResult>& reps);

}  // namespace bkv::app
