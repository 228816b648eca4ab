// benchkv --transport sim: byte-identical output for the same configuration and seed,
// config files, command-line precedence and --print-config (docs/design_simulator.md §Determinism).
//
// The summary holds the effective configuration, output paths included, so runs whose
// bytes are compared use the same relative output names, each in its own directory.
// The summary's "provenance" object (host, date, commit: apps/benchkv/results/provenance.hpp)
// is the one part that may differ between two runs: summaries are compared byte for
// byte with that object removed (same_summary_bytes), every other file as is.
#include <string>
#include <vector>

#include "e2e/benchkv_run.hpp"

using namespace bkv::e2e;

namespace {

const std::vector<std::string> kOutputs = {"out.csv", "out.summary.json", "inflight.csv", "trace.json"};

// One run of 6 ms with 2 daemons per node, in-flight samples and a 100 us trace.
std::vector<std::string> observed(const std::string& backend, std::vector<std::string> extra = {}) {
  extra.insert(extra.end(), {"-r", "1", "--server-threads", "2", "--inflight-samples", "inflight.csv", "--trace", "trace.json",
                             "--trace-window", "1000:1100", "-o", "out.csv"});
  return small_sim(backend, extra);
}

}  // namespace

TEST_CASE("sim: the same configuration and seed give byte-identical output files", "[e2e][sim][determinism]") {
  const std::string backend = GENERATE(as<std::string>{}, "meta", "delegation", "direct");
  CAPTURE(backend);
  TempDir dir;
  const fs::path a = dir.subdir("a"), b = dir.subdir("b");
  run_ok(observed(backend), a);
  run_ok(observed(backend), b);
  for (const auto& name : kOutputs) {
    INFO("file " << name);
    const std::string x = deterministic_bytes(a / name);
    CHECK_FALSE(x.empty());
    CHECK(x == deterministic_bytes(b / name));
  }
  check_run_in(a);
}

TEST_CASE("sim: a different --seed gives different output", "[e2e][sim][determinism]") {
  const std::string backend = GENERATE(as<std::string>{}, "meta", "delegation", "direct");
  CAPTURE(backend);
  TempDir dir;
  const fs::path a = dir.subdir("a"), b = dir.subdir("b");
  run_ok(observed(backend, {"--seed", "1"}), a);
  run_ok(observed(backend, {"--seed", "2"}), b);
  check_run_in(b);
  // The per-epoch data itself differs, not just the seed recorded in the summary.
  CHECK(read_file(a / "out.csv") != read_file(b / "out.csv"));
  CHECK(read_json(a / "out.summary.json")["runs"] != read_json(b / "out.summary.json")["runs"]);
  CHECK(read_file(a / "trace.json") != read_file(b / "trace.json"));
  CHECK(read_file(a / "inflight.csv") != read_file(b / "inflight.csv"));
}

TEST_CASE("sim: tracing and in-flight sampling only observe (the CSV is unchanged)", "[e2e][sim][determinism]") {
  const std::string backend = GENERATE(as<std::string>{}, "meta", "delegation", "direct");
  CAPTURE(backend);
  TempDir dir;
  const fs::path a = dir.subdir("a"), b = dir.subdir("b");
  run_ok(observed(backend, {"--inflight-sample-interval-us", "0.5"}), a);
  run_ok(small_sim(backend, {"-r", "1", "--server-threads", "2", "-o", "out.csv"}), b);
  CHECK(read_file(a / "out.csv") == read_file(b / "out.csv"));
  CHECK(read_json(a / "out.summary.json")["runs"] == read_json(b / "out.summary.json")["runs"]);
}

// ------------------------------------------------------------------------- config files

namespace {

// A complete small experiment as a config file (backend included).
json small_config(const std::string& backend) {
  return json{{"backend", backend}, {"transport", "sim"}, {"np", 2},     {"client_threads", 2},
              {"queue_depth", 4},   {"duration", 0.006},  {"interval_ms", 1}, {"trim", 1},
              {"runs", 2},          {"progress", false},  {"output", "out.csv"}};
}

}  // namespace

TEST_CASE("sim: --config FILE.json alone runs the experiment it describes", "[e2e][sim][config]") {
  TempDir dir;
  write_file(dir / "exp.json", small_config("direct").dump(2));
  run_ok({"--config", "exp.json"}, dir.path());
  const Checked c = check_run_in(dir.path());
  CHECK(c.summary["config"]["backend"] == "direct");
  CHECK(c.summary["config"]["np"] == 2);
  CHECK(c.summary["config"]["queue_depth"] == 4);
}

