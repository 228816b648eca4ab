// Simulator engine throughput: events per wall-clock second.
//
//  1. "hold" model: a fixed population of pending events, each handler reschedules
//     itself after an exponential delay (the classic priority-queue benchmark); pending
//     set sizes around what a 16-node run keeps (thousands to tens of thousands).
//  2. A realistic mix, shaped like the Delegation runs: NP nodes, each with one polling
//     daemon thread owning a DesTransport (one QP per peer) and C event-driven client
//     threads keeping 32 requests in flight to random remote nodes. The daemon drains
//     its receive CQ, answers requests, wakes clients whose responses arrived, and
//     emits one WRITE+IMM per peer with pending messages per loop (copyrpc batching).
//     Every engine event is real: thread steps, doorbells, NIC stages, landings,
//     wake-ups. Reports simulated requests per wall-clock second.
//
// Usage: bench_sim_engine [np=16] [clients_per_node=46] [virtual_ms=5]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <vector>

#include "core/random.hpp"
#include "sim/cost_model.hpp"
#include "sim/distributions.hpp"
#include "sim/engine.hpp"
#include "sim/sim_thread.hpp"
#include "sim/des_transport.hpp"

using namespace bkv;
using sim::Engine;
using sim::SimThread;
using sim::StepResult;
using sim::Time;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Hold {
  Engine* e;
  sim::TargetId self;
  Rng rng{1};
  double mean;
  static void on(void* ctx, uint32_t arg) {
    auto* h = static_cast<Hold*>(ctx);
    h->e->schedule_in(1 + static_cast<Time>(sim::sample_exponential(h->rng, h->mean)), h->self, arg);
  }
};

void hold_bench(uint32_t pending, uint64_t events) {
  Engine e;
  Hold h{&e, {}, Rng(pending), 1000.0};
  h.self = e.add_target(&Hold::on, &h);
  for (uint32_t i = 0; i < pending; ++i) e.schedule(static_cast<Time>(sim::sample_exponential(h.rng, 1000.0)), h.self, i);
  const auto t0 = std::chrono::steady_clock::now();
  while (e.events_run() < events) e.step();
  const double s = seconds_since(t0);
  std::printf("hold     pending=%-6u events=%-9llu wall=%.3f s  %.1f M events/s  (%.1f ns/event)\n", pending,
              static_cast<unsigned long long>(events), s, events / s / 1e6, s * 1e9 / events);
}

// --- the realistic mix ---
constexpr uint32_t kMsg = 32;  // bytes per message (a copyrpc header + small payload)

struct Node;

// An event-driven client: keeps `qd` requests in flight to random remote nodes; steps
// only when the daemon delivers responses to it (a wake-up), like a benchkv client.
struct Client {
  Node* node = nullptr;
  uint32_t id = 0;
  uint32_t in_flight = 0;
  uint32_t ready = 0;  // responses delivered, not yet consumed
  uint64_t completed = 0;
  Rng rng;
  SimThread* thread = nullptr;
  StepResult step(SimThread& th);
};

// A polling daemon owning the node's transport: one QP per peer; per loop it drains the
// receive CQ (requests -> responses queued, responses -> clients woken), then emits one
// WRITE+IMM per peer with pending messages (copyrpc-style batching).
struct Node {
  uint32_t id = 0;
  uint32_t np = 0;
  sim::DesTransport* t = nullptr;
  std::vector<sim::DesTransport::QueuePair*> qp;  // by peer
  std::vector<RemoteBuffer> remote;                    // peer's landing zone for us
  std::vector<std::deque<uint32_t>> queued;            // client ids of requests to send, per peer
  std::vector<std::deque<uint32_t>> outstanding;       // client ids of requests sent, per peer
  std::vector<uint32_t> resp_due;                      // responses to send, per peer
  std::vector<std::byte> send_buf;
  MemoryRegion send_mr{};
  std::deque<Client>* clients = nullptr;
  std::vector<uint32_t> qpn_to_peer;
  uint32_t qpn_base = 0;
  uint32_t signal_count = 0;

