// flux: in-flight limit, tokens, reply validation, request/response parking, many laps.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "core/random.hpp"
#include "core/shm/flux.hpp"

using namespace bkv::shm;
using Catch::Matchers::Contains;

namespace {
struct Msg {
  uint32_t from;
  uint32_t to;
  uint64_t seq;
  uint64_t value;
};
using Net = FluxNetwork<Msg>;
using Node = FluxNode<Msg>;

// Node 1 of two, and ring 0 -> 1 for the test to write by hand, as a corrupted node 0
// would.
struct HandWrittenRing {
  Net net{2, FluxConfig{8, 4}};
  Node n1 = net.node(1);
  const Net::Ring ring = net.ring(0, 1);
  // The request node 1 takes next, which must be there.
  auto take() {
    auto r = n1.try_recv();
    REQUIRE(r.has_value());
    return *r;
  }
};
}  // namespace

TEST_CASE("flux config: capacity >= 2 * max_inflight, power of two - nodes taken once", "[shm][flux]") {
  REQUIRE_THROWS_WITH(Net(3, FluxConfig{8, 5}), Contains("must be >= 2 * max_inflight"));
  REQUIRE_THROWS_WITH(Net(3, FluxConfig{12, 4}), Contains("not a power of two"));
  REQUIRE_THROWS_WITH(Net(3, FluxConfig{8, 0}), Contains("max_inflight must be > 0"));
  REQUIRE_THROWS_WITH(Net(0), Contains("num_nodes"));
  Net net(2, FluxConfig{8, 4});
  Node a = net.node(0);
  REQUIRE_THROWS_WITH(net.node(0), Contains("already taken"));
  REQUIRE_THROWS_WITH(net.node(2), Contains("out of range"));
  CHECK(Net(2).config().capacity == 1024);
  CHECK(Net(2).config().max_inflight == 256);
}

TEST_CASE("flux call refuses at max_inflight - tokens come back with responses", "[shm][flux]") {
  Net net(3, FluxConfig{8, 4});
  Node n0 = net.node(0), n1 = net.node(1), n2 = net.node(2);
  for (uint64_t i = 0; i < 4; ++i) REQUIRE(n0.call(1, Msg{0, 1, i, i * 10}, 100 + i) == FluxCallStatus::kOk);
  REQUIRE(n0.call(1, Msg{}, 0) == FluxCallStatus::kFull);
  REQUIRE(n0.call(2, Msg{0, 2, 0, 5}, 200) == FluxCallStatus::kOk);  // per-target limit
  REQUIRE(n0.call(3, Msg{}, 0) == FluxCallStatus::kBadTarget);
  CHECK(n0.in_flight(1) == 4);
  CHECK(n0.in_flight(2) == 1);

  std::vector<FluxRequest<Msg>> got;
  while (auto r = n1.try_recv()) got.push_back(*r);
  REQUIRE(got.size() == 4);
  for (uint64_t i = 0; i < 4; ++i) {
    CHECK(got[i].source == 0);
    CHECK(got[i].token.source == 0);
    CHECK(got[i].payload.seq == i);  // FIFO per source
  }
  CHECK(n1.owed(0) == 4);
  // Reply out of order.
  for (int i : {3, 1, 0, 2}) REQUIRE(n1.reply(got[i].token, Msg{1, 0, got[i].payload.seq, got[i].payload.value + 1}) == FluxReplyStatus::kOk);
  REQUIRE(n1.reply(got[0].token, Msg{}) == FluxReplyStatus::kNotOutstanding);
  std::vector<uint64_t> tokens;
  REQUIRE(n0.poll([&](uint64_t t, const Msg& m) {
    REQUIRE(t == 100 + m.seq);
    REQUIRE(m.value == m.seq * 10 + 1);
    tokens.push_back(t);
  }) == 4);
  REQUIRE(tokens == std::vector<uint64_t>{103, 101, 100, 102});
  CHECK(n0.in_flight(1) == 0);
  auto r2 = n2.try_recv();
  REQUIRE(r2.has_value());
  REQUIRE(n2.reply(r2->token, Msg{}) == FluxReplyStatus::kOk);
  REQUIRE(n0.poll([&](uint64_t t, const Msg&) { CHECK(t == 200); }) == 1);
}

TEST_CASE("flux reply validates the token", "[shm][flux]") {
  Net net(2, FluxConfig{8, 4});
  Node n0 = net.node(0), n1 = net.node(1);
  CHECK(n1.reply(FluxReplyToken{2, 0}, Msg{}) == FluxReplyStatus::kBadToken);
  CHECK(n1.reply(FluxReplyToken{0, 4}, Msg{}) == FluxReplyStatus::kBadToken);
  CHECK(n1.reply(FluxReplyToken{0, 0}, Msg{}) == FluxReplyStatus::kNotOutstanding);
  // A response for a slot that awaits nothing is dropped and counted.
  REQUIRE(n0.call(1, Msg{}, 1) == FluxCallStatus::kOk);
  auto r = n1.try_recv();
  REQUIRE(r.has_value());
  CHECK(n1.reply(FluxReplyToken{0, 3}, Msg{}) == FluxReplyStatus::kNotOutstanding);  // another slot is owed
  // A response written by hand (as a corrupted node 1 would) for slot 3.
  net.ring(1, 0).publish(0, kFluxResponseBit | 3, Msg{});
  REQUIRE(n0.poll([](uint64_t, const Msg&) { FAIL("stray response delivered"); }) == 0);
  CHECK(n0.protocol_errors() == 1);
  CHECK(n0.in_flight(1) == 1);
}

