// benchkv real runs end to end: `mpirun -np 2 benchkv --transport ucx` for every backend
// (meta, delegation, direct, ucx-am) over UCX shared memory and TCP on this machine,
// small thread counts and short durations. Each run must exit 0 with every issued
// request completed, the CSV adding up to the summary, and both ranks present.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "real_runs/real_run.hpp"

using namespace bkv;
using namespace bkv::real_runs;

namespace {

// The small real configuration (2 daemons and 2 clients per rank, 6 epochs of 50 ms, one
// trimmed at each end, one run); a flag that also appears in `extra` is left to `extra`
// (benchkv rejects an option given twice).
std::vector<std::string> small_real(const std::string& backend, std::vector<std::string> extra = {}) {
  static const std::vector<std::pair<std::string, std::string>> kDefaults = {
      {"--transport", "ucx"}, {"-d", "0.3"}, {"--interval-ms", "50"}, {"--trim", "1"}, {"-r", "1"},
      {"--server-threads", "2"}, {"--client-threads", "2"}, {"--queue-depth", "4"}, {"--key-range", "256"},
      {"-o", "out.csv"}};
  return e2e::benchkv_args(kDefaults, backend, extra);
}

void run_and_check(const std::string& backend, const std::string& tls, std::vector<std::string> extra = {}) {
  e2e::TempDir dir;
  const Outcome o = mpirun_benchkv(2, small_real(backend, extra), dir.path(), tls);
  INFO(e2e::describe(o));
  REQUIRE(o.status == 0);
  const e2e::Checked c = check_real_run(dir.path(), 2);
  CHECK(c.summary["config"]["backend"] == backend);
  CHECK(c.summary["config"]["transport"] == "ucx");
  CHECK(c.summary["real"]["ranks"] == 2);
  CHECK(c.summary["real"]["ucx_tls"] == tls);
}

}  // namespace

TEST_CASE("mpirun -np 2: every backend over UCX shared memory", "[real-run][mpi]") {
  const std::string backend = GENERATE(as<std::string>{}, "meta", "delegation", "direct", "ucx-am");
  INFO("backend " << backend);
  run_and_check(backend, "sm,self");
}

TEST_CASE("mpirun -np 2: Delegation and ucx-am over UCX TCP", "[real-run][mpi]") {
  const std::string backend = GENERATE(as<std::string>{}, "delegation", "ucx-am");
  INFO("backend " << backend);
  run_and_check(backend, "tcp");
}

// A comparison over UCX measures the backends only when every backend got the same
// transports: with UCX's default list ("all", what no UCX_TLS means) a copyrpc backend
// and the ucx-am baseline record the same active-message transports, shared memory on
// one host (copyrpc's queue pairs asked for peer error handling, which made UCX pick
// TCP for them alone). ucx-am records latency and calls in flight like the others.
TEST_CASE("mpirun -np 2, UCX's default transports: delegation and ucx-am record the same ones", "[real-run][mpi]") {
  json transports[2], summaries[2];
  const char* backends[2] = {"delegation", "ucx-am"};
  for (int i = 0; i < 2; ++i) {
    INFO("backend " << backends[i]);
    e2e::TempDir dir;
    const Outcome o = mpirun_benchkv(2, small_real(backends[i], {"--report", "text"}), dir.path(), "all");
    INFO(e2e::describe(o));
    REQUIRE(o.status == 0);
    const e2e::Checked c = check_real_run(dir.path(), 2);
    REQUIRE(c.summary["provenance"].contains("ucx_transports"));
    transports[i] = c.summary["provenance"]["ucx_transports"];
    CHECK(transports[i]["endpoints"].get<uint64_t>() > 0);
    CHECK_FALSE(transports[i]["am"].empty());
    CHECK_THAT(transports[i]["am"].dump(), !Catch::Contains("tcp"));
    CHECK_THAT(o.out, Catch::Contains("UCX transports: active messages over"));
    // Latency of every kept request, and daemon #0's calls in flight.
    const json& run = c.summary["runs"][0];
    REQUIRE(run["latency"].is_object());
    CHECK(run["latency"]["all"]["count"].get<uint64_t>() > run["requests"].get<uint64_t>() / 2);
    CHECK(run["latency"]["all"]["p50_ns"].get<uint64_t>() > 0);
    CHECK(c.summary["overall"]["daemon_calls_in_flight"]["mean"].get<double>() > 0);
    // ucx-am's daemons poll no CQ: their per-loop figure is the request messages served.
    if (i == 1)
      CHECK_THAT(o.out, Catch::Contains("request messages per loop (ucx-am: no CQ)") &&
                            !Catch::Contains("CQEs per loop"));
    else
      CHECK_THAT(o.out, Catch::Contains("[OVERALL] daemon CQEs per loop"));
    summaries[i] = c.summary;
  }
  CHECK(transports[0]["am"] == transports[1]["am"]);
  // compare puts the two side by side, but not CQEs against request messages.
  e2e::TempDir dir;
  e2e::write_file(dir / "d.summary.json", summaries[0].dump());
  e2e::write_file(dir / "u.summary.json", summaries[1].dump());
  const Outcome cmp = e2e::run_benchkv({"compare", "d.summary.json", "u.summary.json"}, dir.path());
  INFO(e2e::describe(cmp));
  CHECK(cmp.status == 0);
  CHECK_THAT(cmp.out, Catch::Contains("daemon_cqe_per_loop: not compared") &&
                          !Catch::Contains("daemon_cqe_per_loop mean") && Catch::Contains("Mops mean"));
}

TEST_CASE("mpirun -np 2: two runs, one daemon, progress lines from rank 0 naming both ranks", "[real-run][mpi]") {
  e2e::TempDir dir;
  const Outcome o = mpirun_benchkv(
      2, small_real("delegation", {"-r", "2", "--server-threads", "1", "--client-threads", "1", "--progress"}),
      dir.path(), "sm,self");
  INFO(e2e::describe(o));
  REQUIRE(o.status == 0);
  check_real_run(dir.path(), 2);
  // 6 epochs x 2 runs, each line once (rank 0 prints for all ranks).
  for (const char* line : {"run 1/2 epoch 1/6 [warm-up]", "run 1/2 epoch 2/6 [kept]", "run 2/2 epoch 6/6 [cool-down]"})
    CHECK_THAT(o.err, Catch::Contains(line));
  size_t n = 0;
  for (size_t p = o.err.find("run 2/2 epoch 3/6"); p != std::string::npos; p = o.err.find("run 2/2 epoch 3/6", p + 1)) ++n;
  CHECK(n == 1);
  CHECK_THAT(o.err, Catch::Contains("per rank avg"));
}

