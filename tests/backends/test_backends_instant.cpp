// Every backend end to end over the instant loopback, threads stepped round-robin in one
// thread: all issued requests complete, none fails, the counts add up.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string_view>
#include <type_traits>
#include <vector>

#include "backends/node_backends.hpp"
#include "apps/benchkv/node/instant_runtime.hpp"

using namespace bkv;
using namespace bkv::backend;

namespace {

template <class B>
struct Cluster {
  loopback::InstantFabric fabric;
  std::vector<std::unique_ptr<app::InstantRuntime>> rts;
  std::vector<std::unique_ptr<Node<B, app::InstantRuntime>>> nodes;

  static copyrpc::ContextConfig default_context() {
    copyrpc::ContextConfig cc;
    cc.ring_size = 1 << 14;
    cc.srq_size = 256;
    return cc;
  }

  Cluster(uint32_t np, uint32_t daemons, uint32_t clients, uint32_t qd, LoopPolicySettings policy = {},
          copyrpc::ContextConfig cc = default_context(), uint32_t deleg_ring_depth = 64) {
    kv::WorkloadConfig wl;
    wl.num_ranks = np;
    wl.key_range = 64;
    wl.seed = 7;
    wl.pattern_len = 256;
    for (uint32_t r = 0; r < np; ++r) {
      NodeConfig nc{r, np, daemons, clients, qd, wl.key_range, deleg_ring_depth};
      rts.push_back(std::make_unique<app::InstantRuntime>(daemons + clients, app::RealThreads{},
                                                           app::MakeInstantTransport{&fabric, {}}));
      nodes.push_back(std::make_unique<Node<B, app::InstantRuntime>>(nc, policy, wl, cc, *rts.back()));
    }
    connect_in_process(nodes);
  }

  void round() {
    for (auto& n : nodes)
      for (uint32_t t = 0; t < n->threads(); ++t) {
        if (n->is_client(t)) n->step_client(t - n->config().daemons);
        else n->step_daemon(t);
      }
  }
  uint64_t in_flight() const {
    uint64_t s = 0;
    for (auto& n : nodes) s += n->in_flight();
    return s;
  }
};

template <class B>
void run_and_check(Cluster<B>& c, int rounds) {
  for (int i = 0; i < rounds; ++i) c.round();
  for (auto& n : c.nodes) n->stop_issuing();
  for (int i = 0; i < 100000 && c.in_flight() > 0; ++i) c.round();
  REQUIRE(c.in_flight() == 0);
  uint64_t total = 0;
  for (auto& n : c.nodes) {
    for (uint32_t k = 0; k < n->config().clients; ++k) {
      const auto& ctr = n->counters(k);
      CHECK(ctr.issued.load() == ctr.completed.load());
      CHECK(ctr.errors.load() == 0);
      total += ctr.completed.load();
    }
    for (uint32_t d = 0; d < n->config().daemons; ++d) CHECK(n->daemon_metrics(d).protocol_errors == 0);
    CHECK(n->client_protocol_errors() == 0);
  }
  CHECK(total > uint64_t(rounds));  // a pipelined closed loop completes more than one request a round
}

}  // namespace

TEST_CASE("Delegation over the instant loopback: everything issued completes", "[backend]") {
  const uint32_t daemons = GENERATE(1u, 2u);
  Cluster<DelegationBackend> c(3, daemons, 3, 4);
  run_and_check(c, 400);
  CHECK(c.nodes[0]->daemon_metrics(0).calls > 0);
  // No fault: each call daemon #0 made was answered once, and its metrics count each
  // (a loop adds its poll phase's responses when the phase ends: a few more rounds end
  // the loops in progress).
  for (int i = 0; i < 4; ++i) c.round();
  for (auto& n : c.nodes) CHECK(n->daemon_metrics(0).responses == n->daemon_metrics(0).calls);
}

