#include "apps/benchkv/results.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <ostream>
#include <stdexcept>

#include "apps/benchkv/options.hpp"

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

// ---------------------------------------------------------------------------------------
// CSV
// ---------------------------------------------------------------------------------------

void prepare_output_files(const Options& o) {
  const std::pair<const char*, const std::string*> outs[] = {
      {"--output", &o.output}, {"--summary", &o.summary}, {"--inflight-samples", &o.inflight_samples},
      {"--trace", &o.trace}};
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

void write_csv(std::ostream& out, std::span<const RunResults> runs) {
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf), "run,rank,client_id,epoch,requests,duration_ns\n");
  for (const RunResults& run : runs) {
    for (uint32_t r = 0; r < run.num_ranks(); ++r) {
      for (uint32_t c = 0; c < run.clients_per_rank(); ++c) {
        for (uint32_t e = run.first_kept_epoch(); e < run.end_kept_epoch(); ++e) {
          const EpochRecord& rec = run.at(r, c, e);
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

// ---------------------------------------------------------------------------------------
// Summary JSON
// ---------------------------------------------------------------------------------------

json summary_json(const json& config, std::span<const RunResults> runs, std::span<const DaemonReport> daemons) {
  json j = json::object();
  j["config"] = config;

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
    runs_json.push_back(std::move(rj));
  }
  j["runs"] = std::move(runs_json);

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

int consistency_status(uint64_t issued, uint64_t completed, uint64_t errors, const char* what) {
  if (issued == completed && errors == 0) return 0;
  std::fprintf(stderr, "benchkv: %llu %s issued, %llu completed, %llu errors: the run is not consistent\n",
               static_cast<unsigned long long>(issued), what, static_cast<unsigned long long>(completed),
               static_cast<unsigned long long>(errors));
  return 1;
}

std::string dump_summary(const json& summary) { return summary.dump(2) + "\n"; }

void write_summary_file(const std::string& path, const json& summary) {
  const std::string text = dump_summary(summary);
  write_file(path, [&](std::ostream& out) { out.write(text.data(), static_cast<std::streamsize>(text.size())); });
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

std::string format_progress(const RunResults& results, uint32_t runs, uint32_t epoch) {
  const std::vector<uint64_t> by_rank = results.epoch_rank_requests(epoch);
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

}  // namespace bkv::app
