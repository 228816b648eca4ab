#include "apps/benchkv/simulator/repetitions.hpp"

#include <stdexcept>

#include "apps/benchkv/results/provenance.hpp"
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
  if (reps.empty()) throw std::logic_error("write_repeated_outputs: no repetition");
  // A repetition a signal stopped before any kept epoch finished has no run: left out, as
  // a single run would be; the "interrupted" mark (with the seed under --repeat) stays.
  const size_t n = reps.back().runs.empty() ? reps.size() - 1 : reps.size();
  if (n <= 1) {  // one repetition measured: the outputs of a single experiment
    if (reps.size() == 1 && (o.repeat == 1 || reps.front().interrupted.is_null()))
      return write_experiment_outputs(o, reps.front());
    ExperimentResult first = reps.front();
    first.interrupted = reps.back().interrupted;
    if (!first.interrupted.is_null()) first.interrupted["seed"] = o.seed + reps.size() - 1;
    return write_experiment_outputs(o, first);
  }
  std::vector<RepetitionResults> parts;
  for (size_t k = 0; k < n; ++k) parts.push_back({o.seed + k, reps[k].runs, reps[k].daemons});
  nlohmann::json summary = write_repeated_csv(o, parts);
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
