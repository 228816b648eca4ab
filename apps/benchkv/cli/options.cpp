#include "apps/benchkv/cli/options.hpp"

#include "apps/benchkv/results/provenance.hpp"
#include "core/strict_json.hpp"
#include "sim/faults.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <vector>

namespace bkv::app {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The value of inflight_samples that derives the path from output (finish()).
constexpr std::string_view kAutoPath = "auto";

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
constexpr auto kBackendChoices = [] {
  std::array<Choice<BackendKind>, backend::kBackendNames.size()> t{};
  for (size_t i = 0; i < t.size(); ++i) t[i] = {backend::kBackendNames[i].name, backend::kBackendNames[i].kind};
  return t;
}();
constexpr std::array<Choice<Mode>, 2> kOptionModeChoices{
    {{to_string(Mode::kRpc), Mode::kRpc}, {to_string(Mode::kData), Mode::kData}}};
static_assert(described_by_options(Mode::kRpc) && described_by_options(Mode::kData));
// data's backend (data_backend), in the order --help names them.
constexpr std::array<Choice<BackendKind>, 4> kDataBackendChoices{{{"delegation", BackendKind::kDelegation},
                                                                  {"meta", BackendKind::kMeta},
                                                                  {"direct", BackendKind::kDirect},
                                                                  {"ucx-am", BackendKind::kUcxAm}}};
constexpr auto kTransportChoices = [] {
  std::array<Choice<TransportKind>, kTransportNames.size()> t{};
  for (size_t i = 0; i < t.size(); ++i) t[i] = {kTransportNames[i].name, kTransportNames[i].kind};
  return t;
}();
constexpr std::array<Choice<Distribution>, 2> kDistributionChoices{
    {{"uniform", Distribution::kUniform}, {"zipfian", Distribution::kZipfian}}};
constexpr std::array<Choice<backend::LoopOrder>, 2> kLoopOrderChoices{
    {{"original", backend::LoopOrder::kOriginal}, {"next-poll", backend::LoopOrder::kNextPoll}}};
constexpr std::array<Choice<StartMode>, 2> kStartModeChoices{
    {{"sync", StartMode::kSync}, {"staggered", StartMode::kStaggered}}};
constexpr std::array<Choice<RingPages>, 3> kRingPagesChoices{
    {{"auto", RingPages::kAuto}, {"release", RingPages::kRelease}, {"keep", RingPages::kKeep}}};
constexpr std::array<Choice<EventSet>, 2> kEventSetChoices{
    {{"heap", EventSet::kHeap}, {"calendar", EventSet::kCalendar}}};
constexpr std::array<Choice<ReportFormat>, 3> kReportChoices{
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
  std::string_view value_name;  // --help value placeholder
  std::string_view help;
  Setter set;
  Getter get;
};

std::string long_flag(const Spec& s) {
  std::string f = "--";
  for (char c : s.key) f += (c == '_') ? '-' : c;
  return f;
}

bool is_positional(const Spec& s) { return s.key == "backend"; }

// "queue_depth (--queue-depth)": how messages name an option.
std::string label(const Spec& s) {
  if (is_positional(s)) return std::string(s.key);
  return fmt::format("{} ({})", s.key, long_flag(s));
}

[[noreturn]] void type_error(const Spec& s, const Ctx& c, std::string_view expected, const json& v) {
  throw OptionError(std::string(s.key),
                    fmt::format("{}: expected {}, got {} ({})", label(s), expected, json_excerpt(v), c.source));
}

template <class T>
T json_unsigned(const json& v, const Spec& s, const Ctx& c) {
  uint64_t x = 0;
  if (v.is_number_unsigned()) {
    x = v.get<uint64_t>();
  } else if (v.is_number_integer()) {  // a signed JSON integer (e.g. built in code)
    if (v.get<int64_t>() < 0) type_error(s, c, "a non-negative integer", v);
    x = static_cast<uint64_t>(v.get<int64_t>());
  } else {
    type_error(s, c, "an unsigned integer", v);
  }
  if (x > std::numeric_limits<T>::max()) {
    type_error(s, c, fmt::format("an unsigned integer <= {}", std::numeric_limits<T>::max()), v);
  }
  return static_cast<T>(x);
}

template <class T>
T json_signed(const json& v, const Spec& s, const Ctx& c) {
  if (!v.is_number_integer()) type_error(s, c, "an integer", v);
  if (v.is_number_unsigned()) {
    const auto x = v.get<uint64_t>();
    if (x > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      type_error(s, c, fmt::format("an integer <= {}", std::numeric_limits<T>::max()), v);
    }
    return static_cast<T>(x);
  }
  const auto x = v.get<int64_t>();
  if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
    type_error(s, c,
               fmt::format("an integer in [{}, {}]", std::numeric_limits<T>::min(), std::numeric_limits<T>::max()),
               v);
  }
  return static_cast<T>(x);
}

template <auto M>
void set_field(Options& o, const json& v, const Spec& s, const Ctx& c) {
  using T = std::remove_cvref_t<decltype(o.*M)>;
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) type_error(s, c, "a boolean (true or false)", v);
    o.*M = v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) type_error(s, c, "a string", v);
    o.*M = v.get<std::string>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (!v.is_number()) type_error(s, c, "a number", v);
    o.*M = v.get<double>();
  } else if constexpr (std::is_unsigned_v<T>) {
    o.*M = json_unsigned<T>(v, s, c);
  } else {
    static_assert(std::is_signed_v<T>);
    o.*M = json_signed<T>(v, s, c);
  }
}

template <auto M>
json get_field(const Options& o) {
  return json(o.*M);
}

// A field of Options::loop (backend::LoopPolicySettings), read and written as the flat key.
template <auto M>
void set_loop_field(Options& o, const json& v, const Spec& s, const Ctx& c) {
  using T = std::remove_cvref_t<decltype(o.loop.*M)>;
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) type_error(s, c, "a boolean (true or false)", v);
    o.loop.*M = v.get<bool>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (!v.is_number()) type_error(s, c, "a number", v);
    o.loop.*M = v.get<double>();
  } else {
    static_assert(std::is_unsigned_v<T>);
    o.loop.*M = json_unsigned<T>(v, s, c);
  }
}

template <auto M>
json get_loop_field(const Options& o) {
  return json(o.loop.*M);
}

template <auto M, const auto& Table>
void set_choice(Options& o, const json& v, const Spec& s, const Ctx& c) {
  if (!v.is_string()) type_error(s, c, fmt::format("a string ({})", choice_list(Table)), v);
  const auto name = v.get<std::string>();
  for (const auto& ch : Table) {
    if (ch.name == name) {
      o.*M = ch.value;
      return;
    }
  }
  throw OptionError(std::string(s.key), fmt::format("{}: \"{}\" is not one of {} ({})", label(s), name,
                                                    choice_list(Table), c.source));
}

template <auto M, const auto& Table>
json get_choice(const Options& o) {
  return json(std::string(name_of(Table, o.*M)));
}

// A choice among the loop policy settings (o.loop.*M).
template <auto M, const auto& Table>
void set_loop_choice(Options& o, const json& v, const Spec& s, const Ctx& c) {
  if (!v.is_string()) type_error(s, c, fmt::format("a string ({})", choice_list(Table)), v);
  const auto name = v.get<std::string>();
  for (const auto& ch : Table) {
    if (ch.name == name) {
      o.loop.*M = ch.value;
      return;
    }
  }
  throw OptionError(std::string(s.key), fmt::format("{}: \"{}\" is not one of {} ({})", label(s), name,
                                                    choice_list(Table), c.source));
}

