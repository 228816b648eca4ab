#include "apps/benchkv/sweep/sweep.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "apps/benchkv/results/fnv1a.hpp"
#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/cli/single_options.hpp"
#include "apps/benchkv/cli/stop_signals.hpp"
#include "apps/benchkv/results/results.hpp"
#include "apps/benchkv/results/data_results.hpp"
#include "apps/benchkv/results/rpc_results.hpp"
#include "apps/benchkv/simulator/data_mode.hpp"
#include "apps/benchkv/simulator/kv_mode.hpp"
#include "apps/benchkv/simulator/repetitions.hpp"
#include "apps/benchkv/simulator/rpc_mode.hpp"
#include "apps/benchkv/sweep/sweep_ranks.hpp"
#include "core/strict_json.hpp"
#include "sim/model.hpp"

namespace bkv::app {

namespace fs = std::filesystem;
using nlohmann::json;
using ojson = nlohmann::ordered_json;

bool started_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

namespace {

constexpr const char* kModelPrefix = "model.";
// Keys the sweep sets itself for every run.
const std::vector<std::string> kReservedKeys = {"output", "summary", "progress"};
const std::vector<std::string> kPlotKeys = {"kind", "x", "y", "z", "by", "logx", "logy", "above", "title", "file"};

// A sweep file, or an output directory, that cannot be used as it is (exit status 2; a
// run that fails is status 1).
struct SweepInputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw SweepInputError("sweep: " + file + ": " + what);
}

ojson read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + what + " " + path);
  try {
    return parse_json_bounded<ojson>(in, what + " " + path);
  } catch (const json::parse_error& e) {
    throw std::runtime_error(what + " " + path + " is not valid JSON: " + e.what());
  }
}

// The sweep file: a key given twice in one object is named in `twice` (JSON leaves which
// one counts to the reader; nlohmann keeps the last).
ojson read_sweep_file(const std::string& path, std::string& twice) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read sweep file " + path);
  std::vector<std::set<std::string>> keys;  // per open object
  const std::string what = "sweep file " + path;
  const ojson::parser_callback_t note = [&](int depth, ojson::parse_event_t ev, ojson& parsed) {
    check_json_depth(depth, ev, what);
    if (ev == ojson::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (ev == ojson::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (ev == ojson::parse_event_t::key && !keys.empty()) {
      if (!keys.back().insert(parsed.get<std::string>()).second && twice.empty()) twice = parsed.get<std::string>();
    }
    return true;
  };
  try {
    return ojson::parse(in, note);
  } catch (const json::parse_error& e) {
    throw std::runtime_error("sweep file " + path + " is not valid JSON: " + e.what());
  }
}

std::string label_of(const ojson& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// A setting key: an option key (checked when the run's options are parsed) or "model." +
// a path; the reserved keys are the sweep's own.
void check_setting_key(const std::string& file, const std::string& where, const std::string& key) {
  for (const auto& r : kReservedKeys)
    if (key == r) fail(file, where + ": \"" + key + "\" is set by the sweep for every run (in its output directory)");
  if (key.rfind(kModelPrefix, 0) == 0 && key.size() == std::string(kModelPrefix).size())
    fail(file, where + ": \"model.\" needs a path into the model, e.g. \"model.nic.send.qp_window\"");
}

// "model" given in the sweep file is relative to the sweep file.
ojson resolve_setting(const fs::path& dir, const std::string& key, const ojson& v) {
  if (key == "model" && v.is_string() && !v.get<std::string>().empty() && fs::path(v.get<std::string>()).is_relative())
    return (dir / v.get<std::string>()).lexically_normal().string();
  return v;
}

void set_path(json& root, const std::string& dotted, const json& v) {
  json* at = &root;
  size_t start = 0;
  while (true) {
    const size_t dot = dotted.find('.', start);
    const std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) throw std::runtime_error("empty component in \"model." + dotted + "\"");
    if (dot == std::string::npos) {
      (*at)[part] = v;
      return;
    }
    json& next = (*at)[part];
    if (next.is_null()) next = json::object();
    if (!next.is_object()) throw std::runtime_error("\"model." + dotted + "\": \"" + part + "\" is not an object");
    at = &next;
    start = dot + 1;
  }
}

// The model of a run: its model file (or the defaults) with the run's "model." keys.
sim::Model model_of(const Options& o, const json& patch, json* patched_out) {
  json m = o.model.empty() ? sim::Model::defaults().to_json() : json(read_json_file(o.model, "model file"));
  for (const auto& [k, v] : patch.items()) set_path(m, k, v);
  if (patch.empty()) {
    sim::Model model = sim::Model::from_json(m, o.model);
    if (patched_out) *patched_out = std::move(m);
    return model;
  }
  // Key paths in messages read as the sweep's keys ("model.nic.send.qp_windw: unknown key").
  sim::Model model = [&] {
    try {
      return sim::Model::from_json(m, "model");
    } catch (const std::exception& e) {
      throw std::runtime_error("the run's model (" + (o.model.empty() ? std::string("the built-in defaults") : o.model) +
                               " with the sweep's \"model.\" keys): " + e.what());
    }
  }();
  if (patched_out) *patched_out = std::move(m);
  return model;
}

std::string describe(const Sweep& s, const SweepRun& r) {
  std::string d = "run " + std::to_string(r.index) + " (";
  for (size_t i = 0; i < s.axes.size(); ++i) d += (i ? ", " : "") + s.axes[i] + "=" + r.labels[i];
  return d + ")";
}

std::string run_dir(const Sweep& s, uint32_t index) {
  char b[32];
  std::snprintf(b, sizeof b, "%04u", index);
  return (fs::path(s.output_dir) / "runs" / b).string();
}

// The options of a run, outputs in its directory. A "base" or "set" option that does not
// apply to this run (start_stagger_us in a start_mode "sync" run) is left at its default
// and named in `dropped`; a grid axis that does not apply is an error.
Options options_of(const Sweep& s, const SweepRun& r, std::vector<std::string>& dropped) {
  json cfg = r.config;
  const std::string dir = run_dir(s, r.index);
  cfg["output"] = dir + "/out.csv";
  cfg["progress"] = false;
  if (cfg.contains("inflight_samples") && cfg["inflight_samples"].is_string() &&
      !cfg["inflight_samples"].get<std::string>().empty())
    cfg["inflight_samples"] = dir + "/inflight.csv";
  if (cfg.contains("trace") && cfg["trace"].is_string() && !cfg["trace"].get<std::string>().empty())
    cfg["trace"] = dir + "/trace.json";
  return options_from_json(cfg, "/", s.axes, dropped);
}

Options options_of(const Sweep& s, const SweepRun& r) {
  std::vector<std::string> dropped;
  return options_of(s, r, dropped);
}

// RFC 4180: a field holding a comma, a double quote, a line feed or a carriage return is
// quoted (an unquoted carriage return ends the row for CSV readers).
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n\r") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string csv_header(const Sweep& s) {
  std::string h = "run";
  // Appended piece by piece: GCC 12 at -O3 warns -Wrestrict (a false positive) on an
  // inlined "," + std::string.
  for (const auto& a : s.axes) {
    h += ',';
    h += csv_field(a);
  }
  for (const auto& f : kSweepFigures) {
    h += ',';
    h += f;
  }
  return h;
}

