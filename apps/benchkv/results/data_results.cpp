#include "apps/benchkv/results/data_results.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "apps/benchkv/results/provenance.hpp"

namespace bkv::app {

nlohmann::json data_summary(const Options& o, const DataResult& r) {
  nlohmann::json sizes = nlohmann::json::array();
  for (const DataRunStats& s : r.stats) {
    nlohmann::json j = {{"value_size", s.value_size}, {"run", s.run},
                        {"ops", s.ops},                {"bytes", s.bytes},
                        {"duration_ns", s.duration_ns}, {"ops_per_s", round6(s.ops_per_s())},
                        {"gib_per_s", round6(s.gib_per_s())}};
    if (s.latency.n) put_percentiles_us(j, "latency", s.latency.percentile_ns(0.5), s.latency.percentile_ns(0.99));
    sizes.push_back(std::move(j));
  }
  return {{"backend", o.data_backend},
          {"clients_per_rank", o.client_threads},
          {"queue_depth", o.queue_depth},
          {"read_ratio", o.read_ratio},
          {"rejected", r.rejected},
          {"runs", std::move(sizes)}};
}

std::string data_table(const Options& o, const DataResult& r) {
  std::string out;
  append_printf(out, "%-10s %8s %4s %12s %9s %10s %10s\n", "backend", "size", "run", "ops/s", "GiB/s", "p50 (us)",
                "p99 (us)");
  for (const DataRunStats& s : r.stats)
    append_printf(out, "%-10s %8u %4u %12.0f %9.3f %10.2f %10.2f\n", o.data_backend.c_str(), s.value_size, s.run + 1,
                  s.ops_per_s(), s.gib_per_s(), s.latency.percentile_ns(0.5) / 1000.0,
                  s.latency.percentile_ns(0.99) / 1000.0);
  return out;
}

std::string data_csv_report(const nlohmann::json& data) {
  std::string out = "value_size,run,ops,bytes,duration_ns,ops_per_s,gib_per_s,latency_p50_ns,latency_p99_ns\n";
  // The summary holds the percentiles in microseconds rounded to 1e-6: whole nanoseconds
  // (histogram bucket bounds) come back exactly.
  const auto ns = [](const nlohmann::json& run, const char* key) {
    if (!run.contains(key)) return std::string();
    return std::to_string(std::llround(run[key].get<double>() * 1000.0));
  };
  for (const nlohmann::json& r : data.at("runs")) {
    char line[200];
    std::snprintf(line, sizeof line, "%u,%u,%llu,%llu,%llu,%.6f,%.6f,", r.at("value_size").get<uint32_t>(),
                  r.at("run").get<uint32_t>(), static_cast<unsigned long long>(r.at("ops").get<uint64_t>()),
                  static_cast<unsigned long long>(r.at("bytes").get<uint64_t>()),
                  static_cast<unsigned long long>(r.at("duration_ns").get<uint64_t>()), r.at("ops_per_s").get<double>(),
                  r.at("gib_per_s").get<double>());
    out += line + ns(r, "latency_p50_us") + "," + ns(r, "latency_p99_us") + "\n";
  }
  return out;
}

int write_data_outputs(const Options& o, const DataResult& res, const std::string& section, const nlohmann::json& details) {
  // The per-epoch CSV leads with each run's value size (the run index counts over sizes).
  std::vector<uint32_t> value_size_of_run;
  for (const RunResults& run : res.runs) {
    const auto s = std::find_if(res.stats.begin(), res.stats.end(), [&](const DataRunStats& d) { return d.run == run.run(); });
    if (s == res.stats.end()) throw std::logic_error("data: run " + std::to_string(run.run()) + " has no statistics");
    value_size_of_run.push_back(s->value_size);
  }
  write_csv_file(o.output, res.runs, value_size_of_run);
  nlohmann::json summary = summary_json(o, res.runs, {});
  summary["data"] = data_summary(o, res);
  summary[section] = details;
  summary["totals"] = {{"issued", res.issued}, {"completed", res.completed}, {"errors", res.errors}};
  // Real data runs step every thread of a rank on its main thread: no CPU map.
  summary["provenance"] = provenance_json(o.transport == TransportKind::kSim);
  write_summary_file(o.summary, summary);
  if (o.report == ReportFormat::kText) std::fputs(data_table(o, res).c_str(), stdout);
  if (o.report == ReportFormat::kCsv) std::fputs(data_csv_report(summary["data"]).c_str(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "wrote %s and %s\n", o.output.c_str(), o.summary.c_str());
  return consistency_status(res.issued, res.completed, res.errors, "data operations");
}

}  // namespace bkv::app
