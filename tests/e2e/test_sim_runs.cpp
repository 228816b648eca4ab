// benchkv --transport sim end to end: every backend, the loop policies, progress lines,
// the in-flight samples and the trace output (docs/design.md §Tests, end to end).
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "e2e/benchkv_run.hpp"

using namespace bkv::e2e;

TEST_CASE("sim: every backend runs with 1 and 2 server threads and its numbers add up", "[e2e][sim]") {
  const std::string backend = GENERATE(as<std::string>{}, "meta", "delegation", "direct");
  const std::string threads = GENERATE(as<std::string>{}, "1", "2");
  CAPTURE(backend, threads);
  TempDir dir;
  run_ok(small_sim(backend, {"--server-threads", threads, "-o", "out.csv"}), dir.path());
  const Checked c = check_run_in(dir.path());
  CHECK(c.summary["config"]["backend"] == backend);
  CHECK(c.summary["config"]["transport"] == "sim");
  CHECK(c.summary["config"]["server_threads"].get<uint32_t>() == std::stoul(threads));
  // The simulator's own totals agree with the summary's.
  CHECK(c.summary["simulator"]["issued"] == c.summary["totals"]["issued"]);
  CHECK(c.summary["simulator"]["completed"] == c.summary["totals"]["completed"]);
}

TEST_CASE("sim: other shapes: 1 node / 4 nodes x 3 clients at queue depth 8 / zipfian and staggered start",
          "[e2e][sim]") {
  const std::string backend = GENERATE(as<std::string>{}, "meta", "delegation", "direct");
  const std::vector<std::string> shape = GENERATE(
      std::vector<std::string>{"--np", "1"},
      std::vector<std::string>{"--np", "4", "--client-threads", "3", "--queue-depth", "8"},
      std::vector<std::string>{"--np", "3", "--server-threads", "2", "--distribution", "zipfian", "--start-mode",
                               "staggered", "--start-stagger-us", "50"});
  std::string shape_text;
  for (const auto& s : shape) shape_text += s + " ";
  CAPTURE(backend, shape_text);
  TempDir dir;
  std::vector<std::string> extra = shape;
  extra.insert(extra.end(), {"-r", "1", "-o", "out.csv"});
  run_ok(small_sim(backend, extra), dir.path());
  check_run_in(dir.path());
}

TEST_CASE("sim: --start-burst-clients starts a node's first clients at once and spreads only the others",
          "[e2e][sim]") {
  // 2 clients per node: a burst of both is the synchronized start, byte for byte in the
  // per-epoch CSV; a burst of one differs from the synchronized start and from a start
  // that spreads both clients.
  TempDir dir;
  const std::vector<std::string> stagger = {"--start-mode", "staggered", "--start-stagger-us", "2000", "-r", "1"};
  auto run_to = [&](const std::string& name, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"-o", name});
    run_ok(small_sim("delegation", extra), dir.path());
    return read_file(dir / name);
  };
  const std::string sync = run_to("sync.csv", {"-r", "1"});
  auto with = [&](std::vector<std::string> a, const std::string& k) {
    a.insert(a.end(), {"--start-burst-clients", k});
    return a;
  };
  const std::string all = run_to("all.csv", with(stagger, "2"));
  const std::string one = run_to("one.csv", with(stagger, "1"));
  const std::string none = run_to("none.csv", stagger);
  CHECK(all == sync);
  CHECK(one != sync);
  CHECK(one != none);
  // More burst clients than client threads is an input error naming the option.
  const Outcome bad = run_benchkv(small_sim("delegation", with(stagger, "3")), dir.path());
  CHECK(bad.status == 2);
  CHECK_THAT(bad.err, Catch::Contains("start_burst_clients"));
}

TEST_CASE("sim: --output and --summary are written where asked and the summary defaults next to the CSV",
          "[e2e][sim]") {
  TempDir dir;
  dir.subdir("res");
  run_ok(small_sim("meta", {"-o", "res/a.csv"}), dir.path());
  CHECK(fs::exists(dir / "res/a.csv"));
  CHECK(fs::exists(dir / "res/a.summary.json"));
  run_ok(small_sim("meta", {"-o", "b.csv", "--summary", "res/b-sum.json"}), dir.path());
  CHECK(fs::exists(dir / "b.csv"));
  CHECK(fs::exists(dir / "res/b-sum.json"));
  CHECK_FALSE(fs::exists(dir / "b.summary.json"));
  check_run(dir / "b.csv", dir / "res/b-sum.json");
}

