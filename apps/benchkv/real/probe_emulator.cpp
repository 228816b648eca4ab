#include "apps/benchkv/real/probe_emulator.hpp"

#include <stdexcept>
#include <string>

#include "apps/benchkv/results/probe_report.hpp"
#include "transports/mlx5/emulator/emulated_transport.hpp"

namespace bkv::real {

namespace {
// Target loops allowed after the plan for the WRITE+IMMs the NIC delivered last.
constexpr uint32_t kTailSteps = 1000;
}  // namespace

std::vector<probe::TestResult> run_probe_emulator(const std::vector<probe::TestSpec>& plan, nlohmann::json* conditions) {
  using mlx5::emu::EmulatedTransport;
  const mlx5::emu::NodeOptions nic;
  const mlx5::DirectOptions dp;
  mlx5::emu::Fabric fabric;
  EmulatedTransport a(fabric, nic, dp, mlx5::emu::DeliveryMode::kEager);
  EmulatedTransport b(fabric, nic, dp, mlx5::emu::DeliveryMode::kEager);
  const uint32_t qps = app::plan_qps(plan), size = app::plan_max_size(plan);
  probe::Initiator<EmulatedTransport> init(a, qps, size);
  probe::Target<EmulatedTransport> target(b, qps, size);
  probe::connect(init, target);
  std::vector<probe::TestSpec> one_thread;
  for (const probe::TestSpec& t : plan)
    if (t.threads == 1) one_thread.push_back(t);
  init.set_plan(one_thread);
  probe::run_in_one_thread(init, target, 200'000'000);
  // Every WRITE+IMM posted reached the target once, and every ping was answered (the
  // emulated NIC executed them at their doorbells; the target may not have taken the
  // last ones yet).
  uint64_t writes = 0, pings = 0;
  for (const probe::TestResult& r : init.results()) {
    if (r.spec.kind == probe::TestKind::kRate) writes += r.posted;
    if (r.spec.kind == probe::TestKind::kWriteLatency) pings += uint64_t{r.spec.warmup} + r.spec.iters;
  }
  for (uint32_t i = 0; i < kTailSteps && target.received() < writes + pings; ++i) target.step();
  if (target.received() != writes + pings || target.pongs() != pings)
    throw std::runtime_error("probe over the NIC emulator: the initiator posted " + std::to_string(writes) +
                             " WRITE+IMMs and " + std::to_string(pings) + " pings; the target took " +
                             std::to_string(target.received()) + " and answered " + std::to_string(target.pongs()));
  if (conditions != nullptr)
    *conditions = {{"emulator", "transports/mlx5/emulator: two emulated NICs on one fabric, in this process"},
                   {"delivery", "each doorbell's work requests execute at once (eager)"},
                   {"cqe_size", nic.cqe_size},
                   {"blueflame_bytes", nic.bf_size},
                   {"cqe_compression", nic.compress_send || nic.compress_recv},
                   {"sq_depth", dp.sq_depth},
                   {"inline_max_bytes", dp.max_inline},
                   {"srq_size", dp.srq_size}};
  return init.results();
}

}  // namespace bkv::real
