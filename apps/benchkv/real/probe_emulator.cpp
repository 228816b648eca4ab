#include "apps/benchkv/real/probe_emulator.hpp"

#include "apps/benchkv/results/probe_report.hpp"
#include "transports/mlx5/emulator/emulated_transport.hpp"

namespace bkv::real {

std::vector<probe::TestResult> run_probe_emulator(const std::vector<probe::TestSpec>& plan, nlohmann::json* conditions) {
  using mlx5::emu::EmulatedTransport;
  const mlx5::emu::NodeOptions nic;
  const mlx5::DirectOptions dp;
  mlx5::emu::Fabric fabric;
  EmulatedTransport a(fabric, nic, dp, mlx5::emu::DeliveryMode::kEager);
  EmulatedTransport b(fabric, nic, dp, mlx5::emu::DeliveryMode::kEager);
  std::vector<probe::TestResult> results =
      probe::run_one_process(a, b, plan, app::plan_qps(plan), app::plan_max_size(plan), 200'000'000);
  if (conditions != nullptr)
    *conditions = {{"emulator", "transports/mlx5/emulator: two emulated NICs on one fabric, in this process"},
                   {"delivery", "each doorbell's work requests execute at once (eager)"},
                   {"cqe_size", nic.cqe_size},
                   {"blueflame_bytes", nic.bf_size},
                   {"cqe_compression", nic.compress_send || nic.compress_recv},
                   {"sq_depth", dp.sq_depth},
                   {"inline_max_bytes", dp.max_inline},
                   {"srq_size", dp.srq_size}};
  return results;
}

}  // namespace bkv::real
