#include "apps/benchkv/results/rpc_results.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <fmt/format.h>

#include "apps/benchkv/cli/stop_signals.hpp"
#include "apps/benchkv/results/provenance.hpp"
#include "apps/benchkv/results/mode_outputs.hpp"

namespace bkv::app {

namespace {

// The round-trip figures of one run, in microseconds (whole nanoseconds, so exact at 1e-6).
void add_rtt_figures(nlohmann::json& j, const copyrpc::RttHistogram& h) {
  const auto us = [](double ns) { return round6(ns / 1000.0); };
  j["rtt_mean_us"] = us(h.mean_ns());
  j["rtt_min_us"] = us(double(h.min_ns()));
  j["rtt_p50_us"] = us(double(h.percentile_ns(0.5)));
  j["rtt_p90_us"] = us(double(h.percentile_ns(0.9)));
  j["rtt_p95_us"] = us(double(h.percentile_ns(0.95)));
  j["rtt_p99_us"] = us(double(h.percentile_ns(0.99)));
  j["rtt_p999_us"] = us(double(h.percentile_ns(0.999)));
  j["rtt_max_us"] = us(double(h.max_ns()));
  if (h.saturated()) j["rtt_saturated"] = true;
  j["rtt_histogram"] = histogram_json(h);
}

// The round trips of every call of a repetition's runs, in microseconds.
nlohmann::json rtt_figures(const copyrpc::RttHistogram& h) {
  const auto us = [](double ns) { return round6(ns / 1000.0); };
  return {{"mean_us", us(h.mean_ns())},
          {"p50_us", us(double(h.percentile_ns(0.5)))},
          {"p90_us", us(double(h.percentile_ns(0.9)))},
          {"p95_us", us(double(h.percentile_ns(0.95)))},
          {"p99_us", us(double(h.percentile_ns(0.99)))},
          {"p999_us", us(double(h.percentile_ns(0.999)))},
          {"max_us", us(double(h.max_ns()))}};
}

}  // namespace

nlohmann::json rpc_summary(const Options& o, const RpcResult& r) {
  const bool several_sizes = rpc_message_sizes(o).size() > 1;
  nlohmann::json runs = nlohmann::json::array();
  for (const RpcRunStats& s : r.stats) {
    nlohmann::json j = {{"run", s.run}, {"calls", s.calls}, {"duration_ns", s.duration_ns}, {"mrps", round6(s.mrps())}};
    if (several_sizes) j["message_size"] = s.message_size;  // one size: the section's
    if (s.rtt.count()) add_rtt_figures(j, s.rtt);
    runs.push_back(std::move(j));
  }
  return {{"endpoints", o.endpoints},
          {"queue_depth", o.queue_depth},
          {"message_size", to_json(o)["message_size"]},
          {"callers", 1},
          {"servers", o.np == 1 ? 1u : o.np - 1},
          {"loopback", o.np == 1},
          {"runs", std::move(runs)}};
}

nlohmann::json rpc_outputs(const Options& o, const RpcResult& res, const std::string& section,
                           const nlohmann::json& details) {
  if (rpc_message_sizes(o).size() > 1) {  // the CSV leads with each run's message size
    std::vector<uint64_t> size_of_run;
    for (const RunResults& run : res.runs) {
      const auto st = std::find_if(res.stats.begin(), res.stats.end(), [&](const RpcRunStats& x) { return x.run == run.run(); });
      if (st == res.stats.end()) throw std::logic_error("rpc: run " + std::to_string(run.run()) + " has no statistics");
      size_of_run.push_back(st->message_size);
    }
    write_csv_file(o.output, res.runs, "message_size", size_of_run);
  } else {
    write_csv_file(o.output, res.runs);
  }
  nlohmann::json summary = summary_json(o, res.runs, {});
  // Over several message sizes a spread of Mrps would mix sizes: overall keeps the count
  // of runs only (each size's runs are in rpc.runs).
  std::set<uint32_t> sizes;
  for (const RpcRunStats& st : res.stats) sizes.insert(st.message_size);
  if (sizes.size() > 1) summary["overall"].erase("mops");
  summary["rpc"] = rpc_summary(o, res);
  add_run_end(summary, o, res, section, details);
  write_summary_file(o.summary, summary);
  return summary;
}

int write_rpc_outputs(const Options& o, const RpcResult& res, const std::string& section, const nlohmann::json& details) {
  const nlohmann::json summary = rpc_outputs(o, res, section, details);
  if (!res.runs.empty()) {  // (empty only when a signal stopped the run before any kept epoch finished)
    const std::string report = format_report(summary, o.report);
    std::fwrite(report.data(), 1, report.size(), stdout);
    if (o.report == ReportFormat::kText) std::fputs(rpc_table(o, res).c_str(), stdout);
  }
  std::fflush(stdout);
  std::fprintf(stderr, "wrote %s and %s\n", o.output.c_str(), o.summary.c_str());
  return run_exit_status(o, res, "calls");
}

nlohmann::json rpc_repeated_outputs(const Options& o, const std::vector<RpcResult>& reps) {
  if (const std::optional<RpcResult> one = single_repetition(o, reps))
    return rpc_outputs(o, *one, "simulator", one->extra);
  nlohmann::json summary = write_repeated_csv(o, repetition_parts(o, reps));
  // A repetition's "rtt": the round trips of every call of its runs (none without a call).
  const auto rtt_of = [](const RpcResult& r) -> std::optional<nlohmann::json> {
    copyrpc::RttHistogram all;
    for (const RpcRunStats& st : r.stats) all.merge(st.rtt);
    if (all.count() == 0) return std::nullopt;
    return rtt_figures(all);
  };
  nlohmann::json rpc = repeated_section(summary, o, reps, rpc_summary, "rtt", rtt_of);
  summary["rpc"] = std::move(rpc);
  add_repeated_end(summary, o, reps);
  summary["provenance"] = provenance_json(true);
  if (reps.front().setup_provenance.is_object()) summary["provenance"].update(reps.front().setup_provenance);
  write_summary_file(o.summary, summary);
  return summary;
}

int write_rpc_repeated_outputs(const Options& o, const std::vector<RpcResult>& reps) {
  if (const std::optional<RpcResult> one = single_repetition(o, reps))
    return write_rpc_outputs(o, *one, "simulator", one->extra);
  const nlohmann::json summary = rpc_repeated_outputs(o, reps);
  const std::string report = format_report(summary, o.report);
  std::fwrite(report.data(), 1, report.size(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "wrote %s and %s\n", o.output.c_str(), o.summary.c_str());
  return repeated_exit_status(o, reps, "calls");
}

std::string rpc_table(const Options& o, const RpcResult& r) {
  std::string out = fmt::format("{:>9} {:>5} {:>6} {:>4} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
                                "endpoints", "QD", "size", "run", "Mrps", "MB/s", "mean", "p50", "p90", "p95", "p99",
                                "p99.9", "max", "(us)");
  for (const RpcRunStats& s : r.stats) {
    const auto us = [](double ns) { return ns / 1000.0; };
    out += fmt::format("{:>9} {:>5} {:>6} {:>4} {:>10.3f} {:>10.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} "
                       "{:>9.3f}\n",
                       o.endpoints, o.queue_depth, s.message_size, s.run % o.runs + 1, s.mrps(), s.mrps() * s.message_size,
                       us(s.rtt.mean_ns()), us(double(s.rtt.percentile_ns(0.5))), us(double(s.rtt.percentile_ns(0.9))),
                       us(double(s.rtt.percentile_ns(0.95))), us(double(s.rtt.percentile_ns(0.99))),
                       us(double(s.rtt.percentile_ns(0.999))), us(double(s.rtt.max_ns())));
  }
  return out;
}

}  // namespace bkv::app
