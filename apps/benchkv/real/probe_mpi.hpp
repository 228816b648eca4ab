// `mpirun -np 2 benchkv probe --transport ucx|mlx5|verbs` (docs/your_cluster.md): the probe
// (backends/probe/probe.hpp) between two processes over the transport the rank's entry
// made (real/ucx.cpp, real/rdma.cpp); one code path for every real transport, which is a
// template parameter here.
//
//   both ranks: plan (--scale) -> rank 0 makes the Initiator, rank 1 the Target, each with
//   the plan's queue pairs -> all-to-all of the queue pairs' ConnectInfos -> all-gather of
//   the two registered buffers (the target's window, the initiator's landing) -> barrier
//   -> rank 0 steps the Initiator through the plan's one-thread tests on its main thread,
//   then enters a barrier; rank 1 enters that barrier without waiting
//   (Session::start_barrier) and steps the Target until it completes, so it never waits
//   in a collective while the initiator still needs it -> each test with several posting
//   threads (run_threaded_rate_test): one more transport per thread on each rank, the
//   same exchange, the threads run at once, then each thread's counts are checked against
//   its target's -> rank 0 writes the table and the JSON, as the one-process probe does,
//   with the run's conditions: two processes, their hosts and CPUs (a test of several
//   posting threads that oversubscribed a host is marked), the transport (UCX_TLS and the
//   transports UCX selected, where it applies). Only the main threads call MPI.
//
// SIGINT/SIGTERM (app::stop_signal, installed by Session::start_watchdog): rank 0 looks
// at it every kProbeSignalLoops initiator loops (its main thread, while posting threads
// run); it keeps the tests that finished (written as usual, the JSON marked
// "interrupted") and ends with 128 + the signal, without MPI. Rank 1 looks at it in its
// loop, keeps nothing, says so and ends with the same status (the entry ends through
// end_after_exception, real/mpi_run.hpp). A peer that dies is the watchdog's
// (mpi_orchestration.hpp): the rank ends after the probe's longest phase plus twice the
// peer timeout.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <cstdio>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/cli/stop_signals.hpp"
#include "apps/benchkv/real/mpi_orchestration.hpp"
#include "apps/benchkv/real/transports.hpp"
#include "apps/benchkv/real/ucx_transports.hpp"
#include "apps/benchkv/results/probe_report.hpp"
#include "backends/probe/probe.hpp"
#include "core/transport.hpp"

