// One node (one MPI rank, or one simulated node) of a backend: its store, its
// shared-memory channels, its copyrpc contexts, its daemon and client threads.
//
// Node<B, R> composes backend B from its traits (DelegationBackend, MetaBackend,
// DirectBackend; see backends/node_backends.hpp for the run-time choice):
//   B::NodeResources           node-level resources besides ipc and flux (built with the node)
//   B::Daemon0<T, Waker>       daemon #0
//   B::Worker<T, Waker>        daemons 1..D-1
//   B::RemotePath<T>           the clients' remote path (backends/client.hpp)
//   B::kStandingContexts       threads owning a context whatever the connections
//   B::connections(np, D, C)   which threads hold endpoints to which (backends/topology.hpp)
//   B::connection_count(np, D, C)  its size, without building it
// Daemons are built from DaemonWiring and the NodeResources, remote paths from
// ClientWiring and the NodeResources (backends/daemon_services.hpp).
//
// Built in three steps, the same way for the simulator, the threaded loopback and MPI:
//   Node<B, R> node(cfg, ...);                  // channels, store, contexts
//   for k in connections(): node.create_endpoint(k, conn[k])
//   exchange local_info(k) with the peer rank, node.connect(k, peer_info)
//   node.start();                               // daemons and clients
// then each thread calls step(thread) in its loop (real runtime) or is scheduled
// (simulator). Threads: daemons 0..D-1, clients D..D+C-1.
//
// R, the runtime, supplies per thread the transport (threads owning a context) and the
// meter, and the waker clients are woken with:
//   R::Transport, R::Waker, T& transport(thread), T::Meter& meter(thread), Waker& waker()
//
// kRecordLatency = false: clients without latency recording (backends/client.hpp), for
// measuring what recording costs on the real paths (bench/kv/bench_client_latency.cpp).
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/client.hpp"
#include "backends/daemon_services.hpp"
#include "backends/topology.hpp"
#include "core/copyrpc/context.hpp"
#include "core/shm/segment.hpp"

namespace bkv::backend {

template <class B, class R, bool kRecordLatency = true>
class Node {
 public:
  using Backend = B;
  using T = typename R::Transport;
  using Meter = typename T::Meter;
  using Waker = typename R::Waker;
  using Ctx = copyrpc::Context<T, CallToken>;
  using Info = typename Ctx::Info;
  using Daemon0 = typename B::template Daemon0<T, Waker>;
  using Worker = typename B::template Worker<T, Waker>;
  using RemotePath = typename B::template RemotePath<T>;
  using ClientT = Client<Meter, RemotePath, kRecordLatency>;

  Node(const NodeConfig& cfg, const LoopPolicySettings& policy, const kv::WorkloadConfig& wl,
       const copyrpc::ContextConfig& ccfg, R& rt)
      : cfg_(checked(cfg)), policy_(policy), wl_(wl), ccfg_(ccfg), rt_(rt), store_(cfg.rank, cfg.key_range) {
    const uint32_t D = cfg.daemons, C = cfg.clients;
    // ipc: one server per daemon, every client connected to every daemon.
    const shm::IpcConfig icfg{C, cfg.queue_depth};
    for (uint32_t d = 0; d < D; ++d) {
      ipc_segs_.push_back(shm::Segment::create_process(shm::IpcLayout<Request, Response>::segment_size(icfg)));
      ipc_servers_.push_back(std::make_unique<IpcServerT>(ipc_segs_.back().bytes(), icfg));
    }
    resources_ = std::make_unique<typename B::NodeResources>(cfg);
    if (D > 1) {
      flux_net_ = std::make_unique<shm::FluxNetwork<FluxMsg, CallToken>>(D);
      for (uint32_t d = 0; d < D; ++d) flux_nodes_.push_back(std::make_unique<FluxNodeT>(flux_net_->node(d)));
    }
    ep_of_rank_.assign(D + C, std::vector<uint32_t>(cfg.np, ~0u));
    ctxs_.resize(D + C);
    if constexpr (B::kStandingContexts == StandingContexts::kDaemon0) context(0);
  }