TEST_CASE("Delegation with loop policies (poll budget, batch hold, adaptive, loop order)", "[backend]") {
  LoopPolicySettings p;
  SECTION("poll budget") { p.poll_budget = 4; }
  SECTION("fixed hold") { p.batch_hold_us = 3; }
  SECTION("adaptive hold") { p.adaptive_hold = true; }
  SECTION("rtt hold") { p.hold_rtt_multiplier = 1.5; }
  SECTION("adaptive poll budget") { p.adaptive_poll_budget = true; }
  SECTION("next-poll loop order") { p.order = LoopOrder::kNextPoll; }
  SECTION("next-poll loop order with a poll budget") {
    p.order = LoopOrder::kNextPoll;
    p.poll_budget = 4;
  }
  Cluster<DelegationBackend> c(3, 1, 4, 4, p);
  run_and_check(c, 300);
}

TEST_CASE("Delegation: calls refused for missing credit wait in the backlog, then complete", "[backend]") {
  // Daemon #0 issues every remote call of its node: 48 calls in flight (6 clients at
  // queue depth 8) need more response credit than the smallest ring or the smallest
  // reservation grants, so copyrpc refuses some with InsufficientCredit; each waits in
  // the backlog and is issued again. (Checked: with the backlog never retried, or
  // InsufficientCredit answered as an error instead of backlogged, both sections fail.)
  // RingFull, the backlog's other entry (the same test in issue(),
  // copyrpc::retry_after_poll, whose cases are asserted where it is defined), is not
  // reached by honest peers: a call spends 64 bytes of credit (a 16-byte response plus a batch's
  // metadata) and puts at most 96 ring bytes in flight (a 24-byte request, 64 padded,
  // plus its batch's metadata), the peer's credit is at most ring/4 and the replies'
  // reservation at most ring/4 more, kept twice: in flight at most 3/8 + 1/2 of the ring
  // and a wrap's skipped tail. The call slab holds 2^31 calls; both sides' rings must be
  // equal (connect refuses others). Counted with a temporary counter in issue(): no
  // RingFull at rings of 4 and 8 KiB, 2-32 clients at depth 8-64, both loop orders, a
  // batch hold, the smallest reservation, and with one node's steps stopped while the
  // other went on.
  copyrpc::ContextConfig cc = Cluster<DelegationBackend>::default_context();
  SECTION("the smallest ring") { cc.ring_size = 4096; }
  SECTION("the smallest response reservation") { cc.max_resp_reservation = 64; }
  Cluster<DelegationBackend> c(2, 1, 6, 8, {}, cc);
  run_and_check(c, 300);
  for (auto& n : c.nodes) CHECK(n->daemon_metrics(0).backlog_peak > 0);
}

namespace {

// Steps daemon #0 of `n` through one whole loop (until step() says the loop ended).
template <class N>
void one_loop(N& n) {
  for (int i = 0; i < 64; ++i)
    if (n.step_daemon(0)) return;
  FAIL("daemon #0's loop did not end within 64 steps");
}

}  // namespace

