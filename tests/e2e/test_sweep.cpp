// benchkv sweep: a small grid gives byte-identical rows run one at a time, two at a time
// and as two MPI ranks; finished runs are not run again; bad sweep files are rejected
// with a message naming the problem.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e/benchkv_run.hpp"

using namespace bkv::e2e;

namespace {

// 2 x 2 x 2 = 8 short runs (the staggered start really staggers; the model key changes
// the NIC), a few seconds in all.
constexpr const char* kSweep = R"({
  "base": {"backend": "delegation", "transport": "sim", "client_threads": 2, "queue_depth": 4,
           "interval_ms": 1, "trim": 1, "runs": 1, "start_stagger_us": 200},
  "set": {"duration": 0.004},
  "grid": {"np": [2, 3], "start_mode": ["sync", "staggered"], "model.nic.send.qp_window": [1, 8]},
  "output": "OUT"
})";

std::string sweep_text(const std::string& out) {
  std::string s = kSweep;
  s.replace(s.find("OUT"), 3, out);
  return s;
}

// The base of the small sweeps: delegation on the simulator, 2 clients at queue depth 4,
// one run of 4 epochs of 1 ms, one left out at each end.
constexpr const char* kSmallBase = R"({"backend": "delegation", "transport": "sim", "client_threads": 2,
  "queue_depth": 4, "interval_ms": 1, "trim": 1, "runs": 1, "duration": 0.004})";

// A sweep file of `grid` over kSmallBase, writing to `output`.
std::string small_sweep(const std::string& grid, const std::string& output) {
  return std::string(R"({"base": )") + kSmallBase + R"(, "grid": )" + grid + R"(, "output": ")" + output + "\"}";
}

Outcome sweep(const TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), "sweep");
  return run_benchkv(args, dir.path());
}

void require_rejected(const Outcome& o, std::initializer_list<std::string> fragments) {
  INFO(describe(o));
  CHECK(o.status != 0);
  CHECK(o.status < 126);
  for (const auto& f : fragments) CHECK_THAT(o.err, Catch::Contains(f));
}

}  // namespace

TEST_CASE("sweep: -j 1, -j 2 and 2 MPI ranks give byte-identical rows", "[e2e][sweep][mpirun]") {
  TempDir dir;
  write_file(dir / "j1.json", sweep_text("j1"));
  write_file(dir / "j2.json", sweep_text("j2"));
  const Outcome a = sweep(dir, {"j1.json", "-j", "1"});
  REQUIRE(a.status == 0);
  // The base's stagger does not apply to the sync runs: one warning for the sweep.
  CHECK_THAT(a.err, Catch::Contains("benchkv sweep: warning: start_stagger_us (--start-stagger-us): 200.0 does not "
                                    "apply to --transport sim, backend delegation"));
  CHECK_THAT(a.err, Catch::Contains("ignored in 4 of 8 runs\n"));
  const Outcome b = sweep(dir, {"j2.json", "-j", "2"});
  REQUIRE(b.status == 0);
  const std::string rows = read_file(dir / "j1" / "results.csv");
  CHECK(read_file(dir / "j2" / "results.csv") == rows);

  // One row per run: header + 8, every run consistent, and the grid really varies the runs.
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = rows.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(rows.substr(at, nl - at));
  REQUIRE(lines.size() == 9);
  CHECK(lines[0] ==
        "run,np,start_mode,model.nic.send.qp_window,mops_total,mops_per_rank,cqe_per_loop,inflight,issued,completed,"
        "errors,latency_mean_ns,latency_p50_ns,latency_p99_ns,latency_p999_ns,latency_max_ns,mops_ci95_low,"
        "mops_ci95_high,latency_saturated");
  CHECK(lines[1].rfind("0,2,sync,1,", 0) == 0);
  CHECK(lines[8].rfind("7,3,staggered,8,", 0) == 0);
  for (size_t i = 1; i < lines.size(); ++i) {  // no errors, and the latency columns filled
    std::vector<std::string> f;
    std::istringstream in(lines[i]);
    for (std::string x; std::getline(in, x, ',');) f.push_back(x);
    INFO(lines[i]);
    REQUIRE(f.size() == 19);
    CHECK(f[10] == "0");
    CHECK(f[18] == "false");  // latency_saturated: no bucket of these short runs came near 2^32 - 1
    CHECK(std::stod(f[12]) > 0);                  // latency p50 (ns)
    CHECK(std::stod(f[12]) <= std::stod(f[13]));  // <= p99
    CHECK(std::stod(f[13]) <= std::stod(f[15]));  // <= max
  }
  CHECK(lines[1].substr(11) != lines[2].substr(11));  // qp_window 1 vs 8
  CHECK(lines[1].substr(11) != lines[3].substr(18));  // sync vs staggered
  // The model key reached the run's model.
  CHECK(read_json(dir / "j1" / "runs" / "0001" / "model.json")["nic"]["send"]["qp_window"] == 8);

#ifdef MPIEXEC_BIN
  write_file(dir / "mpi.json", sweep_text("mpi"));
  const Outcome m = spawn({MPIEXEC_BIN, "-np", "2", "--oversubscribe", "--bind-to", "none", BENCHKV_BIN, "sweep",
                           "mpi.json"},
                          dir.path(),
                          mpirun_env());
  INFO(describe(m));
  REQUIRE(m.status == 0);
  CHECK_THAT(m.err, Catch::Contains("rank 1:"));  // both ranks ran runs
  CHECK(read_file(dir / "mpi" / "results.csv") == rows);
#else
  WARN("benchkv built without MPI: the mpirun part of this test did not run");
#endif
}