TEST_CASE("sim: a progress line per epoch on stderr tagged warm-up / kept / cool-down", "[e2e][sim]") {
  TempDir dir;
  const Outcome o = run_ok(small_sim("delegation", {"--progress", "-o", "out.csv"}), dir.path());
  // 2 runs x 6 epochs, trim 1: per run 1 warm-up, 4 kept, 1 cool-down.
  std::istringstream in(o.err);
  std::string line;
  int warm = 0, kept = 0, cool = 0;
  std::vector<std::string> epochs;
  while (std::getline(in, line)) {
    if (line.rfind("run ", 0) != 0 || line.find(" epoch ") == std::string::npos) continue;
    epochs.push_back(line.substr(0, line.find(" [")));
    warm += line.find("[warm-up]") != std::string::npos;
    kept += line.find("[kept]") != std::string::npos;
    cool += line.find("[cool-down]") != std::string::npos;
  }
  INFO(o.err);
  CHECK(warm == 2);
  CHECK(kept == 8);
  CHECK(cool == 2);
  REQUIRE(epochs.size() == 12);
  CHECK(epochs.front() == "run 1/2 epoch 1/6");
  CHECK(epochs.back() == "run 2/2 epoch 6/6");

  TempDir quiet;
  const Outcome q = run_ok(small_sim("delegation", {"-o", "out.csv"}), quiet.path());
  CHECK(q.err.find("epoch 1/6") == std::string::npos);
}

// ------------------------------------------------------------------------- loop policies

TEST_CASE("sim: delegation loop policies run end to end and change the run", "[e2e][sim][policy]") {
  struct Policy {
    std::vector<std::string> args;
    std::vector<std::pair<std::string, nlohmann::json>> config;  // expected summary config values
  };
  const Policy p = GENERATE(
      Policy{{"--poll-budget", "4"}, {{"poll_budget", 4}}},
      Policy{{"--batch-hold-us", "2"}, {{"batch_hold_us", 2.0}}},
      Policy{{"--adaptive-hold"}, {{"adaptive_hold", true}}},
      Policy{{"--hold-rtt-multiplier", "1.5"}, {{"hold_rtt_multiplier", 1.5}}},
      Policy{{"--adaptive-poll-budget"}, {{"adaptive_poll_budget", true}}},
      Policy{{"--loop-order", "next-poll"}, {{"loop_order", "next-poll"}}},
      // Every policy that combines with the others, in two sets (adaptive_poll_budget
      // replaces poll_budget; adaptive_hold and hold_rtt_multiplier both set the hold).
      Policy{{"--poll-budget", "4", "--batch-hold-us", "2", "--hold-rtt-multiplier", "1.5", "--server-threads", "2"},
             {{"poll_budget", 4}, {"batch_hold_us", 2.0}, {"hold_rtt_multiplier", 1.5}}},
      Policy{{"--batch-hold-us", "2", "--adaptive-hold", "--adaptive-poll-budget", "--server-threads", "2"},
             {{"batch_hold_us", 2.0}, {"adaptive_hold", true}, {"adaptive_poll_budget", true}}});
  std::string text;
  for (const auto& a : p.args) text += a + " ";
  CAPTURE(text);

  TempDir dir;
  std::vector<std::string> extra = p.args;
  extra.insert(extra.end(), {"-r", "1", "-o", "out.csv"});
  run_ok(small_sim("delegation", extra), dir.path());
  const Checked c = check_run_in(dir.path());
  for (const auto& [key, value] : p.config) {
    INFO("config key " << key);
    CHECK(c.summary["config"][key] == value);
  }
  // Same run without the policy options: a policy that is parsed but not wired through
  // to the daemons would leave the per-epoch counts unchanged.
  std::vector<std::string> base_extra = {"-r", "1", "-o", "base.csv"};
  if (std::find(p.args.begin(), p.args.end(), "--server-threads") != p.args.end())
    base_extra.insert(base_extra.end(), {"--server-threads", "2"});
  run_ok(small_sim("delegation", base_extra), dir.path());
  CHECK(read_file(dir / "out.csv") != read_file(dir / "base.csv"));
}

// ------------------------------------------------------------------------- trace, samples

namespace {

// Checks a trace file: a JSON object whose traceEvents array holds a process_name per
// rank and, inside [begin_us, end_us), "X" loop slices of the daemons, "C" counters and
// "i" CQE marks (each at the start of a loop slice with as many CQEs).
void check_trace(const fs::path& path, uint32_t np, uint32_t daemons, double begin_us, double end_us) {
  const json t = read_json(path);
  REQUIRE(t.is_object());
  REQUIRE(t.contains("traceEvents"));
  const json& ev = t["traceEvents"];
  REQUIRE(ev.is_array());
  std::set<uint32_t> named_ranks;
  std::set<std::pair<uint32_t, uint32_t>> looping;                       // (pid, tid) with slices
  std::map<std::tuple<uint32_t, uint32_t, double>, uint64_t> slice_cqes;  // (pid, tid, ts) -> cqes
  std::vector<json> marks;
  size_t slices = 0, counters = 0;
  for (const json& e : ev) {
    INFO("event " << e.dump());
    REQUIRE(e.is_object());
    const std::string ph = e.at("ph").get<std::string>();
    const uint32_t pid = e.at("pid").get<uint32_t>();
    CHECK(pid < np);
    if (ph == "M") {
      CHECK(e.at("name") == "process_name");
      named_ranks.insert(pid);
      continue;
    }
    const double ts = e.at("ts").get<double>();
    CHECK(ts >= begin_us);
    CHECK(ts < end_us);
    if (ph == "X") {
      ++slices;
      CHECK(e.at("name") == "loop");
      const uint32_t tid = e.at("tid").get<uint32_t>();
      CHECK(tid < daemons);
      CHECK(e.at("dur").get<double>() >= 0.0);
      looping.insert({pid, tid});
      slice_cqes[{pid, tid, ts}] = e.at("args").at("cqes").get<uint64_t>();
    } else if (ph == "C") {
      ++counters;
      CHECK(e.at("name") == "calls_in_flight");
    } else if (ph == "i") {
      marks.push_back(e);
    } else {
      FAIL("unexpected event phase " << ph);
    }
  }
  CHECK(named_ranks.size() == np);
  CHECK(slices > 0);
  CHECK(counters > 0);
  CHECK(looping.size() == size_t(np) * daemons);  // every daemon loops within the window
  for (const json& m : marks) {
    INFO("mark " << m.dump());
    const auto key = std::make_tuple(m.at("pid").get<uint32_t>(), m.at("tid").get<uint32_t>(), m.at("ts").get<double>());
    const auto it = slice_cqes.find(key);
    REQUIRE(it != slice_cqes.end());
    CHECK(m.at("args").at("n").get<uint64_t>() == it->second);
    CHECK(it->second > 0);
  }
}

}  // namespace

