// benchkv --transport sim (KV mode) stopped by SIGINT or SIGTERM: the run stops
// measuring at the next epoch's end, writes the CSV of the epochs it finished and a
// summary marked "interrupted", says so on stderr and exits 128 + the signal.
//
// A signal at a known point: the child blocks the signal and raises it before exec (a
// blocked signal stays pending across exec, even one whose action is "ignore"); benchkv
// unblocks it when it installs its handlers, before the first epoch, so the run stops
// exactly after epoch 1 of run 0. A signal sent later, from outside, while the run
// prints its progress lines, stops it at a later epoch.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "e2e/benchkv_run.hpp"

using namespace bkv::e2e;

namespace {

struct Ended {
  bool exited = false;
  int code = -1;  // exit status, or the signal that ended it
  std::string err;
};

// Runs benchkv in `dir`, stdout to /dev/null. pending: the signal is raised in the child,
// blocked, before exec (ignore_first: with its action set to "ignore", as a shell sets
// SIGINT for a command started with &). Otherwise, with after_line non-empty, `sig` is
// sent once a stderr line containing after_line was read.
Ended run_signalled(const std::vector<std::string>& args, const fs::path& dir, int sig, bool pending,
                    bool ignore_first, const std::string& after_line = "") {
  std::vector<std::string> argv{BENCHKV_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildPipe err;
  const pid_t pid = start_child(argv, dir,
                                {.err_fd = err.write_fd, .ignored = ignore_first ? sig : 0, .pending = pending ? sig : 0});
  err.close_write();
  Ended e;
  bool sent = after_line.empty();
  e.err = err.read_all([&](const std::string& text) {
    if (!sent && text.find(after_line) != std::string::npos) {
      REQUIRE(::kill(pid, sig) == 0);
      sent = true;
    }
  });
  const int ws = wait_child(pid);
  e.exited = WIFEXITED(ws);
  e.code = e.exited ? WEXITSTATUS(ws) : WTERMSIG(ws);
  CHECK(sent);
  return e;
}

// The CSV rows of an interrupted run: run 0 only, every client, kept epochs from trim
// up to epochs_done, and their sums as the summary's run 0 states them.
void check_partial(const fs::path& dir, uint64_t trim, uint64_t epochs_done, uint64_t np, uint64_t clients) {
  const std::vector<CsvRow> rows = read_csv(dir / "out.csv");
  const json s = read_json(dir / "out.summary.json");
  const uint64_t kept = epochs_done > trim ? epochs_done - trim : 0;
  CHECK(rows.size() == np * clients * kept);
  uint64_t sum = 0;
  for (const CsvRow& r : rows) {
    CHECK(r.run == 0);
    CHECK(r.epoch >= trim);
    CHECK(r.epoch < epochs_done);
    sum += r.requests;
  }
  // Every request issued was answered: the clients stopped issuing and drained.
  CHECK(s["totals"]["issued"] == s["totals"]["completed"]);
  CHECK(s["totals"]["errors"] == 0);
  if (kept == 0) {
    CHECK(s["runs"].empty());
    return;
  }
  REQUIRE(s["runs"].size() == 1);
  const json& r = s["runs"][0];
  CHECK(r["run"] == 0);
  CHECK(r["epochs_done"] == epochs_done);
  CHECK(r["end_kept_epoch"] == epochs_done);
  CHECK(r["requests"] == sum);
  CHECK(r["duration_ns"] == kept * 1'000'000);
  CHECK(r["issued"] == s["totals"]["issued"]);
  CHECK(r["latency"].is_object());
  CHECK(s["daemons"].size() == np);  // rank x daemon (one daemon each), run 0
}

// The marks of a run stopped by `sig` pending at exec, after epoch 1 of run 0: exit status
// 128 + sig, the line on stderr and the summary's "interrupted" object. Returns the summary.
json check_stopped_after_first_epoch(const Ended& e, const fs::path& dir, int sig) {
  const std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
  INFO(e.err);
  CHECK(e.exited);
  CHECK(e.code == 128 + sig);
  CHECK_THAT(e.err, Catch::Contains("interrupted by " + name + " after epoch 1 of run 0"));
  const json s = read_json(dir / "out.summary.json");
  CHECK(s["interrupted"] == json({{"signal", name}, {"run", 0}, {"epochs_done", 1}}));
  return s;
}

}  // namespace

TEST_CASE("interrupt: SIGINT at a known point keeps the finished epochs, exit 130", "[e2e][interrupt]") {
  TempDir dir;
  const Ended e = run_signalled(small_sim("meta", {"--trim", "0", "-o", "out.csv"}), dir.path(), SIGINT, true, false);
  INFO(e.err);
  check_stopped_after_first_epoch(e, dir.path(), SIGINT);
  check_partial(dir.path(), 0, 1, 2, 2);
}

TEST_CASE("interrupt: SIGTERM, and SIGINT inherited ignored, stop the run too", "[e2e][interrupt]") {
  {
    TempDir dir;
    const Ended e = run_signalled(small_sim("delegation", {"--trim", "0", "-o", "out.csv"}), dir.path(), SIGTERM, true,
                                  false);
    INFO(e.err);
    check_stopped_after_first_epoch(e, dir.path(), SIGTERM);
    check_partial(dir.path(), 0, 1, 2, 2);
  }
  {
    // Started with & from a script: SIGINT ignored. The run restores it.
    TempDir dir;
    const Ended e = run_signalled(small_sim("direct", {"--trim", "0", "-o", "out.csv"}), dir.path(), SIGINT, true, true);
    INFO(e.err);
    check_stopped_after_first_epoch(e, dir.path(), SIGINT);
    check_partial(dir.path(), 0, 1, 2, 2);
  }
  {
    // Stopped before any kept epoch finished: no run in the outputs, still a summary.
    TempDir dir;
    const Ended e = run_signalled(small_sim("meta", {"-o", "out.csv"}), dir.path(), SIGINT, true, false);
    INFO(e.err);
    CHECK(e.code == 130);
    CHECK(read_json(dir / "out.summary.json")["interrupted"]["epochs_done"] == 1);
    check_partial(dir.path(), 1, 1, 2, 2);
  }
}

TEST_CASE("interrupt: with --life-s, a run stopped before its first kept epoch has no life figures, exit 130",
          "[e2e][interrupt]") {
  // The life statistics scale the kept epochs' loops to fill the life: stopped after epoch
  // 1 of run 0 with --trim 1, no kept epoch finished, and there is nothing to scale.
  {
    TempDir dir;
    const Ended e = run_signalled(small_sim("delegation", {"--life-s", "1", "-o", "out.csv"}), dir.path(), SIGINT, true,
                                  false);
    INFO(e.err);
    check_stopped_after_first_epoch(e, dir.path(), SIGINT);
    check_partial(dir.path(), 1, 1, 2, 2);
    CHECK_FALSE(read_json(dir / "out.summary.json").contains("life"));
  }
  {
    // One kept epoch finished (--trim 0): the life figures are there, from that epoch.
    TempDir dir;
    const Ended e = run_signalled(small_sim("delegation", {"--life-s", "1", "--trim", "0", "-o", "out.csv"}),
                                  dir.path(), SIGINT, true, false);
    INFO(e.err);
    check_stopped_after_first_epoch(e, dir.path(), SIGINT);
    const json life = read_json(dir / "out.summary.json")["life"];
    REQUIRE(life.is_object());
    CHECK(life["life_s"] == 1.0);
    CHECK(life["total_mops"].get<double>() > 0);
    REQUIRE(life["daemons"].size() == 2);
    for (const json& d : life["daemons"]) CHECK(d["loops"].get<double>() > 0);
  }
}

TEST_CASE("interrupt: SIGINT sent during a run stops it at a later epoch", "[e2e][interrupt]") {
  // 2 runs of 2000 epochs: the signal comes after the progress line of epoch 5 of run 1.
  TempDir dir;
  const Ended e = run_signalled(small_sim("meta", {"-d", "2", "--progress", "-o", "out.csv"}), dir.path(), SIGINT,
                                false, false, "run 1/2 epoch 5/2000");
  INFO(e.err);
  CHECK(e.exited);
  CHECK(e.code == 130);
  const json s = read_json(dir / "out.summary.json");
  REQUIRE(s.contains("interrupted"));
  const uint64_t done = s["interrupted"]["epochs_done"].get<uint64_t>();
  CHECK(s["interrupted"]["run"] == 0);
  CHECK(done >= 5);
  CHECK(done < 1998);  // a later one would be a signal that was not looked at for ~2000 epochs
  check_partial(dir.path(), 1, done, 2, 2);
  // No progress line after the one of the epoch it stopped at.
  CHECK(e.err.find("epoch " + std::to_string(done + 1) + "/2000") == std::string::npos);
}

TEST_CASE("interrupt: with --repeat, the repetitions after the interrupted one do not start", "[e2e][interrupt]") {
  // The signal is pending at exec: the first repetition stops after epoch 1 of run 0, and
  // the outputs are those of that one experiment, marked with its seed.
  TempDir dir;
  const Ended e = run_signalled(small_sim("meta", {"--trim", "0", "--repeat", "3", "--seed", "7", "-o", "out.csv"}),
                                dir.path(), SIGINT, true, false);
  INFO(e.err);
  CHECK(e.exited);
  CHECK(e.code == 130);
  CHECK_THAT(e.err, Catch::Contains("interrupted by SIGINT after epoch 1 of run 0 of the repetition with seed 7"));
  const json s = read_json(dir / "out.summary.json");
  CHECK(s["interrupted"] == json({{"signal", "SIGINT"}, {"run", 0}, {"epochs_done", 1}, {"seed", 7}}));
  CHECK_FALSE(s.contains("repetitions"));  // one repetition measured: no statistics over repetitions
  check_partial(dir.path(), 0, 1, 2, 2);
}

// A partial result read as a whole one: compare refuses an interrupted summary, on either
// side, naming it and where it stopped; --allow-partial compares it with a warning line.
TEST_CASE("interrupt: compare refuses an interrupted summary unless --allow-partial, then warns", "[e2e][interrupt]") {
  TempDir dir;
  const Ended e = run_signalled(small_sim("meta", {"--trim", "0", "-o", "cut.csv"}), dir.path(), SIGINT, true, false);
  INFO(e.err);
  REQUIRE(e.code == 130);
  run_ok(small_sim("meta", {"--trim", "0", "-o", "whole.csv"}), dir.path());
  const std::string mark = "interrupted by SIGINT after epoch 1 of run 0";
  for (const auto& [a, b] : {std::pair{"whole.summary.json", "cut.summary.json"}, std::pair{"cut.summary.json", "whole.summary.json"}}) {
    const Outcome refused = run_benchkv({"compare", a, b}, dir.path());
    INFO(describe(refused));
    CHECK(refused.status == 2);
    CHECK(refused.out.empty());
    CHECK_THAT(refused.err, Catch::Contains("compare: cut.summary.json is a partial result, " + mark) &&
                                Catch::Contains("--allow-partial"));
  }
  const Outcome allowed = run_ok({"compare", "--allow-partial", "whole.summary.json", "cut.summary.json"}, dir.path());
  CHECK_THAT(allowed.out, Catch::Contains("warning: B is a partial result, " + mark) && Catch::Contains("Mops mean"));
  CHECK_THAT(allowed.out, !Catch::Contains("warning: A is a partial result"));
  // Two whole results: not a word about it.
  const Outcome whole = run_ok({"compare", "whole.summary.json", "whole.summary.json"}, dir.path());
  CHECK_THAT(whole.out, !Catch::Contains("partial"));
  // A repetition's mark names its seed; an incomplete mark (a real run's) is refused too.
  json s = read_json(dir / "cut.summary.json");
  s["interrupted"]["seed"] = 7;
  s["incomplete"] = {{"reason", "a peer rank is lost"}, {"ranks_reported", {0}}};
  s["real"] = {{"ranks", 2}};
  write_file(dir / "marked.summary.json", s.dump());
  const Outcome marked = run_benchkv({"compare", "whole.summary.json", "marked.summary.json"}, dir.path());
  CHECK(marked.status == 2);
  CHECK_THAT(marked.err, Catch::Contains(mark + " of the repetition with seed 7, and incomplete: rank(s) [0] of 2 "
                                                "reported (a peer rank is lost)"));
  s.erase("interrupted");
  write_file(dir / "incomplete.summary.json", s.dump());
  const Outcome incomplete = run_benchkv({"compare", "incomplete.summary.json", "whole.summary.json"}, dir.path());
  CHECK(incomplete.status == 2);
  CHECK_THAT(incomplete.err, Catch::Contains("compare: incomplete.summary.json is a partial result, incomplete: "
                                             "rank(s) [0] of 2 reported (a peer rank is lost)"));
}

// ---- the rpc and data modes, and sweeps: the same stop, the same marks.

namespace {

size_t csv_lines(const fs::path& p) {
  const std::string text = read_file(p);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("interrupt: rpc --transport sim keeps the finished epochs, SIGTERM 143, SIGINT inherited ignored 130",
          "[e2e][interrupt][rpc]") {
  for (const bool ignored_sigint : {false, true}) {
    const int sig = ignored_sigint ? SIGINT : SIGTERM;
    INFO("signal " << sig);
    TempDir dir;
    const Ended e = run_signalled({"rpc", "--transport", "sim", "--np", "2", "-d", "0.004", "--interval-ms", "1",
                                   "--trim", "0", "-r", "2", "--no-progress", "-o", "out.csv"},
                                  dir.path(), sig, true, ignored_sigint);
    INFO(e.err);
    const json s = check_stopped_after_first_epoch(e, dir.path(), sig);
    // One run of one epoch: the caller's row (rank 0) and the server's (zeros).
    const std::vector<CsvRow> rows = read_csv(dir / "out.csv");
    REQUIRE(rows.size() == 2);
    uint64_t calls = 0;
    for (const CsvRow& r : rows) {
      CHECK(r.run == 0);
      CHECK(r.epoch == 0);
      if (r.rank == 0) calls = r.requests;
    }
    CHECK(calls > 0);
    REQUIRE(s["runs"].size() == 1);
    CHECK(s["runs"][0]["epochs_done"] == 1);
    CHECK(s["runs"][0]["requests"] == calls);
    REQUIRE(s["rpc"]["runs"].size() == 1);
    CHECK(s["rpc"]["runs"][0]["calls"] == calls);
    CHECK(s["rpc"]["runs"][0]["duration_ns"] == 1'000'000);
    CHECK(s["totals"]["issued"] == s["totals"]["completed"]);
  }
}

TEST_CASE("interrupt: data --transport sim keeps the finished epochs of the size it was at, SIGINT 130",
          "[e2e][interrupt][data]") {
  TempDir dir;
  const Ended e = run_signalled({"data", "--transport", "sim", "--np", "2", "--client-threads", "2", "-d", "0.004",
                                 "--interval-ms", "1", "--trim", "0", "-r", "1", "--no-progress", "--key-range", "8",
                                 "--value-size", "64,4096", "-o", "out.csv"},
                                dir.path(), SIGINT, true, false);
  INFO(e.err);
  const json s = check_stopped_after_first_epoch(e, dir.path(), SIGINT);
  // The first size's first epoch only: 2 ranks x 2 clients, and the header.
  CHECK(csv_lines(dir / "out.csv") == 1 + 4);
  REQUIRE(s["data"]["runs"].size() == 1);
  CHECK(s["data"]["runs"][0]["value_size"] == 64);
  CHECK(s["data"]["runs"][0]["ops"].get<uint64_t>() > 0);
  CHECK(s["data"]["runs"][0]["ops"] == s["runs"][0]["requests"]);
  CHECK(s["simulator"]["sizes"].size() == 1);  // 4096 was not run
  CHECK(s["totals"]["issued"] == s["totals"]["completed"]);
}

TEST_CASE("interrupt: a sweep passes SIGTERM on to its run, which keeps its epochs, and writes results.csv, 143",
          "[e2e][interrupt][sweep]") {
  TempDir dir;
  // Two long runs (100000 epochs of 1 ms), one at a time (-j 1): the signal comes during
  // the first one started (the sweep starts the one it estimates longest first).
  write_file(dir / "s.json", R"({"base": {"backend": "delegation", "transport": "sim", "duration": 100,
    "interval_ms": 1, "trim": 0, "runs": 1, "client_threads": 2}, "grid": {"np": [2, 3]}, "output": "out"})");
  ChildPipe err_pipe;
  // As started with & from a script: SIGINT ignored; SIGTERM still stops it.
  const pid_t sweep = start_child({BENCHKV_BIN, "sweep", "s.json", "-j", "1"}, dir.path(),
                                  {.err_fd = err_pipe.write_fd, .ignored = SIGINT});
  err_pipe.close_write();
  // The run has started once its log exists and the sweep has a child; then a little
  // more, so that it is measuring (a signal before its first epoch stops it after it).
  const fs::path runs = dir / "out/runs";
  auto started = [&]() -> fs::path {
    for (const char* r : {"0000", "0001"})
      if (fs::exists(runs / r / "log.txt")) return runs / r;
    return {};
  };
  for (int i = 0; i < 2000 && (children_of(sweep).empty() || started().empty()); ++i) ::usleep(10'000);
  REQUIRE(children_of(sweep).size() == 1);
  const fs::path run = started();
  REQUIRE_FALSE(run.empty());
  ::usleep(300'000);
  REQUIRE(::kill(sweep, SIGTERM) == 0);
  const std::string err = err_pipe.read_all();
  const int ws = wait_child(sweep);
  INFO(err);
  REQUIRE(WIFEXITED(ws));
  CHECK(WEXITSTATUS(ws) == 143);
  CHECK_THAT(err, Catch::Contains("interrupted; its outputs so far"));
  CHECK_THAT(err, Catch::Contains("sweep: interrupted by SIGTERM: wrote"));
  CHECK_THAT(err, Catch::Contains("results.csv (0 of 2 runs)"));
  // results.csv: the header, no row; the run's own outputs marked, no row.json (a later
  // sweep runs it again); the other run never started.
  CHECK(csv_lines(dir / "out/results.csv") == 1);
  const json s = read_json(run / "out.summary.json");
  REQUIRE(s.contains("interrupted"));
  CHECK(s["interrupted"]["signal"] == "SIGTERM");
  const uint64_t done = s["interrupted"]["epochs_done"].get<uint64_t>();
  CHECK(done >= 1);
  CHECK(done < 100000);
  const uint64_t np = s["config"]["np"].get<uint64_t>();
  CHECK(csv_lines(run / "out.csv") == 1 + np * 2 * done);
  CHECK(s["totals"]["issued"] == s["totals"]["completed"]);
  CHECK_FALSE(fs::exists(run / "row.json"));
  CHECK_FALSE(fs::exists(runs / (run.filename() == "0000" ? "0001" : "0000")));
  CHECK_THAT(read_file(run / "log.txt"), Catch::Contains("interrupted by SIGTERM after epoch"));
}
