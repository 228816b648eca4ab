#include "apps/benchkv/simulator/probe_mode.hpp"

#include <memory>
#include <stdexcept>
#include <string>

#include "apps/benchkv/results/probe_report.hpp"
#include "core/random.hpp"
#include "sim/des_transport.hpp"
#include "sim/engine.hpp"
#include "sim/sim_thread.hpp"

namespace bkv::app {

namespace {

using sim::DesTransport;

// The default plan takes about 30 ms of virtual time on the per-node model and about
// 150 ms on the per-QP one; a plan that has not ended after this has stalled.
constexpr sim::Time kProbeVirtualLimitNs = 2'000'000'000;

struct ProbeSim {
  probe::Initiator<DesTransport>* init = nullptr;
  probe::Target<DesTransport>* target = nullptr;
  sim::Engine* engine = nullptr;
};

}  // namespace

std::vector<probe::TestResult> run_probe_sim(const std::vector<probe::TestSpec>& plan, const sim::Model& model,
                                             uint64_t seed) {
  sim::Engine engine;
  sim::DesFabric fabric(engine, derive_seed(seed, {0x50524full}));
  const uint32_t qps = plan_qps(plan), size = plan_max_size(plan);
  const uint32_t n0 = fabric.add_node(model.nic), n1 = fabric.add_node(model.nic);
  sim::SimThread t0(engine, model.cpu, derive_seed(seed, {0x50524full, 0}), "r0.probe");
  sim::SimThread t1(engine, model.cpu, derive_seed(seed, {0x50524full, 1}), "r1.probe");
  // Send CQs hold one CQE per signalled WQE; the rate tests signal one in 16.
  sim::DeviceContextConfig cfg;
  cfg.sq_depth = 256;
  DesTransport& a = fabric.create_transport(n0, t0, cfg);
  DesTransport& b = fabric.create_transport(n1, t1, cfg);
  probe::Initiator<DesTransport> init(a, qps, size);
  probe::Target<DesTransport> target(b, qps, size);
  probe::connect(init, target);
  init.set_plan(plan);
  ProbeSim ctx{&init, &target, &engine};
  t0.set_step(
      [](void* c, sim::SimThread&) {
        auto* p = static_cast<ProbeSim*>(c);
        if (p->init->step()) return sim::StepResult::kContinue;
        p->engine->stop();
        return sim::StepResult::kExit;
      },
      &ctx);
  t1.set_step(
      [](void* c, sim::SimThread&) {
        static_cast<ProbeSim*>(c)->target->step();
        return sim::StepResult::kContinue;
      },
      &ctx);
  t0.start(0);
  t1.start(0);
  engine.run_until(kProbeVirtualLimitNs);
  if (!init.done())
    throw std::runtime_error("probe: the plan did not finish within " + std::to_string(kProbeVirtualLimitNs / 1'000'000) +
                             " ms of virtual time (a test stalled, or the model's NIC is far slower than any real one)");
  return init.results();
}

}  // namespace bkv::app
