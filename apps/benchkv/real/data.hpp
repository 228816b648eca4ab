// `benchkv data` on a real transport under MPI (UCX; mlx5 and verbs where a device
// exists): per rank, daemon #0 and the clients of backends/data/data_node.hpp, all
// stepped in turn by the main thread, each with its own transport (UCP worker, or queue
// pairs and CQs on the device); or the ucx-am data node (backends/ucx_am/ucx_am_data.hpp)
// with the same loop. One experiment per value size, each with fresh transports and nodes.
//
// Ending a size: after a barrier every rank measures its runs on its own clock, stops
// issuing and keeps stepping (serving its peers) for kDataDrainSeconds; a request still in
// flight after that is reported as lost (exit status 1). Then a barrier, and rank 0
// gathers the CSV rows, the bytes and the latency histograms.
//
// SIGINT/SIGTERM (app::stop_signal, looked at while a rank steps through an epoch and the
// drain, and in every collective): every rank keeps what it measured, so that no rank's
// epochs are lost whichever rank the signal reached. Rank 0's runs gathered before stay
// whole (every rank's rows and figures); another rank's hold its own rows and figures
// (the other ranks' rows zero). The current run ends at its last finished epoch with the
// rank's own figures (left out when none of its kept epochs finished); the runs and value
// sizes after it are not run. The rank stops issuing, steps for at most
// kInterruptDrainSeconds, writes the CSV and the summary marked "interrupted" and
// "incomplete" with "ranks_reported": [its rank] (as the KV modes do, real/mpi_run.hpp's
// finish_incomplete; rank 0's totals are every rank's for the sizes that ended and its
// own for the one cut, another rank's its own throughout), rank 0 at the named outputs
// and rank r at rank_output_path(..., r), and ends with 128 + the signal, without MPI. A
// signal before the first size's measurement started keeps nothing.
#pragma once

#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/results/data_results.hpp"
#include "apps/benchkv/real/mpi_orchestration.hpp"
#include "apps/benchkv/real/mpi_run.hpp"
#include "apps/benchkv/real/ucx_transports.hpp"
#include "apps/benchkv/node/node_setup.hpp"
#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/cli/stop_signals.hpp"
#include "apps/benchkv/results/results.hpp"
#include "apps/benchkv/results/rpc_results.hpp"
#include "backends/data/data_node.hpp"

namespace bkv::real {

inline constexpr double kDataDrainSeconds = 2;

// One rank's data node as the measuring loop sees it (copyrpc nodes below; ucx-am data in
// real/ucx.cpp):
//   void step();                       daemon #0, then every client, once
//   const data::DataClientCounters& counters(uint32_t c) const;
//   const copyrpc::RttHistogram& latency(uint32_t c) const;
//   void restart_latency_max(uint32_t c);  a new maximum, at a window's start
//   uint64_t in_flight(uint32_t c) const;
//   uint64_t errors() const;           protocol errors of daemon and clients
//   uint64_t rejected() const;         requests the daemon answered with a DataError
//   void stop_issuing();
// build(cfg) makes and connects the node of one value size (collectives inside are fine:
// every rank calls it at the same point).
template <class Build>
int measure_data_mpi(const mpi::Session& s, const app::Options& o, Build build, nlohmann::json extra) {
  const uint32_t np = static_cast<uint32_t>(s.size()), rank = static_cast<uint32_t>(s.rank());
  if (np < 2) throw std::logic_error("measure_data_mpi: fewer than 2 ranks (real_ranks_checked refuses them first)");
  const uint32_t C = o.client_threads;
  const std::vector<uint32_t> sizes = app::data_value_sizes(o);
  const uint32_t epochs = app::epochs_per_run(o);
  const uint64_t duration = app::duration_ns(o), interval = app::interval_ns(o);
  using Clock = std::chrono::steady_clock;
  auto ns_since = [](Clock::time_point t0) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  };

