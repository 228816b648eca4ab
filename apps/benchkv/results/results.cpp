#include "apps/benchkv/results/results.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <set>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <sstream>
#include <tuple>
#include <ostream>
#include <stdexcept>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/results/statistics.hpp"

namespace bkv::app {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------
// RunResults
// ---------------------------------------------------------------------------------------

RunResults::RunResults(uint32_t run, uint32_t num_ranks, uint32_t clients_per_rank, uint32_t epochs, uint32_t trim)
    : run_(run), num_ranks_(num_ranks), clients_(clients_per_rank), epochs_(epochs), trim_(trim) {
  if (num_ranks < 1 || clients_per_rank < 1) {
    throw std::invalid_argument(fmt::format("RunResults: need at least one rank and one client (got {} x {})",
                                            num_ranks, clients_per_rank));
  }
  if (uint64_t{epochs} <= 2 * uint64_t{trim}) {
    throw std::invalid_argument(
        fmt::format("RunResults: {} epochs with trim {} leave no kept epoch", epochs, trim));
  }
  records_.resize(size_t{num_ranks} * clients_per_rank * epochs);
}

size_t RunResults::index(uint32_t rank, uint32_t client, uint32_t epoch) const {
  if (rank >= num_ranks_ || client >= clients_ || epoch >= epochs_) {
    throw std::out_of_range(fmt::format("RunResults: (rank {}, client {}, epoch {}) outside {} x {} x {}", rank,
                                        client, epoch, num_ranks_, clients_, epochs_));
  }
  return (size_t{rank} * clients_ + client) * epochs_ + epoch;
}

EpochRecord& RunResults::at(uint32_t rank, uint32_t client, uint32_t epoch) {
  return records_[index(rank, client, epoch)];
}
const EpochRecord& RunResults::at(uint32_t rank, uint32_t client, uint32_t epoch) const {
  return records_[index(rank, client, epoch)];
}

std::span<EpochRecord> RunResults::rank_records(uint32_t rank) {
  const size_t block = size_t{clients_} * epochs_;
  return std::span<EpochRecord>(records_).subspan(index(rank, 0, 0), block);
}

uint64_t RunResults::epoch_duration_ns(uint32_t epoch) const {
  uint64_t longest = 0;
  for (uint32_t r = 0; r < num_ranks_; ++r) {
    for (uint32_t c = 0; c < clients_; ++c) longest = std::max(longest, at(r, c, epoch).duration_ns);
  }
  return longest;
}

std::vector<uint64_t> RunResults::epoch_rank_requests(uint32_t epoch) const {
  std::vector<uint64_t> by_rank(num_ranks_, 0);
  for (uint32_t r = 0; r < num_ranks_; ++r) {
    for (uint32_t c = 0; c < clients_; ++c) by_rank[r] += at(r, c, epoch).requests;
  }
  return by_rank;
}

uint64_t RunResults::epoch_requests(uint32_t epoch) const {
  const auto by_rank = epoch_rank_requests(epoch);
  return std::accumulate(by_rank.begin(), by_rank.end(), uint64_t{0});
}

uint64_t RunResults::kept_requests(uint32_t rank) const {
  uint64_t sum = 0;
  for (uint32_t c = 0; c < clients_; ++c) {
    for (uint32_t e = first_kept_epoch(); e < end_kept_epoch(); ++e) sum += at(rank, c, e).requests;
  }
  return sum;
}

uint64_t RunResults::kept_requests() const {
  uint64_t sum = 0;
  for (uint32_t r = 0; r < num_ranks_; ++r) sum += kept_requests(r);
  return sum;
}

uint64_t RunResults::kept_duration_ns() const {
  uint64_t sum = 0;
  for (uint32_t e = first_kept_epoch(); e < end_kept_epoch(); ++e) sum += epoch_duration_ns(e);
  return sum;
}

double RunResults::total_mops() const { return mops(kept_requests(), kept_duration_ns()); }
double RunResults::rank_mops(uint32_t rank) const { return mops(kept_requests(rank), kept_duration_ns()); }

double mops(uint64_t requests, uint64_t duration_ns) noexcept {
  if (duration_ns == 0) return 0.0;
  return static_cast<double>(requests) / static_cast<double>(duration_ns) * 1e3;
}

double round6(double x) noexcept { return std::round(x * 1e6) / 1e6; }

void append_printf(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, format, again);
    out.resize(at + static_cast<size_t>(n));
  }
  va_end(again);
}

// ---------------------------------------------------------------------------------------
// CSV
// ---------------------------------------------------------------------------------------

void prepare_output_files(const Options& o) {
  const std::pair<const char*, const std::string*> outs[] = {
      {"output", &o.output}, {"summary", &o.summary}, {"inflight_samples", &o.inflight_samples},
      {"trace", &o.trace}, {"step_log", &o.step_log}};
  for (const auto& out : outs) {
    const char* key = out.first;  // named variables: clang 14 cannot capture structured bindings
    const std::string* path = out.second;
    if (path->empty()) continue;
    std::string flag = std::string("--") + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    const auto bad = [&](const std::string& why) { return OptionError(key, flag + " " + *path + ": " + why); };
    const std::filesystem::path p(*path);
    std::error_code ec;
    if (p.has_parent_path() && std::filesystem::exists(p.parent_path(), ec) &&
        !std::filesystem::is_directory(p.parent_path(), ec))
      throw bad(p.parent_path().string() + " is not a directory");
    if (p.has_parent_path() && !std::filesystem::exists(p.parent_path(), ec)) {
      std::filesystem::create_directories(p.parent_path(), ec);
      if (ec) throw bad("cannot create the directory " + p.parent_path().string() + ": " + ec.message());
    }
    if (std::filesystem::is_directory(p, ec)) throw bad("is a directory (give a file name)");
    const bool existed = std::filesystem::exists(p, ec);
    {
      std::ofstream probe(p, std::ios::app);
      if (!probe) throw bad(fmt::format("cannot be written ({})", std::strerror(errno)));
    }
    if (!existed) std::filesystem::remove(p, ec);
  }
}

void write_csv(std::ostream& out, std::span<const RunResults> runs) { write_csv(out, runs, "", {}); }

void write_csv(std::ostream& out, std::span<const RunResults> runs, std::span<const uint32_t> value_size_of_run) {
  std::vector<uint64_t> lead(value_size_of_run.begin(), value_size_of_run.end());
  write_csv(out, runs, "value_size", lead);
}

void write_csv(std::ostream& out, std::span<const RunResults> runs, std::string_view lead_name,
               std::span<const uint64_t> lead_of_run) {
  const bool led = !lead_of_run.empty();
  if (led && lead_of_run.size() != runs.size()) throw std::logic_error("write_csv: one leading value per run is needed");
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf), "{}{}run,rank,client_id,epoch,requests,duration_ns\n", lead_name,
                 led ? "," : "");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResults& run = runs[i];
    for (uint32_t r = 0; r < run.num_ranks(); ++r) {
      for (uint32_t c = 0; c < run.clients_per_rank(); ++c) {
        for (uint32_t e = run.first_kept_epoch(); e < run.end_kept_epoch(); ++e) {
          const EpochRecord& rec = run.at(r, c, e);
          if (led) fmt::format_to(std::back_inserter(buf), "{},", lead_of_run[i]);
          fmt::format_to(std::back_inserter(buf), "{},{},{},{},{},{}\n", run.run(), r, c, e, rec.requests,
                         rec.duration_ns);
        }
      }
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.clear();
    }
  }
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
}

namespace {

void write_file(const std::string& path, const auto& write_body) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("cannot open \"{}\" for writing: {}", path, std::strerror(errno)));
  write_body(out);
  out.flush();
  if (!out) throw std::runtime_error(fmt::format("error writing \"{}\"", path));
}

}  // namespace

void write_csv_file(const std::string& path, std::span<const RunResults> runs) {
  write_file(path, [&](std::ostream& out) { write_csv(out, runs); });
}
void write_csv_file(const std::string& path, std::span<const RunResults> runs, std::span<const uint32_t> value_size_of_run) {
  write_file(path, [&](std::ostream& out) { write_csv(out, runs, value_size_of_run); });
}
void write_csv_file(const std::string& path, std::span<const RunResults> runs, std::string_view lead_name,
                    std::span<const uint64_t> lead_of_run) {
  write_file(path, [&](std::ostream& out) { write_csv(out, runs, lead_name, lead_of_run); });
}

// ---------------------------------------------------------------------------------------
// Summary JSON
// ---------------------------------------------------------------------------------------

namespace {

double round1(double x) noexcept { return std::round(x * 10) / 10; }

// Sample standard deviation (n - 1); 0 for fewer than two values.
double std_dev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double sq = 0;
  for (double x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / static_cast<double>(v.size() - 1));
}

json spread_json(const std::vector<double>& v) {
  json j = json::object();
  if (v.empty()) return j;
  j["mean"] = round6(std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()));
  j["std_dev"] = round6(std_dev(v));
  j["min"] = round6(*std::min_element(v.begin(), v.end()));
  j["max"] = round6(*std::max_element(v.begin(), v.end()));
  return j;
}

// Per class, with the raw counts when `raw` (a run's); "all" without (the classes merged).
json request_latency_json(const metrics::MergedRequestLatency& l, bool raw) {
  json j = json::object();
  for (size_t c = 0; c < metrics::kLatencyClasses; ++c)
    j[metrics::kLatencyClassNames[c]] = latency_json(l.by_class[c], raw);
  j["all"] = latency_json(l.all(), false);
  return j;
}

// The daemons of one run: CQEs per loop and calls in flight over all their loops.
struct RunDaemonFigures {
  uint64_t loops = 0, cqes = 0;
  double inflight_sum = 0;
  bool any = false;
};

}  // namespace

json latency_json(const metrics::LatencyHistogram& h, bool raw) {
  json j{{"count", h.count()},
         {"mean_ns", round1(h.mean_ns())},
         {"min_ns", h.min_ns()},
         {"p50_ns", h.percentile_ns(0.50)},
         {"p90_ns", h.percentile_ns(0.90)},
         {"p95_ns", h.percentile_ns(0.95)},
         {"p99_ns", h.percentile_ns(0.99)},
         {"p999_ns", h.percentile_ns(0.999)},
         {"max_ns", h.max_ns()}};
  if (h.saturated()) j["saturated"] = true;
  if (raw) j["histogram"] = histogram_json(h);
  return j;
}

json histogram_json(const metrics::LatencyHistogram& h) {
  std::string buckets;
  for (uint32_t b = 0; b < metrics::LatencyHistogram::kBuckets; ++b)
    if (const uint64_t n = h.bucket_count(b))
      fmt::format_to(std::back_inserter(buckets), "{}{}:{}", buckets.empty() ? "" : " ",
                     metrics::LatencyHistogram::lower_bound(b), n);
  return json{{"sub_buckets", metrics::LatencyHistogram::kSub}, {"buckets", std::move(buckets)}};
}

