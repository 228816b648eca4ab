// benchkv options (docs/design_benchkv.md §Benchmark plumbing, §benchkv command line).
//
//   benchkv [options] <meta|delegation|direct|ucx-am>      (run mode kv, over that backend)
//   benchkv <rpc|data> [options]                           (run modes rpc, data: not backends)
//   benchkv --config FILE.json [options] [backend or mode]
//
// Every option has a JSON key: the snake_case of its long option (--queue-depth ->
// "queue_depth"); the positional backend (or mode) is the key "backend". Precedence, lowest first:
// built-in defaults, the config file (--config), the command line. `--help` lists every
// option with its default and JSON key; `--print-config` prints the effective
// configuration as JSON (the form to_json() returns and a config file accepts) and exits.
//
// Paths: `model` given relative in a config file is resolved against the config file's
// directory, given relative on the command line against the working directory; either
// way the Options hold an absolute path. Output paths (output, summary, trace,
// inflight_samples) are used as given. `summary` defaults to `output` with its extension
// replaced by ".summary.json" (re-derived when output changes and summary is not set).
//
// nlohmann/json appears here only forward-declared; CLI11 only in command_line.cpp. The
// implementation, by concern (option_table.hpp lists the files): the option table, which
// options apply to which transport and run mode, validation, config files, the command line.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "apps/benchkv/cli/run_mode.hpp"
#include "core/copyrpc/config.hpp"
#include "apps/benchkv/cli/transport_kind.hpp"
#include "backends/backend_kind.hpp"
#include "backends/policies/loop_policy.hpp"
#include "core/kv/workload.hpp"