TEST_CASE("flux parks requests met by poll and responses met by try_recv", "[shm][flux]") {
  Net net(2, FluxConfig{8, 4});
  Node n0 = net.node(0), n1 = net.node(1);
  // Ring 1 -> 0 will hold: request A, response to n0's call, request B.
  REQUIRE(n0.call(1, Msg{0, 1, 0, 0}, 77) == FluxCallStatus::kOk);
  auto r = n1.try_recv();
  REQUIRE(r.has_value());
  REQUIRE(n1.call(0, Msg{1, 0, 0, 0}, 1) == FluxCallStatus::kOk);
  REQUIRE(n1.reply(r->token, Msg{1, 0, 0, 5}) == FluxReplyStatus::kOk);
  REQUIRE(n1.call(0, Msg{1, 0, 1, 0}, 2) == FluxCallStatus::kOk);

  SECTION("try_recv first") {
    auto a = n0.try_recv();
    REQUIRE(a.has_value());
    CHECK(a->payload.seq == 0);
    auto b = n0.try_recv();  // parks the response on the way
    REQUIRE(b.has_value());
    CHECK(b->payload.seq == 1);
    REQUIRE_FALSE(n0.try_recv().has_value());
    uint64_t tok = 0;
    REQUIRE(n0.poll([&](uint64_t t, const Msg& m) {
      tok = t;
      CHECK(m.value == 5);
    }) == 1);
    CHECK(tok == 77);
  }
  SECTION("poll first") {
    uint64_t tok = 0;
    REQUIRE(n0.poll([&](uint64_t t, const Msg&) { tok = t; }) == 1);  // parks both requests
    CHECK(tok == 77);
    auto a = n0.try_recv();
    auto b = n0.try_recv();
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    CHECK(a->payload.seq == 0);
    CHECK(b->payload.seq == 1);
    REQUIRE_FALSE(n0.try_recv().has_value());
  }
}

TEST_CASE("flux try_recv is round-robin over sources - self calls work", "[shm][flux]") {
  Net net(3, FluxConfig{16, 8});
  Node n0 = net.node(0), n1 = net.node(1), n2 = net.node(2);
  for (uint64_t i = 0; i < 3; ++i) {
    REQUIRE(n0.call(2, Msg{0, 2, i, 0}, i) == FluxCallStatus::kOk);
    REQUIRE(n1.call(2, Msg{1, 2, i, 0}, i) == FluxCallStatus::kOk);
    REQUIRE(n2.call(2, Msg{2, 2, i, 0}, i) == FluxCallStatus::kOk);
  }
  std::vector<uint32_t> sources;
  std::vector<FluxRequest<Msg>> reqs;
  while (auto r = n2.try_recv()) {
    sources.push_back(r->source);
    reqs.push_back(*r);
  }
  REQUIRE(sources == std::vector<uint32_t>{0, 1, 2, 0, 1, 2, 0, 1, 2});
  for (auto& r : reqs) REQUIRE(n2.reply(r.token, r.payload) == FluxReplyStatus::kOk);
  uint32_t self = 0;
  REQUIRE(n2.poll([&](uint64_t, const Msg& m) { self += m.from == 2 ? 1u : 0u; }) == 3);
  CHECK(self == 3);
  REQUIRE(n0.poll([](uint64_t, const Msg&) {}) == 3);
  REQUIRE(n1.poll([](uint64_t, const Msg&) {}) == 3);
}

