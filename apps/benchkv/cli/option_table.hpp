// The option table behind options.hpp, shared by the files that read, check and print
// benchkv's options (internal to them: the interface is options.hpp):
//   option_table.cpp   every option: its key, flag, type, --help text, how it is read and
//                      written; the enum spellings; to_json
//   applicability.cpp  which options apply to which transport and run mode
//   validate.cpp       each value's range and the relations between values, per mode; the
//                      quantities derived from them
//   config_file.cpp    options from JSON objects and config files
//   command_line.cpp   the command line and --help, per run mode
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "apps/benchkv/cli/options.hpp"

namespace bkv::app::option_detail {

using json = nlohmann::json;

// The value of inflight_samples that derives the path from output (finish()).
inline constexpr std::string_view kAutoPath = "auto";

// ---------------------------------------------------------------------------------------
// Enum spellings (the CLI and JSON strings).
// ---------------------------------------------------------------------------------------

template <class E>
struct Choice {
  std::string_view name;
  E value;
};

// The positional word (JSON "backend") names what to run: a KV backend (run mode kv,
// over that backend: backends/backend_kind.hpp) or another run mode the options describe
// (rpc, data: run_mode.hpp). Two tables, because a mode is not a backend.
inline constexpr auto kBackendChoices = [] {
  std::array<Choice<BackendKind>, backend::kBackendNames.size()> t{};
  for (size_t i = 0; i < t.size(); ++i) t[i] = {backend::kBackendNames[i].name, backend::kBackendNames[i].kind};
  return t;
}();
inline constexpr std::array<Choice<Mode>, 2> kOptionModeChoices{
    {{to_string(Mode::kRpc), Mode::kRpc}, {to_string(Mode::kData), Mode::kData}}};
static_assert(described_by_options(Mode::kRpc) && described_by_options(Mode::kData));
// data's backend (data_backend), in the order --help names them.
inline constexpr std::array<Choice<BackendKind>, 4> kDataBackendChoices{{{"delegation", BackendKind::kDelegation},
                                                                  {"meta", BackendKind::kMeta},
                                                                  {"direct", BackendKind::kDirect},
                                                                  {"ucx-am", BackendKind::kUcxAm}}};
inline constexpr auto kTransportChoices = [] {
  std::array<Choice<TransportKind>, kTransportNames.size()> t{};
  for (size_t i = 0; i < t.size(); ++i) t[i] = {kTransportNames[i].name, kTransportNames[i].kind};
  return t;
}();
inline constexpr std::array<Choice<Distribution>, 2> kDistributionChoices{
    {{"uniform", Distribution::kUniform}, {"zipfian", Distribution::kZipfian}}};
inline constexpr std::array<Choice<backend::LoopOrder>, 2> kLoopOrderChoices{
    {{"original", backend::LoopOrder::kOriginal}, {"next-poll", backend::LoopOrder::kNextPoll}}};
inline constexpr std::array<Choice<StartMode>, 2> kStartModeChoices{
    {{"sync", StartMode::kSync}, {"staggered", StartMode::kStaggered}}};
inline constexpr std::array<Choice<RingPages>, 3> kRingPagesChoices{
    {{"auto", RingPages::kAuto}, {"release", RingPages::kRelease}, {"keep", RingPages::kKeep}}};
inline constexpr std::array<Choice<EventSet>, 2> kEventSetChoices{
    {{"heap", EventSet::kHeap}, {"calendar", EventSet::kCalendar}}};
inline constexpr std::array<Choice<ReportFormat>, 3> kReportChoices{
    {{"text", ReportFormat::kText}, {"csv", ReportFormat::kCsv}, {"none", ReportFormat::kNone}}};

template <class E, size_t N>
std::string_view name_of(const std::array<Choice<E>, N>& table, E v) noexcept {
  for (const auto& c : table) {
    if (c.value == v) return c.name;
  }
  return "";
}

template <class E, size_t N>
std::string choice_list(const std::array<Choice<E>, N>& table) {
  std::string s;
  for (const auto& c : table) {
    if (!s.empty()) s += '|';
    s += c.name;
  }
  return s;
}

// ---------------------------------------------------------------------------------------
// The option table: one entry per option, in --help order.
// ---------------------------------------------------------------------------------------

enum class Kind : uint8_t { kUnsigned, kSigned, kDouble, kString, kBool, kChoice, kWindow };

struct Ctx {
  std::string source;    // "config file X" or "command line"
  std::string base_dir;  // for relative model paths ("" = working directory)
};

struct Spec;
using Setter = void (*)(Options&, const json&, const Spec&, const Ctx&);
using Getter = json (*)(const Options&);

struct Spec {
  std::string_view key;         // JSON key; the long option is "--" + key with '_' -> '-'
  char short_flag;              // 0 = none
  Kind kind;
  std::string_view group;       // --help section
  std::string_view value_name;  // the name --help gives the value (US, FILE, ...)
  std::string_view help;
  Setter set;
  Getter get;
};

// Every option, in --help order (the positional word first).
std::span<const Spec> specs();
const Spec& spec_of(std::string_view key);  // throws std::logic_error for an unknown key

std::string long_flag(const Spec& s);  // "--queue-depth"
bool is_positional(const Spec& s);     // the positional word (JSON "backend")
// "queue_depth (--queue-depth)": how messages name an option.
std::string label(const Spec& s);
// Throws OptionError "<label>: <value> <rule>".
[[noreturn]] void fail(const Options& o, std::string_view key, std::string_view rule);
// The positional word of the options (JSON "backend"): see option_table.cpp.
json get_backend(const Options& o);
// A finite number, with at most one leading '+'.
bool parse_double(std::string_view text, double& out);
// Levenshtein distance, for "did you mean" hints.
size_t edit_distance(std::string_view a, std::string_view b);

// config_file.cpp
// Applies the keys present in a JSON object; no range checks (validate() runs on the
// merged result, so a config value overridden on the command line may be out of range).
void apply_object(Options& o, const json& j, const Ctx& c, bool& summary_given);
// The paths that follow output: summary (unless given), inflight_samples "auto".
void finish(Options& o, bool summary_given);
// Reads and parses a config file (errors name the file: missing, unreadable, malformed).
json read_config_file(const std::string& path);
std::string parent_dir(const std::string& path);

}  // namespace bkv::app::option_detail
