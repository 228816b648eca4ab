#include "apps/benchkv/results/probe_report.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <stdexcept>

#include "apps/benchkv/results/daemon_fit.hpp"
#include "apps/benchkv/results/provenance.hpp"
#include "apps/benchkv/results/results.hpp"
#include "sim/model.hpp"

namespace bkv::app {

using nlohmann::json;
using probe::TestKind;
using probe::TestResult;
using probe::TestSpec;

namespace {

// A rate at k >= this many QPs is on the plateau when the send path is per node.
constexpr uint32_t kPlateauQps = 8;
// Rates over k >= kPlateauQps within this relative spread ((max - min) / mean) are a
// plateau: one send path per node. A rate that still grows with k is not.
constexpr double kFlatSpread = 0.1;
// Above this busy fraction the posting thread, not the NIC, may set the rate.
constexpr double kCpuBoundBusy = 0.9;

json latency_json(std::vector<uint64_t> v) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (uint64_t x : v) sum += double(x);
  auto pct = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * double(v.size())))]; };
  return json{{"n", v.size()}, {"mean", sum / double(v.size())}, {"p50", pct(0.5)}, {"p99", pct(0.99)},
              {"min", v.front()}, {"max", v.back()}};
}

json param(double value, const char* unit, std::vector<std::string> from, const std::string& method,
           json conditions = json::object()) {
  return json{{"value", value}, {"unit", unit}, {"from", std::move(from)}, {"method", method}, {"conditions", std::move(conditions)}};
}

// A CPU cost read off a least-squares line is a time, so it cannot be negative. A negative
// slope or intercept says the line does not hold for these tests (the fixed cost is below
// the clock's resolution, or the time is not linear in the batch), not that the cost is
// negative: the parameter keeps its value for the record and is marked "undetermined" with
// the reason, and `benchkv calibrate` leaves the model's key at the base value.
json cost_param(double value, std::vector<std::string> from, const std::string& method, const char* part,
                json conditions = json::object()) {
  json p = param(value, "ns", std::move(from), method, std::move(conditions));
  if (value < 0)
    p["undetermined"] = std::string("the least-squares ") + part + " is negative (" + json(value).dump() +
                        " ns): the line does not hold for these tests, so it gives no cost";
  return p;
}

// A number of a probe JSON's entry (it comes from a file): finite and not negative.
double entry_number(const json& entry, const char* key, const std::string& where) {
  if (!entry.is_object() || !entry.contains(key) || !entry.at(key).is_number())
    throw std::invalid_argument("probe parameter " + where + " has no numeric \"" + key + "\"");
  const double x = entry.at(key).get<double>();
  if (!std::isfinite(x) || x < 0)
    throw std::invalid_argument("probe parameter " + where + ": \"" + key + "\" is negative or not finite");
  return x;
}

// "K/T" (queue pairs / posting threads, T >= 2) of a wqe_rate_by_qps_threads key; false
// when the key is not that.
bool parse_qps_threads(const std::string& key, uint32_t* k, uint32_t* t) {
  const char* b = key.data();
  const char* e = b + key.size();
  const auto [slash, ek] = std::from_chars(b, e, *k);
  if (ek != std::errc() || slash == e || *slash != '/') return false;
  const auto [end, et] = std::from_chars(slash + 1, e, *t);
  return et == std::errc() && end == e && *t >= 2;
}

// What the tests with several posting threads say about the one-thread plateau, from a
// probe's wqe_rate_by_qps_threads ("K/T" entries) against its wqe_rate_by_qps: over the
// entries at K >= kPlateauQps with a rate, the largest ratio of their rate to one
// thread's over the same K, and their busiest thread's busy fraction. An entry marked
// oversubscribed (its own "oversubscribed"; without one, `run_oversubscribed`, for a
// probe JSON that marks only the run) is no evidence: its threads outnumbered a host's
// CPUs and yielded it to each other after every loop, so its rate is the scheduler's, and
// it is listed in `ignored` instead. The probe derives threads_over_one_thread with this,
// and `benchkv calibrate` decides with it (never with that parameter, which an older
// probe derived from every entry). A malformed entry throws std::invalid_argument.
struct ThreadsEvidence {
  double ratio = 0, busy_max = 0;
  std::vector<std::string> used, ignored;
  bool same_rate() const noexcept { return !used.empty() && std::abs(ratio - 1) <= kFlatSpread; }
  bool cpu_bound() const noexcept { return busy_max > kCpuBoundBusy; }
};