// Under mpirun every rank loads the sweep and works out what is left to run; the ranks
// then agree on it before any run starts. A rank that cannot load the sweep, or that
// read another sweep than rank 0, ends every rank with status 2 naming it (before, rank 0
// waited forever for the rank that had given up, or the ranks ran different sweeps into
// one results.csv).
TEST_CASE("sweep: under mpirun a rank that cannot load the sweep or reads another ends every rank",
          "[e2e][sweep][bad-input][mpirun]") {
#ifdef MPIEXEC_BIN
  TempDir dir;
  write_file(dir / "s.json", sweep_text("out"));
  std::string other = sweep_text("out");
  other.replace(other.find("0.004"), 5, "0.008");
  write_file(dir / "other.json", other);
  const std::vector<std::pair<std::string, std::string>> env = mpirun_env();
  // Rank 0 gets s.json, rank 1 `second` (MPMD); `timeout` ends a hang as a failure.
  auto two_ranks = [&](const std::string& second) {
    return spawn({"/usr/bin/timeout", "60", MPIEXEC_BIN, "--bind-to", "none", "-np", "1", BENCHKV_BIN, "sweep",
                  "s.json", ":", "-np", "1", BENCHKV_BIN, "sweep", second},
                 dir.path(), env);
  };
  const Outcome missing = two_ranks("missing.json");
  INFO(describe(missing));
  CHECK(missing.status == 2);
  CHECK_THAT(missing.err, Catch::Contains("benchkv sweep: missing.json: no such file"));
  CHECK_THAT(missing.err, Catch::Contains("benchkv sweep: rank 1 could not start the sweep (its message above); "
                                          "no run started"));
  CHECK_FALSE(fs::exists(dir / "out" / "runs" / "0000" / "row.json"));

  const Outcome differs = two_ranks("other.json");
  INFO(describe(differs));
  CHECK(differs.status == 2);
  CHECK_THAT(differs.err, Catch::Contains("benchkv sweep: rank 1 read another sweep than rank 0 (s.json on rank 0: "
                                          "8 runs; rank 1: 8 runs, with other settings, or another content of a "
                                          "config or model file they name); no run started"));
  CHECK_FALSE(fs::exists(dir / "out" / "results.csv"));
  CHECK_FALSE(fs::exists(dir / "out" / "runs" / "0000" / "row.json"));
#else
  WARN("benchkv built without MPI: this test did not run");
#endif
}

TEST_CASE("sweep: a rerun resumes, running only what has not finished", "[e2e][sweep]") {
  TempDir dir;
  write_file(dir / "s.json", sweep_text("out"));
  REQUIRE(sweep(dir, {"s.json", "-j", "2"}).status == 0);
  const std::string rows = read_file(dir / "out" / "results.csv");
  const Outcome again = sweep(dir, {"s.json"});
  REQUIRE(again.status == 0);
  CHECK_THAT(again.err, Catch::Contains("8 finished earlier, 0 to run"));
  // An interrupted sweep: run 5 never finished.
  fs::remove(dir / "out" / "runs" / "0005" / "row.json");
  fs::remove(dir / "out" / "results.csv");
  const Outcome resumed = sweep(dir, {"s.json"});
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.err, Catch::Contains("7 finished earlier, 1 to run"));
  CHECK_THAT(resumed.err, Catch::Contains("run 5 (np=3, start_mode=sync, model.nic.send.qp_window=8) done"));
  CHECK(read_file(dir / "out" / "results.csv") == rows);
  // A changed grid does not reuse another sweep's results.
  std::string changed = sweep_text("out");
  changed.replace(changed.find("\"np\": [2, 3]"), 12, "\"np\": [3, 2]");
  write_file(dir / "s.json", changed);
  require_rejected(sweep(dir, {"s.json"}), {"holds a different run 0", "np=3"});
}

