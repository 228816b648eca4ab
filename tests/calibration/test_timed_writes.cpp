// Simulated clients write each request when they have paid for it (docs/design_simulator.md
// §Simulated threads): the costs a client pays for collecting an answer delay the request
// that answer frees; runs of every KV backend lose and duplicate nothing; the model key
// that once switched this off is gone.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/simulator/kv_mode.hpp"
#include "core/kv/history_oracle.hpp"
#include "sim/faults.hpp"
#include "sim/model.hpp"
#include "tests/sim/model_error.hpp"
#include "tests/sim/sim_run.hpp"

using namespace bkv;
using nlohmann::json;
using bkv::test::model_error;
using bkv::test::sim_run;

namespace {

// Mops of a Meta run on one node: 1 daemon, 1 client at queue depth 1, every request
// local (answered over ipc by the daemon). The model is the cpu_only candidate with the
// answer handoff at `handoff_ns`: the cost a client pays when it collects an answer.
double one_client_mops(double handoff_ns) {
  const app::Options o = sim_run(backend::BackendKind::kMeta, 1, 1, 1, 1, 0.004, 1, 1);
  sim::Model model =
      sim::Model::load_file(std::string(BKV_SOURCE_DIR) + "/configs/model/candidates/cpu_only/c1.json");
  model.response_handoff_ns = handoff_ns;
  const app::ExperimentResult r = app::run_experiment(o, model, nullptr);
  REQUIRE(r.total_issued == r.total_completed);
  REQUIRE(r.errors == 0);
  return r.runs[0].total_mops();
}

}  // namespace

TEST_CASE("timed writes: the model key client_issue that switched them off is refused", "[timed_writes]") {
  CHECK(model_error(json{{"client_issue", "paced"}}).find("unknown key \"client_issue\"") != std::string::npos);
}

TEST_CASE("timed writes: a request waits for the costs its client paid before it", "[timed_writes]") {
  // One client at depth 1: each answer frees the slot of the next request. Collecting an
  // answer costs the handoff (500 ns), and the next request is written after it: each
  // cycle grows by about 500 ns.
  const double mops0 = one_client_mops(0), mops500 = one_client_mops(500);
  INFO(mops0 << " / " << mops500 << " Mops");
  const double cycle0_us = 1.0 / mops0, cycle500_us = 1.0 / mops500;
  CHECK(cycle500_us - cycle0_us >= 0.5 * 0.9);
  // The daemon notices the request at its next loop: the cycle grows by the handoff plus
  // at most one idle Meta loop (its loop cost, one CQ poll, one client's ipc ring).
  const sim::CostModel& c =
      sim::Model::load_file(std::string(BKV_SOURCE_DIR) + "/configs/model/candidates/cpu_only/c1.json").cpu;
  const double loop_us =
      (c.ns[size_t(Op::kLoop)] + c.ns[size_t(Op::kCqPoll)] + c.ns[size_t(Op::kPollSlot)]) / 1000.0;
  CHECK(cycle500_us - cycle0_us <= 0.5 + loop_us + 0.05);
}

TEST_CASE("timed writes: runs of meta, delegation and direct lose and duplicate nothing", "[timed_writes]") {
  for (auto b : {backend::BackendKind::kMeta, backend::BackendKind::kDelegation, backend::BackendKind::kDirect}) {
    INFO("backend " << static_cast<int>(b));
    app::Options o = sim_run(b, 2, 2, 3, 4, 0.001, 0.5, 0);
    o.key_range = 64;
    o.check_exactly_once = true;
    const app::ExperimentResult r = app::run_experiment(o, sim::Model::defaults(), nullptr);
    REQUIRE(r.exactly_once.has_value());
    for (const auto& e : r.exactly_once->examples) INFO(e);
    CHECK(r.exactly_once->ok());
    CHECK(r.total_issued == r.total_completed);
    CHECK(r.total_issued > 1000);
    CHECK(r.errors == 0);
    CHECK(r.exactly_once->requests == r.total_issued);
  }
}
