// benchkv: bad input gives a message naming the problem and a non-zero exit status, and
// writes no output files.
#include <initializer_list>
#include <string>
#include <vector>

#include "e2e/benchkv_run.hpp"

using namespace bkv::e2e;

namespace {

// Requires a clean rejection: status 2 from benchkv itself (every input error, whatever
// finds it: the options, the model file, the output paths), every fragment in the message
// on stderr, and no CSV or summary written.
void require_rejected(const Outcome& o, const fs::path& cwd, std::initializer_list<std::string> fragments) {
  INFO(describe(o));
  CHECK(o.status == 2);
  CHECK_FALSE(o.err.empty());
  for (const auto& f : fragments) CHECK_THAT(o.err, Catch::Contains(f));
  CHECK_FALSE(fs::exists(cwd / "out.csv"));
  CHECK_FALSE(fs::exists(cwd / "out.summary.json"));
}

Outcome run_in(const TempDir& dir, const std::vector<std::string>& args) { return run_benchkv(args, dir.path()); }

}  // namespace

TEST_CASE("bad input: a malformed JSON config file", "[e2e][bad-input]") {
  TempDir dir;
  write_file(dir / "broken.json", "{\"backend\": \"meta\",\n \"np\": 2,\n");
  require_rejected(run_in(dir, {"--config", "broken.json", "-o", "out.csv"}), dir.path(), {"broken.json", "JSON"});
}

TEST_CASE("bad input: a config file that is not a JSON object or does not exist", "[e2e][bad-input]") {
  TempDir dir;
  write_file(dir / "list.json", "[1, 2]");
  require_rejected(run_in(dir, {"--config", "list.json", "-o", "out.csv"}), dir.path(), {"list.json", "object"});
  require_rejected(run_in(dir, {"--config", "absent.json", "-o", "out.csv"}), dir.path(), {"absent.json"});
}

TEST_CASE("bad input: an unknown key in the config file names the key", "[e2e][bad-input]") {
  TempDir dir;
  write_file(dir / "exp.json", R"({"backend": "meta", "transport": "sim", "queue_dept": 4})");
  require_rejected(run_in(dir, {"--config", "exp.json", "-o", "out.csv"}), dir.path(), {"\"queue_dept\""});
}

TEST_CASE("bad input: a config value of the wrong JSON type names the key", "[e2e][bad-input]") {
  TempDir dir;
  write_file(dir / "exp.json", R"({"backend": "meta", "transport": "sim", "np": "two"})");
  require_rejected(run_in(dir, {"--config", "exp.json", "-o", "out.csv"}), dir.path(), {"np", "\"two\""});
}

TEST_CASE("bad input: queue depth not a power of two", "[e2e][bad-input]") {
  TempDir dir;
  require_rejected(run_in(dir, small_sim("meta", {"--queue-depth", "3", "-o", "out.csv"})), dir.path(),
                   {"--queue-depth", "power of two"});
  write_file(dir / "exp.json", R"({"backend": "meta", "transport": "sim", "queue_depth": 6})");
  require_rejected(run_in(dir, {"--config", "exp.json", "-o", "out.csv"}), dir.path(), {"queue_depth", "6"});
}

TEST_CASE("bad input: np 0", "[e2e][bad-input]") {
  TempDir dir;
  require_rejected(run_in(dir, small_sim("meta", {"--np", "0", "-o", "out.csv"})), dir.path(), {"--np"});
}

TEST_CASE("bad input: an unknown backend name", "[e2e][bad-input]") {
  TempDir dir;
  require_rejected(run_in(dir, small_sim("memcached", {"-o", "out.csv"})), dir.path(), {"memcached", "backend"});
}

TEST_CASE("bad input: no backend at all", "[e2e][bad-input]") {
  TempDir dir;
  require_rejected(run_in(dir, small_sim("", {"-o", "out.csv"})), dir.path(), {"backend"});
}

TEST_CASE("bad input: --transport sim with the ucx-am backend", "[e2e][bad-input]") {
  TempDir dir;
  require_rejected(run_in(dir, small_sim("ucx-am", {"-o", "out.csv"})), dir.path(), {"ucx-am"});
}