json summary_json(const json& config, std::span<const RunResults> runs, std::span<const DaemonReport> daemons) {
  json j = json::object();
  j["config"] = config;
  std::map<uint32_t, RunDaemonFigures> figures;  // by run
  for (const DaemonReport& d : daemons) {
    RunDaemonFigures& f = figures[d.run];
    f.loops += d.cqe.loops;
    f.cqes += d.cqe.cqes;
    f.inflight_sum += d.inflight_avg * static_cast<double>(d.cqe.loops);
    f.any = true;
  }
  std::vector<double> run_mops, run_cqe, run_inflight;
  metrics::MergedRequestLatency all_runs;
  bool every_run_has_latency = !runs.empty();

  json runs_json = json::array();
  for (const RunResults& run : runs) {
    const uint64_t duration = run.kept_duration_ns();
    json per_rank_mops = json::array();
    json per_rank_requests = json::array();
    for (uint32_t r = 0; r < run.num_ranks(); ++r) {
      const uint64_t req = run.kept_requests(r);
      per_rank_mops.push_back(round6(mops(req, duration)));
      per_rank_requests.push_back(req);
    }
    json rj = json::object();
    rj["run"] = run.run();
    rj["total_mops"] = round6(run.total_mops());
    rj["per_rank_mops"] = std::move(per_rank_mops);
    rj["per_rank_requests"] = std::move(per_rank_requests);
    rj["issued"] = run.issued();
    rj["completed"] = run.completed();
    rj["requests"] = run.kept_requests();
    rj["duration_ns"] = duration;
    rj["epochs"] = run.epochs();
    rj["first_kept_epoch"] = run.first_kept_epoch();
    rj["end_kept_epoch"] = run.end_kept_epoch();
    if (run.epochs_done() < run.epochs()) rj["epochs_done"] = run.epochs_done();  // a signal stopped it
    run_mops.push_back(run.total_mops());
    if (run.has_latency()) {
      rj["latency"] = request_latency_json(run.latency(), true);
      all_runs.merge(run.latency());
    } else {
      rj["latency"] = nullptr;
      every_run_has_latency = false;
    }
    const auto f = figures.find(run.run());
    if (f != figures.end() && f->second.any) {
      const RunDaemonFigures& d = f->second;
      const double cqe = d.loops ? static_cast<double>(d.cqes) / static_cast<double>(d.loops) : 0.0;
      const double inflight = d.loops ? d.inflight_sum / static_cast<double>(d.loops) : 0.0;
      rj["daemon_cqe_per_loop"] = round6(cqe);
      rj["daemon_calls_in_flight"] = round6(inflight);
      run_cqe.push_back(cqe);
      run_inflight.push_back(inflight);
    }
    runs_json.push_back(std::move(rj));
  }
  j["runs"] = std::move(runs_json);

  json overall = json::object();
  overall["runs"] = runs.size();
  overall["mops"] = spread_json(run_mops);
  overall["latency"] = every_run_has_latency ? request_latency_json(all_runs, false) : json(nullptr);
  if (run_cqe.size() == runs.size() && !runs.empty()) {
    overall["daemon_cqe_per_loop"] = spread_json(run_cqe);
    overall["daemon_calls_in_flight"] = spread_json(run_inflight);
  }
  j["overall"] = std::move(overall);

  std::vector<const DaemonReport*> sorted;
  sorted.reserve(daemons.size());
  for (const DaemonReport& d : daemons) sorted.push_back(&d);
  std::stable_sort(sorted.begin(), sorted.end(), [](const DaemonReport* a, const DaemonReport* b) {
    if (a->run != b->run) return a->run < b->run;
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->daemon < b->daemon;
  });
  json daemons_json = json::array();
  for (const DaemonReport* d : sorted) {
    const auto buckets = [](const metrics::CqeHistogram& h) {
      json hist = json::object();
      for (size_t b = 0; b < metrics::kCqeBuckets; ++b) hist[metrics::kCqeBucketNames[b]] = h.buckets[b];
      return hist;
    };
    json extra = json::object();
    for (const auto& [name, value] : d->extra) extra[name] = value;
    json dj = json::object();
    dj["run"] = d->run;
    dj["rank"] = d->rank;
    dj["daemon"] = d->daemon;
    dj["loops"] = d->cqe.loops;
    dj["cqes"] = d->cqe.cqes;
    dj["cqe_per_loop_avg"] = round6(d->cqe.average());
    dj["cqe_per_loop_hist"] = buckets(d->cqe);
    dj["completions"] = d->completions.cqes;
    dj["completions_per_loop_avg"] = round6(d->completions.average());
    dj["completions_per_loop_hist"] = buckets(d->completions);
    dj["inflight_avg"] = round6(d->inflight_avg);
    dj["extra"] = std::move(extra);
    daemons_json.push_back(std::move(dj));
  }
  j["daemons"] = std::move(daemons_json);
  return j;
}

json summary_json(const Options& options, std::span<const RunResults> runs, std::span<const DaemonReport> daemons) {
  return summary_json(to_json(options), runs, daemons);
}

json repetition_spread_json(std::span<const double> values) {
  const Spread sp = spread(values);
  return json{{"n", sp.n},
              {"mean", round6(sp.mean)},
              {"std_dev", round6(sp.std_dev)},
              {"min", round6(sp.min)},
              {"max", round6(sp.max)},
              {"ci95_low", round6(sp.ci95_low)},
              {"ci95_high", round6(sp.ci95_high)}};
}

json write_repeated_csv(const Options& o, std::span<const RepetitionResults> reps) {
  std::vector<RunResults> runs;
  std::vector<uint64_t> seeds;
  for (const RepetitionResults& rep : reps)
    for (const RunResults& r : rep.runs) {
      runs.push_back(r);
      seeds.push_back(rep.seed);
    }
  write_csv_file(o.output, runs, "seed", seeds);
  return repeated_summary_json(to_json(o), reps);
}

void add_repetition_sections(json& summary, uint64_t first_seed, std::span<const json> extras,
                             const json& last_interrupted) {
  json per_rep = json::array();
  for (size_t k = 0; k < extras.size(); ++k) {
    json extra = extras[k];
    extra.erase("model");  // the same model for every repetition: once, below
    extra["seed"] = first_seed + k;
    per_rep.push_back(std::move(extra));
  }
  summary["simulator"] = {{"model", extras.front()["model"]}, {"repetitions", std::move(per_rep)}};
  if (!last_interrupted.is_null()) {
    summary["interrupted"] = last_interrupted;
    summary["interrupted"]["seed"] = first_seed + extras.size() - 1;
  }
}

json repeated_summary_json(const json& config, std::span<const RepetitionResults> reps) {
  json j = json::object();
  j["config"] = config;
  json runs = json::array(), daemons = json::array(), repetitions = json::array();
  std::vector<double> mops, cqe, inflight;
  std::map<std::string, std::vector<double>> latency_figures;  // key -> one value per repetition
  metrics::MergedRequestLatency all_latency;
  bool every_run_has_latency = !reps.empty();
  size_t total_runs = 0;
  for (const RepetitionResults& rep : reps) {
    const json one = summary_json(config, rep.runs, rep.daemons);
    for (json r : one["runs"]) {
      r["seed"] = rep.seed;
      runs.push_back(std::move(r));
    }
    for (json d : one["daemons"]) {
      d["seed"] = rep.seed;
      daemons.push_back(std::move(d));
    }
    total_runs += rep.runs.size();
    const json& o = one["overall"];
    json entry = {{"seed", rep.seed}, {"runs", rep.runs.size()}, {"mops", o["mops"]["mean"]}};
    mops.push_back(o["mops"]["mean"].get<double>());
    if (o.contains("daemon_cqe_per_loop")) {
      entry["daemon_cqe_per_loop"] = o["daemon_cqe_per_loop"]["mean"];
      entry["daemon_calls_in_flight"] = o["daemon_calls_in_flight"]["mean"];
      cqe.push_back(o["daemon_cqe_per_loop"]["mean"].get<double>());
      inflight.push_back(o["daemon_calls_in_flight"]["mean"].get<double>());
    }
    if (o["latency"].is_object()) {
      entry["latency"] = o["latency"]["all"];
      for (const char* k : {"mean_ns", "p50_ns", "p90_ns", "p95_ns", "p99_ns", "p999_ns", "max_ns"})
        latency_figures[k].push_back(o["latency"]["all"][k].get<double>());
      for (const RunResults& run : rep.runs) all_latency.merge(run.latency());
    } else {
      entry["latency"] = nullptr;
      every_run_has_latency = false;
    }
    repetitions.push_back(std::move(entry));
  }
  j["runs"] = std::move(runs);
  j["repetitions"] = std::move(repetitions);
  json overall = json::object();
  overall["runs"] = total_runs;
  overall["repetitions"] = reps.size();
  overall["mops"] = repetition_spread_json(mops);
  if (cqe.size() == reps.size() && !reps.empty()) {
    overall["daemon_cqe_per_loop"] = repetition_spread_json(cqe);
    overall["daemon_calls_in_flight"] = repetition_spread_json(inflight);
  }
  if (every_run_has_latency) {
    overall["latency"] = request_latency_json(all_latency, false);
    json over = json::object();
    for (const auto& [k, v] : latency_figures) over[k] = repetition_spread_json(v);
    overall["latency_over_repetitions"] = std::move(over);
  } else {
    overall["latency"] = nullptr;
  }
  j["overall"] = std::move(overall);
  j["daemons"] = std::move(daemons);
  return j;
}

int consistency_status(uint64_t issued, uint64_t completed, uint64_t errors, const char* what, uint64_t failed) {
  if (issued == completed + failed && errors == 0) return 0;
  std::fprintf(stderr, "benchkv: %llu %s issued, %llu completed, %llu reported failed, %llu errors: the run is not consistent\n",
               static_cast<unsigned long long>(issued), what, static_cast<unsigned long long>(completed),
               static_cast<unsigned long long>(failed), static_cast<unsigned long long>(errors));
  return 1;
}

std::string dump_summary(const json& summary) { return summary.dump(2) + "\n"; }

void write_summary_file(const std::string& path, const json& summary) {
  const std::string text = dump_summary(summary);
  write_file(path, [&](std::ostream& out) { out.write(text.data(), static_cast<std::streamsize>(text.size())); });
}

// ---------------------------------------------------------------------------------------
// Final report (from the summary JSON only)
// ---------------------------------------------------------------------------------------