namespace bkv::app {

using backend::BackendKind;
enum class StartMode : uint8_t { kSync = 0, kStaggered };
enum class ReportFormat : uint8_t { kText = 0, kCsv, kNone };  // the final report on stdout
// Simulated copyrpc rings: a consumed page goes back to the kernel (kRelease: memory for
// live pages only) or is kept as it is, old bytes and all (kKeep: no system call or page
// fault per page, the pages a ring has touched stay resident; copyrpc writes every ring
// byte before it reads it, so the old bytes are never read); kAuto keeps them when the rings, whole, fit
// in memory (apps/benchkv/simulator/runner.hpp, choose_ring_pages). Output bytes are the
// same either way.
enum class RingPages : uint8_t { kRelease = 0, kKeep, kAuto };
// The simulator's future-event set (sim/selectable_event_set.hpp): binary heap or
// calendar queue. Both run the same events in the same order; only the speed differs.
enum class EventSet : uint8_t { kHeap = 0, kCalendar };
inline constexpr EventSet kDefaultEventSet = EventSet::kCalendar;
using kv::Distribution;

using backend::to_string;                               // BackendKind: "meta", ...
std::string_view to_string(TransportKind t) noexcept;  // "mlx5", "verbs", "ucx", "sim"
std::string_view to_string(StartMode m) noexcept;      // "sync", "staggered"
std::string_view to_string(ReportFormat f) noexcept;   // "text", "csv", "none"
std::string_view to_string(RingPages p) noexcept;      // "release", "keep", "auto"
std::string_view to_string(EventSet e) noexcept;       // "heap", "calendar"

// Trace window [begin_us, end_us) in microseconds of virtual time; JSON/CLI form "A:B".
struct TraceWindow {
  double begin_us = 0;
  double end_us = 0;
  uint64_t begin_ns() const noexcept;  // rounded to the nearest nanosecond
  uint64_t end_ns() const noexcept;
  friend bool operator==(const TraceWindow&, const TraceWindow&) = default;
};

// Limits checked by validate() (besides the relations listed there).
inline constexpr uint64_t kMinRingSize = copyrpc::kMinRingSize;  // copyrpc's own limits
inline constexpr uint64_t kMaxRingSize = copyrpc::kMaxRingSize;
inline constexpr uint32_t kMaxQueueDepth = 1u << 16;
inline constexpr uint32_t kMaxThreads = 1024;  // server_threads, client_threads
inline constexpr uint32_t kMaxRpcEndpoints = 4096;  // rpc: endpoints per server rank
inline constexpr uint32_t kMaxPort = 255;      // RDMA port numbers are u8, from 1
inline constexpr int32_t kMaxGidIndex = 255;
inline constexpr uint32_t kDefaultRingPageBatch = 16;  // ring_page_batch (pages)
inline constexpr uint32_t kMaxRingPageBatch = 1024;    // = PagedMemory::kMaxGiveBackPages
inline constexpr uint32_t kMaxRepeat = 1000;           // repeat: independent repetitions

struct Options {
  // What to run: the positional word, JSON "backend": a KV backend's name (mode kv, over
  // that backend) or the word of mode rpc or data. Mode kv requires a backend to run;
  // rpc and data have none (data's calls go over data_backend).
  Mode mode = Mode::kKv;
  std::optional<BackendKind> backend;
  TransportKind transport = TransportKind::kSim;
  double duration = 30;        // seconds per run
  double interval_ms = 1000;   // epoch length
  uint32_t trim = 3;           // epochs dropped at each end of a run
  uint32_t runs = 3;
  // Independent repetitions: the experiment runs `repeat` times with seeds seed ..
  // seed + repeat - 1 (simulated runs). The JSON key is absent from the effective
  // configuration at 1 (outputs of single runs keep their bytes).
  uint32_t repeat = 1;
  std::string output = "benchkv.csv";
  std::string summary = "benchkv.summary.json";  // effective value (see header comment)
  std::string device;          // RDMA device name ("" = by device_index)
  uint32_t device_index = 0;
  uint32_t port = 1;
  int32_t gid_index = -1;      // -1: InfiniBand LID addressing; >= 0: RoCE GID index
  uint32_t server_threads = 1; // daemon threads per node
  uint32_t client_threads = 1; // client threads per node
  uint32_t queue_depth = 4;    // requests in flight per client (rpc: per endpoint; power of two)
  uint64_t key_range = 1024;   // keys per node
  double read_ratio = 0.5;
  Distribution distribution = Distribution::kUniform;
  double zipf_s = 1.0;
  uint64_t ring_size = uint64_t{1} << 20;  // copyrpc ring bytes (power of two >= 4096)
  uint64_t seed = 1;
  uint32_t np = 2;             // simulator node count
  uint32_t pattern_len = static_cast<uint32_t>(kv::kDefaultPatternLen);
  backend::LoopPolicySettings loop;    // Delegation daemon #0's loop policies; JSON keys = its fields
  std::string model;           // simulator model JSON ("" = built-in defaults)
  StartMode start_mode = StartMode::kSync;
  double start_stagger_us = 0;
  uint32_t start_burst_clients = 0;  // staggered: these first clients of a node start at once
  double startup_ms = 0;       // daemons loop alone this long before the clients start
  double life_s = 0;           // whole-life loop statistics over this life (0 = off)
  std::string inflight_samples;        // output path ("" = off)
  double inflight_sample_interval_us = 10;
  std::string trace;                   // Chrome trace output path ("" = off)
  std::optional<TraceWindow> trace_window;  // required when trace is set
  RingPages ring_pages = RingPages::kAuto;  // simulated rings' consumed pages
  // Simulated rings: consumed pages are given back this many at a time, and as many are
  // prefaulted ahead of the writer (1: page by page, no prefault). The JSON key is
  // absent from the effective configuration at the default (outputs keep their bytes).
  uint32_t ring_page_batch = kDefaultRingPageBatch;
  // The simulator's event set. The JSON key is absent from the effective configuration
  // at the default (outputs keep their bytes).
  EventSet event_set = kDefaultEventSet;
  // Simulated KV runs: the step log (apps/benchkv/simulator/step_log.hpp) is written here ("" =
  // off; the JSON key is absent while off).
  std::string step_log;
  bool progress = true;                // a line per epoch on stderr
  // Simulated KV runs: record every request and store operation and check exactly-once
  // delivery and per-key histories after the run (core/kv/history_oracle.hpp). The JSON
  // key is absent from the effective configuration while false (outputs keep their bytes).
  bool check_exactly_once = false;
  // Simulated KV runs: faults given with --fault (command line only, repeatable), in the
  // syntax of sim/faults.hpp; added to the model's "faults". Not in the JSON configuration:
  // the summary shows them in the model.
  std::vector<std::string> faults;
  ReportFormat report = ReportFormat::kText;  // the final report on stdout
  uint32_t endpoints = 1;              // rpc: endpoints per server rank at the caller
  std::string message_size = "32";     // rpc: payload sizes, "A,B,..." and/or "A..B" (powers of two)
  std::string value_size = "4096";     // data: value sizes, "A,B,..." and/or "A..B" (powers of two)
  BackendKind data_backend = BackendKind::kDelegation;  // data: the backend that carries its calls

