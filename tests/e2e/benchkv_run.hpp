// End-to-end test helpers: run the benchkv binary as a child process in a scratch
// directory, read back its CSV / summary JSON, and check that the numbers of one run add
// up (the definitions in apps/benchkv/results/results.hpp).
//
// The binary path comes from the build: BENCHKV_BIN (tests/e2e.cmake).
#pragma once

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#ifndef BENCHKV_BIN
#error "BENCHKV_BIN (the path of the benchkv executable) must be defined by the build"
#endif

namespace bkv::e2e {

namespace fs = std::filesystem;
using nlohmann::json;

// A hang guard, not a speed assertion: a child still running after this long gets
// SIGALRM (the alarm survives execve) and the test reports the signal.
inline constexpr unsigned kChildTimeLimitSeconds = 120;

// The CSV header every benchkv run writes (apps/benchkv/results/results.hpp).
inline constexpr const char* kCsvHeader = "run,rank,client_id,epoch,requests,duration_ns";
inline constexpr size_t kCsvColumns = 6;

// A scratch directory (mkdtemp), removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "bkv-e2e-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) FAIL("mkdtemp(" << pattern << "): " << std::strerror(errno));
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const noexcept { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

  // Creates a subdirectory (for runs that must use the same relative output names).
  fs::path subdir(const std::string& name) const {
    const fs::path p = path_ / name;
    fs::create_directories(p);
    return p;
  }

 private:
  fs::path path_;
};

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) FAIL("cannot read " << p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) FAIL("cannot write " << p);
}

inline json read_json(const fs::path& p) {
  const std::string text = read_file(p);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    FAIL(p << " is not valid JSON: " << e.what());
  }
  return {};
}

// The bytes of an output file as determinism compares them: a summary JSON without its
// "provenance" object (host, date, commit differ between runs by design; the summary is
// written with dump(2), so the re-dump keeps every other byte), any other file as is.
// A summary without provenance fails the test.
inline std::string deterministic_bytes(const fs::path& p) {
  const std::string text = read_file(p);
  if (p.string().size() < 13 || p.string().substr(p.string().size() - 13) != ".summary.json") return text;
  json j = json::parse(text);
  REQUIRE(j.contains("provenance"));
  j.erase("provenance");
  return j.dump(2) + "\n";
}