template <auto M, const auto& Table>
json get_loop_choice(const Options& o) {
  return json(std::string(name_of(Table, o.loop.*M)));
}

void set_backend(Options& o, const json& v, const Spec& s, const Ctx& c) {
  if (v.is_null()) {
    o.mode = Mode::kKv;
    o.backend.reset();
    return;
  }
  if (!v.is_string())
    type_error(s, c, fmt::format("a string: a KV backend ({}) or a run mode ({})", choice_list(kBackendChoices),
                                 choice_list(kOptionModeChoices)),
               v);
  const auto name = v.get<std::string>();
  for (const auto& ch : kOptionModeChoices) {
    if (ch.name == name) {
      o.mode = ch.value;
      o.backend.reset();
      return;
    }
  }
  for (const auto& ch : kBackendChoices) {
    if (ch.name == name) {
      o.mode = Mode::kKv;
      o.backend = ch.value;
      return;
    }
  }
  throw OptionError(std::string(s.key),
                    fmt::format("{}: \"{}\" is not one of {} (the KV backends) nor a run mode ({}) ({})", label(s),
                                name, choice_list(kBackendChoices), choice_list(kOptionModeChoices), c.source));
}

// The positional word of the options: the backend's name in mode kv (null while none is
// given), the mode's own word otherwise; null for a combination no word names.
json get_backend(const Options& o) {
  if (o.mode == Mode::kKv) {
    if (!o.backend) return json(nullptr);
    const std::string_view name = name_of(kBackendChoices, *o.backend);
    return name.empty() ? json(nullptr) : json(std::string(name));
  }
  const std::string_view name = name_of(kOptionModeChoices, o.mode);
  if (name.empty() || o.backend) return json(nullptr);
  return json(std::string(name));
}

// A relative model path is resolved against the context's base directory (the config
// file's directory, or the working directory for the command line) and made absolute.
void set_model(Options& o, const json& v, const Spec& s, const Ctx& c) {
  if (!v.is_string()) type_error(s, c, "a string (a path)", v);
  const auto text = v.get<std::string>();
  if (text.empty()) {
    o.model.clear();
    return;
  }
  fs::path p(text);
  if (p.is_relative()) p = fs::path(c.base_dir) / p;
  o.model = fs::absolute(p).lexically_normal().string();
}

bool parse_double(std::string_view text, double& out) {
  if (text.empty()) return false;
  const char* first = text.data();
  const char* last = first + text.size();
  if (*first == '+') {  // from_chars takes '-' but not '+': accept one '+', not "+-"
    ++first;
    if (first == last || *first == '-') return false;
  }
  const auto [ptr, ec] = std::from_chars(first, last, out);
  return ec == std::errc() && ptr == last && std::isfinite(out);
}

// "A:B" (microseconds) -> TraceWindow; "" -> none.
void set_trace_window(Options& o, const json& v, const Spec& s, const Ctx& c) {
  if (!v.is_string()) type_error(s, c, "a string \"A:B\" (microseconds)", v);
  const auto text = v.get<std::string>();
  if (text.empty()) {
    o.trace_window.reset();
    return;
  }
  const auto colon = text.find(':');
  TraceWindow w;
  if (colon == std::string::npos || !parse_double(std::string_view(text).substr(0, colon), w.begin_us) ||
      !parse_double(std::string_view(text).substr(colon + 1), w.end_us)) {
    throw OptionError(std::string(s.key),
                      fmt::format("{}: \"{}\" is not of the form A:B (two numbers of microseconds) ({})",
                                  label(s), text, c.source));
  }
  o.trace_window = w;
}

json get_trace_window(const Options& o) {
  if (!o.trace_window) return json(std::string());
  return json(fmt::format("{}:{}", o.trace_window->begin_us, o.trace_window->end_us));
}

// message_size: a number (one size, the JSON form of a single size, so configurations
// keep their bytes) or a string (a list or a range of sizes).
void set_message_size(Options& o, const json& v, const Spec& s, const Ctx& c) {
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    o.message_size = std::to_string(v.get<uint64_t>());
    return;
  }
  if (!v.is_string()) type_error(s, c, "a size in bytes, or a string of sizes \"A,B\" / \"A..B\"", v);
  o.message_size = v.get<std::string>();
}

json get_message_size(const Options& o) {
  const std::string& t = o.message_size;
  if (!t.empty() && t.size() <= 10 && t.find_first_not_of("0123456789") == std::string::npos) return json(std::stoull(t));
  return json(t);
}

#define BKV_FIELD(member) &set_field<&Options::member>, &get_field<&Options::member>
#define BKV_LOOP_FIELD(member) &set_loop_field<&backend::LoopPolicySettings::member>, &get_loop_field<&backend::LoopPolicySettings::member>
#define BKV_CHOICE(member, table) &set_choice<&Options::member, table>, &get_choice<&Options::member, table>

constexpr std::string_view kGroupRun = "Benchmark";
constexpr std::string_view kGroupWorkload = "Workload";
constexpr std::string_view kGroupRdma = "RDMA and rings";
constexpr std::string_view kGroupLoop = "Daemon loop policies";
constexpr std::string_view kGroupSim = "Simulator";
constexpr std::string_view kGroupRpc = "copyrpc alone (rpc)";
constexpr std::string_view kGroupData = "bulk values (data)";