TEST_CASE("mpirun -np 3: benchkv rpc over UCX shared memory, rank 0 calling two servers", "[real-run][mpi][rpc]") {
  e2e::TempDir dir;
  const Outcome o = mpirun_benchkv(3,
                                   {"rpc", "--transport", "ucx", "-d", "0.2", "--interval-ms", "50", "--trim", "1",
                                    "-r", "2", "--endpoints", "2", "--queue-depth", "4", "--no-progress", "-o",
                                    "out.csv"},
                                   dir.path(), "sm,self");
  INFO(e2e::describe(o));
  REQUIRE(o.status == 0);
  const json s = e2e::read_json(dir.path() / "out.summary.json");
  CHECK(s["totals"]["errors"] == 0);
  CHECK(s["totals"]["issued"] == s["totals"]["completed"]);
  CHECK(s["real"]["ranks"] == 3);
  CHECK(s["provenance"]["latency_clock"] != "virtual time");  // round trips timed on real threads
  REQUIRE(s["rpc"]["runs"].size() == 2);
  const std::vector<e2e::CsvRow> rows = e2e::read_csv(dir.path() / "out.csv");
  for (size_t r = 0; r < 2; ++r) {
    INFO("run " << r);
    const json& run = s["rpc"]["runs"][r];
    CHECK(run["calls"].get<uint64_t>() > 0);
    CHECK(run["rtt_p50_us"].get<double>() > 0);
    uint64_t caller = 0, servers = 0;
    for (const e2e::CsvRow& row : rows)
      if (row.run == r) (row.rank == 0 ? caller : servers) += row.requests;
    CHECK(caller == run["calls"].get<uint64_t>());
    CHECK(servers == 0);
    CHECK(run["rtt_p99_us"].get<double>() >= run["rtt_p50_us"].get<double>());
  }
  // The report ends with the rpc table (latencies in us).
  CHECK_THAT(o.out, Catch::Contains("endpoints    QD   size  run       Mrps       MB/s      mean       p50"));
}

TEST_CASE("mpirun -np 2: an output path that cannot be written ends every rank before the run", "[real-run][mpi]") {
  e2e::TempDir dir;
  e2e::write_file(dir.path() / "plainfile", "x");
  const Outcome o = mpirun_benchkv(2, small_real("delegation", {"-o", "plainfile/out.csv"}), dir.path(), "sm,self");
  INFO(e2e::describe(o));
  CHECK(o.status != 0);
  CHECK_THAT(o.err, Catch::Contains("plainfile/out.csv"));
  CHECK_THAT(o.err, !Catch::Contains("epoch"));  // no measurement ran
  CHECK_FALSE(e2e::fs::exists(dir.path() / "out.csv"));
}

// A real run measures what goes between ranks: one rank alone (benchkv started without
// mpirun, or mpirun -np 1) is refused in every real mode, as every input error: status 2,
// a message saying to start it under mpirun, nothing measured or written. Before, a KV
// run of one rank measured no remote request and exited 0, and rpc exited 1 (MPI_Abort).
TEST_CASE("a real run of one rank (no mpirun, or mpirun -np 1) is refused with status 2 in every mode",
          "[real-run][mpi][bad-input]") {
  const std::vector<std::string> timing = {"--transport", "ucx", "-d", "0.3", "--interval-ms", "50", "--trim", "1",
                                           "-r", "1", "-o", "out.csv"};
  const auto with_timing = [&](std::vector<std::string> head) {
    head.insert(head.end(), timing.begin(), timing.end());
    return head;
  };
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {small_real("delegation"), "delegation --transport ucx"},
      {small_real("ucx-am"), "ucx-am --transport ucx"},
      {with_timing({"rpc", "--endpoints", "1", "--queue-depth", "1"}), "rpc --transport ucx"},
      {with_timing({"data", "--value-size", "64"}), "data --transport ucx"},
  };
  for (const auto& [args, what] : cases) {
    for (const bool under_mpirun : {false, true}) {
      e2e::TempDir dir;
      std::vector<std::string> alone = {BENCHKV_BIN};
      alone.insert(alone.end(), args.begin(), args.end());
      const Outcome o = under_mpirun ? mpirun_benchkv(1, args, dir.path(), "sm,self")
                                     : e2e::spawn(alone, dir.path(), mpi_env("sm,self"));
      INFO(e2e::describe(o));
      CHECK(o.status == 2);
      CHECK_THAT(o.err, Catch::Contains("benchkv: " + what + ": 1 rank (benchkv started without mpirun, or mpirun "
                                        "-np 1)") &&
                            Catch::Contains("measure nothing remote; start it under mpirun with 2 or more ranks"));
      CHECK_THAT(o.err, !Catch::Contains("epoch") && !Catch::Contains("MPI_ABORT"));
      CHECK(o.out.empty());
      CHECK_FALSE(e2e::fs::exists(dir.path() / "out.csv"));
      CHECK_FALSE(e2e::fs::exists(dir.path() / "out.summary.json"));
    }
  }
}

// Every rank must run the same benchkv with the same options: what the ranks exchange
// (endpoint infos per connection, epoch records, daemon records) is sized and read by the
// options. Rank 1 started with other options (mpirun's MPMD form) ends every rank before
// anything is exchanged, with status 1 and a message naming the rank and the options that
// differ; before, the ranks went on with different epoch counts or connection counts and
// hung in mismatched collectives until the peer timeout, or read each other's blobs with
// the wrong layout.
TEST_CASE("mpirun: a rank started with other options than rank 0 ends every rank naming the rank and options",
          "[real-run][mpi][bad-input]") {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"-d", "0.6"}, {"duration: 0.3 (rank 0) vs 0.6 (rank 1)"}},
      {{"--client-threads", "1"}, {"client_threads: 2 (rank 0) vs 1 (rank 1)"}},
  };
  for (const auto& [rank1_extra, fragments] : cases) {
    e2e::TempDir dir;
    std::vector<std::string> argv = {"/usr/bin/timeout", "60", MPIEXEC_BIN, "--oversubscribe", "--bind-to", "none",
                                     "-x", "UCX_TLS", "-x", "BENCHKV_PEER_TIMEOUT", "-np", "1", BENCHKV_BIN};
    for (const std::string& a : small_real("delegation")) argv.push_back(a);
    argv.insert(argv.end(), {":", "-np", "1", BENCHKV_BIN});
    for (const std::string& a : small_real("delegation", rank1_extra)) argv.push_back(a);
    auto env = mpi_env("sm,self");
    env.emplace_back("BENCHKV_PEER_TIMEOUT", "20");
    const Outcome o = e2e::spawn(argv, dir.path(), env);
    INFO(e2e::describe(o));
    CHECK(o.status == 1);
    CHECK_THAT(o.err, Catch::Contains("rank 0: benchkv: rank 1 was started with other options than rank 0: "));
    for (const auto& f : fragments) CHECK_THAT(o.err, Catch::Contains(f));
    CHECK_THAT(o.err, !Catch::Contains("epoch"));  // nothing was measured
    CHECK_FALSE(e2e::fs::exists(dir.path() / "out.summary.json"));
  }
}