// The row of a finished run, from its summary and the latency of every request of its
// kept epochs merged (rpc: the round trips; data: the operations).
std::string row_of(const SweepRun& r, const json& summary, const metrics::LatencyHistogram& latency) {
  const auto& runs = summary.at("runs");
  // The ranks that issue requests: every rank in KV and data runs; in rpc runs the
  // callers only (rank 0), the server ranks issuing none.
  const double issuing_ranks = summary.contains("rpc") ? summary.at("rpc").at("callers").get<double>()
                                                       : summary.at("config").at("np").get<double>();
  double mops = 0;
  for (const auto& x : runs) mops += x.at("total_mops").get<double>();
  mops /= double(runs.size());
  double cqe = 0, inflight = 0;
  uint64_t n0 = 0;
  for (const auto& d : summary.at("daemons"))
    if (d.at("daemon").get<uint32_t>() == 0) {
      cqe += d.at("cqe_per_loop_avg").get<double>();
      inflight += d.at("inflight_avg").get<double>();
      ++n0;
    }
  const auto& t = summary.at("totals");
  std::string row = std::to_string(r.index);
  for (const auto& l : r.labels) {  // appended: see csv_header
    row += ',';
    row += csv_field(l);
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, ",%.6f,%.6f", mops, mops / issuing_ranks);
  row += buf;
  if (n0) {  // daemon #0's figures (none in rpc and data runs)
    std::snprintf(buf, sizeof buf, ",%.6f,%.3f", cqe / double(n0), inflight / double(n0));
    row += buf;
  } else {
    row += ",,";
  }
  std::snprintf(buf, sizeof buf, ",%llu,%llu,%llu", static_cast<unsigned long long>(t.at("issued").get<uint64_t>()),
                static_cast<unsigned long long>(t.at("completed").get<uint64_t>()),
                static_cast<unsigned long long>(t.at("errors").get<uint64_t>()));
  row += buf;
  if (latency.count()) {
    std::snprintf(buf, sizeof buf, ",%.1f,%llu,%llu,%llu,%llu", latency.mean_ns(),
                  static_cast<unsigned long long>(latency.percentile_ns(0.5)),
                  static_cast<unsigned long long>(latency.percentile_ns(0.99)),
                  static_cast<unsigned long long>(latency.percentile_ns(0.999)),
                  static_cast<unsigned long long>(latency.max_ns()));
    row += buf;
  } else {
    row += ",,,,,";
  }
  const json& m = summary.at("overall").at("mops");
  if (summary.contains("repetitions") && m.value("n", uint64_t{0}) >= 2) {
    std::snprintf(buf, sizeof buf, ",%.6f,%.6f", m.at("ci95_low").get<double>(), m.at("ci95_high").get<double>());
    row += buf;
  } else {
    row += ",,";
  }
  // latency_saturated: whether a bucket of a recorder merged into `latency` stopped
  // counting at 2^32 - 1, so that the latency columns are not exact; empty with them.
  if (latency.count()) row += latency.saturated() ? ",true" : ",false";
  else row += ',';
  return row;
}

json params_of(const Sweep& s, const SweepRun& r) {
  json p = json::object();
  for (size_t i = 0; i < s.axes.size(); ++i) p[s.axes[i]] = r.labels[i];
  return p;
}

// Output paths of a run: where its files go (in its run directory), not what it computes.
// In the effective configuration the first two are left out and the others say whether
// the output is on.
const std::vector<std::string> kRunPathKeys = {"output", "summary"};
const std::vector<std::string> kRunOutputSwitchKeys = {"inflight_samples", "trace", "step_log"};

// The effective configuration of a run, which decides its row: every option as the run
// sees it (to_json, so a base config file's content and every "set" and grid value are
// in it, and so are the defaults of the options not given) and, under "model", the model
// itself (the model file's content or the built-in defaults, with the run's "model."
// keys), not its path. `model` is that model as JSON (model_of).
json effective_config(const Options& o, const json& model) {
  json c = to_json(o);
  for (const auto& k : kRunPathKeys) c.erase(k);
  for (const auto& k : kRunOutputSwitchKeys)
    if (c.contains(k)) c[k] = c[k].is_string() && !c[k].get<std::string>().empty();
  c["model"] = model;
  return c;
}