TEST_CASE("sim: the command line overrides the config file", "[e2e][sim][config]") {
  TempDir dir;
  write_file(dir / "exp.json", small_config("direct").dump(2));
  run_ok({"--config", "exp.json", "--np", "3", "--queue-depth", "8", "meta"}, dir.path());
  const Checked c = check_run_in(dir.path());  // shape checks use np = 3 from the summary
  CHECK(c.summary["config"]["np"] == 3);
  CHECK(c.summary["config"]["queue_depth"] == 8);
  CHECK(c.summary["config"]["backend"] == "meta");
  CHECK(c.summary["config"]["client_threads"] == 2);  // from the file
  bool rank2 = false;
  for (const CsvRow& r : c.rows) rank2 = rank2 || r.rank == 2;
  CHECK(rank2);
}

TEST_CASE("sim: --print-config prints a config that reproduces the same run bytes", "[e2e][sim][config]") {
  TempDir dir;
  const fs::path a = dir.subdir("a"), b = dir.subdir("b"), p = dir.subdir("print");
  write_file(a / "exp.json", small_config("delegation").dump(2));
  const std::vector<std::string> cmd = {"--config", "exp.json", "--np", "3", "--seed", "7", "--batch-hold-us", "1.5"};
  std::vector<std::string> print_cmd = cmd;
  print_cmd.push_back("--print-config");
  write_file(p / "exp.json", small_config("delegation").dump(2));

  const Outcome printed = run_ok(print_cmd, p);
  // print-config only prints: nothing is run or written.
  CHECK_FALSE(fs::exists(p / "out.csv"));
  CHECK_FALSE(fs::exists(p / "out.summary.json"));
  json printed_cfg;
  REQUIRE_NOTHROW(printed_cfg = json::parse(printed.out));
  CHECK(printed_cfg["np"] == 3);
  CHECK(printed_cfg["seed"] == 7);
  CHECK(printed_cfg["backend"] == "delegation");
  write_file(b / "printed.json", printed.out);

  run_ok(cmd, a);
  run_ok({"--config", "printed.json"}, b);
  const Checked ca = check_run_in(a);
  // The printed form leaves the summary path to follow the output; the summary records it.
  CHECK_FALSE(printed_cfg.contains("summary"));
  json recorded = ca.summary["config"];
  CHECK(recorded["summary"] == "out.summary.json");
  recorded.erase("summary");
  CHECK(recorded == printed_cfg);
  CHECK(read_file(a / "out.csv") == read_file(b / "out.csv"));
  CHECK(deterministic_bytes(a / "out.summary.json") == deterministic_bytes(b / "out.summary.json"));
}

TEST_CASE("sim: --model changes the simulated machine and a relative model path follows the config file",
          "[e2e][sim][config]") {
  TempDir dir;
  const fs::path cfgdir = dir.subdir("cfg"), run = dir.subdir("run"), base = dir.subdir("base");
  // A slower client wake-up than the built-in default (docs/design_simulator.md §Experiment runner,
  // sim/model.hpp).
  write_file(cfgdir / "slow.json", json{{"client_wake_ns", 20000}}.dump());
  json cfg = small_config("meta");
  cfg["model"] = "slow.json";  // relative to cfg/, not to the working directory run/
  write_file(cfgdir / "exp.json", cfg.dump(2));
  run_ok({"--config", "../cfg/exp.json"}, run);
  const Checked c = check_run_in(run);
  CHECK(fs::path(c.summary["config"]["model"].get<std::string>()) == (cfgdir / "slow.json").lexically_normal());
  CHECK(c.summary["simulator"]["model"]["client_wake_ns"].get<double>() == 20000.0);

  run_ok(small_sim("meta", {"-o", "out.csv"}), base);
  const Checked d = check_run_in(base);
  CHECK(d.summary["simulator"]["model"]["client_wake_ns"].get<double>() != 20000.0);
  // A 20 us wake-up per response slows every client down.
  CHECK(c.summary["runs"][0]["requests"].get<uint64_t>() < d.summary["runs"][0]["requests"].get<uint64_t>());
}