// Reads back everything written to an unnamed temporary file.
inline std::string slurp(std::FILE* f) {
  std::string s;
  std::rewind(f);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

struct Outcome {
  int status = -1;    // exit status; 128 + N when killed by signal N
  std::string out;    // stdout
  std::string err;    // stderr
  std::string command;
};

// The environment of a benchkv run under mpirun: root allowed, ranks beyond the cores;
// under a sanitizer, the options that pass over Open MPI's own reports in the ranks
// (BKV_MPIRUN_SANITIZER_ENV, tests/CMakeLists.txt). This driver's other runs start benchkv
// directly and keep the sanitizer's defaults.
inline std::vector<std::pair<std::string, std::string>> mpirun_env() {
  std::vector<std::pair<std::string, std::string>> env = {
      {"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}, {"OMPI_MCA_rmaps_base_oversubscribe", "1"}};
#ifdef BKV_MPIRUN_SANITIZER_ENV
  const std::string v = BKV_MPIRUN_SANITIZER_ENV;
  env.emplace_back(v.substr(0, v.find('=')), v.substr(v.find('=') + 1));
#endif
  return env;
}

// How start_child sets up a child before exec.
struct ChildSetup {
  int out_fd = -1;  // the child's stdout: a descriptor of this process, or -1 for /dev/null
  int err_fd = -1;  // the child's stderr, likewise
  std::vector<std::pair<std::string, std::string>> env;  // added to this process's environment
  int ignored = 0;  // a signal whose action is "ignore" at exec, as a shell leaves SIGINT for `cmd &` (0: none)
  int pending = 0;  // a signal blocked and raised before exec: pending when the program unblocks it (0: none)
};

// Starts `argv` (argv[0] an absolute path) in `cwd` as `setup` says, with a hang guard
// (SIGALRM after kChildTimeLimitSeconds, surviving execve) that turns a stuck run into a
// failure. Returns the child's pid; wait_child reaps it.
inline pid_t start_child(const std::vector<std::string>& argv_in, const fs::path& cwd, const ChildSetup& setup) {
  std::vector<std::string> owned = argv_in;
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string dir = cwd.string();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Child. The test process is single-threaded when it forks (Catch runs test cases on
    // the main thread and every earlier child has exited), so setenv is safe here.
    for (const auto& [k, v] : setup.env) ::setenv(k.c_str(), v.c_str(), 1);
    const int null_fd = (setup.out_fd < 0 || setup.err_fd < 0) ? ::open("/dev/null", O_WRONLY) : -1;
    const int out_fd = setup.out_fd < 0 ? null_fd : setup.out_fd;
    const int err_fd = setup.err_fd < 0 ? null_fd : setup.err_fd;
    if (out_fd < 0 || err_fd < 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 || ::dup2(err_fd, STDERR_FILENO) < 0) ::_exit(126);
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    if (setup.ignored != 0) ::signal(setup.ignored, SIG_IGN);
    if (setup.pending != 0) {  // blocked, a raised signal stays pending across exec, even an ignored one
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, setup.pending);
      ::sigprocmask(SIG_BLOCK, &set, nullptr);
      ::raise(setup.pending);
    }
    ::alarm(kChildTimeLimitSeconds);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits for child `pid` to end; returns its wait status (WIFEXITED and the like).
inline int wait_child(pid_t pid) {
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0) {
    if (errno != EINTR) FAIL("waitpid: " << std::strerror(errno));
  }
  return ws;
}

// A pipe whose two ends are closed at exec: a child started with the write end as its
// stdout or stderr gets it as that descriptor only, so the reader sees the end of the
// text when the child and what it started have ended.
struct ChildPipe {
  int read_fd = -1, write_fd = -1;
  ChildPipe() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    read_fd = fds[0], write_fd = fds[1];
  }
  ChildPipe(const ChildPipe&) = delete;
  ChildPipe& operator=(const ChildPipe&) = delete;
  ~ChildPipe() {
    close_write();
    if (read_fd >= 0) ::close(read_fd);
  }
  // After starting the child: this process writes nothing, so the child's end is the end.
  void close_write() {
    if (write_fd >= 0) ::close(write_fd);
    write_fd = -1;
  }
  // Reads to the end of the text; after each read, `on_text(text so far)`.
  template <class F>
  std::string read_all(F&& on_text) {
    std::string text;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(read_fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text.append(buf, size_t(n));
      on_text(text);
    }
    return text;
  }
  std::string read_all() {
    return read_all([](const std::string&) {});
  }
};

// The pids of `parent`'s children.
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> pids;
  std::ifstream f("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children");
  for (long p; f >> p;) pids.push_back(static_cast<pid_t>(p));
  return pids;
}

// Runs `argv` (argv[0] an absolute path) in `cwd` with `env` added to this process's
// environment, to its end; stdout and stderr captured.
inline Outcome spawn(const std::vector<std::string>& argv, const fs::path& cwd,
                     const std::vector<std::pair<std::string, std::string>>& env = {}) {
  Outcome o;
  for (const auto& a : argv) o.command += (o.command.empty() ? "" : " ") + a;
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  REQUIRE(out != nullptr);
  REQUIRE(err != nullptr);
  const int ws = wait_child(start_child(argv, cwd, {.out_fd = ::fileno(out), .err_fd = ::fileno(err), .env = env}));
  o.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  o.out = slurp(out);
  o.err = slurp(err);
  std::fclose(out);
  std::fclose(err);
  return o;
}

// Runs benchkv with `args` in directory `cwd`, stdout and stderr captured.
inline Outcome run_benchkv(const std::vector<std::string>& args, const fs::path& cwd) {
  std::vector<std::string> argv{BENCHKV_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return spawn(argv, cwd);
}

// What the tests print when a run does not go as expected.
inline std::string describe(const Outcome& o) {
  return "command: " + o.command + "\nexit status: " + std::to_string(o.status) + "\nstderr:\n" + o.err;
}

// Runs benchkv and requires exit status 0.
inline Outcome run_ok(const std::vector<std::string>& args, const fs::path& cwd) {
  Outcome o = run_benchkv(args, cwd);
  INFO(describe(o));
  REQUIRE(o.status == 0);
  return o;
}

// benchkv's arguments: each of `defaults` (flag, value) whose flag `extra` does not give
// (benchkv rejects an option given twice), --no-progress unless `extra` gives
// --progress, then `extra`, then `backend` (when not empty).
inline std::vector<std::string> benchkv_args(const std::vector<std::pair<std::string, std::string>>& defaults,
                                             const std::string& backend, const std::vector<std::string>& extra) {
  std::vector<std::string> a;
  for (const auto& [flag, value] : defaults) {
    if (std::find(extra.begin(), extra.end(), flag) != extra.end()) continue;
    a.push_back(flag);
    a.push_back(value);
  }
  if (std::find(extra.begin(), extra.end(), "--progress") == extra.end()) a.push_back("--no-progress");
  a.insert(a.end(), extra.begin(), extra.end());
  if (!backend.empty()) a.push_back(backend);
  return a;
}

// The small simulated configuration every test starts from: 2 nodes, 2 runs of 6 epochs
// of 1 ms (virtual time), one epoch trimmed at each end, 2 clients per node at queue
// depth 4, no progress lines. A flag that also appears in `extra` is left to `extra`
// (benchkv rejects an option given twice).
inline std::vector<std::string> small_sim(const std::string& backend, std::vector<std::string> extra = {}) {
  static const std::vector<std::pair<std::string, std::string>> kDefaults = {
      {"--transport", "sim"}, {"--np", "2"},    {"--client-threads", "2"}, {"--queue-depth", "4"},
      {"-d", "0.006"},        {"--interval-ms", "1"}, {"--trim", "1"},     {"-r", "2"}};
  return benchkv_args(kDefaults, backend, extra);
}

// ---------------------------------------------------------------------------------- CSV

struct CsvRow {
  uint64_t run, rank, client, epoch, requests, duration_ns;
  uint64_t value_size = 0;  // the data benchmark's CSV leads with it; 0 in the others
};

// The lines of `text`, without their line ends.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// The whitespace-separated words of `line`.
inline std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

// The words of each line of `text` (a table as benchkv prints it).
inline std::vector<std::vector<std::string>> words_per_line(const std::string& text) {
  std::vector<std::vector<std::string>> table;
  for (const std::string& l : lines_of(text)) table.push_back(words(l));
  return table;
}

// The comma-separated fields of one CSV line (a trailing comma ends in an empty field).
inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> cols;
  std::istringstream ls(line);
  for (std::string col; std::getline(ls, col, ',');) cols.push_back(col);
  if (!line.empty() && line.back() == ',') cols.emplace_back();
  return cols;
}

inline bool parse_u64(const std::string& s, uint64_t& v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

// Parses a benchkv CSV; requires the exact header and 6 unsigned integers on every row
// (7 with the data benchmark's leading value_size column).
inline std::vector<CsvRow> read_csv(const fs::path& p) {
  std::istringstream in(read_file(p));
  std::string line;
  REQUIRE(std::getline(in, line));
  const bool sized = line == std::string("value_size,") + kCsvHeader;
  if (!sized) REQUIRE(line == kCsvHeader);
  std::vector<CsvRow> rows;
  size_t line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    INFO(p << " line " << line_no << ": \"" << line << "\"");
    const std::vector<std::string> cols = csv_fields(line);
    const size_t skip = sized ? 1 : 0;
    REQUIRE(cols.size() == kCsvColumns + skip);
    uint64_t v[kCsvColumns + 1];
    for (size_t i = 0; i < kCsvColumns + skip; ++i) REQUIRE(parse_u64(cols[i], v[i]));
    const uint64_t* c = v + skip;
    rows.push_back({c[0], c[1], c[2], c[3], c[4], c[5], sized ? v[0] : 0});
  }
  return rows;
}

// ------------------------------------------------------------------- run consistency

// Summary of the checked run, for tests that go on from here.
struct Checked {
  json summary;
  std::vector<CsvRow> rows;
};

// The shape of a run as its summary's effective configuration gives it.
struct RunShape {
  uint64_t np = 0, clients = 0, daemons = 0, runs = 0, trim = 0;
  uint64_t interval_ns = 0, epochs = 0;
};
inline RunShape run_shape(const json& cfg) {
  RunShape r;
  r.np = cfg.at("np").get<uint64_t>();
  r.clients = cfg.at("client_threads").get<uint64_t>();
  r.daemons = cfg.at("server_threads").get<uint64_t>();
  r.runs = cfg.at("runs").get<uint64_t>();
  r.trim = cfg.at("trim").get<uint64_t>();
  r.interval_ns = static_cast<uint64_t>(std::llround(cfg.at("interval_ms").get<double>() * 1e6));
  const auto duration = static_cast<uint64_t>(std::llround(cfg.at("duration").get<double>() * 1e9));
  REQUIRE(r.interval_ns > 0);
  r.epochs = duration / r.interval_ns;
  REQUIRE(r.epochs > 2 * r.trim);
  return r;
}

// The summary's totals: issued == completed > 0, no errors. Returns {issued, completed}.
inline std::pair<uint64_t, uint64_t> check_totals(const json& totals) {
  const uint64_t issued = totals.at("issued").get<uint64_t>();
  const uint64_t completed = totals.at("completed").get<uint64_t>();
  CHECK(issued == completed);
  CHECK(totals.at("errors").get<uint64_t>() == 0);
  CHECK(completed > 0);
  return {issued, completed};
}

// The summary's daemons, sorted by (run, rank, daemon): one entry each, histogram
// buckets adding up to loops, loops > 0, no protocol errors.
inline void check_daemons(const json& dj, const RunShape& shape) {
  REQUIRE(dj.is_array());
  REQUIRE(dj.size() == shape.runs * shape.np * shape.daemons);
  size_t idx = 0;
  for (uint64_t run = 0; run < shape.runs; ++run)
    for (uint64_t rank = 0; rank < shape.np; ++rank)
      for (uint64_t d = 0; d < shape.daemons; ++d, ++idx) {
        INFO("summary daemons[" << idx << "]");
        const json& e = dj[idx];
        CHECK(e.at("run").get<uint64_t>() == run);
        CHECK(e.at("rank").get<uint64_t>() == rank);
        CHECK(e.at("daemon").get<uint64_t>() == d);
        uint64_t buckets = 0;
        for (const auto& [name, v] : e.at("cqe_per_loop_hist").items()) buckets += v.get<uint64_t>();
        CHECK(buckets == e.at("loops").get<uint64_t>());
        CHECK(e.at("loops").get<uint64_t>() > 0);
        CHECK(e.at("extra").at("protocol_errors").get<double>() == 0.0);
      }
}

// A run's CSV rows, checked against its shape (run, rank and client in range, epochs
// kept ones, each (run, rank, client, epoch) once, every one there) and added up: the
// requests of each run and of each run's ranks, the longest duration of each run's
// epochs, the ranks seen. Simulated and real runs check the durations each their way.
struct CsvTally {
  std::vector<uint64_t> run_sum;
  std::vector<std::vector<uint64_t>> rank_sum;
  std::vector<std::map<uint64_t, uint64_t>> epoch_len;  // run -> epoch -> longest duration
  std::set<uint64_t> ranks_seen;
};
inline CsvTally tally_csv(const std::vector<CsvRow>& rows, const RunShape& shape) {
  const auto [np, clients, daemons, runs, trim, interval, epochs] = shape;
  CsvTally t{std::vector<uint64_t>(runs, 0), std::vector<std::vector<uint64_t>>(runs, std::vector<uint64_t>(np, 0)),
             std::vector<std::map<uint64_t, uint64_t>>(runs), {}};
  std::map<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>, int> seen;
  for (const CsvRow& r : rows) {
    INFO("CSV row run " << r.run << " rank " << r.rank << " client " << r.client << " epoch " << r.epoch);
    REQUIRE(r.run < runs);
    REQUIRE(r.rank < np);
    REQUIRE(r.client < clients);
    CHECK(r.epoch >= trim);
    CHECK(r.epoch < epochs - trim);
    CHECK(++seen[{r.run, r.rank, r.client, r.epoch}] == 1);
    t.run_sum[r.run] += r.requests;
    t.rank_sum[r.run][r.rank] += r.requests;
    uint64_t& len = t.epoch_len[r.run][r.epoch];
    len = std::max(len, r.duration_ns);
    t.ranks_seen.insert(r.rank);
  }
  CHECK(rows.size() == runs * np * clients * (epochs - 2 * trim));
  return t;
}

// Summary entry runs[i] against the shape and the CSV: its index and epochs, its requests
// and per-rank requests equal to the rows' sums. Returns its requests.
inline uint64_t check_run_entry(const json& r, uint64_t i, const RunShape& shape, const CsvTally& t) {
  CHECK(r.at("run").get<uint64_t>() == i);
  CHECK(r.at("epochs").get<uint64_t>() == shape.epochs);
  const uint64_t requests = r.at("requests").get<uint64_t>();
  CHECK(requests == t.run_sum[i]);
  const json& prr = r.at("per_rank_requests");
  REQUIRE(prr.size() == shape.np);
  for (uint64_t k = 0; k < shape.np; ++k) {
    INFO("rank " << k);
    CHECK(prr[k].get<uint64_t>() == t.rank_sum[i][k]);
  }
  return requests;
}

// The checks every successful simulated run must pass, with the shape
// taken from the summary's effective configuration:
//  - totals: issued == completed, errors == 0; the per-run issued/completed add up to them;
//  - CSV: one row per (run, rank, client, kept epoch), epochs in [trim, epochs - trim),
//    duration_ns == the interval (the simulator's shared epoch clock), every client
//    making progress in every kept epoch;
//  - per run: sum of the CSV requests == runs[i].requests, per-rank sums ==
//    per_rank_requests, duration_ns == kept epochs x interval, Mops as defined;
//  - daemons: one entry per (run, rank, daemon), histogram buckets adding up to loops,
//    no protocol errors.
inline Checked check_run(const fs::path& csv_path, const fs::path& summary_path) {
  Checked c;
  c.summary = read_json(summary_path);
  c.rows = read_csv(csv_path);
  const json& s = c.summary;
  INFO("summary " << summary_path);
  REQUIRE(s.contains("config"));
  REQUIRE(s.contains("runs"));
  REQUIRE(s.contains("daemons"));
  REQUIRE(s.contains("totals"));
  const RunShape shape = run_shape(s["config"]);
  const auto [np, clients, daemons, runs, trim, interval, epochs] = shape;
  const auto [issued, completed] = check_totals(s["totals"]);

  // CSV rows: shape and ranges; the simulator's shared epoch clock.
  const CsvTally tally = tally_csv(c.rows, shape);
  for (const CsvRow& r : c.rows) {
    INFO("CSV row run " << r.run << " rank " << r.rank << " client " << r.client << " epoch " << r.epoch);
    CHECK(r.duration_ns == interval);
    CHECK(r.requests > 0);
  }

  // Runs.
  const json& rj = s["runs"];
  REQUIRE(rj.is_array());
  REQUIRE(rj.size() == runs);
  uint64_t runs_issued = 0, runs_completed = 0;
  for (uint64_t i = 0; i < runs; ++i) {
    INFO("summary runs[" << i << "]");
    const json& r = rj[i];
    const uint64_t requests = check_run_entry(r, i, shape, tally);
    CHECK(r.at("first_kept_epoch").get<uint64_t>() == trim);
    CHECK(r.at("end_kept_epoch").get<uint64_t>() == epochs - trim);
    const uint64_t dur = r.at("duration_ns").get<uint64_t>();
    CHECK(dur == (epochs - 2 * trim) * interval);
    // Mops = requests / duration_ns * 1e3, rounded to 1e-6.
    CHECK(r.at("total_mops").get<double>() == Approx(double(requests) / double(dur) * 1e3).margin(1e-6));
    const json& prm = r.at("per_rank_mops");
    REQUIRE(prm.size() == np);
    for (uint64_t k = 0; k < np; ++k)
      CHECK(prm[k].get<double>() == Approx(double(tally.rank_sum[i][k]) / double(dur) * 1e3).margin(1e-6));
    runs_issued += r.at("issued").get<uint64_t>();
    runs_completed += r.at("completed").get<uint64_t>();
  }
  CHECK(runs_issued == issued);
  CHECK(runs_completed == completed);

  check_daemons(s["daemons"], shape);
  return c;
}

// check_run for the default output names in `dir` (-o out.csv).
inline Checked check_run_in(const fs::path& dir, const std::string& csv = "out.csv") {
  fs::path summary = dir / csv;
  summary.replace_extension(".summary.json");
  return check_run(dir / csv, summary);
}

}  // namespace bkv::e2e
