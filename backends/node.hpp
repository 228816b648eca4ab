// One node (one MPI rank, or one simulated node) of any backend: its store, its
// shared-memory channels, its copyrpc contexts, its daemon and client threads.
//
// Built in three steps, the same way for the simulator, the threaded loopback and MPI:
//   Node node(kind, cfg, ...);                  // channels, store, contexts
//   for k in connections(...): node.create_endpoint(k, conn[k])
//   exchange local_info(k) with the peer rank, node.connect(k, peer_info)
//   node.start();                               // daemons and clients
// then each thread calls step(thread) in its loop (real runtime) or is scheduled
// (simulator). Threads: daemons 0..D-1, clients D..D+C-1.
//
// R, the runtime, supplies per thread the transport (threads owning a context) and the
// meter, and the waker clients are woken with:
//   R::Transport, R::Waker, T& transport(thread), T::Meter& meter(thread), Waker& waker()
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <variant>
#include <vector>

#include "backends/client.hpp"
#include "backends/common.hpp"
#include "backends/delegation/delegation.hpp"
#include "backends/direct/direct.hpp"
#include "backends/meta/meta.hpp"
#include "backends/topology.hpp"
#include "core/copyrpc/context.hpp"
#include "core/shm/segment.hpp"

namespace bkv::backend {

template <class R>
class Node {
 public:
  using T = typename R::Transport;
  using Meter = typename T::Meter;
  using Waker = typename R::Waker;
  using Ctx = copyrpc::Context<T, CallToken>;
  using Info = typename Ctx::Info;

  Node(BackendKind kind, const NodeConfig& cfg, const LoopPolicy& policy, const kv::WorkloadConfig& wl,
       const copyrpc::ContextConfig& ccfg, R& rt)
      : kind_(kind), cfg_(cfg), policy_(policy), wl_(wl), ccfg_(ccfg), rt_(rt), store_(cfg.rank, cfg.key_range) {
    if (cfg.daemons == 0 || cfg.clients == 0) throw std::invalid_argument("node: need >= 1 daemon and >= 1 client");
    const uint32_t D = cfg.daemons, C = cfg.clients;
    // ipc: one server per daemon, every client connected to every daemon.
    const shm::IpcConfig icfg{C, cfg.queue_depth};
    for (uint32_t d = 0; d < D; ++d) {
      ipc_segs_.push_back(shm::Segment::create_process(shm::IpcLayout<Request, Response>::segment_size(icfg)));
      ipc_servers_.push_back(std::make_unique<IpcServerT>(ipc_segs_.back().bytes(), icfg));
    }
    if (kind == BackendKind::kDelegation) {
      const shm::DelegationConfig dcfg{C, cfg.deleg_ring_depth, cfg.queue_depth};
      deleg_seg_ = shm::Segment::create_process(shm::DelegationLayout<Request, Response>::segment_size(dcfg));
      deleg_server_ = std::make_unique<DelegServerT>(deleg_seg_.bytes(), dcfg);
    }
    if (D > 1) {
      flux_net_ = std::make_unique<shm::FluxNetwork<FluxMsg, CallToken>>(D);
      for (uint32_t d = 0; d < D; ++d) flux_nodes_.push_back(std::make_unique<FluxNodeT>(flux_net_->node(d)));
    }
    ep_of_rank_.assign(D + C, std::vector<uint32_t>(cfg.np, ~0u));
    ctxs_.resize(D + C);
    // Delegation daemon #0 always has a context (it polls it every loop, even at NP=1).
    if (kind == BackendKind::kDelegation) context(0);
  }

  // ---- wiring
  void create_endpoint(size_t k, const Connection& c) {
    LocalSide side;
    if (!local_side(c, cfg_.rank, side)) throw std::logic_error("node: connection does not involve this rank");
    Ctx& ctx = context(side.thread);
    const uint32_t ep = ctx.create_endpoint();
    ep_of_rank_[side.thread][side.peer_rank] = ep;
    conn_[k] = {side.thread, ep};
  }
  Info local_info(size_t k) const {
    const auto& [thread, ep] = conn_.at(k);
    return ctxs_[thread]->local_info(ep);
  }
  void connect(size_t k, const Info& peer) {
    const auto& [thread, ep] = conn_.at(k);
    ctxs_[thread]->connect(ep, peer);
  }