ThreadsEvidence threads_evidence(const json& by_qps, const json& by_threads, bool run_oversubscribed) {
  ThreadsEvidence e;
  if (!by_threads.is_object()) throw std::invalid_argument("probe parameter wqe_rate_by_qps_threads is not an object");
  for (auto it = by_threads.begin(); it != by_threads.end(); ++it) {
    const std::string where = "wqe_rate_by_qps_threads[\"" + it.key() + "\"]";
    uint32_t k = 0, t = 0;
    if (!parse_qps_threads(it.key(), &k, &t))
      throw std::invalid_argument("probe parameter " + where + ": the key is not K/T (queue pairs / posting threads, T >= 2)");
    const json& v = it.value();
    const double rate = entry_number(v, "rate_wqe_per_s", where);
    const double busy = entry_number(v, "busiest_thread_busy_fraction", where);
    if (k < kPlateauQps || rate <= 0) continue;
    const std::string test = v.contains("test") && v.at("test").is_string() ? v.at("test").get<std::string>() : it.key();
    const json over = v.contains("oversubscribed") ? v.at("oversubscribed") : json(run_oversubscribed);
    if (!over.is_boolean()) throw std::invalid_argument("probe parameter " + where + ": \"oversubscribed\" is not a boolean");
    if (over.get<bool>()) {
      e.ignored.push_back(test);
      continue;
    }
    const std::string one = std::to_string(k);
    if (!by_qps.is_object() || !by_qps.contains(one)) continue;
    const double r1 = entry_number(by_qps.at(one), "rate_wqe_per_s", "wqe_rate_by_qps[\"" + one + "\"]");
    if (r1 <= 0) continue;
    e.used.push_back(test);
    e.ratio = std::max(e.ratio, rate / r1);
    e.busy_max = std::max(e.busy_max, busy);
  }
  return e;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Why an oversubscribed test with several posting threads is not used.
constexpr const char* kOversubscribedReason =
    "oversubscribed: their posting and target threads outnumbered a host's CPUs and yielded it after every loop, so "
    "their rates measure the scheduler, not the send path";

// Why calibrate leaves a model key at the base: the keys a fit can write, with the
// measurement that gives each, and the keys no probe test or run metric determines,
// grouped by why. A key belongs to an entry when it equals one of its names or lies under
// one ("nic.latency" holds "nic.latency.base_ns"). reasons_left() uses the first entry
// that holds a key; a key no entry holds falls under kNoReason, which the built-in model
// never reaches (test_probe_e2e checks).
struct FittableKey {
  const char* key;
  const char* given_by;
};
constexpr FittableKey kFittable[] = {
    {"cpu.loop", "the probe's cpu_loop_ns (--from) or the runs' loop metrics (--from-run)"},
    {"cpu.cq_poll", "the probe's cpu_cq_poll_ns (--from)"},
    {"cpu.cqe", "the probe's cpu_cqe_ns (--from)"},
    {"cpu.flush", "the probe's cpu_wqe_build_ns (--from)"},
    {"cpu.doorbell", "the probe's cpu_doorbell_ns (--from)"},
    {"cpu.poll_slot", "runs at several client counts (--from-run)"},
    {"nic.send.engines", "the probe's node_wqe_rate_per_s (--from) with nic.send.per_wqe_ns"},
    {"nic.send.per_wqe_ns", "the probe's node_wqe_rate_per_s (--from)"},
};
struct LeftGroup {
  const char* title;
  std::initializer_list<const char*> keys;
  const char* why;
};
const LeftGroup kLeftGroups[] = {
    {"latencies",
     {"nic.latency", "nic.doorbell_ns", "nic.ack_turnaround_ns", "nic.pcie.read_latency_ns", "nic.pcie.write_latency_ns"},
     "the probe measures WRITE+IMM and READ latency by size (write_imm_latency_by_size, read_latency_by_size), but "
     "each is a sum of these keys, which its tests do not separate; compare the simulated probe of the fitted model "
     "with it and adjust nic.latency.base_ns by hand"},
    {"bandwidths and per-byte costs",
     {"nic.link", "nic.pcie.bandwidth_gbps", "nic.pcie.max_payload_bytes", "nic.pcie.tlp_overhead_bytes",
      "nic.send.per_byte_ns", "nic.recv"},
     "the rate tests post 64-byte messages to a target that only counts them, and the latency tests one message at a "
     "time, so no test is limited by bytes, packets or the receive side"},
    {"NIC caches", {"nic.mtt_cache", "nic.qp_cache"},
     "the probe's 64 queue pairs and two small buffers fit the NIC's caches, so it never sees a miss"},
    {"the send path's structure and formats",
     {"nic.send.qp_serial", "nic.send.qp_window", "nic.send.max_outstanding_reads", "nic.pcie.read_tags",
      "nic.fetch_max_wqes", "nic.blueflame_max_wqes", "nic.inline_max_bytes", "nic.wqe_bytes", "nic.cqe_bytes"},
     "calibrate fits the per-node family only (wqe_rate_by_qps shows whether a per-QP limit holds instead, which is "
     "fitted by hand); the inline limit, BlueFlame and entry sizes are the device's and its driver's, set from their "
     "documentation"},
    {"receiver-not-ready retries", {"nic.rnr"}, "the probe's target keeps its receives posted, so none happens"},
    {"the backends' own costs",
     {"cpu.msg_parse", "cpu.call_encode", "cpu.reply_encode", "cpu.kv_op", "cpu.ring_op", "cpu.channel_op",
      "cpu.client_request", "cpu.ring_reserve", "response_handoff_ns", "response_handoff_unit", "client_wake_ns",
      "client_retry_ns", "ring_head_contention"},
     "the probe's loop has no RPC messages, KV store, shared-memory rings or clients; --from-run records per-event "
     "figures for some of them (daemon costs per event) but cannot split them into these keys"},
    {"run settings", {"faults", "psn_duplicate_detection"}, "fault injection and PSN checks are settings, not costs"},
};
constexpr const char* kNoReason = "no probe test or run metric determines it";

bool holds(const char* name, const std::string& key) {
  const std::string n(name);
  return key == n || (key.size() > n.size() && key.compare(0, n.size(), n) == 0 && key[n.size()] == '.');
}

// The basis entries saying why each key of `left` keeps the base's value: one per group
// ("why left at the base: TITLE" -> "KEYS: WHY"); a fittable key points at its
// "(not fitted)" entry when the fit refused it, else names the measurement that gives it.
void reasons_left(const std::vector<std::string>& left, json& basis) {
  std::map<std::string, std::pair<std::string, std::string>> groups;  // title -> (keys, why)
  auto add = [&](const std::string& title, const std::string& key, const std::string& why) {
    auto& g = groups[title];
    g.first += (g.first.empty() ? "" : ", ") + key;
    g.second = why;
  };
  for (const std::string& k : left) {
    bool placed = false;
    for (const FittableKey& f : kFittable) {
      if (k != f.key) continue;
      const std::string refused = k == "nic.send.engines" ? "nic.send.per_wqe_ns (not fitted)" : k + " (not fitted)";
      if (basis.contains(refused)) add("fitted keys the fit refused", k, "the fit refused its measurement: the \"(not fitted)\" entries say why");
      else add("fitted keys without a measurement", k + " (given by " + f.given_by + ")",
               "the inputs do not hold the measurement that gives it");
      placed = true;
    }
    for (const LeftGroup& g : kLeftGroups) {
      if (placed) break;
      for (const char* name : g.keys)
        if (holds(name, k)) {
          add(g.title, k, g.why);
          placed = true;
          break;
        }
    }
    if (!placed) add("other", k, kNoReason);
  }
  for (const auto& [title, g] : groups) basis["why left at the base: " + title] = g.first + ": " + g.second;
}

// Leaf paths of a JSON object ("cpu.loop", "nic.send.engines").
void leaves(const json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string p = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it.value().is_object() && !it.value().empty() && it.key() != "jitter") leaves(it.value(), p, out);
    else out.push_back(p);
  }
}

}  // namespace