TEST_CASE("sim: --trace writes Chrome trace JSON with loop slices inside the window", "[e2e][sim][trace]") {
  const std::string backend = GENERATE(as<std::string>{}, "meta", "delegation", "direct");
  CAPTURE(backend);
  TempDir dir;
  run_ok(small_sim(backend, {"-r", "1", "--server-threads", "2", "--trace", "trace.json", "--trace-window",
                             "1000:1050", "-o", "out.csv"}),
         dir.path());
  check_run_in(dir.path());
  check_trace(dir / "trace.json", 2, 2, 1000.0, 1050.0);
}

TEST_CASE("sim: a trace window in which no loop starts still gives valid trace JSON", "[e2e][sim][trace]") {
  // The run covers 6 ms of virtual time; this window starts after the simulation ends.
  TempDir dir;
  const Outcome o = run_ok(small_sim("delegation",
                   {"-r", "1", "--trace", "trace.json", "--trace-window", "100000:100010", "-o", "out.csv"}),
         dir.path());
  // ... and says so, rather than leaving an empty trace to be found later
  CHECK(o.err.find("warning: no event fell in the trace window 100000:100010 us") != std::string::npos);
  const std::string text = read_file(dir / "trace.json");
  INFO("trace file:\n" << text);
  json t;
  REQUIRE_NOTHROW(t = json::parse(text));
  REQUIRE(t.contains("traceEvents"));
  REQUIRE(t["traceEvents"].is_array());
  for (const json& e : t["traceEvents"]) CHECK(e.at("ph") == "M");
}

TEST_CASE("sim: --inflight-samples writes one row per daemon per sampling period", "[e2e][sim]") {
  TempDir dir;
  // np 2 x 2 clients x queue depth 4: at most 16 requests exist at any time.
  run_ok(small_sim("meta", {"--server-threads", "2", "--inflight-samples", "inflight.csv",
                            "--inflight-sample-interval-us", "20", "-o", "out.csv"}),
         dir.path());
  check_run_in(dir.path());
  std::istringstream in(read_file(dir / "inflight.csv"));
  std::string line;
  REQUIRE(std::getline(in, line));
  REQUIRE(line == "t_us,rank,daemon,calls_in_flight,cqes,loops,rank_completed");
  std::map<std::pair<uint64_t, uint64_t>, std::vector<double>> times;  // (rank, daemon) -> t_us
  uint64_t loops = 0;
  while (std::getline(in, line)) {
    INFO("row \"" << line << "\"");
    std::vector<std::string> cols;
    std::string col;
    std::istringstream ls(line);
    while (std::getline(ls, col, ',')) cols.push_back(col);
    REQUIRE(cols.size() == 7);
    uint64_t completed = 0;
    REQUIRE(parse_u64(cols[6], completed));
    const double t = std::stod(cols[0]);
    uint64_t rank = 0, daemon = 0, in_flight = 0, cqes = 0, l = 0;
    REQUIRE(parse_u64(cols[1], rank));
    REQUIRE(parse_u64(cols[2], daemon));
    REQUIRE(parse_u64(cols[3], in_flight));
    REQUIRE(parse_u64(cols[4], cqes));
    REQUIRE(parse_u64(cols[5], l));
    CHECK(rank < 2);
    CHECK(daemon < 2);
    CHECK(in_flight <= 16);
    times[{rank, daemon}].push_back(t);
    loops += l;
  }
  CHECK(loops > 0);
  REQUIRE(times.size() == 4);
  // Samples at 0, 20, ..., 12000 us (the end of the last run): 601 per daemon.
  for (const auto& [who, ts] : times) {
    INFO("rank " << who.first << " daemon " << who.second);
    REQUIRE(ts.size() == 601);
    for (size_t i = 0; i < ts.size(); ++i) CHECK(ts[i] == Approx(20.0 * double(i)).margin(1e-3));
  }
}
