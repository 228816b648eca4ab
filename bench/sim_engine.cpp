// Simulator engine throughput: events per wall-clock second.
//
//  1. Future-event sets side by side (sim/event_set.hpp): the binary heap (the default)
//     and the calendar queue (sim/calendar_queue.hpp), both driving the same engine
//     template on the "hold" model: a fixed population of pending events, each handler
//     reschedules itself after a random increment (the classic priority-queue benchmark),
//     for several increment distributions and population sizes. Each line checks that
//     both sets ran the same events in the same order (engine trace hash).
//  2. The realistic mix, shaped like the Delegation runs: NP nodes, each with one polling
//     daemon thread owning a DesTransport (one QP per peer) and C event-driven client
//     threads keeping 32 requests in flight to random remote nodes. The daemon drains
//     its receive CQ, answers requests, wakes clients whose responses arrived, and
//     emits one WRITE+IMM per peer with pending messages per loop (copyrpc batching).
//     Every engine event is real: thread steps, doorbells, NIC stages, landings,
//     wake-ups. Reports simulated requests per wall-clock second. The simulator's parts
//     run on sim::Engine (the heap), so the mix is then recorded (every push and pop,
//     with times) and replayed against each event set alone: the set's own cost on the
//     simulator's real access pattern.
//
// Usage: bench_sim_engine [np=16] [clients_per_node=46] [virtual_ms=5]
//        bench_sim_engine mix [np] [clients_per_node] [virtual_ms]     (section 2 only)
//        bench_sim_engine hold heap|calendar DIST PENDING EVENTS
//            one hold case, for instruction counts: the measured loop is
//            bkvbench_sim::hold_events, so running it under
//              valgrind --tool=callgrind --collect-atstart=no
//                       --toggle-collect='*bkvbench_sim::hold_events*'
//            counts exactly the warm-up and the EVENTS events (handler included);
//            DIST is one of the names printed in section 1.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "core/random.hpp"
#include "sim/calendar_queue.hpp"
#include "sim/cost_model.hpp"
#include "sim/distributions.hpp"
#include "sim/engine.hpp"
#include "sim/event_set.hpp"
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

}  // namespace

// --- 1. hold model over each event set ---
namespace bkvbench_sim {

// Increment distributions of the hold model (ns).
struct HoldDist {
  const char* name;
  const char* what;
  Time (*draw)(Rng& rng);
};
const HoldDist kHoldDists[] = {
    {"exp1000", "1 + exponential, mean 1000 ns",
     [](Rng& r) { return 1 + static_cast<Time>(sim::sample_exponential(r, 1000.0)); }},
    {"uniform", "uniform in [0, 2000) ns", [](Rng& r) { return static_cast<Time>(r.below(2000)); }},
    {"ties", "uniform in {0, 1, 2, 3} ns (many equal times)", [](Rng& r) { return static_cast<Time>(r.below(4)); }},
    {"bimodal", "90% uniform [0, 10) ns, 10% 1 ms + [0, 1000) ns (skewed)",
     [](Rng& r) { return r.below(10) < 9 ? static_cast<Time>(r.below(10)) : Time{1'000'000} + r.below(1000); }},
};

const HoldDist* find_dist(const char* name) {
  for (const HoldDist& d : kHoldDists)
    if (std::strcmp(d.name, name) == 0) return &d;
  return nullptr;
}

template <class Set>
struct Hold {
  sim::BasicEngine<Set> e;
  sim::TargetId self{};
  Rng rng;
  Time (*draw)(Rng&);