// FNV-1a, 64 bits, of the configuration's JSON text (sorted keys, so the same
// configuration always gives the same text), as 16 hex digits.
std::string config_hash(const json& config) {
  const uint64_t h = fnv1a(config.dump());
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

json effective_config(const Sweep& s, const SweepRun& r) {
  const Options o = options_of(s, r);
  json model;
  model_of(o, r.model_patch, &model);
  return effective_config(o, model);
}

// The settings that differ between two configurations, as "key: old -> new" (dotted
// paths; "(none)" where one side lacks the key), at most `limit` of them and a count of
// the rest.
std::string config_changes(const json& was, const json& now, size_t limit = 6) {
  std::map<std::string, std::pair<std::string, std::string>> flat;  // key -> (was, now)
  auto walk = [&](auto&& self, const json& j, const std::string& at, bool is_now) -> void {
    if (j.is_object() && !j.empty()) {
      for (const auto& [k, v] : j.items()) self(self, v, at.empty() ? k : at + "." + k, is_now);
      return;
    }
    auto& slot = flat[at];
    (is_now ? slot.second : slot.first) = j.dump();
  };
  walk(walk, was, "", false);
  walk(walk, now, "", true);
  std::string out;
  size_t shown = 0, more = 0;
  for (const auto& [k, v] : flat) {
    if (v.first == v.second) continue;
    if (shown == limit) {
      ++more;
      continue;
    }
    out += (shown++ ? "; " : "") + k + ": " + (v.first.empty() ? "(none)" : v.first) + " -> " +
           (v.second.empty() ? "(none)" : v.second);
  }
  if (more) out += "; and " + std::to_string(more) + " more";
  return out;
}

// Figures per row before the latency and confidence-interval columns, and before the
// latency_saturated column (the last of kSweepFigures: its size - 1).
constexpr size_t kOlderSweepFigures = 7;
constexpr size_t kSweepFiguresBeforeSaturated = 14;

// The row of a run finished earlier (resume), or "" if it has not finished. A finished
// run counts only if it was made with this run's effective configuration; otherwise the
// sweep is refused (its rows would mix runs made with different settings).
std::string finished_row(const Sweep& s, const SweepRun& r) {
  const fs::path f = fs::path(run_dir(s, r.index)) / "row.json";
  if (!fs::exists(f)) return "";
  json j;
  try {
    j = json(read_json_file(f.string(), "finished run"));
  } catch (const std::exception& e) {
    fail(s.file, "the output directory " + s.output_dir + " holds " + describe(s, r) + " whose row.json is damaged (" +
                     e.what() + "); remove that row.json to run the run again");
  }
  const std::string remedy = "; remove " + s.output_dir + " or choose another \"output\" in " + s.file +
                             " (its results would be mixed with this sweep's)";
  if (!j.contains("params") || j["params"] != params_of(s, r) || !j.contains("row") || !j["row"].is_string())
    fail(s.file, "the output directory " + s.output_dir + " holds a different " + describe(s, r) + " (" +
                     f.string() + ")" + remedy);
  if (!j.contains("config_hash") || !j["config_hash"].is_string() || !j.contains("config"))
    fail(s.file, "the output directory " + s.output_dir + " holds " + describe(s, r) + " (" + f.string() +
                     ") without a record of the configuration it was made with (an older benchkv wrote it)" + remedy);
  const json now = effective_config(s, r);
  if (j["config_hash"].get<std::string>() != config_hash(now)) {
    const std::string changes = config_changes(j["config"], now);
    fail(s.file, "the output directory " + s.output_dir + " holds " + describe(s, r) + " made with another "
                     "configuration (" + (changes.empty() ? "its recorded configuration does not match its hash" : changes) +
                     ")" + remedy);
  }
  // The recorded row goes into results.csv as it is: the run's number and labels, then one
  // field per figure, on one line.
  const std::string row = j["row"].get<std::string>();
  std::string prefix = std::to_string(r.index);
  for (const auto& l : r.labels) prefix += "," + csv_field(l);
  prefix += ",";
  const std::string figures = row.rfind(prefix, 0) == 0 ? row.substr(prefix.size()) : std::string("\"");
  const size_t count = size_t(std::count(figures.begin(), figures.end(), ',')) + 1;
  if (figures.find_first_of("\"\r\n") == std::string::npos && count == kOlderSweepFigures)
    fail(s.file, "the output directory " + s.output_dir + " holds " + describe(s, r) + " recorded by an older "
                     "benchkv, whose rows had no latency columns (" + f.string() + ")" + remedy);
  // A row one figure short that ends in neither "true" nor "false" is one from before
  // latency_saturated; one that ends in it lost another figure (below).
  const std::string last = figures.substr(figures.rfind(',') + 1);
  if (figures.find_first_of("\"\r\n") == std::string::npos && count == kSweepFiguresBeforeSaturated &&
      last != "true" && last != "false")
    fail(s.file, "the output directory " + s.output_dir + " holds " + describe(s, r) + " recorded by an older "
                     "benchkv, whose rows had no latency_saturated column (" + f.string() + ")" + remedy);
  if (figures.find_first_of("\"\r\n") != std::string::npos || count != kSweepFigures.size())
    fail(s.file, "the output directory " + s.output_dir + " holds " + describe(s, r) + " whose recorded row is not "
                     "its row (" + f.string() + ": \"row\" must be " + prefix + " and " +
                     std::to_string(kSweepFigures.size()) + " figures)" + remedy);
  return row;
}

// A signal (SIGINT/SIGTERM) stopped a run: its CSV and summary hold the epochs it
// finished, marked "interrupted"; no row.json, so a later sweep runs it again.
struct RunInterrupted : std::runtime_error {
  int signal;
  RunInterrupted(const std::string& what, int sig) : std::runtime_error(what), signal(sig) {}
};

// The outputs of a simulated rpc or data run and its repetitions (`run_one` once per seed,
// run_repetitions; once without --repeat): the summary (`outputs`: rpc_repeated_outputs or
// data_repeated_outputs, which are rpc_outputs' and data_outputs' files for one), every
// run's kept latency (the stats' member `kept`: the round trips, or the operations) merged
// into `latency`, and the consistency status of the `what` counted over the repetitions.
template <class Result, class Stats, class RunOne>
int record_repetitions(const Options& o, const RunOne& run_one,
                       json (*outputs)(const Options&, const std::vector<Result>&),
                       metrics::LatencyHistogram Stats::*kept, const char* what, json& summary,
                       metrics::LatencyHistogram& latency) {
  const std::vector<Result> reps = run_repetitions<Result>(o, nullptr, run_one);
  summary = outputs(o, reps);
  uint64_t issued = 0, completed = 0, errors = 0;
  for (const Result& res : reps) {
    issued += res.issued, completed += res.completed, errors += res.errors;
    for (const Stats& st : res.stats) latency.merge(st.*kept);
  }
  return consistency_status(issued, completed, errors, what);
}

// Runs one point in this process and records its row. Returns the row. Throws
// RunInterrupted when a signal stopped it.
std::string run_point(const Sweep& s, const SweepRun& r) {
  const std::string dir = run_dir(s, r.index);
  fs::create_directories(dir);
  Options o = options_of(s, r);
  json patched;
  const sim::Model model = model_of(o, r.model_patch, &patched);
  const json config = effective_config(o, patched);
  if (!r.model_patch.empty()) {  // the run's model, kept with its outputs and named in its summary
    o.model = dir + "/model.json";
    std::ofstream m(o.model);
    m << patched.dump(2) << "\n";
    if (!m) throw std::runtime_error("cannot write " + o.model);
  }
  json summary;
  metrics::LatencyHistogram latency;
  int status = 0;
  switch (o.mode) {
    case Mode::kKv: {
      const std::vector<ExperimentResult> reps = run_repeated_experiment(o, model, nullptr);
      summary = write_repeated_outputs(o, reps);
      uint64_t issued = 0, completed = 0, errors = 0, failed = 0;
      for (const ExperimentResult& res : reps) {
        issued += res.total_issued, completed += res.total_completed, errors += res.errors, failed += res.failed;
        for (const RunResults& run : res.runs) latency.merge(run.latency().all());
      }
      status = consistency_status(issued, completed, errors, "requests", failed);
      break;
    }
    case Mode::kRpc:
      status = record_repetitions<RpcResult, RpcRunStats>(
          o, [&model](const Options& one, const auto&) { return run_rpc_sim(one, model, nullptr); },
          rpc_repeated_outputs, &RpcRunStats::rtt, "calls", summary, latency);
      break;
    case Mode::kData:
      status = record_repetitions<DataResult, DataRunStats>(
          o, [&model](const Options& one, const auto&) { return run_data_sim(one, model, nullptr); },
          data_repeated_outputs, &DataRunStats::latency, "data operations", summary, latency);
      break;
    case Mode::kSweep:
    case Mode::kCompare: throw std::logic_error("sweep: a run of mode " + std::string(to_string(o.mode)));
  }
  if (summary.contains("interrupted")) {  // a signal stopped it: its outputs are marked, no row
    const json& i = summary["interrupted"];
    throw RunInterrupted(describe(s, r) + ": interrupted by " + i["signal"].get<std::string>() + " after epoch " +
                             std::to_string(i["epochs_done"].get<uint32_t>()) + " of run " +
                             std::to_string(i["run"].get<uint32_t>()) + "; " + dir +
                             " holds its epochs until then, marked \"interrupted\"",
                         stop_signal());
  }
  if (status != 0) throw std::runtime_error(describe(s, r) + ": the run is inconsistent (see its summary)");
  const std::string row = row_of(r, summary, latency);
  const std::string tmp = dir + "/row.json.tmp";
  {
    std::ofstream out(tmp);
    out << json{{"params", params_of(s, r)}, {"row", row}, {"config_hash", config_hash(config)}, {"config", config}}
               .dump(2)
        << "\n";
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, dir + "/row.json");
  return row;
}

void progress(const Sweep& s, const SweepRun& r, size_t done, size_t total, double seconds, const std::string& rank) {
  std::fprintf(stderr, "sweep: [%zu/%zu]%s %s done in %.1f s\n", done, total, rank.c_str(), describe(s, r).c_str(),
               seconds);
}

// What the runs of this process came to.
struct RunsOutcome {
  size_t failures = 0;     // runs that failed or were interrupted (no row)
  size_t interrupted = 0;  // of those, runs a signal stopped
  int signal = 0;          // the signal that stopped the sweep (SIGINT, SIGTERM), 0 if none did
};

// A child process ended with a run interrupted by `sig`: its exit status 128 + sig (the
// run wrote its partial outputs) or, if the signal's default action ended it, that signal.
bool ended_by_stop_signal(int status) {
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) - 128 : WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return code == SIGINT || code == SIGTERM;
}