namespace {

// mpirun -np 2, a run of 20 epochs of 200 ms (4 s) with progress lines, where rank
// `at.rank` is sent `at.sig` once rank 0's progress line `at.after_line` came (the run is
// measuring then, whatever the start-up took). `tls`: UCX_TLS. With
// `at.mpirun_flags` = {"--enable-recovery"} the job goes on when a rank dies, so the
// survivor meets the death through its own queue pairs, not mpirun's SIGTERM.
Outcome run_signalled(const SignalAt& at, const e2e::fs::path& dir, const std::string& backend = "delegation",
                      const std::string& tls = "sm,self") {
  return mpirun_benchkv_signalled(2, at, small_real(backend, {"-d", "4", "--interval-ms", "200", "--progress"}), dir,
                                  tls);
}

// Rank 0's progress line once 3 of the 20 epochs finished (the first is the warm-up),
// and once 4 did (for a test that needs rank 1 to have finished 2).
constexpr const char* kThirdEpoch = "run 1/1 epoch 3/20";
constexpr const char* kFourthEpoch = "run 1/1 epoch 4/20";
const std::vector<std::pair<std::string, std::string>> kPeerTimeout2s = {{"BENCHKV_PEER_TIMEOUT", "2"}};

}  // namespace

TEST_CASE("mpirun -np 2: a rank stopped mid-run (SIGSTOP): the other fails its calls back, writes incomplete outputs",
          "[real-run][mpi][faults]") {
  e2e::TempDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o = run_signalled({1, SIGSTOP, kThirdEpoch, kPeerTimeout2s}, dir.path());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(e2e::describe(o));
  CHECK(o.status != 0);
  // Rank 0's first collective after the stop (the next epoch's gather of the progress
  // line's per-rank figures) misses its 2 s deadline; rank 0 stops its endpoints, fails
  // the pending calls back.
  CHECK_THAT(o.err, Catch::Contains("did not complete within BENCHKV_PEER_TIMEOUT=2.0 s"));
  CHECK_THAT(o.err, Catch::Contains("a peer rank is stopped, dead or unreachable"));
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 0: MPI_Allgather"));
  CHECK_THAT(o.err, Catch::Contains("marked incomplete"));
  CHECK_THAT(o.err, Catch::Contains("every copyrpc endpoint stopped, their pending calls failed back"));
  // Run of 4 s + peer timeout 2 s, plus start-up, wind-down and teardown.
  CHECK(secs < 30);
  REQUIRE(e2e::fs::exists(dir.path() / "out.csv"));
  const json s = e2e::read_json(dir.path() / "out.summary.json");
  CHECK_THAT(s["incomplete"]["reason"].get<std::string>(), Catch::Contains("MPI_Allgather"));
  CHECK(s["incomplete"]["ranks_reported"] == json::array({0}));
  // The transport's details, as a complete run's summary has them.
  CHECK(s["real"]["transport"] == "ucx");
  CHECK(s["real"]["ucx_tls"] == "sm,self");
  CHECK(s["real"]["ranks"] == 2);
  const json& t = s["totals"];
  // Rank 0's clients had calls pending at rank 1 when it stopped (half the keys live
  // there, queue depth 4): each ended reported failed, none was left unanswered.
  CHECK(t["failed"].get<uint64_t>() > 0);
  CHECK(t["unanswered"] == 0);
  CHECK(t["errors"] == 0);
  CHECK(t["issued"].get<uint64_t>() == t["completed"].get<uint64_t>() + t["failed"].get<uint64_t>());
  REQUIRE(s["real"]["per_rank"].size() == 1);
  CHECK(s["real"]["per_rank"][0]["failed"] == t["failed"]);
  // The epochs before the stop were measured: rank 0 completed requests in them.
  uint64_t rank0 = 0, others = 0;
  for (const e2e::CsvRow& row : e2e::read_csv(dir.path() / "out.csv")) (row.rank == 0 ? rank0 : others) += row.requests;
  CHECK(rank0 > 0);
  CHECK(others == 0);
}

TEST_CASE("mpirun -np 2, ucx-am: a rank stopped mid-run (SIGSTOP): the other says its calls stay unanswered",
          "[real-run][mpi][faults]") {
  e2e::TempDir dir;
  const Outcome o = run_signalled({1, SIGSTOP, kThirdEpoch, kPeerTimeout2s}, dir.path(), "ucx-am");
  INFO(e2e::describe(o));
  CHECK(o.status != 0);
  CHECK_THAT(o.err, Catch::Contains("did not complete within BENCHKV_PEER_TIMEOUT=2.0 s"));
  CHECK_THAT(o.err, Catch::Contains("marked incomplete"));
  // ucx-am has no copyrpc endpoints: the message says what happened to its calls instead.
  CHECK_THAT(o.err, !Catch::Contains("copyrpc"));
  CHECK_THAT(o.err, Catch::Contains("its calls to the lost peer stay unanswered"));
  REQUIRE(e2e::fs::exists(dir.path() / "out.summary.json"));
  const json s = e2e::read_json(dir.path() / "out.summary.json");
  CHECK(s["real"]["transport"] == "ucx");
  CHECK(s["provenance"]["ucx_transports"]["endpoints"].get<uint64_t>() > 0);  // rank 0's own
  CHECK_FALSE(s["provenance"]["ucx_transports"]["am"].empty());
  const json& t = s["totals"];
  // Nothing is failed back: what rank 0's clients had pending at rank 1 stays unanswered
  // (the stop came while they were measuring).
  CHECK(t["failed"] == 0);
  CHECK(t["unanswered"].get<uint64_t>() > 0);
  CHECK(t["issued"].get<uint64_t>() == t["completed"].get<uint64_t>() + t["unanswered"].get<uint64_t>());
}

