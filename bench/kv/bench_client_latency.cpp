// What recording request latency costs a client: the same backend::Client with and
// without recording (its kRecordLatency parameter; backend::Node's, for whole nodes),
// side by side in one process, alternating, the fastest of 7 measurements of each kept
// (the least disturbed by the shared machine). Goal: recording < 2 % of the client's
// per-request cost. Setups:
//
//   bare        the client alone on a remote path that answers every call at the
//               client's next poll: the time per request is the client's own work
//               (pattern, issue, poll, counters), the smallest per-request cost there is
//               (also with a diagnostic meter whose clock is the raw TSC, no conversion
//               to ns: what the conversion costs);
//   ipc-2t      one Meta node (np 1, 1 daemon, 1 client: every request local), the
//               daemon on its own thread (CPU 0), the client on this one (CPU 1): real
//               requests over the real shared-memory ipc rings, store lookups included;
//   ipc-1t      the same node, its client and daemon stepped in turn by this thread (the
//               same code without the cross-core line transfers: a smaller per-request
//               cost, so a larger share for recording);
//   deleg-1t    two Delegation nodes (1 daemon, 1 client each) over the instant
//               loopback, every thread stepped in turn by this thread: half the requests
//               local (ipc), half remote (delegation ring, copyrpc, the peer's daemon).
// Each at queue depth 1, 4 and 32; ns per completed request, without / with, the ratio.
//
//   bench_client_latency [bare_requests [path_requests [SETUP,SETUP...]]]
//       defaults 20000000, 1000000, every setup
//   bench_client_latency --one SETUP QD with|without REQUESTS
//       one measurement (after REQUESTS / 10 warm-up requests), for instruction counts:
//       bench/kv/client_latency_callgrind.sh counts only the timed loop (timed_*).
//
// Also printed: what one read of the steady clock, of the meter's clock
// (core/tsc_clock.hpp) and of the raw TSC cost, and which clock the meter uses.
// Results and the command: docs/benchmarks.md §Latency recording in the client.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "apps/benchkv/node/instant_runtime.hpp"
#include "apps/benchkv/real/cpu_pinning.hpp"
#include "backends/client.hpp"
#include "backends/node_backends.hpp"
#include "core/meter.hpp"
#include "core/tsc_clock.hpp"

using namespace bkv;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kReps = 7;
constexpr uint32_t kDepths[] = {1, 4, 32};

volatile uint64_t clock_sink = 0;  // keeps the timed clock reads

// Diagnostic only: the meter's clock without the conversion to ns (raw TSC ticks), so
// the bare client's "with" time tells what the conversion (one per step) costs.
struct RawTscMeter {
  static constexpr bool kEnabled = false;
  void charge(Op, uint32_t = 1) noexcept {}
  void record(Phase, uint32_t) noexcept {}
  void answers_arrive(uint32_t, uint32_t) noexcept {}
  uint64_t now_ns() const noexcept { return tsc_clock::read_tsc(); }
};
static_assert(CostMeter<RawTscMeter>);

// Answers every call at the next poll. The client issues the next request from inside
// the poll's callback (each answer is followed at once by the request that takes its slot),
// so a poll answers the calls made before it, moved aside first: the calls made while it
// answers wait for the next poll. (Iterating and clearing the one list the callback appends
// to lost those calls, and the bare setups spun forever with every request in flight.)
struct InstantRemotePath {
  static constexpr bool kSharedHead = false;
  static constexpr bool kDaemonAnswers = false;
  std::vector<uint64_t>* tokens;     // the calls made since the last poll
  std::vector<uint64_t>* answering;  // the calls this poll answers (empty between polls)
  bool try_call(const kv::Request&, uint64_t token) {
    tokens->push_back(token);
    return true;
  }
  template <class F>
  uint32_t poll(F&& f) {
    answering->swap(*tokens);
    const auto n = static_cast<uint32_t>(answering->size());
    for (uint64_t t : *answering) f(t, kv::Response::put_ok());
    answering->clear();
    return n;
  }
  void after_issue() noexcept {}
};

