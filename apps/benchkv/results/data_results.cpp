#include "apps/benchkv/results/data_results.hpp"

#include <algorithm>
#include <set>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <stdexcept>

#include "apps/benchkv/cli/stop_signals.hpp"
#include "apps/benchkv/results/provenance.hpp"
#include "apps/benchkv/results/mode_outputs.hpp"

namespace bkv::app {

namespace {
constexpr std::pair<const char*, double> kDataPercentiles[] = {
    {"latency_p50", 0.5}, {"latency_p90", 0.9}, {"latency_p95", 0.95}, {"latency_p99", 0.99}, {"latency_p999", 0.999}};
}  // namespace

nlohmann::json data_summary(const Options& o, const DataResult& r) {
  nlohmann::json sizes = nlohmann::json::array();
  for (const DataRunStats& s : r.stats) {
    nlohmann::json j = {{"value_size", s.value_size}, {"run", s.run},
                        {"ops", s.ops},                {"bytes", s.bytes},
                        {"duration_ns", s.duration_ns}, {"ops_per_s", round6(s.ops_per_s())},
                        {"gib_per_s", round6(s.gib_per_s())}};
    if (s.latency.count()) {  // microseconds (whole nanoseconds, so exact at 1e-6)
      const auto us = [](double ns) { return round6(ns / 1000.0); };
      j["latency_mean_us"] = us(s.latency.mean_ns());
      j["latency_min_us"] = us(double(s.latency.min_ns()));
      for (const auto& [key, p] : kDataPercentiles) j[std::string(key) + "_us"] = us(double(s.latency.percentile_ns(p)));
      j["latency_max_us"] = us(double(s.latency.max_ns()));
      if (s.latency.saturated()) j["latency_saturated"] = true;
      j["latency_histogram"] = histogram_json(s.latency);
    }
    sizes.push_back(std::move(j));
  }
  return {{"backend", std::string(to_string(o.data_backend))},
          {"clients_per_rank", o.client_threads},
          {"queue_depth", o.queue_depth},
          {"read_ratio", o.read_ratio},
          {"rejected", r.rejected},
          {"runs", std::move(sizes)}};
}

std::string data_table(const Options& o, const DataResult& r) {
  std::string out =
      fmt::format("{:<10} {:>8} {:>4} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>4}\n", "backend", "size",
                  "run", "ops/s", "GiB/s", "mean", "p50", "p90", "p95", "p99", "p99.9", "max", "(us)");
  for (const DataRunStats& s : r.stats) {
    const auto us = [](double ns) { return ns / 1000.0; };
    const metrics::LatencyHistogram& h = s.latency;
    out += fmt::format(
        "{:<10} {:>8} {:>4} {:>12.0f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f}\n",
        to_string(o.data_backend), s.value_size, s.run % o.runs + 1, s.ops_per_s(), s.gib_per_s(), us(h.mean_ns()),
        us(double(h.percentile_ns(0.5))), us(double(h.percentile_ns(0.9))), us(double(h.percentile_ns(0.95))),
        us(double(h.percentile_ns(0.99))), us(double(h.percentile_ns(0.999))), us(double(h.max_ns())));
  }
  return out;
}

std::string data_csv_report(const nlohmann::json& data) {
  const nlohmann::json& all = data.at("runs");
  const bool seeded = !all.empty() && all.front().contains("seed");  // --repeat's runs
  std::string out = seeded ? "seed," : "";
  out +=
      "value_size,run,ops,bytes,duration_ns,ops_per_s,gib_per_s,latency_mean_ns,latency_p50_ns,latency_p90_ns,"
      "latency_p95_ns,latency_p99_ns,latency_p999_ns,latency_max_ns\n";
  // The summary holds the latency in microseconds rounded to 1e-6: whole nanoseconds come
  // back exactly.
  const auto ns = [](const nlohmann::json& run, const std::string& key) {
    if (!run.contains(key)) return std::string();
    return std::to_string(std::llround(run[key].get<double>() * 1000.0));
  };
  for (const nlohmann::json& r : all) {
    if (seeded) out += fmt::format("{},", r.at("seed").get<uint64_t>());
    out += fmt::format("{},{},{},{},{},{:.6f},{:.6f},", r.at("value_size").get<uint32_t>(), r.at("run").get<uint32_t>(),
                       r.at("ops").get<uint64_t>(), r.at("bytes").get<uint64_t>(), r.at("duration_ns").get<uint64_t>(),
                       r.at("ops_per_s").get<double>(), r.at("gib_per_s").get<double>());
    out += r.contains("latency_mean_us") ? fmt::format("{:.1f}", r["latency_mean_us"].get<double>() * 1000.0) : "";
    // Appended piece by piece: GCC 12 at -O3 warns -Wrestrict (a false positive) on the
    // inlined operator+ chains.
    for (const auto& [key, p] : kDataPercentiles) {
      std::string k(key);
      k += "_us";
      out += ',';
      out += ns(r, k);
    }
    out += ',';
    out += ns(r, "latency_max_us");
    out += '\n';
  }
  return out;
}

nlohmann::json data_outputs(const Options& o, const DataResult& res, const std::string& section,
                            const nlohmann::json& details) {
  // The per-epoch CSV leads with each run's value size (the run index counts over sizes).
  std::vector<uint32_t> value_size_of_run;
  for (const RunResults& run : res.runs) {
    const auto s = std::find_if(res.stats.begin(), res.stats.end(), [&](const DataRunStats& d) { return d.run == run.run(); });
    if (s == res.stats.end()) throw std::logic_error("data: run " + std::to_string(run.run()) + " has no statistics");
    value_size_of_run.push_back(s->value_size);
  }
  write_csv_file(o.output, res.runs, value_size_of_run);
  nlohmann::json summary = summary_json(o, res.runs, {});
  // Over several value sizes a spread of the rate would mix sizes: overall keeps the count
  // of runs only (each size's runs are in data.runs).
  std::set<uint32_t> sizes;
  for (const DataRunStats& st : res.stats) sizes.insert(st.value_size);
  if (sizes.size() > 1) summary["overall"].erase("mops");
  summary["data"] = data_summary(o, res);
  add_run_end(summary, o, res, section, details);
  write_summary_file(o.summary, summary);
  return summary;
}

nlohmann::json data_repeated_outputs(const Options& o, const std::vector<DataResult>& reps) {
  if (const std::optional<DataResult> one = single_repetition(o, reps))
    return data_outputs(o, *one, "simulator", one->extra);
  nlohmann::json summary = write_repeated_csv(o, repetition_parts(o, reps));
  // A repetition's "data": the means of its runs' rates and the latency of all its
  // operations (none without a completed operation).
  const auto figures_of = [](const DataResult& r) -> std::optional<nlohmann::json> {
    double ops = 0, gib = 0;
    copyrpc::RttHistogram all;
    for (const DataRunStats& st : r.stats) {
      ops += st.ops_per_s();
      gib += st.gib_per_s();
      all.merge(st.latency);
    }
    if (all.count() == 0 || r.stats.empty()) return std::nullopt;
    const auto us = [](double ns) { return round6(ns / 1000.0); };
    nlohmann::json f = {{"ops_per_s", round6(ops / double(r.stats.size()))},
                        {"gib_per_s", round6(gib / double(r.stats.size()))},
                        {"latency_mean_us", us(all.mean_ns())},
                        {"latency_max_us", us(double(all.max_ns()))}};
    for (const auto& [key, p] : kDataPercentiles) f[std::string(key) + "_us"] = us(double(all.percentile_ns(p)));
    return f;
  };
  nlohmann::json data = repeated_section(summary, o, reps, data_summary, "data", figures_of);
  uint64_t rejected = 0;
  for (size_t k = 0; k < measured_repetitions(reps); ++k) rejected += reps[k].rejected;
  data["rejected"] = rejected;
  summary["data"] = std::move(data);
  add_repeated_end(summary, o, reps);
  summary["provenance"] = provenance_json(true);
  write_summary_file(o.summary, summary);
  return summary;
}

int write_data_repeated_outputs(const Options& o, const std::vector<DataResult>& reps) {
  if (const std::optional<DataResult> one = single_repetition(o, reps))
    return write_data_outputs(o, *one, "simulator", one->extra);
  const nlohmann::json summary = data_repeated_outputs(o, reps);
  if (o.report == ReportFormat::kText) {
    const std::string report = format_report(summary, o.report);
    std::fwrite(report.data(), 1, report.size(), stdout);
  }
  if (o.report == ReportFormat::kCsv) std::fputs(data_csv_report(summary["data"]).c_str(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "wrote %s and %s\n", o.output.c_str(), o.summary.c_str());
  return repeated_exit_status(o, reps, "data operations");
}

int write_data_outputs(const Options& o, const DataResult& res, const std::string& section, const nlohmann::json& details) {
  const nlohmann::json summary = data_outputs(o, res, section, details);
  if (o.report == ReportFormat::kText) {
    // The transports UCX selected, as the KV and rpc reports' configuration header has them.
    std::fputs(ucx_transports_line(summary).c_str(), stdout);
    std::fputs(data_table(o, res).c_str(), stdout);
  }
  if (o.report == ReportFormat::kCsv) std::fputs(data_csv_report(summary["data"]).c_str(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "wrote %s and %s\n", o.output.c_str(), o.summary.c_str());
  return run_exit_status(o, res, "data operations");
}

}  // namespace bkv::app