namespace {

// The epochs rank 0 kept of a run of 20 epochs of 200 ms (the first trimmed) that a
// signal after its third epoch cut, the summary's only run: the run's "epochs_done" is the
// interruption's, at least 2 and fewer than 20. Returns it.
uint64_t kept_epochs(const json& s) {
  REQUIRE(s["runs"].size() == 1);
  const uint64_t done = s["interrupted"]["epochs_done"].get<uint64_t>();
  CHECK(s["runs"][0]["epochs_done"] == done);
  CHECK(done >= 2);
  CHECK(done < 20);
  return done;
}

// Rank 0's outputs after a signal ended the run: marked interrupted (by `signal`, with
// rank 1 gone) and incomplete, its own epochs up to where it stopped, no other rank's.
void check_interrupted_outputs(const e2e::fs::path& dir, const std::string& signal) {
  REQUIRE(e2e::fs::exists(dir / "out.csv"));
  const json s = interrupted_summary(dir, signal, json::array({1}));
  const uint64_t done = kept_epochs(s);
  uint64_t rank0 = 0, others = 0;
  size_t rows = 0;
  for (const e2e::CsvRow& row : e2e::read_csv(dir / "out.csv")) {
    (row.rank == 0 ? rank0 : others) += row.requests;
    CHECK(row.epoch < done);
    ++rows;
  }
  CHECK(rows == 2 * 2 * (done - 1));  // 2 ranks x 2 clients x the kept epochs finished
  CHECK(rank0 > 0);
  CHECK(others == 0);
  CHECK(s["runs"][0]["requests"] == rank0);
  const json& t = s["totals"];
  CHECK(t["issued"].get<uint64_t>() ==
        t["completed"].get<uint64_t>() + t["failed"].get<uint64_t>() + t["unanswered"].get<uint64_t>());
}

}  // namespace

TEST_CASE("mpirun -np 2: a rank killed mid-run (SIGKILL): the survivor, ended by mpirun, keeps its epochs and names it",
          "[real-run][mpi][faults]") {
  e2e::TempDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o = run_signalled({1, SIGKILL, kThirdEpoch, kPeerTimeout2s}, dir.path());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(e2e::describe(o));
  CHECK(o.status != 0);
  CHECK(secs < 30);
  // mpirun sees rank 1 die and sends rank 0 SIGTERM (and SIGKILL 1 s later): rank 0 stops
  // measuring, says which rank died, and writes its epochs before that.
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 0: interrupted by SIGTERM; rank 1 died before it (its process is gone)"));
  CHECK_THAT(o.err, Catch::Contains("marked interrupted and incomplete"));
  check_interrupted_outputs(dir.path(), "SIGTERM");
}

// A summary cut short holds the provenance every summary holds (rank 0's threads, the
// transports of its own endpoints), so compare can tell that both runs used the same UCX
// transports; it refuses the cut one as a partial result unless --allow-partial.
TEST_CASE("mpirun -np 2: a run cut by a killed rank has its provenance, and compare refuses it unless --allow-partial",
          "[real-run][mpi][faults]") {
  e2e::TempDir dir;
  const Outcome whole = mpirun_benchkv(2, small_real("delegation", {"-o", "whole.csv"}), dir.path(), "sm,self");
  INFO(e2e::describe(whole));
  REQUIRE(whole.status == 0);
  const Outcome o = run_signalled({1, SIGKILL, kThirdEpoch, kPeerTimeout2s}, dir.path());
  INFO(e2e::describe(o));
  const json s = interrupted_summary(dir.path(), "SIGTERM", json::array({1}));
  const json w = e2e::read_json(dir.path() / "whole.summary.json");
  REQUIRE(s.contains("provenance"));
  for (const auto& [key, value] : w["provenance"].items()) CHECK(s["provenance"].contains(key));
  CHECK(s["provenance"]["git_commit"] == w["provenance"]["git_commit"]);
  CHECK(s["provenance"]["latency_clock"] != "virtual time");  // a real thread's clock (its rate measured per process)
  const json& threads = s["provenance"]["threads"];  // rank 0's: 2 daemons, 2 clients
  REQUIRE(threads.size() == 4);
  for (const json& t : threads) CHECK(t["rank"] == 0);
  CHECK(threads[0]["thread"] == "d0");
  CHECK(threads[3]["thread"] == "c1");
  CHECK(w["provenance"]["threads"].size() == 8);
  const json& used = s["provenance"]["ucx_transports"];
  CHECK(used["endpoints"].get<uint64_t>() > 0);
  CHECK(used["am"] == w["provenance"]["ucx_transports"]["am"]);
  CHECK_FALSE(s["real"].contains("ucx_transports"));

  const Outcome refused = e2e::run_benchkv({"compare", "whole.summary.json", "out.summary.json"}, dir.path());
  INFO(e2e::describe(refused));
  CHECK(refused.status == 2);
  CHECK(refused.out.empty());
  CHECK_THAT(refused.err, Catch::Contains("compare: out.summary.json is a partial result, interrupted by SIGTERM after "
                                          "epoch ") &&
                              Catch::Contains("incomplete: rank(s) [0] of 2 reported") &&
                              Catch::Contains("--allow-partial") && !Catch::Contains("UCX transports"));
  const Outcome allowed =
      e2e::run_benchkv({"compare", "--allow-partial", "whole.summary.json", "out.summary.json"}, dir.path());
  INFO(e2e::describe(allowed));
  CHECK(allowed.status == 0);
  CHECK_THAT(allowed.out, Catch::Contains("warning: B is a partial result, interrupted by SIGTERM") &&
                              Catch::Contains("Mops mean") && !Catch::Contains("UCX transports"));
}

TEST_CASE("mpirun -np 2: rank 0 killed mid-run: rank 1, ended by mpirun, keeps its own epochs in out.rank1.*",
          "[real-run][mpi][faults]") {
  e2e::TempDir dir;
  const Outcome o = run_signalled({0, SIGKILL, kFourthEpoch, kPeerTimeout2s}, dir.path());
  INFO(e2e::describe(o));
  CHECK(o.status != 0);
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 1: interrupted by SIGTERM; rank 0 died before it (its process is gone)"));
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 1: wrote "));
  CHECK_FALSE(e2e::fs::exists(dir.path() / "out.csv"));  // rank 0 died: nothing under its names
  REQUIRE(e2e::fs::exists(dir.path() / "out.rank1.csv"));
  const json s = e2e::read_json(dir.path() / "out.rank1.summary.json");
  CHECK(s["interrupted"]["signal"] == "SIGTERM");
  CHECK(s["interrupted"]["gone_ranks"] == json::array({0}));
  CHECK(s["incomplete"]["ranks_reported"] == json::array({1}));
  REQUIRE(s["provenance"]["threads"].size() == 4);  // rank 1's own threads
  CHECK(s["provenance"]["threads"][0]["rank"] == 1);
  CHECK(s["provenance"]["ucx_transports"]["endpoints"].get<uint64_t>() > 0);
  REQUIRE(s["runs"].size() == 1);
  const uint64_t done = s["interrupted"]["epochs_done"].get<uint64_t>();
  CHECK(done >= 2);
  CHECK(done < 20);
  uint64_t rank1 = 0, others = 0;
  for (const e2e::CsvRow& row : e2e::read_csv(dir.path() / "out.rank1.csv")) {
    (row.rank == 1 ? rank1 : others) += row.requests;
    CHECK(row.epoch < done);
  }
  CHECK(rank1 > 0);
  CHECK(others == 0);
  CHECK(s["runs"][0]["requests"] == rank1);
  const json& t = s["totals"];
  CHECK(t["issued"].get<uint64_t>() ==
        t["completed"].get<uint64_t>() + t["failed"].get<uint64_t>() + t["unanswered"].get<uint64_t>());
}

