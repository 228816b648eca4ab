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
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <ostream>
#include <stdexcept>

#include "apps/benchkv/cli/options.hpp"

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

void put_percentiles_us(nlohmann::json& j, const std::string& name, double p50_ns, double p99_ns) {
  j[name + "_p50_us"] = round6(p50_ns / 1000.0);
  j[name + "_p99_us"] = round6(p99_ns / 1000.0);
}

// ---------------------------------------------------------------------------------------
// CSV
// ---------------------------------------------------------------------------------------

void prepare_output_files(const Options& o) {
  const std::pair<const char*, const std::string*> outs[] = {
      {"--output", &o.output}, {"--summary", &o.summary}, {"--inflight-samples", &o.inflight_samples},
      {"--trace", &o.trace}, {"--step-log", &o.step_log}};
  for (const auto& [flag, path] : outs) {
    if (path->empty()) continue;
    const std::filesystem::path p(*path);
    std::error_code ec;
    if (p.has_parent_path() && std::filesystem::exists(p.parent_path(), ec) &&
        !std::filesystem::is_directory(p.parent_path(), ec))
      throw std::runtime_error(std::string(flag) + " " + *path + ": " + p.parent_path().string() +
                               " is not a directory");
    if (p.has_parent_path() && !std::filesystem::exists(p.parent_path(), ec)) {
      std::filesystem::create_directories(p.parent_path(), ec);
      if (ec)
        throw std::runtime_error(std::string(flag) + " " + *path + ": cannot create the directory " +
                                 p.parent_path().string() + ": " + ec.message());
    }
    if (std::filesystem::is_directory(p, ec)) throw std::runtime_error(std::string(flag) + " " + *path + ": is a directory");
    const bool existed = std::filesystem::exists(p, ec);
    {
      std::ofstream probe(p, std::ios::app);
      if (!probe) throw std::runtime_error(std::string(flag) + " " + *path + ": cannot be written");
    }
    if (!existed) std::filesystem::remove(p, ec);
  }
}

void write_csv(std::ostream& out, std::span<const RunResults> runs) { write_csv(out, runs, {}); }