  app::DataResult res;
  // The outputs: rank 0's at the end or after a signal, at the named paths; another
  // rank's after a signal only, its own, at rank_output_path(..., rank) and without the
  // report on stdout (rank 0 prints the job's).
  auto write_outputs = [&] {
    extra["ranks"] = np;
    if (rank == 0) return app::write_data_outputs(o, res, "real", extra);
    app::Options own = rank_own_outputs(o, rank);
    own.report = app::ReportFormat::kNone;
    return app::write_data_outputs(own, res, "real", extra);
  };
  bool measuring = false;  // the first size's measurement started (a signal keeps what finished)
  for (uint32_t si = 0; si < sizes.size(); ++si) {
    const data::DataNodeConfig cfg = app::data_node_config(o, rank, np, sizes[si]);
    decltype(build(cfg)) node;
    // This size's totals already added to res, and whether res.runs.back() is a run cut
    // by a signal whose counts are not set yet.
    bool size_counted = false, run_open = false;
    uint64_t run_issued = 0, run_completed = 0;
    try {
      node = build(cfg);
      if constexpr (requires { node->endpoint_descriptions(); })  // UCX: what it selected (collective)
        if (si == 0) extra["ucx_transports"] = gather_ucx_transports(s, node->endpoint_descriptions());
      s.barrier();

      auto step_all = [&] { node->step(); };
      auto completed_of = [&](uint32_t c) { return node->counters(c).completed.load(std::memory_order_relaxed); };
      auto snapshot = [&](copyrpc::RttHistogram& h, uint64_t& bytes, bool window_opens) {
        h = copyrpc::RttHistogram{};
        bytes = 0;
        for (uint32_t c = 0; c < C; ++c) {
          if (window_opens) node->restart_latency_max(c);
          h.merge(node->latency(c));
          bytes += node->counters(c).bytes.load(std::memory_order_relaxed);
        }
      };
      std::vector<uint64_t> last(C, 0);
      uint64_t last_t = 0;
      measuring = true;
      const Clock::time_point t0 = Clock::now();
      for (uint32_t r = 0; r < o.runs; ++r) {
        app::RunResults rr(si * o.runs + r, np, C, epochs, o.trim);
        copyrpc::RttHistogram start_h, end_h;
        uint64_t start_bytes = 0, end_bytes = 0;
        // This run with the rank's own figures: a run cut by a signal (the epochs it
        // finished), or on a rank other than 0 a whole one (rank 0 keeps every rank's).
        auto push_own = [&] {
          app::DataRunStats st;
          st.value_size = sizes[si];
          st.run = si * o.runs + r;
          st.ops = rr.kept_requests();
          st.duration_ns = rr.kept_duration_ns();
          st.bytes = end_bytes - start_bytes;
          st.latency = end_h.since(start_h);
          res.stats.push_back(std::move(st));
          res.runs.push_back(std::move(rr));
        };
        auto keep_own = [&] {
          if (rr.epochs_done() <= rr.first_kept_epoch()) return;
          push_own();
          run_open = true;
        };
        for (uint32_t e = 0; e < epochs; ++e) {
          const uint64_t deadline = uint64_t{r} * duration + uint64_t{e + 1} * interval;
          while (ns_since(t0) < deadline && app::stop_signal() == 0) step_all();
          if (const int sig = app::stop_signal(); sig != 0) {  // the run ends at its last finished epoch
            rr.set_epochs_done(e);
            keep_own();
            throw mpi::Interrupted(app::signal_name(sig) + " came during an epoch", sig);
          }
          const uint64_t now = ns_since(t0);
          for (uint32_t c = 0; c < C; ++c) {
            rr.record(rank, c, e, completed_of(c) - last[c], now - last_t);
            last[c] = completed_of(c);
          }
          last_t = now;
          if (e + 1 == rr.first_kept_epoch()) snapshot(start_h, start_bytes, true);
          if (rr.kept(e)) snapshot(end_h, end_bytes, false);  // (kept up to date for a signal)
          // Counted from 1 like every human line, per size.
          if (o.progress && rank == 0)
            std::fprintf(stderr, "value size %u: run %u/%u epoch %u/%u\n", sizes[si], r + 1, o.runs, e + 1, epochs);
        }
        uint64_t issued = 0, completed = 0;
        for (uint32_t c = 0; c < C; ++c) {
          issued += node->counters(c).issued.load();
          completed += node->counters(c).completed.load();
        }
        rr.set_counts(issued - run_issued, completed - run_completed);
        // Every rank's rows and figures to rank 0.
        std::vector<app::EpochRecord> rows;
        std::vector<copyrpc::RttHistogram> ranks_kept;
        uint64_t bytes = 0, run_iss = 0, run_comp = 0;
        try {
          rows = s.gather_to_root(std::span<const app::EpochRecord>(rr.rank_records(rank)));
          const copyrpc::RttHistogram kept = end_h.since(start_h);
          ranks_kept = s.gather_to_root(std::span<const copyrpc::RttHistogram>(&kept, 1));
          bytes = s.allreduce_sum(end_bytes - start_bytes);
          run_iss = s.allreduce_sum(rr.issued());
          run_comp = s.allreduce_sum(rr.completed());
        } catch (const mpi::Interrupted&) {
          keep_own();  // whole on rank 0, its figures alone
          throw;
        }
        run_issued = issued;
        run_completed = completed;
        if (rank == 0) {
          for (uint32_t j = 0; j < np; ++j) {
            auto dst = rr.rank_records(j);
            std::copy_n(rows.begin() + std::ptrdiff_t(j) * std::ptrdiff_t(dst.size()), dst.size(), dst.begin());
          }
          rr.set_counts(run_iss, run_comp);
          app::DataRunStats st;
          st.value_size = sizes[si];
          st.run = si * o.runs + r;
          st.ops = rr.kept_requests();
          st.duration_ns = rr.kept_duration_ns();
          st.bytes = bytes;
          for (const copyrpc::RttHistogram& h : ranks_kept) st.latency.merge(h);
          res.stats.push_back(std::move(st));
          res.runs.push_back(std::move(rr));
        } else {
          push_own();
        }
      }
      node->stop_issuing();
      const Clock::time_point drain_start = Clock::now();
      while (std::chrono::duration<double>(Clock::now() - drain_start).count() < kDataDrainSeconds &&
             app::stop_signal() == 0)  // (a signal: the next collective throws)
        step_all();
      uint64_t issued = 0, completed = 0, errors = node->errors(), lost = 0;
      for (uint32_t c = 0; c < C; ++c) {
        issued += node->counters(c).issued.load();
        completed += node->counters(c).completed.load();
        errors += node->counters(c).errors.load();
        lost += node->in_flight(c);
      }
      // The drain's completions belong to the last run of this size. Rank 0 counts every
      // rank's, another rank its own (what it would write after a later signal).
      auto counted = [&](uint64_t own) {
        const uint64_t all = s.allreduce_sum(own);
        return rank == 0 ? all : own;
      };
      const uint64_t extra_iss = counted(issued - run_issued), extra_comp = counted(completed - run_completed);
      res.runs.back().set_counts(res.runs.back().issued() + extra_iss, res.runs.back().completed() + extra_comp);
      res.issued += counted(issued);
      res.completed += counted(completed);
      res.errors += counted(errors);
      res.rejected += counted(node->rejected());
      if constexpr (requires { node->rma_counts(); }) {
        const std::array<uint64_t, 3> n = node->rma_counts();
        const char* names[3] = {"ucp_get", "ucp_put", "read_write_as_am"};
        for (int i = 0; i < 3; ++i) {
          const uint64_t sum = counted(n[i]);
          nlohmann::json& slot = extra["ucx_rma"][names[i]];
          slot = (slot.is_null() ? uint64_t{0} : slot.get<uint64_t>()) + sum;
        }
      }
      if (s.allreduce_sum(lost) > 0 && rank == 0)
        std::fprintf(stderr, "benchkv data: requests still in flight %.0f s after the last run of size %u\n",
                     kDataDrainSeconds, sizes[si]);
      size_counted = true;
      s.barrier();
    } catch (const mpi::Interrupted& e) {
      if (!measuring) throw;
      // The rank keeps what finished: its requests drain locally for a moment (a peer may
      // be gone), the cut run's counts include them, then the outputs, without MPI.
      uint64_t issued = 0, completed = 0, errors = 0, lost = 0, rejected = 0;
      if (node) {
        node->stop_issuing();
        auto in_flight = [&] {
          uint64_t n = 0;
          for (uint32_t c = 0; c < C; ++c) n += node->in_flight(c);
          return n;
        };
        const Clock::time_point drain_start = Clock::now();
        while (in_flight() > 0 &&
               std::chrono::duration<double>(Clock::now() - drain_start).count() < kInterruptDrainSeconds)
          node->step();
        errors = node->errors();
        rejected = node->rejected();
        for (uint32_t c = 0; c < C; ++c) {
          issued += node->counters(c).issued.load();
          completed += node->counters(c).completed.load();
          errors += node->counters(c).errors.load();
        }
        lost = in_flight();
      }
      if (run_open) res.runs.back().set_counts(issued - run_issued, completed - run_completed);
      if (!size_counted) {
        res.issued += issued;
        res.completed += completed;
        res.errors += errors;
        res.rejected += rejected;
        res.unanswered += lost;
      }
      write_interrupted_and_exit(s, e.signal, res, "data operations", write_outputs);
    }
  }
  // The other ranks wait while rank 0 writes; every rank exits with the worst status.
  return write_on_root(s, write_outputs, res.errors == 0 && res.issued == res.completed ? 0 : 1);
}

