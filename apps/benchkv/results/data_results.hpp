// The results of `benchkv data`: bulk values moved by one-sided RDMA (backends/data,
// docs/data.md), in the simulator (apps/benchkv/simulator/data_mode.hpp) and over real
// transports (apps/benchkv/real/data.hpp). One experiment per value size (--value-size: a list, or a range of
// powers of two); each has --runs runs of --duration. Results use benchkv's CSV and
// summary: the CSV's run column counts runs over all sizes (size i's runs are
// i * runs .. i * runs + runs - 1); the summary's "data" section has, per size and
// per run, operations/s, GiB/s (value bytes moved by completed puts and found gets, over
// the kept epochs) and the latency percentiles of the operations completed in them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/results/results.hpp"
#include "core/copyrpc/context.hpp"

namespace bkv::app {

struct DataRunStats {
  uint32_t value_size = 0;
  uint32_t run = 0;          // the CSV's run index
  uint64_t ops = 0;          // completed in the kept epochs
  uint64_t bytes = 0;        // value bytes moved in the kept epochs
  uint64_t duration_ns = 0;  // of the kept epochs
  copyrpc::RttHistogram latency;
  double ops_per_s() const noexcept { return duration_ns ? double(ops) * 1e9 / double(duration_ns) : 0.0; }
  double gib_per_s() const noexcept {
    return duration_ns ? double(bytes) * 1e9 / double(duration_ns) / double(uint64_t{1} << 30) : 0.0;
  }
};

struct DataResult {
  std::vector<RunResults> runs;
  std::vector<DataRunStats> stats;
  nlohmann::json extra;  // simulator statistics per size
  uint64_t issued = 0, completed = 0, errors = 0, rejected = 0;
  // A signal stopped the run: {"signal", "run" (counted over the sizes), "epochs_done"}
  // (summary "interrupted"); the sizes after it were not run.
  nlohmann::json interrupted;
  // A real run a signal stopped (real/data.hpp): the summary's "incomplete" ({"reason",
  // "ranks_reported"}) and rank 0's requests still in flight when it stopped waiting for
  // them (totals "unanswered"); null and 0 otherwise.
  nlohmann::json incomplete;
  uint64_t unanswered = 0;
};

// The summary's "data" section (per size and run: ops/s, GiB/s, and the latency's mean,
// p50, p90, p95, p99, p99.9 and max in microseconds with the raw histogram) and the table
// printed at the end (--report text; runs count from 1 within each size there, as in all
// human text; the summary's and the CSV's run index counts over the sizes from 0):
//   backend  size  run  ops/s  GiB/s  mean p50 p90 p99 p99.9 max (us)
nlohmann::json data_summary(const Options& o, const DataResult& r);
std::string data_table(const Options& o, const DataResult& r);
// --report csv, from the summary's "data" section: a header
//   value_size,run,ops,bytes,duration_ns,ops_per_s,gib_per_s,latency_mean_ns,latency_p50_ns,
//   latency_p90_ns,latency_p95_ns,latency_p99_ns,latency_p999_ns,latency_max_ns
// and a line per (value size, run); run counts from 0 as in the summary and the CSV
// file; the latency columns are empty where no operation completed. Runs of --repeat
// (with a "seed") lead each line with it, under a "seed" column.
std::string data_csv_report(const nlohmann::json& data);

// Writes the CSV and the summary, prints the report --report asks for (text: the table;
// csv: data_csv_report; none: nothing); returns 128 + the signal when a signal stopped the
// run (the summary is marked "interrupted", report_interruption), else 1 when an
// operation was lost or failed, else 0.
int write_data_outputs(const Options& o, const DataResult& r, const std::string& section, const nlohmann::json& details);
// The files alone (CSV and summary), nothing printed; returns the summary (a sweep's run).
nlohmann::json data_outputs(const Options& o, const DataResult& r, const std::string& section,
                            const nlohmann::json& details);

// --repeat N (simulated, one value size): the outputs of the repetitions `reps`
// (repetition k ran with seed o.seed + k; the last one may have been stopped by a
// signal). With one repetition measured, exactly data_outputs' files (the "interrupted"
// mark gets the seed under --repeat). Else the CSV led by a seed column (instead of
// value_size: one size), and the summary of repeated_summary_json (results.hpp) with the
// "data" section's runs of every repetition (each with its "seed"; "rejected" summed),
// each "repetitions" entry's "data" {ops_per_s, gib_per_s (the means over its runs),
// latency_mean_us, latency_p50_us ... latency_p999_us, latency_max_us (every operation
// of its runs)} and "overall" "data_over_repetitions" (the spread of each over the
// repetitions). Returns the summary.
nlohmann::json data_repeated_outputs(const Options& o, const std::vector<DataResult>& reps);
// The same, then the report on stdout (text: the configuration, a line per run and per
// repetition and the spreads, format_report; csv: data_csv_report, led by the seed) and
// the exit status, as write_data_outputs.
int write_data_repeated_outputs(const Options& o, const std::vector<DataResult>& reps);

}  // namespace bkv::app
