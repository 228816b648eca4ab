#include "apps/benchkv/simulator/probe_mode.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

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

// One simulation: `threads` initiator threads on node 0 and as many target threads on
// node 1, initiator i over its own queue pairs to target i, each running `plan` from
// virtual time 0; it ends when every initiator has run its plan. Returns each
// initiator's results.
std::vector<std::vector<probe::TestResult>> simulate(const std::vector<probe::TestSpec>& plan, uint32_t threads,
                                                     const sim::Model& model, uint64_t seed) {
  sim::Engine engine;
  sim::DesFabric fabric(engine, derive_seed(seed, {0x50524full}));
  const uint32_t qps = plan_qps(plan), size = plan_max_size(plan);
  const uint32_t n0 = fabric.add_node(model.nic), n1 = fabric.add_node(model.nic);
  // Send CQs hold one CQE per signalled WQE; the rate tests signal one in 16.
  sim::DeviceContextConfig cfg;
  cfg.sq_depth = 256;
  struct Pair {
    std::unique_ptr<sim::SimThread> t0, t1;
    std::unique_ptr<probe::Initiator<DesTransport>> init;
    std::unique_ptr<probe::Target<DesTransport>> target;
  };
  struct Run {
    sim::Engine* engine = nullptr;
    uint32_t running = 0;  // initiators whose plan has not ended
  } run{&engine, threads};
  struct Ctx {
    Pair* pair = nullptr;
    Run* run = nullptr;
  };
  std::vector<Pair> pairs(threads);
  std::vector<Ctx> ctx(threads);
  for (uint32_t i = 0; i < threads; ++i) {
    // Thread 0's seeds and names are those of a one-thread probe.
    // Built by appending: GCC 12 at -O3 warns falsely (-Wrestrict) on operator+ chains.
    std::string suffix;
    if (i > 0) suffix.append(".").append(std::to_string(i));
    std::string name0("r0.probe"), name1("r1.probe");
    name0 += suffix;
    name1 += suffix;
    auto seed_of = [&](uint64_t side) {
      return i == 0 ? derive_seed(seed, {0x50524full, side}) : derive_seed(seed, {0x50524full, side, i});
    };
    Pair& p = pairs[i];
    p.t0 = std::make_unique<sim::SimThread>(engine, model.cpu, seed_of(0), name0);
    p.t1 = std::make_unique<sim::SimThread>(engine, model.cpu, seed_of(1), name1);
    DesTransport& a = fabric.create_transport(n0, *p.t0, cfg);
    DesTransport& b = fabric.create_transport(n1, *p.t1, cfg);
    p.init = std::make_unique<probe::Initiator<DesTransport>>(a, qps, size);
    p.target = std::make_unique<probe::Target<DesTransport>>(b, qps, size);
    probe::connect(*p.init, *p.target);
    p.init->set_plan(plan);
    ctx[i] = Ctx{&p, &run};
    p.t0->set_step(
        [](void* c, sim::SimThread&) {
          auto* x = static_cast<Ctx*>(c);
          if (x->pair->init->step()) return sim::StepResult::kContinue;
          if (--x->run->running == 0) x->run->engine->stop();
          return sim::StepResult::kExit;
        },
        &ctx[i]);
    p.t1->set_step(
        [](void* c, sim::SimThread&) {
          static_cast<Ctx*>(c)->pair->target->step();
          return sim::StepResult::kContinue;
        },
        &ctx[i]);
  }
  for (Pair& p : pairs) {
    p.t0->start(0);
    p.t1->start(0);
  }
  engine.run_until(kProbeVirtualLimitNs);
  std::vector<std::vector<probe::TestResult>> out;
  for (Pair& p : pairs) {
    if (!p.init->done())
      throw std::runtime_error("probe: the plan did not finish within " + std::to_string(kProbeVirtualLimitNs / 1'000'000) +
                               " ms of virtual time (a test stalled, or the model's NIC is far slower than any real one)");
    out.push_back(p.init->results());
  }
  return out;
}

}  // namespace

std::vector<probe::TestResult> run_probe_sim(const std::vector<probe::TestSpec>& plan, const sim::Model& model,
                                             uint64_t seed) {
  // The one-thread tests run in one simulation, in plan order (as a probe without
  // threaded tests); each test with several posting threads in a simulation of its own,
  // its seeds derived from its place in the plan.
  std::vector<probe::TestSpec> single;
  for (const probe::TestSpec& s : plan)
    if (s.threads == 1) single.push_back(s);
  std::vector<probe::TestResult> single_results;
  if (!single.empty()) single_results = simulate(single, 1, model, seed).front();
  std::vector<probe::TestResult> out;
  size_t next_single = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const probe::TestSpec& s = plan[i];
    if (s.threads == 1) {
      out.push_back(single_results.at(next_single++));
      continue;
    }
    const auto parts = simulate({probe::thread_share(s)}, s.threads, model, derive_seed(seed, {0x54485244ull /* "THRD" */, i}));
    std::vector<probe::TestResult> each;
    for (const auto& r : parts) each.push_back(r.front());
    out.push_back(probe::merge_threads(s, each));
  }
  return out;
}

}  // namespace bkv::app
