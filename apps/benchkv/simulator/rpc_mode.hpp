// The simulator's rpc mode (`benchkv rpc --transport sim`): copyrpc alone
// (backends/rpc/rpc_bench.hpp), one caller thread and np - 1 server threads (np = 1: one
// server on the caller's node, NIC loopback), run by the one simulator runner
// (apps/benchkv/simulator/runner.hpp). Deterministic.
#pragma once

#include <functional>
#include <string>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/results/rpc_results.hpp"
#include "sim/model.hpp"

namespace bkv::app {

RpcResult run_rpc_sim(const Options& o, const sim::Model& model, const std::function<void(const std::string&)>& progress);

}  // namespace bkv::app
