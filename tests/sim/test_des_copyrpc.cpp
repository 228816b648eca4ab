// copyrpc end to end between simulated nodes over the discrete-event transport: each
// node's daemon is a simulated thread whose step is one copyrpc poll loop; calls cross
// the simulated NICs and wire. Checks: every call answered exactly once with the right
// payload, round trips are physically plausible, runs are deterministic, and heavy
// jitter / small rings (RingFull, credit stalls, the RDMA READ fallback) keep it correct.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "core/copyrpc/context.hpp"
#include "sim/distributions.hpp"
#include "tests/sim/sim_cluster.hpp"
#include "tests/transport/resident_pages.hpp"

using namespace bkv;
using namespace bkv::test;
using T = sim::DesTransport;
using Ctx = copyrpc::Context<T, uint64_t>;

namespace {

struct Payload {
  uint32_t from;
  uint32_t to;
  uint64_t seq;
  uint64_t check;
};
static_assert(sizeof(Payload) == 24);

uint64_t mix(uint64_t x) { return (x ^ (x >> 31)) * 0x9E3779B97F4A7C15ull; }

struct Daemon {
  uint32_t id = 0;
  Ctx* ctx = nullptr;
  std::vector<uint32_t> ep_to_peer;  // endpoint id -> peer node
  std::vector<uint32_t> peer_ep;     // peer node -> endpoint id
  uint32_t calls_per_peer = 0;
  uint32_t window = 0;               // calls in flight per peer
  std::vector<uint64_t> issued, answered;
  std::vector<Time> issue_time;      // by token (peer * calls_per_peer + seq)
  std::vector<uint8_t> seen;
  uint64_t rtt_sum = 0;
  uint64_t rtt_count = 0;
  Time rtt_min = ~Time{0};
  uint64_t bad = 0;
  uint64_t retries = 0;
  uint64_t served = 0;

  bool done() const {
    for (uint32_t p = 0; p < ep_to_peer.size() + 1; ++p)
      if (p != id && answered[p] != calls_per_peer) return false;
    return true;
  }