std::vector<TestSpec> probe_plan(double scale) {
  auto n = [scale](uint32_t x) { return std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(x * scale))); };
  std::vector<TestSpec> p;
  for (uint32_t k : {1u, 2u, 3u, 4u, 8u, 16u, 32u, 64u}) p.push_back({TestKind::kRate, k, 1, 64, n(1024), n(4096)});
  for (uint32_t k : {1u, 8u})
    for (uint32_t b : {4u, 16u}) p.push_back({TestKind::kRate, k, b, 64, n(1024), n(4096)});
  // Several posting threads over the plateau's queue pairs: whether one thread set it.
  for (uint32_t k : {8u, 64u})
    for (uint32_t t : {2u, 4u}) p.push_back({TestKind::kRate, k, 1, 64, n(1024), n(4096), t});
  for (uint32_t s : {8u, 64u, 256u, 1024u, 4096u}) p.push_back({TestKind::kWriteLatency, 1, 1, s, n(20), n(200)});
  for (uint32_t s : {8u, 64u, 4096u}) p.push_back({TestKind::kReadLatency, 1, 1, s, n(20), n(200)});
  return p;
}

uint32_t plan_qps(const std::vector<TestSpec>& plan) {
  uint32_t q = 1;
  for (const TestSpec& s : plan) q = std::max(q, s.qps);
  return q;
}
uint32_t plan_max_size(const std::vector<TestSpec>& plan) {
  uint32_t m = 1;
  for (const TestSpec& s : plan) m = std::max(m, s.size);
  return m;
}