TEST_CASE("bad input: --trace without --trace-window or with an empty window", "[e2e][bad-input]") {
  TempDir dir;
  require_rejected(run_in(dir, small_sim("meta", {"--trace", "trace.json", "-o", "out.csv"})), dir.path(),
                   {"--trace-window"});
  require_rejected(
      run_in(dir, small_sim("meta", {"--trace", "trace.json", "--trace-window", "50:10", "-o", "out.csv"})),
      dir.path(), {"--trace-window", "50:10"});
  CHECK_FALSE(fs::exists(dir / "trace.json"));
}

TEST_CASE("bad input: a --model file that does not exist", "[e2e][bad-input]") {
  TempDir dir;
  require_rejected(run_in(dir, small_sim("meta", {"--model", "missing-model.json", "-o", "out.csv"})), dir.path(),
                   {"missing-model.json"});
}

TEST_CASE("bad input: a --model path that cannot be read as a file (a directory)", "[e2e][bad-input]") {
  TempDir dir;
  dir.subdir("models");
  require_rejected(run_in(dir, small_sim("meta", {"--model", "models", "-o", "out.csv"})), dir.path(),
                   {"model", "models"});
}

TEST_CASE("bad input: a --model file with an unknown key names the key", "[e2e][bad-input]") {
  TempDir dir;
  write_file(dir / "m.json", R"({"client_wake_ns": 100, "warp_speed": 9})");
  require_rejected(run_in(dir, small_sim("meta", {"--model", "m.json", "-o", "out.csv"})), dir.path(),
                   {"m.json", "warp_speed"});
  write_file(dir / "m2.json", R"({"cpu": {"tea_break_ns": 5}})");
  require_rejected(run_in(dir, small_sim("meta", {"--model", "m2.json", "-o", "out.csv"})), dir.path(),
                   {"m2.json", "tea_break_ns"});
}

TEST_CASE("bad input: a malformed --model file", "[e2e][bad-input]") {
  TempDir dir;
  write_file(dir / "m.json", R"({"cpu": )");
  require_rejected(run_in(dir, small_sim("meta", {"--model", "m.json", "-o", "out.csv"})), dir.path(),
                   {"m.json", "JSON"});
}

TEST_CASE("mlx5: --transport mlx5 without an RDMA device exits with status 2 and a message",
          "[e2e][bad-input]") {
  TempDir dir;
  const Outcome o = run_in(dir, {"--transport", "mlx5", "-d", "0.006", "--interval-ms", "1", "--trim", "1", "-r",
                                 "1", "--no-progress", "-o", "out.csv", "meta"});
  INFO(describe(o));
  CHECK(o.status == 2);
  CHECK_FALSE(o.err.empty());
  CHECK_FALSE(fs::exists(dir / "out.csv"));
}

TEST_CASE("bad input: errors found after the options exit 2 too, and the model's key reads as a key", "[e2e][bad-input]") {
  TempDir dir;
  // An output that is a directory; a summary where nothing can be written.
  require_rejected(run_in(dir, small_sim("meta", {"-o", "/tmp"})), dir.path(), {"--output /tmp", "is a directory"});
  require_rejected(run_in(dir, small_sim("meta", {"-o", "out.csv", "--summary", "/sys/x.json"})), dir.path(),
                   {"--summary /sys/x.json", "cannot be written"});
  // A model key the model does not have: named as a key path, the file's path apart.
  write_file(dir / "m.json", R"({"nic": {"bogus": 1}})");
  const Outcome m = run_in(dir, small_sim("meta", {"--model", "m.json", "-o", "out.csv"}));
  require_rejected(m, dir.path(), {"m.json: model.nic.bogus", "unknown key"});
  CHECK_THAT(m.err, !Catch::Contains("m.json.nic"));
  // The ucx-am baseline in the simulator.
  require_rejected(run_in(dir, small_sim("ucx-am", {"-o", "out.csv"})), dir.path(),
                   {"backend", "ucx-am", "--transport ucx only"});
}

