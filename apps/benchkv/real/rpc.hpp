// `benchkv rpc` on real transports under MPI (UCX, mlx5, verbs): one thread per rank
// (the main thread), one copyrpc context on the transport the runtime makes for thread 0.
//
// Rank 0 calls, every other rank answers (backends/rpc/rpc_bench.hpp). Only the caller
// measures: after one barrier (everyone connected), it times runs and epochs on its own
// clock, so the servers never wait in a collective while a call needs them. At the end
// the caller drains its calls, sends each server a stop request, waits for the answers,
// and all ranks meet in a final barrier; rank 0 writes the CSV, the summary and the
// table. The servers' CSV rows are zeros (they complete no calls of their own).
//
// SIGINT/SIGTERM (app::stop_signal, looked at while rank 0 steps through an epoch and in
// every collective): rank 0 keeps what finished. The current run ends at its last
// finished epoch (left out when none of its kept epochs finished), the runs and message
// sizes after it are not run; rank 0 stops issuing, steps for at most
// kInterruptDrainSeconds, writes the CSV and the summary marked "interrupted" and
// "incomplete" (as the KV modes do, real/mpi_run.hpp's finish_incomplete) and ends with
// 128 + the signal, without MPI. A server keeps nothing: it says so and ends with the
// same status. A signal before the first size's measurement started keeps nothing.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/real/mpi_orchestration.hpp"
#include "apps/benchkv/real/mpi_run.hpp"
#include "apps/benchkv/real/ucx_transports.hpp"
#include "apps/benchkv/node/node_setup.hpp"
#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/cli/stop_signals.hpp"
#include "apps/benchkv/results/results.hpp"
#include "apps/benchkv/results/rpc_results.hpp"
#include "backends/rpc/rpc_bench.hpp"

