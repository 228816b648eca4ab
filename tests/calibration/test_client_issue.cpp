// When a simulated client's requests become visible (sim::Model::client_issue,
// docs/design.md §Simulated threads): the model key and its errors; the property that
// separates the two settings (with "step_start" the costs a client pays for collecting an
// answer only delay its next step, with "paced" they delay the request it issues next);
// and that paced runs of every KV backend lose and duplicate nothing.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/simulator/kv_mode.hpp"
#include "core/kv/history_oracle.hpp"
#include "sim/faults.hpp"
#include "sim/model.hpp"
#include "tests/sim/model_error.hpp"

using namespace bkv;
using nlohmann::json;
using bkv::test::model_error;

namespace {

// A short simulated run of `backend` (no output files, no progress).
app::Options sim_run(backend::BackendKind backend, uint32_t np, uint32_t daemons, uint32_t clients, uint32_t queue_depth,
                     double duration, double interval_ms, uint32_t trim) {
  app::Options o;
  o.backend = backend;
  o.transport = app::TransportKind::kSim;
  o.np = np;
  o.server_threads = daemons;
  o.client_threads = clients;
  o.queue_depth = queue_depth;
  o.duration = duration;
  o.interval_ms = interval_ms;
  o.trim = trim;
  o.runs = 1;
  o.progress = false;
  o.output.clear();
  o.summary.clear();
  o.inflight_samples.clear();
  return o;
}

// Mops of a Meta run on one node: 1 daemon, 1 client at queue depth 1, every request
// local (answered over ipc by the daemon). The model is the cpu_only candidate with the
// answer handoff at `handoff_ns`: the cost a client pays when it collects an answer.
double one_client_mops(sim::ClientIssue issue, double handoff_ns) {
  const app::Options o = sim_run(backend::BackendKind::kMeta, 1, 1, 1, 1, 0.004, 1, 1);
  sim::Model model =
      sim::Model::load_file(std::string(BKV_SOURCE_DIR) + "/configs/model/candidates/cpu_only/c1.json");
  model.client_issue = issue;
  model.response_handoff_ns = handoff_ns;
  const app::ExperimentResult r = app::run_experiment(o, model, nullptr);
  REQUIRE(r.total_issued == r.total_completed);
  REQUIRE(r.errors == 0);
  return r.runs[0].total_mops();
}

}  // namespace

TEST_CASE("client issue: the model key, its errors and its absence at the default", "[client_issue]") {
  CHECK(sim::Model::defaults().client_issue == sim::ClientIssue::kStepStart);
  CHECK_FALSE(sim::Model::defaults().to_json().contains("client_issue"));
  const sim::Model paced = sim::Model::from_json(json{{"client_issue", "paced"}}, "m");
  CHECK(paced.client_issue == sim::ClientIssue::kPaced);
  CHECK(paced.to_json().at("client_issue") == "paced");
  CHECK(sim::Model::from_json(paced.to_json(), "m").client_issue == sim::ClientIssue::kPaced);
  CHECK(sim::Model::from_json(json{{"client_issue", "step_start"}}, "m").client_issue == sim::ClientIssue::kStepStart);
  CHECK(model_error(json{{"client_issue", "sometimes"}}).find("m.client_issue: must be \"step_start\" or \"paced\"") !=
        std::string::npos);
  CHECK(model_error(json{{"client_issue", 1}}).find("m.client_issue") != std::string::npos);
}

TEST_CASE("client issue: paced, a request waits for the costs its client paid before it", "[client_issue]") {
  // One client at depth 1: each answer frees the slot of the next request. Collecting an
  // answer costs the handoff (500 ns). With step_start the next request is written at the
  // start of the collecting step, so the handoff only delays a later step that, at depth 1,
  // the next answer does not reach before it ends: the rate does not move. Paced, the
  // request is written after the handoff: each cycle grows by about 500 ns.
  const double start0 = one_client_mops(sim::ClientIssue::kStepStart, 0);
  const double start500 = one_client_mops(sim::ClientIssue::kStepStart, 500);
  const double paced0 = one_client_mops(sim::ClientIssue::kPaced, 0);
  const double paced500 = one_client_mops(sim::ClientIssue::kPaced, 500);
  INFO("step_start " << start0 << " / " << start500 << " Mops; paced " << paced0 << " / " << paced500);
  CHECK(start500 == Approx(start0).epsilon(0.01));
  // One request per step already: without the handoff, pacing changes nothing here.
  CHECK(paced0 == Approx(start0).epsilon(0.01));
  const double cycle0_us = 1.0 / paced0, cycle500_us = 1.0 / paced500;
  CHECK(cycle500_us - cycle0_us >= 0.5 * 0.9);
  // The daemon notices the request at its next loop (550 ns apart in this model): the
  // cycle grows by the handoff plus at most one loop.
  CHECK(cycle500_us - cycle0_us <= 0.5 + 0.55 + 0.05);
}

TEST_CASE("client issue: paced runs of meta, delegation and direct lose and duplicate nothing", "[client_issue]") {
  for (auto b : {backend::BackendKind::kMeta, backend::BackendKind::kDelegation, backend::BackendKind::kDirect}) {
    INFO("backend " << static_cast<int>(b));
    app::Options o = sim_run(b, 2, 2, 3, 4, 0.001, 0.5, 0);
    o.key_range = 64;
    o.check_exactly_once = true;
    sim::Model model = sim::Model::defaults();
    model.client_issue = sim::ClientIssue::kPaced;
    const app::ExperimentResult r = app::run_experiment(o, model, nullptr);
    REQUIRE(r.exactly_once.has_value());
    for (const auto& e : r.exactly_once->examples) INFO(e);
    CHECK(r.exactly_once->ok());
    CHECK(r.total_issued == r.total_completed);
    CHECK(r.total_issued > 1000);
    CHECK(r.errors == 0);
    CHECK(r.exactly_once->requests == r.total_issued);
  }
}

TEST_CASE("client issue: paced clients that find the delegation ring full retry and lose nothing", "[client_issue]") {
  // NP=8, 40 clients x depth 32: ~1,120 remote requests per node against a 1,024-entry
  // delegation ring. Daemon #0 of node 0 is stalled from 1 to 150 us, while its clients
  // write: its ring fills, and paced writes are refused until the daemon reads again (the
  // retry path of Client::step_paced).
  app::Options o = sim_run(backend::BackendKind::kDelegation, 8, 1, 40, 32, 0.0006, 0.2, 0);
  o.key_range = 256;
  o.check_exactly_once = true;
  sim::Model model = sim::Model::defaults();
  model.client_issue = sim::ClientIssue::kPaced;
  model.faults.push_back(sim::Fault::parse("stall_daemon:node=0,daemon=0,start_us=1,end_us=150"));
  const app::ExperimentResult r = app::run_experiment(o, model, nullptr);
  REQUIRE(r.exactly_once.has_value());
  for (const auto& e : r.exactly_once->examples) INFO(e);
  CHECK(r.exactly_once->ok());
  CHECK(r.total_issued == r.total_completed);
  CHECK(r.total_issued > 8 * 1280);
  CHECK(r.errors == 0);
}
