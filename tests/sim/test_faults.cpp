// Fault injection (sim/faults.hpp): strict parsing (errors name the fault and the key),
// the effect of each fault on a small experiment, determinism, and many random small
// fault schedules, each checked by the exactly-once oracle and the copyrpc endpoint
// checks (credit invariant, no stopped endpoint).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/benchkv/options.hpp"
#include "apps/benchkv/sim_runner.hpp"
#include "core/random.hpp"
#include "sim/faults.hpp"
#include "sim/model.hpp"

using namespace bkv;
using nlohmann::json;

namespace {

std::string parse_error(const std::string& text) {
  try {
    sim::Fault::parse(text);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}
std::string model_error(const json& j) {
  try {
    sim::Model::from_json(j, "m");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

app::Options small_run(backend::BackendKind b, double duration_s) {
  app::Options o;
  o.backend = b;
  o.transport = app::TransportKind::kSim;
  o.np = 2;
  o.server_threads = 2;
  o.client_threads = 2;
  o.queue_depth = 4;
  o.key_range = 64;
  o.duration = duration_s;
  o.interval_ms = duration_s * 1000;
  o.trim = 0;
  o.runs = 1;
  o.progress = false;
  o.output.clear();
  o.summary.clear();
  return o;
}

}  // namespace

TEST_CASE("faults parse strictly, from JSON and from --fault", "[faults]") {
  const sim::Fault s = sim::Fault::parse("slow_node:node=1,start_us=100,end_us=300,factor=4");
  CHECK(s.kind == sim::FaultKind::kSlowNode);
  CHECK(s.node == 1);
  CHECK(s.start_ns() == 100'000);
  CHECK(s.end_ns() == 300'000);
  CHECK(s.factor == 4);
  const sim::Fault d = sim::Fault::parse("stall_daemon:node=0,daemon=1,start_us=5,end_us=6.5");
  CHECK(d.kind == sim::FaultKind::kStallDaemon);
  CHECK(d.daemon == 1);
  CHECK(d.end_ns() == 6'500);
  const sim::Fault l = sim::Fault::parse("link_delay:from=1,to=0,start_us=0,end_us=10,extra_ns=2500");
  CHECK(l.kind == sim::FaultKind::kLinkDelay);
  CHECK(l.node == 1);
  CHECK(l.to_node == 0);
  CHECK(l.extra_ns == 2500);
  // Round trip through the model JSON.
  sim::Model m;
  m.faults = {s, d, l};
  const sim::Model back = sim::Model::from_json(m.to_json(), "m");
  REQUIRE(back.faults.size() == 3);
  CHECK(back.to_json() == m.to_json());
  CHECK_FALSE(sim::Model{}.to_json().contains("faults"));  // absent when empty: outputs keep their bytes

  CHECK(parse_error("slow_node").find("expected KIND:KEY=VALUE") != std::string::npos);
  CHECK(parse_error("slow:node=1").find("unknown fault kind \"slow\"") != std::string::npos);
  CHECK(parse_error("slow_node:node=1,start_us=1,end_us=2").find("missing key \"factor\"") != std::string::npos);
  CHECK(parse_error("slow_node:node=1,start_us=1,end_us=2,factor=2,daemon=0").find("unknown key \"daemon\"") !=
        std::string::npos);
  CHECK(parse_error("slow_node:node=1,start_us=1,end_us=2,factor=0.5").find(".factor: must be in [1, 1000]") !=
        std::string::npos);
  CHECK(parse_error("slow_node:node=x,start_us=1,end_us=2,factor=2").find(".node: \"x\" is not a number") !=
        std::string::npos);
  CHECK(parse_error("slow_node:node=1.5,start_us=1,end_us=2,factor=2").find(".node: must be an integer") !=
        std::string::npos);
  CHECK(parse_error("stall_daemon:node=0,daemon=0,start_us=5,end_us=5").find(".end_us: must be greater") !=
        std::string::npos);
  CHECK(parse_error("link_delay:from=0,to=1,start_us=0,end_us=1,extra_ns=-1").find(".extra_ns: must be in") !=
        std::string::npos);
  CHECK(parse_error("link_delay:from=0,from=1").find("key \"from\" given twice") != std::string::npos);
  CHECK(model_error({{"faults", json::object()}}).find("m.faults: must be an array") != std::string::npos);
  CHECK(model_error({{"faults", {{{"kind", "stall_daemon"}, {"node", 0}, {"daemon", 0}, {"start_us", 1}}}}})
            .find("m.faults[0]: missing key \"end_us\"") != std::string::npos);
  CHECK(model_error({{"faults", {{{"kind", "link_delay"}, {"from", "0"}}}}}).find("m.faults[0].from: must be a number") !=
        std::string::npos);
  // The run's shape.
  CHECK_THROWS_WITH(sim::check_shape({sim::Fault::parse("stall_daemon:node=0,daemon=2,start_us=1,end_us=2")}, 2, 2),
                    Catch::Contains("fault 0 (stall_daemon).daemon: daemon 2 but the nodes have 2 daemons"));
  CHECK_THROWS_WITH(sim::check_shape({sim::Fault::parse("link_delay:from=0,to=3,start_us=1,end_us=2,extra_ns=1")}, 2, 2),
                    Catch::Contains(".to: node 3 but the run has 2 nodes"));
}

TEST_CASE("each fault costs throughput, deterministically, and shows in the summary", "[faults]") {
  // The whole 1 ms run under the fault, every request checked by the oracle.
  app::Options base = small_run(backend::BackendKind::kDelegation, 0.001);
  base.check_exactly_once = true;
  auto completed = [&](const std::vector<std::string>& faults, json* model_out = nullptr) {
    app::Options o = base;
    o.faults = faults;
    const app::ExperimentResult r = app::run_experiment(o, sim::Model::defaults(), nullptr);
    REQUIRE(r.exactly_once.has_value());
    CHECK(r.exactly_once->ok());
    CHECK(r.credit_violations == 0);
    if (model_out) *model_out = r.extra["model"];
    return r.runs[0].completed();
  };
  const uint64_t clean = completed({});
  json model;
  const uint64_t slow = completed({"slow_node:node=0,start_us=0,end_us=1000,factor=4"}, &model);
  REQUIRE(model["faults"].size() == 1);
  CHECK(model["faults"][0]["kind"] == "slow_node");
  const uint64_t stall = completed({"stall_daemon:node=1,daemon=0,start_us=200,end_us=700"});
  const uint64_t delay = completed({"link_delay:from=0,to=1,start_us=0,end_us=1000,extra_ns=20000",
                                    "link_delay:from=1,to=0,start_us=0,end_us=1000,extra_ns=20000"});
  INFO("clean " << clean << " slow " << slow << " stall " << stall << " delay " << delay);
  CHECK(slow < clean * 0.8);
  CHECK(stall < clean * 0.8);
  CHECK(delay < clean * 0.8);
  CHECK(completed({"slow_node:node=0,start_us=0,end_us=1000,factor=4"}) == slow);  // same faults, same run
  // A window after the run ends changes nothing.
  CHECK(completed({"slow_node:node=0,start_us=5000,end_us=6000,factor=4"}) == clean);
}

TEST_CASE("random small fault schedules keep every request exactly once and every endpoint's credit", "[faults]") {
  // Deterministic from one seed: schedule i uses derive_seed(kSeed, {i}).
  constexpr uint64_t kSeed = 0xFA017;
  constexpr uint32_t kSchedules = 2000;
  const backend::BackendKind kinds[] = {backend::BackendKind::kMeta, backend::BackendKind::kDelegation,
                                        backend::BackendKind::kDirect};
  uint64_t requests = 0, faults = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < kSchedules; ++i) {
    Rng rng(derive_seed(kSeed, {i}));
    app::Options o = small_run(kinds[rng.next() % 3], 0.0002);  // 200 us of virtual time
    o.np = 2 + static_cast<uint32_t>(rng.next() % 2);
    o.server_threads = 1 + static_cast<uint32_t>(rng.next() % 2);
    o.client_threads = 1 + static_cast<uint32_t>(rng.next() % 2);
    o.queue_depth = 1u << (rng.next() % 4);  // 1..8, a power of two
    o.key_range = 8 + rng.next() % 64;
    o.seed = rng.next();
    o.check_exactly_once = true;
    const uint32_t n = 1 + static_cast<uint32_t>(rng.next() % 4);
    for (uint32_t f = 0; f < n; ++f) {
      const double start = double(rng.next() % 200), len = 1 + double(rng.next() % 100);
      const std::string window = ",start_us=" + std::to_string(start) + ",end_us=" + std::to_string(start + len);
      const uint32_t a = static_cast<uint32_t>(rng.next() % o.np), b = static_cast<uint32_t>(rng.next() % o.np);
      switch (rng.next() % 3) {
        case 0:
          o.faults.push_back("slow_node:node=" + std::to_string(a) + window + ",factor=" + std::to_string(1 + rng.next() % 10));
          break;
        case 1:
          o.faults.push_back("stall_daemon:node=" + std::to_string(a) + ",daemon=" +
                             std::to_string(rng.next() % o.server_threads) + window);
          break;
        default:
          o.faults.push_back("link_delay:from=" + std::to_string(a) + ",to=" + std::to_string(b) + window +
                             ",extra_ns=" + std::to_string(rng.next() % 50'000));
      }
    }
    faults += n;
    const app::ExperimentResult r = app::run_experiment(o, sim::Model::defaults(), nullptr);
    REQUIRE(r.exactly_once.has_value());
    const kv::HistoryOracle::Verdict& v = *r.exactly_once;
    if (!v.ok() || r.credit_violations != 0) {
      std::string faults_text;
      for (const auto& f : o.faults) faults_text += " --fault " + f;
      INFO("schedule " << i << ":" << faults_text);
      for (const auto& e : v.examples) INFO(e);
      for (const auto& e : r.credit_examples) INFO(e);
      REQUIRE(v.ok());
      REQUIRE(r.credit_violations == 0);
    }
    REQUIRE(v.requests > 0);
    REQUIRE(v.answered == v.requests);
    requests += v.requests;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN(kSchedules << " schedules, " << faults << " faults, " << requests << " requests checked in " << secs << " s");
}