TEST_CASE("Delegation daemon #0: where its calls and replies leave, per loop order", "[backend][loop]") {
  // One client per node. Node 0's client fills its queue depth; daemon #0 of node 0 turns
  // the remote ones into copyrpc calls in its ring stage, and node 1's daemon #0 answers
  // them in its answer phase. kOriginal flushes at the end of the ring stage, so both
  // leave in the loop that made them; kNextPoll leaves them to the next loop's poll.
  const LoopOrder order = GENERATE(LoopOrder::kOriginal, LoopOrder::kNextPoll);
  LoopPolicySettings p;
  p.order = order;
  Cluster<DelegationBackend> c(2, 1, 1, 8, p);
  auto& n0 = *c.nodes[0];
  auto& n1 = *c.nodes[1];
  auto& ctx0 = *n0.context_of(0);
  auto& ctx1 = *n1.context_of(0);
  const bool original = order == LoopOrder::kOriginal;
  INFO((original ? "kOriginal" : "kNextPoll"));

  REQUIRE(n0.step_client(0).issued == 8);
  const uint64_t doorbells0 = ctx0.stats().doorbells;
  one_loop(n0);
  const uint64_t calls = n0.daemon_metrics(0).calls;
  REQUIRE(calls > 0);  // some of the 8 keys live on node 1
  CHECK(ctx0.has_unflushed() == !original);
  CHECK(ctx0.stats().doorbells == doorbells0 + (original ? 1 : 0));
  if (!original) {  // the next loop's poll sends them
    one_loop(n0);
    CHECK_FALSE(ctx0.has_unflushed());
    CHECK(ctx0.stats().doorbells == doorbells0 + 1);
  }
  CHECK(ctx0.stats().messages_sent == calls);

  // Node 1 answers them in one loop; the replies leave in it or at the next poll.
  const uint64_t doorbells1 = ctx1.stats().doorbells;
  one_loop(n1);
  CHECK(ctx1.has_unflushed() == !original);
  CHECK(ctx1.stats().doorbells == doorbells1 + (original ? 1 : 0));
  if (!original) {
    one_loop(n1);
    CHECK_FALSE(ctx1.has_unflushed());
  }
  CHECK(ctx1.stats().messages_sent == calls);
  // And everything still completes.
  run_and_check(c, 100);
}

// The ring read releases what it read: after a daemon loop that drained the delegation ring,
// the client finds the whole ring free again. A ring of 4 slots under a queue depth of 32:
// each client step fills the ring (its fifth remote request finds it full and waits), each
// daemon loop turns the 4 into calls. Were the tail not advanced past the entries read, the
// second step would find the ring still full and the calls would stop at 4.
TEST_CASE("Delegation: each daemon loop frees the ring slots it read for the clients' next step", "[backend][loop]") {
  constexpr uint32_t kRing = 4;
  Cluster<DelegationBackend> c(2, 1, 1, 32, {}, Cluster<DelegationBackend>::default_context(), kRing);
  auto& n0 = *c.nodes[0];
  uint64_t calls = 0;
  for (int round = 1; round <= 3; ++round) {
    INFO("round " << round);
    REQUIRE(n0.step_client(0).issued > 0);
    one_loop(n0);
    const uint64_t now = n0.daemon_metrics(0).calls;
    CHECK(now - calls == kRing);  // the client filled the ring again, the loop read all of it
    calls = now;
  }
  run_and_check(c, 50);
}

TEST_CASE("Meta over the instant loopback: everything issued completes", "[backend]") {
  const uint32_t daemons = GENERATE(1u, 2u, 3u);
  Cluster<MetaBackend> c(4, daemons, 3, 4);
  run_and_check(c, 400);
}

TEST_CASE("Meta: requests forwarded beyond a daemon pair's flux window wait in the backlog, then complete",
          "[backend]") {
  // Two nodes of two daemons, 16 clients at queue depth 128. A client's remote requests
  // go to its daemon (client % 2); the calls to rank 1 are daemon 1's (rank % 2), so
  // daemon 0 forwards those of its 8 clients (about 512 at once) over flux, whose window
  // is 256 calls per daemon pair; the rest wait in the forward backlog, retried every
  // loop.
  Cluster<MetaBackend> c(2, 2, 16, 128);
  run_and_check(c, 20);
  CHECK(std::max(c.nodes[0]->daemon_metrics(0).backlog_peak, c.nodes[0]->daemon_metrics(1).backlog_peak) > 0);
}

TEST_CASE("Direct over the instant loopback: everything issued completes", "[backend]") {
  const uint32_t daemons = GENERATE(1u, 2u);
  Cluster<DirectBackend> c(3, daemons, 3, 4);
  run_and_check(c, 400);
}

