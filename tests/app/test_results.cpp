// Results: trimming, CSV, summary JSON, determinism, progress line (apps/benchkv/results/results.hpp).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/results/results.hpp"

using namespace bkv::app;
using bkv::metrics::CqeHistogram;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A run whose records follow a formula, so expected sums can be computed independently.
uint64_t reqs(uint32_t run, uint32_t rank, uint32_t client, uint32_t epoch) {
  return 1000 * (run + 1) + 100 * rank + 10 * client + epoch;
}
uint64_t dur(uint32_t epoch, uint32_t client) { return 1'000'000 + epoch * 10 + client; }  // ns; client 2 longest

RunResults make_run(uint32_t run, uint32_t ranks = 3, uint32_t clients = 3, uint32_t epochs = 10, uint32_t trim = 3) {
  RunResults r(run, ranks, clients, epochs, trim);
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    for (uint32_t c = 0; c < clients; ++c) {
      for (uint32_t e = 0; e < epochs; ++e) r.record(rank, c, e, reqs(run, rank, c, e), dur(e, c));
    }
  }
  r.set_counts(123456 + run, 123450 + run);
  return r;
}

std::vector<DaemonReport> make_daemons() {
  std::vector<DaemonReport> d(3);
  // deliberately unsorted: the summary sorts by (run, rank, daemon)
  d[0].run = 0, d[0].rank = 1, d[0].daemon = 0;
  d[1].run = 0, d[1].rank = 0, d[1].daemon = 1;
  d[2].run = 0, d[2].rank = 0, d[2].daemon = 0;
  for (uint64_t n : {0, 0, 1, 5, 50, 500}) d[2].cqe.add(n);
  d[2].cqe.add(0, 4);  // four idle loops recorded in bulk
  for (uint64_t n : {3, 0, 120}) d[2].completions.add(n);  // a histogram of its own, not the CQEs'
  d[2].inflight_avg = 1343.0 / 3.0;
  d[2].extra["loop_ns_avg"] = 712.5;
  d[2].extra["nic_queue_max"] = 17;
  return d;
}

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("trimming keeps epochs from trim to epochs - trim (half-open)", "[bench][results]") {
  const RunResults r = make_run(0, 2, 2, 10, 3);
  CHECK(r.first_kept_epoch() == 3);
  CHECK(r.end_kept_epoch() == 7);
  CHECK_FALSE(r.kept(2));
  CHECK(r.kept(3));
  CHECK(r.kept(6));
  CHECK_FALSE(r.kept(7));
  uint64_t expected = 0;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    for (uint32_t c = 0; c < 2; ++c) {
      for (uint32_t e = 3; e < 7; ++e) expected += reqs(0, rank, c, e);
    }
  }
  CHECK(r.kept_requests() == expected);
  // the epoch duration is the longest any client recorded (client 1 here)
  CHECK(r.epoch_duration_ns(4) == dur(4, 1));
  uint64_t kept_ns = 0;
  for (uint32_t e = 3; e < 7; ++e) kept_ns += dur(e, 1);
  CHECK(r.kept_duration_ns() == kept_ns);
  CHECK(r.total_mops() == Approx(static_cast<double>(expected) / static_cast<double>(kept_ns) * 1e3));
  CHECK(r.rank_mops(0) + r.rank_mops(1) == Approx(r.total_mops()));

  CHECK(make_run(0, 1, 1, 1, 0).kept_requests() == reqs(0, 0, 0, 0));
  CHECK_THROWS_AS(RunResults(0, 1, 1, 6, 3), std::invalid_argument);
  CHECK_THROWS_AS(RunResults(0, 0, 1, 6, 0), std::invalid_argument);
  RunResults small(0, 1, 1, 3, 1);
  CHECK_THROWS_AS(small.at(0, 0, 3), std::out_of_range);
  CHECK_THROWS_AS(small.at(1, 0, 0), std::out_of_range);
  CHECK_THROWS_AS(small.at(0, 1, 0), std::out_of_range);
}

