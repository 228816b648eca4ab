// Options: JSON form, command line, precedence and validation (apps/benchkv/cli/options.hpp).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "apps/benchkv/cli/options.hpp"
#include "backends/backend_kind.hpp"
#include "sim/faults.hpp"

using namespace bkv::app;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Parsed {
  ParseResult result;
  std::string out;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "benchkv");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  Parsed p{parse_command_line(static_cast<int>(argv.size()), argv.data(), out), ""};
  p.out = out.str();
  return p;
}

// A scratch directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("bkv_options_test_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
};

void require_usage_error(const Parsed& p, const std::string& fragment) {
  INFO("error: " << p.result.error);
  REQUIRE_FALSE(p.result.should_run());
  CHECK(p.result.exit_status == 2);
  CHECK_THAT(p.result.error, Catch::Contains(fragment));
}

}  // namespace

TEST_CASE("defaults are the original benchkv's", "[bench][options]") {
  const auto p = parse({"meta"});
  REQUIRE(p.result.should_run());
  const Options& o = p.result.options;
  CHECK(o.backend == BackendKind::kMeta);
  CHECK(o.transport == TransportKind::kSim);
  CHECK(o.duration == 30);
  CHECK(o.interval_ms == 1000);
  CHECK(o.trim == 3);
  CHECK(o.runs == 3);
  CHECK(o.output == "benchkv.csv");
  CHECK(o.summary == "benchkv.summary.json");
  CHECK(o.device_index == 0);
  CHECK(o.port == 1);
  CHECK(o.gid_index == -1);
  CHECK(o.server_threads == 1);
  CHECK(o.client_threads == 1);
  CHECK(o.queue_depth == 4);
  CHECK(o.key_range == 1024);
  CHECK(o.read_ratio == 0.5);
  CHECK(o.distribution == Distribution::kUniform);
  CHECK(o.zipf_s == 1.0);
  CHECK(o.ring_size == (1u << 20));
  CHECK(o.np == 2);
  CHECK(o.pattern_len == 4096);
  CHECK(o.loop.poll_budget == 1);
  CHECK(o.progress);
  CHECK(epochs_per_run(o) == 30);
  Options expected;
  expected.backend = BackendKind::kMeta;
  CHECK(o == expected);
}

TEST_CASE("the positional backend may come before the options, between them or after them", "[bench][options]") {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"delegation", "--queue-depth", "8", "--np", "4"},
           {"--queue-depth", "8", "delegation", "--np", "4"},
           {"--queue-depth", "8", "--np", "4", "delegation"},
           {"--queue-depth=8", "--np=4", "delegation"}}) {
    const auto p = parse(args);
    INFO(p.result.error);
    REQUIRE(p.result.should_run());
    CHECK(p.result.options.backend == BackendKind::kDelegation);
    CHECK(p.result.options.queue_depth == 8);
    CHECK(p.result.options.np == 4);
  }
  for (const char* b : {"meta", "delegation", "direct", "ucx-am"}) {
    // (ucx-am has no simulated form: it needs --transport ucx)
    const auto p = std::string_view(b) == "ucx-am" ? parse({b, "--transport", "ucx"}) : parse({b});
    INFO(p.result.error);
    REQUIRE(p.result.should_run());
    CHECK(to_string(p.result.options.backend.value()) == b);
  }
}

TEST_CASE("a missing or unknown backend is a usage error", "[bench][options]") {
  require_usage_error(parse({}), "backend: missing");
  require_usage_error(parse({"--np", "4"}), "backend");
  require_usage_error(parse({"metaa"}), "\"metaa\" is not one of meta|delegation|direct|ucx-am");
  require_usage_error(parse({"meta", "direct"}), "direct");
  require_usage_error(parse({"meta", "--no-such-option"}), "--no-such-option");
}

TEST_CASE("a misspelled option is named alone, with the closest option as a hint", "[bench][options]") {
  // "--durtion 1 meta": CLI11 gives "1" to the backend and leaves "meta --durtion" over.
  const auto a = parse({"--durtion", "1", "meta"});
  require_usage_error(a, "unknown option \"--durtion\" (did you mean \"--duration\"?)");
  CHECK(a.result.error.find("meta") == std::string::npos);
  require_usage_error(parse({"meta", "--queue-dept", "4"}), "unknown option \"--queue-dept\" (did you mean \"--queue-depth\"?)");
  require_usage_error(parse({"meta", "--no-progres"}), "(did you mean \"--no-progress\"?)");
  require_usage_error(parse({"--print-confg", "meta"}), "(did you mean \"--print-config\"?)");
  // --name=value: the name alone is named.
  require_usage_error(parse({"--durtion=1", "meta"}), "unknown option \"--durtion\" (did you mean");
  // Nothing close: no hint.
  const auto far = parse({"meta", "--completely-unrelated"});
  require_usage_error(far, "unknown option \"--completely-unrelated\" (see benchkv --help)");
  // Extra words that are not options keep CLI11's message.
  require_usage_error(parse({"meta", "direct"}), "not expected: direct");
}