TEST_CASE("flux random interleavings over many laps: exactly once, FIFO per pair", "[shm][flux]") {
  constexpr uint32_t kN = 3;
  Net net(kN, FluxConfig{8, 4});  // tight: capacity == 2 * max_inflight
  std::vector<Node> nodes;
  for (uint32_t i = 0; i < kN; ++i) nodes.push_back(net.node(i));
  bkv::Rng rng(bkv::derive_seed(3, {1}));
  uint64_t next[kN][kN] = {}, seen[kN][kN] = {}, answered[kN][kN] = {};
  std::vector<std::vector<FluxRequest<Msg>>> held(kN);
  uint64_t calls = 0, responses = 0;
  constexpr uint64_t kCalls = 6000;
  for (uint64_t step = 0; step < 400000 && responses < kCalls; ++step) {
    const uint32_t me = static_cast<uint32_t>(rng.below(kN));
    Node& n = nodes[me];
    const uint64_t op = rng.below(6);
    if (op < 2 && calls < kCalls) {
      const uint32_t to = static_cast<uint32_t>(rng.below(kN));
      const uint64_t s = next[me][to];
      const auto st = n.call(to, Msg{me, to, s, s * 7}, (uint64_t{to} << 32) | s);
      if (st == FluxCallStatus::kOk) {
        ++next[me][to];
        ++calls;
      } else {
        REQUIRE(st == FluxCallStatus::kFull);
        REQUIRE(n.in_flight(to) == 4);
      }
    } else if (op < 4) {
      if (auto r = n.try_recv()) {
        REQUIRE(r->payload.to == me);
        REQUIRE(r->payload.from == r->source);
        REQUIRE(r->payload.seq == seen[r->source][me]++);
        held[me].push_back(*r);
      }
    } else if (op < 5 && !held[me].empty()) {
      const size_t k = rng.below(held[me].size());
      const auto r = held[me][k];
      held[me].erase(held[me].begin() + static_cast<long>(k));
      Msg m = r.payload;
      m.value += 1;
      REQUIRE(n.reply(r.token, m) == FluxReplyStatus::kOk);
    } else {
      n.poll([&](uint64_t t, const Msg& m) {
        REQUIRE(m.from == me);
        REQUIRE(t == ((uint64_t{m.to} << 32) | m.seq));
        REQUIRE(m.value == m.seq * 7 + 1);
        ++answered[me][m.to];
        ++responses;
      });
    }
  }
  REQUIRE(responses == kCalls);
  for (uint32_t i = 0; i < kN; ++i) {
    CHECK(nodes[i].protocol_errors() == 0);
    for (uint32_t j = 0; j < kN; ++j) {
      CHECK(answered[i][j] == next[i][j]);
      CHECK(nodes[i].in_flight(j) == 0);
    }
  }
}

TEST_CASE_METHOD(HandWrittenRing, "flux drops a request whose slab index is out of range", "[shm][flux]") {
  // A request with slab index 6 >= max_inflight, then a valid one with index 2.
  ring.publish(0, 6, Msg{0, 1, 99, 0});
  ring.publish(1, 2, Msg{0, 1, 1, 0});
  const auto r = take();
  CHECK(r.payload.seq == 1);
  CHECK(r.token.slot == 2);
  CHECK(n1.protocol_errors() == 1);
  CHECK(n1.owed(0) == 1);
  // Same through poll(), which parks requests.
  ring.publish(2, kFluxSlotMask, Msg{0, 1, 98, 0});
  REQUIRE(n1.poll([](uint64_t, const Msg&) { FAIL("no response expected"); }) == 0);
  CHECK(n1.protocol_errors() == 2);
  REQUIRE_FALSE(n1.try_recv().has_value());
}

TEST_CASE("flux refuses a second reply while other requests of the source are owed", "[shm][flux]") {
  Net net(2, FluxConfig{8, 4});
  Node n0 = net.node(0), n1 = net.node(1);
  REQUIRE(n0.call(1, Msg{0, 1, 1, 0}, 1) == FluxCallStatus::kOk);
  REQUIRE(n0.call(1, Msg{0, 1, 2, 0}, 2) == FluxCallStatus::kOk);
  auto r1 = n1.try_recv();
  auto r2 = n1.try_recv();
  REQUIRE(r1.has_value());
  REQUIRE(r2.has_value());
  REQUIRE(n1.reply(r1->token, Msg{}) == FluxReplyStatus::kOk);
  CHECK(n1.reply(r1->token, Msg{}) == FluxReplyStatus::kNotOutstanding);
  CHECK(n1.owed(0) == 1);
  REQUIRE(n1.reply(r2->token, Msg{}) == FluxReplyStatus::kOk);
  std::vector<uint64_t> got;
  REQUIRE(n0.poll([&](uint64_t t, const Msg&) { got.push_back(t); }) == 2);
  CHECK(got == std::vector<uint64_t>{1, 2});
  CHECK(n0.protocol_errors() == 0);
}

TEST_CASE_METHOD(HandWrittenRing, "flux drops a request whose slot still awaits a reply", "[shm][flux]") {
  // Two requests with slot 2, one taken by try_recv() directly, one parked by poll().
  ring.publish(0, 2, Msg{0, 1, 1, 0});
  ring.publish(1, 2, Msg{0, 1, 2, 0});
  const auto r = take();
  CHECK(r.payload.seq == 1);
  REQUIRE_FALSE(n1.try_recv().has_value());
  CHECK(n1.protocol_errors() == 1);
  CHECK(n1.owed(0) == 1);
  ring.publish(2, 2, Msg{0, 1, 3, 0});
  REQUIRE(n1.poll([](uint64_t, const Msg&) { FAIL("no response expected"); }) == 0);
  REQUIRE_FALSE(n1.try_recv().has_value());
  CHECK(n1.protocol_errors() == 2);
  // Once answered, the slot takes a request again.
  REQUIRE(n1.reply(r.token, Msg{}) == FluxReplyStatus::kOk);
  ring.publish(3, 2, Msg{0, 1, 4, 0});
  CHECK(take().payload.seq == 4);
}