void write_csv(std::ostream& out, std::span<const RunResults> runs, std::span<const uint32_t> value_size_of_run) {
  const bool sized = !value_size_of_run.empty();
  if (sized && value_size_of_run.size() != runs.size())
    throw std::logic_error("write_csv: one value size per run is needed");
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf), "{}run,rank,client_id,epoch,requests,duration_ns\n", sized ? "value_size," : "");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResults& run = runs[i];
    for (uint32_t r = 0; r < run.num_ranks(); ++r) {
      for (uint32_t c = 0; c < run.clients_per_rank(); ++c) {
        for (uint32_t e = run.first_kept_epoch(); e < run.end_kept_epoch(); ++e) {
          const EpochRecord& rec = run.at(r, c, e);
          if (sized) fmt::format_to(std::back_inserter(buf), "{},", value_size_of_run[i]);
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

json request_latency_json(const metrics::RequestLatency& l) {
  json j = json::object();
  for (size_t c = 0; c < metrics::kLatencyClasses; ++c) j[metrics::kLatencyClassNames[c]] = latency_json(l.by_class[c]);
  j["all"] = latency_json(l.all());
  return j;
}

// The daemons of one run: CQEs per loop and calls in flight over all their loops.
struct RunDaemonFigures {
  uint64_t loops = 0, cqes = 0;
  double inflight_sum = 0;
  bool any = false;
};

}  // namespace

json latency_json(const metrics::LatencyHistogram& h) {
  return json{{"count", h.count()},
              {"mean_ns", round1(h.mean_ns())},
              {"p50_ns", h.percentile_ns(0.50)},
              {"p90_ns", h.percentile_ns(0.90)},
              {"p99_ns", h.percentile_ns(0.99)},
              {"p999_ns", h.percentile_ns(0.999)},
              {"max_ns", h.max_ns()}};
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
  metrics::RequestLatency all_runs;
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
      rj["latency"] = request_latency_json(run.latency());
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
  overall["latency"] = every_run_has_latency ? request_latency_json(all_runs) : json(nullptr);
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
  const bool rpc = c.value("backend", json()).is_string() && c["backend"] == "rpc";
  std::string line = fmt::format("benchkv: backend {} over {}, {} ranks", c["backend"].is_string() ? c["backend"].get<std::string>() : "-",
                                 c["transport"].get<std::string>(), c["np"].get<uint64_t>());
  if (rpc) {
    line += fmt::format(", {} endpoints per server rank, {} calls in flight per endpoint, {} B messages",
                        c["endpoints"].get<uint64_t>(), c["queue_depth"].get<uint64_t>(),
                        c["message_size"].get<uint64_t>());
  } else {
    line += fmt::format(" x ({} daemon threads + {} client threads), queue depth {}; workload {}",
                        c["server_threads"].get<uint64_t>(), c["client_threads"].get<uint64_t>(),
                        c["queue_depth"].get<uint64_t>(), c["distribution"].get<std::string>());
    if (c["distribution"] == "zipfian") line += fmt::format(" (s = {})", c["zipf_s"].get<double>());
    line += fmt::format(", {} keys per rank, read ratio {}", c["key_range"].get<uint64_t>(), c["read_ratio"].get<double>());
  }
  line += fmt::format("\nbenchkv: {} run(s) of {} s, epochs of {} ms, {} trimmed at each end, seed {}\n",
                      c["runs"].get<uint64_t>(), c["duration"].get<double>(), c["interval_ms"].get<double>(),
                      c["trim"].get<uint64_t>(), c["seed"].get<uint64_t>());
  return line;
}

constexpr const char* kLatencyColumns[] = {"count", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"};

void latency_table(std::string& out, const std::string& tag, const json& latency) {
  out += fmt::format("{} latency (ns) {:>10} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}\n", tag, "", "count",
                     "mean", "p50", "p90", "p99", "p99.9", "max");
  std::vector<std::string> names(metrics::kLatencyClassNames.begin(), metrics::kLatencyClassNames.end());
  names.push_back("all");
  for (const std::string& n : names) {
    const json& h = latency[n];
    out += fmt::format("{} latency (ns) {:>10} {:>10} {:>12.1f} {:>10} {:>10} {:>10} {:>10} {:>10}\n", tag, n,
                       h["count"].get<uint64_t>(), h["mean_ns"].get<double>(), h["p50_ns"].get<uint64_t>(),
                       h["p90_ns"].get<uint64_t>(), h["p99_ns"].get<uint64_t>(), h["p999_ns"].get<uint64_t>(),
                       h["max_ns"].get<uint64_t>());
  }
}

// The rpc section's entry for run `run` when it has the caller's round-trip times (rpc
// runs record no per-class request latency), else nullptr.
const json* rpc_run_rtts(const json& summary, uint64_t run) {
  if (!summary.contains("rpc") || !summary["rpc"].contains("runs")) return nullptr;
  for (const json& r : summary["rpc"]["runs"])
    if (r.value("run", uint64_t{0}) == run && r.contains("rtt_mean_us")) return &r;
  return nullptr;
}

// The CSV latency columns (count, mean, p50, p90, p99, p99.9, max; nanoseconds) of an rpc
// run from its round-trip times: the summary has the calls, mean, p50 and p99 (in
// microseconds, rounded to 1e-6, so whole nanoseconds come back exactly); p90, p99.9 and
// max are not recorded and stay empty.
std::string rpc_latency_columns(const json& rtt) {
  const auto ns = [&](const char* key) { return std::llround(rtt[key].get<double>() * 1000.0); };
  return fmt::format(",{},{:.1f},{},,{},,", rtt["calls"].get<uint64_t>(), rtt["rtt_mean_us"].get<double>() * 1000.0,
                     ns("rtt_p50_us"), ns("rtt_p99_us"));
}

}  // namespace

std::string format_report(const json& summary, ReportFormat format) {
  std::string out;
  const json& runs = summary["runs"];
  if (format == ReportFormat::kNone) return out;
  if (format == ReportFormat::kCsv) {
    out += "run,mops,requests,duration_ns,issued,completed,latency_count,latency_mean_ns,latency_p50_ns,"
           "latency_p90_ns,latency_p99_ns,latency_p999_ns,latency_max_ns,daemon_cqe_per_loop,daemon_calls_in_flight\n";
    for (const json& r : runs) {
      out += fmt::format("{},{:.6f},{},{},{},{}", r["run"].get<uint64_t>(), r["total_mops"].get<double>(),
                         r["requests"].get<uint64_t>(), r["duration_ns"].get<uint64_t>(), r["issued"].get<uint64_t>(),
                         r["completed"].get<uint64_t>());
      if (r["latency"].is_object()) {
        const json& a = r["latency"]["all"];
        out += fmt::format(",{},{:.1f}", a["count"].get<uint64_t>(), a["mean_ns"].get<double>());
        for (size_t k = 2; k < std::size(kLatencyColumns); ++k) out += fmt::format(",{}", a[kLatencyColumns[k]].get<uint64_t>());
      } else if (const json* rtt = rpc_run_rtts(summary, r["run"].get<uint64_t>())) {
        out += rpc_latency_columns(*rtt);
      } else {
        out += ",,,,,,,";
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
  const size_t n = runs.size();
  for (const json& r : runs) {
    const std::string tag = fmt::format("run {}/{}", r["run"].get<uint64_t>() + 1, n);
    out += fmt::format("{}: {:.6f} Mops, {} requests in {:.6f} s ({} issued, {} completed over the whole run)", tag,
                       r["total_mops"].get<double>(), r["requests"].get<uint64_t>(),
                       static_cast<double>(r["duration_ns"].get<uint64_t>()) * 1e-9, r["issued"].get<uint64_t>(),
                       r["completed"].get<uint64_t>());
    if (r.contains("daemon_cqe_per_loop"))
      out += fmt::format("; daemons: {:.6f} CQEs per loop, {:.6f} calls in flight", r["daemon_cqe_per_loop"].get<double>(),
                         r["daemon_calls_in_flight"].get<double>());
    out += "\n";
    if (r["latency"].is_object()) latency_table(out, tag, r["latency"]);
  }
  const json& o = summary["overall"];
  const auto spread = [](const json& s) {
    return fmt::format("mean {:.6f} std dev {:.6f} min {:.6f} max {:.6f}", s["mean"].get<double>(),
                       s["std_dev"].get<double>(), s["min"].get<double>(), s["max"].get<double>());
  };
  out += fmt::format("[OVERALL] {} runs: Mops {}\n", o["runs"].get<uint64_t>(), spread(o["mops"]));
  if (o.contains("daemon_cqe_per_loop")) {
    out += fmt::format("[OVERALL] daemon CQEs per loop {}\n", spread(o["daemon_cqe_per_loop"]));
    out += fmt::format("[OVERALL] daemon calls in flight {}\n", spread(o["daemon_calls_in_flight"]));
  }
  if (o["latency"].is_object()) latency_table(out, "[OVERALL]", o["latency"]);
  // Present when the run had faults or a request failed (kv::ErrorCode::kEndpointStopped).
  if (summary.contains("totals") && summary["totals"].contains("failed"))
    out += fmt::format("[OVERALL] {} requests reported failed (their copyrpc endpoint stopped)\n",
                       summary["totals"]["failed"].get<uint64_t>());
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

std::string row_text(const std::string& label, double x, double y) {
  return fmt::format("{:<28} {:>14.6f} {:>14.6f} {:>9}\n", label, x, y, x != 0 ? fmt::format("{:.4f}", y / x) : "n/a");
}

struct Spread {
  size_t n = 0;
  double mean = 0, std_dev = 0;  // sample std dev (n - 1); 0 for one value
};

Spread spread_of(const std::vector<double>& v) {
  Spread s;
  s.n = v.size();
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.std_dev = std::sqrt(ss / double(v.size() - 1));
  }
  return s;
}

std::string spread_verdict(const Spread& a, const Spread& b, const char* unit) {
  if (a.n < 2 || b.n < 2) return "n/a (a single run has no spread: use -r 3 or more)";
  const double diff = std::abs(b.mean - a.mean), spread = a.std_dev + b.std_dev;
  return fmt::format("{} (|B - A| = {:.6f} {}, std dev A + B = {:.6f})", diff > spread ? "yes" : "no", diff, unit, spread);
}

// Data summaries: per value size (the figures of different sizes are not one population).
std::string compare_data(const json& a, const json& b, const std::string& name_a, const std::string& name_b) {
  const auto runs = [](const json& s, const std::string& name) -> const json& {
    if (!s["data"].contains("runs") || !s["data"]["runs"].is_array())
      throw std::runtime_error(fmt::format("compare: {} has no \"data/runs\"", name));
    return s["data"]["runs"];
  };
  const json &ra = runs(a, name_a), &rb = runs(b, name_b);
  std::vector<uint64_t> sizes_a, sizes_b;
  const auto collect = [](const json& rs, std::vector<uint64_t>& sizes) {
    for (const json& r : rs) {
      const uint64_t v = r.at("value_size").get<uint64_t>();
      if (std::find(sizes.begin(), sizes.end(), v) == sizes.end()) sizes.push_back(v);
    }
  };
  collect(ra, sizes_a);
  collect(rb, sizes_b);
  std::vector<uint64_t> common, only_a, only_b;
  for (uint64_t v : sizes_a)
    (std::find(sizes_b.begin(), sizes_b.end(), v) != sizes_b.end() ? common : only_a).push_back(v);
  for (uint64_t v : sizes_b)
    if (std::find(sizes_a.begin(), sizes_a.end(), v) == sizes_a.end()) only_b.push_back(v);
  const auto list = [](const std::vector<uint64_t>& v) {
    std::string t;
    for (uint64_t x : v) t += (t.empty() ? "" : ", ") + std::to_string(x);
    return t;
  };
  if (common.empty())
    throw std::runtime_error(fmt::format("compare: data summaries are compared per value size, and {} ({}) and {} "
                                         "({}) have no value size in common",
                                         name_a, list(sizes_a), name_b, list(sizes_b)));
  std::string out = "data summaries: compared per value size (the mean over the runs of each size)\n";
  if (!only_a.empty()) out += fmt::format("value sizes only in A (not compared): {}\n", list(only_a));
  if (!only_b.empty()) out += fmt::format("value sizes only in B (not compared): {}\n", list(only_b));
  out += fmt::format("{:<28} {:>14} {:>14} {:>9}\n", "figure", "A", "B", "B / A");
  std::string verdicts;
  for (uint64_t size : common) {
    const auto values = [&](const json& rs, const char* key) {
      std::vector<double> v;
      for (const json& r : rs)
        if (r.at("value_size").get<uint64_t>() == size && r.contains(key)) v.push_back(r[key].get<double>());
      return v;
    };
    const Spread oa = spread_of(values(ra, "ops_per_s")), ob = spread_of(values(rb, "ops_per_s"));
    out += row_text(fmt::format("{} B ops/s", size), oa.mean, ob.mean);
    out += row_text(fmt::format("{} B GiB/s", size), spread_of(values(ra, "gib_per_s")).mean,
                    spread_of(values(rb, "gib_per_s")).mean);
    for (const char* k : {"latency_p50_us", "latency_p99_us"}) {
      const auto va = values(ra, k), vb = values(rb, k);
      if (!va.empty() && !vb.empty())
        out += row_text(fmt::format("{} B {}", size, k), spread_of(va).mean, spread_of(vb).mean);
    }
    verdicts += fmt::format("{} B: ops/s difference exceeds the run-to-run spread: {}\n", size,
                            spread_verdict(oa, ob, "ops/s"));
  }
  return out + verdicts;
}

}  // namespace

std::string compare_summaries(const json& a, const json& b, const std::string& name_a, const std::string& name_b) {
  if (!a.is_object()) throw std::runtime_error(fmt::format("compare: {} is not a summary (not a JSON object)", name_a));
  if (!b.is_object()) throw std::runtime_error(fmt::format("compare: {} is not a summary (not a JSON object)", name_b));
  const std::string kind_a = kind_of(a), kind_b = kind_of(b);
  if (kind_a != kind_b)
    throw std::runtime_error(fmt::format("compare: {} is {} and {} is {}: summaries of different kinds are not "
                                         "compared",
                                         name_a, kind_text(kind_a), name_b, kind_text(kind_b)));
  std::string out = fmt::format("A: {}\nB: {}\n", name_a, name_b);
  const std::vector<std::string> diffs = config_differences(a, b);
  if (!diffs.empty()) {
    out += fmt::format("warning: A and B were run with different configurations ({} differing setting{}, output "
                       "paths not counted); the ratios compare those configurations, not runs of one:\n",
                       diffs.size(), diffs.size() == 1 ? "" : "s");
    for (const std::string& d : diffs) out += "warning:   " + d + "\n";
  }
  if (kind_a == "data") return out + compare_data(a, b, name_a, name_b);

  out += fmt::format("{:<28} {:>14} {:>14} {:>9}\n", "figure", "A", "B", "B / A");
  const auto row = [&](const std::string& label, double x, double y) { out += row_text(label, x, y); };
  const double ma = figure(a, name_a, {"overall", "mops", "mean"}), mb = figure(b, name_b, {"overall", "mops", "mean"});
  const double sa = figure(a, name_a, {"overall", "mops", "std_dev"}), sb = figure(b, name_b, {"overall", "mops", "std_dev"});
  const double ra = figure(a, name_a, {"overall", "runs"}), rb = figure(b, name_b, {"overall", "runs"});
  row("Mops mean", ma, mb);
  row("Mops std dev", sa, sb);
  for (const char* k : {"daemon_cqe_per_loop", "daemon_calls_in_flight"})
    if (a["overall"].contains(k) && b["overall"].contains(k))
      row(std::string(k) + " mean", figure(a, name_a, {"overall", k, "mean"}), figure(b, name_b, {"overall", k, "mean"}));
  if (a["overall"]["latency"].is_object() && b["overall"]["latency"].is_object())
    for (const char* k : {"mean_ns", "p50_ns", "p99_ns", "p999_ns"})
      row(std::string("latency ") + k, figure(a, name_a, {"overall", "latency", "all", k}),
          figure(b, name_b, {"overall", "latency", "all", k}));
  Spread spread_a, spread_b;
  spread_a.n = static_cast<size_t>(ra), spread_a.mean = ma, spread_a.std_dev = sa;
  spread_b.n = static_cast<size_t>(rb), spread_b.mean = mb, spread_b.std_dev = sb;
  out += "Mops difference exceeds the run-to-run spread: " + spread_verdict(spread_a, spread_b, "Mops") + "\n";
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
  std::string line = fmt::format("run {}/{} epoch {}/{} [{}] {:.3f} s {:9.3f} Mops", p.run + 1, p.runs,
                                 p.epoch + 1, p.epochs, tag, static_cast<double>(p.duration_ns) * 1e-9,
                                 mops(total, p.duration_ns));
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
                           std::span<const uint64_t> by_rank) {
  ProgressLine p;
  p.run = results.run();
  p.runs = runs;
  p.epoch = epoch;
  p.epochs = results.epochs();
  p.trim = results.trim();
  p.duration_ns = results.epoch_duration_ns(epoch);
  p.rank_requests = by_rank;
  return format_progress(p);
}
}  // namespace

std::string format_progress(const RunResults& results, uint32_t runs, uint32_t epoch) {
  const std::vector<uint64_t> by_rank = results.epoch_rank_requests(epoch);
  return epoch_progress(results, runs, epoch, by_rank);
}

std::string format_rpc_progress(const RunResults& results, uint32_t runs, uint32_t epoch) {
  const std::vector<uint64_t> by_rank = results.epoch_rank_requests(epoch);
  // Rank 0 only: the caller (the server ranks complete nothing).
  return epoch_progress(results, runs, epoch, std::span<const uint64_t>(by_rank).first(by_rank.empty() ? 0 : 1));
}

}  // namespace bkv::app