namespace {

std::string config_line(const json& c) {
  // The positional word (JSON "backend"): a KV backend's name, or a mode's (run_mode.hpp).
  const bool rpc = c.value("backend", json()).is_string() && mode_named(c["backend"].get<std::string>()) == Mode::kRpc;
  std::string line = fmt::format("benchkv: backend {} over {}, {} ranks", c["backend"].is_string() ? c["backend"].get<std::string>() : "-",
                                 c["transport"].get<std::string>(), c["np"].get<uint64_t>());
  if (rpc) {
    const json& size = c["message_size"];  // a number, or a string of sizes
    line += fmt::format(", {} endpoints per server rank, {} calls in flight per endpoint, {} B messages",
                        c["endpoints"].get<uint64_t>(), c["queue_depth"].get<uint64_t>(),
                        size.is_string() ? size.get<std::string>() : size.dump());
  } else {
    const uint64_t daemons = c["server_threads"].get<uint64_t>(), clients = c["client_threads"].get<uint64_t>();
    line += fmt::format(" x ({} daemon thread{} + {} client thread{}), queue depth {}; workload {}", daemons,
                        daemons == 1 ? "" : "s", clients, clients == 1 ? "" : "s", c["queue_depth"].get<uint64_t>(),
                        c["distribution"].get<std::string>());
    if (c["distribution"] == "zipfian") line += fmt::format(" (s = {})", c["zipf_s"].get<double>());
    line += fmt::format(", {} keys per rank, read ratio {}", c["key_range"].get<uint64_t>(), c["read_ratio"].get<double>());
  }
  line += fmt::format("\nbenchkv: {} run(s) of {} s, epochs of {} ms, {} trimmed at each end, seed {}\n",
                      c["runs"].get<uint64_t>(), c["duration"].get<double>(), c["interval_ms"].get<double>(),
                      c["trim"].get<uint64_t>(), c["seed"].get<uint64_t>());
  return line;
}

constexpr const char* kLatencyColumns[] = {"count", "mean_ns", "p50_ns", "p90_ns", "p95_ns",
                                           "p99_ns", "p999_ns", "max_ns"};

// Text reports give latency in microseconds (three decimals: the nanosecond).
std::string us(double ns) { return fmt::format("{:.3f}", ns / 1000.0); }

// Whether a latency object of the summary (latency_json) carries the "saturated" mark: a
// bucket of a client's recorder (32-bit counts) reached 2^32 - 1 and stopped counting.
bool marked_saturated(const json& latency) {
  return latency.is_object() && latency.contains("saturated") && latency["saturated"] == true;
}

// What a saturated histogram does to its figures (docs/outputs.md §The summary JSON).
constexpr const char* kSaturatedMeaning =
    "a bucket of a client's recorder reached 2^32 - 1 and stopped counting, so the counts are too low, the mean "
    "reads high and a percentile is off by an amount the summary does not record, in either direction; the rates "
    "are counted apart and exact";

void latency_table(std::string& out, const std::string& tag, const json& latency) {
  out += fmt::format("{} latency (us) {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", tag, "",
                     "count", "mean", "p50", "p90", "p95", "p99", "p99.9", "max");
  std::vector<std::string> names(metrics::kLatencyClassNames.begin(), metrics::kLatencyClassNames.end());
  names.push_back("all");
  std::string saturated;  // the rows from a saturated histogram
  for (const std::string& n : names) {
    const json& h = latency[n];
    out += fmt::format("{} latency (us) {:>10} {:>10}", tag, n, h["count"].get<uint64_t>());
    for (size_t k = 1; k < std::size(kLatencyColumns); ++k) out += fmt::format(" {:>10}", us(h[kLatencyColumns[k]].get<double>()));
    out += "\n";
    if (marked_saturated(h)) saturated += (saturated.empty() ? "" : ", ") + n;
  }
  if (!saturated.empty())
    out += fmt::format("{} latency: warning: not exact, saturated histogram ({}): {}\n", tag, saturated,
                       kSaturatedMeaning);
}

// The rpc section's entry for the run `r` of the summary's "runs" (rpc runs record no
// per-class request latency: their round trips are there; under --repeat the entry of
// the same seed), else nullptr.
const json* rpc_run_rtts(const json& summary, const json& r) {
  if (!summary.contains("rpc") || !summary["rpc"].contains("runs")) return nullptr;
  const uint64_t run = r["run"].get<uint64_t>();
  for (const json& x : summary["rpc"]["runs"])
    if (x.value("run", uint64_t{0}) == run && x.value("seed", json()) == r.value("seed", json())) return &x;
  return nullptr;
}

// The CSV latency columns (count, mean, p50, p90, p95, p99, p99.9, max; nanoseconds) of
// an rpc run from its round-trip times (in microseconds in the summary, rounded to 1e-6,
// so whole nanoseconds come back exactly).
std::string rpc_latency_columns(const json& rtt) {
  std::string out = fmt::format(",{},{:.1f}", rtt["calls"].get<uint64_t>(), rtt["rtt_mean_us"].get<double>() * 1000.0);
  for (const char* k : {"rtt_p50_us", "rtt_p90_us", "rtt_p95_us", "rtt_p99_us", "rtt_p999_us", "rtt_max_us"})
    out += fmt::format(",{}", std::llround(rtt[k].get<double>() * 1000.0));
  return out;
}

}  // namespace

std::string ucx_transports_line(const json& summary) {
  if (!summary.contains("provenance") || !summary["provenance"].contains("ucx_transports")) return "";
  const json& t = summary["provenance"]["ucx_transports"];
  if (!t.is_object()) return "";
  const auto list = [](const json& a, const char* sep) {
    std::string out;
    for (const json& x : a) out += (out.empty() ? "" : sep) + x.get<std::string>();
    return out;
  };
  return fmt::format("benchkv: UCX transports: active messages over {} (lanes: {}; {} endpoints)\n",
                     list(t.value("am", json::array()), ", "), list(t.value("lanes", json::array()), "; "),
                     t.value("endpoints", uint64_t{0}));
}

namespace {

// What a summary's daemon_cqe_per_loop counts: hardware CQEs (the copyrpc backends), or
// for ucx-am, whose daemons poll no completion queue, the request messages a loop served
// (backends/ucx_am/ucx_am.hpp). Not one quantity: compare leaves it out between the two.
bool counts_request_messages(const json& summary) {
  return summary.contains("config") && summary["config"].is_object() &&
         summary["config"].value("backend", json()) == "ucx-am";
}
const char* served_per_loop(const json& summary) {
  return counts_request_messages(summary) ? "request messages per loop (ucx-am: no CQ)" : "CQEs per loop";
}

// One run's line: "run 1/3: 1.234567 Mops, N requests in T s (...); daemons: ...";
// `served` names daemon_cqe_per_loop (served_per_loop).
std::string run_line(const std::string& tag, const json& r, const char* rate, const char* what,
                     const char* served = "CQEs per loop") {
  std::string out = fmt::format("{}: {:.6f} {}, {} {} in {:.6f} s ({} issued, {} completed over the whole run)", tag,
                                r["total_mops"].get<double>(), rate, r["requests"].get<uint64_t>(), what,
                                static_cast<double>(r["duration_ns"].get<uint64_t>()) * 1e-9,
                                r["issued"].get<uint64_t>(), r["completed"].get<uint64_t>());
  if (r.contains("daemon_cqe_per_loop"))
    out += fmt::format("; daemons: {:.6f} {}, {:.6f} calls in flight", r["daemon_cqe_per_loop"].get<double>(), served,
                       r["daemon_calls_in_flight"].get<double>());
  return out + "\n";
}

std::string spread_text(const json& s) {
  std::string out = fmt::format("mean {:.6f} std dev {:.6f}", s["mean"].get<double>(), s["std_dev"].get<double>());
  if (s.contains("ci95_low") && s["n"].get<uint64_t>() >= 2)
    out += fmt::format(" 95% CI [{:.6f}, {:.6f}]", s["ci95_low"].get<double>(), s["ci95_high"].get<double>());
  return out + fmt::format(" min {:.6f} max {:.6f}", s["min"].get<double>(), s["max"].get<double>());
}

// Present when the run had faults or a request failed (kv::ErrorCode::kEndpointStopped).
std::string failed_line(const json& summary) {
  if (!summary.contains("totals") || !summary["totals"].contains("failed")) return "";
  return fmt::format("[OVERALL] {} requests reported failed (their copyrpc endpoint stopped)\n",
                     summary["totals"]["failed"].get<uint64_t>());
}

// The spread over the repetitions of the figures `figures` (key, label) of `over` (in us),
// one "[OVERALL] <what> <label> over the repetitions (us): ..." line each.
void spread_lines_us(std::string& out, const json& over, const char* what,
                     std::initializer_list<std::pair<const char*, const char*>> figures, double to_us) {
  for (const auto& [key, label] : figures) {
    const json& sp = over[key];
    out += fmt::format("[OVERALL] {} {} over the repetitions (us): mean {} std dev {}", what, label,
                       us(sp["mean"].get<double>() * to_us), us(sp["std_dev"].get<double>() * to_us));
    if (sp["n"].get<uint64_t>() >= 2)
      out += fmt::format(" 95% CI [{}, {}]", us(sp["ci95_low"].get<double>() * to_us),
                         us(sp["ci95_high"].get<double>() * to_us));
    out += "\n";
  }
}

// The text report of independent repetitions (repeated_summary_json): a line per run, a
// line per repetition, then the spread over the repetitions with its 95 % interval. rpc
// (Mrps, calls) adds each repetition's round trips and their spread; data (its runs'
// operations) each repetition's ops/s, GiB/s and latency and their spread.
std::string repeated_report(const json& summary) {
  const json& reps = summary["repetitions"];
  const json& o = summary["overall"];
  const size_t n = reps.size();
  const bool rpc = summary.contains("rpc"), data = summary.contains("data");
  const char* rate = rpc ? "Mrps" : "Mops";
  std::string out = fmt::format("benchkv: {} independent repetitions, seeds {} to {}\n", n,
                                reps.front()["seed"].get<uint64_t>(), reps.back()["seed"].get<uint64_t>());
  for (const json& r : summary["runs"])
    out += run_line(fmt::format("seed {} run {}/{}", r["seed"].get<uint64_t>(), r["run"].get<uint64_t>() + 1,
                                summary["config"]["runs"].get<uint64_t>()),
                    r, rate, rpc ? "calls" : data ? "operations" : "requests");
  std::string saturated_seeds;  // of the repetitions whose latency histogram saturated
  for (const json& rep : reps) {
    out += fmt::format("[REPETITION] seed {}: {:.6f} {} (mean of its {} runs)", rep["seed"].get<uint64_t>(),
                       rep["mops"].get<double>(), rate, rep["runs"].get<uint64_t>());
    if (rep.contains("daemon_cqe_per_loop"))
      out += fmt::format("; daemons: {:.6f} CQEs per loop, {:.6f} calls in flight",
                         rep["daemon_cqe_per_loop"].get<double>(), rep["daemon_calls_in_flight"].get<double>());
    if (rep["latency"].is_object()) {
      const json& l = rep["latency"];
      out += fmt::format("; latency (us) mean {} p50 {} p99 {} p99.9 {} max {}", us(l["mean_ns"].get<double>()),
                         us(l["p50_ns"].get<double>()), us(l["p99_ns"].get<double>()), us(l["p999_ns"].get<double>()),
                         us(l["max_ns"].get<double>()));
      if (marked_saturated(l)) {
        out += " (not exact: saturated histogram)";
        saturated_seeds += fmt::format("{}{}", saturated_seeds.empty() ? "" : ", ", rep["seed"].get<uint64_t>());
      }
    }
    if (rep.contains("rtt")) {
      const json& t = rep["rtt"];
      out += fmt::format("; round trip (us) mean {:.3f} p50 {:.3f} p99 {:.3f} p99.9 {:.3f} max {:.3f}",
                         t["mean_us"].get<double>(), t["p50_us"].get<double>(), t["p99_us"].get<double>(),
                         t["p999_us"].get<double>(), t["max_us"].get<double>());
    }
    if (rep.contains("data")) {
      const json& d = rep["data"];
      out += fmt::format("; {:.0f} ops/s, {:.3f} GiB/s; latency (us) mean {:.3f} p50 {:.3f} p99 {:.3f} p99.9 {:.3f} "
                         "max {:.3f}",
                         d["ops_per_s"].get<double>(), d["gib_per_s"].get<double>(), d["latency_mean_us"].get<double>(),
                         d["latency_p50_us"].get<double>(), d["latency_p99_us"].get<double>(),
                         d["latency_p999_us"].get<double>(), d["latency_max_us"].get<double>());
    }
    out += "\n";
  }
  out += fmt::format("[OVERALL] {} repetitions x {} runs: {} {}\n", n, summary["config"]["runs"].get<uint64_t>(), rate,
                     spread_text(o["mops"]));
  if (o.contains("daemon_cqe_per_loop")) {
    out += fmt::format("[OVERALL] daemon CQEs per loop {}\n", spread_text(o["daemon_cqe_per_loop"]));
    out += fmt::format("[OVERALL] daemon calls in flight {}\n", spread_text(o["daemon_calls_in_flight"]));
  }
  if (o["latency"].is_object()) {
    latency_table(out, "[OVERALL]", o["latency"]);
    spread_lines_us(out, o["latency_over_repetitions"], "latency",
                    {{"mean_ns", "mean"}, {"p50_ns", "p50"}, {"p99_ns", "p99"}, {"p999_ns", "p99.9"}}, 1.0);
    if (!saturated_seeds.empty())
      out += fmt::format("[OVERALL] latency over the repetitions: warning: not exact, the latency of seed{} {} came "
                         "from a saturated histogram: {}\n",
                         saturated_seeds.find(',') == std::string::npos ? "" : "s", saturated_seeds, kSaturatedMeaning);
  }
  if (o.contains("rtt_over_repetitions"))
    spread_lines_us(out, o["rtt_over_repetitions"], "round trip",
                    {{"mean_us", "mean"}, {"p50_us", "p50"}, {"p99_us", "p99"}, {"p999_us", "p99.9"}}, 1000.0);
  if (o.contains("data_over_repetitions")) {
    const json& d = o["data_over_repetitions"];
    out += fmt::format("[OVERALL] ops/s {}\n", spread_text(d["ops_per_s"]));
    out += fmt::format("[OVERALL] GiB/s {}\n", spread_text(d["gib_per_s"]));
    spread_lines_us(out, d, "latency",
                    {{"latency_mean_us", "mean"}, {"latency_p50_us", "p50"}, {"latency_p99_us", "p99"},
                     {"latency_p999_us", "p99.9"}},
                    1000.0);
  }
  return out + failed_line(summary);
}

}  // namespace