  StepResult step(SimThread& th) {
    th.charge(Op::kLoop);
    t->poll_send([](const SendCompletion&) {}, 64);
    const uint32_t n = t->poll_recv(
        [&](const RecvCompletion& c) {
          const uint32_t from = qpn_to_peer[c.qp_num - qpn_base];
          const uint32_t reqs = c.imm >> 16;
          const uint32_t resps = c.imm & 0xFFFF;
          resp_due[from] += reqs;
          th.charge(Op::kMsgParse, reqs + resps);
          th.charge(Op::kKvOp, reqs);
          for (uint32_t k = 0; k < resps; ++k) {
            Client& cl = (*clients)[outstanding[from].front()];
            outstanding[from].pop_front();
            ++cl.ready;
            th.charge(Op::kRingOp);
            cl.thread->wake(th.now() + 60);  // the response slot's cache line reaches the client
          }
        },
        1024);
    th.charge(Op::kCqPoll, 2);
    th.charge(Op::kCqe, n);
    if (n > 0) t->post_receives(n);
    for (uint32_t p = 0; p < np; ++p) {
      if (p == id || (queued[p].empty() && resp_due[p] == 0)) continue;
      if (qp[p]->send_queue_free() == 0) continue;
      const uint32_t reqs = std::min<uint32_t>(static_cast<uint32_t>(queued[p].size()), 1000);
      const uint32_t resps = std::min<uint32_t>(resp_due[p], 1000);
      th.charge(Op::kRingOp, reqs);
      th.charge(Op::kCallEncode, reqs);
      th.charge(Op::kReplyEncode, resps);
      const bool sig = (++signal_count % 64) == 0;
      if (qp[p]->post_write_imm(send_buf.data(), kMsg * (reqs + resps), send_mr.lkey, remote[p],
                                (reqs << 16) | resps, 0, sig) != PostResult::kOk)
        continue;
      for (uint32_t k = 0; k < reqs; ++k) {
        outstanding[p].push_back(queued[p].front());
        queued[p].pop_front();
      }
      resp_due[p] -= resps;
      th.charge(Op::kFlush);
      qp[p]->ring_doorbell();
      th.charge(Op::kDoorbell);
    }
    return StepResult::kContinue;
  }
};

StepResult Client::step(SimThread& th) {
  completed += ready;
  in_flight -= ready;
  th.charge(Op::kClientRequest, ready);
  ready = 0;
  const uint32_t qd = 32;
  while (in_flight < qd) {
    const uint32_t dest = (node->id + 1 + static_cast<uint32_t>(rng.below(node->np - 1))) % node->np;
    node->queued[dest].push_back(id);
    ++in_flight;
    th.charge(Op::kClientRequest);
    th.charge(Op::kRingOp);
  }
  return StepResult::kIdle;
}