TEST_CASE("fractions, negative integers and flags on the command line", "[bench][options]") {
  const auto p = parse({"-d", "0.25", "--interval-ms", "12.5", "--trim", "1", "--gid-index", "-1", "--no-progress",
                        "--adaptive-hold", "--read-ratio", "0.95", "-r", "2", "-o", "out/run.csv", "delegation"});
  INFO(p.result.error);
  REQUIRE(p.result.should_run());
  const Options& o = p.result.options;
  CHECK(o.duration == 0.25);
  CHECK(o.interval_ms == 12.5);
  CHECK(epochs_per_run(o) == 20);
  CHECK(o.gid_index == -1);
  CHECK_FALSE(o.progress);
  CHECK(o.loop.adaptive_hold);
  CHECK(o.read_ratio == 0.95);
  CHECK(o.runs == 2);
  CHECK(o.summary == "out/run.summary.json");
  // 0.3 s / 100 ms is exactly 3 epochs (no floating-point truncation to 2)
  const auto q = parse({"-d", "0.3", "--interval-ms", "100", "--trim", "1", "meta"});
  REQUIRE(q.result.should_run());
  CHECK(epochs_per_run(q.result.options) == 3);
}

TEST_CASE("invalid command-line values name the key and the value", "[bench][options]") {
  require_usage_error(parse({"--queue-depth", "3", "meta"}), "queue_depth (--queue-depth): 3 is not a power of two");
  require_usage_error(parse({"--queue-depth", "0", "meta"}), "queue_depth");
  require_usage_error(parse({"--queue-depth", "4.5", "meta"}), "queue_depth (--queue-depth): \"4.5\"");
  require_usage_error(parse({"--queue-depth", "-4", "meta"}), "queue_depth");
  require_usage_error(parse({"--np", "0", "meta"}), "np (--np): 0");
  require_usage_error(parse({"data", "--transport", "sim", "--np", "1"}), "np (--np): 1 must be >= 2 in the data");
  require_usage_error(parse({"--distribution", "zipf", "meta"}), "distribution (--distribution): \"zipf\"");
  require_usage_error(parse({"--transport", "rdma", "meta"}), "transport");
  require_usage_error(parse({"--start-mode", "random", "meta"}), "start_mode");
  require_usage_error(parse({"--read-ratio", "1.5", "meta"}), "read_ratio (--read-ratio): 1.5");
  require_usage_error(parse({"--read-ratio", "-0.1", "meta"}), "read_ratio");
  require_usage_error(parse({"--read-ratio", "nan", "meta"}), "read_ratio");
  require_usage_error(parse({"--read-ratio", "+-0.5", "meta"}), "read_ratio");
  require_usage_error(parse({"--read-ratio", "0.5x", "meta"}), "read_ratio");
  CHECK(parse({"--read-ratio", "+0.25", "meta"}).result.options.read_ratio == 0.25);
  require_usage_error(parse({"--distribution", "zipfian", "--zipf-s", "0", "meta"}), "zipf_s (--zipf-s): 0.0 must be");
  require_usage_error(parse({"--ring-size", "3000", "meta"}), "ring_size (--ring-size): 3000");
  require_usage_error(parse({"--ring-size", "2048", "meta"}), "ring_size");
  // A batch is one RDMA WRITE, at most 2^31 bytes: a larger ring could hold a longer batch.
  require_usage_error(parse({"--ring-size", "4294967296", "meta"}),
                      "ring_size (--ring-size): 4294967296 is not a power of two in [4096, 2^31]");
  CHECK(parse({"--ring-size", "2147483648", "meta"}).result.should_run());
  require_usage_error(parse({"--transport", "mlx5", "--port", "0", "meta"}), "port (--port): 0 must be");
  require_usage_error(parse({"--transport", "mlx5", "--gid-index", "-2", "meta"}), "gid_index (--gid-index): -2 must be");
  require_usage_error(parse({"--server-threads", "0", "meta"}), "server_threads");
  require_usage_error(parse({"--poll-budget", "0", "delegation"}), "poll_budget (--poll-budget): 0 must be");
  require_usage_error(parse({"--batch-hold-us", "-1", "delegation"}), "batch_hold_us (--batch-hold-us): -1.0 must be");
  // Times past the longest run overflowed their conversion to nanoseconds (undefined; a
  // 1e300 us stagger started every client at 0, a 1e300 us hold held nothing).
  require_usage_error(parse({"--batch-hold-us", "1e300", "delegation"}), "batch_hold_us (--batch-hold-us): 1e+300 must be");
  require_usage_error(parse({"--start-mode", "staggered", "--start-stagger-us", "1e300", "meta"}),
                      "start_stagger_us (--start-stagger-us): 1e+300 must be");
  require_usage_error(parse({"--inflight-samples", "i.csv", "--inflight-sample-interval-us", "1e300", "meta"}),
                      "inflight_sample_interval_us (--inflight-sample-interval-us): 1e+300 must be");
  CHECK(parse({"--batch-hold-us", "1e13", "delegation"}).result.should_run());
  CHECK(parse({"--start-mode", "staggered", "--start-stagger-us", "1e13", "meta"}).result.should_run());
  require_usage_error(parse({"--loop-order", "fast", "delegation"}),
                      "loop_order (--loop-order): \"fast\" is not one of original|next-poll");
  require_usage_error(parse({"--inflight-samples", "i.csv", "--inflight-sample-interval-us", "0", "meta"}),
                      "inflight_sample_interval_us (--inflight-sample-interval-us): 0.0 must be");
  require_usage_error(parse({"-d", "0", "meta"}), "duration");
  require_usage_error(parse({"-d", "5", "--interval-ms", "6000", "meta"}), "interval_ms");
  require_usage_error(parse({"-d", "5", "--trim", "3", "meta"}), "trim (--trim): 3 leaves no epoch");
  require_usage_error(parse({"-d", "6", "--trim", "3", "meta"}), "trim");  // 6 epochs, 6 trimmed
  CHECK(parse({"-d", "7", "--trim", "3", "meta"}).result.should_run());     // 7 epochs, 1 kept
  // A run keeps whole epochs only: a remainder would fall into the next run's first epoch.
  require_usage_error(parse({"-d", "0.0025", "--interval-ms", "1", "--trim", "0", "meta"}),
                      "duration (--duration): 0.0025 s is not a whole number of epochs of 1 ms (interval_ms)");
  CHECK(parse({"-d", "0.003", "--interval-ms", "1", "--trim", "0", "meta"}).result.should_run());
  // The suggested durations read as typed (not 0.009899999999999999: a product of doubles)
  // and are whole numbers of epochs.
  for (const auto& [d, iv, suggestion] : {std::tuple{"0.01", "0.3", "; use 0.0099 or 0.0102"},
                                          std::tuple{"2.5", "1000", "; use 2 or 3"},
                                          std::tuple{"0.000001", "0.0003", "; use 0.0000009 or 0.0000012"}}) {
    const auto p = parse({"-d", d, "--interval-ms", iv, "--trim", "0", "meta"});
    require_usage_error(p, "s is not a whole number of epochs");
    CHECK_THAT(p.result.error, Catch::EndsWith(suggestion));
  }
  for (const char* d : {"0.0099", "0.0102"})
    CHECK(parse({"-d", d, "--interval-ms", "0.3", "--trim", "0", "meta"}).result.should_run());
  CHECK(parse({"-d", "0.0025", "--interval-ms", "0.5", "--trim", "0", "meta"}).result.should_run());
  require_usage_error(parse({"--seed", "18446744073709551616", "meta"}), "seed");
  require_usage_error(parse({"--trace", "t.json", "meta"}), "trace_window");
  require_usage_error(parse({"--trace", "t.json", "--trace-window", "10:5", "meta"}), "trace_window");
  require_usage_error(parse({"--trace", "t.json", "--trace-window", "10", "meta"}), "trace_window");
  require_usage_error(parse({"-o", "", "meta"}), "output");
  require_usage_error(parse({"-o", "-", "meta"}), "output (--output): \"-\" is not a file");
  require_usage_error(parse({"--transport", "sim", "--step-log", "-", "delegation"}), "step_log (--step-log): \"-\" is not a file");
  // policies that would overrule each other
  require_usage_error(parse({"--adaptive-poll-budget", "--poll-budget", "4", "delegation"}),
                      "poll_budget (--poll-budget): 4 is not used with adaptive_poll_budget");
  CHECK(parse({"--adaptive-poll-budget", "delegation"}).result.should_run());
  require_usage_error(parse({"--adaptive-hold", "--hold-rtt-multiplier", "2", "delegation"}),
                      "hold_rtt_multiplier (--hold-rtt-multiplier): 2.0 and adaptive_hold would both set the hold time");
  CHECK(parse({"--adaptive-hold", "--batch-hold-us", "2", "delegation"}).result.should_run());
}