// A finished run is reused only if it was made with the run's whole effective
// configuration; a changed setting is refused (status 2) naming what changed, never
// mixed into results.csv.
TEST_CASE("sweep: a changed setting refuses the old results instead of reusing them", "[e2e][sweep]") {
  TempDir dir;
  write_file(dir / "s.json", sweep_text("out"));
  REQUIRE(sweep(dir, {"s.json", "-j", "2"}).status == 0);
  const std::string rows = read_file(dir / "out" / "results.csv");
  const std::string run0 = read_file(dir / "out" / "runs" / "0000" / "row.json");

  // A "set" value.
  std::string changed = sweep_text("out");
  changed.replace(changed.find("\"duration\": 0.004"), 17, "\"duration\": 0.008");
  write_file(dir / "s.json", changed);
  Outcome o = sweep(dir, {"s.json"});
  {
    INFO(describe(o));
    CHECK(o.status == 2);
    CHECK_THAT(o.err, Catch::Contains("\nbenchkv sweep: s.json: the output directory "));
    CHECK_THAT(o.err, Catch::Contains("made with another configuration (duration: 0.004 -> 0.008)"));
    CHECK_THAT(o.err, Catch::Contains("choose another \"output\""));
    CHECK_THAT(o.err, !Catch::Contains("finished earlier"));
  }
  CHECK(read_file(dir / "out" / "results.csv") == rows);  // nothing rewritten
  CHECK(read_file(dir / "out" / "runs" / "0000" / "row.json") == run0);

  // A grid value added with the changed setting: still refused (run 0 is the same point).
  changed.replace(changed.find("\"np\": [2, 3]"), 12, "\"np\": [2, 3, 4]");
  write_file(dir / "s.json", changed);
  o = sweep(dir, {"s.json"});
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("duration: 0.004 -> 0.008"));

  // A value in the base object.
  changed = sweep_text("out");
  changed.replace(changed.find("\"queue_depth\": 4"), 16, "\"queue_depth\": 8");
  write_file(dir / "s.json", changed);
  o = sweep(dir, {"s.json"});
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("queue_depth: 4 -> 8"));

  // The unchanged sweep file resumes as before.
  write_file(dir / "s.json", sweep_text("out"));
  o = sweep(dir, {"s.json"});
  CHECK(o.status == 0);
  CHECK_THAT(o.err, Catch::Contains("8 finished earlier, 0 to run"));
  CHECK(read_file(dir / "out" / "results.csv") == rows);

  // A row.json without a configuration record (an older benchkv's) is not trusted either.
  json old = read_json(dir / "out" / "runs" / "0003" / "row.json");
  REQUIRE(old.contains("config_hash"));
  old.erase("config_hash");
  old.erase("config");
  write_file(dir / "out" / "runs" / "0003" / "row.json", old.dump(2));
  o = sweep(dir, {"s.json"});
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("without a record of the configuration"));
}

// The row a finished run recorded goes into results.csv as it is, so it is checked like
// the rest of row.json: it must start with the run's number and labels and hold one field
// per summary figure, on one line. A row.json edited by hand (or damaged) is refused
// (status 2) naming the run, instead of writing a duplicate, short or split row.
TEST_CASE("sweep: a finished run whose recorded row is not its row is refused", "[e2e][sweep][bad-input]") {
  TempDir dir;
  write_file(dir / "s.json", sweep_text("out"));
  REQUIRE(sweep(dir, {"s.json", "-j", "2"}).status == 0);
  const std::string rows = read_file(dir / "out" / "results.csv");
  const fs::path f3 = dir / "out" / "runs" / "0003" / "row.json";
  const json good = read_json(f3);
  const std::string row2 = read_json(dir / "out" / "runs" / "0002" / "row.json")["row"];
  const std::string row3 = good["row"];
  std::string missing = row3;  // without its first figure (mops_total), after the run and its 3 labels
  size_t at = 0;
  for (int i = 0; i < 4; ++i) at = missing.find(',', at) + 1;
  missing.erase(at, missing.find(',', at) + 1 - at);
  for (const std::string& bad : {row2,                                  // another run's row
                                 missing,                               // a figure missing
                                 row3 + ",7",                           // a figure too many
                                 row3.substr(0, row3.rfind(',')) + ",0\n4,x"}) {  // two lines
    json edited = good;
    edited["row"] = bad;
    write_file(f3, edited.dump(2));
    const Outcome o = sweep(dir, {"s.json"});
    INFO(describe(o));
    CHECK(o.status == 2);
    CHECK_THAT(o.err, Catch::Contains("benchkv sweep: s.json: the output directory "));
    CHECK_THAT(o.err, Catch::Contains("holds run 3 (np=2, start_mode=staggered, model.nic.send.qp_window=8) whose "
                                      "recorded row is not its row"));
    CHECK(read_file(dir / "out" / "results.csv") == rows);
  }
  // A row without the last column, latency_saturated (an older benchkv's row): refused as
  // an older benchkv's, as a row without latency columns is.
  CHECK_THAT(row3, Catch::EndsWith(",false"));
  json older = good;
  older["row"] = row3.substr(0, row3.rfind(','));
  write_file(f3, older.dump(2));
  const Outcome o = sweep(dir, {"s.json"});
  INFO(describe(o));
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("holds run 3 (np=2, start_mode=staggered, model.nic.send.qp_window=8) recorded "
                                    "by an older benchkv, whose rows had no latency_saturated column"));
  CHECK(read_file(dir / "out" / "results.csv") == rows);
  write_file(f3, good.dump(2));
  CHECK(sweep(dir, {"s.json"}).status == 0);
  CHECK(read_file(dir / "out" / "results.csv") == rows);
}