// Local runs, up to `jobs` child processes at a time. SIGINT/SIGTERM (stop_signal) stop
// the sweep: no run starts after it, the signal is passed on to the runs going (each in
// its own process group, so a terminal's ^C reaches them once, through the sweep), which
// stop at their next epoch's end and write what they measured, marked "interrupted".
RunsOutcome run_local(const Sweep& s, const std::vector<const SweepRun*>& to_run, uint32_t jobs, size_t total,
                      size_t already) {
  std::map<pid_t, std::pair<const SweepRun*, std::chrono::steady_clock::time_point>> live;
  RunsOutcome out;
  size_t done = already;
  // Passes a signal that came on to the runs going, once.
  auto pass_on_signal = [&] {
    if (out.signal != 0 || stop_signal() == 0) return;
    out.signal = stop_signal();
    for (const auto& [pid, run] : live) ::kill(pid, out.signal);
  };
  auto wait_one = [&]() {
    int status = 0;
    pid_t pid = 0;
    for (;;) {  // polled, so that a signal is passed on at once
      pid = ::waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid != 0) break;
      pass_on_signal();
      ::usleep(20'000);
    }
    if (pid < 0) throw std::runtime_error("sweep: waitpid failed");
    pass_on_signal();
    auto it = live.find(pid);
    if (it == live.end()) return;
    const SweepRun& r = *it->second.first;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.second).count();
    live.erase(it);
    ++done;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      progress(s, r, done, total, secs, "");
    } else if (out.signal != 0 && ended_by_stop_signal(status)) {
      ++out.failures;
      ++out.interrupted;
      std::fprintf(stderr, "sweep: %s interrupted; its outputs so far (marked \"interrupted\") and messages: %s\n",
                   describe(s, r).c_str(), run_dir(s, r.index).c_str());
    } else {
      ++out.failures;
      std::fprintf(stderr, "sweep: %s failed (%s %d); its messages: %s/log.txt\n", describe(s, r).c_str(),
                   WIFEXITED(status) ? "exit status" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), run_dir(s, r.index).c_str());
    }
  };
  for (const SweepRun* r : to_run) {
    while (live.size() >= jobs) wait_one();
    pass_on_signal();
    if (out.signal != 0) break;  // no run starts after a signal
    const std::string dir = run_dir(s, r->index);
    fs::create_directories(dir);
    std::fflush(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("sweep: fork failed");
    if (pid == 0) {
      // A run ends with the sweep that started it: killed alone, the parent would leave
      // its runs going and writing into the output directory. (The check after the
      // prctl catches a parent that died before it.) SIGKILL, which cannot be ignored or
      // blocked: the child inherits both from the sweep (a launcher that ignores
      // SIGTERM). A SIGINT or SIGTERM the sweep gets, it passes on (above); the run's own
      // process group keeps a terminal's ^C from reaching it a second time (the second
      // signal would end it at once, before it wrote its outputs).
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(1);
      ::setpgid(0, 0);
      const int fd = ::open((dir + "/log.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) ::dup2(fd, 2);
      int rc = 0;
      try {
        run_point(s, *r);
      } catch (const RunInterrupted& e) {
        std::fprintf(stderr, "benchkv sweep: %s\n", e.what());
        rc = 128 + e.signal;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "benchkv sweep: %s: %s\n", describe(s, *r).c_str(), e.what());
        rc = 1;
      }
      std::fflush(nullptr);
      ::_exit(rc);
    }
    live.emplace(pid, std::make_pair(r, std::chrono::steady_clock::now()));
  }
  while (!live.empty()) wait_one();
  return out;
}

void write_results(const Sweep& s, const std::vector<std::string>& rows) {
  const std::string path = (fs::path(s.output_dir) / "results.csv").string();
  std::ofstream out(path + ".tmp");
  out << csv_header(s) << "\n";
  for (const auto& r : rows)
    if (!r.empty()) out << r << "\n";
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
  fs::rename(path + ".tmp", path);
}

// One more text into a running FNV-1a hash of several; the xor separates consecutive
// texts ("ab", "c" and "a", "bc" hash differently).
uint64_t fnv(uint64_t h, const std::string& text) { return fnv1a(text, h) ^ 0xff; }

}  // namespace

uint64_t sweep_fingerprint(const Sweep& s) {
  uint64_t h = kFnv1aOffsetBasis;
  for (const auto& a : s.axes) h = fnv(h, a);
  for (const auto& r : s.runs) {
    for (const auto& l : r.labels) h = fnv(h, l);
    h = fnv(h, effective_config(s, r).dump());
  }
  return h;
}

