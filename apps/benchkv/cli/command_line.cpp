// The command line (parse_command_line) and --help, per run mode: the options listed
// are those that apply to the mode --help describes (kv, rpc or data).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <vector>

#include "apps/benchkv/cli/applicability.hpp"
#include "apps/benchkv/cli/option_table.hpp"
#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/results/provenance.hpp"
#include "sim/faults.hpp"

namespace bkv::app {

using namespace option_detail;
namespace fs = std::filesystem;

namespace {

// Text of a command-line value -> the JSON value the option's setter takes.
json cli_value(const Spec& s, const std::string& text) {
  const auto bad = [&](std::string_view what) -> OptionError {
    return OptionError(std::string(s.key), fmt::format("{}: \"{}\" is not {}", label(s), text, what));
  };
  switch (s.kind) {
    case Kind::kUnsigned: {
      uint64_t v = 0;
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
        throw bad("an unsigned integer");
      }
      return json(v);
    }
    case Kind::kSigned: {
      int64_t v = 0;
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) throw bad("an integer");
      return json(v);
    }
    case Kind::kDouble: {
      double v = 0;
      if (!parse_double(text, v)) throw bad("a finite number");
      return json(v);
    }
    case Kind::kBool:  // flags are handled by CLI11; never reached
    case Kind::kString:
    case Kind::kChoice:
    case Kind::kWindow: return json(text);
  }
  return json(text);
}

std::string help_text(const Spec& s, const Options& defaults) {
  std::string def = s.get(defaults).dump();
  if (s.key == "summary") def = "the output path with its extension replaced by .summary.json";
  if (s.key == "backend") def = "none, required to run";
  std::string text = fmt::format("{} [default: {}] [JSON: {}]", s.help, def, s.key);
  if (s.kind == Kind::kBool) text += fmt::format(" (turn off with --no-{})", long_flag(s).substr(2));
  return text;
}

// The mode `--help` describes: the first command-line word that names rpc or data, else kv
// (the modes' words are never option values: no option takes "rpc" or "data").
Mode help_mode(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i)
    for (const Mode m : {Mode::kRpc, Mode::kData})
      if (std::string_view(argv[i]) == to_string(m)) return m;
  return Mode::kKv;
}

constexpr std::string_view kFooterCommon =
    "Configuration: --config FILE.json sets any option by its JSON key (shown as [JSON: key]); the command\n"
    "line overrides the file. `benchkv --config FILE.json` alone runs when the file names the backend (or\n"
    "the mode: \"backend\": \"rpc\"). Unknown keys, wrong JSON types and invalid values are errors naming the\n"
    "key (exit status 2, as every input error).\n"
    "Real runs (--transport ucx|mlx5|verbs) start one rank per node under mpirun, 2 ranks or more (one rank\n"
    "alone measures nothing remote: exit status 2); the environment variable\n"
    "BENCHKV_PEER_TIMEOUT=SECONDS (default 60) bounds how long a rank waits for a stopped or dead peer,\n"
    "MPI_Finalize included, before it exits with status 3 (a measurement cut short first writes its\n"
    "outputs marked incomplete; docs/interruptions.md), and BENCHKV_STARTUP_TIMEOUT=SECONDS (default 120)\n"
    "how long its start-up (MPI_Init to the first exchange) may take before it exits with status 4 naming\n"
    "what it waited in; a malformed value of either is an input error (status 2). UCX_TLS chooses UCX's\n"
    "transports; the ones UCX selected are recorded (provenance.ucx_transports).\n"
    "Progress goes to stderr; the final report (--report) to stdout. Human text counts runs from 1\n"
    "(run 1/3) and gives latency in microseconds; the CSV columns and the JSON \"run\" count from 0.\n"
    "SIGINT/SIGTERM stop the measurement at the next epoch's end: the CSV gets the finished epochs, the\n"
    "summary is marked \"interrupted\", and benchkv exits 130/143. Real runs write them too, the summary\n"
    "also marked \"incomplete\": rank 0 to the named files (rpc: rank 0 alone), the other ranks of a KV\n"
    "or data run their own (out.rank<r>.csv, out.rank<r>.summary.json).\n"
    "Outputs, their columns and units: docs/outputs.md.\n";