// A row.json cut short (a full disk, a copy that stopped) is an output directory that
// cannot be used as it is: status 2 and a message naming the sweep file and the run, as
// for the other refusals, with what to do (before: status 1, "benchkv finished run ...
// is not valid JSON", without the sweep or the run).
TEST_CASE("sweep: a truncated row.json is refused naming the sweep file and the run", "[e2e][sweep][bad-input]") {
  TempDir dir;
  write_file(dir / "s.json", sweep_text("out"));
  REQUIRE(sweep(dir, {"s.json", "-j", "2"}).status == 0);
  const fs::path f = dir / "out" / "runs" / "0006" / "row.json";
  const std::string text = read_file(f);
  write_file(f, text.substr(0, text.size() / 2));
  const Outcome o = sweep(dir, {"s.json"});
  INFO(describe(o));
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("\nbenchkv sweep: s.json: the output directory "));
  CHECK_THAT(o.err, Catch::Contains("holds run 6 (np=3, start_mode=staggered, model.nic.send.qp_window=1) whose "
                                    "row.json is damaged ("));
  CHECK_THAT(o.err, Catch::Contains("is not valid JSON"));
  CHECK_THAT(o.err, Catch::Contains("remove that row.json to run the run again"));
  // Doing so runs that run again.
  fs::remove(f);
  const Outcome again = sweep(dir, {"s.json"});
  CHECK(again.status == 0);
  CHECK_THAT(again.err, Catch::Contains("7 finished earlier, 1 to run"));
}

// results.csv quotes (RFC 4180) every label holding a comma, a double quote, a line feed
// or a carriage return: an unquoted carriage return ends the row for CSV readers (Python's
// csv module read "0,2,a<CR>b,..." as two rows).
TEST_CASE("sweep: labels with a comma or a quote or a line break are quoted in results.csv", "[e2e][sweep]") {
  TempDir dir;
  write_file(dir / "s.json",
             small_sweep(R"({"np": [2], "variant": {"a\rb": {}, "c,\"d": {}, "e\nf": {}, "plain": {}}})", "out"));
  const Outcome o = sweep(dir, {"s.json"});
  INFO(describe(o));
  REQUIRE(o.status == 0);
  const std::string rows = read_file(dir / "out" / "results.csv");
  INFO(rows);
  CHECK(rows.find("\n0,2,\"a\rb\",") != std::string::npos);
  CHECK(rows.find("\n1,2,\"c,\"\"d\",") != std::string::npos);
  CHECK(rows.find("\n2,2,\"e\nf\",") != std::string::npos);
  CHECK(rows.find("\n3,2,plain,") != std::string::npos);
  // Resuming reads the same rows back (row.json's row is checked against the quoted labels).
  CHECK(sweep(dir, {"s.json"}).status == 0);
  CHECK(read_file(dir / "out" / "results.csv") == rows);
}

TEST_CASE("sweep: a changed base config file or model file refuses the old results", "[e2e][sweep]") {
  TempDir dir;
  write_file(dir / "base.json", R"({"backend": "delegation", "transport": "sim", "client_threads": 2,
    "queue_depth": 4, "interval_ms": 1, "trim": 1, "runs": 1, "duration": 0.004, "model": "m.json"})");
  write_file(dir / "m.json", R"({"nic": {"send": {"qp_window": 8}}})");
  write_file(dir / "s.json", R"({"base": "base.json", "grid": {"np": [2]}, "output": "out"})");
  REQUIRE(sweep(dir, {"s.json"}).status == 0);
  const std::string rows = read_file(dir / "out" / "results.csv");

  write_file(dir / "m.json", R"({"nic": {"send": {"qp_window": 2}}})");  // the model file's content
  Outcome o = sweep(dir, {"s.json"});
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("model.nic.send.qp_window: 8 -> 2"));
  write_file(dir / "m.json", R"({"nic": {"send": {"qp_window": 8}}})");

  write_file(dir / "base.json", R"({"backend": "delegation", "transport": "sim", "client_threads": 2,
    "queue_depth": 4, "interval_ms": 1, "trim": 1, "runs": 1, "duration": 0.004, "model": "m.json", "seed": 7})");
  o = sweep(dir, {"s.json"});
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("seed: 1 -> 7"));
  CHECK(read_file(dir / "out" / "results.csv") == rows);
}