std::string format_report(const json& summary, ReportFormat format) {
  std::string out;
  const json& runs = summary["runs"];
  if (format == ReportFormat::kNone) return out;
  const bool repeated = summary.contains("repetitions");
  if (format == ReportFormat::kCsv) {
    if (repeated) out += "seed,";  // the runs of every repetition, each led by its seed
    out += "run,mops,requests,duration_ns,issued,completed,latency_count,latency_mean_ns,latency_p50_ns,"
           "latency_p90_ns,latency_p95_ns,latency_p99_ns,latency_p999_ns,latency_max_ns,daemon_cqe_per_loop,"
           "daemon_calls_in_flight\n";
    for (const json& r : runs) {
      if (repeated) out += fmt::format("{},", r["seed"].get<uint64_t>());
      out += fmt::format("{},{:.6f},{},{},{},{}", r["run"].get<uint64_t>(), r["total_mops"].get<double>(),
                         r["requests"].get<uint64_t>(), r["duration_ns"].get<uint64_t>(), r["issued"].get<uint64_t>(),
                         r["completed"].get<uint64_t>());
      if (r["latency"].is_object()) {
        const json& a = r["latency"]["all"];
        out += fmt::format(",{},{:.1f}", a["count"].get<uint64_t>(), a["mean_ns"].get<double>());
        for (size_t k = 2; k < std::size(kLatencyColumns); ++k) out += fmt::format(",{}", a[kLatencyColumns[k]].get<uint64_t>());
      } else if (const json* rtt = rpc_run_rtts(summary, r); rtt && rtt->contains("rtt_mean_us")) {
        out += rpc_latency_columns(*rtt);
      } else {
        out += ",,,,,,,,";
      }
      if (r.contains("daemon_cqe_per_loop"))
        out += fmt::format(",{:.6f},{:.6f}\n", r["daemon_cqe_per_loop"].get<double>(),
                           r["daemon_calls_in_flight"].get<double>());
      else
        out += ",,\n";
    }
    return out;
  }
  out += config_line(summary["config"]);
  out += ucx_transports_line(summary);
  if (repeated) return out + repeated_report(summary);
  // rpc counts calls, in millions per second (Mrps); the KV backends requests (Mops).
  const bool rpc = summary.contains("rpc");
  const char* rate = rpc ? "Mrps" : "Mops";
  const char* what = rpc ? "calls" : "requests";
  const size_t n = runs.size();
  bool several_sizes = false;
  for (const json& r : runs) {
    std::string tag = fmt::format("run {}/{}", r["run"].get<uint64_t>() + 1, n);
    if (const json* rtt = rpc ? rpc_run_rtts(summary, r) : nullptr;
        rtt != nullptr && rtt->contains("message_size")) {  // several sizes: runs counted per size
      several_sizes = true;
      const uint64_t per_size = summary["config"]["runs"].get<uint64_t>();
      tag = fmt::format("size {} run {}/{}", (*rtt)["message_size"].get<uint64_t>(),
                        r["run"].get<uint64_t>() % per_size + 1, per_size);
    }
    out += run_line(tag, r, rate, what, served_per_loop(summary));
    if (r["latency"].is_object()) latency_table(out, tag, r["latency"]);
  }
  // Over several message sizes an average would mix sizes: the rpc table gives each size's
  // runs, and no [OVERALL] lines are printed.
  if (several_sizes) return out + failed_line(summary);
  const json& o = summary["overall"];
  out += fmt::format("[OVERALL] {} runs: {} {}\n", o["runs"].get<uint64_t>(), rate, spread_text(o["mops"]));
  if (o.contains("daemon_cqe_per_loop")) {
    out += fmt::format("[OVERALL] daemon {} {}\n", served_per_loop(summary), spread_text(o["daemon_cqe_per_loop"]));
    out += fmt::format("[OVERALL] daemon calls in flight {}\n", spread_text(o["daemon_calls_in_flight"]));
  }
  if (o["latency"].is_object()) latency_table(out, "[OVERALL]", o["latency"]);
  out += failed_line(summary);
  return out;
}

// ---------------------------------------------------------------------------------------
// compare
// ---------------------------------------------------------------------------------------

namespace {

double figure(const json& summary, const std::string& name, std::initializer_list<const char*> path) {
  const json* at = &summary;
  std::string where;
  for (const char* k : path) {
    where += where.empty() ? k : std::string("/") + k;
    if (!at->is_object() || !at->contains(k) || (*at)[k].is_null())
      throw std::runtime_error(fmt::format("compare: {} has no \"{}\"", name, where));
    at = &(*at)[k];
  }
  if (!at->is_number()) throw std::runtime_error(fmt::format("compare: {}: \"{}\" is not a number", name, where));
  return at->get<double>();
}

}  // namespace

namespace {

// What produced a summary: the KV benchmark (any KV backend), `benchkv rpc` or `benchkv
// data`. Figures of different kinds measure different things (requests, calls, bulk
// operations by size) and are not compared.
std::string kind_of(const json& summary) {
  if (summary.contains("data")) return "data";
  if (summary.contains("rpc")) return "rpc";
  return "KV";
}

std::string kind_text(const std::string& kind) {
  if (kind == "data") return "a data summary (benchkv data)";
  if (kind == "rpc") return "an rpc summary (benchkv rpc)";
  return "a KV summary (benchkv meta|delegation|direct|ucx-am)";
}

// Configuration keys that name where outputs went or how they were shown, not what was
// measured: not reported as differences.
constexpr const char* kConfigKeysNotCompared[] = {"output", "summary", "inflight_samples", "trace", "step_log",
                                                  "progress", "report"};

// The settings in which two summaries differ: their "config" keys (output paths and display
// switches left out; a key one side lacks shows as "(none)") and, when both summaries
// record the simulator's model, the model's keys (as "model content: nic...."). One
// "key: A vs B" entry each.
std::vector<std::string> config_differences(const json& a, const json& b) {
  std::vector<std::string> out;
  const auto text = [](const json& j, const std::string& k) { return j.contains(k) ? j[k].dump() : std::string("(none)"); };
  const json ca = a.value("config", json::object()), cb = b.value("config", json::object());
  std::vector<std::string> keys;
  for (const auto& [k, v] : ca.items()) keys.push_back(k);
  for (const auto& [k, v] : cb.items())
    if (!ca.contains(k)) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  for (const std::string& k : keys) {
    if (std::find(std::begin(kConfigKeysNotCompared), std::end(kConfigKeysNotCompared), k) !=
        std::end(kConfigKeysNotCompared))
      continue;
    if (text(ca, k) != text(cb, k)) out.push_back(fmt::format("{}: {} vs {}", k, text(ca, k), text(cb, k)));
  }
  const json* ma = a.contains("simulator") && a["simulator"].contains("model") ? &a["simulator"]["model"] : nullptr;
  const json* mb = b.contains("simulator") && b["simulator"].contains("model") ? &b["simulator"]["model"] : nullptr;
  if (ma && mb && *ma != *mb) {
    const json fa = ma->flatten(), fb = mb->flatten();
    std::vector<std::string> paths;
    for (const auto& [k, v] : fa.items()) paths.push_back(k);
    for (const auto& [k, v] : fb.items())
      if (!fa.contains(k)) paths.push_back(k);
    std::sort(paths.begin(), paths.end());
    for (const std::string& p : paths)
      if (text(fa, p) != text(fb, p)) {
        std::string dotted = p.substr(1);
        std::replace(dotted.begin(), dotted.end(), '/', '.');
        out.push_back(fmt::format("model content {}: {} vs {}", dotted, text(fa, p), text(fb, p)));
      }
  }
  return out;
}

// A row of the comparison; `mark` (saturation_mark) ends it.
std::string row_text(const std::string& label, double x, double y, const std::string& mark = "") {
  return fmt::format("{:<28} {:>14.6f} {:>14.6f} {:>9}{}\n", label, x, y,
                     x != 0 ? fmt::format("{:.4f}", y / x) : "n/a", mark);
}

// A latency histogram's "saturated" mark (latency_json's "saturated", an rpc run's
// "rtt_saturated", a data run's "latency_saturated"): a bucket of a client's recorder
// reached 2^32 - 1 and stopped counting (core/metrics/latency_histogram.hpp). Absent:
// false. Throws naming `name` when it is there and not a boolean.
bool saturated_in(const json& at, const std::string& key, const std::string& name) {
  if (!at.is_object() || !at.contains(key)) return false;
  if (!at[key].is_boolean())
    throw std::runtime_error(fmt::format("compare: {}: \"{}\" is {}, not true or false", name, key, at[key].dump()));
  return at[key].get<bool>();
}

// What ends a row whose figure came from a saturated histogram on a side: "  saturated: A".
std::string saturation_mark(bool a, bool b) {
  if (!a && !b) return "";
  return fmt::format("  saturated: {}", a && b ? "A, B" : a ? "A" : "B");
}

// What the "saturated" mark means, once, before the rows (nothing when no row has it).
std::string saturation_warning(bool a, bool b) {
  if (!a && !b) return "";
  return fmt::format("warning: {} latency histograms saturated (a bucket of a client's recorder reached 2^32 - 1 "
                     "and stopped counting): the rows marked \"saturated\" are not exact. The counts are too low, "
                     "so the mean reads high (the sum of the values is exact, their number low) and a percentile "
                     "is off by an amount the summary does not record, in either direction (toward the bucket that "
                     "stopped); those figures get no verdict. The rates are counted apart from the histograms, "
                     "unaffected\n",
                     a && b ? "A's and B's" : a ? "A's" : "B's");
}

double mean_of(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m += x;
  return v.empty() ? 0.0 : m / double(v.size());
}

// One figure of a summary's repetitions, by the repetition's seed.
using SeededValues = std::map<uint64_t, double>;

// The repetitions' values of a figure (`key` of each "repetitions" entry, a dotted path
// into it) by seed, or none when the summary has no repetitions. Throws naming `name`
// when a repetition has no seed or two have the same one (not a summary --repeat wrote).
SeededValues repetition_values(const json& summary, const std::string& name, const std::string& key) {
  SeededValues v;
  if (!summary.contains("repetitions")) return v;
  for (const json& rep : summary["repetitions"]) {
    if (!rep.is_object() || !rep.contains("seed") || !rep["seed"].is_number_unsigned())
      throw std::runtime_error(fmt::format("compare: {}: a \"repetitions\" entry has no seed", name));
    const json* at = &rep;
    size_t start = 0;
    while (at && start <= key.size()) {
      const size_t dot = std::min(key.find('.', start), key.size());
      const std::string part = key.substr(start, dot - start);
      at = at->is_object() && at->contains(part) ? &(*at)[part] : nullptr;
      start = dot + 1;
    }
    const uint64_t seed = rep["seed"].get<uint64_t>();
    if (at && at->is_number() && !v.emplace(seed, at->get<double>()).second)
      throw std::runtime_error(fmt::format("compare: {}: two repetitions have the seed {}", name, seed));
  }
  return v;
}

std::vector<double> values_of(const SeededValues& v) {
  std::vector<double> out;
  for (const auto& [seed, x] : v) out.push_back(x);
  return out;
}

// The seeds of `v`: "1, 2, 3", or "1 to 10" for more than 3 consecutive ones.
std::string seeds_text(const SeededValues& v) {
  if (v.size() > 3 && v.rbegin()->first - v.begin()->first + 1 == v.size())
    return fmt::format("{} to {}", v.begin()->first, v.rbegin()->first);
  std::string t;
  for (const auto& [seed, x] : v) t += (t.empty() ? "" : ", ") + std::to_string(seed);
  return t;
}

bool same_seeds(const SeededValues& a, const SeededValues& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) { return x.first == y.first; });
}

