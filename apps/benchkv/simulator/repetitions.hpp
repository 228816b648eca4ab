// --repeat N in the simulator (KV, rpc and data modes): the experiment N times, the seeds
// seed .. seed + N - 1, one execution each (a fresh simulation: independent repetitions,
// unlike the back-to-back runs of one execution), and their outputs: one CSV led by a
// seed column, one summary with every repetition and the statistics over them
// (results.hpp: repeated_summary_json; rpc_results.hpp and data_results.hpp for rpc and
// data; docs/outputs.md, "Repetitions").
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/cli/stop_signals.hpp"
#include "apps/benchkv/simulator/kv_mode.hpp"
#include "sim/model.hpp"

namespace bkv::app {

// o.repeat results of run_one(options, progress), repetition k with the options' seed
// o.seed + k and repeat 1; progress lines are prefixed with the seed when o.repeat > 1.
// After a repetition a signal stopped (its "interrupted" is set), or once a signal came,
// no further repetition starts. Result: a mode's result with `interrupted` (json).
template <class Result, class RunOne>
std::vector<Result> run_repetitions(const Options& o, const std::function<void(const std::string&)>& progress,
                                    const RunOne& run_one) {
  std::vector<Result> reps;
  reps.reserve(o.repeat);
  for (uint32_t k = 0; k < o.repeat; ++k) {
    Options one = o;
    one.seed = o.seed + k;
    one.repeat = 1;
    std::function<void(const std::string&)> tagged = progress;
    if (progress && o.repeat > 1)
      tagged = [&progress, seed = one.seed](const std::string& line) {
        progress("seed " + std::to_string(seed) + ": " + line);
      };
    reps.push_back(run_one(one, tagged));
    if (!reps.back().interrupted.is_null() || stop_signal() != 0) break;
  }
  return reps;
}

// o.repeat experiments (o.repeat >= 1), repetition k with seed o.seed + k; progress lines
// are prefixed with the seed when o.repeat > 1.
std::vector<ExperimentResult> run_repeated_experiment(const Options& o, const sim::Model& model,
                                                      const std::function<void(const std::string&)>& progress);

// Writes the CSV (a leading seed column) and the summary of the repetitions, returns the
// summary. With a single repetition: exactly write_experiment_outputs.
nlohmann::json write_repeated_outputs(const Options& o, const std::vector<ExperimentResult>& reps);

}  // namespace bkv::app