TEST_CASE("sweep: bad sweep files and options are rejected naming the problem", "[e2e][sweep][bad-input]") {
  TempDir dir;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = sweep_text("out");
    REQUIRE(s.find(from) != std::string::npos);
    s.replace(s.find(from), from.size(), to);
    write_file(dir / "bad.json", s);
    return sweep(dir, {"bad.json"});
  };
  require_rejected(with("\"set\":", "\"sett\":"), {"unknown key \"sett\""});
  require_rejected(with("\"np\": [2, 3]", "\"npp\": [2, 3]"), {"\"npp\"", "run 0"});
  require_rejected(with("\"start_mode\": [\"sync\", \"staggered\"]", "\"start_mode\": [\"sync\", \"sideways\"]"),
                   {"start_mode", "sideways", "run 2"});
  // Sweeps run rpc too, but a KV client option in its grid does not apply to it.
  require_rejected(with("\"backend\": \"delegation\"", "\"backend\": \"rpc\""),
                   {"run 2", "start_mode", "does not apply to --transport sim, mode rpc"});
  // A grid axis that does not apply to a run is an error, not a dropped value.
  require_rejected(with("\"start_mode\": [\"sync\", \"staggered\"]", "\"start_stagger_us\": [100, 200]"),
                   {"run 0", "start_stagger_us", "does not apply"});
  require_rejected(with("\"model.nic.send.qp_window\"", "\"model.nic.send.qp_windw\""), {"qp_windw"});
  require_rejected(with("\"np\": [2, 3]", "\"np\": []"), {"grid axis \"np\" has no values"});
  require_rejected(with("\"np\": [2, 3]", "\"output\": [\"a\"]"), {"\"output\" is set by the sweep"});
  require_rejected(with("\"output\": \"out\"", "\"output\": \"out\", \"plot\": [{\"kind\": \"lines\", \"x\": \"np\", "
                                               "\"y\": \"mops\"}]"),
                   {"plot 0", "\"mops\"", "not a column"});
  // A share is of runs above a threshold: it needs one, and no other kind takes one.
  require_rejected(with("\"output\": \"out\"", "\"output\": \"out\", \"plot\": [{\"kind\": \"share\", \"x\": \"np\", "
                                               "\"y\": \"mops_per_rank\"}]"),
                   {"plot 0", "\"share\" needs \"above\""});
  require_rejected(with("\"output\": \"out\"", "\"output\": \"out\", \"plot\": [{\"kind\": \"lines\", \"x\": \"np\", "
                                               "\"y\": \"mops_per_rank\", \"above\": 3}]"),
                   {"plot 0", "\"above\" belongs to \"share\" only"});
  require_rejected(with("\"output\": \"out\"", "\"output\": \"out\", \"plot\": [{\"kind\": \"heatmap\", \"x\": \"np\", "
                                               "\"y\": \"start_mode\", \"z\": \"mops_per_rank\", \"logx\": true}]"),
                   {"plot 0", "\"logx\" is true or false, for \"lines\" and \"share\""});
  CHECK_FALSE(fs::exists(dir / "out"));  // nothing ran
  write_file(dir / "s.json", sweep_text("out"));
  require_rejected(sweep(dir, {"s.json", "-j", "0"}), {"-j", "\"0\""});
  require_rejected(sweep(dir, {"s.json", "--jobz", "2"}), {"unknown option \"--jobz\""});
  require_rejected(sweep(dir, {"s.json", "-j", "2", "--jobs", "1"}), {"sweep: --jobs given more than once"});
  // A missing sweep file is a usage error like the others: status 2, "sweep:" prefix.
  const Outcome absent = sweep(dir, {"absent.json"});
  CHECK(absent.status == 2);
  CHECK_THAT(absent.err, Catch::StartsWith("benchkv sweep: absent.json: no such file"));
  // A model key the model does not have reads as the sweep's key.
  const Outcome bogus = with("\"model.nic.send.qp_window\"", "\"model.nic.bogus\"");
  CHECK(bogus.status == 2);
  CHECK_THAT(bogus.err, Catch::Contains("the run's model (the built-in defaults with the sweep's \"model.\" keys): "
                                        "model.nic.bogus: unknown key"));
  CHECK_THAT(bogus.err, !Catch::Contains("keys.nic"));
}

// JSON leaves a name given twice in one object to the reader; the sweep file's reader took
// the last silently, so "np": [2, 3], ..., "np": [8] ran only np=8 (and a second "set" or
// "grid" replaced the first whole). A key given twice in any object of the sweep file is
// an error naming it.
TEST_CASE("sweep: a key given twice in one object of the sweep file is rejected naming it",
          "[e2e][sweep][bad-input]") {
  TempDir dir;
  auto rejected = [&](const std::string& from, const std::string& to, const std::string& key) {
    std::string s = sweep_text("out");
    REQUIRE(s.find(from) != std::string::npos);
    s.replace(s.find(from), from.size(), to);
    write_file(dir / "dup.json", s);
    const Outcome o = sweep(dir, {"dup.json", "--check"});
    INFO(describe(o));
    CHECK(o.status == 2);
    CHECK_THAT(o.err, Catch::Contains("benchkv sweep: dup.json: the key \"" + key +
                                      "\" appears twice in one object (JSON leaves which one counts open)"));
  };
  rejected("\"np\": [2, 3]", "\"np\": [2, 3], \"np\": [8]", "np");  // an axis
  rejected("\"set\": {\"duration\": 0.004}", "\"set\": {\"duration\": 0.004}, \"set\": {\"seed\": 2}", "set");
  rejected("\"queue_depth\": 4,", "\"queue_depth\": 4, \"queue_depth\": 8,", "queue_depth");  // in "base"
  CHECK_FALSE(fs::exists(dir / "out"));
}

