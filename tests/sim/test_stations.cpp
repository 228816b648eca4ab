// Queueing stations, each on its own: server pools, channels, caches, statistics.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/random.hpp"
#include "sim/stations.hpp"

using namespace bkv::sim;

TEST_CASE("one server: FIFO start = max(arrival, previous finish)", "[stations]") {
  ServerPool s(1);
  bkv::Rng rng(3);
  uint64_t prev_finish = 0;
  uint64_t t = 0;
  for (int i = 0; i < 1000; ++i) {
    t += rng.below(200);
    const uint64_t service = 1 + rng.below(150);
    const ServerPool::Slot slot = s.reserve(t, 0, service);
    REQUIRE(slot.start_ps == std::max(t, prev_finish));
    REQUIRE(slot.finish_ps == slot.start_ps + service);
    prev_finish = slot.finish_ps;
  }
  CHECK(s.stats().jobs == 1000);
}

TEST_CASE("k servers serve k jobs at once - the (k+1)-th waits for the earliest", "[stations]") {
  ServerPool s(3);
  CHECK(s.reserve(0, 0, 100).start_ps == 0);
  CHECK(s.reserve(0, 0, 50).start_ps == 0);
  CHECK(s.reserve(0, 0, 80).start_ps == 0);
  const auto fourth = s.reserve(10, 0, 10);
  CHECK(fourth.start_ps == 50);  // the 50-long job's server frees first
  CHECK(fourth.finish_ps == 60);
  CHECK(s.stats().wait_ps == 40);
  CHECK(s.stats().max_depth == 4);

  ServerPool unlimited(0);
  for (int i = 0; i < 100; ++i) CHECK(unlimited.reserve(5, 0, 1000).start_ps == 5);
}

TEST_CASE("not_before holds a job back without blocking others (best fit)", "[stations]") {
  ServerPool s(2);
  s.reserve(0, 0, 100);  // server A busy until 100
  s.reserve(0, 0, 10);   // server B busy until 10
  // A job that may only start at 500 (its QP is busy) takes B...
  const auto held = s.reserve(20, 500, 10);
  CHECK(held.start_ps == 500);
  // ...and a job arriving at 150 still finds A free at 100: no head-of-line blocking.
  const auto next = s.reserve(150, 0, 10);
  CHECK(next.start_ps == 150);
}