TEST_CASE("an option that does not apply to the transport or backend is an error naming it", "[bench][options]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--transport", "ucx", "--trace", "x.json", "--trace-window", "1:2", "delegation"},
       "trace (--trace): \"x.json\" does not apply to --transport ucx, backend delegation"},
      {{"--transport", "ucx", "--inflight-samples", "y.csv", "delegation"}, "inflight_samples (--inflight-samples)"},
      {{"--transport", "ucx", "--np", "8", "delegation"}, "np (--np): 8 does not apply to --transport ucx"},
      {{"--transport", "mlx5", "--start-mode", "staggered", "meta"}, "start_mode (--start-mode)"},
      {{"--transport", "sim", "--device", "mlx5_0", "meta"}, "device (--device): \"mlx5_0\" does not apply"},
      {{"--transport", "ucx", "--port", "2", "meta"}, "port (--port): 2 does not apply to --transport ucx"},
      {{"--poll-budget", "2", "meta"}, "poll_budget (--poll-budget): 2 does not apply to --transport sim, backend meta"},
      {{"--adaptive-hold", "direct"}, "adaptive_hold (--adaptive-hold)"},
      {{"--loop-order", "next-poll", "meta"}, "loop_order (--loop-order): \"next-poll\" does not apply"},
      {{"--zipf-s", "0.9", "meta"}, "zipf_s (--zipf-s): 0.9 does not apply"},
      {{"--start-stagger-us", "3", "meta"}, "start_stagger_us (--start-stagger-us)"},
      {{"--start-burst-clients", "3", "meta"}, "start_burst_clients (--start-burst-clients)"},
      {{"--trace-window", "1:2", "meta"}, "trace_window (--trace-window)"},
      {{"--inflight-sample-interval-us", "5", "meta"}, "inflight_sample_interval_us"},
      {{"--transport", "ucx", "--ring-size", "8192", "ucx-am"}, "ring_size (--ring-size): 8192 does not apply"},
      {{"--np", "3", "--client-threads", "2", "rpc"}, "client_threads (--client-threads): 2 does not apply"},
      {{"--message-size", "64", "meta"}, "message_size (--message-size): 64 does not apply"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    require_usage_error(parse(c.args), c.message);
  }
  // The same options where they apply are accepted.
  CHECK(parse({"--transport", "mlx5", "--device", "mlx5_0", "--port", "2", "meta"}).result.should_run());
  CHECK(parse({"--poll-budget", "2", "delegation"}).result.should_run());
  CHECK(parse({"--distribution", "zipfian", "--zipf-s", "0.9", "meta"}).result.should_run());
  CHECK(parse({"--start-mode", "staggered", "--start-stagger-us", "3", "meta"}).result.should_run());
  CHECK(parse({"--start-mode", "staggered", "--start-stagger-us", "3", "--client-threads", "4", "--start-burst-clients",
               "4", "meta"})
            .result.should_run());
  require_usage_error(parse({"--start-mode", "staggered", "--start-stagger-us", "3", "--client-threads", "4",
                             "--start-burst-clients", "5", "meta"}),
                      "start_burst_clients (--start-burst-clients): 5 must be at most client_threads (4)");
  CHECK(parse({"--transport", "ucx", "ucx-am"}).result.should_run());
  // A staggered start without a spread would silently be the synchronized start.
  require_usage_error(parse({"--start-mode", "staggered", "meta"}),
                      "start_stagger_us (--start-stagger-us): 0.0 must be > 0 with start_mode staggered");
}