  // Builds the daemons and the clients (after the endpoints are connected).
  void start() {
    const uint32_t D = cfg_.daemons, C = cfg_.clients;
    Waker& w = rt_.waker();
    for (uint32_t d = 0; d < D; ++d) {
      FluxNodeT* flux = D > 1 ? flux_nodes_[d].get() : nullptr;
      switch (kind_) {
        case BackendKind::kDelegation:
          if (d == 0)
            deleg0_ = std::make_unique<DelegationDaemon0<T, Waker>>(cfg_, policy_, *ctxs_[0], ep_of_rank_[0],
                                                                    *ipc_servers_[0], *deleg_server_, flux, store_, w);
          else
            workers_.push_back(std::make_unique<WorkerDaemon<Meter, Waker>>(*ipc_servers_[d], *flux, store_,
                                                                           rt_.meter(d), w));
          break;
        case BackendKind::kMeta:
          metas_.push_back(std::make_unique<MetaDaemon<T, Waker>>(cfg_, d, ctxs_[d].get(), ep_of_rank_[d],
                                                                  *ipc_servers_[d], flux, store_, rt_.meter(d), w));
          break;
        case BackendKind::kDirect:
          directs_.push_back(std::make_unique<DirectDaemon<T, Waker>>(cfg_, ctxs_[d].get(), *ipc_servers_[d], store_,
                                                                      rt_.meter(d), w));
          break;
      }
    }
    counters_ = std::make_unique<ClientCounters[]>(C);
    client_errors_.assign(C, 0);
    for (uint32_t c = 0; c < C; ++c) {
      std::vector<IpcClientT*> ipc;
      for (uint32_t d = 0; d < D; ++d) {
        ipc_clients_.push_back(std::make_unique<IpcClientT>(IpcClientT::connect(ipc_segs_[d].bytes(), c)));
        ipc.push_back(ipc_clients_.back().get());
      }
      kv::Pattern pattern(wl_, cfg_.rank, c);
      Meter& m = rt_.meter(D + c);
      switch (kind_) {
        case BackendKind::kDelegation:
          deleg_clients_.push_back(std::make_unique<DelegClientT>(DelegClientT::connect(deleg_seg_.bytes())));
          clients_d_.push_back(std::make_unique<Client<Meter, DelegationRemotePath>>(
              cfg_, std::move(pattern), ipc, DelegationRemotePath{deleg_clients_.back().get()}, m, counters_[c]));
          break;
        case BackendKind::kMeta:
          clients_m_.push_back(std::make_unique<Client<Meter, IpcRemotePath>>(
              cfg_, std::move(pattern), ipc, IpcRemotePath{ipc[c % D]}, m, counters_[c]));
          break;
        case BackendKind::kDirect: {
          Ctx* ctx = &context(D + c);
          clients_x_.push_back(std::make_unique<Client<Meter, DirectRemotePath<T>>>(
              cfg_, std::move(pattern), ipc, DirectRemotePath<T>{ctx, &ep_of_rank_[D + c], &client_errors_[c]}, m,
              counters_[c]));
          break;
        }
      }
    }
    started_ = true;
  }

  // ---- threads
  uint32_t threads() const noexcept { return cfg_.daemons + cfg_.clients; }
  bool is_client(uint32_t thread) const noexcept { return thread >= cfg_.daemons; }

  // A daemon's step; true when it completed a whole loop iteration.
  bool step_daemon(uint32_t d) {
    switch (kind_) {
      case BackendKind::kDelegation:
        if (d == 0) return deleg0_->step();
        workers_[d - 1]->step();
        return true;
      case BackendKind::kMeta: return metas_[d]->step();
      case BackendKind::kDirect: return directs_[d]->step();
    }
    return true;
  }
  ClientStepResult step_client(uint32_t c) {
    switch (kind_) {
      case BackendKind::kDelegation: return clients_d_[c]->step();
      case BackendKind::kMeta: return clients_m_[c]->step();
      case BackendKind::kDirect: return clients_x_[c]->step();
    }
    return {};
  }

  void stop_issuing() {
    for (auto& c : clients_d_) c->stop_issuing();
    for (auto& c : clients_m_) c->stop_issuing();
    for (auto& c : clients_x_) c->stop_issuing();
  }
  uint64_t client_in_flight(uint32_t c) const {
    switch (kind_) {
      case BackendKind::kDelegation: return clients_d_[c]->in_flight();
      case BackendKind::kMeta: return clients_m_[c]->in_flight();
      case BackendKind::kDirect: return clients_x_[c]->in_flight();
    }
    return 0;
  }
  uint64_t in_flight() const {
    uint64_t n = 0;
    for (uint32_t c = 0; c < cfg_.clients; ++c) n += client_in_flight(c);
    return n;
  }

