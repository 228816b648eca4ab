// Simulator fast paths change speed, never output: a run with a fast path on writes the
// same CSV, in-flight samples and summary bytes as the same run with it off (the summary
// compared without its "provenance" object and without the switch's own config key).
//
// --ring-pages keep (transports/software_nic/paged_memory.hpp, DiscardMode): consumed
// copyrpc ring pages stay resident with their old bytes instead of being given back to the
// kernel (copyrpc reads only live ring bytes: their old bytes are never read). Checked on
// C1's shape (46 clients per node at QD 32) in both of the loop's states. The runs use
// the per-QP candidate model (configs/model/candidates/per_qp/c1.json) because its two
// states come from a synchronized start in a 4 ms run: NP=8 collapses (about one CQE per
// daemon loop), NP=16 stays high (tens of CQEs per loop). The checks are about bytes, not
// about which model is right. With the C1 ring size and with a 64 KiB ring that wraps
// many times in the run, so that kept pages are written again.
//
// --ring-pages auto (the default) chooses keep or release by the rings' whole size against
// the memory available (apps/benchkv/simulator/runner.hpp); the summary's provenance says which.
//
// --ring-page-batch N (core/copyrpc/context.hpp, give_back_passed_pages): consumed ring
// pages are given back N at a time and N pages ahead of the writer are prefaulted; the
// default (16) and 64 are checked against 1 (page by page, no prefault), on the same runs.
//
// --event-set calendar (sim/selectable_event_set.hpp, the default) against heap: the same
// events in the same order, so the same bytes, C1 and every backend with a trace.
//
// --step-log (apps/benchkv/simulator/step_log.hpp) only records: the outputs are the same with it.
//
// Under the sanitizers (test::sized, docs/reliability.md "Sanitizers") the ring-page
// checks run the 64 KiB ring only, the one that wraps and writes kept pages again (a
// C1 run there is 3-7 s instead of 0.4-1 s), and the every-backend check one run per
// backend instead of two.
#include <string>
#include <vector>

#include "apps/benchkv/simulator/step_log.hpp"
#include "e2e/benchkv_run.hpp"
#include "test_size.hpp"

using namespace bkv::e2e;

namespace {

const fs::path kC1Model = fs::path(BKV_SOURCE_DIR) / "configs" / "model" / "candidates" / "per_qp" / "c1.json";

// C1's ring, and a 64 KiB ring that wraps many times in a run.
const std::vector<uint64_t> kRingSizes =
    bkv::test::sized(std::vector<uint64_t>{4194304, 65536}, std::vector<uint64_t>{65536});

// A C1 run; `fast_path` holds the switch's options.
std::vector<std::string> c1_run(uint32_t np, uint64_t ring_size, const std::vector<std::string>& fast_path) {
  std::vector<std::string> args = {
      "--transport", "sim", "--np", std::to_string(np), "--client-threads", "46", "--queue-depth", "32",
      "--ring-size", std::to_string(ring_size), "--model", kC1Model.string(), "-d", "0.004", "--interval-ms",
      "1", "--trim", "1", "-r", "1", "--no-progress", "--report", "none", "--inflight-samples", "inflight.csv",
      "-o", "out.csv"};
  args.insert(args.end(), fast_path.begin(), fast_path.end());
  args.push_back("delegation");
  return args;
}

// The summary's bytes without provenance and without the switch's key of its config
// (`key`; a switch at its default may have none).
std::string summary_without_switch(const fs::path& p, const std::string& key) {
  json j = read_json(p);
  REQUIRE(j.contains("provenance"));
  j.erase("provenance");
  j["config"].erase(key);
  return j.dump(2);
}

// Same CSV and in-flight bytes, same summary but for the switch's key.
void check_same_outputs(const fs::path& off, const fs::path& on, const std::string& key) {
  for (const std::string name : {"out.csv", "inflight.csv"}) {
    INFO("file " << name);
    const std::string x = read_file(off / name);
    CHECK_FALSE(x.empty());
    CHECK(x == read_file(on / name));
  }
  CHECK(summary_without_switch(off / "out.summary.json", key) == summary_without_switch(on / "out.summary.json", key));
}

// The state the run is in, so that both regimes are covered.
void check_state(uint32_t np, const fs::path& run) {
  const double cqes_per_loop = read_json(run / "out.summary.json")["overall"]["daemon_cqe_per_loop"]["mean"];
  if (np == 8) CHECK(cqes_per_loop < 3);
  if (np == 16) CHECK(cqes_per_loop > 10);
}

}  // namespace