TEST_CASE("bad input: output paths that cannot be written are named in the message", "[e2e][bad-input]") {
  // A directory cannot be made under a regular file: found before the simulation runs
  // (no "simulated" line), with the option's path in the message.
  TempDir dir;
  write_file(dir / "plainfile", "x");
  const std::string missing = (dir / "plainfile").string();
  for (const auto& extra : std::vector<std::vector<std::string>>{
           {"-o", missing + "/out.csv"},
           {"-o", "out.csv", "--summary", missing + "/sum.json"},
           {"-o", "out.csv", "--trace", missing + "/trace.json", "--trace-window", "0:10"},
           {"-o", "out.csv", "--inflight-samples", missing + "/inflight.csv"},
           {"-o", "out.csv", "--step-log", missing + "/steps.bin"}}) {
    std::vector<std::string> args = extra;
    args.insert(args.end(), {"-r", "1"});
    const Outcome o = run_in(dir, small_sim("meta", args));
    INFO(describe(o));
    CHECK(o.status == 2);
    CHECK_THAT(o.err, Catch::Contains(missing));
    CHECK_THAT(o.err, !Catch::Contains("simulated"));
  }
}

TEST_CASE("bad input: a --config that is a directory", "[e2e][bad-input]") {
  TempDir dir;
  fs::create_directories(dir / "cfgdir");
  require_rejected(run_in(dir, {"--config", "cfgdir", "-o", "out.csv"}), dir.path(), {"cfgdir", "not a regular file"});
}

TEST_CASE("bad input: a key given twice in a config or a model file", "[e2e][bad-input]") {
  TempDir dir;
  write_file(dir / "twice.json", "{\"backend\": \"meta\", \"np\": 2, \"np\": 4}");
  require_rejected(run_in(dir, {"--config", "twice.json", "-o", "out.csv"}), dir.path(), {"duplicate key", "\"np\""});
  write_file(dir / "model.json", "{\"cpu\": {\"loop\": 10, \"loop\": 20}}");
  require_rejected(run_in(dir, small_sim("meta", {"--model", "model.json", "-o", "out.csv"})), dir.path(),
                   {"duplicate key", "\"loop\"", "\"cpu\""});
}