  // The connections of this backend for a run of np nodes (the same on every rank).
  static std::vector<Connection> connections(const NodeConfig& cfg) {
    return B::connections(cfg.np, cfg.daemons, cfg.clients);
  }

  // ---- wiring
  // Creates the ends of connection k that live on this rank: one, or both for a
  // connection within the rank (backends/topology.hpp).
  void create_endpoint(size_t k, const Connection& c) {
    if (c.rank_a != cfg_.rank && c.rank_b != cfg_.rank) throw std::logic_error("node: connection does not involve this rank");
    if (c.rank_a == cfg_.rank) create_end(k, End::kA, c.thread_a, c.rank_b);
    if (c.rank_b == cfg_.rank) create_end(k, End::kB, c.thread_b, c.rank_a);
  }
  // End `end` of connection k (this rank's end when it has one; either end of a
  // connection within the rank).
  Info local_info(size_t k, End end) const {
    const auto& [thread, ep] = conn_.at({k, end});
    return ctxs_[thread]->local_info(ep);
  }
  Info local_info(size_t k) const { return local_info(k, only_end(k)); }
  void connect(size_t k, End end, const Info& peer) {
    const auto& [thread, ep] = conn_.at({k, end});
    ctxs_[thread]->connect(ep, peer);
  }
  void connect(size_t k, const Info& peer) { connect(k, only_end(k), peer); }

  // Builds the daemons and the clients (after the endpoints are connected).
  void start() {
    const uint32_t D = cfg_.daemons, C = cfg_.clients;
    for (uint32_t d = 0; d < D; ++d) {
      FluxNodeT* flux = D > 1 ? flux_nodes_[d].get() : nullptr;
      const DaemonWiring<T, Waker> w{cfg_, policy_, d, ctxs_[d].get(), ep_of_rank_[d], *ipc_servers_[d],
                                     flux, store_, rt_.meter(d), rt_.waker()};
      if (d == 0)
        daemon0_ = std::make_unique<Daemon0>(w, *resources_);
      else
        workers_.push_back(std::make_unique<Worker>(w, *resources_));
    }
    counters_ = std::make_unique<ClientCounters[]>(C);
    client_errors_.assign(C, 0);
    for (uint32_t c = 0; c < C; ++c) {
      std::vector<IpcClientT*> ipc;
      for (uint32_t d = 0; d < D; ++d) {
        ipc_clients_.push_back(std::make_unique<IpcClientT>(IpcClientT::connect(ipc_segs_[d].bytes(), c)));
        // A server that keeps request hints (its daemon chose to, built above) gets them.
        if (uint64_t* hints = ipc_servers_[d]->request_hints()) ipc_clients_.back()->use_request_hints(hints);
        ipc.push_back(ipc_clients_.back().get());
      }
      kv::Pattern pattern(wl_, cfg_.rank, c);
      Meter& m = rt_.meter(D + c);
      if constexpr (B::kStandingContexts == StandingContexts::kEveryClient) context(D + c);
      const ClientWiring<T> w{cfg_, c, ipc, ctxs_[D + c].get(), ep_of_rank_[D + c], client_errors_[c]};
      RemotePath remote = RemotePath::connect(*resources_, w);
      clients_.push_back(
          std::make_unique<ClientT>(cfg_, std::move(pattern), ipc, remote, m, counters_[c], shared_latency_));
    }
    // One OS thread runs every daemon and client (the simulator): each response an ipc
    // server publishes sets its client's reply flag, and a client's scan reads its ipc
    // rings only when it is set (core/shm/ipc.hpp, reply flags).
    if constexpr (requires { T::kOneOsThread; })
      if constexpr (T::kOneOsThread) {
        ipc_reply_flags_.clear();
        for (uint32_t c = 0; c < C; ++c) ipc_reply_flags_.push_back(clients_[c]->use_ipc_reply_flag());
        for (uint32_t d = 0; d < D; ++d) ipc_servers_[d]->use_reply_flags(ipc_reply_flags_);
      }
  }

  // ---- threads
  uint32_t threads() const noexcept { return cfg_.daemons + cfg_.clients; }
  bool is_client(uint32_t thread) const noexcept { return thread >= cfg_.daemons; }