  // ---- inspection
  const ClientCounters& counters(uint32_t c) const { return counters_[c]; }
  const DaemonMetrics& daemon_metrics(uint32_t d) const {
    switch (kind_) {
      case BackendKind::kDelegation: return d == 0 ? deleg0_->metrics() : workers_[d - 1]->metrics();
      case BackendKind::kMeta: return metas_[d]->metrics();
      case BackendKind::kDirect: return directs_[d]->metrics();
    }
    throw std::logic_error("node: bad backend");
  }
  // copyrpc calls in flight of a daemon (0 if it has no context).
  uint64_t daemon_calls_in_flight(uint32_t d) const { return ctxs_[d] ? ctxs_[d]->calls_in_flight() : 0; }
  Ctx* context_of(uint32_t thread) noexcept { return ctxs_[thread].get(); }
  DelegationDaemon0<T, Waker>* delegation_daemon() noexcept { return deleg0_.get(); }
  const NodeConfig& config() const noexcept { return cfg_; }
  uint64_t client_protocol_errors() const {
    uint64_t n = 0;
    for (uint64_t e : client_errors_) n += e;
    return n;
  }

 private:
  Ctx& context(uint32_t thread) {
    if (!ctxs_[thread]) ctxs_[thread] = std::make_unique<Ctx>(rt_.transport(thread), ccfg_);
    return *ctxs_[thread];
  }

  BackendKind kind_;
  NodeConfig cfg_;
  LoopPolicy policy_;
  kv::WorkloadConfig wl_;
  copyrpc::ContextConfig ccfg_;
  R& rt_;
  kv::Store store_;
  std::vector<shm::Segment> ipc_segs_;
  std::vector<std::unique_ptr<IpcServerT>> ipc_servers_;
  shm::Segment deleg_seg_;
  std::unique_ptr<DelegServerT> deleg_server_;
  std::unique_ptr<shm::FluxNetwork<FluxMsg, CallToken>> flux_net_;
  std::vector<std::unique_ptr<FluxNodeT>> flux_nodes_;
  std::vector<std::unique_ptr<Ctx>> ctxs_;
  std::vector<std::vector<uint32_t>> ep_of_rank_;
  std::map<size_t, std::pair<uint32_t, uint32_t>> conn_;  // connection -> (thread, endpoint)

  std::unique_ptr<DelegationDaemon0<T, Waker>> deleg0_;
  std::vector<std::unique_ptr<WorkerDaemon<Meter, Waker>>> workers_;
  std::vector<std::unique_ptr<MetaDaemon<T, Waker>>> metas_;
  std::vector<std::unique_ptr<DirectDaemon<T, Waker>>> directs_;

  std::unique_ptr<ClientCounters[]> counters_;
  std::vector<uint64_t> client_errors_;
  std::vector<std::unique_ptr<IpcClientT>> ipc_clients_;
  std::vector<std::unique_ptr<DelegClientT>> deleg_clients_;
  std::vector<std::unique_ptr<Client<Meter, DelegationRemotePath>>> clients_d_;
  std::vector<std::unique_ptr<Client<Meter, IpcRemotePath>>> clients_m_;
  std::vector<std::unique_ptr<Client<Meter, DirectRemotePath<T>>>> clients_x_;
  bool started_ = false;
};

// Wires and starts nodes that live in one process (simulator, threaded loopback,
// tests): every connection's endpoints are created on both sides, their infos exchanged
// directly, then every node starts. MPI runs do the same through all_to_all.
template <class NodePtrs>
void connect_in_process(BackendKind kind, NodePtrs& nodes, uint32_t daemons, uint32_t clients) {
  const uint32_t np = static_cast<uint32_t>(nodes.size());
  const auto conns = connections(kind, np, daemons, clients);
  for (size_t k = 0; k < conns.size(); ++k) {
    nodes[conns[k].rank_a]->create_endpoint(k, conns[k]);
    nodes[conns[k].rank_b]->create_endpoint(k, conns[k]);
  }
  for (size_t k = 0; k < conns.size(); ++k) {
    auto& a = *nodes[conns[k].rank_a];
    auto& b = *nodes[conns[k].rank_b];
    a.connect(k, b.local_info(k));
    b.connect(k, a.local_info(k));
  }
  for (auto& n : nodes) n->start();
}

}  // namespace bkv::backend
