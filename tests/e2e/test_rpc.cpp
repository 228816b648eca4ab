// `benchkv rpc --transport sim`: copyrpc alone. Checks the run's consistency, the queueing
// relation between rate, outstanding calls and round trip, determinism, and that options
// which do not apply are refused.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/benchkv_run.hpp"

using namespace bkv::e2e;

namespace {

std::vector<std::string> rpc_args(std::vector<std::string> extra, const std::string& np = "2") {
  std::vector<std::string> a = {"rpc", "--transport", "sim", "--np", np, "-d", "0.004", "--interval-ms", "1",
                                "--trim", "1", "-r", "2", "--no-progress", "-o", "out.csv"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The rpc table's header (the report's last lines: one row per run, latencies in us).
constexpr const char* kRpcTableHeader =
    "endpoints    QD   size  run       Mrps       MB/s      mean       p50       p90       p95       p99     p99.9       max"
    "      (us)";

json rpc_run(const TempDir& dir, std::vector<std::string> extra, Outcome* out = nullptr, const std::string& np = "2") {
  const Outcome o = run_ok(rpc_args(std::move(extra), np), dir.path());
  if (out) *out = o;
  return read_json(dir / "out.summary.json");
}

}  // namespace

TEST_CASE("rpc: every call completes and the CSV, summary and table agree", "[e2e][sim][rpc]") {
  TempDir dir;
  Outcome o;
  const json s = rpc_run(dir, {"--endpoints", "4", "--queue-depth", "8"}, &o);
  CHECK(s["totals"]["issued"] == s["totals"]["completed"]);
  CHECK(s["totals"]["errors"] == 0);
  CHECK(s["totals"]["completed"].get<uint64_t>() > 0);
  const json& rpc = s["rpc"];
  CHECK(rpc["endpoints"] == 4);
  CHECK(rpc["queue_depth"] == 8);
  REQUIRE(rpc["runs"].size() == 2);
  const std::vector<CsvRow> rows = read_csv(dir / "out.csv");
  for (size_t r = 0; r < 2; ++r) {
    uint64_t caller = 0, servers = 0;
    for (const CsvRow& row : rows)
      if (row.run == r) (row.rank == 0 ? caller : servers) += row.requests;
    INFO("run " << r);
    CHECK(servers == 0);  // only rank 0 calls
    CHECK(caller == rpc["runs"][r]["calls"].get<uint64_t>());
    CHECK(caller == s["runs"][r]["requests"].get<uint64_t>());
    CHECK(rpc["runs"][r]["mrps"].get<double>() ==
          Approx(double(caller) * 1e3 / rpc["runs"][r]["duration_ns"].get<double>()).epsilon(1e-5));
  }
  // The report on stdout ends with the rpc table: a header and one line per run.
  const size_t table = o.out.find(kRpcTableHeader);
  REQUIRE(table != std::string::npos);
  CHECK(std::count(o.out.begin() + static_cast<std::ptrdiff_t>(table), o.out.end(), '\n') == 3);
  CHECK_THAT(o.out, Catch::Contains("[OVERALL] 2 runs: Mrps mean"));
}

TEST_CASE("rpc: rate, calls outstanding and round trip obey Little's law", "[e2e][sim][rpc]") {
  // Each of the endpoints x QD call slots cycles through a round trip (call() to the
  // response being handled) and the delay until the loop reissues it (the rest of the
  // drain, the encodes before it). So the rate is at most outstanding / mean round trip,
  // and, the reissue delay being a fraction of a loop, not far below it.
  const std::string eps = GENERATE(as<std::string>{}, "1", "4");
  const std::string qd = GENERATE(as<std::string>{}, "1", "16");
  CAPTURE(eps, qd);
  TempDir dir;
  const json s = rpc_run(dir, {"--endpoints", eps, "--queue-depth", qd});
  const json& run = s["rpc"]["runs"][1];
  const double outstanding = std::stod(eps) * std::stod(qd);
  const double predicted_mrps = outstanding / run["rtt_mean_us"].get<double>();
  CHECK(run["mrps"].get<double>() <= predicted_mrps * (1 + 1e-3));
  CHECK(run["mrps"].get<double>() >= 0.85 * predicted_mrps);
  CHECK(run["rtt_p99_us"].get<double>() >= run["rtt_p50_us"].get<double>());
}

TEST_CASE("rpc: more endpoints at QD=1 give more calls per second", "[e2e][sim][rpc]") {
  TempDir a, b;
  const double one = rpc_run(a, {"--endpoints", "1", "--queue-depth", "1"})["rpc"]["runs"][1]["mrps"].get<double>();
  const double four = rpc_run(b, {"--endpoints", "4", "--queue-depth", "1"})["rpc"]["runs"][1]["mrps"].get<double>();
  CHECK(one > 0);
  CHECK(four > 2.0 * one);
}

TEST_CASE("rpc: the same configuration and seed give byte-identical outputs", "[e2e][sim][rpc][determinism]") {
  TempDir dir;
  const fs::path a = dir.subdir("a"), b = dir.subdir("b");
  run_ok(rpc_args({"--endpoints", "3", "--queue-depth", "4"}), a);
  run_ok(rpc_args({"--endpoints", "3", "--queue-depth", "4"}), b);
  CHECK(read_file(a / "out.csv") == read_file(b / "out.csv"));
  CHECK(deterministic_bytes(a / "out.summary.json") == deterministic_bytes(b / "out.summary.json"));
}

TEST_CASE("rpc: options that do not apply are refused, naming the option", "[e2e][rpc][bad-input]") {
  struct Case {
    std::vector<std::string> args;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {rpc_args({"--client-threads", "4"}), "client_threads"},
      {rpc_args({"--batch-hold-us", "5"}), "batch_hold_us"},
      {rpc_args({"--endpoints", "0"}), "endpoints"},
      {rpc_args({"--message-size", "1000000"}), "message_size"},
      {{"meta", "--transport", "sim", "--endpoints", "4", "-o", "out.csv"}, "endpoints"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    const Outcome o = run_benchkv(c.args, dir.path());
    INFO(describe(o));
    CHECK(o.status != 0);
    CHECK(o.status < 126);
    CHECK_THAT(o.err, Catch::Contains(c.fragment));
    CHECK_FALSE(fs::exists(dir / "out.csv"));
  }
}

TEST_CASE("rpc: --np 1 runs caller and server on one NIC, and the loopback skips the wire both ways", "[e2e][sim][rpc]") {
  // The default model's wire is base 300 ns + Exp(mean 20 ns) per direction; a NIC sending
  // to itself turns the packet around in loopback_ns = 100 instead. So at QD=1 the loopback
  // round trip is about 2 x (320 - 100) = 440 ns shorter, everything else being equal.
  TempDir a, b;
  const json lb = rpc_run(a, {"--endpoints", "1", "--queue-depth", "1"}, nullptr, "1");
  const json two = rpc_run(b, {"--endpoints", "1", "--queue-depth", "1"}, nullptr, "2");
  CHECK(lb["rpc"]["loopback"] == true);
  CHECK(two["rpc"]["loopback"] == false);
  CHECK(lb["rpc"]["servers"] == 1);
  CHECK(lb["totals"]["issued"] == lb["totals"]["completed"]);
  CHECK(lb["totals"]["errors"] == 0);
  REQUIRE(lb["simulator"]["nics"].size() == 1);  // one node carries both ends
  REQUIRE(two["simulator"]["nics"].size() == 2);
  const double saved = two["rpc"]["runs"][1]["rtt_mean_us"].get<double>() - lb["rpc"]["runs"][1]["rtt_mean_us"].get<double>();
  CHECK(saved > 0.30);
  CHECK(saved < 0.60);
}

// --report for rpc as for the KV backends: csv is the header and a line per run (its
// latency columns the caller's round-trip times in ns), none is nothing on stdout, text
// ends with the rpc table counting runs from 1.
TEST_CASE("rpc: --message-size 8..64 runs four sizes: a table row, a CSV message_size and a summary run each",
          "[e2e][sim][rpc]") {
  TempDir dir;
  const Outcome o = run_ok({"rpc", "--transport", "sim", "--np", "2", "-d", "0.004", "--interval-ms", "1", "--trim", "1",
                            "-r", "1", "--progress", "-o", "out.csv", "--message-size", "8..64"},
                           dir.path());
  const std::vector<uint64_t> sizes = {8, 16, 32, 64};
  // The table: one row per size, its size column in order.
  const size_t table = o.out.find(kRpcTableHeader);
  REQUIRE(table != std::string::npos);
  std::vector<std::vector<std::string>> rows;
  {
    std::istringstream in(o.out.substr(o.out.find('\n', table) + 1));
    for (std::string l; std::getline(in, l);) {
      std::istringstream w(l);
      std::vector<std::string> f;
      for (std::string x; w >> x;) f.push_back(x);
      rows.push_back(f);
    }
  }
  REQUIRE(rows.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(rows[i].at(2) == std::to_string(sizes[i]));
    CHECK(rows[i].at(3) == "1");  // runs counted per size
    CHECK(rows[i].size() == 13);  // ... Mrps, MB/s, mean, p50, p90, p95, p99, p99.9, max
  }
  // No [OVERALL] average over different sizes; progress lines count calls in Mrps.
  CHECK_THAT(o.out, !Catch::Contains("[OVERALL]"));
  CHECK_THAT(o.err, Catch::Contains(" Mrps") && !Catch::Contains(" Mops"));
  // The CSV leads with the run's message size.
  std::ifstream csv(dir / "out.csv");
  std::string header;
  REQUIRE(std::getline(csv, header));
  CHECK(header.rfind("message_size,run,", 0) == 0);
  std::vector<uint64_t> csv_sizes;
  for (std::string l; std::getline(csv, l);) {
    const uint64_t size = std::stoull(l.substr(0, l.find(',')));
    if (csv_sizes.empty() || csv_sizes.back() != size) csv_sizes.push_back(size);
  }
  CHECK(csv_sizes == sizes);
  // The summary: a run per size, each with its message size.
  const json s = read_json(dir / "out.summary.json");
  REQUIRE(s["rpc"]["runs"].size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(s["rpc"]["runs"][i]["run"] == i);
    CHECK(s["rpc"]["runs"][i]["message_size"] == sizes[i]);
  }
}

TEST_CASE("rpc: --report csv fills the latency columns from the RTTs, none prints nothing", "[e2e][sim][rpc][report]") {
  TempDir dir;
  const fs::path t = dir.subdir("text"), c = dir.subdir("csv"), n = dir.subdir("none");
  const Outcome text = run_ok(rpc_args({"--report", "text"}), t);
  const Outcome csv = run_ok(rpc_args({"--report", "csv"}), c);
  const Outcome none = run_ok(rpc_args({"--report", "none"}), n);
  CHECK(none.out.empty());

  // Text: the rpc table's run column reads 1 and 2.
  const size_t table = text.out.find(kRpcTableHeader);
  REQUIRE(table != std::string::npos);
  const std::vector<std::vector<std::string>> rows = words_per_line(text.out.substr(text.out.find('\n', table) + 1));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at(3) == "1");
  CHECK(rows[1].at(3) == "2");

  // CSV: the RTT columns filled, in ns, from the summary's rpc section.
  CHECK_THAT(csv.out, !Catch::Contains(kRpcTableHeader));
  const json s = read_json(c / "out.summary.json");
  const std::vector<std::string> lines = lines_of(csv.out);
  REQUIRE(lines.size() == 3);
  REQUIRE(lines[0].rfind("run,mops,requests,duration_ns,issued,completed,latency_count,latency_mean_ns,latency_p50_ns,"
                         "latency_p90_ns,latency_p95_ns,latency_p99_ns,latency_p999_ns,latency_max_ns,",
                         0) == 0);
  for (size_t i = 0; i < 2; ++i) {
    INFO(lines[i + 1]);
    const json& r = s["rpc"]["runs"][i];
    const std::vector<std::string> f = csv_fields(lines[i + 1]);
    REQUIRE(f.size() >= 14);
    CHECK(f[0] == std::to_string(i));
    CHECK(f[6] == std::to_string(r["calls"].get<uint64_t>()));
    CHECK(std::stod(f[7]) == Approx(r["rtt_mean_us"].get<double>() * 1000.0).margin(0.05));
    // Every percentile and the maximum, in whole ns, as the summary has them in us.
    const char* keys[] = {"rtt_p50_us", "rtt_p90_us", "rtt_p95_us", "rtt_p99_us", "rtt_p999_us", "rtt_max_us"};
    for (size_t k = 0; k < 6; ++k) {
      INFO(keys[k]);
      REQUIRE_FALSE(f[8 + k].empty());
      CHECK(std::stod(f[8 + k]) == Approx(r[keys[k]].get<double>() * 1000.0).margin(0.5));
    }
    CHECK(std::stod(f[8]) > 100);  // nanoseconds, not microseconds
    CHECK(std::stod(f[8]) <= std::stod(f[11]));
    CHECK(std::stod(f[11]) <= std::stod(f[13]));
  }
}