const Spec kSpecs[] = {
    {"backend", 0, Kind::kChoice, kGroupRun, "" /* --help lists kBackendChoices */,
     "the KV backend to run (positional argument); the other run modes are words of their own, not backends: "
     "benchkv rpc|data|sweep|compare (their --help below)",
     &set_backend, &get_backend},
    {"transport", 0, Kind::kChoice, kGroupRun, "" /* --help lists kTransportNames */, "transport under the backends",
     BKV_CHOICE(transport, kTransportChoices)},
    {"duration", 'd', Kind::kDouble, kGroupRun, "SECONDS", "benchmark time per run (fractions allowed)",
     BKV_FIELD(duration)},
    {"interval_ms", 0, Kind::kDouble, kGroupRun, "MS", "epoch length (fractions allowed)", BKV_FIELD(interval_ms)},
    {"trim", 0, Kind::kUnsigned, kGroupRun, "N", "epochs dropped at each end of a run (warm-up, cool-down)",
     BKV_FIELD(trim)},
    {"runs", 'r', Kind::kUnsigned, kGroupRun, "N", "number of runs: measurement windows back to back in one execution (threads keep running, same seed), not independent repetitions (--repeat for those)", BKV_FIELD(runs)},
    {"repeat", 0, Kind::kUnsigned, kGroupRun, "N",
     "independent repetitions: the whole experiment (its --runs) N times, with seeds seed .. seed + N - 1; the "
     "report and the summary give each figure's mean, standard deviation and 95 % confidence interval over them, "
     "and benchkv compare tests differences over them (simulated runs: KV, rpc with one message size, data with "
     "one value size; 1 to 1000)",
     BKV_FIELD(repeat)},
    {"output", 'o', Kind::kString, kGroupRun, "FILE", "per-epoch CSV output", BKV_FIELD(output)},
    {"summary", 0, Kind::kString, kGroupRun, "FILE",
     "JSON summary output",
     BKV_FIELD(summary)},
    {"progress", 0, Kind::kBool, kGroupRun, "", "a progress line per epoch on stderr", BKV_FIELD(progress)},
    {"report", 0, Kind::kChoice, kGroupRun, "text|csv|none",
     "final report on stdout: text (a table for people; what it holds: below), csv (a header and one line per "
     "run), none",
     BKV_CHOICE(report, kReportChoices)},
    {"seed", 0, Kind::kUnsigned, kGroupRun, "U64", "seed of every pseudo-random stream", BKV_FIELD(seed)},
    {"server_threads", 0, Kind::kUnsigned, kGroupRun, "N", "daemon threads per node", BKV_FIELD(server_threads)},
    {"client_threads", 0, Kind::kUnsigned, kGroupRun, "N", "client threads per node", BKV_FIELD(client_threads)},
    {"queue_depth", 0, Kind::kUnsigned, kGroupRun, "N",
     "a power of two: requests in flight per client (rpc: calls in flight per endpoint)",
     BKV_FIELD(queue_depth)},
    {"key_range", 0, Kind::kUnsigned, kGroupWorkload, "N", "keys per node", BKV_FIELD(key_range)},
    {"read_ratio", 0, Kind::kDouble, kGroupWorkload, "FLOAT", "fraction of gets, in [0, 1]", BKV_FIELD(read_ratio)},
    {"distribution", 0, Kind::kChoice, kGroupWorkload, "uniform|zipfian",
     "target distribution: uniform over ranks and keys, or zipfian over ranks x keys",
     BKV_CHOICE(distribution, kDistributionChoices)},
    {"zipf_s", 0, Kind::kDouble, kGroupWorkload, "S", "zipfian exponent (> 0)", BKV_FIELD(zipf_s)},
    {"pattern_len", 0, Kind::kUnsigned, kGroupWorkload, "N", "pre-generated requests per client, replayed in a loop",
     BKV_FIELD(pattern_len)},
    {"device", 0, Kind::kString, kGroupRdma, "NAME", "RDMA device name (empty: use --device-index)",
     BKV_FIELD(device)},
    {"device_index", 0, Kind::kUnsigned, kGroupRdma, "N", "RDMA device index", BKV_FIELD(device_index)},
    {"port", 0, Kind::kUnsigned, kGroupRdma, "N", "RDMA port (1-255)", BKV_FIELD(port)},
    {"gid_index", 0, Kind::kSigned, kGroupRdma, "N", "RoCE GID index; -1 = InfiniBand LID addressing",
     BKV_FIELD(gid_index)},
    {"ring_size", 0, Kind::kUnsigned, kGroupRdma, "BYTES", "copyrpc ring size (power of two >= 4096)",
     BKV_FIELD(ring_size)},
    {"poll_budget", 0, Kind::kUnsigned, kGroupLoop, "N",
     "copyrpc polls per loop, stopping early once N responses arrived (>= 1)", BKV_LOOP_FIELD(poll_budget)},
    {"batch_hold_us", 0, Kind::kDouble, kGroupLoop, "US", "reply batch-hold time; 0 = off", BKV_LOOP_FIELD(batch_hold_us)},
    {"adaptive_hold", 0, Kind::kBool, kGroupLoop, "", "adapt the hold time to the response rate (EWMA)",
     BKV_LOOP_FIELD(adaptive_hold)},
    {"hold_rtt_multiplier", 0, Kind::kDouble, kGroupLoop, "M",
     "hold = M x EWMA of the flush -> first CQE delay; 0 = off", BKV_LOOP_FIELD(hold_rtt_multiplier)},
    {"adaptive_poll_budget", 0, Kind::kBool, kGroupLoop, "", "adaptive poll budget controller",
     BKV_LOOP_FIELD(adaptive_poll_budget)},
    {"loop_order", 0, Kind::kChoice, kGroupLoop, "original|next-poll",
     "where daemon #0's replies and calls leave: original (the original system's loop, which ran the C1 and C5 "
     "measurements: one flush after the calls carries the loop's replies and calls, one WRITE per endpoint per "
     "loop), next-poll (the older loop of the poll-budget measurements: no flush after the calls, so replies and "
     "calls leave at the next loop's poll)",
     &set_loop_choice<&backend::LoopPolicySettings::order, kLoopOrderChoices>,
     &get_loop_choice<&backend::LoopPolicySettings::order, kLoopOrderChoices>},
    {"np", 0, Kind::kUnsigned, kGroupSim, "N",
     "simulated node count (>= 1); rpc: 1 runs caller and server on one NIC (loopback), N >= 2 one caller rank and N-1 server ranks",
     BKV_FIELD(np)},
    {"model", 0, Kind::kString, kGroupSim, "FILE.json",
     "simulator model JSON (empty: built-in defaults); relative paths are resolved against the config file's "
     "directory, or the working directory on the command line",
     &set_model, &get_field<&Options::model>},
    {"start_mode", 0, Kind::kChoice, kGroupSim, "sync|staggered", "how clients issue their first requests",
     BKV_CHOICE(start_mode, kStartModeChoices)},
    {"start_stagger_us", 0, Kind::kDouble, kGroupSim, "US", "client start spread in staggered mode (> 0 there; each client starts at a uniform random time in [0, US))",
     BKV_FIELD(start_stagger_us)},
    {"start_burst_clients", 0, Kind::kUnsigned, kGroupSim, "N",
     "in staggered mode, the first N client threads of every node start at once at the clients' start and only "
     "the others are spread over --start-stagger-us (a first burst, then a ramp; 0: every client is spread)",
     BKV_FIELD(start_burst_clients)},
    {"startup_ms", 0, Kind::kDouble, kGroupSim, "MS",
     "the daemons loop alone for MS of virtual time before the clients start (the original's daemons looped "
     "while its clients were spawned; its per-loop statistics include those loops); runs are measured from the "
     "clients' start",
     BKV_FIELD(startup_ms)},
    {"life_s", 0, Kind::kDouble, kGroupSim, "S",
     "also report each daemon's per-loop statistics as the original took them (summary key \"life\"): "
     "loop-weighted means of samples taken at every loop's end over a daemon life of S seconds from the "
     "daemons' start, the simulated start-up's loops followed by the kept epochs' loops standing for the "
     "rest of the life; 0 = off",
     BKV_FIELD(life_s)},
    {"ring_pages", 0, Kind::kChoice, kGroupSim, "auto|release|keep",
     "copyrpc ring pages the peer has consumed: given back to the kernel (release: memory for live pages only) or "
     "zeroed and kept (keep: faster, no system call or page fault per page, but every page a ring has touched "
     "stays resident); auto (the default): keep when all the run's rings, whole, take at most half the memory "
     "available as the simulation starts (MemAvailable in /proc/meminfo), release otherwise; the choice and "
     "its figures are in the summary's provenance (\"ring_pages\"); the output bytes are the same",
     BKV_CHOICE(ring_pages, kRingPagesChoices)},
    {"ring_page_batch", 0, Kind::kUnsigned, kGroupSim, "PAGES",
     "copyrpc ring pages the peer has consumed are given back this many at a time, in one system call per ring, "
     "and as many pages ahead of where the ring is written next are made resident in one call (1: page by page, "
     "a page fault at each first write; 16 by default: faster, up to 2 x PAGES more resident pages per busy "
     "ring); in [1, 1024]; the output bytes are the same",
     BKV_FIELD(ring_page_batch)},
    {"event_set", 0, Kind::kChoice, kGroupSim, "heap|calendar",
     "the simulator's future-event set: binary heap or calendar queue (sim/calendar_queue.hpp); both run the same "
     "events in the same order, so the output bytes are the same, only the speed differs",
     BKV_CHOICE(event_set, kEventSetChoices)},
    {"step_log", 0, Kind::kString, kGroupSim, "FILE",
     "write which simulated thread each step ran, in order, over the measured runs, to FILE (binary, "
     "apps/benchkv/simulator/step_log.hpp; bench/sim_limit.cpp replays it; missing directories are created; empty: off)",
     BKV_FIELD(step_log)},
    {"inflight_samples", 0, Kind::kString, kGroupSim, "FILE", "in-flight time series output (empty: off; \"auto\": the output path with its extension replaced by .inflight.csv)",
     BKV_FIELD(inflight_samples)},
    {"inflight_sample_interval_us", 0, Kind::kDouble, kGroupSim, "US", "in-flight sampling period (> 0)",
     BKV_FIELD(inflight_sample_interval_us)},
    {"trace", 0, Kind::kString, kGroupSim, "FILE", "Chrome/Perfetto trace output (empty: off)", BKV_FIELD(trace)},
    {"trace_window", 0, Kind::kWindow, kGroupSim, "A:B",
     "traced window of virtual time in microseconds, A < B (required with --trace)", &set_trace_window,
     &get_trace_window},
    {"check_exactly_once", 0, Kind::kBool, kGroupSim, "",
     "record every request and store operation and check after the run that each request was answered exactly "
     "once and each get returned a value its key held meanwhile (memory: about 170 bytes per request; a "
     "violation ends the run with an error after the outputs are written)",
     BKV_FIELD(check_exactly_once)},
    {"endpoints", 0, Kind::kUnsigned, kGroupRpc, "N", "rpc: endpoints from the caller to each server rank (>= 1)",
     BKV_FIELD(endpoints)},
    {"message_size", 0, Kind::kString, kGroupRpc, "SIZES",
     "rpc: request and response payload sizes in bytes, one size, a list \"A,B\" and/or ranges \"A..B\" of every "
     "power of two from A to B (\"8..4096\", as ib_write_bw -a): one row per size; each in [1, ring_size / 8]",
     &set_message_size, &get_message_size},
    {"value_size", 0, Kind::kString, kGroupData, "SIZES",
     "data: value sizes in bytes, a list \"A,B\" and/or ranges \"A..B\" of every power of two from A to B; each "
     "in [16, 67108864] (64 MiB), keys x the largest size at most 4 GiB of store per node",
     BKV_FIELD(value_size)},
    {"data_backend", 0, Kind::kChoice, kGroupData, "delegation|meta|direct|ucx-am",
     "data: the backend that carries the calls (ucx-am: --transport ucx only)", BKV_CHOICE(data_backend, kDataBackendChoices)},
};