// What to do about too few repetitions: --repeat, which only simulated runs have.
std::string repeat_advice(const json& a, const json& b) {
  const auto simulated = [](const json& s) {
    return s.contains("config") && s["config"].value("transport", json()) == "sim";
  };
  return simulated(a) && simulated(b) ? "run both with --repeat 3 or more"
                                      : "--repeat runs in the simulator only, and a real run is one execution";
}

const char* significance(double p) {
  return p < 0.05 ? "the difference is significant at the 5 % level" : "no significant difference at the 5 % level";
}

// The verdict on one figure over the repetitions of A and B (one value per seed), or why
// there is none (fewer than 2 repetitions on a side). When both sides hold the same seeds
// the repetitions are pairs (common random numbers: seed k drove both simulations' random
// streams): the paired t-test over the per-seed differences B - A. Otherwise the two are
// independent samples: Welch's t-test. The line names the test and why it was chosen.
std::string verdict(const std::string& figure, const SeededValues& a, const SeededValues& b,
                    const std::string& advice) {
  if (a.size() < 2 || b.size() < 2)
    return fmt::format("{}: no verdict: A has {} and B has {} independent repetition(s); a test needs 2 or more on "
                       "each side (the runs of one execution are windows of it, not independent): {}\n",
                       figure, a.size() < 2 ? std::max<size_t>(a.size(), 1) : a.size(),
                       b.size() < 2 ? std::max<size_t>(b.size(), 1) : b.size(), advice);
  if (same_seeds(a, b)) {
    const PairedTest p = paired_test(values_of(a), values_of(b));
    return fmt::format("{}: paired t-test over {} seeds (A and B ran the same seeds, {}: common random numbers, so "
                       "each seed's B - A is one sample): B - A = {:.6f}, 95% CI [{:.6f}, {:.6f}], t = {:.3f}, "
                       "df = {:.0f}, p = {:.4g}: {}\n",
                       figure, p.n, seeds_text(a), p.difference, p.ci95_low, p.ci95_high, p.t, p.df, p.p,
                       significance(p.p));
  }
  const WelchTest w = welch_test(spread(values_of(a)), spread(values_of(b)));
  return fmt::format("{}: Welch's t-test over {} and {} repetitions (independent samples: A ran seeds {} and B seeds "
                     "{}, not the same seeds): B - A = {:.6f}, 95% CI [{:.6f}, {:.6f}], t = {:.3f}, df = {:.1f}, "
                     "p = {:.4g}: {}\n",
                     figure, a.size(), b.size(), seeds_text(a), seeds_text(b), w.difference, w.ci95_low, w.ci95_high,
                     w.t, w.df, w.p, significance(w.p));
}

// The seeds of `v`, as seeds_text.
std::string seeds_text(const std::set<uint64_t>& v) {
  SeededValues m;
  for (uint64_t s : v) m.emplace(s, 0.0);
  return seeds_text(m);
}

// The seeds of a KV summary's repetitions whose latency histogram saturated.
std::set<uint64_t> saturated_repetitions(const json& summary, const std::string& name) {
  std::set<uint64_t> seeds;
  if (!summary.contains("repetitions")) return seeds;
  for (const json& rep : summary["repetitions"])
    if (rep.is_object() && rep.contains("latency") && saturated_in(rep["latency"], "saturated", name) &&
        rep.contains("seed") && rep["seed"].is_number_unsigned())
      seeds.insert(rep["seed"].get<uint64_t>());
  return seeds;
}

// The verdict on a latency figure (verdict), or none when a repetition's value of it came
// from a saturated histogram (`saturated_a`, `saturated_b`: those seeds). Such a value is
// off by an amount the summary does not record: a bias of those seeds, not noise, which
// the t-test reads as part of the difference, so its p-value and interval would claim a
// precision the figures do not have (docs/outputs.md, "Comparing two results").
std::string latency_verdict(const std::string& figure, const SeededValues& a, const SeededValues& b,
                            const std::set<uint64_t>& saturated_a, const std::set<uint64_t>& saturated_b,
                            const std::string& advice) {
  if (a.size() < 2 || b.size() < 2 || (saturated_a.empty() && saturated_b.empty()))
    return verdict(figure, a, b, advice);
  std::string whose;
  for (const auto& [side, seeds] : {std::pair{"A", &saturated_a}, std::pair{"B", &saturated_b}})
    if (!seeds->empty())
      whose += fmt::format("{}{}'s seed{} {}", whose.empty() ? "" : " and ", side, seeds->size() == 1 ? "" : "s",
                           seeds_text(*seeds));
  return fmt::format("{}: no verdict: {} came from a saturated histogram, whose figures are off by an amount the "
                     "summary does not record (the mean high, a percentile in either direction): a bias, not "
                     "noise, which a t-test would count as difference, so its p-value would claim a precision "
                     "the figures do not have\n",
                     figure, whose);
}

// The transports UCX selected, as the summary records them (provenance.ucx_transports),
// or null for a run that did not use UCX.
json ucx_transports_of(const json& summary) {
  if (summary.contains("provenance") && summary["provenance"].contains("ucx_transports"))
    return summary["provenance"]["ucx_transports"];
  return nullptr;
}

// The transport a summary's runs went over (its config's "transport", as JSON text:
// "\"sim\"", "\"ucx\""), or "(none recorded)".
std::string transport_of(const json& summary) {
  const json c = summary.value("config", json::object());
  return c.is_object() && c.contains("transport") ? c["transport"].dump() : std::string("(none recorded)");
}

// Why two transports are not compared: a simulation against a measurement, or two fabrics.
std::string transport_difference_text(const std::string& a, const std::string& b) {
  if ((a == "\"sim\"") != (b == "\"sim\""))
    return "one is a simulation and the other a measurement, so the ratios would compare the model with a "
           "machine, not two runs of one set-up";
  return "the comparison would measure the transports, not the backends";
}

// Whether a run moved data by UCX RMA (ucp_get/ucp_put: the data benchmark's values over
// UCX, counted in real.ucx_rma), so that its RMA lanes carried its traffic.
bool uses_ucx_rma(const json& summary) {
  if (!summary.contains("real") || !summary["real"].is_object()) return false;
  const json& real = summary["real"];
  if (!real.contains("ucx_rma") || !real["ucx_rma"].is_object()) return kind_of(summary) == "data";
  uint64_t n = 0;
  for (const char* k : {"ucp_get", "ucp_put"})
    if (real["ucx_rma"].contains(k) && real["ucx_rma"][k].is_number_unsigned()) n += real["ucx_rma"][k].get<uint64_t>();
  return n > 0;
}

// The transports of the lanes that carry RMA ("rma" or "rma_bw" among a lane's uses in
// ucx_transports.lanes, "what it carries transport/device"), sorted and unique.
json rma_transports_of(const json& t) {
  std::set<std::string> rma;
  if (t.is_object() && t.contains("lanes") && t["lanes"].is_array())
    for (const json& lane : t["lanes"]) {
      if (!lane.is_string()) continue;
      const std::string text = lane.get<std::string>();
      const size_t space = text.rfind(' ');
      if (space == std::string::npos) continue;
      const std::string uses = "," + text.substr(0, space) + ",";
      if (uses.find(",rma,") != std::string::npos || uses.find(",rma_bw,") != std::string::npos)
        rma.insert(text.substr(space + 1));
    }
  return json(std::vector<std::string>(rma.begin(), rma.end()));
}

// How the UCX lanes two runs' traffic used differ ("active-message lanes X vs Y", and
// with `rma` "RMA lanes X vs Y"), none when they match or neither run went over UCX.
std::vector<std::string> ucx_lane_differences(const json& ta, const json& tb, bool rma) {
  std::vector<std::string> out;
  if (ta.is_null() && tb.is_null()) return out;
  const auto am_of = [](const json& t) { return t.is_object() ? t.value("am", json()) : json(); };
  const auto text = [](const json& t, const json& v) { return t.is_null() ? std::string("none recorded") : v.dump(); };
  if (am_of(ta) != am_of(tb))
    out.push_back(fmt::format("active-message lanes {} vs {}", text(ta, am_of(ta)), text(tb, am_of(tb))));
  if (rma && rma_transports_of(ta) != rma_transports_of(tb))
    out.push_back(fmt::format("RMA lanes, which moved the values (ucp_get/ucp_put), {} vs {}",
                              text(ta, rma_transports_of(ta)), text(tb, rma_transports_of(tb))));
  return out;
}

// Whether a summary is a simulation's (config "transport": "sim"), whose figures depend on
// the code and the configuration but not on how benchkv was built.
bool simulated_summary(const json& s) {
  return s.contains("config") && s["config"].is_object() && s["config"].value("transport", json()) == "sim";
}

// The provenance fields of a build that change a measurement's timing (code generation
// and instrumentation); a simulation gives the same bytes whatever they are.
constexpr const char* kTimingBuildFields[] = {"build_type", "compiler", "sanitizer", "cxx_flags"};

std::string provenance_text(const json& s, const char* key) {
  if (!s.contains("provenance") || !s["provenance"].is_object() || !s["provenance"].contains(key))
    return "(not recorded)";
  return s["provenance"][key].dump();
}

bool records(const json& s, const char* key) {
  return s.contains("provenance") && s["provenance"].is_object() && s["provenance"].contains(key);
}

// The timing fields a summary's provenance does not record (all of them without a
// provenance object): written by a benchkv from before provenance recorded them (the
// sanitizer and the C++ flags came last), or edited. Its build is unknown there.
std::vector<std::string> unrecorded_build_fields(const json& s) {
  std::vector<std::string> out;
  for (const char* k : kTimingBuildFields)
    if (!records(s, k)) out.emplace_back(k);
  return out;
}

// The flag naming a profile-guided build's profile directory, as build_pgo.sh passes it.
constexpr std::string_view kProfileDirFlag = "-fprofile-dir=";

