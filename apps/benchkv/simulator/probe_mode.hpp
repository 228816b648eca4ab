// `benchkv probe --transport sim`: the probe (backends/probe/probe.hpp) over two simulated
// nodes of one model, in this process: the initiator on node 0, the target on node 1,
// each a simulated thread whose steps are the probe's loops.
#pragma once

#include <vector>

#include "backends/probe/probe.hpp"
#include "sim/model.hpp"

namespace bkv::app {

// Runs the plan; throws std::runtime_error when the simulation ends before the plan did.
std::vector<probe::TestResult> run_probe_sim(const std::vector<probe::TestSpec>& plan, const sim::Model& model,
                                             uint64_t seed);

}  // namespace bkv::app