TEST_CASE("rank_records is the rank's contiguous block", "[bench][results]") {
  RunResults r = make_run(0, 3, 2, 4, 1);
  const auto block = r.rank_records(1);
  REQUIRE(block.size() == 2 * 4);
  CHECK(block[0].requests == reqs(0, 1, 0, 0));
  CHECK(block[4 + 3].requests == reqs(0, 1, 1, 3));
  block[5].requests = 7;  // writes land in the results (what a gather does)
  CHECK(r.at(1, 1, 1).requests == 7);
  CHECK_THROWS_AS(r.rank_records(3), std::out_of_range);
}

TEST_CASE("CSV: exact header, kept epochs only, ordered rows", "[bench][results]") {
  const std::vector<RunResults> runs = {make_run(0), make_run(1)};
  std::ostringstream out;
  write_csv(out, runs);
  const auto rows = parse_csv(out.str());
  REQUIRE(!rows.empty());
  CHECK(out.str().rfind("run,rank,client_id,epoch,requests,duration_ns\n", 0) == 0);
  REQUIRE(rows.size() == 1 + 2 * 3 * 3 * 4);  // header + runs x ranks x clients x kept epochs
  CHECK(rows[1] == std::vector<std::string>{"0", "0", "0", "3", std::to_string(reqs(0, 0, 0, 3)),
                                            std::to_string(dur(3, 0))});
  CHECK(rows.back() == std::vector<std::string>{"1", "2", "2", "6", std::to_string(reqs(1, 2, 2, 6)),
                                                std::to_string(dur(6, 2))});
  for (size_t i = 1; i < rows.size(); ++i) {
    REQUIRE(rows[i].size() == 6);
    const auto epoch = std::stoul(rows[i][3]);
    CHECK(epoch >= 3);
    CHECK(epoch < 7);
  }
}

TEST_CASE("summary: the sum of a run's CSV rows equals its requests - Mops follow", "[bench][results]") {
  const std::vector<RunResults> runs = {make_run(0), make_run(1)};
  const auto daemons = make_daemons();
  Options opts;
  opts.backend = BackendKind::kDelegation;
  const json s = summary_json(opts, runs, daemons);

  std::ostringstream csv;
  write_csv(csv, runs);
  std::map<uint32_t, uint64_t> csv_sum;
  const auto rows = parse_csv(csv.str());
  for (size_t i = 1; i < rows.size(); ++i) csv_sum[std::stoul(rows[i][0])] += std::stoull(rows[i][4]);

  CHECK(s["config"] == to_json(opts));
  REQUIRE(s["runs"].size() == 2);
  for (uint32_t run = 0; run < 2; ++run) {
    const json& r = s["runs"][run];
    CHECK(r["run"] == run);
    CHECK(r["requests"].get<uint64_t>() == csv_sum[run]);
    CHECK(r["issued"] == 123456 + run);
    CHECK(r["completed"] == 123450 + run);
    const auto requests = r["requests"].get<uint64_t>();
    const auto duration = r["duration_ns"].get<uint64_t>();
    CHECK(duration == runs[run].kept_duration_ns());
    CHECK(r["total_mops"].get<double>() ==
          Approx(static_cast<double>(requests) / static_cast<double>(duration) * 1e3).margin(1e-6));
    REQUIRE(r["per_rank_mops"].size() == 3);
    double per_rank_sum = 0;
    uint64_t per_rank_requests = 0;
    for (uint32_t rank = 0; rank < 3; ++rank) {
      per_rank_sum += r["per_rank_mops"][rank].get<double>();
      per_rank_requests += r["per_rank_requests"][rank].get<uint64_t>();
      CHECK(r["per_rank_mops"][rank].get<double>() == Approx(runs[run].rank_mops(rank)).margin(1e-6));
    }
    CHECK(per_rank_requests == requests);
    CHECK(per_rank_sum == Approx(r["total_mops"].get<double>()).margin(1e-5));
    CHECK(r["first_kept_epoch"] == 3);
    CHECK(r["end_kept_epoch"] == 7);
  }
}

