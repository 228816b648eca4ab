// The node-wide answer handoff (sim::Model::response_handoff_ns, docs/bistability.md §3):
// the simulated-thread mechanism (a collecting client waits its turn and holds the stage
// per answer), the model key, and its effect on a whole experiment: with it on, a node
// completes at most 1 / response_handoff_ns requests per second whatever the share of
// local requests, and with it off the same set-up runs far above that. And its per-visit
// variant (response_handoff_unit "visit"): the answers a client finds in one response
// area in one step cost one transfer, answers in different areas one each.
#include <catch2/catch.hpp>

#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/simulator/kv_mode.hpp"
#include "sim/engine.hpp"
#include "sim/model.hpp"
#include "tests/sim/model_error.hpp"
#include "sim/sim_thread.hpp"

using namespace bkv;
using nlohmann::json;
using bkv::test::model_error;

namespace {

// Mops per rank of a Delegation run with 8 clients x QD 8 per node, with the handoff at
// `handoff_ns` (0 = off). The model is the cpu_only candidate (NIC at its defaults), so
// that no NIC limit (the per-QP candidate's one busy QP throttled, docs/bistability.md
// §6) stands in for the cap under test.
// A unit or daemon count not given stays as the model or the configuration has it.
app::ExperimentResult run_handoff(uint32_t np, double handoff_ns, std::optional<sim::HandoffUnit> unit,
                                  uint32_t queue_depth, std::optional<uint32_t> daemons = 1,
                                  std::optional<backend::BackendKind> backend = std::nullopt) {
  app::Options o = app::options_from_file(std::string(BKV_SOURCE_DIR) + "/configs/c1_np8.json");
  o.np = np;
  o.client_threads = 8;
  o.queue_depth = queue_depth;
  if (daemons) o.server_threads = *daemons;
  if (backend) o.backend = *backend;
  o.duration = 0.004;
  o.interval_ms = 1;
  o.trim = 1;
  o.inflight_samples.clear();
  o.output.clear();
  sim::Model model =
      sim::Model::load_file(std::string(BKV_SOURCE_DIR) + "/configs/model/candidates/cpu_only/c1.json");
  model.response_handoff_ns = handoff_ns;
  if (unit) model.response_handoff_unit = *unit;
  app::ExperimentResult r = app::run_experiment(o, model, nullptr);
  REQUIRE(r.total_issued == r.total_completed);
  REQUIRE(r.errors == 0);
  return r;
}

double mops_per_rank(uint32_t np, double handoff_ns) {
  const app::ExperimentResult r = run_handoff(np, handoff_ns, std::nullopt, 8, std::nullopt);
  CHECK((r.extra.contains("answer_handoff_mean_wait_ns") == (handoff_ns > 0)));
  return r.runs[0].total_mops() / r.runs[0].num_ranks();
}

// Threads whose operations cost nothing, on one engine, and the node's handoff stage.
struct FreeThreads {
  sim::Engine e;
  sim::CostModel costs = [] {
    sim::CostModel c;
    c.ns.fill(0.0);
    return c;
  }();
  sim::SharedResource stage;
};

}  // namespace