TEST_CASE("A single node runs with no remote traffic at all", "[backend]") {
  Cluster<DelegationBackend> c(1, 2, 2, 8);
  run_and_check(c, 200);
  CHECK(c.nodes[0]->daemon_metrics(0).calls == 0);
}

TEST_CASE("The run-time choice of a backend instantiates that backend's node", "[backend]") {
  // Each traits type names its own kind: the dispatch must hand back the traits of the
  // kind it was given, for every node backend, and refuse the others.
  const auto kind_of = [](BackendKind k) {
    return with_node_backend(k, []<class B>() { return B::kKind; });
  };
  size_t node_backends = 0;
  for (const auto& b : kBackendNames) {
    INFO("backend " << b.name);
    if (b.kind == BackendKind::kUcxAm) {
      CHECK_THROWS_WITH(kind_of(b.kind), Catch::Contains("not a copyrpc node backend"));
      continue;
    }
    CHECK(kind_of(b.kind) == b.kind);
    ++node_backends;
  }
  CHECK(node_backends == 3);
}

TEST_CASE("Connections: each backend's shape", "[backend]") {
  // Delegation: daemon #0 pairs; Meta: the daemon owning rank r's endpoint is r % D;
  // direct: every client to daemon c % D of every rank, its own included (the NIC's loopback).
  CHECK(DelegationBackend::connections(3, 2, 2).size() == 3);
  for (const auto& c : DelegationBackend::connections(3, 2, 2)) CHECK((c.thread_a == 0 && c.thread_b == 0));
  for (const auto& c : MetaBackend::connections(4, 3, 1)) {
    CHECK(c.thread_a == c.rank_b % 3);
    CHECK(c.thread_b == c.rank_a % 3);
  }
  const auto direct = DirectBackend::connections(3, 2, 3);
  CHECK(direct.size() == 3 * 3 * 3);
  size_t within_rank = 0;
  for (const auto& c : direct) {
    within_rank += c.rank_a == c.rank_b;
    CHECK(c.thread_a >= 2);
    CHECK(c.thread_b == (c.thread_a - 2) % 2);
  }
  CHECK(within_rank == 3 * 3);  // each of the 3 clients of each of the 3 ranks, to its own rank
}

// A peer that breaks a copyrpc receive-path rule stops that endpoint; the node names it
// (rank, thread, peer rank and the rule) so a real run can print and count it.
TEST_CASE("a copyrpc endpoint stopped by a forged batch is named by the node", "[backend][faults]") {
  Cluster<DelegationBackend> c(2, 1, 1, 4);
  CHECK(c.nodes[0]->failed_endpoints().empty());
  auto* ctx = c.nodes[0]->context_of(0);  // daemon 0 of rank 0: its one endpoint goes to rank 1
  REQUIRE(ctx != nullptr);
  REQUIRE(ctx->endpoint_count() == 1);
  const auto target = ctx->local_info(0);
  // A stranger's queue pair on the same fabric writes a batch with a zero immediate.
  loopback::InstantTransport stranger(c.fabric, 16);
  auto& qp = stranger.create_queue_pair();
  qp.connect(target.qp);
  std::vector<std::byte> src(64);
  const MemoryRegion mr = stranger.register_memory(src.data(), src.size(), kAccessLocalWrite);
  const RemoteBuffer dst{target.recv_ring_addr, target.recv_ring_rkey, 0, 64};
  REQUIRE(qp.post_write_imm(src.data(), 64, mr.lkey, dst, 0, 1, true) == PostResult::kOk);
  qp.ring_doorbell();
  for (int i = 0; i < 10; ++i) c.round();
  const auto failed = c.nodes[0]->failed_endpoints();
  REQUIRE(failed.size() == 1);
  CHECK_THAT(failed[0], Catch::Contains("rank 0 thread 0: copyrpc endpoint to rank 1 stopped: bad immediate"));
  CHECK(c.nodes[1]->failed_endpoints().empty());
}

