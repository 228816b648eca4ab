// What the outputs of the benchkv modes share, over a mode's result type R: a run's (or
// one repetition's) `runs`, simulator section `extra` and `interrupted` mark (null unless
// a signal stopped it), its `daemons` where the mode has daemon reports (KV), and, for
// the rpc and data modes, its totals `issued`, `completed` and `errors`, and, from a real
// run a signal stopped, `incomplete` and `unanswered`.
//  - The end of a single run's summary and its exit status (rpc and data modes).
//  - The repeated outputs (--repeat N) of the simulated KV, rpc and data modes; there
//    `reps` holds every repetition started, in seed order from o.seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/cli/stop_signals.hpp"
#include "apps/benchkv/results/provenance.hpp"
#include "apps/benchkv/results/results.hpp"

namespace bkv::app {

// The sections a single run's rpc or data summary ends with: `section` (the simulator's
// or the real run's) = `details` without "ucx_transports", which goes to the provenance
// (a CPU map only for simulated runs; R's set-up choices added where it has them);
// "totals" {issued, completed, errors, and "unanswered" when the run is incomplete};
// "interrupted" and "incomplete" when set.
template <class R>
void add_run_end(nlohmann::json& summary, const Options& o, const R& res, const std::string& section,
                 const nlohmann::json& details) {
  summary[section] = details;
  summary[section].erase("ucx_transports");  // provenance's, below
  summary["totals"] = {{"issued", res.issued}, {"completed", res.completed}, {"errors", res.errors}};
  // Real rpc and data runs step every thread of a rank on its main thread: no CPU map.
  summary["provenance"] = provenance_json(o.transport == TransportKind::kSim);
  if constexpr (requires { res.setup_provenance; })
    if (res.setup_provenance.is_object()) summary["provenance"].update(res.setup_provenance);
  if (details.contains("ucx_transports")) summary["provenance"]["ucx_transports"] = details["ucx_transports"];
  if (!res.interrupted.is_null()) summary["interrupted"] = res.interrupted;
  if (!res.incomplete.is_null()) {
    summary["incomplete"] = res.incomplete;
    summary["totals"]["unanswered"] = res.unanswered;
  }
}

// The exit status of a single rpc or data run, its outputs written: report_interruption's
// when a signal stopped it, else consistency_status's (`what`: "calls", ...); what a real
// run stopped by a signal left in flight (unanswered) is not counted as lost.
template <class R>
int run_exit_status(const Options& o, const R& res, const char* what) {
  const int consistent = res.issued == res.completed + res.unanswered && res.errors == 0
                             ? 0
                             : consistency_status(res.issued, res.completed, res.errors, what);
  if (const int status = report_interruption(res.interrupted, o.output, o.summary); status != 0) return status;
  return consistent;
}

// The repetitions measured: all but the last one started when a signal stopped it before
// any kept epoch finished (it has no run: left out, as a single run would be; its
// "interrupted" mark stays).
template <class R>
size_t measured_repetitions(const std::vector<R>& reps) {
  if (reps.empty()) throw std::logic_error("repeated outputs: no repetition");
  return reps.back().runs.empty() ? reps.size() - 1 : reps.size();
}

// The repetition whose outputs stand for all of them when at most one was measured, with
// the "interrupted" mark of the last one started (and its seed under --repeat); nullopt
// when two or more were measured.
template <class R>
std::optional<R> single_repetition(const Options& o, const std::vector<R>& reps) {
  if (measured_repetitions(reps) > 1) return std::nullopt;
  R first = reps.front();
  if (reps.size() == 1 && (o.repeat == 1 || first.interrupted.is_null())) return first;
  first.interrupted = reps.back().interrupted;
  if (!first.interrupted.is_null()) first.interrupted["seed"] = o.seed + reps.size() - 1;
  return first;
}

// The measured repetitions as write_repeated_csv takes them, each with its seed (and its
// daemon reports where R has them). The spans point into `reps`.
template <class R>
std::vector<RepetitionResults> repetition_parts(const Options& o, const std::vector<R>& reps) {
  std::vector<RepetitionResults> parts;
  const size_t n = measured_repetitions(reps);
  for (size_t k = 0; k < n; ++k) {
    if constexpr (requires { reps[k].daemons; })
      parts.push_back({o.seed + k, reps[k].runs, reps[k].daemons});
    else
      parts.push_back({o.seed + k, reps[k].runs, {}});
  }
  return parts;
}

// {figure: repetition_spread_json of its values}, one value per repetition each.
inline nlohmann::json spread_over_repetitions(const std::map<std::string, std::vector<double>>& figures) {
  nlohmann::json spread = nlohmann::json::object();
  for (const auto& [key, values] : figures) spread[key] = repetition_spread_json(values);
  return spread;
}

// The mode's section of an rpc or data repeated summary: section_of(o, rep) (rpc_summary,
// data_summary) of the first repetition, its "runs" those of every measured repetition,
// each with its "seed"; and, when figures_of(rep) gives an object of numbers for every
// measured repetition (std::nullopt: none, e.g. no call completed), each in
// summary["repetitions"][k][key] and their spread in
// summary["overall"][key + "_over_repetitions"].
template <class R, class Section, class Figures>
nlohmann::json repeated_section(nlohmann::json& summary, const Options& o, const std::vector<R>& reps,
                                Section section_of, const std::string& key, Figures figures_of) {
  nlohmann::json section = section_of(o, reps.front());
  section["runs"] = nlohmann::json::array();
  std::map<std::string, std::vector<double>> over;  // figure -> one value per repetition
  bool every_repetition_has_figures = true;
  const size_t n = measured_repetitions(reps);
  for (size_t k = 0; k < n; ++k) {
    const nlohmann::json one = section_of(o, reps[k]);  // (a named object: its runs outlive the loop)
    for (nlohmann::json r : one["runs"]) {
      r["seed"] = o.seed + k;
      section["runs"].push_back(std::move(r));
    }
    const std::optional<nlohmann::json> f = figures_of(reps[k]);
    if (!f) {
      every_repetition_has_figures = false;
      continue;
    }
    for (const auto& [name, v] : f->items()) over[name].push_back(v.template get<double>());
    summary["repetitions"][k][key] = *f;
  }
  if (every_repetition_has_figures) summary["overall"][key + "_over_repetitions"] = spread_over_repetitions(over);
  return section;
}

// The end of an rpc or data mode's repeated summary: add_repetition_sections over every
// repetition started, then "totals" {issued, completed, errors} summed over them.
template <class R>
void add_repeated_end(nlohmann::json& summary, const Options& o, const std::vector<R>& reps) {
  std::vector<nlohmann::json> extras;
  uint64_t issued = 0, completed = 0, errors = 0;
  for (const R& r : reps) {
    extras.push_back(r.extra);
    issued += r.issued;
    completed += r.completed;
    errors += r.errors;
  }
  add_repetition_sections(summary, o.seed, extras, reps.back().interrupted);
  summary["totals"] = {{"issued", issued}, {"completed", completed}, {"errors", errors}};
}

// The exit status of an rpc or data mode's repeated run, its outputs written:
// report_interruption's when a signal stopped the last repetition started (naming its
// seed), else consistency_status over every repetition's totals (`what`: "calls", ...).
template <class R>
int repeated_exit_status(const Options& o, const std::vector<R>& reps, const char* what) {
  uint64_t issued = 0, completed = 0, errors = 0;
  for (const R& r : reps) issued += r.issued, completed += r.completed, errors += r.errors;
  const int consistent = consistency_status(issued, completed, errors, what);
  const std::string repetition = reps.back().interrupted.is_null()
      ? std::string() : fmt::format(" of the repetition with seed {}", o.seed + reps.size() - 1);
  if (const int status = report_interruption(reps.back().interrupted, o.output, o.summary, repetition); status != 0)
    return status;
  return consistent;
}

}  // namespace bkv::app