namespace {

// Under mpirun every rank loaded the sweep and found the runs finished earlier on its
// own; before any run starts they agree on it, in one collective (which also keeps a
// rank from starting runs while another still looks for finished ones: its list would
// then miss the runs just finished, and the ranks would split different lists). A rank
// that could not load the sweep, read another sweep than rank 0 or found other runs
// finished ends every rank (status 2), the lowest rank that loaded it naming why.
// `fingerprint` is sweep_fingerprint(s), computed by the caller while loading (it reads
// the model files again: a failure there is a failed load, so that every rank still
// reaches this collective). Returns 0 when every rank agrees.
int agree_on_sweep(SweepRanks& ranks, const std::string& file, const Sweep& s, uint64_t fingerprint,
                   const std::vector<const SweepRun*>& to_run, bool failed) {
  // The ranks also agree on the output directory (absolute): each writes its runs there.
  const uint64_t sweep_hash = failed ? 0 : fnv(fingerprint, s.output_dir);
  uint64_t to_run_hash = kFnv1aOffsetBasis;
  for (const SweepRun* r : to_run) to_run_hash = fnv(to_run_hash, std::to_string(r->index));
  constexpr size_t kWords = 5;  // failed, runs, sweep hash, runs to run, their hash
  const std::vector<uint64_t> all =
      ranks.all_gather({failed ? 1u : 0u, s.runs.size(), sweep_hash, to_run.size(), to_run_hash});
  const size_t n = static_cast<size_t>(ranks.size());
  auto word = [&](size_t rank, size_t k) { return all.at(rank * kWords + k); };
  size_t reporter = n;  // the lowest rank that loaded the sweep
  for (size_t j = 0; j < n && reporter == n; ++j)
    if (word(j, 0) == 0) reporter = j;
  const bool reports = reporter == static_cast<size_t>(ranks.rank());
  int status = 0;
  for (size_t j = 0; j < n; ++j) {
    std::string why;
    if (word(j, 0) != 0) {
      why = "rank " + std::to_string(j) + " could not start the sweep (its message above)";
    } else if (word(0, 0) == 0 && (word(j, 1) != word(0, 1) || word(j, 2) != word(0, 2))) {
      why = "rank " + std::to_string(j) + " read another sweep than rank 0 (" + file + " on rank 0: " +
            std::to_string(word(0, 1)) + " runs; rank " + std::to_string(j) + ": " + std::to_string(word(j, 1)) +
            " runs, with other settings, or another content of a config or model file they name)";
    } else if (word(0, 0) == 0 && (word(j, 3) != word(0, 3) || word(j, 4) != word(0, 4))) {
      why = "rank " + std::to_string(j) + " found other runs finished in " + s.output_dir + " than rank 0 (" +
            std::to_string(word(0, 1) - word(0, 3)) + " on rank 0, " + std::to_string(word(j, 1) - word(j, 3)) +
            " on rank " + std::to_string(j) + "): was another sweep writing there?";
    }
    if (why.empty()) continue;
    status = 2;
    if (reports) std::fprintf(stderr, "benchkv sweep: %s; no run started\n", why.c_str());
  }
  return status;
}

void print_usage(std::FILE* f) {
  std::fprintf(f,
               "Usage: benchkv sweep SWEEP.json [-j N] [--check]\n"
               "       mpirun -np N benchkv sweep SWEEP.json\n"
               "Runs the grid of simulated runs a sweep file describes (KV backends, rpc, data; examples in\n"
               "configs/sweeps/) and writes one row per run to OUTPUT/results.csv\n"
               "(every axis, then %s).\n"
               "Sweep file (JSON; described with an example in docs/sweeps.md):\n"
               "  {\"description\": TEXT,                  optional\n"
               "   \"base\": CONFIG.json or {KEY: VALUE},   the runs' options (a path relative to the sweep file)\n"
               "   \"set\": {KEY: VALUE},                   options fixed for every run (optional)\n"
               "   \"grid\": {AXIS: [VALUE, ...] or {NAME: {KEY: VALUE, ...}, ...}, ...},\n"
               "                                          the runs are the product of the axes, the last varying\n"
               "                                          fastest; a list's AXIS is a KEY, an object names settings\n"
               "   \"output\": DIR,                         relative to the sweep file\n"
               "   \"plot\": [...]}                         for scripts/plot_sweep.py (optional)\n"
               "  KEY: an option's JSON key (benchkv --help, [JSON: key]) or \"model.\" + a path in the model.\n"
               "Runs already finished in OUTPUT/runs/ with the same configuration are not run again; a\n"
               "finished run made with another configuration is refused (exit 2). Progress: stderr.\n"
               "SIGINT/SIGTERM: no run starts after it; the runs going stop at their next epoch's end and keep\n"
               "what they measured (marked \"interrupted\", no row); results.csv gets the finished runs' rows;\n"
               "exit 130/143. Running the sweep again runs the rest.\n"
               "Under mpirun a rank whose peer is stopped or unreachable mid-sweep ends after BENCHKV_PEER_TIMEOUT\n"
               "seconds (default 60) with status 3, results.csv holding the finished runs' rows.\n"
               "  -j N, --jobs N  runs at a time on local cores, one child process each (default: the\n"
               "                  cores of this machine, fewer when the runs' estimated memory would\n"
               "                  not fit in what is available); the runs estimated to take longest\n"
               "                  start first (results.csv keeps the grid's order); under mpirun each\n"
               "                  rank is one run slot and -j above 1 is refused\n"
               "  --check         validates every run's options and model, prints the warnings and the\n"
               "                  sweep's fingerprint (equal on two machines: the same runs, options\n"
               "                  and model contents, wherever the files lie), runs nothing\n"
               "Plot: /usr/bin/python3 scripts/plot_sweep.py SWEEP.json (the sweep's \"plot\" entries)\n",
               [] {
                 std::string f;
                 for (const auto& x : kSweepFigures) f += (f.empty() ? "" : ", ") + x;
                 return f;
               }()
                   .c_str());
}

}  // namespace