// A build's C++ flags as compared: each -fprofile-dir=PATH (a profile-guided build's:
// scripts/build_pgo.sh gives the absolute path of the profile under its build
// directory) reads -fprofile-dir=<dir>. The path says where the profile was read from,
// not what code was generated, so two profiled builds of one tree in different
// directories compare equal. Only that flag's path: every other flag is compared as
// written.
std::string comparable_cxx_flags(const std::string& flags) {
  std::string out;
  size_t at = 0;
  while (at < flags.size()) {
    const size_t end = std::min(flags.find(' ', at), flags.size());
    const std::string_view word = std::string_view(flags).substr(at, end - at);
    out += word.substr(0, kProfileDirFlag.size()) == kProfileDirFlag ? std::string(kProfileDirFlag) + "<dir>"
                                                                     : std::string(word);
    if (end < flags.size()) out += ' ';
    at = end + 1;
  }
  return out;
}

// A timing field's value as compared (cxx_flags: comparable_cxx_flags).
json comparable_build_field(const json& s, const char* key) {
  const json& v = s["provenance"][key];
  if (std::string_view(key) == "cxx_flags" && v.is_string()) return comparable_cxx_flags(v.get<std::string>());
  return v;
}

// The timing fields both summaries record in which their builds differ, "sanitizer:
// "none" vs "address"" each (as recorded; cxx_flags compared as comparable_cxx_flags).
std::vector<std::string> build_differences(const json& a, const json& b) {
  std::vector<std::string> out;
  for (const char* k : kTimingBuildFields)
    if (records(a, k) && records(b, k) && comparable_build_field(a, k) != comparable_build_field(b, k))
      out.push_back(fmt::format("{}: {} vs {}", k, provenance_text(a, k), provenance_text(b, k)));
  return out;
}

// A summary field's value as text: a string's content, any other value's JSON text.
std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// What a summary marked partial leaves out, or "" for a whole result. "interrupted": a
// signal stopped the run, so the epochs, runs, repetitions or value sizes after the stop
// are not in it; "incomplete": a real run that ended early, so its figures hold the
// measurement of the ranks that reported only (docs/interruptions.md).
std::string partial_result(const json& s) {
  std::string out;
  if (s.contains("interrupted")) {
    const json& i = s["interrupted"];
    out = "interrupted";
    if (i.is_object() && i.contains("signal")) out += " by " + value_text(i["signal"]);
    if (i.is_object() && i.contains("epochs_done") && i.contains("run"))
      out += fmt::format(" after epoch {} of run {}", value_text(i["epochs_done"]), value_text(i["run"]));
    else
      out += " before any kept epoch of its last run finished";
    if (i.is_object() && i.contains("seed")) out += " of the repetition with seed " + value_text(i["seed"]);
  }
  if (s.contains("incomplete")) {
    const json& c = s["incomplete"];
    out += out.empty() ? "incomplete" : ", and incomplete";
    if (c.is_object() && c.contains("ranks_reported")) {
      const json ranks = s.contains("real") && s["real"].is_object() ? s["real"].value("ranks", json()) : json();
      out += fmt::format(": rank(s) {}{} reported", value_text(c["ranks_reported"]),
                         ranks.is_null() ? "" : " of " + value_text(ranks));
    }
    if (c.is_object() && c.contains("reason")) out += fmt::format(" ({})", value_text(c["reason"]));
  }
  return out;
}

// rpc and data summaries are compared per size (calls or operations of different sizes
// are not one population): what differs between the two kinds.
struct SizedKind {
  const char* kind;            // "rpc", "data": the summary's section holding "runs"
  const char* size_key;        // a run's size: "message_size", "value_size"
  const char* size_name;       // "message size", "value size"
  const char* rate_key;        // a run's rate: "mrps", "ops_per_s"
  const char* rate_label;      // "Mrps", "ops/s"
  const char* also_key;        // a second rate averaged over the runs ("gib_per_s"), or nullptr
  const char* also_label;      // "GiB/s"
  const char* latency_prefix;  // a run's latency fields: "rtt" (rtt_histogram, rtt_mean_us ...), "latency"
  const char* latency_label;   // "round trip", "latency"
  const char* samples;         // what the latency is of: "call", "operation"
};
constexpr SizedKind kRpcSized{"rpc", "message_size", "message size", "mrps", "Mrps", nullptr, nullptr,
                              "rtt", "round trip", "call"};
constexpr SizedKind kDataSized{"data", "value_size", "value size", "ops_per_s", "ops/s", "gib_per_s", "GiB/s",
                               "latency", "latency", "operation"};

std::string latency_field(const SizedKind& k, const char* suffix) { return std::string(k.latency_prefix) + suffix; }

// The latency of a set of runs of one size, every sample of them pooled: the runs' raw
// histograms (`<prefix>_histogram`) merged and read as benchkv reads one (nearest rank,
// bucket midpoint, kept within the minimum and maximum: LatencyHistogram::percentile_ns,
// and scripts/latency_histogram.py); the mean weighted by the samples. A p99 of several
// runs is this, not a mean of the runs' p99s.
struct PooledLatency {
  uint64_t count = 0;
  double mean_us = 0;
  std::map<uint64_t, uint64_t> counts;  // by bucket lower bound, ns
  uint64_t min_ns = ~uint64_t{0}, max_ns = 0;

  // Adds one run's histogram; throws naming `name` when it is not one benchkv writes.
  void add(const json& run, const SizedKind& k, const std::string& name) {
    const json& h = run.at(latency_field(k, "_histogram"));
    if (!h.is_object() || h.value("sub_buckets", json()) != metrics::LatencyBuckets::kSub || !h.contains("buckets") ||
        !h["buckets"].is_string())
      throw std::runtime_error(fmt::format("compare: {}: an {} run's {}_histogram is not a benchkv histogram with {} "
                                           "sub-buckets",
                                           name, k.kind, k.latency_prefix, metrics::LatencyBuckets::kSub));
    std::istringstream in(h["buckets"].get<std::string>());
    uint64_t n = 0;
    for (std::string pair; in >> pair;) {
      const size_t colon = pair.find(':');
      uint64_t lower = 0, c = 0;
      const auto parsed = [&](const std::string& t, uint64_t& v) {
        if (t.empty() || t.size() > 19 || t.find_first_not_of("0123456789") != std::string::npos) return false;
        v = std::strtoull(t.c_str(), nullptr, 10);  // at most 19 digits: below 2^64
        return true;
      };
      if (colon == std::string::npos || !parsed(pair.substr(0, colon), lower) || !parsed(pair.substr(colon + 1), c) ||
          metrics::LatencyBuckets::lower_bound(metrics::LatencyBuckets::bucket(lower)) != lower)
        throw std::runtime_error(fmt::format("compare: {}: \"{}\" in an {} run's {}_histogram is not \"bucket lower "
                                             "bound:count\"",
                                             name, pair, k.kind, k.latency_prefix));
      counts[lower] += c;
      n += c;
    }
    const double mean = run.at(latency_field(k, "_mean_us")).get<double>();
    mean_us = count + n ? (mean_us * double(count) + mean * double(n)) / double(count + n) : 0.0;
    count += n;
    min_ns = std::min<uint64_t>(min_ns, std::llround(run.at(latency_field(k, "_min_us")).get<double>() * 1000.0));
    max_ns = std::max<uint64_t>(max_ns, std::llround(run.at(latency_field(k, "_max_us")).get<double>() * 1000.0));
  }
  // The percentile p (0 < p < 1) in microseconds, as LatencyHistogram::percentile_ns.
  double percentile_us(double p) const {
    if (count == 0) return 0.0;
    const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(p * static_cast<double>(count))));
    uint64_t seen = 0;
    for (const auto& [lower, c] : counts) {
      seen += c;
      if (seen < rank) continue;
      const uint32_t b = metrics::LatencyBuckets::bucket(lower);
      if (b >= metrics::LatencyBuckets::kOverflow) break;
      return double(std::clamp(metrics::LatencyBuckets::midpoint(b), std::min(min_ns, max_ns), max_ns)) / 1000.0;
    }
    return double(max_ns) / 1000.0;
  }
};

// The latency figures of a set of runs (microseconds).
struct LatencyFigures {
  double mean = 0, p50 = 0, p99 = 0, p999 = 0;
};
constexpr std::pair<double LatencyFigures::*, const char*> kLatencyRows[] = {
    {&LatencyFigures::mean, "mean"}, {&LatencyFigures::p50, "p50"}, {&LatencyFigures::p99, "p99"},
    {&LatencyFigures::p999, "p99.9"}};

// A run with samples has `<prefix>_mean_us` (a run in which no call or operation completed
// has no latency fields and adds nothing).
bool has_samples(const json& run, const SizedKind& k) { return run.contains(latency_field(k, "_mean_us")); }

// Whether a run with samples among `runs` has a saturated histogram (saturated_in).
bool any_saturated(const std::vector<const json*>& runs, const SizedKind& k, const std::string& name) {
  return std::any_of(runs.begin(), runs.end(), [&](const json* r) {
    return has_samples(*r, k) && saturated_in(*r, latency_field(k, "_saturated"), name);
  });
}

// Whether every run with samples carries its raw histogram (an older benchkv wrote none).
bool histograms_in(const std::vector<const json*>& runs, const SizedKind& k) {
  return std::all_of(runs.begin(), runs.end(), [&](const json* r) {
    return !has_samples(*r, k) || r->contains(latency_field(k, "_histogram"));
  });
}

// The latency of `runs`: with `pooled`, every sample of them (PooledLatency); without
// (a summary with no histograms), each figure the mean of the runs' own figures.
// nullopt when no run has a sample.
std::optional<LatencyFigures> latency_of(const std::vector<const json*>& runs, const SizedKind& k, bool pooled,
                                         const std::string& name) {
  std::vector<const json*> with;
  for (const json* r : runs)
    if (has_samples(*r, k)) with.push_back(r);
  if (with.empty()) return std::nullopt;
  LatencyFigures f;
  if (pooled) {
    PooledLatency all;
    for (const json* r : with) all.add(*r, k, name);
    f.mean = all.mean_us;
    f.p50 = all.percentile_us(0.5);
    f.p99 = all.percentile_us(0.99);
    f.p999 = all.percentile_us(0.999);
    return f;
  }
  const auto mean_over_runs = [&](const char* suffix) {
    std::vector<double> v;
    for (const json* r : with) v.push_back(r->at(latency_field(k, suffix)).get<double>());
    return mean_of(v);
  };
  f.mean = mean_over_runs("_mean_us");
  f.p50 = mean_over_runs("_p50_us");
  f.p99 = mean_over_runs("_p99_us");
  f.p999 = mean_over_runs("_p999_us");
  return f;
}

// Each run of a summary's rpc or data section with its size (a run names it, or, for an
// rpc run of one message size, the section does).
std::vector<std::pair<uint64_t, const json*>> sized_runs(const json& s, const SizedKind& k, const std::string& name) {
  const json& section = s[k.kind];
  if (!section.is_object() || !section.contains("runs") || !section["runs"].is_array())
    throw std::runtime_error(fmt::format("compare: {} has no \"{}/runs\"", name, k.kind));
  const json whole = section.value(k.size_key, json());
  std::vector<std::pair<uint64_t, const json*>> out;
  for (const json& r : section["runs"]) {
    json size = r.contains(k.size_key) ? r[k.size_key] : whole;
    if (size.is_string() && !size.get<std::string>().empty() &&
        size.get<std::string>().find_first_not_of("0123456789") == std::string::npos)
      size = std::stoull(size.get<std::string>());
    if (!size.is_number_unsigned())
      throw std::runtime_error(fmt::format("compare: {}: an {} run does not say its {} (section: {})", name, k.kind,
                                           k.size_name, whole.dump()));
    out.emplace_back(size.get<uint64_t>(), &r);
  }
  return out;
}