TEST_CASE("bad input: JSON nested past the limit is refused with a message, a long value is quoted cut",
          "[e2e][bad-input]") {
  // 100 000 levels: the JSON library's dump() of the value for the error message once
  // recursed once per level and overflowed the stack (SIGSEGV).
  TempDir dir;
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  write_file(dir / "n.json", "{\"np\":" + deep + "}");
  Outcome o = run_in(dir, {"--config", "n.json", "delegation", "-o", "out.csv"});
  CHECK(o.status == 2);
  require_rejected(o, dir.path(), {"n.json", "nested deeper than 64"});
  write_file(dir / "model.json", "{\"cpu\":" + deep + "}");
  o = run_in(dir, small_sim("meta", {"--model", "model.json", "-o", "out.csv"}));
  CHECK(o.status == 2);
  require_rejected(o, dir.path(), {"model.json", "nested deeper than 64"});
  write_file(dir / "a.summary.json", "{\"x\":" + deep + "}");
  o = run_benchkv({"compare", "a.summary.json", "a.summary.json"}, dir.path());
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("a.summary.json") && Catch::Contains("nested deeper than 64"));
  // Within the limit but long: the message quotes a bounded excerpt, not the value.
  write_file(dir / "long.json", "{\"np\": \"" + std::string(100'000, 'x') + "\"}");
  o = run_in(dir, {"--config", "long.json", "delegation", "-o", "out.csv"});
  CHECK(o.status == 2);
  require_rejected(o, dir.path(), {"np", "xxxxxxxx..."});
  CHECK(o.err.size() < 1000);
}

TEST_CASE("bad input: a number beyond the range of a double in a config or a model file names the file",
          "[e2e][bad-input]") {
  // The JSON reader refuses 1e999 with an exception of its own (not a parse error): from a
  // config file it ended benchkv by std::terminate (SIGABRT), from a model file with a
  // message that did not name the file.
  TempDir dir;
  write_file(dir / "huge.json", R"({"backend": "meta", "transport": "sim", "read_ratio": 1e999})");
  require_rejected(run_in(dir, {"--config", "huge.json", "-o", "out.csv"}), dir.path(), {"huge.json", "1e999"});
  write_file(dir / "model.json", R"({"client_wake_ns": 1e999})");
  require_rejected(run_in(dir, small_sim("meta", {"--model", "model.json", "-o", "out.csv"})), dir.path(),
                   {"model.json", "1e999"});
}

TEST_CASE("bad input: two outputs on one path", "[e2e][bad-input]") {
  TempDir dir;
  require_rejected(run_in(dir, small_sim("meta", {"-o", "out.csv", "--summary", "./out.csv"})), dir.path(),
                   {"same file", "out.csv"});
  require_rejected(run_in(dir, small_sim("meta", {"-o", "out.csv", "--trace", "out.summary.json", "--trace-window",
                                                  "0:10"})),
                   dir.path(), {"same file", "out.summary.json"});
}

TEST_CASE("outputs: missing directories are created", "[e2e]") {
  TempDir dir;
  const Outcome ok = run_in(dir, small_sim("meta", {"-o", "deep/er/out.csv", "-r", "1"}));
  INFO(describe(ok));
  CHECK(ok.status == 0);
  CHECK(fs::exists(dir / "deep/er/out.csv"));
  CHECK(fs::exists(dir / "deep/er/out.summary.json"));
  // The step log's directory too, as -o's.
  const Outcome steps = run_in(dir, small_sim("meta", {"-o", "s/out.csv", "--step-log", "logs/x/steps.bin", "-r", "1"}));
  INFO(describe(steps));
  CHECK(steps.status == 0);
  CHECK(fs::file_size(dir / "logs/x/steps.bin") > 0);
}

TEST_CASE("bad input: \"-\" as an output path is refused, no file named \"-\" is made", "[e2e][bad-input]") {
  TempDir dir;
  require_rejected(run_in(dir, small_sim("meta", {"-o", "-", "-r", "1"})), dir.path(),
                   {"output (--output): \"-\" is not a file", "--report"});
  require_rejected(run_in(dir, small_sim("meta", {"-o", "out.csv", "--summary", "-", "-r", "1"})), dir.path(),
                   {"summary (--summary): \"-\" is not a file"});
  CHECK_FALSE(fs::exists(dir / "-"));
  CHECK_FALSE(fs::exists(dir / "-.summary.json"));
}

TEST_CASE("bad input: simulator options under a real transport are refused before anything runs",
          "[e2e][bad-input]") {
  TempDir dir;
  require_rejected(run_in(dir, {"delegation", "--transport", "ucx", "--np", "8", "--trace", "x.json",
                                "--inflight-samples", "y.csv", "-o", "out.csv"}),
                   dir.path(), {"does not apply to --transport ucx"});
  CHECK_FALSE(fs::exists(dir / "x.json"));
  CHECK_FALSE(fs::exists(dir / "y.csv"));
  require_rejected(run_in(dir, {"delegation", "--transport", "ucx", "--model", "missing.json", "-o", "out.csv"}),
                   dir.path(), {"model (--model)", "missing.json", "does not exist"});
}

TEST_CASE("a config file option of another mode: one warning line on stderr, the run goes on", "[e2e]") {
  TempDir dir;
  write_file(dir / "c.json", R"({"poll_budget": 4, "zipf_s": 0.5})");
  const Outcome o = run_ok(small_sim("meta", {"--config", "c.json", "-o", "out.csv", "-r", "1"}), dir.path());
  CHECK_THAT(o.err, Catch::Contains("benchkv: warning: poll_budget (--poll-budget): 4 does not apply to "
                                    "--transport sim, backend meta (it is a Delegation daemon loop policy); the value "
                                    "from config file \"c.json\" is ignored\n"));
  CHECK_THAT(o.err, Catch::Contains("benchkv: warning: zipf_s (--zipf-s): 0.5 does not apply"));
  CHECK(read_json(dir / "out.summary.json")["config"]["poll_budget"] == 1);
}

TEST_CASE("bad input: a simulation that cannot fit in memory is refused up front with an estimate",
          "[e2e][bad-input]") {
  TempDir dir;
  // 10000 nodes x 46 clients, each with an endpoint to every node: ~10^10 endpoints.
  const Outcome o = run_in(dir, small_sim("direct", {"--np", "10000", "--client-threads", "46", "-o", "out.csv"}));
  require_rejected(o, dir.path(), {"needs about", "GiB", "endpoints", "--np"});
  // The estimate counts both sides of every connection, a client's connection to its own
  // rank included: 2 x 10000 x 46 x 10000.
  CHECK_THAT(o.err, Catch::Contains("9200000000 copyrpc endpoints"));
}

TEST_CASE("faults: --fault before the backend, faults in the summary, bad faults name the key", "[e2e][bad-input][faults]") {
  TempDir dir;
  // --fault takes one value each: the positional backend after it is not a fault.
  const Outcome ok = run_ok(small_sim("delegation", {"-o", "out.csv", "--check-exactly-once", "--fault",
                                                     "stall_daemon:node=1,daemon=0,start_us=100,end_us=300", "--fault",
                                                     "link_delay:from=0,to=1,start_us=0,end_us=50,extra_ns=1000"}),
                            dir.path());
  const json s = read_json(dir / "out.summary.json");
  REQUIRE(s["simulator"]["model"]["faults"].size() == 2);
  CHECK(s["simulator"]["model"]["faults"][0]["kind"] == "stall_daemon");
  CHECK(s["simulator"]["model"]["faults"][1]["extra_ns"] == 1000.0);
  CHECK(s["config"]["check_exactly_once"] == true);
  CHECK(s["simulator"]["exactly_once"]["answered"] == s["simulator"]["exactly_once"]["requests"]);
  fs::remove(dir / "out.csv");
  fs::remove(dir / "out.summary.json");
  // Bad faults are bad input like any other option: exit status 2, nothing written.
  const Outcome missing = run_in(dir, small_sim("delegation", {"-o", "out.csv", "--fault", "slow_node:node=1"}));
  require_rejected(missing, dir.path(), {"--fault \"slow_node:node=1\"", "missing key \"start_us\""});
  CHECK(missing.status == 2);
  const Outcome shape = run_in(dir, small_sim("delegation", {"-o", "out.csv", "--fault",
                                                             "stall_daemon:node=0,daemon=5,start_us=1,end_us=2"}));
  require_rejected(shape, dir.path(), {"fault 0 (stall_daemon).daemon", "daemon 5"});
  CHECK(shape.status == 2);
  const Outcome retry = run_in(dir, small_sim("delegation", {"-o", "out.csv", "--fault",
                                                             "packet_loss:from=0,to=1,start_us=0,end_us=9,loss=0.1,"
                                                             "timeout=1,retry_cnt=9"}));
  require_rejected(retry, dir.path(), {".retry_cnt: must be an integer in [0, 7]"});
  CHECK(retry.status == 2);
  // A retransmission timeout no lost packet can meet before the simulation ends (2 runs
  // of 6 ms and at most 1 s of drain: 4.096 us x 2^18 = 1.07 s is too late, 2^17 is not).
  const Outcome late = run_in(dir, small_sim("delegation", {"-o", "out.csv", "--fault",
                                                            "packet_loss:from=0,to=1,start_us=0,end_us=9,loss=0.1,"
                                                            "timeout=18,retry_cnt=1"}));
  require_rejected(late, dir.path(),
                   {"--fault: fault 0 (packet_loss).timeout: 18 can never take effect",
                    "not before the simulation's end at 1.012 s (start-up 0 s, 2 runs x 0.006 s, at most 1 s of drain)",
                    "at most 17 here"});
  CHECK(late.status == 2);
  // A connection that fails mid-run: requests reported failed, in the summary and the
  // report, and the run is consistent (exit status 0, the oracle passes).
  const Outcome failing = run_ok(small_sim("delegation", {"-o", "out.csv", "--check-exactly-once", "--fault",
                                                          "qp_error:node=0,peer=1,at_us=2000"}),
                                 dir.path());
  const json f = read_json(dir / "out.summary.json");
  CHECK(f["totals"]["failed"].get<uint64_t>() > 0);
  CHECK(f["totals"]["issued"].get<uint64_t>() ==
        f["totals"]["completed"].get<uint64_t>() + f["totals"]["failed"].get<uint64_t>());
  CHECK(f["simulator"]["exactly_once"]["failed"] == f["totals"]["failed"]);
  CHECK(f["simulator"]["model"]["faults"][0]["kind"] == "qp_error");
  CHECK_THAT(failing.out, Catch::Contains("requests reported failed (their copyrpc endpoint stopped)"));
  fs::remove(dir / "out.csv");
  fs::remove(dir / "out.summary.json");
  require_rejected(run_in(dir, {"--transport", "sim", "--np", "2", "-d", "0.006", "--interval-ms", "1", "--trim", "1", "-o", "out.csv",
                                "--fault", "stall_daemon:node=0,daemon=0,start_us=1,end_us=2", "rpc"}),
                   dir.path(), {"--fault", "simulated KV runs only"});
}