constexpr std::string_view kFooterKv =
    "Output: the CSV has the columns run,rank,client_id,epoch,requests,duration_ns for the kept (untrimmed)\n"
    "epochs; the summary JSON holds the effective configuration, per-run Mops, request latency (get/put x\n"
    "local/remote: mean, p50, p90, p95, p99, p99.9, max, and the raw histogram), daemon metrics, their\n"
    "aggregates over the runs (\"overall\") and where the numbers come from (\"provenance\").\n"
    "Text report: the configuration, per run Mops, requests, daemon CQEs per loop and calls in flight and\n"
    "the latency table, then [OVERALL] lines over the runs (and over the repetitions with --repeat).\n"
    "Independent repetitions: --repeat N runs the experiment N times with seeds seed .. seed + N - 1 and\n"
    "reports each figure's mean, standard deviation and 95 % confidence interval over them.\n"
    "Other modes: benchkv rpc --help (copyrpc alone, message sizes), benchkv data --help (bulk values),\n"
    "benchkv sweep --help (a grid of simulated runs), benchkv compare --help (two results side by side),\n"
    "benchkv probe --help (micro-benchmarks of this machine for the simulator's model), benchkv calibrate\n"
    "--help (a model file from them).\n";

constexpr std::string_view kFooterRpc =
    "benchkv rpc: copyrpc alone; rank 0 calls, every other rank answers (--np 1 in the simulator: NIC\n"
    "loopback). --message-size takes a list \"A,B\" and/or ranges \"A..B\" of powers of two: one row per\n"
    "size, the runs of each size back to back.\n"
    "Output: the CSV as the KV backends' (rank 0's calls; the server ranks' rows are zeros), led by a\n"
    "message_size column when several sizes run; the summary's \"rpc\" section has per run the calls, Mrps\n"
    "and the round trips' mean, p50, p90, p95, p99, p99.9, max (microseconds) and raw histogram.\n"
    "Text report: the configuration, a line per run (Mrps, calls), [OVERALL] lines (when one size ran),\n"
    "then a table per size and run: Mrps, MB/s (request payload, 10^6 bytes), round trip\n"
    "mean/p50/p90/p95/p99/p99.9/max in us.\n"
    "Independent repetitions (simulated, one message size): --repeat N runs the experiment N times with\n"
    "seeds seed .. seed + N - 1; the CSV is led by a seed column, the report gives a line per repetition\n"
    "and Mrps and the round trips' mean, standard deviation and 95 % confidence interval over them.\n";

constexpr std::string_view kFooterData =
    "benchkv data: bulk values by one-sided RDMA (docs/data.md); one experiment per value size.\n"
    "Output: the CSV with a leading value_size column (its run index counts over the sizes); the summary's\n"
    "\"data\" section has per size and run ops/s, GiB/s and the latency's mean, p50, p90, p95, p99, p99.9,\n"
    "max (microseconds) and raw histogram.\n"
    "Text report: a table, a line per size and run (runs counted from 1 within each size): ops/s, GiB/s\n"
    "and the latency mean/p50/p90/p95/p99/p99.9/max in us.\n"
    "Independent repetitions (simulated, one value size): --repeat N runs the experiment N times with\n"
    "seeds seed .. seed + N - 1; the CSV is led by a seed column instead of value_size, and the text\n"
    "report is then the configuration, a line per run and per repetition, and the mean, standard\n"
    "deviation and 95 % confidence interval over the repetitions of ops/s, GiB/s and the latency.\n";

// The message for command-line words CLI11 could not place: the first one that looks like
// an option is named alone, with the closest option as a hint ("--durtion 1 meta" would
// otherwise read "arguments were not expected: meta --durtion", blaming the backend).
std::string extras_message(const std::vector<std::string>& extras, const std::vector<std::string>& option_names,
                           std::string_view cli11_message) {
  for (const std::string& word : extras) {
    const bool negative_number = word.size() > 1 && word[0] == '-' && (std::isdigit(static_cast<unsigned char>(word[1])) != 0 || word[1] == '.');
    if (word.size() < 2 || word[0] != '-' || negative_number) continue;
    const std::string name = word.substr(0, word.find('='));
    std::string_view best;
    size_t best_d = 4;  // suggest only close matches
    for (const std::string& candidate : option_names) {
      const size_t d = edit_distance(name, candidate);
      if (d < best_d) {
        best_d = d;
        best = candidate;
      }
    }
    return fmt::format("unknown option \"{}\"{} (see benchkv --help)", name,
                       best.empty() ? std::string() : fmt::format(" (did you mean \"{}\"?)", best));
  }
  return fmt::format("{} (see benchkv --help)", cli11_message);
}

// The help's usage line of rpc and data, without the positional word: there it is the
// mode's own word, already given ("benchkv rpc [OPTIONS]").
class ModeFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string name) const override {
    return fmt::format("{}: {} [OPTIONS]\n", get_label("Usage"), name);
  }
};

ParseResult usage_error(std::string message) {
  ParseResult r;
  r.action = ParseResult::Action::kExit;
  r.exit_status = 2;
  r.error = std::move(message);
  return r;
}

}  // namespace

