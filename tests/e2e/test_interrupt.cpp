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

// Runs benchkv in `dir`. pending: the signal is raised in the child, blocked, before
// exec (ignore_first: with its action set to "ignore", as a shell sets SIGINT for a
// command started with &). Otherwise, with after_line non-empty, `sig` is sent once a
// stderr line containing after_line was read.
Ended run_signalled(const std::vector<std::string>& args, const fs::path& dir, int sig, bool pending,
                    bool ignore_first, const std::string& after_line = "") {
  std::vector<std::string> owned{BENCHKV_BIN};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    if (::dup2(fds[1], STDERR_FILENO) < 0 || ::chdir(dir.c_str()) != 0) ::_exit(126);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd < 0 || ::dup2(null_fd, STDOUT_FILENO) < 0) ::_exit(126);
    if (ignore_first) ::signal(sig, SIG_IGN);
    if (pending) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, sig);
      ::sigprocmask(SIG_BLOCK, &set, nullptr);
      ::raise(sig);
    }
    ::alarm(kChildTimeLimitSeconds);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  Ended e;
  bool sent = after_line.empty();
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    e.err.append(buf, size_t(n));
    if (!sent && e.err.find(after_line) != std::string::npos) {
      REQUIRE(::kill(pid, sig) == 0);
      sent = true;
    }
  }
  ::close(fds[0]);
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0) REQUIRE(errno == EINTR);
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

}  // namespace

TEST_CASE("interrupt: SIGINT at a known point keeps the finished epochs, exit 130", "[e2e][interrupt]") {
  TempDir dir;
  const Ended e = run_signalled(small_sim("meta", {"--trim", "0", "-o", "out.csv"}), dir.path(), SIGINT, true, false);
  INFO(e.err);
  CHECK(e.exited);
  CHECK(e.code == 130);
  CHECK_THAT(e.err, Catch::Contains("interrupted by SIGINT after epoch 1 of run 0"));
  const json s = read_json(dir / "out.summary.json");
  CHECK(s["interrupted"] == json({{"signal", "SIGINT"}, {"run", 0}, {"epochs_done", 1}}));
  check_partial(dir.path(), 0, 1, 2, 2);
}

TEST_CASE("interrupt: SIGTERM, and SIGINT inherited ignored, stop the run too", "[e2e][interrupt]") {
  {
    TempDir dir;
    const Ended e = run_signalled(small_sim("delegation", {"--trim", "0", "-o", "out.csv"}), dir.path(), SIGTERM, true,
                                  false);
    INFO(e.err);
    CHECK(e.exited);
    CHECK(e.code == 143);
    CHECK(read_json(dir / "out.summary.json")["interrupted"]["signal"] == "SIGTERM");
    check_partial(dir.path(), 0, 1, 2, 2);
  }
  {
    // Started with & from a script: SIGINT ignored. The run restores it.
    TempDir dir;
    const Ended e = run_signalled(small_sim("direct", {"--trim", "0", "-o", "out.csv"}), dir.path(), SIGINT, true, true);
    INFO(e.err);
    CHECK(e.exited);
    CHECK(e.code == 130);
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
