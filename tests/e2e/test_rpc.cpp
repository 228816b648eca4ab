// `benchkv rpc --transport sim`: copyrpc alone. Checks the run's consistency, the queueing
// relation between rate, outstanding calls and round trip, determinism, and that options
// which do not apply are refused.
#include <algorithm>
#include <cmath>
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
  const size_t table = o.out.find("RTT p50 (us)");
  REQUIRE(table != std::string::npos);
  CHECK(std::count(o.out.begin() + static_cast<std::ptrdiff_t>(table), o.out.end(), '\n') == 3);
  CHECK_THAT(o.out, Catch::Contains("[OVERALL] 2 runs: Mops mean"));
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