TEST_CASE("channel: serialization at bandwidth, per-unit overhead, fixed latency", "[stations]") {
  // 100 Gbit/s = 80 ps per byte; 4096-byte units with 50 bytes of overhead each; 300 ns.
  Channel c(100.0, 300'000, 4096, 50);
  CHECK(c.wire_bytes(0) == 50);
  CHECK(c.wire_bytes(4096) == 4146);
  CHECK(c.wire_bytes(4097) == 4197);
  CHECK(c.serialization_ps(950) == 80'000);
  const uint64_t a1 = c.send(0, 950);
  CHECK(a1 == 80'000 + 300'000);
  const uint64_t a2 = c.send(0, 950);  // queued behind the first
  CHECK(a2 == 160'000 + 300'000);
  const uint64_t a3 = c.send(1'000'000, 950);  // idle link: no wait
  CHECK(a3 == 1'080'000 + 300'000);
  CHECK(c.bytes() == 2850);
}

TEST_CASE("station statistics: Little's law depth and utilization", "[stations]") {
  // Deterministic arrivals every 10 ns, service 5 ns: half the time one job present.
  ServerPool s(1);
  for (uint64_t i = 0; i < 1000; ++i) s.reserve(ns_to_ps(i * 10), 0, ns_to_ps(5));
  CHECK(s.stats().mean_depth(10'000) == Approx(0.5));
  CHECK(s.stats().utilization(10'000, 1) == Approx(0.5));
  CHECK(s.stats().max_depth == 1);
  CHECK(s.stats().mean_wait_ns() == 0.0);
  // Arrivals twice as fast as service: the queue grows linearly, and so does the wait.
  ServerPool over(1);
  uint64_t last_wait = 0;
  for (uint64_t i = 0; i < 100; ++i) {
    const auto slot = over.reserve(ns_to_ps(i * 5), 0, ns_to_ps(10));
    const uint64_t wait = slot.start_ps - ns_to_ps(i * 5);
    if (i > 0) REQUIRE(wait > last_wait);
    last_wait = wait;
  }
  CHECK(over.stats().max_depth > 40);
}

TEST_CASE("set-associative cache: hits, LRU eviction inside a set, disabled cache", "[stations]") {
  SetAssocCache off;
  CHECK(!off.enabled());
  CHECK(off.access(1));

  SetAssocCache one_set(4, 4);  // fully associative, 4 entries
  for (uint64_t k = 0; k < 4; ++k) CHECK(!one_set.access(k));
  for (uint64_t k = 0; k < 4; ++k) CHECK(one_set.access(k));
  CHECK(one_set.access(0));    // 0 becomes most recent; LRU is now 1
  CHECK(!one_set.access(9));   // evicts 1
  CHECK(!one_set.access(1));   // 1 was evicted (evicts 2)
  CHECK(one_set.access(0));
  CHECK(one_set.access(9));
  CHECK(one_set.hits() == 7);
  CHECK(one_set.misses() == 6);

  // A working set larger than the cache misses on every pass of a cyclic sweep (LRU).
  SetAssocCache small(64, 8);
  uint64_t misses_before = 0;
  for (int pass = 0; pass < 3; ++pass)
    for (uint64_t k = 0; k < 1000; ++k) small.access(k);
  misses_before = small.misses();
  CHECK(misses_before > 2900);
  // A working set that fits hits after the first pass.
  SetAssocCache big(2048, 8);
  for (int pass = 0; pass < 3; ++pass)
    for (uint64_t k = 0; k < 200; ++k) big.access(k);
  CHECK(big.misses() == 200);  // compulsory misses only
  CHECK_THROWS_AS(SetAssocCache(10, 4), std::invalid_argument);
}

TEST_CASE("token pool: k jobs hold tokens at once - later ones wait for the earliest release", "[stations]") {
  TokenPool p(2);
  CHECK(p.start_time(0) == 0);
  p.hold(0, 0, 500);
  CHECK(p.start_time(10) == 10);
  p.hold(10, 10, 300);
  CHECK(p.start_time(20) == 300);  // both held: the earlier release wins
  p.hold(20, 300, 900);
  CHECK(p.start_time(30) == 500);
  CHECK(p.stats().jobs == 3);
  CHECK(p.stats().wait_ps == 280);
  CHECK(p.stats().max_depth == 3);
  TokenPool unlimited(0);
  for (int i = 0; i < 10; ++i) {
    CHECK(unlimited.start_time(7) == 7);
    unlimited.hold(7, 7, 1000);
  }
}

// The depth tracker against a plain reference: the depth an arrival sees is the number of
// finish times recorded so far that are later than its arrival, itself included. The
// sequences go through both of the tracker's layouts: ascending finish times (one-server
// stations), finish times out of order (multi-server pools), and the station running
// empty in between (which returns it to the ascending layout).
TEST_CASE("depth tracker: ascending and out-of-order finish times give the reference depth", "[stations]") {
  bkv::Rng rng(11);
  for (int phase_kind = 0; phase_kind < 3; ++phase_kind) {
    DepthTracker d;
    std::vector<uint64_t> live;  // reference: finish times not yet passed
    uint64_t t = 0;
    uint64_t last_finish = 0;
    for (int i = 0; i < 20000; ++i) {
      // Phases of 500 arrivals: ascending, shuffled, or a gap that empties the station.
      const int phase = (i / 500 + phase_kind) % 3;
      t += phase == 2 && i % 500 == 0 ? 1000000 : rng.below(100);
      uint64_t finish;
      if (phase == 1) {
        finish = t + rng.below(2000);
      } else {
        finish = std::max(last_finish, t) + rng.below(150);
      }
      last_finish = std::max(last_finish, finish);
      std::erase_if(live, [&](uint64_t f) { return f <= t; });
      live.push_back(finish);
      REQUIRE(d.arrive(t, finish) == live.size());
      REQUIRE(d.depth() == live.size());
    }
  }
}

// The token pool against a plain reference multiset of release times: a job starts at
// max(arrival, smallest release time), which it then replaces by its own finish time.
// Finish times first ascend (the pool's ring layout), then come out of order (its heap
// layout), for several pool sizes.
TEST_CASE("token pool: ascending and out-of-order release times give the reference start times", "[stations]") {
  for (uint32_t k : {1u, 2u, 7u, 256u}) {
    bkv::Rng rng(k);
    TokenPool p(k);
    std::vector<uint64_t> ref(k, 0);
    uint64_t t = 0;
    uint64_t last_finish = 0;
    for (int i = 0; i < 4000; ++i) {
      t += rng.below(50);
      const uint64_t start = p.start_time(t);
      const auto smallest = std::min_element(ref.begin(), ref.end());
      REQUIRE(start == std::max(t, *smallest));
      const uint64_t finish = i < 2000 ? std::max(last_finish, start) + rng.below(400) : start + rng.below(4000);
      last_finish = std::max(last_finish, finish);
      *smallest = finish;
      p.hold(t, start, finish);
    }
  }
}

// The server pool against a reference written from its rule: best fit (the server free
// last but no later than the job is ready, lowest index on ties), else the earliest-free
// one (lowest index on ties); one server and several, with and without not_before.
TEST_CASE("server pool: the pick follows the best-fit rule, ties to the lowest index", "[stations]") {
  for (uint32_t k : {1u, 2u, 16u}) {
    bkv::Rng rng(100 + k);
    ServerPool s(k);
    std::vector<uint64_t> ref(k, 0);
    uint64_t t = 0;
    for (int i = 0; i < 5000; ++i) {
      t += rng.below(40);
      const uint64_t not_before = rng.below(4) == 0 ? t + rng.below(300) : 0;
      const uint64_t service = rng.below(8) * 25;  // repeated values: ties between servers
      const uint64_t ready = std::max(t, not_before);
      size_t pick = k;
      for (size_t j = 0; j < k; ++j)
        if (ref[j] <= ready && (pick == k || ref[j] > ref[pick])) pick = j;
      if (pick == k) pick = static_cast<size_t>(std::min_element(ref.begin(), ref.end()) - ref.begin());
      const uint64_t start = std::max(ready, ref[pick]);
      ref[pick] = start + service;
      const ServerPool::Slot slot = s.reserve(t, not_before, service);
      REQUIRE(slot.start_ps == start);
      REQUIRE(slot.finish_ps == start + service);
      REQUIRE(s.earliest_free_ps() == *std::min_element(ref.begin(), ref.end()));
    }
    CHECK(s.servers() == k);
  }
}

TEST_CASE("token pool statistics: busy time is the time tokens are held, utilization is per token", "[stations]") {
  // Two tokens; the third job waits 280 ps for one: held 500 + 290 + 600 ps, not its
  // wait as well. Over 1 ns (1000 ps) two tokens could hold 2000 ps.
  TokenPool p(2);
  p.hold(0, 0, 500);
  p.hold(10, 10, 300);
  p.hold(20, 300, 900);
  CHECK(p.stats().busy_ps == 500 + 290 + 600);
  CHECK(p.stats().wait_ps == 280);
  CHECK(p.stats().sojourn_ps == 500 + 290 + 880);
  CHECK(p.stats().utilization(1, 2) == Approx(1390.0 / 2000.0));
  CHECK(p.stats().utilization(1, 1) == Approx(1390.0 / 1000.0));
}