TEST_CASE("a config file option for another mode is a one-line warning and is dropped", "[bench][options]") {
  TempDir dir;
  const auto cfg = dir.write("c.json", R"({"np": 8, "trace": "t.json", "trace_window": "1:2", "poll_budget": 2,
                                           "inflight_samples": "i.csv"})");
  const auto p = parse({"--config", cfg, "--transport", "ucx", "delegation"});
  INFO(p.result.error);
  REQUIRE(p.result.should_run());
  const Options& o = p.result.options;
  CHECK(o.np == Options{}.np);
  CHECK(o.trace.empty());
  CHECK_FALSE(o.trace_window.has_value());
  CHECK(o.inflight_samples.empty());
  CHECK(o.loop.poll_budget == 2);  // applies to delegation: kept
  REQUIRE(p.result.warnings.size() == 4);
  for (const std::string& w : p.result.warnings) {
    CHECK(w.find('\n') == std::string::npos);
    CHECK_THAT(w, Catch::Contains("is ignored") && Catch::Contains(cfg) && Catch::Contains("--transport ucx"));
  }
  CHECK_THAT(p.result.warnings[0], Catch::StartsWith("np (--np): 8"));
  // Given on the command line as well, the option is an error again.
  require_usage_error(parse({"--config", cfg, "--transport", "ucx", "--np", "4", "delegation"}), "np (--np): 4");
  // In the mode the file was written for, nothing is dropped and nothing is said.
  const auto sim = parse({"--config", cfg, "delegation"});
  REQUIRE(sim.result.should_run());
  CHECK(sim.result.warnings.empty());
  CHECK(sim.result.options.np == 8);
}

TEST_CASE("trace window parsing", "[bench][options]") {
  const auto p = parse({"--trace", "t.json", "--trace-window", "1500:2500.5", "meta"});
  REQUIRE(p.result.should_run());
  REQUIRE(p.result.options.trace_window.has_value());
  CHECK(p.result.options.trace_window->begin_ns() == 1'500'000);
  CHECK(p.result.options.trace_window->end_ns() == 2'500'500);
}

TEST_CASE("inflight_samples auto follows the output path, from a config file or the command line", "[bench][options]") {
  TempDir dir;
  const auto cfg = dir.write("c.json", R"({"backend": "delegation", "transport": "sim", "output": "out/c.csv",
      "inflight_samples": "auto"})");
  const auto from_file = parse({"--config", cfg});
  REQUIRE(from_file.result.should_run());
  CHECK(from_file.result.options.inflight_samples == "out/c.inflight.csv");
  // -o on the command line moves the samples with it: two runs of one config given
  // different outputs do not write one samples file
  const auto moved = parse({"--config", cfg, "-o", "b/B.csv"});
  REQUIRE(moved.result.should_run());
  CHECK(moved.result.options.inflight_samples == "b/B.inflight.csv");
  CHECK(moved.result.options.summary == "b/B.summary.json");
  // an explicit path stays as given
  const auto given = parse({"--config", cfg, "-o", "B.csv", "--inflight-samples", "x.csv"});
  REQUIRE(given.result.should_run());
  CHECK(given.result.options.inflight_samples == "x.csv");
}

TEST_CASE("print-config leaves the paths that follow --output to follow it", "[bench][options]") {
  TempDir dir;
  const auto cfg = dir.write("c.json", R"({"backend": "delegation", "transport": "sim", "output": "out/c.csv",
      "inflight_samples": "auto"})");
  const auto printed = parse({"--config", cfg, "--print-config"});
  const json j = json::parse(printed.out);
  CHECK_FALSE(j.contains("summary"));
  CHECK(j["inflight_samples"] == "auto");
  CHECK(j["output"] == "out/c.csv");
  CHECK(to_json(printed.result.options)["summary"] == "out/c.summary.json");  // the summary records the path
  // reused with another output, nothing of the first run is written over
  const auto file = dir.write("printed.json", printed.out);
  const auto again = parse({"--config", file, "-o", "x/B.csv"});
  REQUIRE(again.result.should_run());
  CHECK(again.result.options.summary == "x/B.summary.json");
  CHECK(again.result.options.inflight_samples == "x/B.inflight.csv");
  // a summary path given apart from the output stays in the printed file
  const auto pinned = parse({"--config", cfg, "--summary", "s.json", "--print-config"});
  CHECK(json::parse(pinned.out)["summary"] == "s.json");
}

