// Benchmark results: runs x ranks x clients x epochs, trimming, and the output writers
// (docs/design_benchkv.md §Benchmark plumbing).
//
// A run is split into `epochs` epochs of --interval-ms; every client records, per epoch,
// the requests it completed and the epoch's duration in nanoseconds. The first and last
// `trim` epochs are warm-up and cool-down: only the kept epochs [trim, epochs - trim)
// count.
//
// Definitions (the summary's numbers obey them exactly):
//  - epoch duration: the longest duration_ns any client recorded for that epoch (all
//    clients record the same value when they share one epoch clock, as in the simulator);
//  - run duration_ns: the sum of the kept epochs' durations;
//  - run requests: the sum of `requests` over the kept epochs of every client = the sum
//    of the CSV rows of that run;
//  - total_mops = requests / duration_ns * 1e3; per_rank_mops[r] likewise with the rank's
//    requests, so the per-rank values add up to the total.
//
// CSV (write_csv): header `run,rank,client_id,epoch,requests,duration_ns`, then one row
// per kept epoch of every client, ordered by run, rank, client, epoch; the epoch column
// is the epoch's index in the run (counting from 0, trimmed epochs included in the
// count), so the first row of a run has epoch == trim.
//
// Summary JSON (summary_json): {"config", "runs", "daemons"}; see summary_json below.
// Output is byte-deterministic: sorted object keys, Mops and averages rounded to 1e-6,
// fixed integer formatting.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "apps/benchkv/cli/options.hpp"
#include "core/metrics/cqe_histogram.hpp"
#include "core/metrics/latency_histogram.hpp"

namespace bkv::app {

struct EpochRecord {
  uint64_t requests = 0;     // requests completed in the epoch
  uint64_t duration_ns = 0;  // the epoch's measured length
};
static_assert(sizeof(EpochRecord) == 16);  // gathered as raw bytes over MPI

class RunResults {
 public:
  // Throws std::invalid_argument unless num_ranks, clients_per_rank >= 1 and
  // epochs > 2 * trim.
  RunResults(uint32_t run, uint32_t num_ranks, uint32_t clients_per_rank, uint32_t epochs, uint32_t trim);

  uint32_t run() const noexcept { return run_; }
  uint32_t num_ranks() const noexcept { return num_ranks_; }
  uint32_t clients_per_rank() const noexcept { return clients_; }
  uint32_t epochs() const noexcept { return epochs_; }
  uint32_t trim() const noexcept { return trim_; }
  uint32_t first_kept_epoch() const noexcept { return trim_; }
  uint32_t end_kept_epoch() const noexcept {  // exclusive
    return std::max(trim_, std::min(epochs_ - trim_, epochs_done_));
  }
  bool kept(uint32_t epoch) const noexcept { return epoch >= first_kept_epoch() && epoch < end_kept_epoch(); }

  // A run a signal stopped: only its first n epochs were measured; the kept epochs end
  // there (none are kept when n <= trim). epochs_done() == epochs() for a whole run.
  void set_epochs_done(uint32_t n) noexcept { epochs_done_ = std::min(n, epochs_); }
  uint32_t epochs_done() const noexcept { return epochs_done_; }

  // Access by (rank, client, epoch); out-of-range indices throw std::out_of_range.
  EpochRecord& at(uint32_t rank, uint32_t client, uint32_t epoch);
  const EpochRecord& at(uint32_t rank, uint32_t client, uint32_t epoch) const;
  void record(uint32_t rank, uint32_t client, uint32_t epoch, uint64_t requests, uint64_t duration_ns) {
    at(rank, client, epoch) = EpochRecord{requests, duration_ns};
  }

  // Flat storage, index ((rank * clients_per_rank) + client) * epochs + epoch; one rank's
  // block is contiguous (what a rank sends to rank 0 in a gather).
  std::span<EpochRecord> records() noexcept { return records_; }
  std::span<const EpochRecord> records() const noexcept { return records_; }
  std::span<EpochRecord> rank_records(uint32_t rank);

  // Requests issued and completed over the whole run (trimmed epochs included), as
  // counted by the runner; reported as is.
  void set_counts(uint64_t issued, uint64_t completed) noexcept {
    issued_ = issued;
    completed_ = completed;
  }
  uint64_t issued() const noexcept { return issued_; }
  uint64_t completed() const noexcept { return completed_; }

  // Issue-to-answer latency of the requests answered during the kept epochs, every
  // client merged (absent where none is recorded: rpc and data keep theirs apart).
  void set_latency(const metrics::MergedRequestLatency& l) noexcept {
    latency_ = l;
    has_latency_ = true;
  }
  bool has_latency() const noexcept { return has_latency_; }
  const metrics::MergedRequestLatency& latency() const noexcept { return latency_; }