// Keys only the data benchmark has: written by to_json only for it (they mean nothing
// to the other modes).
constexpr std::array<std::string_view, 2> kDataOnlyKeys{"value_size", "data_backend"};

#undef BKV_FIELD
#undef BKV_CHOICE
#undef BKV_LOOP_FIELD

const Spec& spec_of(std::string_view key) {
  for (const auto& s : kSpecs) {
    if (s.key == key) return s;
  }
  throw std::logic_error("bkv::bench: no option spec for key " + std::string(key));
}

// Levenshtein distance, for "did you mean" hints on unknown keys.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string suggestion(std::string_view key) {
  std::string_view best;
  size_t best_d = 4;  // suggest only close matches
  for (const auto& s : kSpecs) {
    const size_t d = edit_distance(key, s.key);
    if (d < best_d) {
      best_d = d;
      best = s.key;
    }
  }
  return best.empty() ? std::string() : fmt::format(" (did you mean \"{}\"?)", best);
}

// Applies the keys present in a JSON object; no range checks (validate() runs on the
// merged result, so a config value overridden on the command line may be out of range).
void apply_object(Options& o, const json& j, const Ctx& c, bool& summary_given) {
  if (!j.is_object()) {
    throw OptionError("config", fmt::format("config: expected a JSON object of options, got {} ({})",
                                            j.type_name(), c.source));
  }
  for (const auto& [key, value] : j.items()) {
    if (key == "config" || key == "print_config" || key == "version") {
      throw OptionError(key, fmt::format("{}: only valid on the command line, not as a JSON key ({})", key,
                                         c.source));
    }
    const Spec* spec = nullptr;
    for (const auto& s : kSpecs) {
      if (s.key == key) spec = &s;
    }
    if (spec == nullptr) {
      throw OptionError(key, fmt::format("unknown key \"{}\"{} ({})", key, suggestion(key), c.source));
    }
    spec->set(o, value, *spec, c);
    if (key == "summary") summary_given = true;
  }
}

void finish(Options& o, bool summary_given) {
  if (!summary_given) o.summary = default_summary_path(o.output);
  // "auto" follows --output, so that a config's samples are not shared by runs that were
  // given other outputs on the command line.
  if (o.inflight_samples == kAutoPath) o.inflight_samples = default_inflight_path(o.output);
}

// Output files must be files ("-" is not: the results on stdout are --report's) and
// distinct: two outputs on one path would silently overwrite each other.
void validate_outputs(const Options& o) {
  const std::pair<std::string_view, const std::string*> outs[] = {
      {"output", &o.output}, {"summary", &o.summary}, {"inflight_samples", &o.inflight_samples}, {"trace", &o.trace},
      {"step_log", &o.step_log}};
  for (const auto& [key, path] : outs)
    if (*path == "-")
      throw OptionError(std::string(key), fmt::format("{}: \"-\" is not a file: outputs are files; the results on "
                                                      "stdout are --report's", label(spec_of(key))));
  for (size_t i = 0; i < std::size(outs); ++i)
    for (size_t j = i + 1; j < std::size(outs); ++j) {
      if (outs[i].second->empty() || outs[j].second->empty()) continue;
      if (fs::absolute(*outs[i].second).lexically_normal() == fs::absolute(*outs[j].second).lexically_normal())
        throw OptionError(std::string(outs[j].first),
                          fmt::format("{} and {} name the same file \"{}\": one would overwrite the other",
                                      label(spec_of(outs[i].first)), label(spec_of(outs[j].first)), *outs[j].second));
    }
}

[[noreturn]] void fail(const Options& o, std::string_view key, std::string_view rule) {
  const Spec& s = spec_of(key);
  throw OptionError(std::string(key), fmt::format("{}: {} {}", label(s), json_excerpt(s.get(o), 200), rule));
}

bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Microseconds, nanoseconds: the unit conversions of the time options.
uint64_t rounded_ns(double value, double ns_per_unit) {
  return static_cast<uint64_t>(std::llround(value * ns_per_unit));
}

constexpr double kMaxDurationSeconds = 1e7;   // keeps every nanosecond count far inside u64
constexpr uint32_t kMaxEpochs = 10'000'000;   // per run
// Time options in microseconds (a hold, a start spread, a sampling period) are at most
// the longest run: longer ones mean nothing, and past 64-bit nanoseconds their
// conversion is undefined (a 1e300 us start spread started every client at 0).
constexpr double kMaxTimeUs = kMaxDurationSeconds * 1e6;
constexpr const char* kTimeRange = "must be in [0, 1e13] microseconds (at most the longest run, 1e7 s)";

}  // namespace

// ---------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------