TEST_CASE_METHOD(FreeThreads, "answer handoff: a collecting thread waits for the node's stage and holds it per answer", "[handoff]") {
  sim::SimThread a(e, costs, 1, "a"), b(e, costs, 2, "b"), c(e, costs, 3, "c");
  a.bind_answer_handoff(&stage, 100);
  b.bind_answer_handoff(&stage, 100);
  struct Collect {
    uint32_t answers;
    sim::Time charged = 0;
    sim::StepResult step(sim::SimThread& th) {
      th.answers_arrive(answers, answers);
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
  CHECK(model_error(json{{"response_handoff_ns", -1}}).find("m.response_handoff_ns: must be a number in [0, ") != std::string::npos);
  CHECK(model_error(json{{"response_handoff_ns", "fast"}}).find("m.response_handoff_ns") != std::string::npos);
  CHECK(model_error(json{{"response_handof_ns", 1}}).find("unknown key \"response_handof_ns\"") != std::string::npos);
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

TEST_CASE_METHOD(FreeThreads, "answer handoff per visit: the answers of one visit cost one transfer, of k visits k", "[handoff]") {
  sim::SimThread a(e, costs, 1, "a"), b(e, costs, 2, "b"), per_answer(e, costs, 3, "p");
  sim::SharedResource other;
  a.bind_answer_handoff(&stage, 100, /*per_visit=*/true);
  b.bind_answer_handoff(&stage, 100, /*per_visit=*/true);
  per_answer.bind_answer_handoff(&other, 100);  // the default unit: visits are ignored
  struct Collect {
    uint32_t answers, visits;
    sim::Time charged = 0;
    sim::StepResult step(sim::SimThread& th) {
      th.answers_arrive(answers, visits);
      charged = th.charged_ns();
      return sim::StepResult::kExit;
    }
  } ca{4, 1}, cb{3, 3}, cp{4, 1};
  a.bind<Collect, &Collect::step>(&ca);
  b.bind<Collect, &Collect::step>(&cb);
  per_answer.bind<Collect, &Collect::step>(&cp);
  a.start(1000);
  b.start(1050);
  per_answer.start(1000);
  e.run();
  CHECK(ca.charged == 100);        // 4 answers found in one area: one transfer
  CHECK(cb.charged == 50 + 300);   // waits until 1100, then 3 areas: three transfers
  CHECK(cp.charged == 400);        // per answer: 4 transfers whatever the visits
  CHECK(a.handoff_answers() == 4);
  CHECK(a.handoff_transfers() == 1);
  CHECK(b.handoff_transfers() == 3);
  CHECK(per_answer.handoff_transfers() == 4);
}

TEST_CASE("answer handoff per visit: the model key, its errors and its absence by default", "[handoff]") {
  CHECK(sim::Model::defaults().response_handoff_unit == sim::HandoffUnit::kAnswer);
  const sim::Model m = sim::Model::from_json(json{{"response_handoff_ns", 190}, {"response_handoff_unit", "visit"}}, "m");
  CHECK(m.response_handoff_unit == sim::HandoffUnit::kVisit);
  CHECK(m.to_json().at("response_handoff_unit") == "visit");
  CHECK(sim::Model::from_json(m.to_json(), "m").response_handoff_unit == sim::HandoffUnit::kVisit);
  const sim::Model per_answer =
      sim::Model::from_json(json{{"response_handoff_ns", 190}, {"response_handoff_unit", "answer"}}, "m");
  CHECK(per_answer.response_handoff_unit == sim::HandoffUnit::kAnswer);
  CHECK_FALSE(per_answer.to_json().contains("response_handoff_unit"));  // the default keeps the old bytes
  CHECK(model_error(json{{"response_handoff_ns", 190}, {"response_handoff_unit", "line"}})
            .find("m.response_handoff_unit: must be \"answer\" or \"visit\"") != std::string::npos);
  CHECK(model_error(json{{"response_handoff_ns", 190}, {"response_handoff_unit", 1}}).find("m.response_handoff_unit") !=
        std::string::npos);
  CHECK(model_error(json{{"response_handoff_unit", "visit"}}).find("response_handoff_ns is 0") != std::string::npos);
}

TEST_CASE("answer handoff per visit: a client's batch of answers amortizes the transfer", "[handoff]") {
  // 2 us per transfer, NP=1 (all local), 8 clients. At depth 1 a visit holds one answer:
  // the cap is 0.5 M/s as per answer. At depth 4 a stage-bound client finds the answers
  // that arrived while it waited in one visit, and pays one transfer for them: the cap
  // rises above the per-answer one (a client scans again as soon as it has handled what
  // it found, so a visit holds about two answers here, not four).
  const app::ExperimentResult d1 = run_handoff(1, 2000, sim::HandoffUnit::kVisit, 1);
  CHECK(d1.extra.at("answer_handoff_transfers") == d1.extra.at("answer_handoff_answers"));
  const double d1_mops = d1.runs[0].total_mops();
  CHECK(d1_mops <= 0.5 * 1.01);
  CHECK(d1_mops >= 0.5 * 0.9);
  const app::ExperimentResult d4 = run_handoff(1, 2000, sim::HandoffUnit::kVisit, 4);
  const double answers = d4.extra.at("answer_handoff_answers").get<double>();
  const double transfers = d4.extra.at("answer_handoff_transfers").get<double>();
  CHECK(answers / transfers > 1.5);
  CHECK(d4.runs[0].total_mops() > 1.5 * 0.5 * 0.95);
  CHECK(d4.runs[0].total_mops() <= 4 * 0.5 * 1.01);
  // Per answer, the same depth-4 set-up stays at the per-answer cap.
  const app::ExperimentResult a4 = run_handoff(1, 2000, sim::HandoffUnit::kAnswer, 4);
  CHECK(a4.runs[0].total_mops() <= 0.5 * 1.01);
  CHECK_FALSE(a4.extra.contains("answer_handoff_transfers"));
}

TEST_CASE("answer handoff per visit: answers from two daemons' rings are separate visits", "[handoff]") {
  // Meta with two daemons: a client's local requests go to both daemons' ipc rings; the
  // answers found in one ring in one scan are one visit and one transfer, so there are
  // fewer transfers than answers, each transfer one hold of the node's stage, and more
  // transfers than with one daemon (whose ring is one area).
  const app::ExperimentResult r = run_handoff(1, 500, sim::HandoffUnit::kVisit, 8, 2, backend::BackendKind::kMeta);
  const uint64_t holds = r.extra.at("answer_handoff_holds").get<uint64_t>();
  const uint64_t transfers = r.extra.at("answer_handoff_transfers").get<uint64_t>();
  const uint64_t answers = r.extra.at("answer_handoff_answers").get<uint64_t>();
  CHECK(transfers == holds);
  CHECK(transfers < answers);
  const app::ExperimentResult one = run_handoff(1, 500, sim::HandoffUnit::kVisit, 8, 1, backend::BackendKind::kMeta);
  const double per_transfer_one = one.extra.at("answer_handoff_answers").get<double>() /
                                  one.extra.at("answer_handoff_transfers").get<double>();
  CHECK(double(answers) / double(transfers) < per_transfer_one);
}
