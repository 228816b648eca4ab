// The windows the simulator's figures cover (docs/design_simulator.md §Metrics and
// traces): a start-up of idle daemon loops before the clients changes none of the
// figures of the kept epochs (the daemons', the NICs'), nor the in-flight samples, which
// start at the clients' start. The same short run with and without a start-up must agree.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/simulator/kv_mode.hpp"
#include "sim/cost_model.hpp"
#include "sim/model.hpp"
#include "tests/sim/sim_run.hpp"

using namespace bkv;
using bkv::test::sim_run;

namespace {

constexpr double kSampleUs = 10;

// Delegation on 2 nodes, 4 clients at queue depth 4, one run of 2 ms with every epoch
// kept (trim 0: the kept window opens as the clients start), in-flight samples every
// 10 us, after a start-up of `startup_ms`. The default model with one WQE in flight per
// QP, so that WQEs wait for admission (the admission queue has a depth to compare).
sim::Model model() {
  sim::Model m = sim::Model::defaults();
  m.nic.send.qp_window = 1;
  return m;
}

app::ExperimentResult run(double startup_ms) {
  app::Options o = sim_run(backend::BackendKind::kDelegation, 2, 1, 4, 4, 0.002, 1, 0);
  o.startup_ms = startup_ms;
  o.inflight_samples = "inflight.csv";  // collected into the result; nothing is written here
  o.inflight_sample_interval_us = kSampleUs;
  app::ExperimentResult r = app::run_experiment(o, model(), nullptr);
  REQUIRE(r.total_issued == r.total_completed);
  REQUIRE(r.errors == 0);
  REQUIRE(r.daemons.size() == 2);
  return r;
}

double within(double a, double b) { return std::abs(a - b) / std::max(std::abs(a), std::abs(b)); }

}  // namespace

TEST_CASE("daemon figures: a start-up's idle loops stay out of the kept window and the in-flight samples",
          "[sim][windows]") {
  const app::ExperimentResult plain = run(0);
  const app::ExperimentResult started = run(10);
  const double loop_ns = model().cpu[Op::kLoop];
  for (size_t i = 0; i < 2; ++i) {
    const app::DaemonReport& a = plain.daemons[i];
    const app::DaemonReport& b = started.daemons[i];
    INFO("rank " << a.rank << ": loops " << a.cqe.loops << " / " << b.cqe.loops << ", CQEs per loop "
                 << a.cqe.average() << " / " << b.cqe.average() << ", in flight " << a.inflight_avg << " / "
                 << b.inflight_avg);
    // The same work in the same window: the same loop texture, up to where the daemon's
    // loop phase meets the clients (the start-up's loops were counted here: 50 x).
    CHECK(within(double(a.cqe.loops), double(b.cqe.loops)) < 0.1);
    CHECK(within(a.cqe.average(), b.cqe.average()) < 0.1);
    CHECK(within(a.inflight_avg, b.inflight_avg) < 0.1);
    CHECK(within(a.extra.at("work_loop_fraction"), b.extra.at("work_loop_fraction")) < 0.1);
    CHECK(b.extra.at("busy_fraction") <= 1.0);
  }
  // The samples: the first, at the clients' start, starts the counting (0 loops); no
  // later period holds more loops than fit in it (each loop charges cpu.loop at least);
  // together they hold the kept window's loops (the same span, up to a loop at each end).
  for (const app::ExperimentResult* r : {&plain, &started}) {
    for (uint32_t rank = 0; rank < 2; ++rank) {
      std::vector<app::InflightSample> rows;
      for (const app::InflightSample& s : r->inflight)
        if (s.rank == rank) rows.push_back(s);
      REQUIRE(rows.size() == 201);  // 0, 10, ..., 2000 us after the clients' start
      CHECK(rows[0].loops_since_last == 0);
      CHECK(rows[0].cqes_since_last == 0);
      uint64_t loops = 0, most = 0;
      for (const app::InflightSample& s : rows) {
        loops += s.loops_since_last;
        most = std::max(most, s.loops_since_last);
      }
      INFO((r == &plain ? "no start-up" : "10 ms start-up") << ", rank " << rank << ": at most " << most
                                                              << " loops in a period");
      CHECK(double(most) <= kSampleUs * 1000 / loop_ns + 1);
      const uint64_t kept = r->daemons[rank].cqe.loops;
      CHECK(loops + 2 >= kept);
      CHECK(loops <= kept + 2);
    }
  }
}

TEST_CASE("NIC figures: utilization and mean depths are taken over the kept epochs, not the start-up",
          "[sim][windows]") {
  const app::ExperimentResult plain = run(0);
  const app::ExperimentResult started = run(10);
  for (size_t node = 0; node < 2; ++node) {
    const nlohmann::json& a = plain.extra.at("nics").at(node);
    const nlohmann::json& b = started.extra.at("nics").at(node);
    REQUIRE(b.at("kept").size() == 1);
    const nlohmann::json& ka = a.at("kept").at(0);
    const nlohmann::json& kb = b.at("kept").at(0);
    CHECK(kb.at("run") == 0);
    CHECK(kb.at("window_ns") == 2'000'000);
    // The whole simulation is 10 ms longer with the start-up: those figures say so.
    CHECK(b.at("whole_simulation").at("elapsed_ns").get<double>() -
              a.at("whole_simulation").at("elapsed_ns").get<double>() ==
          10'000'000.0);
    for (const char* station : {"send_engines", "recv_engines", "tx_port", "rx_port", "pcie_up"}) {
      const nlohmann::json& sa = ka.at("stations").at(station);
      const nlohmann::json& sb = kb.at("stations").at(station);
      INFO("node " << node << " " << station << ": utilization " << sa.at("utilization") << " / "
                   << sb.at("utilization") << ", mean depth " << sa.at("mean_depth") << " / " << sb.at("mean_depth"));
      REQUIRE(sa.at("jobs").get<uint64_t>() > 1000);
      CHECK(within(sa.at("utilization").get<double>(), sb.at("utilization").get<double>()) < 0.1);
      CHECK(within(sa.at("mean_depth").get<double>(), sb.at("mean_depth").get<double>()) < 0.1);
      // The kept window is the run: nearly all of the whole simulation's work.
      const double whole_busy = b.at("whole_simulation").at("stations").at(station).at("busy_ns").get<double>();
      CHECK(sb.at("busy_ns").get<double>() <= whole_busy);
      CHECK(sb.at("busy_ns").get<double>() > 0.9 * whole_busy);
    }
    const nlohmann::json& qa = ka.at("admission");
    const nlohmann::json& qb = kb.at("admission");
    INFO("node " << node << " admission: mean depth " << qa.at("mean_depth") << " / " << qb.at("mean_depth"));
    REQUIRE(qa.at("admitted").get<uint64_t>() > 1000);
    CHECK(within(qa.at("mean_depth").get<double>(), qb.at("mean_depth").get<double>()) < 0.1);
  }
}