  Hold(const HoldDist& dist, uint32_t pending) : rng(derive_seed(pending, {1})), draw(dist.draw) {
    self = e.add_target(&Hold::on, this);
    for (uint32_t i = 0; i < pending; ++i) e.schedule(draw(rng), self, i);
  }
  static void on(void* ctx, uint32_t arg) {
    auto* h = static_cast<Hold*>(ctx);
    h->e.schedule_in(h->draw(h->rng), h->self, arg);
  }
};

// The measured loop (callgrind counts this function).
template <class Set>
[[gnu::noinline]] void hold_events(sim::BasicEngine<Set>& e, uint64_t events) {
  for (uint64_t i = 0; i < events; ++i) e.step();
}

struct HoldResult {
  double best_s = 1e30;
  uint64_t trace_hash = 0;
  std::string geometry;  // calendar: bucket count, slot width, rebuilds
};

// Runs `events` events after a warm-up of `events`/4 (lets the calendar settle its width).
template <class Set>
void hold_once(const HoldDist& dist, uint32_t pending, uint64_t events, HoldResult& r) {
  Hold<Set> h(dist, pending);
  hold_events(h.e, events / 4);
  const auto t0 = std::chrono::steady_clock::now();
  hold_events(h.e, events);
  r.best_s = std::min(r.best_s, seconds_since(t0));
  r.trace_hash = h.e.trace_hash();
  if constexpr (std::is_same_v<Set, sim::CalendarQueueEventSet>) {
    const sim::CalendarQueueEventSet& q = h.e.event_set();
    r.geometry = std::to_string(q.bucket_count()) + " buckets x " + std::to_string(q.slot_width()) + " ns, " +
                 std::to_string(q.rebuilds()) + " rebuilds";
  }
}

// One line: heap and calendar alternately, best of `reps`; returns false when the two
// sets ran different event sequences.
bool hold_compare(const HoldDist& dist, uint32_t pending, uint64_t events, int reps) {
  HoldResult heap, cal;
  for (int i = 0; i < reps; ++i) {
    hold_once<sim::BinaryHeapEventSet>(dist, pending, events, heap);
    hold_once<sim::CalendarQueueEventSet>(dist, pending, events, cal);
  }
  const bool same = heap.trace_hash == cal.trace_hash;
  const double ev = static_cast<double>(events);
  std::printf("  %-8s pending=%-7u heap %6.1f ns/ev (%5.1f M/s)  calendar %6.1f ns/ev (%5.1f M/s)  calendar/heap %.2fx  %s  [%s]\n",
              dist.name, pending, heap.best_s * 1e9 / ev, ev / heap.best_s / 1e6, cal.best_s * 1e9 / ev,
              ev / cal.best_s / 1e6, heap.best_s / cal.best_s, same ? "same order" : "ORDER DIFFERS",
              cal.geometry.c_str());
  return same;
}

}  // namespace bkvbench_sim