std::string test_name(const TestSpec& s) {
  if (s.kind == TestKind::kRate)
    return "rate_k" + std::to_string(s.qps) + "_b" + std::to_string(s.batch) + "_s" + std::to_string(s.size) +
           (s.threads > 1 ? "_t" + std::to_string(s.threads) : std::string());
  return std::string(probe::to_string(s.kind)) + "_s" + std::to_string(s.size);
}

json probe_parameters(const std::vector<TestResult>& results) {
  json p = json::object();
  probe::Line post, poll, loop;
  std::vector<std::string> post_from, poll_from;
  std::set<uint32_t> batches;
  json by_qps = json::object();
  double plateau_sum = 0, busy_max = 0, plateau_min = 0, plateau_max = 0;
  std::vector<std::string> plateau_from;
  json single_post_from = json::array();
  probe::Line single_post;
  // Several posting threads: the rate by "k/threads", the busiest thread's busy fraction
  // and whether the test oversubscribed a host.
  json by_threads = json::object();
  for (const TestResult& r : results) {
    const std::string name = test_name(r.spec);
    loop.merge(r.loop);
    if (r.spec.kind != TestKind::kRate) continue;
    if (r.spec.threads > 1) {
      post.merge(r.post);
      poll.merge(r.poll);
      post_from.push_back(name);
      poll_from.push_back(name);
      by_threads[std::to_string(r.spec.qps) + "/" + std::to_string(r.spec.threads)] =
          json{{"rate_wqe_per_s", r.rate_wqe_per_s()}, {"busiest_thread_busy_fraction", r.busy_fraction()}, {"test", name},
               {"oversubscribed", r.oversubscribed}};
      continue;
    }
    post.merge(r.post);
    poll.merge(r.poll);
    post_from.push_back(name);
    poll_from.push_back(name);
    batches.insert(r.spec.batch);
    if (r.spec.batch == 1) {
      single_post.merge(r.post);
      single_post_from.push_back(name);
      by_qps[std::to_string(r.spec.qps)] = json{{"rate_wqe_per_s", r.rate_wqe_per_s()}, {"busy_fraction", r.busy_fraction()},
                                                {"loop_rate_per_s", r.loop_rate_per_s()}, {"test", name}};
      if (r.spec.qps >= kPlateauQps && r.window_ns > 0) {
        const double rate = r.rate_wqe_per_s();
        plateau_min = plateau_from.empty() ? rate : std::min(plateau_min, rate);
        plateau_max = plateau_from.empty() ? rate : std::max(plateau_max, rate);
        plateau_sum += rate;
        busy_max = std::max(busy_max, r.busy_fraction());
        plateau_from.push_back(name);
      }
    }
  }
  if (post.determined()) {
    p["cpu_wqe_build_ns"] = cost_param(post.slope(), post_from,
                                       "slope of the time to post a doorbell batch against its WQEs (least squares over every timed batch)",
                                       "slope", {{"batches", json(std::vector<uint32_t>(batches.begin(), batches.end()))}, {"size", 64}});
    p["cpu_doorbell_ns"] = cost_param(post.intercept(), post_from, "intercept of the same line: the doorbell of one batch",
                                      "intercept", {{"batches", json(std::vector<uint32_t>(batches.begin(), batches.end()))}});
  }
  if (single_post.n > 0)
    p["cpu_post_ns"] = param(single_post.mean_y(), "ns", single_post_from.get<std::vector<std::string>>(),
                             "mean time to post one WRITE+IMM and ring its doorbell", {{"batch", 1}, {"size", 64}});
  if (poll.determined()) {
    p["cpu_cq_poll_ns"] = cost_param(poll.intercept(), poll_from,
                                     "intercept of the time of a send-CQ poll against the completions it returned (an empty poll)",
                                     "intercept");
    p["cpu_cqe_ns"] = cost_param(poll.slope(), poll_from, "slope of the same line: one completion taken", "slope");
  }
  if (loop.n > 0) {
    std::vector<std::string> all;
    for (const TestResult& r : results)
      if (r.spec.kind == TestKind::kRate) all.push_back(test_name(r.spec));
    p["cpu_loop_ns"] = param(loop.mean_y(), "ns", all, "mean time of a rate test's loop outside its timed polls and posts");
  }
  if (!plateau_from.empty()) {
    const double rate = plateau_sum / double(plateau_from.size());
    p["node_wqe_rate_per_s"] =
        param(rate, "WQE/s", plateau_from,
              "mean WQE rate of one posting thread with one WRITE+IMM per doorbell over k >= 8 queue pairs",
              {{"size", 64}, {"batch", 1}, {"posting_thread_busy_max", busy_max}, {"cpu_bound", busy_max > kCpuBoundBusy},
               {"spread", (plateau_max - plateau_min) / rate}, {"flat", (plateau_max - plateau_min) / rate <= kFlatSpread}});
  }
  p["wqe_rate_by_qps"] = by_qps;
  if (!by_threads.empty()) {
    p["wqe_rate_by_qps_threads"] = by_threads;
    // Several threads' rate over one thread's at the same k, the largest: ~1 when the NIC
    // set both (per node or per QP), up to the thread count when one posting thread set
    // the one-thread rate. Oversubscribed tests are left out; when they are all there
    // is, the ratio over them is kept for the record, marked undetermined.
    ThreadsEvidence e = threads_evidence(by_qps, by_threads, false);
    const std::vector<std::string> ignored = e.ignored;
    const bool only_oversubscribed = e.used.empty() && !ignored.empty();
    if (only_oversubscribed) {
      json all = by_threads;
      for (auto it = all.begin(); it != all.end(); ++it) it.value()["oversubscribed"] = false;
      e = threads_evidence(by_qps, all, false);
    }
    if (e.ratio > 0) {
      json c{{"size", 64}, {"batch", 1}, {"busiest_thread_busy_max", e.busy_max}, {"threads_cpu_bound", e.cpu_bound()},
             {"same_rate", e.same_rate()}};
      if (!ignored.empty()) c["oversubscribed_tests"] = ignored;
      p["threads_over_one_thread"] =
          param(e.ratio, "ratio", e.used,
                "largest ratio, over k >= 8, of the WQE rate of several posting threads to one thread's over the same k "
                "queue pairs" +
                    std::string(only_oversubscribed || ignored.empty() ? "" : ", leaving out the oversubscribed tests"),
                std::move(c));
      if (only_oversubscribed)
        p["threads_over_one_thread"]["undetermined"] = std::string("every test with several posting threads was ") +
                                                       kOversubscribedReason;
    }
  }
  json wl = json::object(), rl = json::object();
  for (const TestResult& r : results) {
    if (r.spec.kind == TestKind::kRate || r.latency_ns.empty()) continue;
    const json l = latency_json(r.latency_ns);
    (r.spec.kind == TestKind::kWriteLatency ? wl : rl)[std::to_string(r.spec.size)] = json{{"p50_ns", l["p50"]}, {"mean_ns", l["mean"]}, {"test", test_name(r.spec)}};
  }
  p["write_imm_latency_by_size"] = wl;
  p["read_latency_by_size"] = rl;
  return p;
}