Sweep load_sweep(const std::string& path) {
  Sweep s;
  s.file = path;
  if (!fs::is_regular_file(path)) fail(path, fs::exists(path) ? "not a regular file" : "no such file");
  ojson j;
  std::string twice;
  try {
    j = read_sweep_file(path, twice);
  } catch (const std::exception& e) {
    fail(path, e.what());
  }
  if (!twice.empty())
    fail(path, "the key \"" + twice + "\" appears twice in one object (JSON leaves which one counts open)");
  if (!j.is_object()) fail(path, "must be a JSON object");
  const fs::path dir = fs::absolute(path).parent_path();
  static const std::vector<std::string> kKeys = {"description", "base", "set", "grid", "output", "plot"};
  for (const auto& [k, v] : j.items())
    if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end())
      fail(path, "unknown key \"" + k + "\" (keys: description, base, set, grid, output, plot)");
  if (j.contains("description") && !j["description"].is_string()) fail(path, "\"description\" must be a string");

  // The base configuration: option keys, with a relative model path made absolute.
  json base = json::object();
  if (j.contains("base")) {
    const ojson& b = j["base"];
    if (b.is_string()) {
      const fs::path f = (dir / b.get<std::string>()).lexically_normal();
      ojson cfg;
      try {
        cfg = read_json_file(f.string(), "base config");
      } catch (const std::exception& e) {
        fail(path, std::string("\"base\": ") + e.what());
      }
      if (!cfg.is_object()) fail(path, "\"base\" " + f.string() + " is not a JSON object");
      for (const auto& [k, v] : cfg.items()) base[k] = json(resolve_setting(f.parent_path(), k, v));
    } else if (b.is_object()) {
      for (const auto& [k, v] : b.items()) base[k] = json(resolve_setting(dir, k, v));
    } else {
      fail(path, "\"base\" must be a config file path or an object of option keys");
    }
  }
  json patch = json::object();
  auto apply = [&](json& cfg, json& mp, const std::string& where, const std::string& k, const ojson& v) {
    check_setting_key(path, where, k);
    if (k.rfind(kModelPrefix, 0) == 0)
      mp[k.substr(std::string(kModelPrefix).size())] = json(v);
    else
      cfg[k] = json(resolve_setting(dir, k, v));
  };
  if (j.contains("set")) {
    if (!j["set"].is_object()) fail(path, "\"set\" must be an object of option keys");
    for (const auto& [k, v] : j["set"].items()) apply(base, patch, "\"set\"", k, v);
  }

  // Axes: a list of values of one key, or named values setting several keys.
  struct Axis {
    std::string name;
    std::vector<std::string> labels;
    std::vector<ojson> settings;  // objects: key -> value
  };
  std::vector<Axis> axes;
  if (!j.contains("grid") || !j["grid"].is_object() || j["grid"].empty())
    fail(path, "\"grid\" must be a non-empty object of axes");
  for (const auto& [name, v] : j["grid"].items()) {
    Axis a;
    a.name = name;
    const std::string where = "grid axis \"" + name + "\"";
    if (v.is_array()) {
      check_setting_key(path, where, name);
      for (const auto& x : v) {
        if (x.is_object() || x.is_array() || x.is_null()) fail(path, where + ": values must be numbers, strings or booleans");
        a.labels.push_back(label_of(x));
        a.settings.push_back(ojson{{name, x}});
      }
    } else if (v.is_object()) {
      for (const auto& [label, set] : v.items()) {
        if (!set.is_object()) fail(path, where + ": \"" + label + "\" must be an object of option keys");
        for (const auto& [k, x] : set.items()) check_setting_key(path, where + " \"" + label + "\"", k);
        a.labels.push_back(label);
        a.settings.push_back(set);
      }
    } else {
      fail(path, where + " must be a list of values or an object of named settings");
    }
    if (a.labels.empty()) fail(path, where + " has no values");
    for (size_t i = 0; i < a.labels.size(); ++i)
      for (size_t k = 0; k < i; ++k)
        if (a.labels[i] == a.labels[k]) fail(path, where + ": value \"" + a.labels[i] + "\" appears twice");
    if (name == "run") fail(path, "grid axis \"run\": the name is the CSV's run column");
    for (const auto& f : kSweepFigures)
      if (name == f) fail(path, "grid axis \"" + name + "\": the name is a summary figure's column");
    s.axes.push_back(name);
    axes.push_back(std::move(a));
  }

  // The product, last axis fastest.
  uint64_t n = 1;
  for (const auto& a : axes) {
    n *= a.labels.size();
    if (n > 1'000'000) fail(path, "the grid has more than 1000000 runs");
  }
  for (uint64_t i = 0; i < n; ++i) {
    SweepRun r;
    r.index = static_cast<uint32_t>(i);
    r.config = base;
    r.model_patch = patch;
    uint64_t rest = i;
    std::vector<size_t> pick(axes.size());
    for (size_t a = axes.size(); a-- > 0;) {
      pick[a] = rest % axes[a].labels.size();
      rest /= axes[a].labels.size();
    }
    for (size_t a = 0; a < axes.size(); ++a) {
      r.labels.push_back(axes[a].labels[pick[a]]);
      for (const auto& [k, v] : axes[a].settings[pick[a]].items())
        apply(r.config, r.model_patch, "grid axis \"" + axes[a].name + "\"", k, v);
    }
    s.runs.push_back(std::move(r));
  }

  // Output directory.
  if (!j.contains("output") || !j["output"].is_string() || j["output"].get<std::string>().empty())
    fail(path, "\"output\" must name the output directory (relative to the sweep file)");
  s.output_dir = (dir / j["output"].get<std::string>()).lexically_normal().string();
  while (s.output_dir.size() > 1 && s.output_dir.back() == '/') s.output_dir.pop_back();

  // Every run's options and model, checked now. Options dropped from some runs: one
  // warning each, with the number of runs.
  std::vector<std::pair<std::string, size_t>> dropped_counts;
  for (const auto& r : s.runs) {
    try {
      std::vector<std::string> dropped;
      const Options o = options_of(s, r, dropped);
      for (const auto& d : dropped) {
        auto it = std::find_if(dropped_counts.begin(), dropped_counts.end(), [&](const auto& p) { return p.first == d; });
        if (it == dropped_counts.end()) dropped_counts.emplace_back(d, 1);
        else ++it->second;
      }
      validate(o, true);
      if (o.transport != TransportKind::kSim) throw std::runtime_error("sweeps run the simulator: transport must be sim");
      // One row per run: a run of rpc or data has one size (make the size an axis).
      if (o.mode == Mode::kRpc && rpc_message_sizes(o).size() > 1)
        throw std::runtime_error("message_size names several sizes; a sweep's run has one (make message_size a grid axis)");
      if (o.mode == Mode::kData && data_value_sizes(o).size() > 1)
        throw std::runtime_error("value_size names several sizes; a sweep's run has one (make value_size a grid axis)");
      model_of(o, r.model_patch, nullptr);
    } catch (const std::exception& e) {
      fail(path, describe(s, r) + ": " + e.what());
    }
  }

  for (const auto& [line, n] : dropped_counts)
    s.warnings.push_back(line + "; ignored in " + std::to_string(n) + " of " + std::to_string(s.runs.size()) + " runs");

  // Plot entries (drawn by scripts/plot_sweep.py): known keys, columns that exist.
  if (j.contains("plot")) {
    const ojson& p = j["plot"];
    if (!p.is_array()) fail(path, "\"plot\" must be a list of plot objects");
    auto is_column = [&](const std::string& c) {
      return std::find(s.axes.begin(), s.axes.end(), c) != s.axes.end() ||
             std::find(kSweepFigures.begin(), kSweepFigures.end(), c) != kSweepFigures.end();
    };
    for (size_t i = 0; i < p.size(); ++i) {
      const std::string where = "plot " + std::to_string(i);
      if (!p[i].is_object()) fail(path, where + " must be an object");
      for (const auto& [k, v] : p[i].items())
        if (std::find(kPlotKeys.begin(), kPlotKeys.end(), k) == kPlotKeys.end())
          fail(path, where + ": unknown key \"" + k + "\" (keys: kind, x, y, z, by, logx, logy, above, title, file)");
      const std::string kind = p[i].value("kind", "");
      if (kind != "lines" && kind != "heatmap" && kind != "share" && kind != "table")
        fail(path, where + ": \"kind\" must be \"lines\", \"heatmap\", \"share\" or \"table\"");
      // "share": the share of runs whose y is above a threshold (which of two states a run
      // reached), so it takes one y column and the threshold, and only it has a threshold.
      if (kind == "share") {
        if (!p[i].contains("above") || !p[i]["above"].is_number())
          fail(path, where + ": \"share\" needs \"above\", the number y is compared with");
        if (p[i].contains("y") && !p[i]["y"].is_string())
          fail(path, where + ": \"share\" takes one column as \"y\"");
      } else if (p[i].contains("above")) {
        fail(path, where + ": \"above\" belongs to \"share\" only");
      }
      if (p[i].contains("logx") && (!p[i]["logx"].is_boolean() || (kind != "lines" && kind != "share")))
        fail(path, where + ": \"logx\" is true or false, for \"lines\" and \"share\"");
      for (const char* k : {"x", "y", "z", "by"}) {
        if (!p[i].contains(k)) continue;
        std::vector<std::string> cols;
        if (p[i][k].is_string()) cols.push_back(p[i][k]);
        else if (p[i][k].is_array())
          for (const auto& c : p[i][k]) cols.push_back(c.is_string() ? c.get<std::string>() : c.dump());
        else fail(path, where + ": \"" + k + "\" must be a column name or a list of them");
        for (const auto& c : cols)
          if (!is_column(c)) fail(path, where + ": \"" + k + "\" names \"" + c + "\", which is not a column");
      }
      const bool need_z = kind == "heatmap";
      if (!p[i].contains("x") || !p[i].contains("y") || (need_z && !p[i].contains("z")))
        fail(path, where + ": \"" + kind + "\" needs " + (need_z ? "\"x\", \"y\" and \"z\"" : "\"x\" and \"y\""));
    }
    s.plot = json(p);
  }
  return s;
}