void mix_bench(uint32_t np, uint32_t clients_per_node, double virtual_ms) {
  Engine e;
  const sim::CostModel costs = sim::CostModel::defaults();
  sim::NicConfig nic;  // defaults: CX-6/7-like, exponential wire jitter
  sim::DesFabric fabric(e, 42);
  std::deque<SimThread> threads;
  std::deque<Node> nodes;
  std::deque<Client> clients;
  std::vector<sim::DesTransport*> ts;
  sim::DeviceContextConfig cc;
  cc.sq_depth = 256;
  cc.srq_capacity = 8192;
  for (uint32_t i = 0; i < np; ++i) {
    fabric.add_node(nic);
    threads.emplace_back(e, costs, derive_seed(42, {i}), "daemon");
    ts.push_back(&fabric.create_transport(i, threads.back(), cc));
  }
  // Landing zones: 64 KiB per (receiver, sender); contents are not inspected.
  std::vector<std::vector<std::byte>> rx(np, std::vector<std::byte>(size_t{np} * 65536));
  std::vector<MemoryRegion> rx_mr(np);
  for (uint32_t i = 0; i < np; ++i) {
    rx_mr[i] = ts[i]->register_memory(rx[i].data(), rx[i].size(), kAccessLocalWrite | kAccessRemoteWrite);
    ts[i]->post_receives(cc.srq_capacity);
    Node& d = nodes.emplace_back();
    d.id = i;
    d.np = np;
    d.t = ts[i];
    d.qp.assign(np, nullptr);
    d.remote.assign(np, RemoteBuffer{});
    d.queued.resize(np);
    d.outstanding.resize(np);
    d.resp_due.assign(np, 0);
    d.send_buf.assign(65536, std::byte{1});
    d.send_mr = ts[i]->register_memory(d.send_buf.data(), d.send_buf.size(), kAccessLocalWrite);
    d.clients = &clients;
  }
  uint32_t min_qpn = ~0u, max_qpn = 0;
  for (uint32_t a = 0; a < np; ++a)
    for (uint32_t b = a + 1; b < np; ++b) {
      auto& qa = ts[a]->create_queue_pair();
      auto& qb = ts[b]->create_queue_pair();
      sim::DesFabric::connect(qa, qb);
      nodes[a].qp[b] = &qa;
      nodes[b].qp[a] = &qb;
      nodes[a].remote[b] = RemoteBuffer{reinterpret_cast<uint64_t>(rx[b].data()) + uint64_t{a} * 65536,
                                        rx_mr[b].rkey, 0, 65536};
      nodes[b].remote[a] = RemoteBuffer{reinterpret_cast<uint64_t>(rx[a].data()) + uint64_t{b} * 65536,
                                        rx_mr[a].rkey, 0, 65536};
      min_qpn = std::min({min_qpn, qa.qp_num(), qb.qp_num()});
      max_qpn = std::max({max_qpn, qa.qp_num(), qb.qp_num()});
    }
  for (uint32_t i = 0; i < np; ++i) {
    Node& d = nodes[i];
    d.qpn_base = min_qpn;
    d.qpn_to_peer.assign(max_qpn - min_qpn + 1, 0);
    for (uint32_t p = 0; p < np; ++p)
      if (p != i) d.qpn_to_peer[d.qp[p]->qp_num() - min_qpn] = p;
    threads[i].bind<Node, &Node::step>(&d);
    threads[i].start(i * 13);
    for (uint32_t k = 0; k < clients_per_node; ++k) {
      Client& cl = clients.emplace_back();
      cl.node = &d;
      cl.id = static_cast<uint32_t>(clients.size() - 1);
      cl.rng = Rng(derive_seed(42, {i, k, 1}));
      threads.emplace_back(e, costs, derive_seed(42, {i, k}), "client");
      cl.thread = &threads.back();
      threads.back().bind<Client, &Client::step>(&cl);
      threads.back().start(k * 7);
    }
  }
  const Time limit = static_cast<Time>(virtual_ms * 1e6);
  const auto t0 = std::chrono::steady_clock::now();
  e.run_until(limit);
  const double s = seconds_since(t0);
  uint64_t completed = 0, loops = 0, wqes = 0;
  for (const Client& cl : clients) completed += cl.completed;
  for (uint32_t i = 0; i < np; ++i) {
    loops += threads[i * (clients_per_node + 1)].steps();
    wqes += fabric.network().nic(i).n.wqes_sent;
  }
  const double ev = static_cast<double>(e.events_run());
  const double req_per_s = completed / s;
  std::printf(
      "mix      np=%u, 1 polling daemon + %u event-driven clients x QD 32 per node, %.1f ms virtual:\n"
      "         wall=%.3f s  events=%.2fM (%.2f M events/s, %.0f ns/event)\n"
      "         daemon loops=%.0f  WQEs=%.3fM  requests=%.3fM (%.1f Mops virtual)  events/request=%.2f\n"
      "         -> %.2f M simulated requests per wall second; 11 M requests would take %.1f s\n",
      np, clients_per_node, virtual_ms, s, ev / 1e6, ev / s / 1e6, s * 1e9 / ev, static_cast<double>(loops), wqes / 1e6,
      completed / 1e6, completed / (virtual_ms * 1e3), ev / static_cast<double>(completed), req_per_s / 1e6,
      11e6 / req_per_s);
}

}  // namespace

int main(int argc, char** argv) {
  const uint32_t np = argc > 1 ? static_cast<uint32_t>(std::atoi(argv[1])) : 16;
  const uint32_t clients = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 46;
  const double vms = argc > 3 ? std::atof(argv[3]) : 5.0;
  if (np < 2 || np > 256 || clients == 0 || clients > 1000 || !(vms > 0)) {
    std::fprintf(stderr, "usage: bench_sim_engine [np in 2..256] [clients per node in 1..1000] [virtual_ms > 0]\n");
    return 2;
  }
  std::printf("bench_sim_engine: binary-heap event engine (24-byte events), one core, no I/O\n");
  hold_bench(1000, 5'000'000);
  hold_bench(20'000, 5'000'000);
  hold_bench(200'000, 5'000'000);
  mix_bench(np, clients, vms);
  return 0;
}