json probe_json(const ProbeRun& run) {
  json tests = json::array();
  for (const TestResult& r : run.results) {
    json t{{"name", test_name(r.spec)}, {"kind", probe::to_string(r.spec.kind)}, {"qps", r.spec.qps}, {"batch", r.spec.batch},
           {"size", r.spec.size}, {"threads", r.spec.threads}, {"window_ns", r.window_ns}, {"loops", r.loops}, {"busy_fraction", r.busy_fraction()},
           {"loop_rate_per_s", r.loop_rate_per_s()}};
    if (r.spec.kind == TestKind::kRate) {
      t["wqes"] = r.wqes;
      t["rate_wqe_per_s"] = r.rate_wqe_per_s();
      if (!r.per_thread.empty()) {
        json each = json::array();
        for (const TestResult::Thread& x : r.per_thread)
          each.push_back({{"qps", x.qps}, {"posted", x.posted}, {"completed", x.completed}, {"received", x.received},
                          {"wqes", x.wqes}, {"window_ns", x.window_ns}, {"busy_fraction", x.busy_fraction}});
        t["per_thread"] = std::move(each);
      }
      if (r.spec.threads > 1) t["oversubscribed"] = r.oversubscribed;
    } else {
      t["latency_ns"] = latency_json(r.latency_ns);
    }
    tests.push_back(std::move(t));
  }
  return json{{"kind", "benchkv-probe"}, {"version", 1}, {"transport", run.transport}, {"note", run.note},
              {"conditions", run.conditions}, {"provenance", provenance_json(run.simulated)}, {"tests", std::move(tests)},
              {"parameters", probe_parameters(run.results)}};
}