TEST_CASE("config file values are defaults the command line overrides", "[bench][options]") {
  TempDir dir;
  const auto cfg = dir.write("exp/c1.json", R"({"backend": "delegation", "queue_depth": 32, "np": 8,
      "client_threads": 46, "adaptive_hold": true, "output": "c1.csv", "duration": 10, "runs": 1})");

  SECTION("the file alone runs (backend from the file)") {
    const auto p = parse({"--config", cfg});
    INFO(p.result.error);
    REQUIRE(p.result.should_run());
    const Options& o = p.result.options;
    CHECK(o.backend == BackendKind::kDelegation);
    CHECK(o.queue_depth == 32);
    CHECK(o.np == 8);
    CHECK(o.client_threads == 46);
    CHECK(o.loop.adaptive_hold);
    CHECK(o.output == "c1.csv");
    CHECK(o.summary == "c1.summary.json");
    CHECK(o.key_range == 1024);  // untouched default
  }
  SECTION("command-line values win, before or after --config") {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--config", cfg, "--queue-depth", "8", "--no-adaptive-hold", "meta", "-o", "x.csv"},
             {"meta", "--queue-depth", "8", "--no-adaptive-hold", "-o", "x.csv", "--config", cfg}}) {
      const auto p = parse(args);
      INFO(p.result.error);
      REQUIRE(p.result.should_run());
      const Options& o = p.result.options;
      CHECK(o.backend == BackendKind::kMeta);
      CHECK(o.queue_depth == 8);
      CHECK_FALSE(o.loop.adaptive_hold);
      CHECK(o.np == 8);
      CHECK(o.output == "x.csv");
      CHECK(o.summary == "x.summary.json");
    }
  }
  SECTION("an invalid file value overridden on the command line is fine") {
    const auto bad = dir.write("qd3.json", R"({"queue_depth": 3})");
    REQUIRE(parse({"--config", bad, "--queue-depth", "4", "meta"}).result.should_run());
    require_usage_error(parse({"--config", bad, "meta"}), "queue_depth (--queue-depth): 3 is not a power of two");
  }
  SECTION("an explicit summary path in the file survives a new output path") {
    const auto s = dir.write("s.json", R"({"summary": "keep.json", "output": "a.csv"})");
    const auto p = parse({"--config", s, "-o", "b.csv", "meta"});
    REQUIRE(p.result.should_run());
    CHECK(p.result.options.summary == "keep.json");
    CHECK(p.result.options.output == "b.csv");
  }
}

TEST_CASE("config file errors: malformed JSON, unknown keys, wrong types", "[bench][options]") {
  TempDir dir;
  require_usage_error(parse({"--config", dir.write("bad.json", R"({"queue_depth": 4,})"), "meta"}),
                      "is not valid JSON");
  require_usage_error(parse({"--config", dir.write("trunc.json", R"({"queue_depth": )"), "meta"}), "trunc.json");
  require_usage_error(parse({"--config", (dir.path / "missing.json").string(), "meta"}), "does not exist");
  require_usage_error(parse({"--config", dir.write("arr.json", "[1, 2]"), "meta"}), "expected a JSON object");
  const auto unk = parse({"--config", dir.write("unk.json", R"({"queue_depht": 4})"), "meta"});
  require_usage_error(unk, "unknown key \"queue_depht\"");
  CHECK_THAT(unk.result.error, Catch::Contains("did you mean \"queue_depth\"") && Catch::Contains("unk.json"));
  require_usage_error(parse({"--config", dir.write("t1.json", R"({"queue_depth": "32"})"), "meta"}),
                      "queue_depth (--queue-depth): expected an unsigned integer, got \"32\"");
  require_usage_error(parse({"--config", dir.write("t2.json", R"({"queue_depth": 4.0})"), "meta"}), "queue_depth");
  require_usage_error(parse({"--config", dir.write("t3.json", R"({"queue_depth": -4})"), "meta"}),
                      "expected a non-negative integer");
  require_usage_error(parse({"--config", dir.write("t4.json", R"({"progress": 1})"), "meta"}),
                      "progress (--progress): expected a boolean");
  require_usage_error(parse({"--config", dir.write("t5.json", R"({"duration": "10"})"), "meta"}),
                      "duration (--duration): expected a number, got \"10\"");
}

TEST_CASE("options_from_json reports the key in OptionError", "[bench][options]") {
  const auto key_of = [](const json& j) -> std::string {
    try {
      (void)options_from_json(j, "");
    } catch (const OptionError& e) {
      return e.key();
    }
    return "(no error)";
  };
  CHECK(key_of(json{{"no_such_key", 1}}) == "no_such_key");
  CHECK(key_of(json{{"queue_depth", 6}}) == "queue_depth");
  CHECK(key_of(json{{"np", 0}}) == "np");
  CHECK(key_of(json{{"distribution", "normal"}}) == "distribution");
  CHECK(key_of(json{{"read_ratio", true}}) == "read_ratio");
  CHECK(key_of(json{{"port", 70000}}) == "port");
  CHECK(key_of(json{{"port", uint64_t{1} << 40}}) == "port");
  CHECK(key_of(json{{"gid_index", "0"}}) == "gid_index");
  CHECK(key_of(json{{"np", -3}}) == "np");
  CHECK(key_of(json{{"np", 3.0}}) == "np");
  CHECK(key_of(json{{"config", "x.json"}}) == "config");
  // ucx-am is UCX itself: it needs --transport ucx (no simulated form).
  CHECK(key_of(json{{"backend", "ucx-am"}, {"np", 3}}) == "backend");
  CHECK(key_of(json{{"backend", "ucx-am"}, {"transport", "ucx"}}) == "(no error)");
  CHECK(key_of(json{{"backend", nullptr}}) == "(no error)");
  CHECK(key_of(json::array()) == "config");
  // The two size options read alike: one size as a number or a string, several as a string.
  for (const char* key : {"value_size", "message_size"}) {
    INFO(key);
    const json mode = std::string(key) == "value_size" ? "data" : "rpc";
    CHECK(key_of(json{{"backend", mode}, {key, 64}}) == "(no error)");
    CHECK(key_of(json{{"backend", mode}, {key, "64"}}) == "(no error)");
    CHECK(key_of(json{{"backend", mode}, {key, -64}}) == key);
    CHECK(key_of(json{{"backend", mode}, {key, 64.5}}) == key);
  }
  CHECK(options_from_json(json{{"backend", "data"}, {"value_size", 64}}, "").value_size == "64");
}