TEST_CASE("sim: --ring-pages keep writes the same output bytes as release (C1 collapsed and high)",
          "[e2e][sim][determinism][fast-path]") {
  const uint32_t np = GENERATE(8u, 16u);
  const uint64_t ring_size = GENERATE(from_range(kRingSizes));
  CAPTURE(np, ring_size);
  TempDir dir;
  const fs::path off = dir.subdir("release"), on = dir.subdir("keep");
  run_ok(c1_run(np, ring_size, {"--ring-pages", "release"}), off);
  run_ok(c1_run(np, ring_size, {"--ring-pages", "keep"}), on);
  CHECK(read_json(off / "out.summary.json")["config"]["ring_pages"] == "release");
  CHECK(read_json(on / "out.summary.json")["config"]["ring_pages"] == "keep");
  check_state(np, off);
  check_same_outputs(off, on, "ring_pages");
  check_run_in(on);
}

TEST_CASE("sim: --ring-page-batch 16 (default) and 64 write the same output bytes as 1 (C1 collapsed and high)",
          "[e2e][sim][determinism][fast-path]") {
  const uint32_t np = GENERATE(8u, 16u);
  const uint64_t ring_size = GENERATE(from_range(kRingSizes));
  CAPTURE(np, ring_size);
  TempDir dir;
  const fs::path off = dir.subdir("batch1"), on = dir.subdir("default"), big = dir.subdir("batch64");
  run_ok(c1_run(np, ring_size, {"--ring-page-batch", "1"}), off);
  run_ok(c1_run(np, ring_size, {}), on);
  run_ok(c1_run(np, ring_size, {"--ring-page-batch", "64"}), big);
  CHECK(read_json(off / "out.summary.json")["config"]["ring_page_batch"] == 1);
  CHECK(read_json(on / "out.summary.json")["config"]["ring_page_batch"] == 16);  // recorded at the default too
  CHECK(read_json(big / "out.summary.json")["config"]["ring_page_batch"] == 64);
  check_state(np, off);
  check_same_outputs(off, on, "ring_page_batch");
  check_same_outputs(off, big, "ring_page_batch");
  check_run_in(on);
}

TEST_CASE("sim: --event-set heap and calendar (default) write the same output bytes (C1 collapsed and high)",
          "[e2e][sim][determinism][fast-path]") {
  const uint32_t np = GENERATE(8u, 16u);
  CAPTURE(np);
  TempDir dir;
  const fs::path off = dir.subdir("heap"), on = dir.subdir("calendar");
  run_ok(c1_run(np, 4194304, {"--event-set", "heap"}), off);
  run_ok(c1_run(np, 4194304, {}), on);
  CHECK(read_json(off / "out.summary.json")["config"]["event_set"] == "heap");
  CHECK(read_json(on / "out.summary.json")["config"]["event_set"] == "calendar");  // recorded at the default too
  check_state(np, off);
  check_same_outputs(off, on, "event_set");
  check_run_in(on);
}

TEST_CASE("sim: --event-set writes the same output bytes for every simulated backend, with a trace",
          "[e2e][sim][determinism][fast-path]") {
  const std::string backend = GENERATE("meta", "delegation", "direct");
  CAPTURE(backend);
  TempDir dir;
  const fs::path off = dir.subdir("heap"), on = dir.subdir("calendar");
  auto args = [&](const std::string& set) {
    return small_sim(backend, {"--server-threads", "2", "--event-set", set, "--inflight-samples", "inflight.csv",
                               "--trace", "trace.json", "--trace-window", "1000:1100", "-r",
                               bkv::test::sized("2", "1"), "-o", "out.csv"});
  };
  run_ok(args("heap"), off);
  run_ok(args("calendar"), on);
  CHECK(read_json(on / "out.summary.json")["config"]["event_set"] == "calendar");
  check_same_outputs(off, on, "event_set");
  const std::string trace = read_file(off / "trace.json");
  CHECK_FALSE(trace.empty());
  CHECK(trace == read_file(on / "trace.json"));
}

TEST_CASE("sim: --event-set takes heap or calendar, and only with the simulator", "[e2e][sim][bad-input]") {
  TempDir dir;
  const Outcome bad = run_benchkv(small_sim("delegation", {"--event-set", "splay"}), dir.path());
  CHECK(bad.status != 0);
  CHECK(bad.err.find("event-set") != std::string::npos);
  const Outcome real = run_benchkv({"--transport", "ucx", "--event-set", "heap", "delegation"}, dir.path());
  CHECK(real.status != 0);
  CHECK(real.err.find("event_set") != std::string::npos);
}

TEST_CASE("sim: --step-log records every thread step of the measured runs and changes no output",
          "[e2e][sim][determinism]") {
  TempDir dir;
  const fs::path off = dir.subdir("off"), on = dir.subdir("on");
  run_ok(c1_run(8, 4194304, {}), off);
  run_ok(c1_run(8, 4194304, {"--step-log", "steps.bin"}), on);
  CHECK(read_json(on / "out.summary.json")["config"]["step_log"] == "steps.bin");
  CHECK(read_json(off / "out.summary.json")["config"]["step_log"] == "");  // recorded empty while off
  check_same_outputs(off, on, "step_log");
  const bkv::app::StepLog log = bkv::app::StepLog::read((on / "steps.bin").string());
  CHECK(log.np == 8);
  CHECK(log.daemons == 1);
  CHECK(log.threads_per_node == 47);
  // Every thread stepped, daemons far more often than a single client.
  std::vector<uint64_t> per_thread(8 * 47, 0);
  for (uint32_t s : log.steps) ++per_thread.at(s);
  for (uint32_t t = 0; t < per_thread.size(); ++t) {
    INFO("thread " << t);
    CHECK(per_thread[t] > 0);
    if (t % 47 == 0) CHECK(per_thread[t] > 10 * per_thread[t + 1]);
  }
}