  // A daemon's step; true when it completed a whole loop iteration.
  bool step_daemon(uint32_t d) { return d == 0 ? daemon0_->step() : workers_[d - 1]->step(); }
  // `k` loops of daemon d that a scheduler skipped as identical idle ones.
  void record_idle_loops(uint32_t d, uint64_t k) {
    if (d == 0)
      daemon0_->record_idle_loops(k);
    else
      workers_[d - 1]->record_idle_loops(k);
  }
  ClientStepResult step_client(uint32_t c) { return clients_[c]->step(); }
  // Client c itself, for a scheduler that keeps a pointer to each client it steps (the
  // simulator: one load per step instead of the node's table of clients).
  ClientT& client(uint32_t c) noexcept { return *clients_[c]; }

  void stop_issuing() {
    for (auto& c : clients_) c->stop_issuing();
  }
  // Timed writes for every client (backend::Client::set_timed_writes; simulator only).
  void set_timed_writes(bool on) {
    for (auto& c : clients_) c->set_timed_writes(on);
  }
  // Reports this node's store operations and its clients' issues and answers to `oracle`
  // (core/kv/history_oracle.hpp; nullptr: stop reporting).
  void attach_oracle(kv::HistoryOracle* oracle) {
    store_.set_oracle(oracle);
    for (uint32_t c = 0; c < cfg_.clients; ++c) clients_[c]->set_oracle(oracle, c);
  }
  uint64_t client_in_flight(uint32_t c) const { return clients_[c]->in_flight(); }
  uint64_t in_flight() const {
    uint64_t n = 0;
    for (uint32_t c = 0; c < cfg_.clients; ++c) n += client_in_flight(c);
    return n;
  }

  // ---- inspection
  const ClientCounters& counters(uint32_t c) const { return counters_[c]; }
  // A client's request latency: read on the client's thread (or, in the simulator, by
  // the single thread that steps every client).
  const metrics::RequestLatency& client_latency(uint32_t c) const { return clients_[c]->latency(); }
  void restart_client_latency_max(uint32_t c) { clients_[c]->restart_latency_max(); }
  // Every client records into `shared` (backend::Client::share_latency; one stepping
  // thread only): client_latency(c) is then `shared` for every c. Called before start(),
  // the clients are built with it (no histograms of their own allocated first).
  void share_client_latency(metrics::RequestLatency* shared) {
    shared_latency_ = shared;
    for (auto& c : clients_) c->share_latency(shared);
  }
  const DaemonMetrics& daemon_metrics(uint32_t d) const {
    return d == 0 ? daemon0_->metrics() : workers_[d - 1]->metrics();
  }
  // copyrpc calls in flight of a daemon (0 if it has no context).
  uint64_t daemon_calls_in_flight(uint32_t d) const { return ctxs_[d] ? ctxs_[d]->calls_in_flight() : 0; }
  Ctx* context_of(uint32_t thread) noexcept { return ctxs_[thread].get(); }
  Daemon0* daemon0() noexcept { return daemon0_.get(); }
  const NodeConfig& config() const noexcept { return cfg_; }
  uint64_t client_protocol_errors() const {
    uint64_t n = 0;
    for (uint64_t e : client_errors_) n += e;
    return n;
  }
  // Stops every copyrpc endpoint thread `thread` owns (Context::stop_endpoint: a peer was
  // declared lost); their pending calls are failed back at the thread's next drain. Call
  // on that thread only (the context's owner).
  void stop_thread_endpoints(uint32_t thread) {
    if (thread >= ctxs_.size() || !ctxs_[thread]) return;
    for (const uint32_t ep : ep_of_rank_[thread])
      if (ep != ~0u) ctxs_[thread]->stop_endpoint(ep);
  }
  // The copyrpc endpoints of this node that stopped (a peer broke a receive-path rule,
  // the transport reported an error completion, or the owner stopped it): one line each,
  // naming the thread, the peer rank and the reason (copyrpc::EndpointError). Their
  // pending calls were failed back to the clients (kEndpointStopped).
  std::vector<std::string> failed_endpoints() const {
    std::vector<std::string> out;
    for (size_t t = 0; t < ctxs_.size(); ++t) {
      if (!ctxs_[t]) continue;
      for (uint32_t peer = 0; peer < ep_of_rank_[t].size(); ++peer) {
        const uint32_t ep = ep_of_rank_[t][peer];
        if (ep == ~0u) continue;
        const copyrpc::EndpointError e = ctxs_[t]->error(ep);
        if (e == copyrpc::EndpointError::kNone) continue;
        out.push_back("rank " + std::to_string(cfg_.rank) + " thread " + std::to_string(t) + ": copyrpc endpoint to rank " +
                      std::to_string(peer) + " stopped: " + copyrpc::to_string(e));
      }
    }
    return out;
  }

