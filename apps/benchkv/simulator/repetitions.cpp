#include "apps/benchkv/simulator/repetitions.hpp"

#include <optional>

#include "apps/benchkv/results/provenance.hpp"
#include "apps/benchkv/results/mode_outputs.hpp"
#include "apps/benchkv/results/results.hpp"
#include "apps/benchkv/simulator/runner.hpp"

namespace bkv::app {

std::vector<ExperimentResult> run_repeated_experiment(const Options& o, const sim::Model& model,
                                                      const std::function<void(const std::string&)>& progress) {
  return run_repetitions<ExperimentResult>(
      o, progress, [&model](const Options& one, const std::function<void(const std::string&)>& tagged) {
        return run_experiment(one, model, tagged);
      });
}

nlohmann::json write_repeated_outputs(const Options& o, const std::vector<ExperimentResult>& reps) {
  // One repetition measured: the outputs of a single experiment.
  if (const std::optional<ExperimentResult> one = single_repetition(o, reps)) return write_experiment_outputs(o, *one);
  nlohmann::json summary = write_repeated_csv(o, repetition_parts(o, reps));
  std::vector<nlohmann::json> extras;
  uint64_t issued = 0, completed = 0, errors = 0, failed = 0;
  for (const ExperimentResult& r : reps) {
    extras.push_back(r.extra);
    issued += r.total_issued;
    completed += r.total_completed;
    errors += r.errors;
    failed += r.failed;
  }
  add_repetition_sections(summary, o.seed, extras, reps.back().interrupted);
  summary["totals"] = {{"issued", issued}, {"completed", completed}, {"errors", errors}};
  if (failed > 0 || reps.front().extra["model"].contains("faults")) summary["totals"]["failed"] = failed;
  summary["provenance"] = provenance_json(true);  // simulated threads: no CPU map
  write_summary_file(o.summary, summary);
  return summary;
}

}  // namespace bkv::app