namespace bkv::real {

// The watchdog's longest phase of a probe (mpi_orchestration.hpp), per unit of --scale:
// the whole plan runs between two collectives. On hardware it takes well under a second;
// over UCX shared memory with two ranks on two cores, a few seconds.
inline constexpr double kProbePhaseSecondsPerScale = 120;
// Initiator loops between two looks at the stop signal; target loops between two tests
// of the pending barrier (and of the signal).
inline constexpr uint32_t kProbeSignalLoops = 256;
inline constexpr uint32_t kProbeBarrierLoops = 64;

// The probe runs between exactly two ranks. Collective-free: every rank decides alone
// (the job's size is the same everywhere); rank 0 says why. Returns 0 when the job has
// two ranks, else the status 2 every rank returns.
inline int probe_ranks_checked(const mpi::Session& s) {
  if (s.size() == 2) return 0;
  if (s.rank() == 0)
    std::fprintf(stderr,
                 "benchkv: probe: %d rank%s: the probe runs between two processes, rank 0 the initiator and rank 1 the "
                 "target (mpirun -np 2)\n",
                 s.size(), s.size() == 1 ? " (no mpirun, or mpirun -np 1)" : "s");
  return 2;
}

// Joins a test's worker threads however the test ends (a signal, an exception): they
// look at `stop` and end.
struct ProbeWorkers {
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> running{0};
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors;
  explicit ProbeWorkers(uint32_t n) : running(n), errors(n) {}
  ProbeWorkers(const ProbeWorkers&) = delete;
  ProbeWorkers& operator=(const ProbeWorkers&) = delete;
  ~ProbeWorkers() { join(); }
  void join() {
    stop.store(true);
    for (std::thread& t : threads)
      if (t.joinable()) t.join();
  }
  void rethrow() const {
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  }
};

// One host's CPUs and the probe's ranks on it (both ranks on one host count): a test of
// T posting threads puts T busy threads of each rank there, one per posting thread on
// rank 0 and one per target thread on rank 1.
struct ProbeHostLoad {
  uint32_t cpus = 1, ranks = 1;
  bool oversubscribed(uint32_t threads) const noexcept { return uint64_t{threads} * ranks > cpus; }
};
static_assert(std::is_trivially_copyable_v<ProbeHostLoad>, "travels as raw bytes");

// The most posting threads a test may have (their counts travel in fixed arrays).
inline constexpr uint32_t kProbeMaxThreads = 16;
using ProbeThreadCounts = std::array<uint64_t, kProbeMaxThreads>;

// One rate test with several posting threads (spec.threads), between the two ranks:
// each rank makes one transport per thread (`make`), rank 0 an Initiator over
// spec.qps / threads queue pairs on each, rank 1 a Target on each; the queue pairs' infos
// and the buffers are exchanged as for the one-thread tests; then every thread runs at
// once, each on its own transport, rank 0's main thread watching the stop signal and
// rank 1's polling the barrier rank 0 enters when its threads have ended. Rank 0 then
// sends what each thread posted, rank 1's threads run until their targets have taken as
// many WRITE+IMMs (or half the peer timeout), and rank 1 sends back what each took.
// Rank 0 returns the merged result with each thread's counts; a target that took other
// than its initiator posted throws (the transport lost or invented messages). Rank 1
// returns nothing. A signal on rank 0 sets *sig and returns nothing, without MPI.
// `yield`: each thread yields the CPU after every loop (more busy threads than CPUs on
// this rank's host: ProbeHostLoad).
template <Transport T, class Make>
std::optional<probe::TestResult> run_threaded_rate_test(const mpi::Session& s, Make& make, const probe::TestSpec& spec,
                                                        uint32_t size, bool yield, int* sig) {
  using Info = typename T::ConnectInfo;
  const bool initiator = s.rank() == 0;
  const uint32_t peer = 1 - static_cast<uint32_t>(s.rank());
  if (spec.threads > kProbeMaxThreads)
    throw std::invalid_argument("probe: at most " + std::to_string(kProbeMaxThreads) + " posting threads");
  const probe::TestSpec share = probe::thread_share(spec);
  const uint32_t n = spec.threads, q = share.qps;
  // Declared in this order so that the threads end before the sides, the sides before
  // their transports.
  std::vector<std::unique_ptr<T>> transports;
  std::vector<std::unique_ptr<probe::Initiator<T>>> inits;
  std::vector<std::unique_ptr<probe::Target<T>>> targets;
  for (uint32_t i = 0; i < n; ++i) {
    transports.push_back(make());
    if (initiator) {
      inits.push_back(std::make_unique<probe::Initiator<T>>(*transports.back(), q, size));
      inits.back()->set_plan({share});
    } else {
      targets.push_back(std::make_unique<probe::Target<T>>(*transports.back(), q, size));
    }
  }
  // Slot `peer` carries this rank's infos: thread i's queue pairs at [i * q, (i + 1) * q).
  std::vector<Info> out(size_t{2} * n * q);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < q; ++j)
      out[(size_t{peer} * n + i) * q + j] = initiator ? inits[i]->local_info(j) : targets[i]->local_info(j);
  const std::vector<Info> in = s.all_to_all(std::span<const Info>(out), size_t{n} * q);
  std::vector<RemoteBuffer> bout(size_t{2} * n);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t j = 0; j < q; ++j) {
      const Info& remote = in[(size_t{peer} * n + i) * q + j];
      if (initiator) inits[i]->connect(j, remote);
      else targets[i]->connect(j, remote);
    }
    bout[size_t{peer} * n + i] = initiator ? inits[i]->landing() : targets[i]->window();
  }
  const std::vector<RemoteBuffer> bin = s.all_to_all(std::span<const RemoteBuffer>(bout), n);
  for (uint32_t i = 0; i < n; ++i) {
    if (initiator) inits[i]->set_remote(bin[size_t{peer} * n + i]);
    else targets[i]->set_remote(bin[size_t{peer} * n + i]);
  }
  s.barrier();

  auto wait_a_little = [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); };
  if (!initiator) {
    std::vector<std::atomic<uint64_t>> expect(n);
    for (auto& e : expect) e.store(UINT64_MAX);
    std::vector<uint64_t> received(n, 0);
    s.start_barrier();
    ProbeWorkers w(n);
    for (uint32_t i = 0; i < n; ++i)
      w.threads.emplace_back([&, i] {
        try {
          probe::Target<T>& t = *targets[i];
          for (uint64_t k = 1;; ++k) {
            t.step();
            if (t.received() >= expect[i].load(std::memory_order_acquire)) break;
            if (k % kProbeBarrierLoops == 0 && w.stop.load(std::memory_order_relaxed)) break;
            if (yield) std::this_thread::yield();
          }
          received[i] = t.received();
        } catch (...) {
          w.errors[i] = std::current_exception();
        }
        w.running.fetch_sub(1);
      });
    auto check_signal = [&] {
      if (const int sg = app::stop_signal(); sg != 0)
        throw mpi::Interrupted(app::signal_name(sg) + " came while the target served the probe", sg);
    };
    while (!s.barrier_done()) {
      check_signal();
      if (w.running.load() != n) break;  // a target failed: its error is rethrown below
      wait_a_little();
    }
    if (w.running.load() != n) {
      w.join();
      w.rethrow();
    }
    const std::vector<ProbeThreadCounts> posted = s.all_gather(ProbeThreadCounts{});
    for (uint32_t i = 0; i < n; ++i) expect[i].store(posted[peer][i], std::memory_order_release);
    const double bound_s = s.collective_deadline_seconds() > 0 ? s.collective_deadline_seconds() / 2 : 30;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(bound_s);
    while (w.running.load() != 0 && std::chrono::steady_clock::now() < until) {
      check_signal();
      wait_a_little();
    }
    w.join();
    w.rethrow();
    ProbeThreadCounts took{};
    std::copy(received.begin(), received.end(), took.begin());
    s.all_gather(took);
    return std::nullopt;
  }

  ProbeWorkers w(n);
  for (uint32_t i = 0; i < n; ++i)
    w.threads.emplace_back([&, i] {
      try {
        probe::Initiator<T>& a = *inits[i];
        for (uint64_t k = 1; a.step(); ++k) {
          if (k % kProbeSignalLoops == 0 && w.stop.load(std::memory_order_relaxed)) break;
          if (yield) std::this_thread::yield();
        }
      } catch (...) {
        w.errors[i] = std::current_exception();
        w.stop.store(true);
      }
      w.running.fetch_sub(1);
    });
  while (w.running.load() != 0) {
    if (*sig == 0 && (*sig = app::stop_signal()) != 0) w.stop.store(true);
    wait_a_little();
  }
  w.join();
  w.rethrow();
  if (*sig != 0) return std::nullopt;
  s.barrier();  // the target's pending barrier
  ProbeThreadCounts posted{};
  std::vector<probe::TestResult> parts;
  for (uint32_t i = 0; i < n; ++i) {
    parts.push_back(inits[i]->results().front());
    posted[i] = parts.back().posted;
  }
  s.all_gather(posted);
  const ProbeThreadCounts took = s.all_gather(ProbeThreadCounts{})[peer];
  probe::TestResult merged = probe::merge_threads(spec, parts);
  for (uint32_t i = 0; i < n; ++i) {
    const probe::TestResult& r = parts[i];
    merged.per_thread.push_back({q, r.posted, r.completed, took[i], r.wqes, r.window_ns, r.busy_fraction()});
    if (took[i] != r.posted || r.completed != r.posted)
      throw std::runtime_error("probe: " + app::test_name(spec) + ": posting thread " + std::to_string(i) + " posted " +
                               std::to_string(r.posted) + " WRITE+IMMs, " + std::to_string(r.completed) +
                               " completed and its target took " + std::to_string(took[i]));
  }
  return merged;
}