TEST_CASE("mpirun -np 2 over shared memory: a rank killed mid-run, the job kept alive: the survivor fails its calls back",
          "[real-run][mpi][faults]") {
  e2e::TempDir dir;
  // Killed while measuring (the checks below need calls in flight).
  const Outcome o = run_signalled({1, SIGKILL, kThirdEpoch, kPeerTimeout2s, {"--enable-recovery"}}, dir.path());
  INFO(e2e::describe(o));
  // UCX 1.13 has no peer error handling over shared memory: the survivor's calls to the
  // dead rank stay pending until the drain all-reduce misses its deadline, and the
  // wind-down fails them back (at most 2 clients x queue depth 4).
  CHECK_THAT(o.err, Catch::Contains("did not complete within BENCHKV_PEER_TIMEOUT=2.0 s"));
  CHECK_THAT(o.err, Catch::Contains("marked incomplete"));
  REQUIRE(e2e::fs::exists(dir.path() / "out.summary.json"));
  const json s = e2e::read_json(dir.path() / "out.summary.json");
  const json& t = s["totals"];
  CHECK(t["errors"] == 0);
  CHECK(t["unanswered"] == 0);
  CHECK(t["failed"].get<uint64_t>() > 0);
  CHECK(t["failed"].get<uint64_t>() <= 8);
  CHECK(t["issued"].get<uint64_t>() == t["completed"].get<uint64_t>() + t["failed"].get<uint64_t>());
}

TEST_CASE("mpirun -np 2 over tcp: a rank killed mid-run: the survivor's queue pairs fail and copyrpc fails calls back",
          "[real-run][mpi][faults]") {
  e2e::TempDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o =
      run_signalled({1, SIGKILL, kThirdEpoch, kPeerTimeout2s, {"--enable-recovery"}}, dir.path(), "delegation", "tcp");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(e2e::describe(o));
  // No check of the job's status: under --enable-recovery mpirun exits 0 although rank 0
  // ended with status 3 (the message below is rank 0's own).
  CHECK(secs < 30);
  CHECK_THAT(o.err, Catch::Contains("a peer rank is stopped, dead or unreachable"));
  CHECK_THAT(o.err, Catch::Contains("marked incomplete"));
  REQUIRE(e2e::fs::exists(dir.path() / "out.summary.json"));
  const json s = e2e::read_json(dir.path() / "out.summary.json");
  CHECK(s["real"]["ucx_tls"] == "tcp");
  const json& t = s["totals"];
  CHECK(t["errors"] == 0);
  CHECK(t["unanswered"] == 0);
  CHECK(t["issued"].get<uint64_t>() == t["completed"].get<uint64_t>() + t["failed"].get<uint64_t>());
  // At most 2 clients x queue depth 4 = 8 calls can be pending when the deadline's
  // wind-down stops the endpoints (the SIGSTOP case above). Far more failed: the queue
  // pairs to the dead rank failed over TCP (UCX peer error handling) and copyrpc failed
  // every later call to it back at once, long before the deadline.
  CHECK(t["failed"].get<uint64_t>() > 100);
}

TEST_CASE("mpirun -np 2: SIGTERM to rank 1 mid-run stops it with a message, and rank 0, then ended, keeps its epochs",
          "[real-run][mpi][faults]") {
  e2e::TempDir dir;
  const Outcome o = run_signalled({1, SIGTERM, kThirdEpoch, {{"BENCHKV_PEER_TIMEOUT", "60"}}}, dir.path());
  INFO(e2e::describe(o));
  CHECK(o.status != 0);
  // Rank 1 stops at its next safe point (its outputs are rank 0's to write) and exits 143;
  // mpirun then ends rank 0 with SIGTERM.
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 1: interrupted by SIGTERM; the measurement ended early on this rank"));
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 0: interrupted by SIGTERM; rank 1 died before it"));
  check_interrupted_outputs(dir.path(), "SIGTERM");
}

namespace {

// mpirun -np 2 benchkv `args` (default: the small delegation run) with `name`=`value` in
// the ranks' environment.
Outcome run_with_setting(const std::string& name, const std::string& value, const e2e::fs::path& dir,
                         const std::vector<std::string>& args = small_real("delegation")) {
  auto env = mpi_env("sm,self");
  env.emplace_back(name, value);
  std::vector<std::string> argv = {"/usr/bin/timeout", "60", MPIEXEC_BIN, "-np", "2", "--oversubscribe", "--bind-to",
                                   "none", "-x", name, "-x", "UCX_TLS", BENCHKV_BIN};
  for (const std::string& a : args) argv.push_back(a);
  return e2e::spawn(argv, dir, env);
}

}  // namespace

// A malformed BENCHKV_PEER_TIMEOUT or BENCHKV_STARTUP_TIMEOUT is bad input like a bad
// option: every command that starts MPI refuses it before MPI starts, naming it, with
// status 2 (before: 1 in the KV modes and the probe, an uncaught exception (134) for the
// probe's start-up timeout, and the sweep never read the peer timeout).
TEST_CASE("benchkv refuses a malformed BENCHKV_PEER_TIMEOUT or BENCHKV_STARTUP_TIMEOUT with status 2, naming it",
          "[real-run][mpi][bad-input]") {
  e2e::TempDir dir;
  e2e::write_file(dir.path() / "s.json", R"({"base": {"backend": "delegation", "transport": "sim", "duration": 0.004,
    "interval_ms": 1, "trim": 1, "runs": 1}, "grid": {"np": [2, 3]}, "output": "out"})");
  const std::vector<std::vector<std::string>> commands = {
      small_real("delegation"), {"probe", "--transport", "ucx", "-o", "probe.json"}, {"sweep", "s.json"}};
  // (Both variables go through one check: one malformed value each, a word and a zero.)
  for (const auto& [name, bad] : {std::pair{"BENCHKV_PEER_TIMEOUT", "soon"}, std::pair{"BENCHKV_STARTUP_TIMEOUT", "0"}})
    for (const auto& args : commands) {
      const Outcome o = run_with_setting(name, bad, dir.path(), args);
      INFO(e2e::describe(o));
      CHECK(o.status == 2);
      CHECK_THAT(o.err, Catch::Contains(std::string(name) + "=\"" + bad + "\": must be a number of seconds in (0, 86400]"));
      CHECK_THAT(o.err, !Catch::Contains("epoch"));  // nothing ran
    }
  CHECK_FALSE(e2e::fs::exists(dir.path() / "out.csv"));
  CHECK_FALSE(e2e::fs::exists(dir.path() / "probe.json"));
  CHECK_FALSE(e2e::fs::exists(dir.path() / "out" / "results.csv"));
}