  friend bool operator==(const Options&, const Options&) = default;
};

// An invalid option value. key() is the JSON key; what() names the key (and the flag)
// and the bad value.
class OptionError : public std::runtime_error {
 public:
  OptionError(std::string key, const std::string& message)
      : std::runtime_error(message), key_(std::move(key)) {}
  const std::string& key() const noexcept { return key_; }

 private:
  std::string key_;
};

// Checks every value and relation; throws OptionError naming the key. Requires a
// backend unless require_backend is false (e.g. to print a configuration).
// Relations: duration covers at least one interval and more than 2 * trim epochs;
// trace requires trace_window; begin < end in trace_window. An option that does not
// apply to the transport and backend (the simulator's options under a real transport,
// the RDMA device options outside mlx5/verbs, the Delegation loop policies under another
// backend, the KV options under rpc and the rpc options under the KV backends, zipf_s
// without zipfian, start_stagger_us without staggered, trace_window without trace,
// inflight_sample_interval_us without inflight_samples) is an error unless it has its
// default value.
void validate(const Options& o, bool require_backend = true);

// Derived quantities.
uint64_t duration_ns(const Options& o);   // llround(duration * 1e9)
uint64_t interval_ns(const Options& o);   // llround(interval_ms * 1e6)
uint32_t epochs_per_run(const Options& o);  // duration_ns / interval_ns (whole epochs)
std::string default_summary_path(const std::string& output);   // extension -> ".summary.json"
std::string default_inflight_path(const std::string& output);  // extension -> ".inflight.csv" (inflight_samples "auto")
kv::WorkloadConfig workload_config(const Options& o, uint32_t num_ranks);
// data: the value sizes of --value-size, in the order given; "A..B" is every power of two
// from A to B (A and B powers of two). Throws OptionError("value_size", ...).
std::vector<uint32_t> data_value_sizes(const Options& o);
// rpc: the message sizes of --message-size, in the order given (as data_value_sizes); each
// in [1, ring_size / 8]. Throws OptionError("message_size", ...).
std::vector<uint32_t> rpc_message_sizes(const Options& o);
inline constexpr uint32_t kMinDataValueSize = 16;        // the stamp (backends/data/data_node.hpp)
inline constexpr uint32_t kMaxDataValueSize = 64u << 20;
inline constexpr uint64_t kMaxDataStoreBytes = uint64_t{4} << 30;  // key_range x largest value, per node

// The full effective configuration, every key present (objects keep keys sorted, so the
// order is stable). Enum values are their option strings; trace_window "A:B" or "".
nlohmann::json to_json(const Options& o);
// What --print-config prints: to_json(), but the paths that follow `output` by default
// (summary: .summary.json; inflight_samples: "auto", .inflight.csv) are left to follow it,
// so that the printed file reused with another -o does not write over the first run's.
nlohmann::json to_reusable_json(const Options& o);

// Defaults overridden by the keys present in `j` (an object). Unknown keys, wrong JSON
// types and invalid values throw OptionError naming the key; a relative model path is
// resolved against base_dir. The result is validated with require_backend = false.
Options options_from_json(const nlohmann::json& j, const std::string& base_dir);
// The same, except that an option set where it does not apply to the configuration is
// reset to its default and named in `dropped` (one line each), unless its key is one of
// strict_keys (then it is an error, as above).
Options options_from_json(const nlohmann::json& j, const std::string& base_dir,
                          const std::vector<std::string>& strict_keys, std::vector<std::string>& dropped);

// Reads and parses a config file (errors name the file: missing, unreadable, malformed).
Options options_from_file(const std::string& path);

struct ParseResult {
  enum class Action : uint8_t {
    kRun,   // options holds the validated configuration
    kExit,  // help or print-config was printed (exit_status 0), or an error occurred
  };
  Action action = Action::kExit;
  Options options;
  int exit_status = 0;  // for kExit: 0 after help/print-config, 2 for usage errors
  std::string error;    // for kExit with exit_status != 0: the message for stderr
  // One line each: an option the config file sets that does not apply to the chosen
  // transport or backend, dropped (the same on the command line is an error).
  std::vector<std::string> warnings;

  bool should_run() const noexcept { return action == Action::kRun; }
};

// Parses argv. Help and print-config go to `out`; errors are returned, not printed.
ParseResult parse_command_line(int argc, const char* const* argv, std::ostream& out);
ParseResult parse_command_line(int argc, char** argv);  // prints to std::cout

}  // namespace bkv::app