// Both ranks declare each other dead mid-run (every copyrpc endpoint stopped while calls
// are pending, Direct's loopback endpoints to its own rank too): each pending call is
// failed back to its client as
// kEndpointStopped, later remote requests fail at once, and the oracle sees every
// request end exactly once (completed or reported failed).
template <class B>
void stop_all_endpoints_mid_run() {
  Cluster<B> c(2, 2, 2, 4);
  kv::HistoryOracle oracle;
  for (auto& n : c.nodes) n->attach_oracle(&oracle);
  for (int i = 0; i < 60; ++i) c.round();
  uint64_t pending = 0;
  for (auto& n : c.nodes)
    for (uint32_t t = 0; t < n->threads(); ++t)
      if (auto* ctx = n->context_of(t)) {
        pending += ctx->calls_in_flight();
        for (uint32_t ep = 0; ep < ctx->endpoint_count(); ++ep) ctx->stop_endpoint(ep);
      }
  // What explains the failures to the oracle: every connection was broken, Direct's
  // loopback ones (a rank to itself) included.
  for (uint32_t a = 0; a < 2; ++a)
    for (uint32_t b = a; b < 2; ++b) oracle.connection_broken(a, b);
  REQUIRE(pending > 0);
  for (int i = 0; i < 100; ++i) c.round();
  for (auto& n : c.nodes) n->stop_issuing();
  for (int i = 0; i < 100000 && c.in_flight() > 0; ++i) c.round();
  REQUIRE(c.in_flight() == 0);
  uint64_t failed_back = 0, failed = 0, completed = 0;
  for (auto& n : c.nodes) {
    for (uint32_t t = 0; t < n->threads(); ++t)
      if (auto* ctx = n->context_of(t)) failed_back += ctx->stats().failed_calls;
    for (uint32_t k = 0; k < n->config().clients; ++k) {
      const auto& ctr = n->counters(k);
      CHECK(ctr.issued.load() == ctr.completed.load() + ctr.failed.load());
      CHECK(ctr.errors.load() == 0);
      failed += ctr.failed.load();
      completed += ctr.completed.load();
    }
    for (uint32_t d = 0; d < n->config().daemons; ++d) CHECK(n->daemon_metrics(d).protocol_errors == 0);
    CHECK(n->client_protocol_errors() == 0);
    CHECK(n->failed_endpoints().size() > 0);
  }
  CHECK(failed_back == pending);  // each call pending at the stop, failed back once
  CHECK(failed > failed_back);    // and the remote requests made after it, failed at once
  CHECK(completed > 0);           // local requests still complete
  for (auto& n : c.nodes) n->attach_oracle(nullptr);
  const auto v = oracle.check();
  INFO((v.examples.empty() ? std::string() : v.examples[0]));
  CHECK(v.ok());
  CHECK(v.failed == failed);
  CHECK(v.answered == v.requests);
  // Without the broken connection on record, every failure is unexplained.
  std::vector<kv::HistoryOracle::Event> unexplained = oracle.events();
  std::erase_if(unexplained, [](const auto& e) { return e.kind == kv::HistoryOracle::EventKind::kBreak; });
  const auto u = kv::HistoryOracle::check(unexplained);
  CHECK(u.count(kv::HistoryOracle::ViolationKind::kUnexplainedFailure) == failed);
  CHECK(u.violations() == failed);
}

TEST_CASE("Delegation: calls pending on stopped endpoints are failed back to their clients", "[backend][faults]") {
  stop_all_endpoints_mid_run<DelegationBackend>();
}
TEST_CASE("Meta: calls pending on stopped endpoints are failed back to their clients", "[backend][faults]") {
  stop_all_endpoints_mid_run<MetaBackend>();
}
TEST_CASE("Direct: calls pending on stopped endpoints are failed back to their clients", "[backend][faults]") {
  stop_all_endpoints_mid_run<DirectBackend>();
}