std::string probe_table(const json& j) {
  std::string o = "benchkv probe over " + j.value("transport", std::string("?")) + ": " + j.value("note", std::string()) + "\n";
  append_printf(o, "%-22s %5s %5s %6s %12s %8s %12s %10s %10s\n", "#test", "QPs", "batch", "bytes", "Mwqe/s", "busy",
                "Mloops/s", "lat p50", "lat p99");
  for (const json& t : j.at("tests")) {
    const bool rate = t.at("kind") == "rate";
    if (rate)
      append_printf(o, "%-22s %5u %5u %6u %12.3f %8.3f %12.2f %10s %10s\n", t.at("name").get<std::string>().c_str(),
                    t.at("qps").get<uint32_t>(), t.at("batch").get<uint32_t>(), t.at("size").get<uint32_t>(),
                    t.at("rate_wqe_per_s").get<double>() * 1e-6, t.at("busy_fraction").get<double>(),
                    t.at("loop_rate_per_s").get<double>() * 1e-6, "-", "-");
    else {
      const json& l = t.at("latency_ns");
      append_printf(o, "%-22s %5u %5u %6u %12s %8s %12s %8.0fns %8.0fns\n", t.at("name").get<std::string>().c_str(),
                    t.at("qps").get<uint32_t>(), t.at("batch").get<uint32_t>(), t.at("size").get<uint32_t>(), "-", "-", "-",
                    l.is_null() ? 0.0 : l.at("p50").get<double>(), l.is_null() ? 0.0 : l.at("p99").get<double>());
    }
  }
  o += "#parameters\n";
  for (auto it = j.at("parameters").begin(); it != j.at("parameters").end(); ++it) {
    if (!it.value().contains("value")) continue;
    append_printf(o, "%-22s %14.3f %s%s\n", it.key().c_str(), it.value().at("value").get<double>(),
                  it.value().at("unit").get<std::string>().c_str(), it.value().contains("undetermined") ? "  (undetermined)" : "");
  }
  return o;
}