TEST_CASE("relative model paths: config file directory vs working directory", "[bench][options]") {
  TempDir dir;
  const auto cfg = dir.write("configs/exp.json", R"({"model": "../models/nic.json"})");
  const auto model = dir.write("models/nic.json", "{}");
  dir.write("local/m.json", "{}");

  const auto p = parse({"--config", cfg, "meta"});
  REQUIRE(p.result.should_run());
  CHECK(fs::path(p.result.options.model) == fs::absolute(dir.path / "models" / "nic.json").lexically_normal());
  CHECK(fs::path(p.result.options.model).is_absolute());

  // On the command line a relative path is relative to the working directory.
  const std::string from_cwd = fs::relative(dir.path / "local" / "m.json", fs::current_path()).string();
  const auto q = parse({"--config", cfg, "--model", from_cwd, "meta"});
  REQUIRE(q.result.should_run());
  CHECK(fs::path(q.result.options.model) == (fs::current_path() / from_cwd).lexically_normal());

  const auto abs = dir.write("abs.json", R"({"model": ")" + model + R"("})");
  const auto r = parse({"--config", abs, "meta"});
  REQUIRE(r.result.should_run());
  CHECK(r.result.options.model == model);

  // A model file that does not exist is an error, on the command line and in a config
  // file, in every mode (even where the model would not apply).
  require_usage_error(parse({"--model", (dir.path / "nope.json").string(), "meta"}), "does not exist");
  const auto missing = dir.write("missing.json", R"({"model": "nope.json"})");
  require_usage_error(parse({"--config", missing, "meta"}), "nope.json");
  require_usage_error(parse({"--config", missing, "--transport", "ucx", "meta"}), "does not exist");
  require_usage_error(parse({"--model", dir.path.string(), "meta"}), "is not a regular file");

  CHECK(options_from_json(json{{"model", "m.json"}}, "/base/dir").model == "/base/dir/m.json");
  CHECK(options_from_file(cfg).model == p.result.options.model);
  CHECK(options_from_json(json{{"model", ""}}, "/base").model.empty());
}

TEST_CASE("print-config prints a configuration that reads back to the same options", "[bench][options]") {
  TempDir dir;
  const std::string model = dir.write("m.json", "{}");
  // Every option in one of two modes: the simulator with Delegation (the simulator's
  // options and the loop policies) and an RDMA transport (the device options).
  const bool sim = GENERATE(true, false);
  CAPTURE(sim);
  std::vector<std::string> args = {
      "-d", "2.5", "--interval-ms", "250", "--trim", "2", "-r", "5", "-o", "o.csv", "--server-threads", "2",
      "--client-threads", "46", "--queue-depth", "32", "--key-range", "4096", "--read-ratio", "0.3",
      "--distribution", "zipfian", "--zipf-s", "0.99", "--ring-size", "4194304", "--seed", "18446744073709551615",
      "--pattern-len", "1000", "--no-progress"};
  const std::vector<std::string> sim_args = {
      "--transport", "sim", "--np", "16", "--poll-budget", "4", "--batch-hold-us", "1.5",
      "--hold-rtt-multiplier", "0.75", "--loop-order", "next-poll", "--model", model,
      "--start-mode", "staggered", "--start-stagger-us", "3.25", "--inflight-samples", "inf.csv", "--inflight-sample-interval-us", "2.5",
      "--trace", "t.json", "--trace-window", "100.5:200.25", "delegation"};
  const std::vector<std::string> rdma_args = {"--transport", "mlx5", "--device", "mlx5_1", "--device-index", "3",
                                              "--port", "2", "--gid-index", "3", "direct"};
  const auto& mode_args = sim ? sim_args : rdma_args;
  args.insert(args.end(), mode_args.begin(), mode_args.end());
  const auto run = parse(args);
  INFO(run.result.error);
  REQUIRE(run.result.should_run());

  auto with_print = args;
  with_print.push_back("--print-config");
  const auto printed = parse(with_print);
  REQUIRE_FALSE(printed.result.should_run());
  CHECK(printed.result.exit_status == 0);
  const json j = json::parse(printed.out);
  CHECK(j == to_reusable_json(run.result.options));

  // read back from the printed text, as a config file would be
  const auto file = dir.write("printed.json", printed.out);
  CHECK(options_from_file(file) == run.result.options);
  CHECK(options_from_json(j, "/elsewhere") == run.result.options);
  const auto again = parse({"--config", file});
  REQUIRE(again.result.should_run());
  CHECK(again.result.options == run.result.options);

  // every option is present in the JSON form, at its default or not (a later change of a
  // default stays visible in old summaries), except the data benchmark's own two
  CHECK(to_json(run.result.options).size() == 48);
  CHECK(j.size() == 47);  // the summary path follows -o here, so it is left out of the printed form
  CHECK_FALSE(j.contains("summary"));
  CHECK_FALSE(j.contains("value_size"));
  CHECK_FALSE(j.contains("data_backend"));
  for (const char* k : {"loop_order", "check_exactly_once", "ring_page_batch", "event_set", "step_log"})
    CHECK(j.contains(k));
  CHECK(j["loop_order"] == (sim ? "next-poll" : "original"));
  CHECK(j["check_exactly_once"] == false);
  CHECK(j["backend"] == (sim ? "delegation" : "direct"));
  CHECK(j["trace_window"] == (sim ? "100.5:200.25" : ""));
  CHECK(j["device"] == (sim ? "" : "mlx5_1"));
  CHECK(j["seed"].get<uint64_t>() == 18446744073709551615ull);

  // defaults round-trip too, and print-config needs no backend
  const auto defaults = parse({"--print-config"});
  CHECK(defaults.result.exit_status == 0);
  CHECK(options_from_json(json::parse(defaults.out), "") == Options{});
}

