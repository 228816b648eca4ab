#include "apps/benchkv/simulator/repetitions.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

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

namespace {

// With life_s: each measured repetition's life statistics (it finished a kept epoch, so it
// has them) and their spread over the repetitions: total_mops, and the mean over a
// repetition's daemons of each per-loop figure.
void add_life_sections(nlohmann::json& summary, const std::vector<ExperimentResult>& reps) {
  std::map<std::string, std::vector<double>> figures;
  for (size_t k = 0; k < measured_repetitions(reps); ++k) {
    const nlohmann::json& life = reps[k].life;
    summary["repetitions"][k]["life"] = life;
    figures["total_mops"].push_back(life["total_mops"].get<double>());
    for (const char* f : {"completions_per_loop_avg", "cqe_per_loop_avg", "inflight_avg"}) {
      double sum = 0;
      for (const nlohmann::json& d : life["daemons"]) sum += d[f].get<double>();
      figures[f].push_back(sum / double(life["daemons"].size()));
    }
  }
  summary["overall"]["life"] = spread_over_repetitions(figures);
}

}  // namespace

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
  if (o.life_s > 0) add_life_sections(summary, reps);
  summary["totals"] = {{"issued", issued}, {"completed", completed}, {"errors", errors}};
  if (failed > 0 || reps.front().extra["model"].contains("faults")) summary["totals"]["failed"] = failed;
  summary["provenance"] = provenance_json(true);  // simulated threads: no CPU map
  write_summary_file(o.summary, summary);
  return summary;
}

}  // namespace bkv::app