namespace {

// What a run costs, estimated before it runs: its simulated threads x the virtual time it
// simulates (the simulator's work grows with both). Orders the runs, longest first.
double estimated_cost(const Options& o) {
  double threads = 0;
  switch (o.mode) {
    case Mode::kKv: threads = double(o.np) * (o.server_threads + o.client_threads); break;
    case Mode::kRpc: threads = double(o.np) * o.endpoints; break;  // one thread per node, its endpoints' traffic
    case Mode::kData: threads = double(o.np) * (1 + o.client_threads); break;
    case Mode::kSweep:
    case Mode::kCompare: break;
  }
  return threads * double(o.runs) * double(o.repeat) * o.duration;
}

// -j by default: one run per core, fewer when the largest run's estimated memory
// (simulator/kv_mode.hpp: estimate_memory) times the runs at a time would not fit in the
// memory available. Sets `why` to the reason, for the start line.
uint32_t default_jobs(const Sweep& s, const std::vector<const SweepRun*>& to_run, std::string& why) {
  const uint32_t cores = std::max(1u, std::thread::hardware_concurrency());
  uint64_t largest = 0;
  for (const SweepRun* r : to_run) largest = std::max(largest, estimate_memory(options_of(s, *r)).bytes);
  const uint64_t available = available_memory_bytes();
  if (available == 0 || largest == 0 || available / largest >= cores) {
    why = "one per core";
    return cores;
  }
  const uint32_t fit = static_cast<uint32_t>(std::max<uint64_t>(1, available / largest));
  why = "of " + std::to_string(cores) + " cores: the largest run needs about " +
        std::to_string(largest >> 20) + " MiB of the " + std::to_string(available >> 20) + " MiB available";
  return fit;
}

}  // namespace