TEST_CASE("--help of each mode lists that mode's options, in plain notation, with default and JSON key",
          "[bench][options]") {
  const auto kv = parse({"--help"}), rpc = parse({"rpc", "--help"}), data = parse({"--help", "data"});
  for (const auto* p : {&kv, &rpc, &data}) {
    REQUIRE_FALSE(p->result.should_run());
    CHECK(p->result.exit_status == 0);
    CHECK(p->result.error.empty());
    // No parser notation (a flag and its negation as "--x,--no-x{false}").
    CHECK_THAT(p->out, !Catch::Contains("{false}") && !Catch::Contains(",--no-") && !Catch::Contains("Excludes"));
    CHECK_THAT(p->out, Catch::Contains("BENCHKV_PEER_TIMEOUT"));
    for (const char* s : {"--config", "--print-config", "-d,", "-r,", "-o,", "--no-progress"})
      CHECK_THAT(p->out, Catch::Contains(s));
  }
  // --repeat applies to every simulated mode: each help lists it and says what it gives;
  // the positional backend word is a KV option.
  CHECK_THAT(kv.out, Catch::Contains("[JSON: repeat]") && Catch::Contains("Independent repetitions") &&
                         Catch::Contains("[JSON: backend]"));
  CHECK_THAT(kv.out, Catch::Contains("Usage: benchkv [OPTIONS] [backend]\n"));
  // The first line names every backend by the word the CLI takes, and the help names
  // every mode a word of its own runs, probe and calibrate included (benchkv's main
  // takes those two before the options).
  const std::string first_line = kv.out.substr(0, kv.out.find('\n'));
  for (const auto& b : bkv::backend::kBackendNames) {
    INFO(b.name << " in: " << first_line);
    CHECK(std::regex_search(first_line, std::regex("(^|[^-\\w])" + std::string(b.name) + "([^-\\w]|$)")));
  }
  for (const char* mode : {"rpc", "data", "sweep", "compare", "probe", "calibrate"}) {
    INFO(mode);
    CHECK_THAT(kv.out, Catch::Contains(std::string("benchkv ") + mode + " --help") ||
                           Catch::Contains(std::string("benchkv ") + mode + "\n--help"));
  }
  CHECK_THAT(kv.out, Catch::Contains("benchkv rpc|data|sweep|compare|probe|calibrate"));
  CHECK_THAT(rpc.out, Catch::Contains("Usage: benchkv rpc [OPTIONS]\n"));
  CHECK_THAT(data.out, Catch::Contains("Usage: benchkv data [OPTIONS]\n"));
  for (const auto* p : {&rpc, &data})
    CHECK_THAT(p->out, Catch::Contains("[JSON: repeat]") && Catch::Contains("Independent repetitions") &&
                           !Catch::Contains("[JSON: backend]") && !Catch::Contains("required to run"));
  // What a signal leaves: real runs write too (rank 0, and a KV run's other ranks), not "nothing".
  for (const auto* p : {&kv, &rpc, &data})
    CHECK_THAT(p->out, !Catch::Contains("write nothing") && Catch::Contains("rank 0 to the named files"));
  // Every option, with its default and JSON key, in the help of each mode it applies to.
  Options data_defaults;
  data_defaults.mode = Mode::kData;
  json every = to_json(Options{});
  every.update(to_json(data_defaults));
  for (const auto& [key, value] : every.items()) {
    INFO(key);
    std::string flag = "--" + key;
    for (char& c : flag) c = (c == '_') ? '-' : c;
    const std::string with_default = "[default: " + value.dump() + "] [JSON: " + key + "]";
    int listed = 0;
    for (const auto* p : {&kv, &rpc, &data}) {
      if (p->out.find("[JSON: " + key + "]") == std::string::npos) continue;
      ++listed;
      if (key != "backend") CHECK_THAT(p->out, Catch::Contains(flag));
      if (key != "summary" && key != "backend") CHECK_THAT(p->out, Catch::Contains(with_default));
    }
    CHECK(listed > 0);
  }
  // Each mode's own options, and not the others'.
  CHECK_THAT(kv.out, Catch::Contains("--key-range") && Catch::Contains("--poll-budget") && Catch::Contains("--fault"));
  CHECK_THAT(kv.out, !Catch::Contains("--message-size") && !Catch::Contains("--value-size"));
  CHECK_THAT(rpc.out, Catch::StartsWith("benchkv rpc:") && Catch::Contains("--message-size") &&
                          Catch::Contains("--endpoints") && Catch::Contains("Mrps"));
  CHECK_THAT(rpc.out, !Catch::Contains("--key-range") && !Catch::Contains("--poll-budget") &&
                          !Catch::Contains("--value-size") && !Catch::Contains("--fault"));
  CHECK_THAT(data.out, Catch::StartsWith("benchkv data:") && Catch::Contains("--value-size") &&
                           Catch::Contains("--data-backend") && Catch::Contains("[16, 67108864]"));
  CHECK_THAT(data.out, !Catch::Contains("--message-size") && !Catch::Contains("--poll-budget"));
  // The data report has no configuration header and no [OVERALL] lines: its help promises none.
  CHECK_THAT(data.out, !Catch::Contains("[OVERALL]"));
  CHECK_THAT(kv.out, Catch::Contains("meta|delegation|direct|ucx-am"));
  // --fault names every kind the simulator injects, with its keys after it.
  for (uint8_t k = 0; k <= static_cast<uint8_t>(bkv::sim::FaultKind::kRnrStorm); ++k) {
    CHECK_THAT(kv.out, Catch::Contains(std::string(bkv::sim::to_string(static_cast<bkv::sim::FaultKind>(k))) + ":"));
  }
}