[[noreturn]] void fail(const std::string& what) {
  fmt::print(stderr, "bench_client_latency: {}\n", what);
  std::exit(1);
}

// Every request completed is recorded once (no sampling), and none failed.
void check_recorded(const metrics::RequestLatency& l, uint64_t completed, const char* setup) {
  if (l.all().count() != completed)
    fail(fmt::format("{}: recorded {} latencies for {} requests", setup, l.all().count(), completed));
}

// ------------------------------------------------------------------------------- bare

template <class ClientT>
[[gnu::noinline]] void timed_bare(ClientT& client, const backend::ClientCounters& counters, uint64_t until) {
  while (counters.completed.load(std::memory_order_relaxed) < until) client.step();
}

template <class Meter, bool kRecord>
double bare_ns_per_request(uint32_t queue_depth, uint64_t requests) {
  backend::NodeConfig node;
  node.rank = 2;  // not a rank of the workload: every request takes the remote path
  node.np = 2;
  node.queue_depth = queue_depth;
  kv::WorkloadConfig wl;
  wl.num_ranks = 2;
  wl.key_range = 1024;
  wl.pattern_len = 4096;
  Meter meter;
  backend::ClientCounters counters;
  std::vector<uint64_t> tokens, answering;  // at most queue_depth each: no allocation when timed
  tokens.reserve(queue_depth);
  answering.reserve(queue_depth);
  backend::Client<Meter, InstantRemotePath, kRecord> client(node, kv::Pattern(wl, 0, 0), {},
                                                            InstantRemotePath{&tokens, &answering},
                                                            meter, counters);
  const uint64_t warm = requests / 10;
  while (counters.completed.load(std::memory_order_relaxed) < warm) client.step();
  const uint64_t done0 = counters.completed.load();
  const auto t0 = Clock::now();
  timed_bare(client, counters, done0 + requests);
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  const uint64_t done = counters.completed.load() - done0;
  if constexpr (kRecord) check_recorded(client.latency(), counters.completed.load(), "bare");
  if (counters.errors.load() != 0) fail("bare: errors");
  return ns / static_cast<double>(done);
}

// ------------------------------------------------------------------------ real paths

enum class Setup { kBare, kBareRawTsc, kIpc2t, kIpc1t, kDeleg1t };
constexpr const char* setup_name(Setup s) {
  switch (s) {
    case Setup::kBare: return "bare";
    case Setup::kBareRawTsc: return "bare-rawtsc";
    case Setup::kIpc2t: return "ipc-2t";
    case Setup::kIpc1t: return "ipc-1t";
    case Setup::kDeleg1t: return "deleg-1t";
  }
  return "?";
}

// np nodes of backend B (1 daemon, 1 client each) over the instant loopback.
template <class B, bool kRecord>
struct PathCluster {
  using NodeT = backend::Node<B, app::InstantRuntime, kRecord>;
  loopback::InstantFabric fabric;
  std::vector<std::unique_ptr<app::InstantRuntime>> rts;
  std::vector<std::unique_ptr<NodeT>> nodes;

  PathCluster(uint32_t np, uint32_t queue_depth) {
    kv::WorkloadConfig wl;
    wl.num_ranks = np;
    wl.key_range = 1024;
    wl.pattern_len = 4096;
    copyrpc::ContextConfig cc;
    cc.ring_size = 1 << 16;
    cc.srq_size = 256;
    for (uint32_t r = 0; r < np; ++r) {
      const backend::NodeConfig nc{r, np, 1, 1, queue_depth, wl.key_range, 64};
      rts.push_back(std::make_unique<app::InstantRuntime>(2, app::RealThreads{}, app::MakeInstantTransport{&fabric, {}}));
      nodes.push_back(std::make_unique<NodeT>(nc, backend::LoopPolicySettings{}, wl, cc, *rts.back()));
    }
    backend::connect_in_process(nodes);
  }
  uint64_t completed() const {
    uint64_t s = 0;
    for (const auto& n : nodes) s += n->counters(0).completed.load(std::memory_order_relaxed);
    return s;
  }
  void round() {
    for (auto& n : nodes) {
      n->step_client(0);
      n->step_daemon(0);
    }
  }
  void check(const char* setup) const {
    for (const auto& n : nodes) {
      const backend::ClientCounters& c = n->counters(0);
      if (c.errors.load() != 0 || c.failed.load() != 0 || n->client_protocol_errors() != 0)
        fail(fmt::format("{}: errors or failed requests", setup));
      if constexpr (kRecord) check_recorded(n->client_latency(0), c.completed.load(), setup);
    }
  }
};