// A rank stopped before its start-up is over: its shell stops itself before it execs
// benchkv, so it never reaches MPI_Init, and rank 0 waits in MPI_Init, which no
// collective deadline covers. The start-up guard ends rank 0 once BENCHKV_STARTUP_TIMEOUT
// (1 s here) has passed, naming what it waited in, with status 4; mpirun then ends the
// stopped rank. `timeout` turns a hang (no guard) into status 124.
TEST_CASE("mpirun -np 2: a rank stopped before its start-up ends: the other ends at the start-up bound, naming MPI_Init",
          "[real-run][mpi][faults]") {
  e2e::TempDir dir;
  std::string cmd = "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then kill -STOP $$; fi; exec " BENCHKV_BIN;
  for (const std::string& a : small_real("delegation")) cmd += " '" + a + "'";
  auto env = mpi_env("sm,self");
  env.emplace_back("BENCHKV_STARTUP_TIMEOUT", "1");
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o = e2e::spawn({"/usr/bin/timeout", "60", MPIEXEC_BIN, "-np", "2", "--oversubscribe", "--bind-to", "none",
                                "-x", "UCX_TLS", "-x", "BENCHKV_STARTUP_TIMEOUT", "/bin/sh", "-c", cmd},
                               dir.path(), env);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(e2e::describe(o));
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 0: start-up did not finish within BENCHKV_STARTUP_TIMEOUT=1 s "
                                    "(waiting in MPI_Init): a peer rank may be stopped, dead or unreachable; ending "
                                    "this rank"));
  CHECK(o.status == 4);  // rank 0's, passed on by mpirun
  CHECK(secs < 30);      // the bound, plus the launch and mpirun ending the job
  CHECK_FALSE(e2e::fs::exists(dir.path() / "out.csv"));
}

namespace {

// `benchkv rpc` over UCX shared memory, one run of 20 epochs of 200 ms (the first
// trimmed), where rank `rank` is sent `sig` once rank 0's progress line of epoch 3 came.
Outcome rpc_with_signal(uint32_t rank, int sig, const e2e::fs::path& dir) {
  return mpirun_benchkv_signalled(2, {rank, sig, kThirdEpoch},
                                  {"rpc", "--transport", "ucx", "-d", "4", "--interval-ms", "200", "--trim", "1", "-r",
                                   "1", "--endpoints", "2", "--queue-depth", "4", "--progress", "-o", "out.csv"},
                                  dir, "sm,self");
}

// Rank 0's outputs after a signal stopped a real rpc run in its one run: marked
// interrupted (by `signal`, `gone` ranks gone) and incomplete as the KV modes mark them,
// the finished epochs of the run kept: the CSV's rows, the run and its "rpc" figures agree.
void check_rpc_interrupted(const Outcome& o, const e2e::fs::path& dir, const std::string& signal, const json& gone) {
  CHECK(o.status != 0);
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 0: interrupted by " + signal));
  CHECK_THAT(o.err, Catch::Contains("the measurement ended early on this rank after epoch"));
  CHECK_THAT(o.err, Catch::Contains("out.csv holds the epochs measured until then"));
  const json s = interrupted_summary(dir, signal, gone);
  CHECK(s["interrupted"]["run"] == 0);
  const uint64_t done = kept_epochs(s);
  uint64_t caller = 0, servers = 0;
  for (const e2e::CsvRow& row : e2e::read_csv(dir / "out.csv")) {
    (row.rank == 0 ? caller : servers) += row.requests;
    CHECK(row.epoch < done);
  }
  CHECK(caller > 0);
  CHECK(servers == 0);
  CHECK(s["runs"][0]["requests"] == caller);
  REQUIRE(s["rpc"]["runs"].size() == 1);
  CHECK(s["rpc"]["runs"][0]["calls"] == caller);
  CHECK(s["rpc"]["runs"][0]["rtt_p50_us"].get<double>() > 0);
  const json& t = s["totals"];
  CHECK(t["errors"] == 0);
  CHECK(t["issued"].get<uint64_t>() == t["completed"].get<uint64_t>() + t["unanswered"].get<uint64_t>());
  CHECK(t["completed"].get<uint64_t>() >= caller);
}

}  // namespace

TEST_CASE("mpirun -np 2: SIGTERM to the rpc caller mid-run keeps its finished epochs, marked interrupted",
          "[real-run][mpi][rpc][faults]") {
  e2e::TempDir dir;
  const Outcome o = rpc_with_signal(0, SIGTERM, dir.path());
  INFO(e2e::describe(o));
  check_rpc_interrupted(o, dir.path(), "SIGTERM", json::array());
}

TEST_CASE("mpirun -np 2: SIGTERM to an rpc server mid-run: it says so, and the caller, then ended, keeps its epochs",
          "[real-run][mpi][rpc][faults]") {
  e2e::TempDir dir;
  const Outcome o = rpc_with_signal(1, SIGTERM, dir.path());
  INFO(e2e::describe(o));
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 1: interrupted: SIGTERM came; no outputs written by this rank"));
  // mpirun then ends rank 0 with SIGTERM: it names rank 1 as gone.
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 0: interrupted by SIGTERM; rank 1 died before it"));
  check_rpc_interrupted(o, dir.path(), "SIGTERM", json::array({1}));
}

// `benchkv sweep` under mpirun: each rank runs its share of the runs, simulated, with no
// collective between two runs. Rank 1 is stopped (SIGSTOP) once rank 0 said the runs
// start; rank 0 is then in its run of about 5 s (np 3, 0.2 s simulated). Its heartbeat
// with rank 1 (a round every quarter of BENCHKV_PEER_TIMEOUT, 1 s here) misses the
// deadline: rank 0 writes results.csv with the runs finished (none) and ends with status
// 3, naming the collective, within seconds. Before the heartbeat, rank 0 finished its run
// and waited for rank 1 in the final gather for ever.
TEST_CASE("mpirun -np 2: a sweep rank stopped mid-sweep (SIGSTOP): the other ends with status 3, naming the loss",
          "[real-run][mpi][faults][sweep]") {
  e2e::TempDir dir;
  e2e::write_file(dir.path() / "s.json", R"({"base": {"backend": "delegation", "transport": "sim", "client_threads": 2,
    "queue_depth": 4, "interval_ms": 1, "trim": 1, "runs": 1, "duration": 0.2}, "grid": {"np": [2, 3]},
    "output": "out"})");
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o = mpirun_benchkv_signalled(
      2, {1, SIGSTOP, "sweep: 2 runs, 0 finished earlier, 2 to run (2 MPI ranks)", {{"BENCHKV_PEER_TIMEOUT", "1"}}},
      {"sweep", "s.json"}, dir.path(), "sm,self");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(e2e::describe(o));
  CHECK(o.status == 3);
  CHECK_THAT(o.err, Catch::Contains("benchkv sweep: rank 0: MPI_Allreduce(heartbeat) did not complete within "
                                    "BENCHKV_PEER_TIMEOUT=1.0 s: a peer rank is stopped, dead or unreachable; ending "
                                    "this rank"));
  CHECK_THAT(o.err, Catch::Contains("sweep: wrote "));
  CHECK(secs < 30);  // the stop, the timeout, mpirun ending the stopped rank; not the runs
  // results.csv: the header alone (no run finished); no run left a row.
  const std::string csv = e2e::read_file(dir.path() / "out" / "results.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1);
  CHECK_THAT(csv, Catch::StartsWith("run,np,"));
  CHECK_FALSE(e2e::fs::exists(dir.path() / "out" / "runs" / "0000" / "row.json"));
  CHECK_FALSE(e2e::fs::exists(dir.path() / "out" / "runs" / "0001" / "row.json"));
}