  // Derived values (see the definitions at the top of this header).
  uint64_t epoch_duration_ns(uint32_t epoch) const;
  uint64_t epoch_requests(uint32_t epoch) const;                // all ranks
  std::vector<uint64_t> epoch_rank_requests(uint32_t epoch) const;  // indexed by rank
  uint64_t kept_requests() const;
  uint64_t kept_requests(uint32_t rank) const;
  uint64_t kept_duration_ns() const;
  double total_mops() const;             // unrounded
  double rank_mops(uint32_t rank) const; // unrounded

 private:
  size_t index(uint32_t rank, uint32_t client, uint32_t epoch) const;

  uint32_t run_, num_ranks_, clients_, epochs_, trim_;
  uint32_t epochs_done_ = epochs_;
  uint64_t issued_ = 0, completed_ = 0;
  std::vector<EpochRecord> records_;
  metrics::MergedRequestLatency latency_;
  bool has_latency_ = false;
};

// Per-run issued/completed counts from a simulation's cumulative counters: a run gets
// what was added since the previous run closed, and the drain after the last run is
// added to the last run, so issued == completed over the runs.
class RunCounter {
 public:
  void close_run(RunResults& rr, uint64_t issued, uint64_t completed) noexcept {
    rr.set_counts(issued - issued_, completed - completed_);
    issued_ = issued;
    completed_ = completed;
  }
  void add_drain(RunResults& last, uint64_t issued, uint64_t completed) noexcept {
    last.set_counts(last.issued() + issued - issued_, last.completed() + completed - completed_);
  }

