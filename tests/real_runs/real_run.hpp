// Helpers of the real-run end-to-end tests: spawn `mpirun -np N benchkv ...` (or benchkv
// alone) in a scratch directory with a given environment, then read back and check the
// CSV and summary of a real run. Scratch directories, CSV and JSON readers come from
// tests/e2e/benchkv_run.hpp.
//
// Paths from the build: BENCHKV_BIN (benchkv), MPIEXEC_BIN (mpirun; optional).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "core/tsc_clock.hpp"
#include "e2e/benchkv_run.hpp"

namespace bkv::real_runs {

using e2e::CsvRow;
using e2e::fs::path;
using e2e::json;
using e2e::Outcome;

using e2e::spawn;

// Open MPI as root on a small machine: the variables it needs, and the UCX transports.
inline std::vector<std::pair<std::string, std::string>> mpi_env(const std::string& ucx_tls) {
  std::vector<std::pair<std::string, std::string>> env = e2e::mpirun_env();
  env.emplace_back("UCX_TLS", ucx_tls);
  return env;
}

#ifdef MPIEXEC_BIN
// mpirun -np `np` benchkv <args>: threads unbound (--bind-to none) so each rank sees
// every CPU, UCX_TLS and `env` exported to the ranks.
inline Outcome mpirun_benchkv(uint32_t np, const std::vector<std::string>& args, const path& cwd,
                              const std::string& ucx_tls,
                              const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> argv = {MPIEXEC_BIN, "-np", std::to_string(np), "--oversubscribe", "--bind-to", "none",
                                   "-x", "UCX_TLS"};
  for (const auto& [name, value] : env) argv.insert(argv.end(), {"-x", name});
  argv.push_back(BENCHKV_BIN);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::pair<std::string, std::string>> all = mpi_env(ucx_tls);
  all.insert(all.end(), env.begin(), env.end());
  return spawn(argv, cwd, all);
}

// How a rank is sent a signal in mpirun_benchkv_signalled: `sig` to rank `rank` once
// mpirun's stderr holds `after_line`, a line a rank prints when the run has reached the
// point the test needs (a progress line of rank 0, say), however long the start-up took
// on a loaded machine. `env` is added to the ranks' environment (exported with -x),
// `mpirun_flags` go before -np.
struct SignalAt {
  uint32_t rank = 1;
  int sig = 0;
  std::string after_line;
  std::vector<std::pair<std::string, std::string>> env = {};
  std::vector<std::string> mpirun_flags = {};
  double delay_s = 0;          // sent this long after the line came (and `ready`)
  bool report_status = false;  // each rank's shell says "rank R: exit status S" on stderr
  // When set, polled with the rank's pid once the line came (every 10 ms, at most 30 s)
  // until it holds, before the delay: the point the rank must have reached.
  std::function<bool(long pid)> ready = {};
};

// mpirun -np `np` benchkv <args>, rank `at.rank` signalled as `at` says. Each rank's shell
// writes its pid to rank<R>.pid in `cwd`, then execs benchkv. A line that never came
// fails the test (the run then ends as it would without the signal).
inline Outcome mpirun_benchkv_signalled(uint32_t np, const SignalAt& at, const std::vector<std::string>& args,
                                        const path& cwd, const std::string& ucx_tls) {
  std::string cmd = at.report_status ? BENCHKV_BIN : "echo $$ > rank$OMPI_COMM_WORLD_RANK.pid; exec " BENCHKV_BIN;
  for (const std::string& a : args) cmd += " '" + a + "'";
  if (at.report_status)  // the rank's pid is benchkv's, started in the background, and its shell waits for it
    cmd += " & echo $! > rank$OMPI_COMM_WORLD_RANK.pid; wait $!; echo \"rank $OMPI_COMM_WORLD_RANK: exit status $?\" >&2";
  std::vector<std::string> argv = {MPIEXEC_BIN};
  argv.insert(argv.end(), at.mpirun_flags.begin(), at.mpirun_flags.end());
  argv.insert(argv.end(), {"-np", std::to_string(np), "--oversubscribe", "--bind-to", "none", "-x", "UCX_TLS"});
  for (const auto& [name, value] : at.env) argv.insert(argv.end(), {"-x", name});
  argv.insert(argv.end(), {"/bin/sh", "-c", cmd});
  std::vector<std::pair<std::string, std::string>> env = mpi_env(ucx_tls);
  env.insert(env.end(), at.env.begin(), at.env.end());

  Outcome o;
  for (const std::string& a : argv) o.command += (o.command.empty() ? "" : " ") + a;
  std::FILE* out = std::tmpfile();
  REQUIRE(out != nullptr);
  e2e::ChildPipe err;
  const pid_t pid = e2e::start_child(argv, cwd, {.out_fd = ::fileno(out), .err_fd = err.write_fd, .env = env});
  err.close_write();
  bool sent = false;
  o.err = err.read_all([&](const std::string& text) {
    if (sent || text.find(at.after_line) == std::string::npos) return;
    sent = true;
    long target = 0;
    std::ifstream pid_file(cwd / ("rank" + std::to_string(at.rank) + ".pid"));
    const bool known = static_cast<bool>(pid_file >> target) && target > 0;
    if (known && at.ready) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!at.ready(target) && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      CHECK(at.ready(target));
    }
    if (at.delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(at.delay_s));
    if (!known || ::kill(static_cast<pid_t>(target), at.sig) != 0)
      FAIL_CHECK("could not signal rank " << at.rank << " (pid " << target << "): " << std::strerror(errno));
  });
  const int ws = e2e::wait_child(pid);
  o.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  o.out = e2e::slurp(out);
  std::fclose(out);
  if (!sent) FAIL_CHECK("no line \"" << at.after_line << "\" came, so no signal was sent\n" << e2e::describe(o));
  return o;
}
#endif

