// `benchkv data --transport sim`: bulk values. Checks the run's consistency per size and
// backend, that the figures follow from the CSV, that bandwidth grows with the value
// size, determinism, and that bad or inapplicable options are refused.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/benchkv_run.hpp"

using namespace bkv::e2e;

namespace {

std::vector<std::string> data_args(std::vector<std::string> extra) {
  std::vector<std::string> a = {"data", "--transport", "sim", "--np", "2", "--client-threads", "2", "-d", "0.004", "--interval-ms", "1", "--trim", "1", "-r", "1", "--no-progress",
                                "-o", "out.csv"};
  if (std::find(extra.begin(), extra.end(), "--key-range") == extra.end()) extra.insert(extra.end(), {"--key-range", "8"});
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace

TEST_CASE("data: every operation completes and the figures follow from the CSV", "[e2e][sim][data]") {
  const std::string backend = GENERATE(std::string("delegation"), std::string("meta"), std::string("direct"));
  TempDir dir;
  const Outcome o = run_ok(data_args({"--data-backend", backend, "--value-size", "64,4096..16384"}), dir.path());
  const json s = read_json(dir / "out.summary.json");
  CHECK(s["totals"]["issued"] == s["totals"]["completed"]);
  CHECK(s["totals"]["errors"] == 0);
  CHECK(s["data"]["rejected"] == 0);
  CHECK(s["data"]["backend"] == backend);
  CHECK(s["config"]["value_size"] == "64,4096..16384");
  CHECK(s["provenance"]["latency_clock"] == "virtual time");
  CHECK(s["provenance"].contains("git_commit"));
  const json& runs = s["data"]["runs"];
  REQUIRE(runs.size() == 4);
  const std::vector<uint32_t> sizes{64, 4096, 8192, 16384};
  const std::vector<CsvRow> rows = read_csv(dir / "out.csv");
  double last_gib = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    INFO("size " << sizes[i]);
    CHECK(runs[i]["value_size"] == sizes[i]);
    CHECK(runs[i]["run"] == i);
    uint64_t ops = 0;
    for (const CsvRow& row : rows)
      if (row.run == i) {
        ops += row.requests;
        CHECK(row.value_size == sizes[i]);  // the CSV's leading column names the run's size
      }
    CHECK(ops > 0);
    CHECK(ops == runs[i]["ops"].get<uint64_t>());
    const double ns = runs[i]["duration_ns"].get<double>();
    CHECK(runs[i]["ops_per_s"].get<double>() == Approx(double(ops) * 1e9 / ns).epsilon(1e-5));
    // Bytes: at most one value per operation (a get of an absent key moves nothing).
    CHECK(runs[i]["bytes"].get<uint64_t>() <= ops * sizes[i]);
    CHECK(runs[i]["bytes"].get<uint64_t>() >= ops * sizes[i] / 4);
    CHECK(runs[i]["latency_p99_us"].get<double>() >= runs[i]["latency_p50_us"].get<double>());
    const double gib = runs[i]["gib_per_s"].get<double>();
    CHECK(gib > last_gib);  // larger values move more bytes per second in this range
    last_gib = gib;
  }
  // The table's latency columns, p95 among them.
  CHECK_THAT(o.out, Catch::Contains("GiB/s      mean       p50       p90       p95       p99     p99.9       max (us)"));
}

TEST_CASE("data: progress lines count runs per value size", "[e2e][sim][data]") {
  // 2 sizes x 2 runs: each size's progress lines say the size and count its runs from 1
  // ("value size 128: run 1/2"), not over the sizes ("run 3/4").
  TempDir dir;
  const Outcome o = run_ok({"data", "--transport", "sim", "--np", "2", "--client-threads", "2", "-d", "0.004",
                            "--interval-ms", "1", "--trim", "1", "-r", "2", "--key-range", "8", "--value-size", "64,128",
                            "-o", "out.csv"},
                           dir.path());
  std::istringstream in(o.err);
  std::string line;
  std::vector<std::string> epochs;
  while (std::getline(in, line))
    if (line.rfind("value size ", 0) == 0 && line.find(" epoch ") != std::string::npos)
      epochs.push_back(line.substr(0, line.find(" [")));
  INFO(o.err);
  REQUIRE(epochs.size() == 16);  // 2 sizes x 2 runs x 4 epochs
  CHECK(epochs.front() == "value size 64: run 1/2 epoch 1/4");
  CHECK(epochs[4] == "value size 64: run 2/2 epoch 1/4");
  CHECK(epochs[8] == "value size 128: run 1/2 epoch 1/4");
  CHECK(epochs.back() == "value size 128: run 2/2 epoch 4/4");
}

TEST_CASE("data: the same configuration gives the same bytes", "[e2e][sim][data]") {
  TempDir a, b;
  run_ok(data_args({"--value-size", "1024"}), a.path());
  run_ok(data_args({"--value-size", "1024"}), b.path());
  CHECK(read_file(a / "out.csv") == read_file(b / "out.csv"));
  CHECK(deterministic_bytes(a / "out.summary.json") == deterministic_bytes(b / "out.summary.json"));
}

TEST_CASE("data: bad value sizes and options that do not apply are refused", "[e2e][data][bad-input]") {
  TempDir dir;
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases{
      {{"--value-size", "8"}, "sizes must be in [16,"},
      {{"--value-size", "100..1024"}, "has the range 100..1024: 100 is not a power of two"},
      {{"--value-size", "64..100"}, "has the range 64..100: 100 is not a power of two"},
      {{"--value-size", "128..64"}, "has the range 128..64: 128 is larger than 64"},
      {{"--value-size", "64,,128"}, "where a size in bytes was expected"},
      {{"--value-size", "4k"}, "where a size in bytes was expected"},
      {{"--value-size", "64,64"}, "names 64 twice"},
      {{"--value-size", "64,32..128"}, "names 64 twice"},
      {{"--value-size", "1048576", "--key-range", "8192"}, "bytes of store per node"},
      {{"--value-size", "67108864", "--queue-depth", "64"}, "bytes of client buffers per node"},
      {{"--data-backend", "metaa"}, "\"metaa\" is not one of delegation|meta|direct|ucx-am"},
      {{"--data-backend", "ucx-am"}, "ucx-am runs over --transport ucx only (got --transport sim)"},
      {{"--server-threads", "2"}, "daemon #0 alone serves data"},
      {{"--poll-budget", "2"}, "does not apply to --transport sim, mode data (it is a Delegation daemon loop policy)"},
  };
  for (const Case& c : cases) {
    const Outcome o = run_benchkv(data_args(c.args), dir.path());
    INFO(describe(o));
    CHECK(o.status == 2);
    CHECK_THAT(o.err, Catch::Contains(c.says));
  }
  // And the data options on another backend.
  const Outcome o = run_benchkv({"delegation", "--transport", "sim", "--value-size", "64"}, dir.path());
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("does not apply to --transport sim, backend delegation (it is an option of the data benchmark)"));
}