std::string_view to_string(TransportKind t) noexcept { return name_of(kTransportChoices, t); }
std::string_view to_string(StartMode m) noexcept { return name_of(kStartModeChoices, m); }
std::string_view to_string(ReportFormat f) noexcept { return name_of(kReportChoices, f); }
std::string_view to_string(RingPages p) noexcept { return name_of(kRingPagesChoices, p); }
std::string_view to_string(EventSet e) noexcept { return name_of(kEventSetChoices, e); }

uint64_t TraceWindow::begin_ns() const noexcept { return rounded_ns(begin_us, 1e3); }
uint64_t TraceWindow::end_ns() const noexcept { return rounded_ns(end_us, 1e3); }

uint64_t duration_ns(const Options& o) { return rounded_ns(o.duration, 1e9); }
uint64_t interval_ns(const Options& o) { return rounded_ns(o.interval_ms, 1e6); }
uint32_t epochs_per_run(const Options& o) {
  const uint64_t iv = interval_ns(o);
  return iv == 0 ? 0 : static_cast<uint32_t>(std::min<uint64_t>(duration_ns(o) / iv, UINT32_MAX));
}

std::string default_summary_path(const std::string& output) {
  fs::path p(output);
  p.replace_extension(".summary.json");
  return p.string();
}
std::string default_inflight_path(const std::string& output) {
  return fs::path(output).replace_extension(".inflight.csv").string();
}

kv::WorkloadConfig workload_config(const Options& o, uint32_t num_ranks) {
  kv::WorkloadConfig w;
  w.num_ranks = num_ranks;
  w.key_range = o.key_range;
  w.read_ratio = o.read_ratio;
  w.distribution = o.distribution;
  w.zipf_s = o.zipf_s;
  w.seed = o.seed;
  w.pattern_len = o.pattern_len;
  return w;
}

namespace {

// Which options apply to which transport and backend. An option set to anything but its
// default where it does not apply is an error naming it (validate), never silently
// ignored; parse_command_line turns the case of a value that came from a config file
// into a one-line warning and resets the option (a config file may describe several
// modes). One rule per option, in kSpecs order.
struct Applicability {
  std::string_view key;
  bool (*applies)(const Options&);
  std::string_view what;  // what the option is, for the message
};

bool is_sim(const Options& o) { return o.transport == TransportKind::kSim; }
bool is_rdma(const Options& o) {
  const TransportName* t = transport_named(o.transport);
  return t != nullptr && t->rdma_device;
}
bool is_rpc(const Options& o) { return o.mode == Mode::kRpc; }
bool is_data(const Options& o) { return o.mode == Mode::kData; }
// The KV backends; no backend yet: judged as kv.
bool is_kv(const Options& o) { return o.mode == Mode::kKv; }
bool has_clients(const Options& o) { return is_kv(o) || is_data(o); }
bool has_copyrpc(const Options& o) { return o.backend != BackendKind::kUcxAm; }
bool is_delegation(const Options& o) { return !o.backend || o.backend == BackendKind::kDelegation; }
bool sim_kv(const Options& o) { return is_sim(o) && is_kv(o); }

constexpr Applicability kApplicability[] = {
    {"server_threads", &is_kv, "an option of the KV backends; daemon #0 alone serves data"},
    {"client_threads", &has_clients, "an option of the KV and data backends"},
    {"key_range", &has_clients, "an option of the KV and data backends"},
    {"read_ratio", &has_clients, "an option of the KV and data backends"},
    {"distribution", &is_kv, "an option of the KV backends"},
    {"zipf_s", [](const Options& o) { return is_kv(o) && o.distribution == Distribution::kZipfian; },
     "the exponent of --distribution zipfian"},
    {"pattern_len", &is_kv, "an option of the KV backends"},
    {"device", &is_rdma, "an RDMA device option of --transport mlx5|verbs"},
    {"device_index", &is_rdma, "an RDMA device option of --transport mlx5|verbs"},
    {"port", &is_rdma, "an RDMA device option of --transport mlx5|verbs"},
    {"gid_index", &is_rdma, "an RDMA device option of --transport mlx5|verbs"},
    {"ring_size", &has_copyrpc, "the copyrpc ring size; ucx-am has no copyrpc ring"},
    {"poll_budget", [](const Options& o) { return is_kv(o) && is_delegation(o); }, "a Delegation daemon loop policy"},
    {"batch_hold_us", [](const Options& o) { return is_kv(o) && is_delegation(o); }, "a Delegation daemon loop policy"},
    {"adaptive_hold", [](const Options& o) { return is_kv(o) && is_delegation(o); }, "a Delegation daemon loop policy"},
    {"hold_rtt_multiplier", [](const Options& o) { return is_kv(o) && is_delegation(o); },
     "a Delegation daemon loop policy"},
    {"adaptive_poll_budget", [](const Options& o) { return is_kv(o) && is_delegation(o); },
     "a Delegation daemon loop policy"},
    {"loop_order", [](const Options& o) { return is_kv(o) && is_delegation(o); }, "a Delegation daemon loop policy"},
    {"np", &is_sim, "the simulated node count; real runs take their ranks from mpirun"},
    {"model", &is_sim, "the simulator model"},
    {"start_mode", &sim_kv, "a client start option of the simulated KV backends"},
    {"start_stagger_us", [](const Options& o) { return sim_kv(o) && o.start_mode == StartMode::kStaggered; },
     "the spread of --start-mode staggered in the simulator"},
    {"start_burst_clients", [](const Options& o) { return sim_kv(o) && o.start_mode == StartMode::kStaggered; },
     "the first burst of --start-mode staggered in the simulator"},
    {"startup_ms", &sim_kv, "a start-up option of the simulated KV backends"},
    {"life_s", &sim_kv, "a loop statistic of the simulated KV backends"},
    {"ring_pages", [](const Options& o) { return is_sim(o) && !is_data(o); },
     "how the simulator keeps copyrpc ring pages (KV and rpc runs)"},
    {"ring_page_batch", [](const Options& o) { return is_sim(o) && !is_data(o); },
     "how many simulated copyrpc ring pages are given back at a time (KV and rpc runs)"},
    {"event_set", [](const Options& o) { return is_sim(o) && !is_data(o); }, "the simulator's event set (KV and rpc runs)"},
    {"step_log", &sim_kv, "a step recorder of the simulated KV backends"},
    {"inflight_samples", &sim_kv, "a daemon in-flight sampler of the simulated KV backends"},
    {"inflight_sample_interval_us", [](const Options& o) { return sim_kv(o) && !o.inflight_samples.empty(); },
     "the period of --inflight-samples in the simulator"},
    {"trace", &sim_kv, "a daemon loop trace of the simulated KV backends"},
    {"check_exactly_once", &sim_kv, "the exactly-once oracle of the simulated KV backends"},
    {"trace_window", [](const Options& o) { return sim_kv(o) && !o.trace.empty(); },
     "the window of --trace in the simulator"},
    {"endpoints", &is_rpc, "an option of the rpc benchmark"},
    {"message_size", &is_rpc, "an option of the rpc benchmark"},
    {"value_size", &is_data, "an option of the data benchmark"},
    {"data_backend", &is_data, "an option of the data benchmark"},
    {"repeat", &is_sim,
     "a repetition of simulated runs (--transport sim: KV, rpc and data); a real run is one execution under mpirun: "
     "repeat it by running it again with another --seed"},
};

bool applies_to_mode(std::string_view key, Mode mode) {
  const Applicability* rule = nullptr;
  for (const Applicability& a : kApplicability)
    if (a.key == key) rule = &a;
  if (rule == nullptr) return key != "fault" || mode == Mode::kKv;
  for (const TransportName& t : kTransportNames) {
    Options o;
    o.mode = mode;
    o.transport = t.kind;
    o.distribution = Distribution::kZipfian;  // the options that another one turns on
    o.start_mode = StartMode::kStaggered;
    o.trace = "trace.json";
    o.inflight_samples = "inflight.csv";
    if (rule->applies(o)) return true;
  }
  return false;
}

// What an option was judged against, for messages: "--transport ucx, backend meta" (mode
// kv), "--transport sim, mode rpc".
std::string mode_of(const Options& o) {
  std::string m = fmt::format("--transport {}", name_of(kTransportChoices, o.transport));
  if (!get_backend(o).is_null())
    m += fmt::format(", {} {}", o.mode == Mode::kKv ? "backend" : "mode", get_backend(o).get<std::string>());
  return m;
}

bool differs_from_default(const Options& o, std::string_view key) {
  static const Options defaults{};
  const Spec& s = spec_of(key);
  return s.get(o) != s.get(defaults);
}

// The first option set where it does not apply, or nullptr.
const Applicability* first_inapplicable(const Options& o) {
  for (const Applicability& a : kApplicability)
    if (!a.applies(o) && differs_from_default(o, a.key)) return &a;
  return nullptr;
}

std::string inapplicable_message(const Options& o, const Applicability& a) {
  return fmt::format("{}: {} does not apply to {} (it is {})", label(spec_of(a.key)), json_excerpt(spec_of(a.key).get(o), 200),
                     mode_of(o), a.what);
}

// Resets to its default every option set where it does not apply and that may_drop
// accepts, telling note() about each (one line, no trailing period); stops at the first
// one may_drop refuses (validate() then reports it as an error). Dropping one option can
// make another inapplicable (trace -> trace_window), hence the loop.
template <class MayDrop, class Note>
void drop_inapplicable(Options& o, MayDrop&& may_drop, Note&& note) {
  const Options defaults;
  while (const Applicability* a = first_inapplicable(o)) {
    if (!may_drop(a->key)) break;
    note(inapplicable_message(o, *a));
    const Spec& s = spec_of(a->key);
    s.set(o, s.get(defaults), s, Ctx{"defaults", ""});
  }
}

void validate_applicability(const Options& o) {
  if (o.endpoints < 1 || o.endpoints > kMaxRpcEndpoints)
    fail(o, "endpoints", fmt::format("must be in [1, {}]", kMaxRpcEndpoints));
  rpc_message_sizes(o);  // each size in [1, ring_size / 8]
  if (const Applicability* a = first_inapplicable(o)) throw OptionError(std::string(a->key), inapplicable_message(o, *a));
}

// The data benchmark's own rules: the data backend's name and the memory its sizes need.
void validate_data_relations(const Options& o) {
  if (!is_data(o)) return;
  if (o.data_backend == BackendKind::kUcxAm && o.transport != TransportKind::kUcx)
    fail(o, "data_backend", fmt::format("ucx-am runs over --transport ucx only (got --transport {})", to_string(o.transport)));
  const std::vector<uint32_t> sizes = data_value_sizes(o);
  uint32_t largest = 0;
  for (uint32_t v : sizes) largest = std::max(largest, v);
  if (o.key_range > kMaxDataStoreBytes / largest)
    throw OptionError("key_range", fmt::format("{}: {} keys x the largest value size {} = {} bytes of store per node "
                                               "exceeds {} bytes; give fewer keys or smaller values",
                                               label(spec_of("key_range")), o.key_range, largest,
                                               o.key_range * largest, kMaxDataStoreBytes));
  if (uint64_t{o.client_threads} * o.queue_depth * largest > kMaxDataStoreBytes)
    fail(o, "queue_depth", fmt::format("x client_threads x the largest value size exceeds {} bytes of client "
                                       "buffers per node", kMaxDataStoreBytes));
}

}  // namespace