int sweep_main(int argc, char** argv) {
  std::string file;
  uint32_t jobs = 0;  // 0: default_jobs
  bool check_only = false;
  SingleOptions given;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      print_usage(stdout);
      return 0;
    }
    if (a == "--check") {
      check_only = true;
      continue;
    }
    if (a == "-j" || a == "--jobs") {
      if (!given.first("--jobs")) {
        std::fprintf(stderr, "benchkv %s (see benchkv sweep --help)\n", SingleOptions::twice("sweep", a).c_str());
        return 2;
      }
      if (i + 1 >= argc) {
        std::fprintf(stderr, "benchkv sweep: %s needs a number of runs at a time\n", a.c_str());
        return 2;
      }
      const std::string v = argv[++i];
      char* end = nullptr;
      const unsigned long n = std::strtoul(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n == 0 || n > 1024) {
        std::fprintf(stderr, "benchkv sweep: -j \"%s\" is not a number of runs in [1, 1024]\n", v.c_str());
        return 2;
      }
      jobs = static_cast<uint32_t>(n);
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "benchkv sweep: unknown option \"%s\" (see benchkv sweep --help)\n", a.c_str());
      return 2;
    } else if (file.empty()) {
      file = a;
    } else {
      std::fprintf(stderr, "benchkv sweep: one sweep file only (got \"%s\" and \"%s\")\n", file.c_str(), a.c_str());
      return 2;
    }
  }
  if (file.empty()) {
    print_usage(stderr);
    return 2;
  }

  if (check_only) {
    try {
      const Sweep s = load_sweep(file);
      for (const auto& w : s.warnings) std::fprintf(stderr, "benchkv sweep: warning: %s\n", w.c_str());
      std::printf("%s: %zu runs, every run's options and model valid; output %s; fingerprint %016llx\n", file.c_str(),
                  s.runs.size(), s.output_dir.c_str(), static_cast<unsigned long long>(sweep_fingerprint(s)));
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "benchkv %s\n", e.what());  // "benchkv sweep: FILE: ...", as when running
      return 2;
    }
  }

  std::unique_ptr<SweepRanks> ranks;
  try {
    ranks = make_sweep_ranks(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  // SIGINT/SIGTERM stop the sweep: the runs going write what they measured, marked
  // "interrupted", and results.csv gets the rows of the runs finished (run_local).
  install_stop_signals();
  if (ranks->size() > 1 && jobs > 1) {  // given explicitly
    std::fprintf(stderr, "benchkv sweep: -j with mpirun: each MPI rank is one run slot, drop -j\n");
    return 2;
  }
  // Loading: the sweep, its output directory and the runs finished earlier. Under mpirun
  // the ranks then agree (agree_on_sweep) before any run starts.
  Sweep s;
  std::vector<std::string> rows;
  std::vector<const SweepRun*> to_run;
  uint64_t fingerprint = 0;
  int load_status = 0;
  try {
    s = load_sweep(file);
    if (ranks->rank() == 0)
      for (const auto& w : s.warnings) std::fprintf(stderr, "benchkv sweep: warning: %s\n", w.c_str());
    fs::create_directories(fs::path(s.output_dir) / "runs");
    rows.resize(s.runs.size());
    for (const auto& r : s.runs) {
      rows[r.index] = finished_row(s, r);
      if (rows[r.index].empty()) to_run.push_back(&r);
    }
    // The longest runs first, so that they are not the sweep's tail (ties: grid order).
    std::vector<double> cost(s.runs.size(), 0.0);
    for (const SweepRun* r : to_run) cost[r->index] = estimated_cost(options_of(s, *r));
    std::stable_sort(to_run.begin(), to_run.end(),
                     [&](const SweepRun* a, const SweepRun* b) { return cost[a->index] > cost[b->index]; });
    if (ranks->size() > 1) fingerprint = sweep_fingerprint(s);
  } catch (const SweepInputError& e) {
    std::fprintf(stderr, "benchkv %s\n", e.what());
    load_status = 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchkv %s\n", e.what());
    load_status = 1;
  }
  if (ranks->size() > 1) {
    const int agreed = agree_on_sweep(*ranks, file, s, fingerprint, to_run, load_status != 0);
    if (agreed != 0) return load_status != 0 ? load_status : agreed;
  }
  if (load_status != 0) return load_status;
  try {
    const size_t already = s.runs.size() - to_run.size();
    std::string slots = std::to_string(ranks->size()) + " MPI ranks";
    if (ranks->size() == 1) {
      std::string why = "-j";
      if (jobs == 0) jobs = default_jobs(s, to_run, why);
      slots = std::to_string(jobs) + " at a time, " + why + "; the longest first";
    }
    if (ranks->rank() == 0)
      std::fprintf(stderr, "sweep: %zu runs, %zu finished earlier, %zu to run (%s)\n", s.runs.size(), already,
                   to_run.size(), slots.c_str());
    size_t failures = 0;
    int stopped_by = 0;  // the signal that stopped the sweep on this rank
    if (ranks->size() == 1) {
      const RunsOutcome out = run_local(s, to_run, jobs, s.runs.size(), already);
      failures = out.failures;
      stopped_by = out.signal;
      for (const SweepRun* r : to_run) rows[r->index] = finished_row(s, *r);
      write_results(s, rows);
    } else {
      // Rank k runs to_run[k], to_run[k + size], ...; every rank computed the same list.
      // A peer lost mid-sweep ends every rank (SweepRanks::run_share); rank 0 first writes
      // results.csv with the rows of the runs finished, as far as it can read them.
      ranks->before_peer_lost_exit = [&] {
        if (ranks->rank() != 0) return;
        size_t finished = 0;
        for (const auto& r : s.runs) {
          try {
            rows[r.index] = finished_row(s, r);
          } catch (const std::exception&) {  // (damaged: left out, a rerun says so)
          }
          finished += rows[r.index].empty() ? 0 : 1;
        }
        write_results(s, rows);
        std::fprintf(stderr, "sweep: wrote %s/results.csv (%zu of %zu runs)\n", s.output_dir.c_str(), finished,
                     s.runs.size());
      };
      json mine = json::array();
      size_t done = 0, share = 0;
      for (size_t i = static_cast<size_t>(ranks->rank()); i < to_run.size(); i += static_cast<size_t>(ranks->size())) ++share;
      ranks->run_share([&] {
        for (size_t i = static_cast<size_t>(ranks->rank()); i < to_run.size(); i += static_cast<size_t>(ranks->size())) {
          if (stop_signal() != 0) break;  // this rank's other runs are not started
          const SweepRun& r = *to_run[i];
          const auto t0 = std::chrono::steady_clock::now();
          try {
            const std::string row = run_point(s, r);
            mine.push_back({r.index, row});
            progress(s, r, ++done, share, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                     " rank " + std::to_string(ranks->rank()) + ":");
          } catch (const RunInterrupted& e) {
            std::fprintf(stderr, "sweep: rank %d: %s\n", ranks->rank(), e.what());
            ++failures;
          } catch (const std::exception& e) {
            std::fprintf(stderr, "sweep: rank %d: %s failed: %s\n", ranks->rank(), describe(s, r).c_str(), e.what());
            ++failures;
          }
        }
      });
      stopped_by = stop_signal();
      const std::vector<std::string> all = ranks->gather_to_root(mine.dump());
      ranks->before_peer_lost_exit = nullptr;
      // Rank 0 writes results.csv while the others wait for it (however slow its storage).
      ranks->root_writes([&] {
        size_t gathered = 0;
        for (const auto& text : all)
          for (const auto& e : json::parse(text)) {
            rows.at(e.at(0).get<uint32_t>()) = e.at(1).get<std::string>();
            ++gathered;
          }
        failures = to_run.size() - gathered;
        write_results(s, rows);
      });
      if (ranks->rank() != 0) return stopped_by ? 128 + stopped_by : failures ? 1 : 0;
    }
    if (stopped_by == 0) stopped_by = stop_signal();
    if (stopped_by != 0) {
      const size_t finished = static_cast<size_t>(
          std::count_if(rows.begin(), rows.end(), [](const std::string& row) { return !row.empty(); }));
      std::fprintf(stderr, "sweep: interrupted by %s: wrote %s/results.csv (%zu of %zu runs); rerun the sweep to run "
                   "the rest\n", signal_name(stopped_by).c_str(), s.output_dir.c_str(), finished, s.runs.size());
      return 128 + stopped_by;
    }
    std::fprintf(stderr, "sweep: wrote %s/results.csv (%zu of %zu runs)%s\n", s.output_dir.c_str(),
                 s.runs.size() - failures, s.runs.size(), failures ? "; rerun to retry the failed runs" : "");
    return failures ? 1 : 0;
  } catch (const SweepInputError& e) {
    std::fprintf(stderr, "benchkv %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchkv %s\n", e.what());
    return 1;
  }
}

}  // namespace bkv::app
