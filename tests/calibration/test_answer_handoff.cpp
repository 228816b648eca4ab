// The node-wide answer handoff (sim::Model::response_handoff_ns, docs/bistability.md §8):
// the simulated-thread mechanism (a collecting client waits its turn and holds the stage
// per answer), the model key, and its effect on a whole experiment: with it on, a node
// completes at most 1 / response_handoff_ns requests per second whatever the share of
// local requests, and with it off the same set-up runs far above that.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/benchkv/options.hpp"
#include "apps/benchkv/sim_runner.hpp"
#include "sim/engine.hpp"
#include "sim/model.hpp"
#include "sim/sim_thread.hpp"

using namespace bkv;
using nlohmann::json;

namespace {

std::string error_of(const json& j) {
  try {
    sim::Model::from_json(j, "m");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// Mops per rank of a Delegation run with 8 clients x QD 8 per node, with the handoff at
// `handoff_ns` (0 = off). The model is the cpu_only candidate (NIC at its defaults), so
// that no NIC limit of the configured model (one busy QP throttled, docs/bistability.md
// §6) stands in for the cap under test.
double mops_per_rank(uint32_t np, double handoff_ns) {
  app::Options o = app::options_from_file(std::string(BKV_SOURCE_DIR) + "/configs/c1_np8.json");
  o.np = np;
  o.client_threads = 8;
  o.queue_depth = 8;
  o.duration = 0.004;
  o.interval_ms = 1;
  o.trim = 1;
  o.inflight_samples.clear();
  o.output.clear();
  sim::Model model =
      sim::Model::load_file(std::string(BKV_SOURCE_DIR) + "/configs/model/candidates/cpu_only/c1.json");
  model.response_handoff_ns = handoff_ns;
  const app::ExperimentResult r = app::run_experiment(o, model, nullptr);
  REQUIRE(r.total_issued == r.total_completed);
  REQUIRE(r.errors == 0);
  CHECK((r.extra.contains("answer_handoff_mean_wait_ns") == (handoff_ns > 0)));
  return r.runs[0].total_mops() / r.runs[0].num_ranks();
}

}  // namespace

TEST_CASE("answer handoff: a collecting thread waits for the node's stage and holds it per answer", "[handoff]") {
  sim::Engine e;
  sim::CostModel costs;
  costs.ns.fill(0.0);
  sim::SharedResource stage;
  sim::SimThread a(e, costs, 1, "a"), b(e, costs, 2, "b"), c(e, costs, 3, "c");
  a.bind_answer_handoff(&stage, 100);
  b.bind_answer_handoff(&stage, 100);
  struct Collect {
    uint32_t answers;
    sim::Time charged = 0;
    sim::StepResult step(sim::SimThread& th) {
      th.answers_arrive(answers);
      charged = th.charged_ns();
      return sim::StepResult::kExit;
    }
  } ca{3}, cb{2}, cc{5};
  a.bind<Collect, &Collect::step>(&ca);
  b.bind<Collect, &Collect::step>(&cb);
  c.bind<Collect, &Collect::step>(&cc);  // not bound to the stage: answers cost nothing
  a.start(1000);
  b.start(1050);
  c.start(1000);
  e.run();
  CHECK(ca.charged == 300);              // 3 answers x 100 ns, the stage was free
  CHECK(cb.charged == 250 + 200);        // waits until 1300, then 2 x 100 ns
  CHECK(cc.charged == 0);
  CHECK(stage.uses() == 2);
  CHECK(stage.mean_wait_ns() == Approx(125.0));
}

TEST_CASE("answer handoff: the model key, its errors and its absence when off", "[handoff]") {
  CHECK(sim::Model::defaults().response_handoff_ns == 0);
  CHECK_FALSE(sim::Model::defaults().to_json().contains("response_handoff_ns"));
  const sim::Model m = sim::Model::from_json(json{{"response_handoff_ns", 140}}, "m");
  CHECK(m.response_handoff_ns == 140);
  CHECK(m.to_json().at("response_handoff_ns") == 140);
  CHECK(sim::Model::from_json(m.to_json(), "m").response_handoff_ns == 140);
  CHECK(error_of(json{{"response_handoff_ns", -1}}).find("m.response_handoff_ns: must be a number >= 0") != std::string::npos);
  CHECK(error_of(json{{"response_handoff_ns", "fast"}}).find("m.response_handoff_ns") != std::string::npos);
  CHECK(error_of(json{{"response_handof_ns", 1}}).find("unknown key \"response_handof_ns\"") != std::string::npos);
}

TEST_CASE("answer handoff: a node's rate is capped at 1 / cost whatever the local share", "[handoff]") {
  // 2 us per answer: cap 0.5 M requests/s per node. NP=1 is all local, NP=2 half local,
  // NP=4 a quarter: the cap binds alike (8 x 8 slots per node keep the stage busy).
  for (const uint32_t np : {1u, 2u, 4u}) {
    INFO("NP=" << np);
    const double on = mops_per_rank(np, 2000);
    CHECK(on <= 0.5 * 1.01);
    CHECK(on >= 0.5 * 0.9);
  }
  // Off, the same set-ups run far above the cap: the cap is the element, not the set-up.
  for (const uint32_t np : {1u, 2u, 4u}) {
    INFO("NP=" << np << ", off");
    CHECK(mops_per_rank(np, 0) > 2 * 0.5);
  }
}