 private:
  uint64_t issued_ = 0, completed_ = 0;  // the counters when the previous run closed
};

// The report of one daemon over one run (a summary row, made from the daemon's
// backend::DaemonMetrics counters). loops and the CQE average come from `cqe`.
struct DaemonReport {
  uint32_t run = 0;
  uint32_t rank = 0;
  uint32_t daemon = 0;
  metrics::CqeHistogram cqe;            // hardware CQEs drained per loop
  metrics::CqeHistogram completions;    // RPC completions (responses to callers) per loop
  double inflight_avg = 0;              // copyrpc calls in flight, averaged over samples
  std::map<std::string, double> extra;  // more metrics, written under "extra" as given
};

// Mops = requests / duration_ns * 1e3; 0 when duration_ns == 0.
double mops(uint64_t requests, uint64_t duration_ns) noexcept;
// The rounding applied to every derived float in the summary (to 1e-6).
double round6(double x) noexcept;
// Appends printf-formatted text to `out`: the lines of the text tables (rpc, data, probe).
[[gnu::format(printf, 2, 3)]] void append_printf(std::string& out, const char* format, ...);

void write_csv(std::ostream& out, std::span<const RunResults> runs);
// The same with a leading value_size column (the data benchmark): value_size_of_run[i]
// is the value size of runs[i].
void write_csv(std::ostream& out, std::span<const RunResults> runs, std::span<const uint32_t> value_size_of_run);
// The same with a leading column `lead_name` (value_size, message_size, seed): runs[i]'s
// rows lead with lead_of_run[i]; an empty lead_of_run writes no leading column.
void write_csv(std::ostream& out, std::span<const RunResults> runs, std::string_view lead_name,
               std::span<const uint64_t> lead_of_run);

// Before a run: creates the missing parent directories of every output file the options
// name (CSV, summary, in-flight samples, trace, step log) and checks that each file can be
// written, leaving no file behind that was not there. Throws OptionError (an input error:
// exit status 2) naming the option and the path, so an unwritable path is found before
// the run, not after it ("-" never gets here: options validation refuses it).
void prepare_output_files(const Options& o);
// Writes the file; throws std::runtime_error naming the path when it cannot.
void write_csv_file(const std::string& path, std::span<const RunResults> runs);
void write_csv_file(const std::string& path, std::span<const RunResults> runs, std::span<const uint32_t> value_size_of_run);
void write_csv_file(const std::string& path, std::span<const RunResults> runs, std::string_view lead_name,
                    std::span<const uint64_t> lead_of_run);

// The summary:
//   "config":  the effective configuration (to_json(Options));
//   "runs":    [{run, total_mops, per_rank_mops [by rank], per_rank_requests [by rank],
//                issued, completed, requests, duration_ns, epochs, first_kept_epoch,
//                end_kept_epoch}] in the order given;
//   "daemons": [{run, rank, daemon, loops, cqes, cqe_per_loop_avg, cqe_per_loop_hist
//                {"0","1","2-10","11-100",">100"}, completions, completions_per_loop_avg,
//                completions_per_loop_hist {same buckets}, inflight_avg, extra {...}}] sorted by
//                (run, rank, daemon).
//   each run also: "latency" {get_local, get_remote, put_local, put_remote, all: latency_json}
//                (null where the backend records none), daemon_cqe_per_loop and
//                daemon_calls_in_flight (over all the run's daemon loops; absent
//                without daemon reports);
//   "overall": {runs, mops {mean, std_dev (sample, n - 1), min, max} over the runs,
//                latency (every run merged), daemon_cqe_per_loop and
//                daemon_calls_in_flight {mean, std_dev, min, max} over the runs}.
// The returned object may be extended by the caller before it is written.
nlohmann::json summary_json(const nlohmann::json& config, std::span<const RunResults> runs,
                            std::span<const DaemonReport> daemons);
nlohmann::json summary_json(const Options& options, std::span<const RunResults> runs,
                            std::span<const DaemonReport> daemons);
std::string dump_summary(const nlohmann::json& summary);

// Independent repetitions (--repeat N): the runs and daemon reports of one execution
// with its own seed.
struct RepetitionResults {
  uint64_t seed = 0;
  std::span<const RunResults> runs;
  std::span<const DaemonReport> daemons;
};
// The summary of N repetitions (docs/outputs.md, "Repetitions"):
//   "config"; "runs" and "daemons": every repetition's, each entry with its "seed";
//   "repetitions": [{seed, runs, mops, daemon_cqe_per_loop, daemon_calls_in_flight,
//                    latency (all requests of its runs, no histogram)}] (a repetition's
//                    figures are the means over its runs);
//   "overall": {runs, repetitions, mops, daemon_cqe_per_loop, daemon_calls_in_flight:
//               {n, mean, std_dev, min, max, ci95_low, ci95_high} over the repetitions;
//               latency: every run merged; latency_over_repetitions: the same spread of
//               each repetition's latency figure (mean_ns, p50_ns ... max_ns)}.
nlohmann::json repeated_summary_json(const nlohmann::json& config, std::span<const RepetitionResults> reps);
// The first step of every repeated simulated output (the KV, rpc and data modes): writes
// the CSV (o.output) of the kept repetitions' runs, each line led by its repetition's
// "seed", and returns repeated_summary_json over them (config: the options), which the
// caller extends with its mode's sections before writing it.
nlohmann::json write_repeated_csv(const Options& o, std::span<const RepetitionResults> reps);
// The sections every repeated simulated summary ends with (the KV, rpc and data modes):
// "simulator": {model (once: every repetition ran the same), repetitions: repetition k's
// own simulator section (`extras[k]`) without the model, with its seed first_seed + k};
// and, when `last_interrupted` is not null (a signal stopped the last repetition started),
// "interrupted": that mark with the repetition's seed.
void add_repetition_sections(nlohmann::json& summary, uint64_t first_seed, std::span<const nlohmann::json> extras,
                             const nlohmann::json& last_interrupted);
// {n, mean, std_dev, min, max, ci95_low, ci95_high} of independent values (rounded to 1e-6;
// no interval for fewer than 2 values: ci95_low = ci95_high = mean).
nlohmann::json repetition_spread_json(std::span<const double> values);

// {count, mean_ns (to 0.1 ns), min_ns, p50_ns, p90_ns, p95_ns, p99_ns, p999_ns, max_ns}:
// percentiles within 0.78 % (core/metrics/latency_histogram.hpp), mean, min and max exact;
// "saturated": true when a client's bucket overflowed (absent otherwise); with `raw`,
// "histogram" holds the raw counts (histogram_json).
nlohmann::json latency_json(const metrics::LatencyHistogram& h, bool raw = false);
// The raw counts of a histogram: {"sub_buckets": 64, "buckets": "L:N L:N ..."}, one
// "lower bound in ns:count" pair per non-empty bucket, in increasing order. A bucket
// starting at L < 128 holds L alone; one starting at L >= 128 holds
// [L, L + 2^(floor(log2 L) - 6)); the one starting at 2^37 every larger value.
// scripts/latency_histogram.py rebuilds percentiles and a CDF from it (docs/outputs.md).
nlohmann::json histogram_json(const metrics::LatencyHistogram& h);

// The final report on stdout, made from the summary JSON only (so its numbers are the
// summary's): kText is a header with the effective configuration, a line per run (Mops,
// requests, daemon CQEs per loop and calls in flight), the latency table per run and the
// [OVERALL] lines over all kept runs (latency in us; rpc's rate in Mrps); with
// repetitions a line per repetition and the spread over them; kCsv is a header and one
// line per run (latency in ns). Human text counts runs from 1 ("run 1/3", as the
// progress lines); the CSV's run column counts from 0, as the per-epoch CSV and the
// summary's "run". An rpc summary's runs have no request latency: their CSV latency
// columns come from the "rpc" section's round-trip times (latency_count = calls).
std::string format_report(const nlohmann::json& summary, ReportFormat format);
// The report's line naming the transports UCX selected (provenance.ucx_transports), or ""
// for a run without UCX: "benchkv: UCX transports: active messages over sysv/memory (...)".
std::string ucx_transports_line(const nlohmann::json& summary);

// The end of a run's report: every issued request completed and no error, or a line on
// stderr saying what does not add up. Returns the exit status (0, or 1).
int consistency_status(uint64_t issued, uint64_t completed, uint64_t errors, const char* what = "requests",
                       uint64_t failed = 0);  // 2-space indent, final newline
void write_summary_file(const std::string& path, const nlohmann::json& summary);

// `benchkv compare A.summary.json B.summary.json`: the overall figures of two summaries
// side by side (Mops, or Mrps for rpc: mean and std dev, the 95 % interval with
// repetitions; daemon CQEs per loop and calls in flight; latency mean/p50/p99/p99.9 of all
// requests in us) with the ratio B / A, then a verdict per figure over the repetitions of
// each summary (--repeat; two-sided, 5 % level): the paired t-test over the per-seed
// differences when both sides ran the same seeds (common random numbers), else Welch's
// t-test (unequal variances); the line names the test and why, and gives the 95 %
// interval of B - A. With fewer than 2 repetitions on a side, no verdict and why (the
// runs of one execution are not independent). Summaries of different kinds (KV backends,
// rpc, data) are refused: std::runtime_error naming both files and kinds; so are two
// summaries over different transports (config "transport") or different UCX transports
// (provenance.ucx_transports: the "am" lanes, and the RMA lanes when a run's real.ucx_rma
// counts ucp_get/ucp_put), unless options.allow_different_transports; and a summary marked "interrupted" or "incomplete"
// (a partial result: docs/interruptions.md), unless options.allow_partial, when a
// "warning:" line says what it lacks; and two measurements (neither simulated) whose
// builds differ in build type, compiler, sanitizer or C++ flags (provenance), unless
// options.allow_different_builds (a simulated pair gets a "note:" line: its figures do
// not depend on the build); a -fprofile-dir=PATH in the flags is compared without its
// path, and a field a summary does not record is unknown, refused between measurements
// with a message naming it (same option; a "warning:" then, a "note:" when simulated). Different commits get a "warning:" line, a build with
// uncommitted changes a "note:". Settings that differ (the "config" keys but output
// paths and display switches, and the simulator model's content when both record it) are
// listed first in lines starting "warning:". rpc summaries are compared per message size
// and data summaries per value size, for the sizes both have (none in common is
// refused): the rate (Mrps; ops/s, GiB/s) over the runs of each size, and the latency
// (round trips; operations) of every sample of those runs, from their histograms merged
// (rtt_histogram, latency_histogram). Throws std::runtime_error naming the file and key
// when a summary lacks a figure.
struct CompareOptions {
  bool allow_different_transports = false;
  bool allow_different_builds = false;
  bool allow_partial = false;
};
std::string compare_summaries(const nlohmann::json& a, const nlohmann::json& b, const std::string& name_a,
                              const std::string& name_b, const CompareOptions& options = {});

// The per-epoch progress line for stderr (no newline), e.g.
//   run 1/3 epoch 4/30 [kept]  1.000 s  15.263 Mops | per rank avg 7.632 min 7.501 (rank 1)
//   max 7.762 (rank 0) spread 3.4%
// Runs and epochs count from 1 here (the CSV columns count from 0). Trimmed epochs are
// tagged [warm-up] or [cool-down].
struct ProgressLine {
  uint32_t run = 0;    // 0-based, as in the CSV
  uint32_t runs = 1;
  uint32_t epoch = 0;  // 0-based, as in the CSV
  uint32_t epochs = 1;
  uint32_t trim = 0;
  uint64_t duration_ns = 0;
  std::span<const uint64_t> rank_requests;  // requests completed in the epoch, by rank
  const char* rate = "Mops";                // the rate's unit: Mrps for rpc's calls
};
std::string format_progress(const ProgressLine& line);
// The line for one recorded epoch of `results`; its run is counted from first_run (the
// run index of a size's first run when the index counts over sizes).
std::string format_progress(const RunResults& results, uint32_t runs, uint32_t epoch, uint32_t first_run = 0);
// The line for `benchkv rpc`: rank 0 is the only caller and the server ranks complete
// nothing, so there is no per-rank spread to show (it would be rank 0 against zeros).
std::string format_rpc_progress(const RunResults& results, uint32_t runs, uint32_t epoch, uint32_t first_run = 0);

}  // namespace bkv::app