int write_probe_outputs(const ProbeRun& run, const std::string& output) {
  const json j = probe_json(run);
  const std::string table = probe_table(j);
  std::fwrite(table.data(), 1, table.size(), stdout);
  std::fflush(stdout);
  if (output.empty()) return 0;
  std::ofstream out(output);
  if (!out) throw std::runtime_error("cannot write " + output);
  out << j.dump(1) << "\n";
  if (!out) throw std::runtime_error("cannot write " + output);
  std::fprintf(stderr, "wrote %s\n", output.c_str());
  return 0;
}

json fit_model(const json* probe_in, const std::vector<NamedSummary>& runs, const json& base_model,
               const std::string& base_name) {
  const json no_probe = json{{"kind", "benchkv-probe"}, {"parameters", json::object()}};
  const json& probe = probe_in ? *probe_in : no_probe;
  if (!probe.is_object() || probe.value("kind", std::string()) != "benchkv-probe")
    throw std::invalid_argument("the input is not a benchkv probe JSON (no \"kind\": \"benchkv-probe\")");
  if (!probe.contains("parameters") || !probe.at("parameters").is_object())
    throw std::invalid_argument("the probe JSON has no \"parameters\" object");
  const json& P = probe.at("parameters");
  const sim::Model base = sim::Model::from_json(base_model, base_name);
  json m = base.to_json();
  json basis = json::object();
  const std::string src = "probe (" + probe.value("transport", std::string("?")) + ")";
  auto value = [&](const char* name) -> const json* {
    if (!P.contains(name)) return nullptr;
    const json& v = P.at(name);
    if (!v.is_object() || !v.contains("value") || !v.at("value").is_number())
      throw std::invalid_argument(std::string("probe parameter ") + name + " has no numeric \"value\"");
    const double x = v.at("value").get<double>();
    if (!std::isfinite(x) || x < 0) throw std::invalid_argument(std::string("probe parameter ") + name + " is negative or not finite");
    return &v;
  };
  auto from = [](const json& v) {
    std::string s;
    for (const json& f : v.value("from", json::array())) s += (s.empty() ? "" : ", ") + f.get<std::string>();
    return s;
  };
  std::set<std::string> written;
  auto set_cpu = [&](const char* key, const char* pname, const char* what) {
    if (P.contains(pname) && P.at(pname).is_object() && P.at(pname).contains("undetermined")) {
      const json& u = P.at(pname).at("undetermined");
      if (!u.is_string()) throw std::invalid_argument(std::string("probe parameter ") + pname + ": \"undetermined\" is not a string");
      basis[std::string("cpu.") + key + " (not fitted)"] = src + " " + pname + ": " + u.get<std::string>() + "; left at the base model";
      return;
    }
    const json* v = value(pname);
    if (v == nullptr) return;
    m["cpu"][key] = v->at("value").get<double>();
    written.insert(std::string("cpu.") + key);
    basis[std::string("cpu.") + key] = std::string(what) + ": " + src + " " + pname + " = " + v->at("value").dump() +
                                       " ns, " + v->value("method", std::string()) + " (tests " + from(*v) + ")";
  };
  set_cpu("loop", "cpu_loop_ns", "one loop's own cost");
  set_cpu("cq_poll", "cpu_cq_poll_ns", "an empty CQ poll");
  set_cpu("cqe", "cpu_cqe_ns", "one completion taken");
  set_cpu("flush", "cpu_wqe_build_ns", "building one WQE");
  set_cpu("doorbell", "cpu_doorbell_ns", "one doorbell");
  // One busy posting thread's plateau is the send path's after all when several posting
  // threads, none of them saturated, reach the same rate. Oversubscribed tests do not
  // count (threads_evidence), and the basis lists them as ignored.
  ThreadsEvidence threads;
  if (P.contains("wqe_rate_by_qps_threads")) {
    const json conditions = probe.value("conditions", json::object());
    if (!conditions.is_object()) throw std::invalid_argument("the probe JSON's \"conditions\" is not an object");
    const json run_over = conditions.value("oversubscribed", json(false));
    if (!run_over.is_boolean()) throw std::invalid_argument("the probe JSON's conditions.oversubscribed is not a boolean");
    threads = threads_evidence(P.value("wqe_rate_by_qps", json::object()), P.at("wqe_rate_by_qps_threads"),
                               run_over.get<bool>());
  }
  if (!threads.ignored.empty())
    basis["ignored probe measurements"] = "tests " + joined(threads.ignored) + ": " + kOversubscribedReason +
                                          "; not used as evidence of what set the one-thread plateau";
  const bool several_threads_same_rate = threads.same_rate() && !threads.cpu_bound();
  if (const json* v = value("node_wqe_rate_per_s")) {
    const json& c = v->value("conditions", json::object());
    const std::string busy = c.value("posting_thread_busy_max", json(0)).dump();
    if (!c.value("flat", true)) {
      basis["nic.send.per_wqe_ns (not fitted)"] =
          "the WQE rate still changes with the queue pairs beyond 8 (spread " + c.value("spread", json(0)).dump() +
          ", posting thread busy up to " + busy +
          "): no per-node plateau, so the per-node send path does not describe this NIC (a per-QP limit may: "
          "wqe_rate_by_qps); the send path is left at the base model";
    } else if (c.value("cpu_bound", false) && !several_threads_same_rate) {
      basis["nic.send.per_wqe_ns (not fitted)"] =
          "the posting thread was busy " + busy + " of the plateau's time: the rate may be the CPU's, not the send path's" +
          (threads.used.empty() && !threads.ignored.empty()
               ? ", and the only tests with several posting threads were oversubscribed (ignored), so none shows the "
                 "send path set it"
               : std::string()) +
          "; left at the base model";
    } else {
      const double rate = v->at("value").get<double>();
      if (rate <= 0) throw std::invalid_argument("probe parameter node_wqe_rate_per_s is 0");
      m["nic"]["send"]["engines"] = 1;
      m["nic"]["send"]["per_wqe_ns"] = 1e9 / rate;
      written.insert("nic.send.engines");
      written.insert("nic.send.per_wqe_ns");
      basis["nic.send.engines = 1, nic.send.per_wqe_ns"] =
          "one send path per node (the per-node family), 1e9 / " + src + " node_wqe_rate_per_s = " + v->at("value").dump() +
          " WQE/s: " + v->value("method", std::string()) + " (tests " + from(*v) + ")" +
          (c.value("cpu_bound", false)
               ? "; the posting thread was busy " + busy + " of it, and several posting threads, none saturated, reached "
                 "the same rate (tests " + joined(threads.used) + "), so the send path set it"
               : std::string());
    }
  }
  if (probe_in != nullptr && written.empty())
    throw std::invalid_argument("the probe JSON determines no model parameter (no cpu_* or node_wqe_rate_per_s)");
  if (!runs.empty())
    fit_daemon_costs(runs, m, basis, written, written.count("cpu.cq_poll") ? src + " cpu_cq_poll_ns" : "the base model");
  std::vector<std::string> all;
  leaves(m, "", all);
  std::vector<std::string> left;
  for (const std::string& k : all)
    if (!written.count(k)) left.push_back(k);
  basis["left at the base model (" + base_name + ")"] = joined(left);
  reasons_left(left, basis);
  std::string from_what;
  if (probe_in != nullptr)
    from_what = "a probe over " + probe.value("transport", std::string("?")) + " (" + probe.value("note", std::string()) + ")";
  if (!runs.empty())
    from_what += (from_what.empty() ? "" : " and ") + std::to_string(runs.size()) + " benchkv run summaries";
  m["description"] = "Fitted by benchkv calibrate from " + from_what + " on the base model " + base_name +
                     "; basis names the measurement behind each fitted parameter.";
  m["basis"] = basis;
  sim::Model::from_json(m, "fitted model");  // the file must load
  return m;
}

}  // namespace bkv::app
