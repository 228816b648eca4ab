// `benchkv probe --transport mlx5-emu`: the probe over the mlx5 transport's direct data
// path (DirectTransport) against the software NIC emulator (transports/mlx5/emulator), in
// one process: two emulated NICs on one emulated fabric, the initiator on one and the
// target on the other, driven alternately by this thread (probe::run_one_process), the
// emulator executing each doorbell's work requests at once (DeliveryMode::kEager).
//
// The emulator keeps every NIC's memory and queues in this process and is stepped by one
// thread, so it cannot join two processes under mpirun, and the tests with several
// posting threads are not run. Its numbers are the emulator's and this CPU's, not a NIC's:
// what the run shows is the probe end to end over the mlx5 transport's own WQE building,
// doorbells, BlueFlame copies and CQE parsing. Built when rdma-core's headers were found
// (BKV_PROBE_EMULATOR).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "backends/probe/probe.hpp"

namespace bkv::real {

// Runs the plan's one-thread tests; the run-wide conditions (the emulated NICs' options,
// the delivery mode) are written to *conditions.
std::vector<probe::TestResult> run_probe_emulator(const std::vector<probe::TestSpec>& plan, nlohmann::json* conditions);

}  // namespace bkv::real