template <class Cluster>
[[gnu::noinline]] void timed_round_robin(Cluster& c, uint64_t until) {
  while (c.completed() < until) c.round();
}

template <class NodeT>
[[gnu::noinline]] void timed_client(NodeT& n, uint64_t until) {
  while (n.counters(0).completed.load(std::memory_order_relaxed) < until) n.step_client(0);
}

// Every thread stepped in turn by this one.
template <class B, bool kRecord>
double one_thread_ns_per_request(uint32_t np, uint32_t queue_depth, uint64_t requests, const char* setup) {
  PathCluster<B, kRecord> c(np, queue_depth);
  while (c.completed() < requests / 10) c.round();
  const uint64_t done0 = c.completed();
  const auto t0 = Clock::now();
  timed_round_robin(c, done0 + requests);
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  c.check(setup);
  return ns / static_cast<double>(c.completed() - done0);
}

// One node: the daemon on its own thread (CPU 0), the client on this one (CPU 1).
template <bool kRecord>
double two_threads_ns_per_request(uint32_t queue_depth, uint64_t requests) {
  PathCluster<backend::MetaBackend, kRecord> c(1, queue_depth);
  auto& node = *c.nodes[0];
  std::atomic<bool> stop{false};
  std::thread daemon([&] {
    runtime::pin_current_thread(0);
    while (!stop.load(std::memory_order_relaxed)) node.step_daemon(0);
  });
  while (c.completed() < requests / 10) node.step_client(0);
  const uint64_t done0 = c.completed();
  const auto t0 = Clock::now();
  timed_client(node, done0 + requests);
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  stop.store(true);
  daemon.join();
  c.check("ipc-2t");
  return ns / static_cast<double>(c.completed() - done0);
}

template <bool kRecord>
double measure(Setup s, uint32_t qd, uint64_t requests) {
  switch (s) {
    case Setup::kBare: return bare_ns_per_request<NullMeter, kRecord>(qd, requests);
    case Setup::kBareRawTsc: return bare_ns_per_request<RawTscMeter, kRecord>(qd, requests);
    case Setup::kIpc2t: return two_threads_ns_per_request<kRecord>(qd, requests);
    case Setup::kIpc1t: return one_thread_ns_per_request<backend::MetaBackend, kRecord>(1, qd, requests, "ipc-1t");
    case Setup::kDeleg1t:
      return one_thread_ns_per_request<backend::DelegationBackend, kRecord>(2, qd, requests, "deleg-1t");
  }
  return 0;
}

Setup parse_setup(const std::string& s) {
  for (Setup x : {Setup::kBare, Setup::kBareRawTsc, Setup::kIpc2t, Setup::kIpc1t, Setup::kDeleg1t})
    if (s == setup_name(x)) return x;
  throw std::invalid_argument("unknown setup \"" + s + "\" (bare, bare-rawtsc, ipc-2t, ipc-1t, deleg-1t)");
}

uint64_t parse_count(const char* arg, const char* what) {
  char* end = nullptr;
  const uint64_t v = std::strtoull(arg, &end, 10);
  if (end == arg || *end != '\0' || v == 0)
    throw std::invalid_argument(std::string(what) + " must be a positive integer, got \"" + arg + "\"");
  return v;
}