// A copyrpc data node of one rank: daemon #0 and the clients, each with its own transport
// (T; make() returns a std::unique_ptr<T> to a new one), connected to every other rank.
template <class T>
class CopyrpcDataRank {
 public:
  using Daemon = data::DataDaemon<T>;
  using Client = data::DataClient<T>;
  using Info = typename Daemon::Ctx::Info;

  template <class Make>
  CopyrpcDataRank(const mpi::Session& s, const app::Options& o, const data::DataNodeConfig& cfg, Make& make)
      : C_(cfg.clients),
        store_(cfg.rank, cfg.key_range, cfg.max_value_bytes, cfg.np * cfg.clients * cfg.queue_depth + 1),
        buffers_(cfg.clients, cfg.slice_bytes()),
        ring_(shm::Segment::create_process(data::data_ring_bytes(cfg.backend, cfg.clients, cfg.queue_depth))) {
    const uint32_t np = cfg.np, rank = cfg.rank, C = C_;
    const copyrpc::ContextConfig cc = app::rpc_context_config(o);
    transports_.push_back(make());
    daemon_ = std::make_unique<Daemon>(*transports_.back(), cc, cfg, store_, buffers_, ring_.bytes());
    for (uint32_t c = 0; c < C; ++c) {
      transports_.push_back(make());
      clients_.push_back(std::make_unique<Client>(*transports_.back(), cc, cfg, c, buffers_, ring_.bytes()));
    }
    // Endpoint infos, 2C per pair: [0, C) the client side, [C, 2C) the daemon side
    // (Delegation and Meta use entry C only: daemon to daemon).
    std::vector<Info> out(size_t{np} * 2 * C);
    std::vector<std::vector<uint32_t>> client_ep(np, std::vector<uint32_t>(C)), daemon_ep(np, std::vector<uint32_t>(C));
    for (uint32_t j = 0; j < np; ++j) {
      if (j == rank) continue;
      Info* blob = out.data() + size_t{j} * 2 * C;
      if (data::daemon_calls_for_clients(cfg.backend)) {
        daemon_ep[j][0] = daemon_->create_endpoint_to(j);
        blob[C] = daemon_->context().local_info(daemon_ep[j][0]);
      } else {
        for (uint32_t c = 0; c < C; ++c) {
          client_ep[j][c] = clients_[c]->create_endpoint_to(j);
          blob[c] = clients_[c]->context()->local_info(client_ep[j][c]);
          daemon_ep[j][c] = daemon_->create_serving_endpoint();
          blob[C + c] = daemon_->context().local_info(daemon_ep[j][c]);
        }
      }
    }
    const std::vector<Info> in = s.all_to_all(std::span<const Info>(out), 2 * C);
    for (uint32_t j = 0; j < np; ++j) {
      if (j == rank) continue;
      const Info* blob = in.data() + size_t{j} * 2 * C;
      if (data::daemon_calls_for_clients(cfg.backend)) {
        daemon_->context().connect(daemon_ep[j][0], blob[C]);
      } else {
        for (uint32_t c = 0; c < C; ++c) {
          clients_[c]->context()->connect(client_ep[j][c], blob[C + c]);  // to j's daemon
          daemon_->context().connect(daemon_ep[j][c], blob[c]);            // from j's client c
        }
      }
    }
  }

