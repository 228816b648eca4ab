#include "apps/benchkv/results/rpc_results.hpp"

#include <cstdio>

#include "apps/benchkv/results/provenance.hpp"

namespace bkv::app {

copyrpc::RttHistogram histogram_delta(const copyrpc::RttHistogram& a, const copyrpc::RttHistogram& b) {
  copyrpc::RttHistogram d = b;
  for (size_t i = 0; i < a.counts.size() && i < d.counts.size(); ++i) d.counts[i] -= a.counts[i];
  d.n = b.n - a.n;
  d.sum_ns = b.sum_ns - a.sum_ns;
  return d;
}

nlohmann::json rpc_summary(const Options& o, const RpcResult& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (const RpcRunStats& s : r.stats) {
    nlohmann::json j = {{"run", s.run}, {"calls", s.calls}, {"duration_ns", s.duration_ns}, {"mrps", round6(s.mrps())}};
    if (s.rtt.n) {
      j["rtt_mean_us"] = round6(s.rtt.mean_ns() / 1000.0);
      put_percentiles_us(j, "rtt", s.rtt.percentile_ns(0.5), s.rtt.percentile_ns(0.99));
    }
    runs.push_back(std::move(j));
  }
  return {{"endpoints", o.endpoints},
          {"queue_depth", o.queue_depth},
          {"message_size", o.message_size},
          {"callers", 1},
          {"servers", o.np == 1 ? 1u : o.np - 1},
          {"loopback", o.np == 1},
          {"runs", std::move(runs)}};
}

int write_rpc_outputs(const Options& o, const RpcResult& res, const std::string& section, const nlohmann::json& details) {
  write_csv_file(o.output, res.runs);
  nlohmann::json summary = summary_json(o, res.runs, {});
  summary["rpc"] = rpc_summary(o, res);
  summary[section] = details;
  summary["totals"] = {{"issued", res.issued}, {"completed", res.completed}, {"errors", res.errors}};
  if (!summary.contains("provenance")) summary["provenance"] = provenance_json(o.transport == TransportKind::kSim);
  if (res.setup_provenance.is_object()) summary["provenance"].update(res.setup_provenance);
  write_summary_file(o.summary, summary);
  const std::string report = format_report(summary, o.report);
  std::fwrite(report.data(), 1, report.size(), stdout);
  if (o.report == ReportFormat::kText) std::fputs(rpc_table(o, res).c_str(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "wrote %s and %s\n", o.output.c_str(), o.summary.c_str());
  return consistency_status(res.issued, res.completed, res.errors, "calls");
}

std::string rpc_table(const Options& o, const RpcResult& r) {
  std::string out;
  append_printf(out, "%9s %5s %6s %4s %10s %13s %13s\n", "endpoints", "QD", "size", "run", "Mrps", "RTT p50 (us)",
                "RTT p99 (us)");
  for (const RpcRunStats& s : r.stats)
    append_printf(out, "%9u %5u %6u %4u %10.3f %13.2f %13.2f\n", o.endpoints, o.queue_depth, o.message_size, s.run + 1,
                  s.mrps(), s.rtt.percentile_ns(0.5) / 1000.0, s.rtt.percentile_ns(0.99) / 1000.0);
  return out;
}

}  // namespace bkv::app