  StepResult step(SimThread& th) {
    th.charge(Op::kLoop);
    ctx->drain([&](uint64_t token, std::span<const std::byte> pl) {
      const uint32_t peer = static_cast<uint32_t>(token / calls_per_peer);
      const uint64_t seq = token % calls_per_peer;
      Payload r{};
      if (pl.size() != sizeof(Payload)) { ++bad; return; }
      std::memcpy(&r, pl.data(), sizeof r);
      if (r.from != peer || r.to != id || r.seq != seq || r.check != mix(seq * 31 + id) + 1 || seen[token]) ++bad;
      seen[token] = 1;
      ++answered[peer];
      const Time rtt = th.now() - issue_time[token];
      rtt_sum += rtt;
      ++rtt_count;
      rtt_min = std::min(rtt_min, rtt);
    }, [&](uint64_t, copyrpc::EndpointError) { ++bad; });
    copyrpc::RecvHandle h;
    while (ctx->recv(h)) {
      Payload q{};
      if (h.payload().size() != sizeof(Payload)) { ++bad; continue; }
      std::memcpy(&q, h.payload().data(), sizeof q);
      if (q.to != id || q.check != mix(q.seq * 31 + q.from)) ++bad;
      const Payload r{id, q.from, q.seq, q.check + 1};
      th.charge(Op::kKvOp);
      if (ctx->reply(std::move(h), std::as_bytes(std::span{&r, 1})) != copyrpc::CallStatus::kOk) ++bad;
      ++served;
    }
    for (uint32_t e = 0; e < ep_to_peer.size(); ++e) {
      const uint32_t peer = ep_to_peer[e];
      while (issued[peer] < calls_per_peer && issued[peer] - answered[peer] < window) {
        const uint64_t seq = issued[peer];
        const Payload q{id, peer, seq, mix(seq * 31 + id)};
        const uint64_t token = uint64_t{peer} * calls_per_peer + seq;
        issue_time[token] = th.now();
        const auto r = ctx->call(e, std::as_bytes(std::span{&q, 1}), sizeof(Payload), token);
        if (!r.ok()) {
          if (r.status != copyrpc::CallStatus::kRingFull && r.status != copyrpc::CallStatus::kInsufficientCredit)
            ++bad;
          ++retries;
          break;
        }
        ++issued[peer];
      }
    }
    ctx->flush();
    return StepResult::kContinue;
  }
};

struct RunResult {
  uint64_t trace_hash = 0;
  Time end = 0;
  uint64_t bad = 0;
  uint64_t retries = 0;
  uint64_t reads = 0;
  double mean_rtt = 0;
  Time min_rtt = 0;
  bool all_done = false;
  uint64_t max_resident_ring_pages = 0;  // of any ring, at the end (paged ring memory)
  uint64_t min_pages_passed = ~0ull;      // pages each connection's stream went through
};


RunResult run_copyrpc(uint32_t nodes, const NicConfig& nic, copyrpc::ContextConfig cc, uint32_t calls_per_peer,
                      uint32_t window, uint64_t seed, uint64_t give_back_pages = 1) {
  SimCluster c(nodes, nic, seed, sim::DeviceContextConfig{256, 4096, 0});
  c.fabric.pages().set_give_back_pages(give_back_pages);
  std::vector<std::unique_ptr<Ctx>> ctx;
  for (uint32_t i = 0; i < nodes; ++i) ctx.push_back(std::make_unique<Ctx>(*c.t[i], cc));
  std::deque<Daemon> daemons;
  for (uint32_t i = 0; i < nodes; ++i) {
    Daemon& d = daemons.emplace_back();
    d.id = i;
    d.ctx = ctx[i].get();
    d.calls_per_peer = calls_per_peer;
    d.window = window;
    d.issued.assign(nodes, 0);
    d.answered.assign(nodes, 0);
    d.issue_time.assign(size_t{nodes} * calls_per_peer, 0);
    d.seen.assign(size_t{nodes} * calls_per_peer, 0);
    d.peer_ep.assign(nodes, ~0u);
  }
  for (uint32_t a = 0; a < nodes; ++a)
    for (uint32_t b = a + 1; b < nodes; ++b) {
      const uint32_t ea = ctx[a]->create_endpoint();
      const uint32_t eb = ctx[b]->create_endpoint();
      ctx[a]->connect(ea, ctx[b]->local_info(eb));
      ctx[b]->connect(eb, ctx[a]->local_info(ea));
      daemons[a].ep_to_peer.push_back(b);
      daemons[b].ep_to_peer.push_back(a);
      daemons[a].peer_ep[b] = ea;
      daemons[b].peer_ep[a] = eb;
    }
  for (uint32_t i = 0; i < nodes; ++i) {
    c.threads[i].bind<Daemon, &Daemon::step>(&daemons[i]);
    c.threads[i].start(i * 11);
  }
  // Run in slices until every daemon got all its answers (daemons poll forever).
  RunResult r;
  for (int slice = 0; slice < 2000 && !r.all_done; ++slice) {
    c.engine.run_until(c.engine.now() + 50'000);
    r.all_done = true;
    for (const Daemon& d : daemons) r.all_done &= d.done();
  }
  r.trace_hash = c.engine.trace_hash();
  r.end = c.engine.now();
  uint64_t rtt_sum = 0, rtt_n = 0;
  r.min_rtt = ~Time{0};
  for (uint32_t i = 0; i < nodes; ++i) {
    const Daemon& d = daemons[i];
    r.bad += d.bad;
    r.retries += d.retries;
    rtt_sum += d.rtt_sum;
    rtt_n += d.rtt_count;
    r.min_rtt = std::min(r.min_rtt, d.rtt_min);
    r.reads += ctx[i]->stats().reads_posted;
    CHECK(d.served == uint64_t{calls_per_peer} * (nodes - 1));
    CHECK(ctx[i]->calls_in_flight() == 0);
    for (uint32_t e = 0; e < d.ep_to_peer.size(); ++e) {
      CHECK(ctx[i]->error(e) == copyrpc::EndpointError::kNone);
      const auto& ep = ctx[i]->endpoint(e);
      r.max_resident_ring_pages = std::max({r.max_resident_ring_pages, resident_pages(ep.send_ring.data(), ep.ring_size()),
                                            resident_pages(ep.recv_ring.data(), ep.ring_size())});
      r.min_pages_passed = std::min(r.min_pages_passed, ep.producer / 4096);
    }
  }
  r.mean_rtt = rtt_n == 0 ? 0.0 : static_cast<double>(rtt_sum) / rtt_n;
  return r;
}

}  // namespace

TEST_CASE("copyrpc end to end over simulated NICs: all calls answered, plausible round trips", "[copyrpc][des]") {
  const NicConfig nic;  // defaults
  copyrpc::ContextConfig cc;
  cc.ring_size = 1 << 16;
  const RunResult r = run_copyrpc(3, nic, cc, 3000, 16, 1);
  REQUIRE(r.all_done);
  CHECK(r.bad == 0);
  // A round trip crosses the wire twice, each way doorbell + NIC + PCIe: it can never
  // beat two one-way base latencies plus two doorbells.
  INFO("min rtt " << r.min_rtt << " ns, mean rtt " << r.mean_rtt << " ns, end " << r.end << " ns");
  CHECK(static_cast<double>(r.min_rtt) > 2 * (nic.latency.base_ns + nic.doorbell_ns));
  CHECK(r.mean_rtt < 100'000);  // and it does not stall (RNR or lost completions would)
}

TEST_CASE("copyrpc over simulated NICs is deterministic: same seed, same trace", "[copyrpc][des]") {
  NicConfig nic;
  nic.latency.jitter = sim::Distribution::lognormal(300, 400);
  copyrpc::ContextConfig cc;
  cc.ring_size = 1 << 14;
  const RunResult a = run_copyrpc(3, nic, cc, 800, 12, 7);
  const RunResult b = run_copyrpc(3, nic, cc, 800, 12, 7);
  const RunResult d = run_copyrpc(3, nic, cc, 800, 12, 8);
  REQUIRE(a.all_done);
  REQUIRE(d.all_done);
  CHECK(a.trace_hash == b.trace_hash);
  CHECK(a.end == b.end);
  CHECK(a.trace_hash != d.trace_hash);
  CHECK(a.bad == 0);
  CHECK(d.bad == 0);
}

TEST_CASE("copyrpc over simulated NICs under heavy jitter and small rings", "[copyrpc][des]") {
  NicConfig nic;
  nic.latency.jitter = sim::Distribution::pareto(50, 1.3);  // heavy tail
  nic.send.qp_window = 1;
  copyrpc::ContextConfig cc;
  cc.ring_size = 4096;  // the minimum: constant RingFull / credit back-pressure
  cc.srq_size = 64;
  const RunResult r = run_copyrpc(4, nic, cc, 1500, 64, 3);
  REQUIRE(r.all_done);
  CHECK(r.bad == 0);
  CHECK(r.retries > 0);  // back-pressure really happened
}

TEST_CASE("copyrpc rings over simulated NICs cost only the pages holding live bytes", "[copyrpc][des]") {
  // Rings of 1 MiB that each connection's stream passes through many pages of (no wrap),
  // and rings of 64 KiB that it wraps several times: at the end, with nothing in flight,
  // each ring keeps at most the few pages around its current positions, where a
  // zero-filled ring would keep every page it was ever written through.
  for (uint64_t ring : {uint64_t{1} << 20, uint64_t{1} << 16}) {
    INFO("ring " << ring);
    copyrpc::ContextConfig cc;
    cc.ring_size = ring;
    const RunResult r = run_copyrpc(3, NicConfig{}, cc, 3000, 16, 5);
    REQUIRE(r.all_done);
    CHECK(r.bad == 0);
    CHECK(r.min_pages_passed >= 40);
    CHECK(r.max_resident_ring_pages <= 3);
  }
}

TEST_CASE("copyrpc rings given back in batches of pages run the same and stay bounded", "[copyrpc][des]") {
  // The give-back batch (PagedMemory::set_give_back_pages): pages go back 16 at a time and
  // 16 ahead of the writer are prefaulted. The run is the same event for event (trace
  // hash) as page by page, and each ring keeps at most a batch behind and a batch ahead
  // of its positions, plus the few pages around them.
  for (uint64_t ring : {uint64_t{1} << 20, uint64_t{1} << 16}) {
    INFO("ring " << ring);
    copyrpc::ContextConfig cc;
    cc.ring_size = ring;
    const RunResult by_page = run_copyrpc(3, NicConfig{}, cc, 3000, 16, 5, 1);
    const RunResult batched = run_copyrpc(3, NicConfig{}, cc, 3000, 16, 5, 16);
    REQUIRE(batched.all_done);
    CHECK(batched.bad == 0);
    CHECK(batched.trace_hash == by_page.trace_hash);
    CHECK(batched.end == by_page.end);
    CHECK(batched.min_pages_passed >= 40);
    CHECK(batched.max_resident_ring_pages <= 3 + 2 * 16);
    CHECK(batched.max_resident_ring_pages > by_page.max_resident_ring_pages);  // the batch did hold pages
  }
}