TEST_CASE("summary: daemon metrics, sorted, with the C1 histogram buckets", "[bench][results]") {
  const std::vector<RunResults> runs = {make_run(0)};
  const json s = summary_json(json::object(), runs, make_daemons());
  const json& d = s["daemons"];
  REQUIRE(d.size() == 3);
  CHECK(d[0]["rank"] == 0);
  CHECK(d[0]["daemon"] == 0);
  CHECK(d[1]["rank"] == 0);
  CHECK(d[1]["daemon"] == 1);
  CHECK(d[2]["rank"] == 1);
  const json& d0 = d[0];
  CHECK(d0["loops"] == 10);
  CHECK(d0["cqes"] == 556);
  CHECK(d0["cqe_per_loop_avg"].get<double>() == 55.6);
  CHECK(d0["cqe_per_loop_hist"] == json{{"0", 6}, {"1", 1}, {"2-10", 1}, {"11-100", 1}, {">100", 1}});
  CHECK(d0["completions"] == 123);
  CHECK(d0["completions_per_loop_avg"].get<double>() == 41.0);
  CHECK(d0["completions_per_loop_hist"] == json{{"0", 1}, {"1", 0}, {"2-10", 1}, {"11-100", 0}, {">100", 1}});
  CHECK(d0["inflight_avg"].get<double>() == 447.666667);  // rounded to 1e-6
  CHECK(d0["extra"] == json{{"loop_ns_avg", 712.5}, {"nic_queue_max", 17.0}});
  CHECK(d[1]["extra"] == json::object());
  CHECK(d[1]["cqe_per_loop_avg"].get<double>() == 0.0);
}