// rpc and data summaries, per size, for the sizes both have (the others named; none in
// common refused). The rate (Mrps, ops/s): mean and std dev over the runs of the size,
// and with repetitions on both sides the 95 % interval over them; data's GiB/s the mean;
// the latency (round trips, operations): every sample of those runs, from their merged
// histograms (a summary without them: each run's figure averaged, said in the label).
// Verdicts per size over the repetitions (one value per seed: its runs of the size): the
// rate and the latency mean and p99.
std::string compare_sized(const json& a, const json& b, const std::string& name_a, const std::string& name_b,
                          const SizedKind& k) {
  const auto ra = sized_runs(a, k, name_a), rb = sized_runs(b, k, name_b);
  const auto sizes_of = [](const auto& runs) {
    std::set<uint64_t> v;
    for (const auto& [size, r] : runs) v.insert(size);
    return v;
  };
  const std::set<uint64_t> sizes_a = sizes_of(ra), sizes_b = sizes_of(rb);
  std::vector<uint64_t> common, only_a, only_b;
  for (uint64_t v : sizes_a) (sizes_b.count(v) ? common : only_a).push_back(v);
  for (uint64_t v : sizes_b)
    if (!sizes_a.count(v)) only_b.push_back(v);
  const auto list = [](const auto& v) {
    std::string t;
    for (uint64_t x : v) t += (t.empty() ? "" : ", ") + std::to_string(x);
    return t;
  };
  if (common.empty())
    throw std::runtime_error(fmt::format("compare: {} summaries are compared per {}, and {} ({}) and {} ({}) have no "
                                         "{} in common",
                                         k.kind, k.size_name, name_a, list(sizes_a), name_b, list(sizes_b), k.size_name));
  std::string out = fmt::format("{} summaries: compared per {} ({}: the mean and std dev over the runs of the size{}; "
                                "{}: every {} of those runs, read from their merged histograms)\n",
                                k.kind, k.size_name, k.rate_label,
                                k.also_key ? fmt::format(", {} their mean", k.also_label) : "", k.latency_label,
                                k.samples);
  if (!only_a.empty()) out += fmt::format("{}s only in A (not compared): {}\n", k.size_name, list(only_a));
  if (!only_b.empty()) out += fmt::format("{}s only in B (not compared): {}\n", k.size_name, list(only_b));
  const auto runs_of = [](const auto& runs, uint64_t size, std::optional<uint64_t> seed = std::nullopt) {
    std::vector<const json*> v;
    for (const auto& [sz, r] : runs)
      if (sz == size && (!seed || (r->contains("seed") && (*r)["seed"] == *seed))) v.push_back(r);
    return v;
  };
  bool saturated_a = false, saturated_b = false;
  for (uint64_t size : common) {
    saturated_a = saturated_a || any_saturated(runs_of(ra, size), k, name_a);
    saturated_b = saturated_b || any_saturated(runs_of(rb, size), k, name_b);
  }
  out += saturation_warning(saturated_a, saturated_b);
  out += fmt::format("{:<28} {:>14} {:>14} {:>9}\n", "figure", "A", "B", "B / A");
  const auto rates = [](const std::vector<const json*>& runs, const char* key) {
    std::vector<double> v;
    for (const json* r : runs) v.push_back(r->at(key).get<double>());
    return v;
  };
  const auto seeds_of = [](const auto& runs, uint64_t size) {
    std::set<uint64_t> v;
    for (const auto& [sz, r] : runs)
      if (sz == size && r->contains("seed")) v.insert((*r)["seed"].template get<uint64_t>());
    return v;
  };
  std::string verdicts;
  for (uint64_t size : common) {
    const auto sa = runs_of(ra, size), sb = runs_of(rb, size);
    const std::string rate = fmt::format("{} B {}", size, k.rate_label);
    out += row_text(rate + " mean", mean_of(rates(sa, k.rate_key)), mean_of(rates(sb, k.rate_key)));
    out += row_text(rate + " std dev", std_dev(rates(sa, k.rate_key)), std_dev(rates(sb, k.rate_key)));
    if (k.also_key)
      out += row_text(fmt::format("{} B {} mean", size, k.also_label), mean_of(rates(sa, k.also_key)),
                      mean_of(rates(sb, k.also_key)));
    // Under --repeat each run has its seed: one value per repetition (its runs of this size).
    const bool pooled = histograms_in(sa, k) && histograms_in(sb, k);
    SeededValues rate_a, rate_b, mean_a, mean_b, p99_a, p99_b;
    std::set<uint64_t> saturated_seeds_a, saturated_seeds_b;  // their latency figures are not exact
    for (const auto& [runs, name, r, mean, p99, saturated] :
         {std::tuple{&ra, &name_a, &rate_a, &mean_a, &p99_a, &saturated_seeds_a},
          std::tuple{&rb, &name_b, &rate_b, &mean_b, &p99_b, &saturated_seeds_b}})
      for (uint64_t seed : seeds_of(*runs, size)) {
        const auto rs = runs_of(*runs, size, seed);
        (*r)[seed] = mean_of(rates(rs, k.rate_key));
        if (const auto l = latency_of(rs, k, pooled, *name)) {
          (*mean)[seed] = l->mean;
          (*p99)[seed] = l->p99;
          if (any_saturated(rs, k, *name)) saturated->insert(seed);
        }
      }
    if (rate_a.size() >= 2 && rate_b.size() >= 2) {
      const Spread sp_a = spread(values_of(rate_a)), sp_b = spread(values_of(rate_b));
      out += row_text(rate + " 95% CI low", sp_a.ci95_low, sp_b.ci95_low);  // over the repetitions
      out += row_text(rate + " 95% CI high", sp_a.ci95_high, sp_b.ci95_high);
    }
    const std::string how = pooled ? "(us)" : "(us, mean of the runs')";
    const auto la = latency_of(sa, k, pooled, name_a), lb = latency_of(sb, k, pooled, name_b);
    if (la && lb) {
      const std::string mark = saturation_mark(any_saturated(sa, k, name_a), any_saturated(sb, k, name_b));
      for (const auto& [member, label] : kLatencyRows)
        out += row_text(fmt::format("{} B {} {} {}", size, k.latency_label, label, how), (*la).*member,
                        (*lb).*member, mark);
    } else {
      out += fmt::format("{} B {}: not compared: {} has no completed {} of this size\n", size, k.latency_label,
                         !la && !lb ? "neither A nor B" : !la ? "A" : "B", k.samples);
    }
    verdicts += verdict(rate, rate_a, rate_b, repeat_advice(a, b));
    if (!rate_a.empty() && !rate_b.empty()) {
      const std::string suffix = pooled ? "" : " (means of the runs')";
      verdicts += latency_verdict(fmt::format("{} B {} mean{}", size, k.latency_label, suffix), mean_a, mean_b,
                                  saturated_seeds_a, saturated_seeds_b, repeat_advice(a, b));
      verdicts += latency_verdict(fmt::format("{} B {} p99{}", size, k.latency_label, suffix), p99_a, p99_b,
                                  saturated_seeds_a, saturated_seeds_b, repeat_advice(a, b));
    }
  }
  return out + verdicts;
}

}  // namespace