TEST_CASE("step logs that are cut, foreign or out of range are refused", "[e2e][sim][bad-input]") {
  TempDir dir;
  bkv::app::StepLog good{2, 3, 1, {0, 1, 2, 5, 3}};
  const std::string path = (dir.path() / "s.bin").string();
  good.write(path);
  const bkv::app::StepLog back = bkv::app::StepLog::read(path);
  CHECK(back.steps == good.steps);
  CHECK(back.np == 2);
  CHECK(back.threads_per_node == 3);
  CHECK(back.daemons == 1);
  auto refused = [&](const std::string& bytes, const std::string& why) {
    write_file(dir.path() / "bad.bin", bytes);
    try {
      (void)bkv::app::StepLog::read((dir.path() / "bad.bin").string());
      FAIL("accepted: " << why);
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).find(why) != std::string::npos);
    }
  };
  const std::string bytes = read_file(path);
  refused(bytes.substr(0, bytes.size() - 1), "cut inside an entry");
  refused("BKVSTEP2" + bytes.substr(8), "not a step log");
  refused(bytes.substr(0, 10), "not a step log");
  std::string far = bytes;
  far[far.size() - 4] = 6;  // thread 6 of 2 x 3
  refused(far, "names thread 6 of 6");
  std::string shape = bytes;
  shape[16] = 3;  // 3 daemons of 3 threads
  refused(shape, "impossible shape");
}

TEST_CASE("sim: --ring-page-batch takes 1..1024, and only with the simulator", "[e2e][sim][bad-input]") {
  TempDir dir;
  for (const std::string bad : {"0", "1025", "-1", "many"}) {
    INFO("--ring-page-batch " << bad);
    const Outcome o = run_benchkv(small_sim("delegation", {"--ring-page-batch", bad}), dir.path());
    CHECK(o.status != 0);
    CHECK(o.err.find("ring-page-batch") != std::string::npos);
  }
  const Outcome real = run_benchkv({"--transport", "ucx", "--ring-page-batch", "4", "delegation"}, dir.path());
  CHECK(real.status != 0);
  CHECK(real.err.find("ring_page_batch") != std::string::npos);
}

TEST_CASE("sim: --ring-pages auto (the default) keeps pages when the whole rings fit and says so in the provenance",
          "[e2e][sim][determinism][fast-path]") {
  TempDir dir;
  const fs::path def = dir.subdir("default"), rel = dir.subdir("release");
  const std::vector<std::string> shape = {"--ring-size", "65536", "--inflight-samples", "inflight.csv", "-o", "out.csv"};
  run_ok(small_sim("delegation", shape), def);
  std::vector<std::string> released = shape;
  released.insert(released.end(), {"--ring-pages", "release"});
  run_ok(small_sim("delegation", released), rel);
  const json d = read_json(def / "out.summary.json"), r = read_json(rel / "out.summary.json");
  CHECK(d["config"]["ring_pages"] == "auto");
  const json& choice = d["provenance"]["ring_pages"];
  CHECK(choice["asked"] == "auto");
  // NP=2 Delegation: one connection, two endpoints, each with a send ring and the peer's
  // receive ring of 64 KiB in the simulator's paged memory.
  CHECK(choice["ring_bytes"] == 4 * 65536);
  const uint64_t avail = choice["available_bytes"];
  CHECK(choice["chosen"] == (avail > 0 && 4 * 65536 <= avail / 2 ? "keep" : "release"));
  CHECK(r["provenance"]["ring_pages"]["asked"] == "release");
  CHECK(r["provenance"]["ring_pages"]["chosen"] == "release");
  CHECK_FALSE(r["provenance"]["ring_pages"].contains("available_bytes"));
  check_same_outputs(rel, def, "ring_pages");
}

TEST_CASE("sim: --ring-pages takes auto, release or keep, and only with the simulator", "[e2e][sim][bad-input]") {
  TempDir dir;
  const Outcome bad = run_benchkv(small_sim("delegation", {"--ring-pages", "sometimes"}), dir.path());
  CHECK(bad.status != 0);
  CHECK(bad.err.find("ring") != std::string::npos);
  const Outcome real = run_benchkv({"--transport", "ucx", "--ring-pages", "keep", "delegation"}, dir.path());
  CHECK(real.status != 0);
  CHECK(real.err.find("ring_pages") != std::string::npos);
}
