// The simulator's data mode (`benchkv data --transport sim`): per value size, NP nodes of
// daemon #0 and client_threads clients (backends/data/data_node.hpp) on simulated
// threads, run by the one simulator runner (apps/benchkv/simulator/runner.hpp).
// Deterministic.
#pragma once

#include <functional>
#include <string>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/results/data_results.hpp"
#include "sim/model.hpp"

namespace bkv::app {

DataResult run_data_sim(const Options& o, const sim::Model& model, const std::function<void(const std::string&)>& progress);

}  // namespace bkv::app