TEST_CASE("outputs are byte-deterministic", "[bench][results]") {
  const fs::path dir = fs::temp_directory_path() / ("bkv_results_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Options opts;
  opts.backend = BackendKind::kMeta;
  for (int i = 0; i < 2; ++i) {
    // built from scratch each time: equal inputs, not the same objects
    const std::vector<RunResults> runs = {make_run(0), make_run(1), make_run(2)};
    const auto daemons = make_daemons();
    write_csv_file((dir / ("a" + std::to_string(i) + ".csv")).string(), runs);
    write_summary_file((dir / ("a" + std::to_string(i) + ".json")).string(), summary_json(opts, runs, daemons));
  }
  const auto csv0 = slurp((dir / "a0.csv").string()), csv1 = slurp((dir / "a1.csv").string());
  const auto js0 = slurp((dir / "a0.json").string()), js1 = slurp((dir / "a1.json").string());
  CHECK(!csv0.empty());
  CHECK(csv0 == csv1);
  CHECK(!js0.empty());
  CHECK(js0 == js1);
  CHECK(js0.back() == '\n');
  // sorted top-level keys (two-space indent marks the top level)
  CHECK(js0.find("\n  \"config\"") < js0.find("\n  \"daemons\""));
  CHECK(js0.find("\n  \"daemons\"") < js0.find("\n  \"runs\""));
  CHECK(js0.find("\n  \"runs\"") != std::string::npos);
  CHECK_THROWS_WITH(write_csv_file((dir / "no" / "such" / "dir.csv").string(), {}), Catch::Contains("dir.csv"));
  fs::remove_all(dir);
}

TEST_CASE("progress line: run, epoch, phase, Mops and per-rank spread", "[bench][results]") {
  RunResults r(1, 2, 1, 10, 2);
  r.record(0, 0, 4, 2'000'000, 1'000'000'000);  // 2.0 Mops on rank 0
  r.record(1, 0, 4, 1'000'000, 999'000'000);    // 1.0 Mops-ish on rank 1
  const std::string line = format_progress(r, 3, 4);
  CHECK_THAT(line, Catch::Contains("run 2/3") && Catch::Contains("epoch 5/10") && Catch::Contains("[kept]"));
  CHECK_THAT(line, Catch::Contains("3.000 Mops"));
  CHECK_THAT(line, Catch::Contains("min 1.000 (rank 1)") && Catch::Contains("max 2.000 (rank 0)"));
  CHECK_THAT(line, Catch::Contains("spread 66.7%"));
  CHECK_THAT(format_progress(r, 3, 1), Catch::Contains("[warm-up]"));
  CHECK_THAT(format_progress(r, 3, 8), Catch::Contains("[cool-down]"));
  CHECK_THAT(format_progress(r, 3, 7), Catch::Contains("[kept]"));
  const std::vector<uint64_t> one = {500};
  ProgressLine p;
  p.duration_ns = 1000;
  p.rank_requests = one;
  const std::string single = format_progress(p);
  CHECK_THAT(single, Catch::Contains("500.000 Mops"));
  CHECK(single.find("per rank") == std::string::npos);
}

TEST_CASE("rpc progress line: the caller's rate, no per-rank spread against the servers", "[bench][results]") {
  RunResults r(0, 3, 1, 10, 2);
  r.record(0, 0, 4, 2'000'000, 1'000'000'000);  // the caller, rank 0
  // ranks 1 and 2 serve and complete nothing
  const std::string line = format_rpc_progress(r, 1, 4);
  // Calls, in Mrps as in the rpc report.
  CHECK_THAT(line, Catch::Contains("run 1/1") && Catch::Contains("epoch 5/10") && Catch::Contains("2.000 Mrps") &&
                       !Catch::Contains("Mops"));
  CHECK(line.find("per rank") == std::string::npos);
  CHECK(line.find("spread") == std::string::npos);
  // The KV line over the same results would average the caller with the two servers.
  CHECK_THAT(format_progress(r, 1, 4), Catch::Contains("per rank avg 0.667 min 0.000 (rank 1)"));
}

TEST_CASE("CQE histogram buckets follow the calibration boundaries", "[bench][results]") {
  CqeHistogram h;
  for (uint64_t n : {0, 1, 2, 10, 11, 100, 101, 100000}) h.add(n);
  CHECK(h.buckets == std::array<uint64_t, 5>{1, 1, 2, 2, 2});
  CHECK(h.loops == 8);
  CHECK(h.cqes == 0 + 1 + 2 + 10 + 11 + 100 + 101 + 100000);
  CqeHistogram g;
  g.add(3, 5);
  h.merge(g);
  CHECK(h.buckets[2] == 7);
  CHECK(h.loops == 13);
  CHECK(h.average() == Approx(static_cast<double>(h.cqes) / 13));
}

TEST_CASE("CQE histogram: since() is the loops recorded after a snapshot", "[bench][results]") {
  CqeHistogram h;
  h.add(0, 3);
  h.add(50);
  const CqeHistogram snap = h;
  h.add(1);
  h.add(200, 2);
  const CqeHistogram d = h.since(snap);
  CHECK(d.buckets == std::array<uint64_t, 5>{0, 1, 0, 0, 2});
  CHECK(d.loops == 3);
  CHECK(d.cqes == 401);
  CHECK(h.since(h).loops == 0);
}

TEST_CASE("summary latency: each percentile key holds its own percentile", "[bench][results]") {
  // 1000 latencies of 1..1000 ns: nearest rank gives p50 = 500, p90 = 900, p95 = 950,
  // p99 = 990, p99.9 = 999 (exact below 128 ns, within a bucket's width above).
  bkv::metrics::LatencyHistogram h;
  for (uint64_t ns = 1; ns <= 1000; ++ns) h.record(ns);
  const json j = latency_json(h);
  CHECK(j["count"] == 1000);
  CHECK(j["min_ns"] == 1);
  CHECK(j["max_ns"] == 1000);
  const std::pair<const char*, double> want[] = {
      {"p50_ns", 0.50}, {"p90_ns", 0.90}, {"p95_ns", 0.95}, {"p99_ns", 0.99}, {"p999_ns", 0.999}};
  uint64_t previous = 0;
  for (const auto& [key, p] : want) {
    INFO(key);
    CHECK(j[key].get<uint64_t>() == h.percentile_ns(p));
    CHECK(j[key].get<uint64_t>() > previous);  // strictly increasing here: no two keys swapped
    CHECK(std::abs(double(j[key].get<uint64_t>()) - p * 1000) <= 0.04 * p * 1000);
    previous = j[key].get<uint64_t>();
  }
}

namespace {

// A run of make_run with request latency in every class (a few hundred values each).
RunResults run_with_latency(uint32_t run) {
  RunResults r = make_run(run);
  bkv::metrics::MergedRequestLatency l;
  for (size_t c = 0; c < bkv::metrics::kLatencyClasses; ++c)
    for (uint64_t ns = 1; ns <= 300; ++ns) l.by_class[c].record(1000 * (c + 1) + 7 * ns + run);
  r.set_latency(l);
  return r;
}

// The lines of `text` that start with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("report: latency figures from a saturated histogram are said not to be exact", "[bench][results]") {
  // "saturated" (latency_json): a bucket of a client's 32-bit recorder reached 2^32 - 1 and
  // stopped counting. No test records 4 x 10^9 values into one bucket: the mark is planted
  // where summary_json would write it, into summaries it made.
  Options opts;
  opts.backend = BackendKind::kDelegation;
  const std::vector<RunResults> runs = {run_with_latency(0), run_with_latency(1)};
  json s = summary_json(opts, runs, make_daemons());
  REQUIRE(s["runs"][1]["latency"]["get_remote"].is_object());
  const std::string clean = format_report(s, ReportFormat::kText);
  CHECK_THAT(clean, Catch::Contains("run 2/2 latency (us)        all"));
  CHECK_THAT(clean, !Catch::Contains("saturated"));
  // Run 2's remote gets saturated: its class, "all" (their merge), and the same two over
  // every run, as the recorder's flag carries through merges.
  for (json* l : {&s["runs"][1]["latency"], &s["overall"]["latency"]}) {
    (*l)["get_remote"]["saturated"] = true;
    (*l)["all"]["saturated"] = true;
  }
  const std::string text = format_report(s, ReportFormat::kText);
  INFO(text);
  CHECK(lines_starting(text, "run 1/2 latency: warning").empty());
  const auto run2 = lines_starting(text, "run 2/2 latency: warning");
  REQUIRE(run2.size() == 1);
  CHECK_THAT(run2[0], Catch::StartsWith("run 2/2 latency: warning: not exact, saturated histogram (get_remote, all): "
                                        "a bucket of a client's recorder reached 2^32 - 1 and stopped counting"));
  CHECK_THAT(run2[0], Catch::Contains("the mean reads high and a percentile is off"));
  const auto overall = lines_starting(text, "[OVERALL] latency: warning");
  REQUIRE(overall.size() == 1);
  CHECK_THAT(overall[0], Catch::StartsWith("[OVERALL] latency: warning: not exact, saturated histogram (get_remote, all)"));
  // Right after the table it qualifies.
  CHECK(text.find("run 2/2 latency: warning") > text.find("run 2/2 latency (us)        all"));
  CHECK(text.find("run 2/2 latency: warning") < text.find("[OVERALL]"));

  // Repetitions: each repetition's latency line, and the spread over them.
  const std::vector<RunResults> seed1 = {run_with_latency(0)}, seed2 = {run_with_latency(1)};
  const std::vector<RepetitionResults> reps = {{1, seed1, {}}, {2, seed2, {}}};
  json r = repeated_summary_json(to_json(opts), reps);
  REQUIRE(r["repetitions"].size() == 2);
  CHECK_THAT(format_report(r, ReportFormat::kText), !Catch::Contains("saturated"));
  r["repetitions"][1]["latency"]["saturated"] = true;  // seed 2
  r["runs"][1]["latency"]["all"]["saturated"] = true;
  r["overall"]["latency"]["all"]["saturated"] = true;
  const std::string rtext = format_report(r, ReportFormat::kText);
  INFO(rtext);
  const auto rep1 = lines_starting(rtext, "[REPETITION] seed 1:"), rep2 = lines_starting(rtext, "[REPETITION] seed 2:");
  REQUIRE(rep1.size() == 1);
  REQUIRE(rep2.size() == 1);
  CHECK_THAT(rep1[0], !Catch::Contains("saturated"));
  CHECK_THAT(rep2[0], Catch::EndsWith("(not exact: saturated histogram)"));
  CHECK(lines_starting(rtext, "[OVERALL] latency: warning: not exact, saturated histogram (all)").size() == 1);
  const auto spread = lines_starting(rtext, "[OVERALL] latency over the repetitions: warning");
  REQUIRE(spread.size() == 1);
  CHECK_THAT(spread[0], Catch::StartsWith("[OVERALL] latency over the repetitions: warning: not exact, the latency of "
                                          "seed 2 came from a saturated histogram"));
}