void print_clock_reads() {
  constexpr int kReads = 10'000'000;
  NullMeter meter;
  uint64_t sink = meter.now_ns();  // calibrates the TSC clock before timing
  const auto t0 = Clock::now();
  for (int i = 0; i < kReads; ++i) sink += static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  const auto t1 = Clock::now();
  for (int i = 0; i < kReads; ++i) sink += meter.now_ns();
  const auto t2 = Clock::now();
  for (int i = 0; i < kReads; ++i) sink += tsc_clock::read_tsc();
  const auto t3 = Clock::now();
  auto per = [](auto a, auto b) { return std::chrono::duration<double, std::nano>(b - a).count() / kReads; };
  fmt::print("clock read: steady {:.2f} ns, meter {:.2f} ns ({}), raw TSC {:.2f} ns\n", per(t0, t1), per(t1, t2),
             tsc_clock::describe(), per(t2, t3));
  clock_sink = sink;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc > 1 && std::string(argv[1]) == "--one") {
    if (argc != 6) throw std::invalid_argument("usage: --one SETUP QD with|without REQUESTS");
    const Setup s = parse_setup(argv[2]);
    const uint64_t qd = parse_count(argv[3], "QD");
    const std::string rec = argv[4];
    if (rec != "with" && rec != "without") throw std::invalid_argument("expected with or without, got \"" + rec + "\"");
    const uint64_t n = parse_count(argv[5], "REQUESTS");
    if (s == Setup::kIpc2t) runtime::pin_current_thread(1);
    const double ns = rec == "with" ? measure<true>(s, static_cast<uint32_t>(qd), n)
                                    : measure<false>(s, static_cast<uint32_t>(qd), n);
    fmt::print("{} qd {} {}: {:.2f} ns/req over {} requests (meter clock: {})\n", setup_name(s), qd, rec, ns, n,
               tsc_clock::describe());
    return 0;
  }
  const uint64_t bare_requests = argc > 1 ? parse_count(argv[1], "bare_requests") : 20'000'000;
  const uint64_t path_requests = argc > 2 ? parse_count(argv[2], "path_requests") : 1'000'000;
  std::vector<Setup> setups = {Setup::kBare, Setup::kBareRawTsc, Setup::kIpc1t, Setup::kDeleg1t, Setup::kIpc2t};
  if (argc > 3) {
    setups.clear();
    const std::string list = argv[3];
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      setups.push_back(parse_setup(list.substr(at, comma - at)));
      at = comma + 1;
    }
  }
  if (argc > 4) throw std::invalid_argument("too many arguments");
  const unsigned cpus = std::thread::hardware_concurrency();
  fmt::print("bench_client_latency: {} requests per bare measurement, {} per path measurement, {} measurements "
             "each way, alternating, fastest kept; {} CPUs\n",
             bare_requests, path_requests, kReps, cpus);
  print_clock_reads();
  fmt::print("{:>12} {:>4} {:>16} {:>16} {:>8}\n", "setup", "qd", "without (ns/req)", "with (ns/req)", "ratio");
  if (cpus < 2 && std::erase(setups, Setup::kIpc2t) > 0) fmt::print("(ipc-2t skipped: needs 2 CPUs)\n");
  runtime::pin_current_thread(1);  // ipc-2t: the daemon thread takes CPU 0
  for (Setup s : setups) {
    const bool bare = s == Setup::kBare || s == Setup::kBareRawTsc;
    const uint64_t n = bare ? bare_requests : path_requests;
    for (uint32_t qd : kDepths) {
      double without = 1e300, with = 1e300;
      for (int rep = 0; rep < kReps; ++rep) {
        without = std::min(without, measure<false>(s, qd, n));
        with = std::min(with, measure<true>(s, qd, n));
      }
      fmt::print("{:>12} {:>4} {:>16.2f} {:>16.2f} {:>8.3f}\n", setup_name(s), qd, without, with, with / without);
    }
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_client_latency: {}\n", e.what());
  return 2;
}