void validate(const Options& o, bool require_backend) {
  if (require_backend && is_kv(o) && !o.backend) {
    throw OptionError("backend",
                      fmt::format("backend: missing; give a KV backend ({}) as the positional argument or as "
                                  "\"backend\" in the config file, or another run mode ({}) there",
                                  choice_list(kBackendChoices), choice_list(kOptionModeChoices)));
  }
  if ((o.backend || !is_kv(o)) && get_backend(o).is_null()) fail(o, "backend", "is invalid");
  if (o.backend == BackendKind::kUcxAm && o.transport != TransportKind::kUcx)
    fail(o, "backend", fmt::format("runs over --transport ucx only (the ucx-am baseline is UCX's own active "
                                   "messages: it has no {} form); got --transport {}",
                                   o.transport == TransportKind::kSim ? "simulated" : "RDMA-device",
                                   to_string(o.transport)));
  if (name_of(kTransportChoices, o.transport).empty()) fail(o, "transport", "is invalid");
  if (name_of(kDistributionChoices, o.distribution).empty()) fail(o, "distribution", "is invalid");
  if (name_of(kStartModeChoices, o.start_mode).empty()) fail(o, "start_mode", "is invalid");
  if (name_of(kLoopOrderChoices, o.loop.order).empty()) fail(o, "loop_order", "is invalid");
  if (name_of(kRingPagesChoices, o.ring_pages).empty()) fail(o, "ring_pages", "is invalid");
  if (name_of(kEventSetChoices, o.event_set).empty()) fail(o, "event_set", "is invalid");
  if (name_of(kReportChoices, o.report).empty()) fail(o, "report", "is invalid");
  if (name_of(kDataBackendChoices, o.data_backend).empty()) fail(o, "data_backend", "is invalid");
  validate_applicability(o);

  if (!(o.duration > 0 && o.duration <= kMaxDurationSeconds)) {
    fail(o, "duration", fmt::format("must be > 0 and <= {} seconds", kMaxDurationSeconds));
  }
  if (!(o.interval_ms > 0 && interval_ns(o) >= 1)) fail(o, "interval_ms", "must be >= 1e-6 (one nanosecond)");
  const uint64_t epochs = duration_ns(o) / interval_ns(o);
  if (epochs < 1) {
    fail(o, "interval_ms", fmt::format("is longer than the duration ({} s): no epoch fits in a run", o.duration));
  }
  if (epochs > kMaxEpochs) {
    fail(o, "interval_ms", fmt::format("gives {} epochs per run (duration {} s); at most {} are allowed", epochs,
                                       o.duration, kMaxEpochs));
  }
  // Runs are back to back in one simulation (run r starts at r x duration), and a run
  // keeps only whole epochs: a remainder would be counted in the next run's first epoch.
  if (duration_ns(o) % interval_ns(o) != 0) {
    const double iv_s = static_cast<double>(interval_ns(o)) / 1e9;
    fail(o, "duration",
         fmt::format("s is not a whole number of epochs of {} ms (interval_ms): the rest would be counted "
                     "in the next run's first epoch; use {} or {}",
                     o.interval_ms, static_cast<double>(epochs) * iv_s, static_cast<double>(epochs + 1) * iv_s));
  }
  if (2 * uint64_t{o.trim} >= epochs) {
    fail(o, "trim", fmt::format("leaves no epoch: a run has {} epochs (duration {} s / interval {} ms) and "
                                "2 x trim = {} of them are dropped",
                                epochs, o.duration, o.interval_ms, 2 * uint64_t{o.trim}));
  }
  if (o.runs < 1) fail(o, "runs", "must be >= 1");
  if (o.repeat < 1 || o.repeat > kMaxRepeat) fail(o, "repeat", fmt::format("must be in [1, {}]", kMaxRepeat));
  if (o.repeat > 1) {  // simulated runs only: refused elsewhere by validate_applicability()
    for (const char* k : {"inflight_samples", "trace", "step_log"})
      if (!spec_of(k).get(o).get<std::string>().empty())
        fail(o, "repeat", fmt::format("> 1 writes no per-repetition {} file: drop --{} or run one seed",
                                      k, std::string(k) == "inflight_samples" ? "inflight-samples"
                                         : std::string(k) == "step_log"       ? "step-log"
                                                                              : "trace"));
    if (o.check_exactly_once) fail(o, "repeat", "> 1 and check_exactly_once: check one seed at a time");
    // A repetition's figures are means over its runs: runs of several sizes are not one population.
    if (is_rpc(o) && rpc_message_sizes(o).size() > 1)
      fail(o, "repeat", fmt::format("> 1 repeats one message size (got \"{}\"): run each size with --repeat, or a "
                                    "sweep with a message_size axis and \"repeat\" in its \"set\"", o.message_size));
    if (is_data(o) && data_value_sizes(o).size() > 1)
      fail(o, "repeat", fmt::format("> 1 repeats one value size (got \"{}\"): run each size with --repeat, or a "
                                    "sweep with a value_size axis and \"repeat\" in its \"set\"", o.value_size));
    if (o.seed > ~uint64_t{0} - (o.repeat - 1)) fail(o, "repeat", "x seeds from seed would pass the largest seed");
  }
  // Runs are back to back (run r starts at r x duration): their total is a time too.
  if (static_cast<double>(o.runs) * o.duration > kMaxDurationSeconds) {
    fail(o, "runs", fmt::format("x duration = {} x {} s is longer than the longest execution, {} seconds", o.runs,
                                o.duration, kMaxDurationSeconds));
  }
  if (o.output.empty()) fail(o, "output", "must not be empty");
  if (o.summary.empty()) fail(o, "summary", "must not be empty");
  if (o.port < 1 || o.port > kMaxPort) fail(o, "port", fmt::format("must be in [1, {}]", kMaxPort));
  if (o.gid_index < -1 || o.gid_index > kMaxGidIndex) {
    fail(o, "gid_index", fmt::format("must be -1 (LID) or in [0, {}]", kMaxGidIndex));
  }
  if (o.server_threads < 1 || o.server_threads > kMaxThreads) {
    fail(o, "server_threads", fmt::format("must be in [1, {}]", kMaxThreads));
  }
  if (o.client_threads < 1 || o.client_threads > kMaxThreads) {
    fail(o, "client_threads", fmt::format("must be in [1, {}]", kMaxThreads));
  }
  if (!is_pow2(o.queue_depth) || o.queue_depth > kMaxQueueDepth) {
    fail(o, "queue_depth", fmt::format("is not a power of two in [1, {}]", kMaxQueueDepth));
  }
  if (o.key_range < 1 || o.key_range > kv::kMaxKeyRange) fail(o, "key_range", "must be in [1, 2^32]");
  if (!(o.read_ratio >= 0 && o.read_ratio <= 1)) fail(o, "read_ratio", "must be in [0, 1]");
  if (!(o.zipf_s > 0 && std::isfinite(o.zipf_s))) fail(o, "zipf_s", "must be a finite number > 0");
  if (o.pattern_len < 1 || o.pattern_len > kv::kMaxPatternLen) fail(o, "pattern_len", "must be in [1, 2^24]");
  if (!is_pow2(o.ring_size) || o.ring_size < kMinRingSize || o.ring_size > kMaxRingSize) {
    fail(o, "ring_size", fmt::format("is not a power of two in [{}, 2^32]", kMinRingSize));
  }
  if (o.np < 1 || o.np > kv::kMaxRanks) fail(o, "np", "must be in [1, 2^20]");
  if (o.ring_page_batch < 1 || o.ring_page_batch > kMaxRingPageBatch)
    fail(o, "ring_page_batch", fmt::format("must be in [1, {}]", kMaxRingPageBatch));
  if (o.loop.poll_budget < 1) fail(o, "poll_budget", "must be >= 1");
  if (!(o.loop.batch_hold_us >= 0 && o.loop.batch_hold_us <= kMaxTimeUs)) fail(o, "batch_hold_us", kTimeRange);
  if (!(o.loop.hold_rtt_multiplier >= 0 && std::isfinite(o.loop.hold_rtt_multiplier))) {
    fail(o, "hold_rtt_multiplier", "must be >= 0");
  }
  // Loop policies that would overrule each other: refused rather than one silently ignored.
  if (o.loop.adaptive_poll_budget && o.loop.poll_budget != 1) {
    fail(o, "poll_budget", "is not used with adaptive_poll_budget (the controller sets the number of polls); "
                           "leave poll_budget at 1");
  }
  if (o.loop.adaptive_hold && o.loop.hold_rtt_multiplier > 0) {
    fail(o, "hold_rtt_multiplier", "and adaptive_hold would both set the hold time; choose one");
  }
  if (!(o.start_stagger_us >= 0 && o.start_stagger_us <= kMaxTimeUs)) fail(o, "start_stagger_us", kTimeRange);
  if (!(o.startup_ms >= 0 && o.startup_ms * 1e3 <= kMaxTimeUs))
    fail(o, "startup_ms", "must be in [0, 1e10] milliseconds (at most the longest run, 1e7 s)");
  if (!(o.life_s >= 0 && o.life_s <= kMaxDurationSeconds))
    fail(o, "life_s", "must be in [0, 1e7] seconds (at most the longest run)");
  if (o.life_s > 0 && o.life_s < o.startup_ms * 1e-3 + double(o.runs) * o.duration) {
    fail(o, "life_s",
         "must be at least startup_ms + runs x duration (the life holds the start-up and every simulated run)");
  }
  if (o.start_burst_clients > o.client_threads) {
    fail(o, "start_burst_clients", fmt::format("must be at most client_threads ({})", o.client_threads));
  }
  if (sim_kv(o) && o.start_mode == StartMode::kStaggered && o.start_stagger_us == 0) {
    fail(o, "start_stagger_us",
         "must be > 0 with start_mode staggered (a spread of 0 starts every client at once, which is start_mode sync)");
  }
  if (!(o.inflight_sample_interval_us > 0 && o.inflight_sample_interval_us <= kMaxTimeUs &&
        rounded_ns(o.inflight_sample_interval_us, 1e3) >= 1)) {
    fail(o, "inflight_sample_interval_us", "must be in [0.001 (one nanosecond), 1e13 (the longest run)]");
  }
  if (o.trace_window) {
    const TraceWindow& w = *o.trace_window;
    if (!(std::isfinite(w.begin_us) && std::isfinite(w.end_us) && w.begin_us >= 0 &&
          w.end_us <= kMaxDurationSeconds * 1e6 && w.begin_ns() < w.end_ns())) {
      fail(o, "trace_window", "must be A:B with 0 <= A < B (microseconds, at least 1 ns apart)");
    }
  }
  if (!o.trace.empty() && !o.trace_window) {
    throw OptionError("trace_window", fmt::format("{}: missing; it is required with trace (\"{}\"): give "
                                                  "--trace-window A:B or \"trace_window\": \"A:B\"",
                                                  label(spec_of("trace_window")), o.trace));
  }
  validate_data_relations(o);
  validate_outputs(o);
}