std::string compare_summaries(const json& a, const json& b, const std::string& name_a, const std::string& name_b,
                              const CompareOptions& options) {
  if (!a.is_object()) throw std::runtime_error(fmt::format("compare: {} is not a summary (not a JSON object)", name_a));
  if (!b.is_object()) throw std::runtime_error(fmt::format("compare: {} is not a summary (not a JSON object)", name_b));
  const std::string kind_a = kind_of(a), kind_b = kind_of(b);
  if (kind_a != kind_b)
    throw std::runtime_error(fmt::format("compare: {} is {} and {} is {}: summaries of different kinds are not "
                                         "compared",
                                         name_a, kind_text(kind_a), name_b, kind_text(kind_b)));
  // A partial result (interrupted, incomplete) read against a whole one would pass a part
  // for the whole: refused unless asked for, then said first.
  const std::string partial_a = partial_result(a), partial_b = partial_result(b);
  for (const auto& [name, partial] : {std::pair{&name_a, &partial_a}, std::pair{&name_b, &partial_b}})
    if (!partial->empty() && !options.allow_partial)
      throw std::runtime_error(fmt::format(
          "compare: {} is a partial result, {}: its figures cover only what was measured before the run stopped, "
          "so its ratios would read a part of a run as the whole; compare it knowingly with --allow-partial",
          *name, *partial));
  // Two runs over different transports (a simulation against a measurement, mlx5 against
  // UCX) measure the transports as much as the backends: refused unless asked for.
  const std::string transport_a = transport_of(a), transport_b = transport_of(b);
  const bool kinds_of_transport_differ = transport_a != transport_b;
  if (kinds_of_transport_differ && !options.allow_different_transports)
    throw std::runtime_error(fmt::format("compare: {} and {} ran over different transports (transport: {} vs {}): {}; "
                                         "give --allow-different-transports to compare them anyway",
                                         name_a, name_b, transport_a, transport_b,
                                         transport_difference_text(transport_a, transport_b)));
  // Two runs over different UCX transports (shared memory against TCP, say) measure the
  // transports as much as the backends: refused unless asked for. The lanes matched are
  // those the runs' traffic used: active messages always, RMA too when a run moved data
  // by ucp_get/ucp_put (uses_ucx_rma).
  const json ta = ucx_transports_of(a), tb = ucx_transports_of(b);
  const bool rma_used = uses_ucx_rma(a) || uses_ucx_rma(b);
  const std::vector<std::string> lane_diffs = kinds_of_transport_differ ? std::vector<std::string>{}
                                                                        : ucx_lane_differences(ta, tb, rma_used);
  const bool transports_differ = !lane_diffs.empty();
  // A summary without a provenance object does not say which transports its run used:
  // refused for that reason, not as a difference it cannot show.
  const auto am_of = [](const json& t) { return t.is_object() ? t.value("am", json()) : json(); };
  const bool lacks_a = !a.contains("provenance"), lacks_b = !b.contains("provenance");
  if (transports_differ && !options.allow_different_transports && (lacks_a || lacks_b))
    throw std::runtime_error(fmt::format(
        "compare: {} has no provenance object (every summary benchkv writes holds one), so the UCX transports "
        "its run used are unknown, and {} ran over {}: the comparison could measure the transports, not the "
        "backends; give --allow-different-transports to compare them anyway",
        lacks_a ? name_a : name_b, lacks_a ? name_b : name_a, lacks_a ? am_of(tb).dump() : am_of(ta).dump()));
  const auto joined = [](const std::vector<std::string>& v) {
    std::string t;
    for (const std::string& x : v) t += (t.empty() ? "" : "; ") + x;
    return t;
  };
  if (transports_differ && !options.allow_different_transports)
    throw std::runtime_error(fmt::format(
        "compare: {} and {} ran over different UCX transports ({}): the comparison would measure the "
        "transports, not the backends; run both with the same UCX_TLS, or give --allow-different-transports",
        name_a, name_b, joined(lane_diffs)));
  // Two measurements by builds that generate different code (a sanitizer, another
  // compiler, build type or flags) measure the builds too: refused unless asked for. A
  // simulated figure does not depend on the build (same bytes), so there it is a note.
  const bool both_measured = !simulated_summary(a) && !simulated_summary(b);
  const std::vector<std::string> build_diffs = build_differences(a, b);
  const auto listed = [](const std::vector<std::string>& v, const char* separator = "; ") {
    std::string t;
    for (const std::string& x : v) t += (t.empty() ? "" : separator) + x;
    return t;
  };
  if (both_measured && !build_diffs.empty() && !options.allow_different_builds)
    throw std::runtime_error(fmt::format(
        "compare: {} and {} are measurements by different builds ({}): the code a build generates and its "
        "instrumentation change the timing, so the ratios would measure the builds as much as the runs; rebuild "
        "one like the other, or give --allow-different-builds to compare them anyway",
        name_a, name_b, listed(build_diffs)));
  // A timing field a summary does not record is unknown, not a difference: whether the
  // builds differ there cannot be told, so two measurements are refused for that reason,
  // naming the field, unless asked for; a simulated pair gets a note.
  const std::vector<std::string> unknown_a = unrecorded_build_fields(a), unknown_b = unrecorded_build_fields(b);
  const auto unknown_text = [&](const std::vector<std::string>& unknown, const bool lacks) {
    return fmt::format("{}{}", listed(unknown, ", "), lacks ? " (it has no provenance object)" : "");
  };
  if (both_measured && (!unknown_a.empty() || !unknown_b.empty()) && !options.allow_different_builds) {
    std::string whose;
    for (const auto& [name, unknown, lacks] : {std::tuple{&name_a, &unknown_a, lacks_a}, std::tuple{&name_b, &unknown_b, lacks_b}})
      if (!unknown->empty())
        whose += fmt::format("{}{} does not record {}", whose.empty() ? "" : "; ", *name, unknown_text(*unknown, lacks));
    throw std::runtime_error(fmt::format(
        "compare: {} and {} are measurements whose builds are unknown in part: {} (a summary written before "
        "benchkv's provenance recorded that field): whether the builds differ there cannot be told, and a "
        "sanitizer, another compiler, build type or flags change the timing; give --allow-different-builds to "
        "compare them anyway",
        name_a, name_b, whose));
  }
  std::string out = fmt::format("A: {}\nB: {}\n", name_a, name_b);
  if (!build_diffs.empty() && both_measured)
    out += fmt::format("warning: A and B are measurements by different builds ({}), compared as asked\n",
                       listed(build_diffs));
  else if (!build_diffs.empty())
    out += fmt::format("note: A and B were made by different builds ({}): a simulated figure does not depend on "
                       "the build (the same configuration and seed give the same bytes)\n",
                       listed(build_diffs));
  for (const auto& [side, unknown, lacks] : {std::tuple{"A", &unknown_a, lacks_a}, std::tuple{"B", &unknown_b, lacks_b}})
    if (!unknown->empty())
      out += both_measured
                 ? fmt::format("warning: {}'s build is unknown in {}: not recorded, so whether the builds differ there "
                               "cannot be told; compared as asked\n",
                               side, unknown_text(*unknown, lacks))
                 : fmt::format("note: {}'s build is unknown in {}: not recorded; a simulated figure does not depend on "
                               "the build\n",
                               side, unknown_text(*unknown, lacks));
  if (!lacks_a && !lacks_b && provenance_text(a, "git_commit") != provenance_text(b, "git_commit"))
    out += fmt::format("warning: A and B were built from different commits ({} vs {}): the ratios include what "
                       "changed between them\n",
                       provenance_text(a, "git_commit"), provenance_text(b, "git_commit"));
  for (const auto& [side, s] : {std::pair{"A", &a}, std::pair{"B", &b}})
    if (provenance_text(*s, "git_dirty") == "true")
      out += fmt::format("note: {}'s build had uncommitted changes (git_dirty): its commit does not name the code "
                         "that made it\n",
                         side);
  const std::vector<std::string> diffs = config_differences(a, b);
  if (!diffs.empty()) {
    out += fmt::format("warning: A and B were run with different configurations ({} differing setting{}, output "
                       "paths not counted); the ratios compare those configurations, not runs of one:\n",
                       diffs.size(), diffs.size() == 1 ? "" : "s");
    for (const std::string& d : diffs) out += "warning:   " + d + "\n";
  }
  for (const auto& [side, partial] : {std::pair{"A", &partial_a}, std::pair{"B", &partial_b}})
    if (!partial->empty())
      out += fmt::format("warning: {} is a partial result, {}: its figures cover only what was measured before "
                         "the run stopped, compared as asked (--allow-partial)\n",
                         side, *partial);
  if (kinds_of_transport_differ)
    out += fmt::format("warning: A and B ran over different transports (transport: {} vs {}: {}), compared as "
                       "asked\n",
                       transport_a, transport_b, transport_difference_text(transport_a, transport_b));
  else if (transports_differ && (lacks_a || lacks_b))
    out += fmt::format("warning: {} has no provenance object: its UCX transports are unknown, {}'s are {}; compared "
                       "as asked\n",
                       lacks_a ? "A" : "B", lacks_a ? "B" : "A", lacks_a ? am_of(tb).dump() : am_of(ta).dump());
  else if (transports_differ)
    out += fmt::format("warning: A and B ran over different UCX transports ({}), compared as asked\n",
                       joined(lane_diffs));
  if (kind_a == "data") return out + compare_sized(a, b, name_a, name_b, kDataSized);
  if (kind_a == "rpc") return out + compare_sized(a, b, name_a, name_b, kRpcSized);

  const std::string rate = "Mops";
  const bool latency_rows = a["overall"]["latency"].is_object() && b["overall"]["latency"].is_object();
  const auto all_saturated = [&](const json& s, const std::string& name) {
    return saturated_in(s["overall"]["latency"].value("all", json()), "saturated", name);
  };
  const bool saturated_a = latency_rows && all_saturated(a, name_a), saturated_b = latency_rows && all_saturated(b, name_b);
  out += saturation_warning(saturated_a, saturated_b);
  out += fmt::format("{:<28} {:>14} {:>14} {:>9}\n", "figure", "A", "B", "B / A");
  const auto row = [&](const std::string& label, double x, double y, const std::string& mark = "") {
    out += row_text(label, x, y, mark);
  };
  const bool repeated = a.contains("repetitions") && b.contains("repetitions");
  row(rate + " mean", figure(a, name_a, {"overall", "mops", "mean"}), figure(b, name_b, {"overall", "mops", "mean"}));
  row(rate + " std dev", figure(a, name_a, {"overall", "mops", "std_dev"}),
      figure(b, name_b, {"overall", "mops", "std_dev"}));
  if (repeated) {
    row(rate + " 95% CI low", figure(a, name_a, {"overall", "mops", "ci95_low"}),
        figure(b, name_b, {"overall", "mops", "ci95_low"}));
    row(rate + " 95% CI high", figure(a, name_a, {"overall", "mops", "ci95_high"}),
        figure(b, name_b, {"overall", "mops", "ci95_high"}));
  }
  // ucx-am's daemon_cqe_per_loop counts request messages, the others' hardware CQEs: a
  // ratio between the two would divide different quantities.
  const bool cqe_comparable = counts_request_messages(a) == counts_request_messages(b);
  for (const char* k : {"daemon_cqe_per_loop", "daemon_calls_in_flight"})
    if (a["overall"].contains(k) && b["overall"].contains(k)) {
      if (std::string_view(k) == "daemon_cqe_per_loop" && !cqe_comparable) continue;
      const bool messages = std::string_view(k) == "daemon_cqe_per_loop" && counts_request_messages(a);
      row(std::string(k) + (messages ? " mean (ucx-am: request messages)" : " mean"),
          figure(a, name_a, {"overall", k, "mean"}), figure(b, name_b, {"overall", k, "mean"}));
    }
  if (!cqe_comparable && a["overall"].contains("daemon_cqe_per_loop") && b["overall"].contains("daemon_cqe_per_loop"))
    out += fmt::format("daemon_cqe_per_loop: not compared: {}'s counts the request messages a ucx-am daemon loop "
                       "served (it polls no CQ), {}'s the hardware CQEs a loop drained\n",
                       counts_request_messages(a) ? "A" : "B", counts_request_messages(a) ? "B" : "A");
  if (latency_rows) {
    for (const auto& [key, label] : {std::pair{"mean_ns", "latency mean (us)"}, std::pair{"p50_ns", "latency p50 (us)"},
                                     std::pair{"p99_ns", "latency p99 (us)"}, std::pair{"p999_ns", "latency p99.9 (us)"}})
      row(label, figure(a, name_a, {"overall", "latency", "all", key}) / 1000.0,
          figure(b, name_b, {"overall", "latency", "all", key}) / 1000.0, saturation_mark(saturated_a, saturated_b));
  }
  out += verdict(rate, repetition_values(a, name_a, "mops"), repetition_values(b, name_b, "mops"), repeat_advice(a, b));
  if (repeated) {
    const std::set<uint64_t> saturated_seeds_a = saturated_repetitions(a, name_a),
                             saturated_seeds_b = saturated_repetitions(b, name_b);
    for (const auto& [key, label] : {std::pair{"latency.mean_ns", "latency mean"}, std::pair{"latency.p99_ns", "latency p99"}})
      out += latency_verdict(label, repetition_values(a, name_a, key), repetition_values(b, name_b, key),
                             saturated_seeds_a, saturated_seeds_b, repeat_advice(a, b));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Progress line
// ---------------------------------------------------------------------------------------

std::string format_progress(const ProgressLine& p) {
  const char* tag = "kept";
  if (p.epoch < p.trim) {
    tag = "warm-up";
  } else if (uint64_t{p.epoch} + p.trim >= p.epochs) {
    tag = "cool-down";
  }
  uint64_t total = 0;
  for (uint64_t r : p.rank_requests) total += r;
  std::string line = fmt::format("run {}/{} epoch {}/{} [{}] {:.3f} s {:9.3f} {}", p.run + 1, p.runs, p.epoch + 1,
                                 p.epochs, tag, static_cast<double>(p.duration_ns) * 1e-9, mops(total, p.duration_ns),
                                 p.rate);
  if (p.rank_requests.size() > 1) {
    const auto [lo, hi] = std::minmax_element(p.rank_requests.begin(), p.rank_requests.end());
    const double avg = mops(total, p.duration_ns) / static_cast<double>(p.rank_requests.size());
    const double spread = avg > 0 ? (mops(*hi, p.duration_ns) - mops(*lo, p.duration_ns)) / avg * 100.0 : 0.0;
    line += fmt::format(" | per rank avg {:.3f} min {:.3f} (rank {}) max {:.3f} (rank {}) spread {:.1f}%", avg,
                        mops(*lo, p.duration_ns), lo - p.rank_requests.begin(), mops(*hi, p.duration_ns),
                        hi - p.rank_requests.begin(), spread);
  }
  return line;
}

namespace {
// The progress line of one epoch, over the ranks `by_rank` holds.
std::string epoch_progress(const RunResults& results, uint32_t runs, uint32_t epoch,
                           std::span<const uint64_t> by_rank, uint32_t first_run, const char* rate) {
  ProgressLine p;
  p.rate = rate;
  p.run = results.run() - first_run;
  p.runs = runs;
  p.epoch = epoch;
  p.epochs = results.epochs();
  p.trim = results.trim();
  p.duration_ns = results.epoch_duration_ns(epoch);
  p.rank_requests = by_rank;
  return format_progress(p);
}
}  // namespace

std::string format_progress(const RunResults& results, uint32_t runs, uint32_t epoch, uint32_t first_run) {
  const std::vector<uint64_t> by_rank = results.epoch_rank_requests(epoch);
  return epoch_progress(results, runs, epoch, by_rank, first_run, "Mops");
}

std::string format_rpc_progress(const RunResults& results, uint32_t runs, uint32_t epoch, uint32_t first_run) {
  const std::vector<uint64_t> by_rank = results.epoch_rank_requests(epoch);
  // Rank 0 only: the caller (the server ranks complete nothing); its calls in Mrps.
  return epoch_progress(results, runs, epoch, std::span<const uint64_t>(by_rank).first(by_rank.empty() ? 0 : 1),
                        first_run, "Mrps");
}

}  // namespace bkv::app