// --help lists what `benchkv sweep` accepts and how it behaves: --jobs (the long form of
// -j, accepted but not listed before) and that -j > 1 is refused under mpirun.
TEST_CASE("sweep: --help names every option it accepts and the -j rule under mpirun", "[e2e][sweep]") {
  TempDir dir;
  const Outcome h = sweep(dir, {"--help"});
  INFO(describe(h));
  REQUIRE(h.status == 0);
  CHECK_THAT(h.out, Catch::Contains("  -j N, --jobs N  "));
  CHECK_THAT(h.out, Catch::Contains("under mpirun each\n"));  // (the line wraps there)
  CHECK_THAT(h.out, Catch::Contains("rank is one run slot and -j above 1 is refused"));
  CHECK_THAT(h.out, Catch::Contains("  --check  "));
  // The sweep file's format: shown, and the page named for it describes it (an earlier
  // help sent readers to a section that only pointed back to --help).
  for (const char* key : {"\"base\"", "\"set\"", "\"grid\"", "\"output\"", "\"plot\"", "\"model.\""})
    CHECK_THAT(h.out, Catch::Contains(key));
  const std::string page = "docs/sweeps.md";
  REQUIRE_THAT(h.out, Catch::Contains("described with an example in " + page));
  std::ifstream doc(std::string(BKV_SOURCE_DIR) + "/" + page);
  const std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("\"base\": \"../c1_np8.json\"") && Catch::Contains("\"grid\": {") &&
                       Catch::Contains("An axis is a list of values of one key"));
  // What it says holds: --jobs runs like -j.
  write_file(dir / "s.json", small_sweep(R"({"np": [2, 3]})", "out"));
  const Outcome j = sweep(dir, {"s.json", "--jobs", "2"});
  INFO(describe(j));
  CHECK(j.status == 0);
  CHECK_THAT(j.err, Catch::Contains("(2 at a time, -j; the longest first)"));
}

TEST_CASE("sweep: one run per core by default, and the largest point starts first", "[e2e][sweep]") {
  TempDir dir;
  write_file(dir / "default.json", small_sweep(R"({"np": [2, 3, 4]})", "by_default"));
  write_file(dir / "one.json", small_sweep(R"({"np": [2, 3, 4]})", "one"));
  // No -j: as many at a time as the machine has cores (these runs need little memory).
  const Outcome d = sweep(dir, {"default.json"});
  INFO(describe(d));
  REQUIRE(d.status == 0);
  const unsigned cores = std::thread::hardware_concurrency() == 0 ? 1 : std::thread::hardware_concurrency();
  CHECK_THAT(d.err, Catch::Contains("sweep: 3 runs, 0 finished earlier, 3 to run (" + std::to_string(cores) +
                                    " at a time, one per core; the longest first)"));
  // -j 1: one at a time, so the order they end in is the order they started in: the
  // largest point (np 4, grid order last) first, then np 3, then np 2.
  const Outcome one = sweep(dir, {"one.json", "-j", "1"});
  INFO(describe(one));
  REQUIRE(one.status == 0);
  const size_t first = one.err.find("sweep: [1/3] run 2 (np=4) done"), second = one.err.find("sweep: [2/3] run 1 (np=3) done"),
               third = one.err.find("sweep: [3/3] run 0 (np=2) done");
  CHECK(first != std::string::npos);
  CHECK(second != std::string::npos);
  CHECK(third != std::string::npos);
  CHECK(first < second);
  CHECK(second < third);
  CHECK(read_file(dir / "one" / "results.csv") == read_file(dir / "by_default" / "results.csv"));
}