// Rank 0 writes a run's outputs after the last exchange of results while the other ranks
// wait for it (write_on_root, SweepRanks::root_writes): their wait follows rank 0's
// heartbeat, not a fixed time. Slow storage is played by a FIFO as an output: a reader that
// takes what the check before the run writes (every output is opened and closed once) and
// opens the FIFO again only kLateSeconds later, more than twice the peer timeout, so rank
// 0 stays blocked in its write that long. The peer timeout is 2 s in the real runs (their
// set-up's collectives under ThreadSanitizer, as in the fault tests above), 1 s in the
// simulated sweep.
namespace {

constexpr double kWritePeerTimeout = 2;
constexpr double kLateSeconds = 4.5;
static_assert(kLateSeconds > 2 * kWritePeerTimeout, "the write outlasts the peer timeout, with room");
constexpr double kSweepPeerTimeout = 1;
constexpr double kSweepLateSeconds = 2.5;
static_assert(kSweepLateSeconds > 2 * kSweepPeerTimeout, "the write outlasts the peer timeout, with room");

std::vector<std::pair<std::string, std::string>> peer_timeout_env(double seconds) {
  return {{"BENCHKV_PEER_TIMEOUT", std::to_string(seconds)}};
}

// A consumer of the FIFO `fifo`, on a thread of its own: it reads what a first writer
// writes (skipped with `skip_first`: no check before the run) and, `late_s` seconds after,
// what the next writer writes, which text() returns (late_s < 0: it never opens the FIFO
// again, so that writer blocks for ever). With `late_from` the late_s seconds count from
// when it holds (polled every 10 ms, at most 60 s), not from the first writer's end. Each
// read ends when its writer has come and gone (POLLHUP, which Linux reports on a FIFO only
// once a writer came), or after 30 s.
class LateFifoReader {
 public:
  LateFifoReader(const path& fifo, double late_s, bool skip_first, std::function<bool()> late_from = {}) {
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    thread_ = std::thread([this, fifo, late_s, skip_first, late_from = std::move(late_from)] {
      if (!skip_first) read_one_writer(fifo);
      if (late_s < 0) return;
      if (late_from)
        for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
             std::chrono::steady_clock::now() < until && !stop_.load() && !late_from();)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
      for (const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(late_s);
           std::chrono::steady_clock::now() < until && !stop_.load();)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      got_ = read_one_writer(fifo);
    });
  }
  ~LateFifoReader() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::string text() {
    if (thread_.joinable()) thread_.join();
    return got_;
  }

 private:
  std::string read_one_writer(const path& fifo) {
    std::string text;
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // (mpirun, forked meanwhile, must not hold it)
    if (fd < 0) return text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!stop_.load() && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) text.append(buf, static_cast<size_t>(n));
      if (n == 0 && (p.revents & POLLHUP)) break;  // the writer came, wrote and closed
    }
    ::close(fd);
    return text;
  }
  std::atomic<bool> stop_{false};
  std::string got_;
  std::thread thread_;
};

// Some thread of process `pid` waits in open(2) of a FIFO for a reader (its kernel wait
// channel is wait_for_partner).
bool blocked_opening_a_fifo(long pid) {
  std::error_code ec;
  for (const auto& task : e2e::fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream wchan(task.path() / "wchan");
    std::string where;
    if (std::getline(wchan, where) && where == "wait_for_partner") return true;
  }
  return false;
}

// The requests column of a CSV text (header first), summed; its data rows counted.
std::pair<uint64_t, size_t> csv_requests(const std::string& text) {
  const std::vector<std::string> lines = e2e::lines_of(text);
  REQUIRE(!lines.empty());
  const std::vector<std::string> head = e2e::csv_fields(lines[0]);
  const auto at = std::find(head.begin(), head.end(), "requests");
  REQUIRE(at != head.end());
  uint64_t sum = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> f = e2e::csv_fields(lines[i]);
    REQUIRE(f.size() == head.size());
    uint64_t v = 0;
    REQUIRE(e2e::parse_u64(f[static_cast<size_t>(at - head.begin())], v));
    sum += v;
  }
  return {sum, lines.size() - 1};
}

// Rank 0's summary in `dir`, checked against `csv`, the CSV text rank 0 wrote to the FIFO:
// the requests column adds up to the summary's runs, and there are some.
json summary_matching_csv(const path& dir, const std::string& csv) {
  REQUIRE(e2e::fs::exists(dir / "out.summary.json"));
  const json s = e2e::read_json(dir / "out.summary.json");
  uint64_t requests = 0;
  for (const json& r : s["runs"]) requests += r["requests"].get<uint64_t>();
  const auto [sum, rows] = csv_requests(csv);
  CHECK(rows > 0);
  CHECK(sum == requests);
  CHECK(requests > 0);
  return s;
}

}  // namespace

// Before the heartbeat the other ranks waited for rank 0 at most the peer timeout (in
// MPI_Finalize, or in the KV modes' last all-reduce) and the job ended with status 3.
TEST_CASE("mpirun -np 2: rank 0 writing its outputs for longer than the peer timeout: the run ends 0, outputs whole",
          "[real-run][mpi][faults]") {
  const std::vector<std::vector<std::string>> modes = {
      {"rpc", "--transport", "ucx", "-d", "0.2", "--interval-ms", "50", "--trim", "1", "-r", "1"},
      {"data", "--transport", "ucx", "-d", "0.2", "--interval-ms", "50", "--trim", "1", "-r", "1"},
      small_real("delegation", {"-d", "0.2", "--server-threads", "1", "--client-threads", "1"})};
  for (std::vector<std::string> args : modes) {
    DYNAMIC_SECTION(args[0]) {
      e2e::TempDir dir;
      LateFifoReader reader(dir.path() / "out.csv", kLateSeconds, false);
      if (std::find(args.begin(), args.end(), "-o") == args.end()) args.insert(args.end(), {"-o", "out.csv"});
      args.push_back("--no-progress");
      const auto t0 = std::chrono::steady_clock::now();
      const Outcome o = mpirun_benchkv(2, args, dir.path(), "sm,self", peer_timeout_env(kWritePeerTimeout));
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      INFO(e2e::describe(o));
      CHECK(o.status == 0);
      CHECK(secs > kLateSeconds);  // rank 0 did wait for the reader
      CHECK_THAT(o.err, !Catch::Contains("did not"));
      (void)summary_matching_csv(dir.path(), reader.text());
    }
  }
}