namespace bkv::real {

// Seconds a caller waits for its last calls, or for the stop answers, before it gives up.
inline constexpr double kRpcDrainLimitSeconds = 10;

template <class R>
int run_rpc_mpi(const mpi::Session& s, const app::Options& o, R& rt, nlohmann::json extra) {
  using T = typename R::Transport;
  using Thread = rpc::RpcThread<T>;
  using Info = typename Thread::Ctx::Info;
  static_assert(std::is_trivially_copyable_v<Info>, "endpoint infos travel as raw bytes");
  const uint32_t np = static_cast<uint32_t>(s.size()), rank = static_cast<uint32_t>(s.rank());
  if (np < 2) throw std::logic_error("run_rpc_mpi: fewer than 2 ranks (real_ranks_checked refuses them first)");
  const uint32_t E = o.endpoints;
  const std::vector<uint32_t> sizes = app::rpc_message_sizes(o);
  using Clock = std::chrono::steady_clock;
  auto ns_since = [](Clock::time_point t0) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  };
  // SIGINT/SIGTERM on a server: it keeps nothing; the caller (run_ucx, run_rdma) says so
  // and ends the rank (mpi::Interrupted).
  const auto stop_if_signalled = [] {
    if (const int sig = app::stop_signal(); sig != 0) throw mpi::Interrupted(app::signal_name(sig) + " came", sig);
  };
  app::RpcResult res;
  // Rank 0's outputs, at the end or after a signal.
  auto write_outputs = [&] {
    extra["ranks"] = np;
    return app::write_rpc_outputs(o, res, "real", extra);
  };
  bool measuring = false;  // rank 0: the first size's measurement started (a signal keeps what finished)
  // One experiment per message size, each with its own context and endpoints.
  for (uint32_t si = 0; si < sizes.size(); ++si) {
    Thread thr(rt.transport(0), app::rpc_context_config(o), app::rpc_config(o, sizes[si]), rank == 0);
    // Rank 0: the counts of this size already added to res (its last barrier may still be
    // interrupted), and whether a run is open (its counts not yet set).
    bool size_counted = false, run_open = false;
    uint64_t run_issued = 0, run_completed = 0;
    try {
      // Endpoints: rank 0 has E to each server, a server E to rank 0; infos all-to-all, E per
      // pair (unused pairs carry default infos, never read).
      std::vector<Info> out(size_t{np} * E);
      std::vector<std::vector<uint32_t>> eps(np);
      for (uint32_t j = 0; j < np; ++j) {
        if (j == rank || (rank != 0 && j != 0)) continue;
        for (uint32_t i = 0; i < E; ++i) {
          const uint32_t ep = thr.create_endpoint();
          eps[j].push_back(ep);
          out[size_t{j} * E + i] = thr.context().local_info(ep);
        }
      }
      const std::vector<Info> in = s.all_to_all(std::span<const Info>(out), E);
      for (uint32_t j = 0; j < np; ++j)
        for (uint32_t i = 0; i < eps[j].size(); ++i) thr.context().connect(eps[j][i], in[size_t{j} * E + i]);
      if constexpr (requires(const T& t) { t.endpoint_descriptions(); })  // UCX: what it selected (collective)
        if (si == 0) extra["ucx_transports"] = gather_ucx_transports(s, rt.transport(0).endpoint_descriptions());
      s.barrier();

      if (rank != 0) {
        while (!thr.stopped() && app::stop_signal() == 0) thr.step();
        stop_if_signalled();
        s.barrier();
        continue;
      }

      const uint32_t epochs = app::epochs_per_run(o);
      const uint64_t duration = app::duration_ns(o), interval = app::interval_ns(o);
      measuring = true;
      const Clock::time_point t0 = Clock::now();
      uint64_t last_completed = 0, last_t = 0;
      copyrpc::RttHistogram kept_start_rtt, kept_rtt;  // the kept epochs' round trips
      auto open_window = [&] {  // a run's kept window opens: a new maximum, the counts noted
        thr.restart_rtt_max();
        kept_start_rtt = thr.rtt();
      };
      for (uint32_t r = 0; r < o.runs; ++r) {
        res.runs.emplace_back(si * o.runs + r, np, 1, epochs, o.trim);
        run_open = true;
        app::RunResults& rr = res.runs.back();
        app::RpcRunStats st;
        st.run = si * o.runs + r;
        st.message_size = sizes[si];
        for (uint32_t e = 0; e < epochs; ++e) {
          const uint64_t deadline = uint64_t{r} * duration + uint64_t{e + 1} * interval;
          while (ns_since(t0) < deadline && app::stop_signal() == 0) thr.step();
          if (const int sig = app::stop_signal(); sig != 0) {  // the run ends at its last finished epoch
            rr.set_epochs_done(e);
            if (rr.epochs_done() > rr.first_kept_epoch()) {
              st.calls = rr.kept_requests();
              st.duration_ns = rr.kept_duration_ns();
              st.rtt = std::move(kept_rtt);
              res.stats.push_back(std::move(st));
            } else {
              res.runs.pop_back();
              run_open = false;
            }
            throw mpi::Interrupted(app::signal_name(sig) + " came during an epoch", sig);
          }
          const uint64_t now = ns_since(t0), completed = thr.counters().completed.load(std::memory_order_relaxed);
          rr.record(0, 0, e, completed - last_completed, now - last_t);
          for (uint32_t j = 1; j < np; ++j) rr.record(j, 0, e, 0, now - last_t);
          last_completed = completed;
          last_t = now;
          if (e + 1 == rr.first_kept_epoch()) open_window();
          if (rr.kept(e)) kept_rtt = thr.rtt().since(kept_start_rtt);  // (kept up to date for a signal)
          if (o.progress) {
            const std::string line = app::format_rpc_progress(rr, o.runs, e, si * o.runs);
            std::fprintf(stderr, "%s%s\n", sizes.size() > 1 ? ("message size " + std::to_string(sizes[si]) + ": ").c_str() : "",
                         line.c_str());
          }
        }
        st.calls = rr.kept_requests();
        st.duration_ns = rr.kept_duration_ns();
        st.rtt = std::move(kept_rtt);
        open_window();  // the next run's window opens here when it trims nothing
        res.stats.push_back(std::move(st));
        const uint64_t issued = thr.counters().issued.load(), completed = thr.counters().completed.load();
        rr.set_counts(issued - run_issued, completed - run_completed);
        run_issued = issued;
        run_completed = completed;
        run_open = false;
      }

      // Drain, then stop the servers.
      thr.stop_issuing();
      const Clock::time_point drain_start = Clock::now();
      auto overdue = [&] { return std::chrono::duration<double>(Clock::now() - drain_start).count() > kRpcDrainLimitSeconds; };
      while (thr.in_flight() > 0) {
        thr.step();
        if (overdue()) throw std::runtime_error("rpc: calls still in flight 10 s after the last run: a server stopped answering");
      }
      for (uint32_t j = 1; j < np; ++j) thr.request_stop(eps[j].front());
      while (thr.stops_acked() < np - 1) {
        thr.step();
        if (overdue()) throw std::runtime_error("rpc: a server did not answer its stop request within 10 s");
      }
      app::RunResults& last = res.runs.back();
      last.set_counts(last.issued() + thr.counters().issued.load() - run_issued,
                      last.completed() + thr.counters().completed.load() - run_completed);
      res.issued += thr.counters().issued.load();
      res.completed += thr.counters().completed.load();
      res.errors += thr.counters().errors.load();
      size_counted = true;
      s.barrier();
    } catch (const mpi::Interrupted& e) {
      if (rank != 0 || !measuring) throw;
      // Rank 0 keeps what finished: its calls drain locally for a moment (a server may be
      // gone), the open run's counts include them, then the outputs, without MPI.
      thr.stop_issuing();
      const Clock::time_point drain_start = Clock::now();
      while (thr.in_flight() > 0 &&
             std::chrono::duration<double>(Clock::now() - drain_start).count() < kInterruptDrainSeconds)
        thr.step();
      const uint64_t issued = thr.counters().issued.load(), completed = thr.counters().completed.load();
      if (run_open) res.runs.back().set_counts(issued - run_issued, completed - run_completed);
      if (!size_counted) {
        res.issued += issued;
        res.completed += completed;
        res.errors += thr.counters().errors.load();
        res.unanswered += thr.in_flight();
      }
      write_interrupted_and_exit(s, e.signal, res, "calls", write_outputs);
    }
  }
  return write_on_root(s, write_outputs);  // the servers wait while rank 0 writes
}

}  // namespace bkv::real