// Sweeps run copyrpc alone (rpc) and bulk values (data) too: one row per grid point, with
// the rate in the Mops columns and the latency columns filled.
TEST_CASE("sweep: rpc over message sizes and data over value sizes", "[e2e][sweep]") {
  TempDir dir;
  write_file(dir / "rpc.json", R"({
    "base": {"backend": "rpc", "transport": "sim", "np": 2, "interval_ms": 1, "trim": 1, "runs": 1, "duration": 0.004},
    "grid": {"message_size": [8, 256]}, "output": "rpc"})");
  write_file(dir / "data.json", R"({
    "base": {"backend": "data", "transport": "sim", "np": 2, "interval_ms": 1, "trim": 1, "runs": 1, "duration": 0.004,
             "key_range": 8},
    "grid": {"value_size": [64, "1024"]}, "output": "data"})");  // a size as a number or a string
  for (const char* kind : {"rpc", "data"}) {
    INFO(kind);
    const Outcome o = sweep(dir, {std::string(kind) + ".json", "-j", "1"});
    INFO(describe(o));
    REQUIRE(o.status == 0);
    const std::string rows = read_file(dir / kind / "results.csv");
    std::vector<std::vector<std::string>> f;
    std::istringstream in(rows);
    for (std::string l; std::getline(in, l);) {
      std::vector<std::string> cells;
      std::istringstream c(l);
      for (std::string x; std::getline(c, x, ',');) cells.push_back(x);
      f.push_back(cells);
    }
    REQUIRE(f.size() == 3);
    CHECK(f[0][1] == (std::string(kind) == "rpc" ? "message_size" : "value_size"));
    CHECK(f[0][2] == "mops_total");
    CHECK(f[0][10] == "latency_p50_ns");
    CHECK(f[1][1] == (std::string(kind) == "rpc" ? "8" : "64"));
    CHECK(f[2][1] == (std::string(kind) == "rpc" ? "256" : "1024"));
    for (size_t r = 1; r < 3; ++r) {
      REQUIRE(f[r].size() >= 14);
      CHECK(std::stod(f[r][2]) > 0);         // the rate
      CHECK(f[r][6] == f[r][7]);             // issued == completed
      CHECK(f[r][8] == "0");                 // no errors
      CHECK(std::stod(f[r][10]) > 0);        // latency p50 (ns)
      // Per issuing rank: rank 0 alone calls in rpc (the server rank issues nothing);
      // both ranks issue in data.
      CHECK(std::stod(f[r][3]) ==
            Approx(std::stod(f[r][2]) / (std::string(kind) == "rpc" ? 1 : 2)).margin(1.5e-6));
    }
    // Larger messages and values take longer per call: the rate falls, the latency rises.
    CHECK(std::stod(f[2][2]) < std::stod(f[1][2]));
    CHECK(std::stod(f[2][9]) > std::stod(f[1][9]));
  }
}

TEST_CASE("sweep: every sweep file the repository ships is valid (--check)", "[e2e][sweep]") {
  // Every file in the folder, so that a sweep added there is checked without a list to edit.
  size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(std::string(BKV_SOURCE_DIR) + "/configs/sweeps")) {
    if (entry.path().extension() != ".json") continue;
    const std::string file = entry.path().string();
    ++checked;
    TempDir dir;
    const Outcome o = run_benchkv({"sweep", file, "--check"}, dir.path());
    INFO(describe(o));
    CHECK(o.status == 0);
    CHECK_THAT(o.out, Catch::Contains("every run's options and model valid"));
  }
  CHECK(checked >= 6);  // regime_map, ablation, ablation_spread, basin, basin_budget, np_queue_depth
  // --check runs nothing and still rejects a bad file.
  TempDir dir;
  write_file(dir / "bad.json", "{\"grid\": {}}");
  const Outcome bad = run_benchkv({"sweep", "bad.json", "--check"}, dir.path());
  INFO(describe(bad));
  CHECK(bad.status == 2);
  // The same message as a run gives: "benchkv sweep: FILE: ..." (docs/outputs.md §Sweeps).
  CHECK_THAT(bad.err, Catch::StartsWith("benchkv sweep: bad.json: "));
  const Outcome ran = run_benchkv({"sweep", "bad.json"}, dir.path());
  CHECK(ran.status == 2);
  CHECK(ran.err == bad.err);
}

TEST_CASE("sweep: the fingerprint --check prints follows the model file's content and not only its path",
          "[e2e][sweep]") {
  // Ranks under mpirun compare this fingerprint: two nodes whose copies of a model file
  // differ must not run one sweep as if it were the same.
  TempDir dir;
  write_file(dir / "m.json", R"({"nic": {"send": {"qp_window": 8}}})");
  write_file(dir / "s.json", R"({"base": {"backend": "delegation", "transport": "sim", "model": "m.json",
    "duration": 0.004, "interval_ms": 1, "trim": 1}, "grid": {"np": [2, 3]}, "output": "out"})");
  auto fingerprint = [&] {
    const Outcome o = run_benchkv({"sweep", "s.json", "--check"}, dir.path());
    INFO(describe(o));
    REQUIRE(o.status == 0);
    const auto at = o.out.find("fingerprint ");
    REQUIRE(at != std::string::npos);
    return o.out.substr(at + 12, 16);
  };
  const std::string first = fingerprint();
  CHECK(first.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(fingerprint() == first);
  write_file(dir / "m.json", R"({"nic": {"send": {"qp_window": 2}}})");
  CHECK(fingerprint() != first);
  write_file(dir / "m.json", R"({"nic": {"send": {"qp_window": 8}}})");
  CHECK(fingerprint() == first);
}