// The sweep's rank 0 writes results.csv (to results.csv.tmp, then renamed) while the other
// ranks wait under the same heartbeat; the FIFO stands at results.csv.tmp.
TEST_CASE("mpirun -np 2: a sweep whose rank 0 writes results.csv for longer than the peer timeout ends 0",
          "[real-run][mpi][faults][sweep]") {
  e2e::TempDir dir;
  e2e::write_file(dir.path() / "s.json", R"({"base": {"backend": "delegation", "transport": "sim", "client_threads": 1,
    "queue_depth": 2, "interval_ms": 1, "trim": 1, "runs": 1, "duration": 0.01}, "grid": {"np": [2, 3]},
    "output": "out"})");
  e2e::fs::create_directories(dir.path() / "out");
  LateFifoReader reader(dir.path() / "out" / "results.csv.tmp", kSweepLateSeconds, true);
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o = mpirun_benchkv(2, {"sweep", "s.json"}, dir.path(), "sm,self", peer_timeout_env(kSweepPeerTimeout));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(e2e::describe(o));
  CHECK(o.status == 0);
  CHECK(secs > kSweepLateSeconds);
  CHECK_THAT(o.err, Catch::Contains("sweep: wrote ") && Catch::Contains("(2 of 2 runs)"));
  const std::string csv = reader.text();
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);  // the header and both runs
  CHECK_THAT(csv, Catch::StartsWith("run,np,"));
}

// Rank 0 alive but its write blocked (the FIFO is never read again): the other rank keeps
// waiting past the peer timeout (1.5 times it); once rank 0 is killed (mpirun --enable-recovery keeps the
// job going, so the survivor meets the loss itself), it misses a heartbeat round and ends
// with status 3 within about the peer timeout. Before the heartbeat it ended 1 s after
// entering MPI_Finalize, whatever rank 0 did.
TEST_CASE("mpirun -np 2: rank 0 killed while its write is blocked: the rank waiting for it ends with status 3",
          "[real-run][mpi][faults][rpc]") {
  e2e::TempDir dir;
  LateFifoReader reader(dir.path() / "out.csv", -1, false);
  SignalAt at{0, SIGKILL, "run 1/1 epoch 4/4", peer_timeout_env(kWritePeerTimeout), {"--enable-recovery"}};
  at.ready = blocked_opening_a_fifo;      // rank 0 is in its write
  at.delay_s = 1.5 * kWritePeerTimeout;  // and stays blocked in it that long before it is killed
  at.report_status = true;
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o = mpirun_benchkv_signalled(
      2, at, {"rpc", "--transport", "ucx", "-d", "0.2", "--interval-ms", "50", "--trim", "1", "-r", "1", "-o", "out.csv"},
      dir.path(), "sm,self");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(e2e::describe(o));
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 1: MPI_Allreduce(heartbeat) did not complete within "
                                    "BENCHKV_PEER_TIMEOUT=2.0 s: a peer rank is stopped, dead or unreachable; ending "
                                    "this rank (rank 0 writes the outputs)"));
  CHECK_THAT(o.err, Catch::Contains("rank 1: exit status 3"));
  CHECK_THAT(o.err, !Catch::Contains("shut-down did not finish"));
  CHECK(secs < 30);
}

// After a lost peer every surviving rank writes its own outputs (finish_incomplete), and
// the others wait for rank 0's as long as rank 0 answers their polls
// (Session::write_after_peer_lost), not a fixed time. Rank 2 of 3 is stopped mid-run (peer
// timeout 2 s); rank 0's CSV is a FIFO read kLateSeconds after rank 0 blocked in it. Before,
// rank 1 waited one peer timeout after its own write and exited, and mpirun ended rank 0
// inside its write: no summary, the CSV cut.
TEST_CASE("mpirun -np 3: after a lost peer the others wait for rank 0's outputs written longer than the peer timeout",
          "[real-run][mpi][faults]") {
  e2e::TempDir dir;
  const path pid0 = dir.path() / "rank0.pid";
  LateFifoReader reader(dir.path() / "out.csv", kLateSeconds, false, [&pid0] {
    std::ifstream in(pid0);
    long pid = 0;
    return static_cast<bool>(in >> pid) && pid > 0 && blocked_opening_a_fifo(pid);
  });
  SignalAt at{2, SIGSTOP, kThirdEpoch, peer_timeout_env(kWritePeerTimeout)};
  at.report_status = true;
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o = mpirun_benchkv_signalled(
      3, at, small_real("delegation", {"-d", "4", "--interval-ms", "200", "--progress"}), dir.path(), "sm,self");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(e2e::describe(o));
  CHECK(o.status != 0);  // (each rank's shell exits 0 after saying its status: mpirun reports 1)
  CHECK(secs > kLateSeconds);
  CHECK(secs < 60);
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 1: rank 0 has written its outputs; ending this rank"));
  CHECK_THAT(o.err, Catch::Contains("rank 0: exit status 3") && Catch::Contains("rank 1: exit status 3"));
  // No watchdog ended a surviving rank. The stopped rank 2 may report its own when mpirun
  // resumes it to deliver SIGTERM (seen under TSan, whose slower ranks leave it stopped
  // longer than its watchdog's bound).
  CHECK_THAT(o.err, !Catch::Contains("rank 0: no collective completed") && !Catch::Contains("rank 1: no collective completed"));
  const json s = summary_matching_csv(dir.path(), reader.text());
  CHECK(s["incomplete"]["ranks_reported"] == json::array({0}));
  CHECK_THAT(s["incomplete"]["reason"].get<std::string>(), Catch::Contains("BENCHKV_PEER_TIMEOUT=2.0 s"));
  // Rank 1 kept its own epochs too, before it waited.
  REQUIRE(e2e::fs::exists(dir.path() / "out.rank1.summary.json"));
  CHECK(e2e::read_json(dir.path() / "out.rank1.summary.json")["incomplete"]["ranks_reported"] == json::array({1}));
}