 private:
  static const NodeConfig& checked(const NodeConfig& cfg) {
    if (cfg.daemons == 0 || cfg.clients == 0) throw std::invalid_argument("node: need >= 1 daemon and >= 1 client");
    return cfg;
  }
  void create_end(size_t k, End end, uint32_t thread, uint32_t peer_rank) {
    const uint32_t ep = context(thread).create_endpoint();
    ep_of_rank_[thread][peer_rank] = ep;
    conn_[{k, end}] = {thread, ep};
  }
  // The one end of connection k on this rank (a connection between two ranks).
  End only_end(size_t k) const { return conn_.contains({k, End::kA}) ? End::kA : End::kB; }
  Ctx& context(uint32_t thread) {
    if (!ctxs_[thread]) ctxs_[thread] = std::make_unique<Ctx>(rt_.transport(thread), ccfg_);
    return *ctxs_[thread];
  }

  NodeConfig cfg_;
  LoopPolicySettings policy_;
  kv::WorkloadConfig wl_;
  metrics::RequestLatency* shared_latency_ = nullptr;  // share_client_latency
  copyrpc::ContextConfig ccfg_;
  R& rt_;
  kv::Store store_;
  std::vector<shm::Segment> ipc_segs_;
  std::vector<std::unique_ptr<IpcServerT>> ipc_servers_;
  std::unique_ptr<typename B::NodeResources> resources_;
  std::unique_ptr<shm::FluxNetwork<FluxMsg, CallToken>> flux_net_;
  std::vector<std::unique_ptr<FluxNodeT>> flux_nodes_;
  std::vector<std::unique_ptr<Ctx>> ctxs_;
  std::vector<std::vector<uint32_t>> ep_of_rank_;
  std::map<std::pair<size_t, End>, std::pair<uint32_t, uint32_t>> conn_;  // (connection, end) -> (thread, endpoint)

  std::unique_ptr<Daemon0> daemon0_;
  std::vector<std::unique_ptr<Worker>> workers_;  // daemons 1..D-1
  std::unique_ptr<ClientCounters[]> counters_;
  std::vector<uint64_t> client_errors_;
  std::vector<std::unique_ptr<IpcClientT>> ipc_clients_;
  std::vector<std::unique_ptr<ClientT>> clients_;
  std::vector<uint8_t*> ipc_reply_flags_;  // by client: its reply flag, for the ipc servers (one OS thread)
};

// Wires and starts nodes that live in one process (simulator, threaded loopback,
// tests): every connection's endpoints are created on both sides, their infos exchanged
// directly, then every node starts. MPI runs do the same through all_to_all.
template <class NodePtrs>
void connect_in_process(NodePtrs& nodes) {
  if (nodes.empty()) return;
  const auto conns = std::remove_cvref_t<decltype(*nodes[0])>::connections(nodes[0]->config());
  for (size_t k = 0; k < conns.size(); ++k) {
    nodes[conns[k].rank_a]->create_endpoint(k, conns[k]);
    if (!within_rank(conns[k])) nodes[conns[k].rank_b]->create_endpoint(k, conns[k]);
  }
  for (size_t k = 0; k < conns.size(); ++k) {
    auto& a = *nodes[conns[k].rank_a];
    auto& b = *nodes[conns[k].rank_b];
    a.connect(k, End::kA, b.local_info(k, End::kB));
    b.connect(k, End::kB, a.local_info(k, End::kA));
  }
  for (auto& n : nodes) n->start();
}

}  // namespace bkv::backend