TEST_CASE("a flag and its --no- form together are refused, and --repeat outside simulated runs", "[bench][options]") {
  for (const auto& args : {std::vector<std::string>{"--progress", "--no-progress", "meta"},
                           std::vector<std::string>{"--no-progress", "meta", "--progress"}}) {
    const auto both = parse(args);
    REQUIRE_FALSE(both.result.should_run());
    CHECK(both.result.exit_status == 2);
    CHECK_THAT(both.result.error, Catch::Contains("--progress and --no-progress"));
  }
  CHECK(parse({"--no-progress", "meta"}).result.should_run());
  CHECK_FALSE(parse({"--no-progress", "meta"}).result.options.progress);
  CHECK(parse({"--progress", "meta"}).result.options.progress);
  for (const char* mode : {"rpc", "data", "meta"}) {
    CHECK(parse({mode, "--repeat", "2"}).result.should_run());  // simulated: every mode
    const auto r = parse({mode, "--repeat", "2", "--transport", "ucx"});
    REQUIRE_FALSE(r.result.should_run());
    CHECK(r.result.exit_status == 2);
    CHECK_THAT(r.result.error, Catch::Contains("--repeat") && Catch::Contains("real run") &&
                                   Catch::Contains("another --seed"));
  }
  // A repetition's figures are means over its runs: one size only.
  for (const auto& args : {std::vector<std::string>{"rpc", "--repeat", "2", "--message-size", "8,64"},
                           std::vector<std::string>{"data", "--repeat", "2", "--value-size", "64..256"}}) {
    const auto r = parse(args);
    REQUIRE_FALSE(r.result.should_run());
    CHECK(r.result.exit_status == 2);
    CHECK_THAT(r.result.error, Catch::Contains("--repeat") && Catch::Contains("repeats one"));
  }
  // A per-execution output file: the message names where it may have been set (a config
  // file sets inflight_samples to "auto") and the flag that turns it off.
  for (const auto& [flag, key] : {std::pair<std::string, std::string>{"--inflight-samples", "inflight_samples"},
                                  std::pair<std::string, std::string>{"--step-log", "step_log"}}) {
    const auto r = parse({"meta", "--repeat", "2", flag, "x.out"});
    REQUIRE_FALSE(r.result.should_run());
    CHECK(r.result.exit_status == 2);
    CHECK_THAT(r.result.error, Catch::Contains("the config file's \"" + key + "\"") &&
                                   Catch::Contains("pass " + flag + " \"\" or run one seed"));
  }
}

TEST_CASE("validate() on a hand-built Options", "[bench][options]") {
  Options o;
  CHECK_THROWS_AS(validate(o), OptionError);  // no backend
  validate(o, /*require_backend=*/false);
  o.backend = BackendKind::kMeta;
  validate(o);
  o.queue_depth = 12;
  try {
    validate(o);
    FAIL("no error");
  } catch (const OptionError& e) {
    CHECK(e.key() == "queue_depth");
    CHECK_THAT(e.what(), Catch::Contains("12"));
  }
  o.queue_depth = 4;
  o.read_ratio = std::nan("");
  CHECK_THROWS_WITH(validate(o), Catch::Contains("read_ratio"));
  o.read_ratio = 0.5;
  // Runs are back to back: runs x duration is a time, bounded like one duration (a
  // larger product overflowed the nanosecond counts of the later runs' start times).
  o.duration = 1e7;
  o.interval_ms = 1e6;
  o.runs = 1;
  validate(o);
  o.runs = 2;
  CHECK_THROWS_WITH(validate(o), Catch::Contains("runs") && Catch::Contains("longest execution"));
}

TEST_CASE("workload_config carries the workload options", "[bench][options]") {
  Options o;
  o.key_range = 77;
  o.read_ratio = 0.25;
  o.distribution = Distribution::kZipfian;
  o.zipf_s = 1.5;
  o.seed = 9;
  o.pattern_len = 10;
  const auto w = workload_config(o, 5);
  CHECK(w.num_ranks == 5);
  CHECK(w.key_range == 77);
  CHECK(w.read_ratio == 0.25);
  CHECK(w.distribution == Distribution::kZipfian);
  CHECK(w.zipf_s == 1.5);
  CHECK(w.seed == 9);
  CHECK(w.pattern_len == 10);
}