// The probe between the two ranks of `s` over transport `t` (this rank's), run by the
// entry of r.transport; `make()` makes another transport of the same kind (a
// std::unique_ptr<T>), one per posting thread of the tests with several. `conditions`:
// the transport's run-wide conditions (name, device, UCX_TLS); the probe adds its own.
// Returns the exit status (rank 1: 0; rank 0: 0, or 1 when the outputs cannot be
// written). Errors throw (the entry aborts the job).
template <Transport T, class Make>
int run_probe_mpi(const mpi::Session& s, T& t, Make make, const ProbeRequest& r, nlohmann::json conditions) {
  using Info = typename T::ConnectInfo;
  static_assert(std::is_trivially_copyable_v<Info>, "queue-pair infos travel as raw bytes");
  const uint32_t rank = static_cast<uint32_t>(s.rank()), peer = 1 - rank;
  const std::vector<probe::TestSpec> plan = app::probe_plan(r.scale);
  std::vector<probe::TestSpec> one_thread;
  for (const probe::TestSpec& spec : plan)
    if (spec.threads == 1) one_thread.push_back(spec);
  const uint32_t qps = app::plan_qps(plan), size = app::plan_max_size(plan);
  const ProbeHostLoad mine{std::max(1u, std::thread::hardware_concurrency()), static_cast<uint32_t>(s.local_size())};

  std::optional<probe::Initiator<T>> init;
  std::optional<probe::Target<T>> target;
  if (rank == 0) {
    init.emplace(t, qps, size);
    init->set_plan(one_thread);
  } else {
    target.emplace(t, qps, size);
  }
  // Queue pairs: slot `peer` carries this rank's infos, one per queue pair.
  std::vector<Info> out(size_t{2} * qps);
  for (uint32_t i = 0; i < qps; ++i) out[size_t{peer} * qps + i] = init ? init->local_info(i) : target->local_info(i);
  const std::vector<Info> in = s.all_to_all(std::span<const Info>(out), qps);
  for (uint32_t i = 0; i < qps; ++i) {
    if (init) init->connect(i, in[size_t{peer} * qps + i]);
    else target->connect(i, in[size_t{peer} * qps + i]);
  }
  const std::vector<RemoteBuffer> buffers = s.all_gather(init ? init->landing() : target->window());
  if (init) init->set_remote(buffers[peer]);
  else target->set_remote(buffers[peer]);
  // The hosts of the two processes, and what UCX selected (collectives).
  std::array<char, 256> host{};
  const std::string name = s.processor_name();
  std::copy_n(name.begin(), std::min(name.size(), host.size() - 1), host.begin());
  const std::vector<std::array<char, 256>> hosts = s.all_gather(host);
  const std::vector<ProbeHostLoad> loads = s.all_gather(mine);
  // A test of T posting threads: this rank's threads yield when its own host is
  // oversubscribed; rank 0 marks the test when either host was.
  auto oversubscribed = [&](uint32_t threads) { return loads[0].oversubscribed(threads) || loads[1].oversubscribed(threads); };
  if constexpr (requires(const T& x) { x.endpoint_descriptions(); }) {
    const nlohmann::json seen = gather_ucx_transports(s, t.endpoint_descriptions());
    if (rank == 0) conditions["ucx_transports"] = seen;
  }
  s.barrier();

  if (target) {
    s.start_barrier();
    for (uint64_t i = 1;; ++i) {
      target->step();
      if (i % kProbeBarrierLoops != 0) continue;
      if (const int sig = app::stop_signal(); sig != 0)
        throw mpi::Interrupted(app::signal_name(sig) + " came while the target served the probe", sig);
      if (s.barrier_done()) break;
    }
    for (const probe::TestSpec& spec : plan)
      if (spec.threads > 1) {
        int unused = 0;
        run_threaded_rate_test<T>(s, make, spec, size, mine.oversubscribed(spec.threads), &unused);
      }
    return 0;
  }

  // Each test that finished is named on stderr, so a long probe says how far it is (the
  // last of init->results() is the test running until the plan is done).
  int sig = 0;
  size_t announced = 0;  // of the one-thread tests
  size_t finished = 0;   // of all
  auto announce = [&](const probe::TestSpec& spec) {
    std::fprintf(stderr, "benchkv probe: %s done (%zu of %zu tests)\n", app::test_name(spec).c_str(), ++finished,
                 plan.size());
  };
  auto announce_finished = [&] {
    for (const size_t n = init->results().size() - (init->done() ? 0 : 1); announced < n; ++announced)
      announce(init->results()[announced].spec);
  };
  for (uint64_t i = 1; init->step(); ++i) {
    if (i % kProbeSignalLoops != 0) continue;
    if ((sig = app::stop_signal()) != 0) break;
    announce_finished();
  }
  if (sig == 0) announce_finished();
  // The results in plan order, each test with several threads in its place; after a
  // signal, the tests that finished.
  std::vector<probe::TestResult> results;
  if (sig == 0) {
    s.barrier();  // the target's pending barrier: it goes on to the tests with several threads
    size_t next_single = 0;
    for (const probe::TestSpec& spec : plan) {
      if (spec.threads == 1) {
        results.push_back(init->results().at(next_single++));
        continue;
      }
      if (sig != 0) continue;
      try {
        if (std::optional<probe::TestResult> m =
                run_threaded_rate_test<T>(s, make, spec, size, mine.oversubscribed(spec.threads), &sig)) {
          m->oversubscribed = oversubscribed(spec.threads);
          announce(spec);
          results.push_back(std::move(*m));
        }
      } catch (const mpi::Interrupted& e) {  // the signal came in one of the test's collectives
        sig = e.signal;
      }
    }
  } else {
    results = init->results();
    if (!init->done() && !results.empty()) results.pop_back();  // the current one is cut
  }

  app::ProbeRun run;
  run.transport = std::string(app::to_string(r.transport));
  run.note = "between two processes (mpirun -np 2), rank 0 the initiator and rank 1 the target, one thread each "
             "(the tests with several posting threads: one transport and one target thread per posting thread), "
             "over the " + run.transport + " transport";
  if (r.transport == app::TransportKind::kUcx)
    run.note += " (UCX_TLS " + conditions.value("UCX_TLS", std::string()) +
                "): the UCX transport's software NIC, not hardware NIC numbers";
  conditions["processes"] = 2;
  conditions["hosts"] = {std::string(hosts[0].data()), std::string(hosts[1].data())};
  conditions["same_host"] = std::string(hosts[0].data()) == std::string(hosts[1].data());
  conditions["scale"] = r.scale;
  conditions["clock"] = "steady clock (TSC where constant)";
  conditions["one_thread"] = false;
  conditions["several_posting_threads"] =
      "run: each posting thread on rank 0 with a transport of its own, its own queue pairs and its own target thread "
      "on rank 1";
  conditions["cpus"] = {loads[0].cpus, loads[1].cpus};
  conditions["ranks_per_host"] = {loads[0].ranks, loads[1].ranks};
  nlohmann::json over = nlohmann::json::array();
  for (const probe::TestResult& t : results)
    if (t.oversubscribed) over.push_back(app::test_name(t.spec));
  conditions["oversubscribed"] = !over.empty();
  if (!over.empty()) {
    conditions["oversubscribed_tests"] = std::move(over);
    conditions["oversubscribed_note"] =
        "these tests put more posting or target threads on a host than it has CPUs: their threads yield the CPU "
        "after each loop, and their rates measure the scheduler (benchkv calibrate ignores them)";
  }
  run.results = std::move(results);
  if (sig != 0)
    conditions["interrupted"] = {{"signal", app::signal_name(sig)},
                                 {"tests_done", run.results.size()},
                                 {"tests_planned", plan.size()}};
  run.conditions = std::move(conditions);
  int status = 0;
  try {
    status = app::write_probe_outputs(run, r.output);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchkv: %s\n", e.what());
    status = 1;
  }
  if (sig == 0) return status;
  std::fprintf(stderr, "benchkv: probe interrupted by %s after %zu of %zu tests%s\n", app::signal_name(sig).c_str(),
               run.results.size(), plan.size(),
               r.output.empty() ? "" : ("; " + r.output + " holds those, marked \"interrupted\"").c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(128 + sig);  // no MPI after a signal (the peer may be gone)
}

}  // namespace bkv::real