// --report: text is the table (each size's runs counted from 1), csv a header and a line
// per (size, run) with the summary's numbers (latency in ns), none nothing on stdout.
TEST_CASE("data: --report text, csv and none", "[e2e][sim][data][report]") {
  TempDir dir;
  const fs::path t = dir.subdir("text"), c = dir.subdir("csv"), n = dir.subdir("none");
  const Outcome text = run_ok(data_args({"--value-size", "64,1024", "--report", "text"}), t);
  const Outcome csv = run_ok(data_args({"--value-size", "64,1024", "--report", "csv"}), c);
  const Outcome none = run_ok(data_args({"--value-size", "64,1024", "--report", "none"}), n);
  CHECK(read_file(t / "out.csv") == read_file(c / "out.csv"));  // the report changes no output file

  // Text: the table, each size's run numbered 1 (the summary's runs 0 and 1).
  INFO(text.out);
  const std::vector<std::vector<std::string>> table = words_per_line(text.out);
  REQUIRE(table.size() == 3);
  CHECK(table[0][2] == "run");
  CHECK(table[1][1] == "64");
  CHECK(table[1][2] == "1");
  CHECK(table[2][1] == "1024");
  CHECK(table[2][2] == "1");

  // CSV: no table, the summary's numbers.
  CHECK_THAT(csv.out, !Catch::Contains("GiB/s"));
  const json s = read_json(c / "out.summary.json");
  const std::vector<std::string> lines = lines_of(csv.out);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "value_size,run,ops,bytes,duration_ns,ops_per_s,gib_per_s,latency_mean_ns,latency_p50_ns,"
                    "latency_p90_ns,latency_p95_ns,latency_p99_ns,latency_p999_ns,latency_max_ns");
  for (size_t i = 0; i < 2; ++i) {
    const json& r = s["data"]["runs"][i];
    const std::vector<std::string> f = csv_fields(lines[i + 1]);
    REQUIRE(f.size() == 14);
    CHECK(f[0] == std::to_string(r["value_size"].get<uint32_t>()));
    CHECK(f[1] == std::to_string(i));
    CHECK(f[2] == std::to_string(r["ops"].get<uint64_t>()));
    CHECK(f[3] == std::to_string(r["bytes"].get<uint64_t>()));
    CHECK(std::stod(f[5]) == Approx(r["ops_per_s"].get<double>()));
    // The latency columns in ns: the summary's microseconds (whole ns) times 1000.
    const char* keys[] = {"latency_mean_us", "latency_p50_us", "latency_p90_us", "latency_p95_us",
                          "latency_p99_us",  "latency_p999_us", "latency_max_us"};
    for (size_t k = 0; k < 7; ++k) {
      INFO(keys[k]);
      CHECK(std::stod(f[7 + k]) == Approx(r[keys[k]].get<double>() * 1000.0).margin(0.05));
    }
    CHECK(std::stod(f[8]) > 0);
    CHECK(std::stod(f[8]) <= std::stod(f[11]));   // p50 <= p99
    CHECK(std::stod(f[11]) <= std::stod(f[13]));  // p99 <= max
  }
  CHECK(none.out.empty());
}