json to_json(const Options& o) {
  json j = json::object();
  for (const auto& s : kSpecs) {
    const bool data_only = std::find(kDataOnlyKeys.begin(), kDataOnlyKeys.end(), s.key) != kDataOnlyKeys.end();
    if (data_only && o.mode != Mode::kData) continue;
    if (s.key == "repeat" && o.repeat == 1) continue;  // absent at 1: single runs' outputs keep their bytes
    j[std::string(s.key)] = s.get(o);  // every other key, default or not: a later default change stays visible
  }
  return j;
}

json to_reusable_json(const Options& o) {
  json j = to_json(o);
  if (o.summary == default_summary_path(o.output)) j.erase("summary");
  if (!o.inflight_samples.empty() && o.inflight_samples == default_inflight_path(o.output))
    j["inflight_samples"] = std::string(kAutoPath);
  return j;
}

namespace {

// A list of sizes "A,B" and/or ranges "A..B" (every power of two from A to B), in the
// order given, each in [min, max], none twice; errors name the option `key`.
std::vector<uint32_t> parse_size_list(const std::string& text, std::string_view key, uint64_t min, uint64_t max) {
  auto bad = [&](const std::string& why) -> OptionError {
    return OptionError(std::string(key), fmt::format("{}: \"{}\" {}", label(spec_of(key)), text, why));
  };
  auto number = [&](std::string_view t) -> uint32_t {
    if (t.empty() || t.size() > 10 || t.find_first_not_of("0123456789") != std::string_view::npos)
      throw bad(fmt::format("has \"{}\" where a size in bytes was expected", t));
    const uint64_t v = std::stoull(std::string(t));
    if (v < min || v > max) throw bad(fmt::format("has {}: sizes must be in [{}, {}]", v, min, max));
    return static_cast<uint32_t>(v);
  };
  std::vector<uint32_t> sizes;
  std::string_view rest = text;
  if (rest.empty()) throw bad("is empty");
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t dots = item.find("..");
    if (dots == std::string_view::npos) {
      sizes.push_back(number(item));
    } else {
      const uint32_t a = number(item.substr(0, dots)), b = number(item.substr(dots + 2));
      if (!is_pow2(a) || !is_pow2(b) || a > b)
        throw bad(fmt::format("has the range {}..{}: a range runs from a power of two to a larger or equal one", a, b));
      for (uint64_t v = a; v <= b; v *= 2) sizes.push_back(static_cast<uint32_t>(v));
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  for (size_t i = 0; i < sizes.size(); ++i)
    for (size_t k = 0; k < i; ++k)
      if (sizes[k] == sizes[i]) throw bad(fmt::format("names {} twice: each size runs once", sizes[i]));
  return sizes;
}

}  // namespace

std::vector<uint32_t> data_value_sizes(const Options& o) {
  return parse_size_list(o.value_size, "value_size", kMinDataValueSize, kMaxDataValueSize);
}

std::vector<uint32_t> rpc_message_sizes(const Options& o) {
  return parse_size_list(o.message_size, "message_size", 1, std::max<uint64_t>(1, o.ring_size / 8));
}

Options options_from_json(const json& j, const std::string& base_dir) {
  Options o;
  bool summary_given = false;
  apply_object(o, j, Ctx{"JSON configuration", base_dir}, summary_given);
  finish(o, summary_given);
  validate(o, /*require_backend=*/false);
  return o;
}

Options options_from_json(const json& j, const std::string& base_dir, const std::vector<std::string>& strict_keys,
                          std::vector<std::string>& dropped) {
  Options o;
  bool summary_given = false;
  apply_object(o, j, Ctx{"JSON configuration", base_dir}, summary_given);
  finish(o, summary_given);
  drop_inapplicable(o, [&](std::string_view key) {
    return std::find(strict_keys.begin(), strict_keys.end(), key) == strict_keys.end();
  }, [&](std::string line) { dropped.push_back(std::move(line)); });
  validate(o, /*require_backend=*/false);
  return o;
}

namespace {

json read_config_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw OptionError("config", fmt::format("config: \"{}\" is not a regular file{}", path,
                                            fs::exists(path, ec) ? "" : " (it does not exist)"));
  }
  std::ifstream in(path);
  if (!in) {
    throw OptionError("config", fmt::format("config: cannot open \"{}\": {}", path, std::strerror(errno)));
  }
  try {
    return parse_json_without_duplicate_keys(in, fmt::format("config: \"{}\"", path));
  } catch (const json::parse_error& e) {
    throw OptionError("config", fmt::format("config: \"{}\" is not valid JSON: {}", path, e.what()));
  } catch (const std::runtime_error& e) {
    throw OptionError("config", e.what());
  }
}

