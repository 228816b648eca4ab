// `mpirun -np 2 benchkv probe --transport ucx|mlx5|verbs` (docs/your_cluster.md): the probe
// (backends/probe/probe.hpp) between two processes, one thread per rank (the main thread),
// over the transport the rank's entry made (real/ucx.cpp, real/rdma.cpp); one code path
// for every real transport, which is a template parameter here.
//
//   both ranks: plan (--scale) -> rank 0 makes the Initiator, rank 1 the Target, each with
//   the plan's queue pairs -> all-to-all of the queue pairs' ConnectInfos -> all-gather of
//   the two registered buffers (the target's window, the initiator's landing) -> barrier
//   -> rank 0 steps the Initiator through the plan, then enters a barrier; rank 1 enters
//   that barrier without waiting (Session::start_barrier) and steps the Target until it
//   completes, so it never waits in a collective while the initiator still needs it ->
//   rank 0 writes the table and the JSON, as the one-process probe does, with the run's
//   conditions: two processes, their hosts, the transport (UCX_TLS and the transports
//   UCX selected, where it applies).
//
// Tests with several posting threads are left out (the JSON's conditions say so): this
// mode runs one thread per rank, as `benchkv rpc`; several posting threads per rank, each
// with a transport of its own and a target thread of its own on the peer, are not built.
//
// SIGINT/SIGTERM (app::stop_signal, installed by Session::start_watchdog): rank 0 looks
// at it every kProbeSignalLoops initiator loops; it keeps the tests that finished
// (written as usual, the JSON marked "interrupted") and ends with 128 + the signal,
// without MPI. Rank 1 looks at it in its loop, keeps nothing, says so and ends with the
// same status (the entry ends through end_after_exception, real/mpi_run.hpp). A peer that dies is the
// watchdog's (mpi_orchestration.hpp): the rank ends after the probe's longest phase
// plus twice the peer timeout.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
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

// The probe between the two ranks of `s` over transport `t` (this rank's), run by the
// entry of r.transport. `conditions`: the transport's run-wide conditions (name, device,
// UCX_TLS); the probe adds its own. Returns the exit status (rank 1: 0; rank 0: 0, or 1
// when the outputs cannot be written). Errors throw (the entry aborts the job).
template <Transport T>
int run_probe_mpi(const mpi::Session& s, T& t, const ProbeRequest& r, nlohmann::json conditions) {
  using Info = typename T::ConnectInfo;
  static_assert(std::is_trivially_copyable_v<Info>, "queue-pair infos travel as raw bytes");
  const uint32_t rank = static_cast<uint32_t>(s.rank()), peer = 1 - rank;
  const std::vector<probe::TestSpec> plan = app::probe_plan(r.scale);
  std::vector<probe::TestSpec> one_thread;
  for (const probe::TestSpec& spec : plan)
    if (spec.threads == 1) one_thread.push_back(spec);
  const uint32_t qps = app::plan_qps(plan), size = app::plan_max_size(plan);

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
    return 0;
  }

  int sig = 0;
  for (uint64_t i = 1; init->step(); ++i)
    if (i % kProbeSignalLoops == 0 && (sig = app::stop_signal()) != 0) break;
  if (sig == 0) s.barrier();  // the target's pending barrier: it may stop

  app::ProbeRun run;
  run.transport = std::string(app::to_string(r.transport));
  run.note = "between two processes (mpirun -np 2), rank 0 the initiator and rank 1 the target, one thread each, "
             "over the " + run.transport + " transport";
  if (r.transport == app::TransportKind::kUcx)
    run.note += " (UCX_TLS " + conditions.value("UCX_TLS", std::string()) +
                "): the UCX transport's software NIC, not hardware NIC numbers";
  conditions["processes"] = 2;
  conditions["hosts"] = {std::string(hosts[0].data()), std::string(hosts[1].data())};
  conditions["same_host"] = std::string(hosts[0].data()) == std::string(hosts[1].data());
  conditions["scale"] = r.scale;
  conditions["clock"] = "steady clock (TSC where constant)";
  conditions["one_thread"] = true;
  conditions["several_posting_threads"] =
      "not run: one thread per rank (several posting threads per rank, each with its own transport, are not built)";
  run.results = init->results();
  if (sig != 0) {  // keep the tests that finished; the current one is cut
    if (!init->done() && !run.results.empty()) run.results.pop_back();
    conditions["interrupted"] = {{"signal", app::signal_name(sig)},
                                 {"tests_done", run.results.size()},
                                 {"tests_planned", one_thread.size()}};
  }
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
               run.results.size(), one_thread.size(),
               r.output.empty() ? "" : ("; " + r.output + " holds those, marked \"interrupted\"").c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(128 + sig);  // no MPI after a signal (the peer may be gone)
}

}  // namespace bkv::real
