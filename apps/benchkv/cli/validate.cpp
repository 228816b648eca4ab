// Each value's range and the relations between values (validate), per run mode where a
// rule is a mode's own; the quantities derived from the values.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/benchkv/cli/applicability.hpp"
#include "apps/benchkv/cli/option_table.hpp"
#include "apps/benchkv/cli/options.hpp"

namespace bkv::app {

using namespace option_detail;
namespace fs = std::filesystem;

namespace {

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

bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Microseconds, nanoseconds: the unit conversions of the time options.
uint64_t rounded_ns(double value, double ns_per_unit) {
  return static_cast<uint64_t>(std::llround(value * ns_per_unit));
}

// A whole number of nanoseconds in seconds, exactly and with no trailing zero
// (9900000 -> "0.0099"): a suggested duration reads as typed and parses back to it.
std::string seconds_of_ns(uint64_t ns) {
  constexpr uint64_t kNsPerS = 1'000'000'000;
  std::string frac = fmt::format("{:09}", ns % kNsPerS);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return fmt::format("{}{}{}", ns / kNsPerS, frac.empty() ? "" : ".", frac);
}

constexpr double kMaxDurationSeconds = 1e7;   // keeps every nanosecond count far inside u64
constexpr uint32_t kMaxEpochs = 10'000'000;   // per run
// Time options in microseconds (a hold, a start spread, a sampling period) are at most
// the longest run: longer ones mean nothing, and past 64-bit nanoseconds their
// conversion is undefined (a 1e300 us start spread started every client at 0).
constexpr double kMaxTimeUs = kMaxDurationSeconds * 1e6;
constexpr const char* kTimeRange = "must be in [0, 1e13] microseconds (at most the longest run, 1e7 s)";

}  // namespace

uint64_t TraceWindow::begin_ns() const noexcept { return rounded_ns(begin_us, 1e3); }
uint64_t TraceWindow::end_ns() const noexcept { return rounded_ns(end_us, 1e3); }

uint64_t duration_ns(const Options& o) { return rounded_ns(o.duration, 1e9); }
uint64_t interval_ns(const Options& o) { return rounded_ns(o.interval_ms, 1e6); }
uint32_t epochs_per_run(const Options& o) {
  const uint64_t iv = interval_ns(o);
  return iv == 0 ? 0 : static_cast<uint32_t>(std::min<uint64_t>(duration_ns(o) / iv, UINT32_MAX));
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

// What runs (the backend, or the mode's word) and every enum value.
void validate_what_runs(const Options& o, bool require_backend) {
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
}

// rpc's endpoints and message sizes, then every option's applicability to the transport
// and run mode.
void validate_applicability(const Options& o) {
  if (o.endpoints < 1 || o.endpoints > kMaxRpcEndpoints)
    fail(o, "endpoints", fmt::format("must be in [1, {}]", kMaxRpcEndpoints));
  rpc_message_sizes(o);  // each size in [1, ring_size / 8]
  if (const Applicability* a = first_inapplicable(o)) throw OptionError(std::string(a->key), inapplicable_message(o, *a));
}

// The run's length: duration, epochs, trim, runs and repetitions (with their rules per
// mode: one message size in rpc, one value size in data).
void validate_run_length(const Options& o) {
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
    fail(o, "duration",
         fmt::format("s is not a whole number of epochs of {} ms (interval_ms): the rest would be counted "
                     "in the next run's first epoch; use {} or {}",
                     o.interval_ms, seconds_of_ns(epochs * interval_ns(o)), seconds_of_ns((epochs + 1) * interval_ns(o))));
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
      {
        // The option may come from a config file (the C1 configs set inflight_samples to
        // "auto"): name both places and the flag that turns it off.
        const std::string flag = std::string(k) == "inflight_samples" ? "inflight-samples"
                                 : std::string(k) == "step_log"       ? "step-log"
                                                                      : "trace";
        fail(o, "repeat",
             fmt::format("> 1 writes no per-repetition {} file, and {} is set (by --{} or the config file's \"{}\"): "
                         "pass --{} \"\" or run one seed",
                         k, k, flag, k, flag));
      }
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
}

// The outputs, the RDMA device, threads, queue depth, workload, ring and node count.
void validate_ranges(const Options& o) {
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
    fail(o, "ring_size", fmt::format("is not a power of two in [{}, 2^{}]", kMinRingSize, std::countr_zero(kMaxRingSize)));
  }
  if (o.np < 1 || o.np > kv::kMaxRanks) fail(o, "np", "must be in [1, 2^20]");
  // (A real run's nodes are its MPI ranks: one alone is refused there, real_ranks_checked.)
  if (o.mode == Mode::kData && o.transport == TransportKind::kSim && o.np < 2)
    fail(o, "np", "must be >= 2 in the data benchmark (its operations go to other nodes)");
  if (o.ring_page_batch < 1 || o.ring_page_batch > kMaxRingPageBatch)
    fail(o, "ring_page_batch", fmt::format("must be in [1, {}]", kMaxRingPageBatch));
}

// The Delegation daemon loop policies, alone and together.
void validate_loop_policies(const Options& o) {
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
}

// The simulated KV runs' start, life, in-flight samples and trace.
void validate_start_and_records(const Options& o) {
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
  validate_what_runs(o, require_backend);
  validate_applicability(o);
  validate_run_length(o);
  validate_ranges(o);
  validate_loop_policies(o);
  validate_start_and_records(o);
  validate_data_relations(o);
  validate_outputs(o);
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
      const auto range = [&](const std::string& why) {
        return bad(fmt::format("has the range {}..{}: {} (a range A..B runs over the powers of two from A to B)", a,
                               b, why));
      };
      if (!is_pow2(a)) throw range(fmt::format("{} is not a power of two", a));
      if (!is_pow2(b)) throw range(fmt::format("{} is not a power of two", b));
      if (a > b) throw range(fmt::format("{} is larger than {}", a, b));
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

}  // namespace bkv::app