ParseResult parse_command_line(int argc, const char* const* argv, std::ostream& out) {
  const Options defaults;
  const Mode mode_of_help = help_mode(argc, argv);
  const char* description =
      mode_of_help == Mode::kRpc
          ? "benchkv rpc: copyrpc alone, one caller rank and N-1 server ranks, on RDMA hardware, UCX or the "
            "discrete-event simulator. The options of this mode:"
      : mode_of_help == Mode::kData
          ? "benchkv data: bulk values put and got by one-sided RDMA, on RDMA hardware, UCX or the discrete-event "
            "simulator. The options of this mode:"
          : "benchkv: a distributed key-value benchmark over copyrpc (backends meta, delegation, direct) and over "
            "UCX active messages (ucx-am), on RDMA hardware, UCX or the discrete-event simulator. The options of the "
            "KV backends:";
  CLI::App app{description, mode_of_help == Mode::kKv ? "benchkv" : fmt::format("benchkv {}", to_string(mode_of_help))};
  app.footer(std::string(mode_of_help == Mode::kRpc    ? kFooterRpc
                         : mode_of_help == Mode::kData ? kFooterData
                                                       : kFooterKv) +
             std::string(kFooterCommon));
  if (mode_of_help != Mode::kKv) app.formatter(std::make_shared<ModeFormatter>());
  app.get_formatter()->column_width(40);

  const std::span<const Spec> kSpecs = specs();
  const size_t kNumSpecs = kSpecs.size();
  std::vector<std::string> texts(kNumSpecs);
  auto flags = std::make_unique<bool[]>(kNumSpecs);
  std::vector<CLI::Option*> cli(kNumSpecs, nullptr);
  auto negated = std::make_unique<bool[]>(kNumSpecs);
  std::vector<CLI::Option*> negations(kNumSpecs, nullptr);
  for (size_t i = 0; i < kNumSpecs; ++i) {
    const Spec& s = kSpecs[i];
    const std::string desc = help_text(s, defaults);
    if (is_positional(s)) {
      cli[i] = app.add_option("backend", texts[i], desc)->type_name(choice_list(kBackendChoices));
    } else if (s.kind == Kind::kBool) {
      // --X and --no-X: two flags (one listed), so --help shows no parser notation.
      flags[i] = false;
      cli[i] = app.add_flag(long_flag(s), flags[i], desc);
      // Not ->excludes(): --help would print it as "Excludes: --no-X"; both given is
      // refused after parsing.
      negations[i] = app.add_flag(fmt::format("--no-{}", long_flag(s).substr(2)), negated[i])->group("");
    } else {
      std::string names = long_flag(s);
      if (s.short_flag != 0) names = fmt::format("-{},{}", s.short_flag, names);
      const std::string value_name = s.key == "transport" ? choice_list(kTransportChoices) : std::string(s.value_name);
      cli[i] = app.add_option(names, texts[i], desc)->type_name(value_name);
    }
    // Listed under its group when it applies to the mode --help describes; hidden (still
    // parsed, refused by validate() where it does not apply) otherwise. The positional
    // word is listed in the KV help only: in rpc and data it is the mode's own word.
    const bool listed = is_positional(s) ? mode_of_help == Mode::kKv : applies_to_mode(s.key, mode_of_help);
    cli[i]->group(listed ? std::string(s.group) : std::string());
  }
  std::string config_path;
  app.add_option("--config", config_path,
                 "read options from a JSON file (keys as shown by [JSON: key]); the command line overrides it "
                 "[command line only]")
      ->type_name("FILE.json")
      ->group("Configuration");
  bool print_version = false;
  app.add_flag("--version", print_version,
               "print the git commit, build type, compiler and UCX/MPI versions of this build and exit [command line "
               "only]")
      ->group("Configuration");
  std::vector<std::string> fault_texts;
  app.add_option("--fault", fault_texts,
                 "a fault injected into a simulated KV run, repeatable: slow_node:node=R,start_us=A,end_us=B,factor=F "
                 "| stall_daemon:node=R,daemon=D,start_us=A,end_us=B | link_delay:from=R,to=S,start_us=A,end_us=B,"
                 "extra_ns=X | packet_loss:from=R,to=S,start_us=A,end_us=B,loss=P,timeout=T,retry_cnt=N | "
                 "qp_error:node=R,peer=S,at_us=A | rnr_storm:node=R,start_us=A,end_us=B,rnr_retry=N (added to the model's "
                 "\"faults\"; docs/exactly_once.md) [command "
                 "line only]")
      ->type_name("KIND:K=V,...")
      ->expected(1)  // one fault per --fault (the positional backend is not a fault)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group(mode_of_help == Mode::kKv ? "Simulator" : "");
  bool print_config = false;
  app.add_flag("--print-config", print_config,
               "print the effective configuration as JSON (a valid config file; the summary and in-flight paths that follow "
               "--output by default are left to follow it) and exit [command line only]")
      ->group("Configuration");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return ParseResult{ParseResult::Action::kExit, Options{}, 0, {}};
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return ParseResult{ParseResult::Action::kExit, Options{}, 0, {}};
  } catch (const CLI::ExtrasError& e) {
    std::vector<std::string> option_names;
    for (const CLI::Option* opt : app.get_options()) {
      for (const std::string& n : opt->get_lnames()) option_names.push_back("--" + n);
      for (const std::string& n : opt->get_snames()) option_names.push_back("-" + n);
    }
    return usage_error(extras_message(app.remaining(), option_names, e.what()));
  } catch (const CLI::ParseError& e) {
    return usage_error(fmt::format("{} (see benchkv --help)", e.what()));
  }

  if (print_version) {
    out << version_text();
    return ParseResult{ParseResult::Action::kExit, Options{}, 0, {}};
  }

  Options o;
  bool summary_given = false;
  std::vector<std::string> warnings;
  try {
    if (!config_path.empty()) {
      apply_object(o, read_config_file(config_path),
                   Ctx{fmt::format("config file \"{}\"", config_path), parent_dir(config_path)}, summary_given);
    }
    const Ctx cmdline{"command line", ""};
    std::vector<std::string_view> given_on_command_line;
    for (size_t i = 0; i < kNumSpecs; ++i) {
      const bool negation = negations[i] != nullptr && negations[i]->count() > 0;
      if (negation && cli[i]->count() > 0)
        throw OptionError(std::string(kSpecs[i].key), fmt::format("--{0} and --no-{0}: give one of them, not both",
                                                     long_flag(kSpecs[i]).substr(2)));
      if (cli[i]->count() == 0 && !negation) continue;
      const Spec& s = kSpecs[i];
      const json v = (s.kind == Kind::kBool) ? json(!negation) : cli_value(s, texts[i]);
      s.set(o, v, s, cmdline);
      if (s.key == "summary") summary_given = true;
      given_on_command_line.push_back(s.key);
    }
    finish(o, summary_given);
    // A model file must exist whatever the mode (also where it would be ignored).
    if (!o.model.empty()) {
      std::error_code ec;
      if (!fs::is_regular_file(o.model, ec))
        fail(o, "model", fs::exists(o.model, ec) ? "is not a regular file" : "does not exist");
    }
    // A config file may set options of another mode: warn and drop them. The same on the
    // command line is an error (validate below). Dropping one option can make another
    // inapplicable (trace -> trace_window), hence the loop.
    drop_inapplicable(
        o,
        [&](std::string_view key) {
          return std::find(given_on_command_line.begin(), given_on_command_line.end(), key) ==
                 given_on_command_line.end();
        },
        [&](std::string line) {
          warnings.push_back(fmt::format("{}; the value from config file \"{}\" is ignored", line, config_path));
        });
    validate(o, /*require_backend=*/!print_config);
    o.faults = fault_texts;
    if (!o.faults.empty() && !(sim_kv(o) && o.backend))
      throw OptionError("fault", "--fault: faults are injected into simulated KV runs only (--transport sim with "
                                 "backend meta, delegation or direct)");
    // Bad faults are bad input like any other option: refused here (exit status 2).
    std::vector<sim::Fault> faults;
    try {
      for (const std::string& text : o.faults) faults.push_back(sim::Fault::parse(text));
      sim::check_shape(faults, o.np, o.server_threads);
    } catch (const std::runtime_error& e) {
      throw OptionError("fault", e.what());
    }
    try {  // a retransmission timeout no lost packet can meet within the run's timeline
      sim::check_resend_reach(faults, static_cast<sim::Time>(std::llround(o.startup_ms * 1e6)), o.runs, duration_ns(o));
    } catch (const std::runtime_error& e) {
      throw OptionError("fault", std::string("--fault: ") + e.what());
    }
  } catch (const OptionError& e) {
    return usage_error(e.what());
  }

  if (print_config) {
    out << to_reusable_json(o).dump(2) << '\n';
    return ParseResult{ParseResult::Action::kExit, o, 0, {}, std::move(warnings)};
  }
  return ParseResult{ParseResult::Action::kRun, o, 0, {}, std::move(warnings)};
}

ParseResult parse_command_line(int argc, char** argv) { return parse_command_line(argc, argv, std::cout); }

}  // namespace bkv::app