  void step() {
    daemon_->step();
    for (auto& c : clients_) c->step();
  }
  const data::DataClientCounters& counters(uint32_t c) const { return clients_[c]->counters(); }
  const copyrpc::RttHistogram& latency(uint32_t c) const { return clients_[c]->latency(); }
  void restart_latency_max(uint32_t c) { clients_[c]->restart_latency_max(); }
  std::vector<std::string> endpoint_descriptions() const
    requires requires(const T& t) { t.endpoint_descriptions(); }
  {
    std::vector<std::string> out;
    for (const auto& t : transports_) out.insert(out.end(), t->endpoint_descriptions().begin(), t->endpoint_descriptions().end());
    return out;
  }
  uint64_t in_flight(uint32_t c) const { return clients_[c]->in_flight(); }
  uint64_t errors() const {
    uint64_t n = daemon_->protocol_errors();
    for (const auto& c : clients_) n += c->protocol_errors();
    return n;
  }
  uint64_t rejected() const { return daemon_->server_counters().rejected_total(); }
  // UCX: how the owner's READs and WRITEs travelled (transports/ucx/ucx_rma.hpp), summed
  // over this rank's transports: {ucp_get, ucp_put, on the AM path}.
  std::array<uint64_t, 3> rma_counts() const
    requires requires(const T& t) { t.rma_counters(); }
  {
    std::array<uint64_t, 3> n{};
    for (const auto& t : transports_) {
      const auto c = t->rma_counters();
      n[0] += c.gets, n[1] += c.puts;
      n[2] += c.am_not_announced + c.am_outside_region + c.am_behind_am + c.am_zero_length;
    }
    return n;
  }
  void stop_issuing() {
    for (auto& c : clients_) c->stop_issuing();
  }

 private:
  uint32_t C_;
  // Declared in construction order; destroyed in reverse: nodes, then their transports,
  // then the store, buffers and ring the transports registered. A transport's destructor
  // still progresses its worker, which serves a peer's pending READ of these regions
  // (ASan saw UCX read freed client buffers there when the buffers went first).
  kv::BlobStore store_;
  data::ClientBuffers buffers_;
  shm::Segment ring_;
  std::vector<std::unique_ptr<T>> transports_;
  std::unique_ptr<Daemon> daemon_;
  std::vector<std::unique_ptr<Client>> clients_;
};

// The copyrpc data backends (Delegation, Meta, direct) over transport T.
template <class T, class Make>
int run_data_mpi(const mpi::Session& s, const app::Options& o, Make make, nlohmann::json extra) {
  return measure_data_mpi(
      s, o, [&](const data::DataNodeConfig& cfg) { return std::make_unique<CopyrpcDataRank<T>>(s, o, cfg, make); },
      std::move(extra));
}

}  // namespace bkv::real