// The summary rank 0 wrote in `dir` after a signal stopped a real run, checked for the
// marks every such summary has: "interrupted" by `signal` with the ranks `gone` gone, and
// "incomplete" reported by rank 0 alone.
inline json interrupted_summary(const path& dir, const std::string& signal, const json& gone) {
  REQUIRE(e2e::fs::exists(dir / "out.summary.json"));
  const json s = e2e::read_json(dir / "out.summary.json");
  REQUIRE(s.contains("interrupted"));
  CHECK(s["interrupted"]["signal"] == signal);
  CHECK(s["interrupted"]["gone_ranks"] == gone);
  CHECK(s["incomplete"]["ranks_reported"] == json::array({0}));
  return s;
}

// The checks every successful real run must pass, with the shape taken from the
// summary's effective configuration (config.np = the number of ranks):
//  - totals: issued == completed, errors == 0, completed > 0; per-run counts add up;
//  - CSV: one row per (run, rank, client, kept epoch), every rank present, measured
//    (non-zero) durations; per run, the rows add up to runs[i].requests and the per-rank
//    requests, and duration_ns is the sum of the kept epochs' longest durations;
//  - daemons: one entry per (run, rank, daemon), histogram adding up to loops, loops > 0,
//    no protocol errors;
//  - real.per_rank: each rank's issued == completed, adding up to the totals.
inline e2e::Checked check_real_run(const path& dir, uint32_t expect_np) {
  e2e::Checked c;
  c.summary = e2e::read_json(dir / "out.summary.json");
  c.rows = e2e::read_csv(dir / "out.csv");
  const json& s = c.summary;
  REQUIRE(s.contains("config"));
  REQUIRE(s.contains("runs"));
  REQUIRE(s.contains("daemons"));
  REQUIRE(s.contains("totals"));
  REQUIRE(s.contains("real"));
  // The clock of the latencies: the one this process also gets on this machine.
  const std::string clock = s.at("provenance").at("latency_clock").get<std::string>();
  if (bkv::tsc_clock::scale().usable)
    CHECK_THAT(clock, Catch::StartsWith("TSC, ") && Catch::EndsWith(" MHz"));
  else
    CHECK(clock == "steady clock");
  const e2e::RunShape shape = e2e::run_shape(s["config"]);
  const auto [np, clients, daemons, runs, trim, interval, epochs] = shape;
  CHECK(np == expect_np);
  const auto [issued, completed] = e2e::check_totals(s["totals"]);

  const e2e::CsvTally tally = e2e::tally_csv(c.rows, shape);
  for (const CsvRow& r : c.rows) {
    INFO("CSV row run " << r.run << " rank " << r.rank << " client " << r.client << " epoch " << r.epoch);
    CHECK(r.duration_ns > 0);
  }
  CHECK(tally.ranks_seen.size() == np);

  const json& rj = s["runs"];
  REQUIRE(rj.size() == runs);
  uint64_t runs_issued = 0, runs_completed = 0;
  for (uint64_t i = 0; i < runs; ++i) {
    INFO("summary runs[" << i << "]");
    const json& r = rj[i];
    const uint64_t requests = e2e::check_run_entry(r, i, shape, tally);
    CHECK(requests > 0);
    for (uint64_t k = 0; k < np; ++k) CHECK(tally.rank_sum[i][k] > 0);
    uint64_t dur = 0;
    for (const auto& [e, len] : tally.epoch_len[i]) dur += len;
    CHECK(r.at("duration_ns").get<uint64_t>() == dur);
    CHECK(r.at("total_mops").get<double>() == Approx(double(requests) / double(dur) * 1e3).margin(1e-6));
    CHECK(r.at("completed").get<uint64_t>() >= requests);  // the run's window covers its kept epochs
    runs_issued += r.at("issued").get<uint64_t>();
    runs_completed += r.at("completed").get<uint64_t>();
  }
  CHECK(runs_issued == issued);
  CHECK(runs_completed == completed);

  e2e::check_daemons(s["daemons"], shape);
  // Every rank's own requests all completed, and the ranks add up to the totals.
  const json& per_rank = s["real"].at("per_rank");
  REQUIRE(per_rank.size() == np);
  uint64_t sum_issued = 0, sum_completed = 0;
  for (uint64_t k = 0; k < np; ++k) {
    INFO("real.per_rank[" << k << "]");
    const uint64_t ri = per_rank[k].at("issued").get<uint64_t>();
    const uint64_t rc = per_rank[k].at("completed").get<uint64_t>();
    CHECK(ri == rc);
    CHECK(rc > 0);
    sum_issued += ri;
    sum_completed += rc;
  }
  CHECK(sum_issued == issued);
  CHECK(sum_completed == completed);
  if (s["real"].contains("transport_protocol_errors")) CHECK(s["real"]["transport_protocol_errors"].get<uint64_t>() == 0);
  return c;
}

}  // namespace bkv::real_runs
