// MPI orchestration of real runs (docs/design_benchkv.md §benchkv command line): one node per MPI rank.
//
//   every rank: pinning plan (node-local rank) -> build its node over the transport ->
//   create the endpoints of the connections involving it (backends/topology.hpp: the
//   same list on every rank) -> all-to-all of the fixed-size EndpointInfo blobs (slot j
//   holds the infos of the connections with rank j, in connection order, padded to the
//   largest per-pair count) -> connect -> threads ready -> barrier -> run_measurement
//   (MpiCoordinator: barriers, per-run all-reduce of totals, epochs and daemon metrics
//   gathered to rank 0) -> barrier -> rank 0 writes the CSV and the summary.
//
// A rank that fails (an exception on the main thread or in one of its threads) aborts
// every rank (Session::abort) instead of leaving the others in a collective.
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "apps/benchkv/real/mpi_orchestration.hpp"
#include "apps/benchkv/real/driver.hpp"
#include "apps/benchkv/real/ucx_transports.hpp"
#include "apps/benchkv/node/node_setup.hpp"
#include "backends/node_backends.hpp"

namespace bkv::real {

struct MpiCoordinator {
  const mpi::Session& s;
  uint32_t num_ranks() const { return static_cast<uint32_t>(s.size()); }
  bool is_root() const { return s.rank() == 0; }
  void barrier() const { s.barrier(); }
  uint64_t sum(uint64_t v) const { return s.allreduce_sum(v); }
  uint64_t max(uint64_t v) const { return s.allreduce_max(v); }
  template <class T>
  std::vector<T> gather(std::span<const T> local) const {
    return s.gather_to_root(local);
  }
  template <class T>
  std::vector<T> all_gather(std::span<const T> local) const {
    if (local.size() != 1) throw std::logic_error("MpiCoordinator: one local node per rank");
    return s.all_gather(local[0]);
  }
};

// Every rank runs the same benchkv build (provenance: commit, build type, compiler,
// library versions) with the same options: what the ranks exchange next (endpoint infos
// per connection, epoch and daemon records) is sized and read by the options, so a rank
// that differs must not take part. Collective: one all-gather of a fixed fingerprint
// (hashes and lengths) and, only when some rank differs, an exchange of the texts so every
// rank can name the first rank that differs from rank 0 and what differs. Throws
// std::runtime_error with that message on every rank (the caller aborts the job). The
// options that choose this host's RDMA device (device, device_index, port, gid_index)
// may differ between hosts and are not compared.
void check_same_run(const mpi::Session& s, const app::Options& o);

// A real run has one rank per node and measures what goes between them (the KV
// benchmark's remote requests, rpc's calls from rank 0 to the others, data's bulk
// operations to other nodes): one rank alone (benchkv started without mpirun, or mpirun
// -np 1) would measure nothing remote and report it as a result. Collective-free: every
// rank decides alone (the job's size is the same everywhere); rank 0 says why. Returns 0
// with 2 ranks or more, else the status 2 of every input error. (The probe has its own
// check: exactly 2 ranks, probe_ranks_checked.)
int real_ranks_checked(const mpi::Session& s, const app::Options& o);

// This rank's threads on the machine's CPUs.
struct RankPlan {
  runtime::PinPlan pins;
  bool oversubscribed = false;  // more threads on this node than CPUs: idle steps yield
};

// Plans the pinning of this rank (NIC's NUMA node first when `device` is named) and
// prints the plan's one-line warning once per group of ranks sharing CPUs. Ranks on the
// same host with the same CPU affinity split those CPUs (each its own slice); a rank that
// mpirun bound to CPUs of its own plans alone on them. Collective (an all-gather).
RankPlan plan_rank(const app::Options& o, const mpi::Session& s, std::string_view device);

// Pinning failures the threads reported (not fatal), one line each.
void print_pin_notes(const std::vector<std::string>& notes, int rank);

// Rank 0 writes the CSV and the summary (with `extra` under "real" and the totals), every
// rank prints nothing but errors; returns the exit status, the same on every rank
// (0 = every issued request completed without error and the outputs were written).
// The summary's "provenance" holds every rank's thread-to-CPU map from `plan` (collective).
// The write goes through write_on_root.
int finish_mpi(const mpi::Session& s, const app::Options& o, const RealResult& res, const nlohmann::json& extra,
               const RankPlan& plan);

// The end of every real mode after its last exchange of results: rank 0 runs `write` (its
// outputs, returning its status) while the other ranks wait for it under a heartbeat
// (Session::run_with_heartbeat), so that a write slower than the peer timeout (a FIFO, a
// slow network file system) does not end them, and rank 0 stopped, dead or unreachable
// still does, within about the peer timeout: "benchkv: rank 1: MPI_Allreduce(heartbeat)
// did not complete within ...; ending this rank (rank 0 writes the outputs)", status 3
// (rank 0, for a lost peer, finishes its write first). After it every rank reaches
// MPI_Finalize together. Collective. Returns the largest of rank 0's status and the other
// ranks' `own_status`, the same on every rank; 128 + the signal, said on stderr, when
// SIGINT or SIGTERM came meanwhile (the measurement had ended: rank 0's outputs are
// whole). An exception from `write` is rethrown on rank 0 once every rank is through.
int write_on_root(const mpi::Session& s, const std::function<int()>& write, int own_status = 0);

// Where rank `rank` writes an output of its own when a run ends early: rank 0 at `path`,
// rank r at `path` with ".rank<r>" before its extension (out.csv -> out.rank1.csv,
// out.summary.json -> out.rank1.summary.json).
std::string rank_output_path(const std::string& path, uint32_t rank);
// `o` with its CSV and summary at rank_output_path(..., rank): the outputs rank `rank`
// writes of its own (rank 0: `o`'s paths unchanged).
app::Options rank_own_outputs(const app::Options& o, uint32_t rank);

// The end of a rank whose measurement was cut short (RealResult::incomplete: a
// collective missed its deadline, mpi::PeerLost, or SIGINT/SIGTERM came,
// mpi::Interrupted). No MPI call is made (a peer may be gone): every rank prints its own
// totals on stderr and writes its own epochs, so that no survivor's measurement is lost
// whichever rank died: the CSV (its own rows; the other ranks' are zero) and a summary
// marked "incomplete" with the reason, "ranks_reported": [its rank] and its own totals,
// failed and unanswered counts included, and `extra` (the transport's details, as
// finish_mpi writes them) under "real"; after a signal also "interrupted": {"signal",
// "run", "epochs_done", "gone_ranks", and "failed_endpoints" when some had stopped before
// the signal}; and the "provenance" every summary has, with this rank's threads (from
// `plan`) and `extra`'s "ucx_transports" (the caller's: this rank's endpoints, no
// exchange). Rank 0 writes to the named outputs, rank r to rank_output_path(..., r).
// After a lost peer, the other ranks then wait for rank 0's outputs as long as rank 0
// answers their polls (Session::write_after_peer_lost: rank 0 writes on a thread, its main
// thread answers), so that their exit does not make mpirun end the job while a live rank 0
// writes; a rank 0 stopped, dead or unreachable misses an answer and the rank ends within
// the peer timeout (twice it for the first answer). Ends the process with
// kPeerLostExitCode (MPI_Finalize would wait for the lost peer), or 128 + the signal.
[[noreturn]] void finish_incomplete(const mpi::Session& s, const app::Options& o, const RealResult& res,
                                    const nlohmann::json& extra, const RankPlan& plan);

// SIGINT/SIGTERM stopped this rank where it keeps nothing: the set-up before a
// measurement, or a server (a rank other than 0) in the rpc mode, which measures nothing
// (rank 0 writes what was measured). Says so on stderr, naming the peers on this host
// already gone, and ends the process with 128 + the signal, without MPI.
[[noreturn]] void interrupted_without_outputs(const mpi::Session& s, const mpi::Interrupted& e);

// The end of a real run whose set-up or measurement threw, called from a `catch (...)`
// (it rethrows the exception in flight): SIGINT/SIGTERM where nothing measured is kept
// (the set-up, or an rpc server; the KV and data measurements write their own:
// finish_incomplete, measure_data_mpi) ends as interrupted_without_outputs; an input error
// (app::OptionError, e.g. an output path) aborts every rank with status 2, as on one
// machine; any other std::exception with status 1. Anything else propagates.
[[noreturn]] void end_after_exception(const mpi::Session& s);

// A rank of a real rpc or data run that SIGINT/SIGTERM stopped where it keeps what it
// measured (rpc: rank 0; data: every rank; real/rpc.hpp, real/data.hpp): the summary's
// marks as finish_incomplete writes them for the KV modes, "incomplete": {"reason",
// "ranks_reported": [this rank]} and "interrupted": {"signal", "run",
// "epochs_done" (of the last kept run, when one is kept), "gone_ranks"}. Prints the
// rank's line (`reason`, where it stopped, `counts`) on stderr first.
struct InterruptMarks {
  nlohmann::json incomplete, interrupted;
};
InterruptMarks interrupt_marks(const mpi::Session& s, int sig, const std::vector<app::RunResults>& runs,
                               const std::string& counts);

// Ends the process after `write()` (the mode's outputs), with its status, or with 128 +
// `sig` when it throws (its message on stderr); stdout and stderr flushed, no MPI and no
// teardown (a peer may be gone, and nothing may wait for one).
[[noreturn]] void exit_after_outputs(int sig, const std::function<int()>& write);

// The end of a rank of a real rpc or data run that SIGINT/SIGTERM stopped where it keeps
// what it measured, once `res` (an RpcResult or a DataResult) holds the cut run's counts: marks it (interrupt_marks; the
// stderr line counts the `what` issued, completed and never answered), then
// exit_after_outputs(sig, write).
template <class Result, class Write>
[[noreturn]] void write_interrupted_and_exit(const mpi::Session& s, int sig, Result& res, const std::string& what,
                                             const Write& write) {
  InterruptMarks m = interrupt_marks(s, sig, res.runs,
                                     std::to_string(res.issued) + " " + what + " issued, " +
                                         std::to_string(res.completed) + " completed, " +
                                         std::to_string(res.unanswered) + " never answered");
  res.incomplete = std::move(m.incomplete);
  res.interrupted = std::move(m.interrupted);
  exit_after_outputs(sig, write);
}

// The connections of `conns` between this rank and every peer, in connection order.
inline std::vector<std::vector<size_t>> connections_by_peer(const std::vector<backend::Connection>& conns,
                                                            uint32_t rank, uint32_t np, size_t& per_pair) {
  std::vector<std::vector<size_t>> by_peer(np);
  std::map<std::pair<uint32_t, uint32_t>, size_t> pair_count;
  for (size_t k = 0; k < conns.size(); ++k) {
    const auto& c = conns[k];
    ++pair_count[{std::min(c.rank_a, c.rank_b), std::max(c.rank_a, c.rank_b)}];
    backend::LocalSide side;
    // A connection within this rank is wired locally (run_node_mpi), not exchanged.
    if (!backend::within_rank(c) && backend::local_side(c, rank, side)) by_peer[side.peer_rank].push_back(k);
  }
  per_pair = 1;  // the same on every rank (computed from the same list)
  for (const auto& [pair, n] : pair_count) per_pair = std::max(per_pair, n);
  return by_peer;
}

// Builds this rank's node of copyrpc backend B over runtime `rt`, wires it to the peers
// and measures. `rt` must outlive the call (the node, destroyed on return, uses it).
// `extra`: the transport's details for the summary, should the run end incomplete.
template <class B, class R>
RealResult run_node_mpi(const mpi::Session& s, const app::Options& o, R& rt, const RankPlan& plan,
                        const ProgressFn& progress, const nlohmann::json& extra) {
  using NodeT = backend::Node<B, R>;
  using Info = typename NodeT::Info;
  static_assert(std::is_trivially_copyable_v<Info>, "endpoint infos travel as raw bytes");
  const uint32_t np = static_cast<uint32_t>(s.size()), rank = static_cast<uint32_t>(s.rank());
  const uint32_t D = o.server_threads, C = o.client_threads;
  const app::NodeSetup ns = app::node_setup(o, rank, np);
  NodeT node(ns.node, ns.loop, ns.workload, ns.context, rt);

  const auto conns = NodeT::connections(ns.node);
  size_t per_pair = 0;
  const auto by_peer = connections_by_peer(conns, rank, np, per_pair);
  std::vector<Info> out(size_t{np} * per_pair);
  for (uint32_t j = 0; j < np; ++j)
    for (size_t i = 0; i < by_peer[j].size(); ++i) {
      const size_t k = by_peer[j][i];
      node.create_endpoint(k, conns[k]);
      out[j * per_pair + i] = node.local_info(k);
    }
  const std::vector<Info> in = s.all_to_all(std::span<const Info>(out), per_pair);
  for (uint32_t j = 0; j < np; ++j)
    for (size_t i = 0; i < by_peer[j].size(); ++i) node.connect(by_peer[j][i], in[j * per_pair + i]);
  for (size_t k = 0; k < conns.size(); ++k)  // both ends on this rank (NIC loopback)
    if (backend::within_rank(conns[k]) && conns[k].rank_a == rank) {
      node.create_endpoint(k, conns[k]);
      node.connect(k, backend::End::kA, node.local_info(k, backend::End::kB));
      node.connect(k, backend::End::kB, node.local_info(k, backend::End::kA));
    }
  node.start();

  std::vector<typename Driver<NodeT>::Local> locals{{&node, rank, plan.pins}};
  Driver<NodeT> drv(std::move(locals), D, C, plan.oversubscribed);
  drv.spawn();
  print_pin_notes(drv.pin_notes(), s.rank());
  MpiCoordinator coord{s};
  RealResult res = run_measurement(drv, o, coord, progress);
  // Before the node is torn down: its transport may wait for the lost peer.
  if (!res.incomplete.empty()) {
    nlohmann::json details = extra;
    if (const nlohmann::json own = own_ucx_transports(rt); !own.is_null()) details["ucx_transports"] = own;
    finish_incomplete(s, o, res, details, plan);
  }
  s.barrier();  // no rank tears its node down while a peer may still use it
  return res;
}

// run_node_mpi for the backend the options name (the run-time choice, made here).
template <class R>
RealResult run_node_mpi(const mpi::Session& s, const app::Options& o, R& rt, const RankPlan& plan,
                        const ProgressFn& progress, const nlohmann::json& extra) {
  if (!o.backend) throw std::invalid_argument("no backend given");
  return backend::with_node_backend(*o.backend,
                                    [&]<class B>() { return run_node_mpi<B>(s, o, rt, plan, progress, extra); });
}

}  // namespace bkv::real