namespace {
using bkvbench_sim::kHoldDists;

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

// Every push and pop of a mix run, so it can be replayed against any event set.
struct MixTrace {
  std::vector<Time> time_of_seq;        // event time by sequence number
  std::vector<uint64_t> popped_seq;     // sequence numbers in pop order
  std::vector<uint64_t> pushed_before;  // pushes done before each pop
  uint64_t pops = 0;                    // pops up to the time limit (later ones only found times)
};

struct MixRecorder {
  Engine* e;
  MixTrace* t;
  uint64_t seq_limit = ~uint64_t{0};  // events below it still count as found
  uint64_t found = 0;
  static void on(void* ctx, const sim::Event& ev) {
    auto* r = static_cast<MixRecorder*>(ctx);
    MixTrace& t = *r->t;
    if (ev.seq >= t.time_of_seq.size()) t.time_of_seq.resize(std::max<size_t>(ev.seq + 1, 2 * t.time_of_seq.size()));
    t.time_of_seq[ev.seq] = ev.time;
    t.popped_seq.push_back(ev.seq);
    t.pushed_before.push_back(r->e->events_scheduled());
    r->found += ev.seq < r->seq_limit;
  }
};

// With `record`, the run is untimed: every event is recorded, then the engine keeps
// stepping past the limit until the times of all events pushed before it are known.
void mix_bench(uint32_t np, uint32_t clients_per_node, double virtual_ms, MixTrace* record = nullptr) {
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
  if (record != nullptr) {
    MixRecorder rec{&e, record};
    e.set_trace(&MixRecorder::on, &rec);
    e.run_until(limit);
    record->pops = record->popped_seq.size();
    rec.seq_limit = e.events_scheduled();
    while (rec.found < rec.seq_limit && e.step()) {
    }
    record->time_of_seq.resize(rec.seq_limit);
    e.set_trace(nullptr, nullptr);
    if (rec.found < rec.seq_limit) {
      std::fprintf(stderr, "mix recording: %llu events pushed before the limit never ran\n",
                   static_cast<unsigned long long>(rec.seq_limit - rec.found));
      std::exit(1);
    }
    return;
  }
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

namespace bkvbench_sim {

// Pushes and pops exactly as recorded; returns false if the set popped another event
// than the heap engine ran.
template <class Set>
[[gnu::noinline]] bool replay(const MixTrace& t, double& best_s) {
  Set set;
  uint64_t pushed = 0;
  bool same = true;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t k = 0; k < t.pops; ++k) {
    for (; pushed < t.pushed_before[k]; ++pushed) set.push(sim::Event{t.time_of_seq[pushed], pushed, 0, 0});
    same &= set.pop_min().seq == t.popped_seq[k];
  }
  best_s = std::min(best_s, seconds_since(t0));
  return same;
}

bool replay_compare(const MixTrace& t, int reps) {
  // The shape of the recorded pattern: pending-set size and hold increments.
  std::vector<Time> inc;
  inc.reserve(t.pushed_before.empty() ? 0 : t.pushed_before[t.pops - 1]);
  double pending_sum = 0;
  size_t pending_max = 0;
  uint64_t pushed = 0;
  Time now = 0;
  for (uint64_t k = 0; k < t.pops; ++k) {
    for (; pushed < t.pushed_before[k]; ++pushed) inc.push_back(t.time_of_seq[pushed] - now);
    const size_t pending = pushed - k;
    pending_sum += static_cast<double>(pending);
    pending_max = std::max(pending_max, pending);
    now = t.time_of_seq[t.popped_seq[k]];
  }
  std::sort(inc.begin(), inc.end());
  const auto q = [&](double f) { return inc.empty() ? Time{0} : inc[static_cast<size_t>(f * (inc.size() - 1))]; };
  const double zero = static_cast<double>(std::upper_bound(inc.begin(), inc.end(), Time{0}) - inc.begin());
  std::printf("  recorded: %.2fM pops, %.2fM pushes; pending mean %.0f, max %zu\n", t.pops / 1e6, pushed / 1e6,
              pending_sum / static_cast<double>(t.pops), pending_max);
  std::printf("  increments (event time - time of the event that scheduled it): %.1f%% zero, p50 %llu ns, "
              "p90 %llu ns, p99 %llu ns, max %llu ns\n",
              100.0 * zero / static_cast<double>(inc.size()), static_cast<unsigned long long>(q(0.5)),
              static_cast<unsigned long long>(q(0.9)), static_cast<unsigned long long>(q(0.99)),
              static_cast<unsigned long long>(q(1.0)));
  double heap_s = 1e30, cal_s = 1e30;
  bool same = true;
  for (int i = 0; i < reps; ++i) {
    same &= replay<sim::BinaryHeapEventSet>(t, heap_s);
    same &= replay<sim::CalendarQueueEventSet>(t, cal_s);
  }
  const double n = static_cast<double>(t.pops);
  std::printf("  set only (push + pop per event): heap %5.1f ns/ev (%5.1f M/s)  calendar %5.1f ns/ev (%5.1f M/s)  "
              "calendar/heap %.2fx  %s\n",
              heap_s * 1e9 / n, n / heap_s / 1e6, cal_s * 1e9 / n, n / cal_s / 1e6, heap_s / cal_s,
              same ? "same order" : "ORDER DIFFERS");
  return same;
}

// `bench_sim_engine hold SET DIST PENDING EVENTS`: one case, for callgrind.
int hold_single(int argc, char** argv) {
  const HoldDist* dist = argc == 6 ? find_dist(argv[3]) : nullptr;
  const long long pending = argc == 6 ? std::atoll(argv[4]) : 0;
  const long long events = argc == 6 ? std::atoll(argv[5]) : 0;
  const bool heap = argc == 6 && std::strcmp(argv[2], "heap") == 0;
  const bool cal = argc == 6 && std::strcmp(argv[2], "calendar") == 0;
  if (dist == nullptr || (!heap && !cal) || pending < 1 || pending > 10'000'000 || events < 1) {
    std::fprintf(stderr, "usage: bench_sim_engine hold heap|calendar DIST PENDING(1..1e7) EVENTS(>0); DIST one of:");
    for (const HoldDist& d : kHoldDists) std::fprintf(stderr, " %s", d.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  HoldResult r;
  if (heap)
    hold_once<sim::BinaryHeapEventSet>(*dist, static_cast<uint32_t>(pending), static_cast<uint64_t>(events), r);
  else
    hold_once<sim::CalendarQueueEventSet>(*dist, static_cast<uint32_t>(pending), static_cast<uint64_t>(events), r);
  std::printf("hold %s %s pending=%lld events=%lld (+%lld warm-up): %.1f ns/event, trace hash %016llx %s\n", argv[2],
              dist->name, pending, events, events / 4, r.best_s * 1e9 / static_cast<double>(events),
              static_cast<unsigned long long>(r.trace_hash), r.geometry.c_str());
  return 0;
}

}  // namespace bkvbench_sim

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "hold") == 0) return bkvbench_sim::hold_single(argc, argv);
  const bool mix_only = argc > 1 && std::strcmp(argv[1], "mix") == 0;
  const int first = mix_only ? 2 : 1;
  const uint32_t np = argc > first ? static_cast<uint32_t>(std::atoi(argv[first])) : 16;
  const uint32_t clients = argc > first + 1 ? static_cast<uint32_t>(std::atoi(argv[first + 1])) : 46;
  const double vms = argc > first + 2 ? std::atof(argv[first + 2]) : 5.0;
  if (argc > first + 3 || np < 2 || np > 256 || clients == 0 || clients > 1000 || !(vms > 0)) {
    std::fprintf(stderr,
                 "usage: bench_sim_engine [mix] [np in 2..256] [clients per node in 1..1000] [virtual_ms > 0]\n"
                 "       bench_sim_engine hold heap|calendar DIST PENDING EVENTS\n");
    return 2;
  }
  if (mix_only) {
    mix_bench(np, clients, vms);
    return 0;
  }
  constexpr uint64_t kHoldEvents = 2'000'000;
  constexpr int kReps = 3;
  std::printf("bench_sim_engine: discrete-event engine (24-byte events), one core, no I/O\n");
  std::printf("1. hold model: PENDING events; each handler reschedules itself at now + increment.\n"
              "   %llu events timed per run after %llu warm-up, best of %d runs, heap and calendar alternating;\n"
              "   ns/ev includes the handler (RNG draw + schedule). Increment distributions:\n",
              static_cast<unsigned long long>(kHoldEvents), static_cast<unsigned long long>(kHoldEvents / 4), kReps);
  for (const auto& d : kHoldDists) std::printf("     %-8s %s\n", d.name, d.what);
  bool same = true;
  for (const auto& d : kHoldDists)
    for (uint32_t pending : {1000u, 20'000u, 200'000u}) same &= bkvbench_sim::hold_compare(d, pending, kHoldEvents, kReps);
  std::printf("2. ");
  mix_bench(np, clients, vms);
  // A longer recording than the timed mix, so the replay runs long enough to time.
  const double record_ms = std::max(vms, 50.0);
  std::printf("3. the mix of 2 over %.1f ms virtual, recorded and replayed against each event set (best of %d):\n",
              record_ms, kReps);
  {
    MixTrace trace;
    mix_bench(np, clients, record_ms, &trace);
    same &= bkvbench_sim::replay_compare(trace, kReps);
  }
  if (!same) {
    std::fprintf(stderr, "bench_sim_engine: the event sets ran different event sequences\n");
    return 1;
  }
  return 0;
}
