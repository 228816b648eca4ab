#include "apps/benchkv/cli/option_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "core/strict_json.hpp"

namespace bkv::app::option_detail {

namespace fs = std::filesystem;

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

namespace {

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

// A value of the field's type from JSON (else a type error naming what was expected).
template <class T>
void read_value(T& out, const json& v, const Spec& s, const Ctx& c) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) type_error(s, c, "a boolean (true or false)", v);
    out = v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) type_error(s, c, "a string", v);
    out = v.get<std::string>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (!v.is_number()) type_error(s, c, "a number", v);
    out = v.get<double>();
  } else if constexpr (std::is_unsigned_v<T>) {
    out = json_unsigned<T>(v, s, c);
  } else {
    static_assert(std::is_signed_v<T>);
    out = json_signed<T>(v, s, c);
  }
}

// The entry of `table` a JSON string names (else an error listing the names).
template <class E, size_t N>
void read_choice(E& out, const std::array<Choice<E>, N>& table, const json& v, const Spec& s, const Ctx& c) {
  if (!v.is_string()) type_error(s, c, fmt::format("a string ({})", choice_list(table)), v);
  const auto name = v.get<std::string>();
  for (const auto& ch : table) {
    if (ch.name == name) {
      out = ch.value;
      return;
    }
  }
  throw OptionError(std::string(s.key), fmt::format("{}: \"{}\" is not one of {} ({})", label(s), name,
                                                    choice_list(table), c.source));
}

template <auto M>
void set_field(Options& o, const json& v, const Spec& s, const Ctx& c) {
  read_value(o.*M, v, s, c);
}

template <auto M>
json get_field(const Options& o) {
  return json(o.*M);
}

// A field of Options::loop (backend::LoopPolicySettings), read and written as the flat key.
template <auto M>
void set_loop_field(Options& o, const json& v, const Spec& s, const Ctx& c) {
  read_value(o.loop.*M, v, s, c);
}

template <auto M>
json get_loop_field(const Options& o) {
  return json(o.loop.*M);
}

template <auto M, const auto& Table>
void set_choice(Options& o, const json& v, const Spec& s, const Ctx& c) {
  read_choice(o.*M, Table, v, s, c);
}

template <auto M, const auto& Table>
json get_choice(const Options& o) {
  return json(std::string(name_of(Table, o.*M)));
}

// A choice among the loop policy settings (o.loop.*M).
template <auto M, const auto& Table>
void set_loop_choice(Options& o, const json& v, const Spec& s, const Ctx& c) {
  read_choice(o.loop.*M, Table, v, s, c);
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

}  // namespace

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

namespace {

// The text of a string value (else a type error naming `expected`); nothing when empty:
// the option is then off.
std::optional<std::string> text_of(const json& v, const Spec& s, const Ctx& c, std::string_view expected) {
  if (!v.is_string()) type_error(s, c, expected, v);
  std::string text = v.get<std::string>();
  if (text.empty()) return std::nullopt;
  return text;
}

// A relative model path is resolved against the context's base directory (the config
// file's directory, or the working directory for the command line) and made absolute.
void set_model(Options& o, const json& v, const Spec& s, const Ctx& c) {
  const std::optional<std::string> text = text_of(v, s, c, "a string (a path)");
  if (!text) {
    o.model.clear();
    return;
  }
  fs::path p(*text);
  if (p.is_relative()) p = fs::path(c.base_dir) / p;
  o.model = fs::absolute(p).lexically_normal().string();
}

}  // namespace

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

namespace {

// "A:B" (microseconds) -> TraceWindow; "" -> none.
void set_trace_window(Options& o, const json& v, const Spec& s, const Ctx& c) {
  const std::optional<std::string> given = text_of(v, s, c, "a string \"A:B\" (microseconds)");
  if (!given) {
    o.trace_window.reset();
    return;
  }
  const std::string& text = *given;
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

// message_size and value_size: a number (one size) or a string (one size, a list or a
// range of sizes), read alike. Written back, message_size's single size is a number and
// value_size's a string, as each was first written, so configurations keep their bytes.
template <std::string Options::*member>
void set_size_list(Options& o, const json& v, const Spec& s, const Ctx& c) {
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    o.*member = std::to_string(v.get<uint64_t>());
    return;
  }
  if (!v.is_string()) type_error(s, c, "a size in bytes, or a string of sizes \"A,B\" / \"A..B\"", v);
  o.*member = v.get<std::string>();
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
     "benchkv rpc|data|sweep|compare|probe|calibrate (each has its --help: \"Other modes\" below)",
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
    {"ring_size", 0, Kind::kUnsigned, kGroupRdma, "BYTES", "copyrpc ring size (a power of two in [4096, 2^31]: a batch, at most a ring, is one RDMA WRITE)",
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
     "kept as they are (keep: faster, no system call or page fault per page, but every page a ring has touched "
     "stays resident; copyrpc writes a ring byte before it reads it, so the old bytes are never read); auto (the default): keep when all the run's rings, whole, take at most half the memory "
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
     &set_size_list<&Options::message_size>, &get_message_size},
    {"value_size", 0, Kind::kString, kGroupData, "SIZES",
     "data: value sizes in bytes, one size, a list \"A,B\" and/or ranges \"A..B\" of every power of two from A to B; each "
     "in [16, 67108864] (64 MiB), keys x the largest size at most 4 GiB of store per node",
     &set_size_list<&Options::value_size>, &get_field<&Options::value_size>},
    {"data_backend", 0, Kind::kChoice, kGroupData, "delegation|meta|direct|ucx-am",
     "data: the backend that carries the calls (ucx-am: --transport ucx only)", BKV_CHOICE(data_backend, kDataBackendChoices)},
};

// Keys only the data benchmark has: written by to_json only for it (they mean nothing
// to the other modes).
constexpr std::array<std::string_view, 2> kDataOnlyKeys{"value_size", "data_backend"};

#undef BKV_FIELD
#undef BKV_CHOICE
#undef BKV_LOOP_FIELD

}  // namespace

std::span<const Spec> specs() { return kSpecs; }

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

[[noreturn]] void fail(const Options& o, std::string_view key, std::string_view rule) {
  const Spec& s = spec_of(key);
  throw OptionError(std::string(key), fmt::format("{}: {} {}", label(s), json_excerpt(s.get(o), 200), rule));
}

}  // namespace bkv::app::option_detail

namespace bkv::app {

using namespace option_detail;

std::string_view to_string(TransportKind t) noexcept { return name_of(kTransportChoices, t); }
std::string_view to_string(StartMode m) noexcept { return name_of(kStartModeChoices, m); }
std::string_view to_string(ReportFormat f) noexcept { return name_of(kReportChoices, f); }
std::string_view to_string(RingPages p) noexcept { return name_of(kRingPagesChoices, p); }
std::string_view to_string(EventSet e) noexcept { return name_of(kEventSetChoices, e); }

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

}  // namespace bkv::app