std::string parent_dir(const std::string& path) { return fs::path(path).parent_path().string(); }

}  // namespace

Options options_from_file(const std::string& path) {
  const json j = read_config_file(path);
  Options o;
  bool summary_given = false;
  apply_object(o, j, Ctx{fmt::format("config file \"{}\"", path), parent_dir(path)}, summary_given);
  finish(o, summary_given);
  validate(o, /*require_backend=*/false);
  return o;
}

// ---------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------

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

// Whether --help for `mode` lists the option: it applies to that mode under some transport
// (options that apply only once another is set, zipf_s with zipfian, count as applying).
bool applies_to_mode(std::string_view key, Mode mode);

constexpr std::string_view kFooterCommon =
    "Configuration: --config FILE.json sets any option by its JSON key (shown as [JSON: key]); the command\n"
    "line overrides the file. `benchkv --config FILE.json` alone runs when the file names the backend (or\n"
    "the mode: \"backend\": \"rpc\"). Unknown keys, wrong JSON types and invalid values are errors naming the\n"
    "key (exit status 2, as every input error).\n"
    "Real runs (--transport ucx|mlx5|verbs) start one rank per node under mpirun; the environment variable\n"
    "BENCHKV_PEER_TIMEOUT=SECONDS (default 60) bounds how long a rank waits for a stopped or dead peer\n"
    "before it writes outputs marked incomplete and exits with status 3 (docs/interruptions.md). UCX_TLS\n"
    "chooses UCX's transports; the ones UCX selected are recorded (provenance.ucx_transports).\n"
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
    "benchkv sweep --help (a grid of simulated runs), benchkv compare --help (two results side by side).\n";

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
          : "benchkv: a distributed key-value benchmark over copyrpc (Meta, Delegation, copyrpc-direct, UCX active "
            "messages), on RDMA hardware, UCX or the discrete-event simulator. The options of the KV backends:";
  CLI::App app{description, mode_of_help == Mode::kKv ? "benchkv" : fmt::format("benchkv {}", to_string(mode_of_help))};
  app.footer(std::string(mode_of_help == Mode::kRpc    ? kFooterRpc
                         : mode_of_help == Mode::kData ? kFooterData
                                                       : kFooterKv) +
             std::string(kFooterCommon));
  if (mode_of_help != Mode::kKv) app.formatter(std::make_shared<ModeFormatter>());
  app.get_formatter()->column_width(40);

  constexpr size_t kNumSpecs = std::size(kSpecs);
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