namespace {

// Starts `benchkv sweep -j 2` on two long runs (with SIGTERM ignored when
// `ignore_sigterm`: a launcher may leave it so, and the sweep inherits it), kills the
// sweep with SIGKILL once both runs have started and returns whether both ended.
bool runs_end_with_killed_sweep(bool ignore_sigterm) {
  TempDir dir;
  write_file(dir / "s.json", R"({"base": {"backend": "delegation", "transport": "sim", "duration": 100,
    "runs": 1, "client_threads": 2}, "grid": {"np": [2, 3]}, "output": "out"})");
  const pid_t sweep = start_child({BENCHKV_BIN, "sweep", "s.json", "-j", "2"}, dir.path(),
                                  {.ignored = ignore_sigterm ? SIGTERM : 0});  // ignored: kept across exec
  // The sweep's two runs: its children, once both have started (each opened its log).
  std::vector<pid_t> runs;
  for (int i = 0; i < 1000 && runs.size() < 2; ++i) {
    ::usleep(10'000);
    runs = children_of(sweep);
  }
  auto alive = [](pid_t p) {  // a zombie is not running
    std::ifstream f("/proc/" + std::to_string(p) + "/stat");
    std::string line;
    if (!std::getline(f, line)) return false;
    const auto close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
  };
  ::kill(sweep, SIGKILL);
  wait_child(sweep);
  REQUIRE(runs.size() == 2);
  bool ended = false;
  for (int i = 0; i < 1000 && !ended; ++i) {
    ended = !alive(runs[0]) && !alive(runs[1]);
    if (!ended) ::usleep(10'000);
  }
  for (pid_t p : runs)
    if (alive(p)) ::kill(p, SIGKILL);  // not to leave them running when the check fails
  return ended;
}

}  // namespace

TEST_CASE("sweep: runs started with -j end when the sweep process is killed", "[e2e][sweep]") {
  CHECK(runs_end_with_killed_sweep(false));
}

TEST_CASE("sweep: runs started with -j end with a killed sweep also when it was started with SIGTERM ignored",
          "[e2e][sweep]") {
  CHECK(runs_end_with_killed_sweep(true));
}

TEST_CASE("sweep: a copy of a sweep and its model file in another directory has the same fingerprint",
          "[e2e][sweep]") {
  // --check's fingerprint is for comparing two checkouts (two machines, two clones): it
  // must not depend on where the sweep file lies or how its path was written.
  TempDir dir;
  const std::string model = R"({"nic": {"send": {"qp_window": 8}}})";
  const std::string text = R"({"base": {"backend": "delegation", "transport": "sim", "model": "m.json",
    "duration": 0.004, "interval_ms": 1, "trim": 1}, "grid": {"np": [2, 3]}, "output": "out"})";
  for (const char* sub : {"a", "b/c"}) {
    fs::create_directories(dir / sub);
    write_file(dir / sub / "m.json", model);
    write_file(dir / sub / "s.json", text);
  }
  auto fingerprint = [&](const std::string& file) {
    const Outcome o = run_benchkv({"sweep", file, "--check"}, dir.path());
    INFO(describe(o));
    REQUIRE(o.status == 0);
    const auto at = o.out.find("fingerprint ");
    REQUIRE(at != std::string::npos);
    return o.out.substr(at + 12, 16);
  };
  const std::string a = fingerprint("a/s.json");
  CHECK(fingerprint("b/c/s.json") == a);
  CHECK(fingerprint((dir / "a" / "s.json").string()) == a);
  // What decides the rows still counts: another model content, another fingerprint.
  write_file(dir / "b" / "c" / "m.json", R"({"nic": {"send": {"qp_window": 2}}})");
  CHECK(fingerprint("b/c/s.json") != a);
}

TEST_CASE("sweep: rpc and data runs of --repeat fill the confidence interval columns", "[e2e][sweep]") {
  TempDir dir;
  write_file(dir / "rpc.json", R"({
    "base": {"backend": "rpc", "transport": "sim", "np": 2, "interval_ms": 1, "trim": 1, "runs": 1, "duration": 0.004,
             "repeat": 2},
    "grid": {"message_size": [8]}, "output": "rpc"})");
  write_file(dir / "data.json", R"({
    "base": {"backend": "data", "transport": "sim", "np": 2, "interval_ms": 1, "trim": 1, "runs": 1, "duration": 0.004,
             "key_range": 8, "repeat": 2},
    "grid": {"value_size": ["1024"]}, "output": "data"})");
  for (const char* kind : {"rpc", "data"}) {
    INFO(kind);
    const Outcome o = sweep(dir, {std::string(kind) + ".json", "-j", "1"});
    INFO(describe(o));
    REQUIRE(o.status == 0);
    std::istringstream in(read_file(dir / kind / "results.csv"));
    std::string header, row;
    std::getline(in, header);
    std::getline(in, row);
    std::vector<std::string> f;
    std::istringstream c(row);
    for (std::string x; std::getline(c, x, ',');) f.push_back(x);
    INFO(header << "\n" << row);
    REQUIRE(f.size() == 17);  // run, the axis, 12 figures, mops_ci95_low, mops_ci95_high, latency_saturated
    CHECK(f[16] == "false");  // rpc and data record into 64-bit histograms
    CHECK(std::stod(f[14]) <= std::stod(f[2]));
    CHECK(std::stod(f[2]) <= std::stod(f[15]));
    CHECK(std::stod(f[14]) < std::stod(f[15]));  // two seeds that differ: an interval
    // The run's summary holds both repetitions.
    CHECK(read_json(dir / kind / "runs" / "0000" / "out.summary.json")["repetitions"].size() == 2);
  }
}
