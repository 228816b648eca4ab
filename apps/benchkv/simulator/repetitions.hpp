// --repeat N in the simulator's KV mode: the experiment N times, the seeds seed ..
// seed + N - 1, one execution each (a fresh simulation: independent repetitions, unlike
// the back-to-back runs of one execution), and their outputs: one CSV led by a seed
// column, one summary with every repetition and the statistics over them
// (results.hpp: repeated_summary_json; docs/outputs.md, "Repetitions").
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/simulator/kv_mode.hpp"
#include "sim/model.hpp"

namespace bkv::app {

// o.repeat experiments (o.repeat >= 1), repetition k with seed o.seed + k; progress lines
// are prefixed with the seed when o.repeat > 1.
std::vector<ExperimentResult> run_repeated_experiment(const Options& o, const sim::Model& model,
                                                      const std::function<void(const std::string&)>& progress);

// Writes the CSV (a leading seed column) and the summary of the repetitions, returns the
// summary. With a single repetition: exactly write_experiment_outputs.
nlohmann::json write_repeated_outputs(const Options& o, const std::vector<ExperimentResult>& reps);

}  // namespace bkv::app
