// copyrpc edge cases between two honest contexts over the instant loopback: sizes at
// their limits, wraps exactly at the ring end, credit that can never be granted, replies
// given twice, response callbacks that call again or stop their endpoint, and skewed
// load over many endpoints (run under ASan+UBSan in CI, group protocol).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "core/random.hpp"
#include "tests/copyrpc/hostile_peer.hpp"
#include "tests/copyrpc/instant_cluster.hpp"

using namespace bkv;
using copyrpc::CallStatus;
using copyrpc::EndpointError;
using T = loopback::InstantTransport;
using Ctx = test::InstantCtx;

namespace {

std::vector<std::byte> pattern(size_t n, uint64_t salt) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<uint8_t>(i * 31 + salt * 7 + 1));
  return v;
}

using Pair = test::InstantPair;

copyrpc::ContextConfig small_ring() {
  copyrpc::ContextConfig c;
  c.ring_size = 4096;
  c.srq_size = 64;
  return c;
}

auto no_failed_calls = [](uint64_t, EndpointError e) { FAIL("a call was failed back: " << copyrpc::to_string(e)); };

}  // namespace

TEST_CASE("copyrpc edges: payload and allowance of exactly ring/8 go through, one byte more is TooLarge",
          "[copyrpc][edges]") {
  Pair p(small_ring());
  const uint64_t max = p.a.max_payload();
  REQUIRE(max == 4096 / 8);
  CHECK(p.a.call(p.ea, pattern(max + 1, 0), 0, 1).status == CallStatus::kTooLarge);
  CHECK(p.a.call(p.ea, pattern(0, 0), static_cast<uint32_t>(max + 1), 1).status == CallStatus::kTooLarge);
  // Many round trips of maximum-size requests and replies: the rings wrap, every byte
  // arrives intact.
  uint64_t answered = 0;
  for (uint64_t i = 0; i < 40; ++i) {
    const std::vector<std::byte> req = pattern(max, i);
    copyrpc::CallResult r{};
    for (int tries = 0; tries < 4; ++tries) {
      r = p.a.call(p.ea, req, static_cast<uint32_t>(max), 1000 + i);
      if (r.ok()) break;
      p.a.poll([](uint64_t, std::span<const std::byte>) {}, no_failed_calls);
    }
    INFO("round trip " << i << ": " << copyrpc::to_string(r.status));
    REQUIRE(r.ok());
    p.a.flush();
    p.b.drain([](uint64_t, std::span<const std::byte>) { FAIL("b made no calls"); }, no_failed_calls);
    copyrpc::RecvHandle h;
    REQUIRE(p.b.recv(h));
    REQUIRE(h.payload().size() == max);
    CHECK(std::equal(req.begin(), req.end(), h.payload().begin()));
    REQUIRE(copyrpc::max_reply_payload(h.allowance()) >= max);
    CHECK(p.b.reply(std::move(h), pattern(copyrpc::max_reply_payload(h.allowance()) + 1, 0)) == CallStatus::kTooLarge);
    REQUIRE(p.b.reply(std::move(h), pattern(max, i + 100)) == CallStatus::kOk);
    p.b.flush();
    p.a.drain(
        [&](uint64_t tok, std::span<const std::byte> resp) {
          CHECK(tok == 1000 + i);
          const std::vector<std::byte> want = pattern(max, i + 100);
          CHECK(std::equal(want.begin(), want.end(), resp.begin(), resp.end()));
          ++answered;
        },
        no_failed_calls);
  }
  CHECK(answered == 40);
  CHECK(p.a.stats().wraps >= 4);
  CHECK(p.b.stats().wraps >= 4);
}

TEST_CASE("copyrpc edges: a batch that would end exactly at the ring end wraps first", "[copyrpc][edges]") {
  // One call per flush, 84-byte payloads: each batch is 32 (metadata) + 96 bytes, so the
  // 32nd batch would end exactly at offset 4096. The strict test wraps it: a wrap marker
  // covers the last 128 bytes and the call goes at offset 0 of the next cycle.
  Pair p(small_ring());
  const uint64_t batch = copyrpc::kFlowMetadataSize + copyrpc::padded_message_size(84);
  REQUIRE(batch == 128);
  for (uint64_t i = 0; i < 2 * 4096 / batch + 3; ++i) {
    const uint64_t producer_before = p.a.endpoint(p.ea).producer;
    const std::vector<std::byte> req = pattern(84, i);
    REQUIRE(p.a.call(p.ea, req, 8, i).ok());
    const bool ends_at_ring_end = (producer_before % 4096) + batch == 4096;
    INFO("call " << i << " producer " << producer_before);
    if (ends_at_ring_end) {
      CHECK(p.a.endpoint(p.ea).producer % 4096 == batch);  // at the next cycle's start
      CHECK(p.a.endpoint(p.ea).producer == producer_before + batch + batch);
    } else {
      CHECK(p.a.endpoint(p.ea).producer == producer_before + batch);
    }
    p.a.flush();
    p.b.drain([](uint64_t, std::span<const std::byte>) {}, no_failed_calls);
    CHECK(p.b.error(p.eb) == EndpointError::kNone);
    copyrpc::RecvHandle h;
    REQUIRE(p.b.recv(h));
    CHECK(std::equal(req.begin(), req.end(), h.payload().begin(), h.payload().end()));
    REQUIRE(p.b.reply(std::move(h), pattern(8, i)) == CallStatus::kOk);
    p.b.flush();
    uint64_t got = ~0ull;
    p.a.drain([&](uint64_t tok, std::span<const std::byte>) { got = tok; }, no_failed_calls);
    CHECK(got == i);
  }
  CHECK(p.a.stats().wraps == 2);
}

TEST_CASE("copyrpc edges: a response callback that stops its endpoint mid-batch fails the rest back once",
          "[copyrpc][edges][failed_calls]") {
  Pair p(small_ring());
  for (uint64_t i = 0; i < 6; ++i) REQUIRE(p.a.call(p.ea, pattern(8, i), 16, 100 + i).ok());
  p.a.flush();
  p.b.drain([](uint64_t, std::span<const std::byte>) {}, no_failed_calls);
  copyrpc::RecvHandle h;
  while (p.b.recv(h)) REQUIRE(p.b.reply(std::move(h), pattern(4, h.call_id())) == CallStatus::kOk);
  p.b.flush();  // one batch with six responses
  std::vector<uint64_t> completed, failed;
  p.a.drain(
      [&](uint64_t tok, std::span<const std::byte>) {
        completed.push_back(tok);
        if (tok == 102) p.a.stop_endpoint(p.ea);
      },
      [&](uint64_t tok, EndpointError e) {
        CHECK(e == EndpointError::kStoppedByOwner);
        failed.push_back(tok);
      });
  CHECK(completed == std::vector<uint64_t>{100, 101, 102});
  CHECK(failed == std::vector<uint64_t>{103, 104, 105});
  CHECK(p.a.calls_in_flight() == 0);
  CHECK(p.a.stats().messages_received == 3);
  // Nothing more comes out of later drains.
  p.a.drain([](uint64_t tok, std::span<const std::byte>) { FAIL("late response " << tok); },
            [](uint64_t tok, EndpointError) { FAIL("failed twice " << tok); });
}

TEST_CASE("copyrpc edges: a response callback that calls again reuses the freed call id, answered once each",
          "[copyrpc][edges]") {
  Pair p(small_ring());
  uint64_t next_token = 0;
  std::map<uint64_t, uint32_t> answers;  // token -> times answered
  for (; next_token < 4; ++next_token) REQUIRE(p.a.call(p.ea, pattern(8, next_token), 16, next_token).ok());
  // a's calls go out; b answers each with its first 4 bytes.
  auto b_echoes = [&] {
    p.a.flush();
    p.b.drain([](uint64_t, std::span<const std::byte>) {}, no_failed_calls);
    copyrpc::RecvHandle h;
    while (p.b.recv(h)) REQUIRE(p.b.reply(std::move(h), h.payload().first(4)) == CallStatus::kOk);
    p.b.flush();
  };
  for (int round = 0; round < 200; ++round) {
    b_echoes();
    p.a.drain(
        [&](uint64_t tok, std::span<const std::byte> resp) {
          ++answers[tok];
          const std::vector<std::byte> want = pattern(8, tok);
          CHECK(std::equal(want.begin(), want.begin() + 4, resp.begin(), resp.end()));
          // Calls again from inside the callback, on the same endpoint: the new call may
          // take the id just freed; a later response in the same batch must not reach it.
          if (next_token < 600) {
            const copyrpc::CallResult r = p.a.call(p.ea, pattern(8, next_token), 16, next_token);
            if (r.ok()) ++next_token;
          }
        },
        no_failed_calls);
  }
  // Quiesce.
  for (int i = 0; i < 4; ++i) {
    b_echoes();
    p.a.drain([&](uint64_t tok, std::span<const std::byte>) { ++answers[tok]; }, no_failed_calls);
  }
  CHECK(next_token >= 600);
  CHECK(answers.size() == next_token);
  for (const auto& [tok, n] : answers) {
    INFO("token " << tok);
    CHECK(n == 1);
  }
  CHECK(p.a.calls_in_flight() == 0);
}

TEST_CASE("copyrpc edges: one hot endpoint among many: every call answered once, in reply order per endpoint",
          "[copyrpc][edges]") {
  constexpr uint64_t kSeed = 20261123;
  INFO("seed=" << kSeed);
  Rng rng(kSeed);
  copyrpc::ContextConfig cfg = small_ring();
  loopback::InstantFabric fabric;
  T thub{fabric, 4096, 256};
  Ctx hub(thub, cfg);
  constexpr uint32_t kLeaves = 8;
  std::vector<std::unique_ptr<T>> lt;
  std::vector<std::unique_ptr<Ctx>> leaves;
  std::vector<uint32_t> hub_ep, leaf_ep;
  for (uint32_t i = 0; i < kLeaves; ++i) {
    lt.push_back(std::make_unique<T>(fabric, 4096, 256));
    leaves.push_back(std::make_unique<Ctx>(*lt.back(), cfg));
    hub_ep.push_back(hub.create_endpoint());
    leaf_ep.push_back(leaves.back()->create_endpoint());
    hub.connect(hub_ep.back(), leaves.back()->local_info(leaf_ep.back()));
    leaves.back()->connect(leaf_ep.back(), hub.local_info(hub_ep.back()));
  }
  // The hub calls leaf 0 nine times out of ten; each leaf answers its held requests in
  // a random order, and the hub must see the answers of one leaf in the order it replied.
  std::vector<std::vector<uint64_t>> replied(kLeaves), answered(kLeaves);
  uint64_t token = 0, calls = 0;
  auto on_resp = [&](uint64_t tok, std::span<const std::byte> resp) {
    REQUIRE(resp.size() == 8);
    uint64_t leaf = 0;
    std::memcpy(&leaf, resp.data(), 8);
    REQUIRE(leaf < kLeaves);
    answered[leaf].push_back(tok);
  };
  // Leaf l answers a request with its own number, and notes the request's token.
  auto reply_from = [&](uint32_t l, copyrpc::RecvHandle&& h) {
    uint64_t tok = 0;
    std::memcpy(&tok, h.payload().data(), 8);
    std::vector<std::byte> resp(8);
    const uint64_t who = l;
    std::memcpy(resp.data(), &who, 8);
    REQUIRE(leaves[l]->reply(std::move(h), resp) == CallStatus::kOk);
    replied[l].push_back(tok);
  };
  for (int step = 0; step < 20000; ++step) {
    const uint32_t leaf = rng.below(10) < 9 ? 0 : 1 + static_cast<uint32_t>(rng.below(kLeaves - 1));
    std::vector<std::byte> req(8);
    std::memcpy(req.data(), &token, 8);
    if (hub.call(hub_ep[leaf], req, 8, token).ok()) {
      ++token;
      ++calls;
    }
    if (rng.below(4) == 0) hub.poll(on_resp, no_failed_calls);
    for (uint32_t l = 0; l < kLeaves; ++l) {
      if (rng.below(3) != 0) continue;
      leaves[l]->drain([](uint64_t, std::span<const std::byte>) {}, no_failed_calls);
      std::vector<copyrpc::RecvHandle> held;
      copyrpc::RecvHandle h;
      while (leaves[l]->recv(h)) held.push_back(std::move(h));
      for (size_t i = held.size(); i > 1; --i) std::swap(held[i - 1], held[rng.below(i)]);
      for (auto& x : held) reply_from(l, std::move(x));
      leaves[l]->flush();
    }
  }
  for (int round = 0; round < 8; ++round) {
    hub.poll(on_resp, no_failed_calls);
    for (uint32_t l = 0; l < kLeaves; ++l) {
      leaves[l]->drain([](uint64_t, std::span<const std::byte>) {}, no_failed_calls);
      copyrpc::RecvHandle h;
      while (leaves[l]->recv(h)) reply_from(l, std::move(h));
      leaves[l]->flush();
    }
  }
  hub.poll(on_resp, no_failed_calls);
  CHECK(hub.calls_in_flight() == 0);
  uint64_t total = 0;
  for (uint32_t l = 0; l < kLeaves; ++l) {
    INFO("leaf " << l);
    CHECK(answered[l] == replied[l]);
    total += answered[l].size();
  }
  CHECK(total == calls);
  CHECK(answered[0].size() > 5 * answered[1].size());
  CHECK(calls > 5000);
}

TEST_CASE("copyrpc edges: a response reservation smaller than the smallest call is refused at construction",
          "[copyrpc][edges]") {
  loopback::InstantFabric fabric;
  T t{fabric};
  copyrpc::ContextConfig cfg = small_ring();
  cfg.max_resp_reservation = 32;  // < internal_allowance(0): no call could ever be granted
  CHECK_THROWS_AS(Ctx(t, cfg), std::invalid_argument);
  cfg.max_resp_reservation = copyrpc::internal_allowance(0);
  CHECK_NOTHROW(Ctx(t, cfg));
}

TEST_CASE("copyrpc edges: a ring above 2^31 bytes is refused: a batch, up to a ring, is one RDMA WRITE",
          "[copyrpc][edges]") {
  copyrpc::ContextConfig cfg = small_ring();
  cfg.ring_size = uint64_t{1} << 32;
  CHECK_THROWS_WITH(copyrpc::checked_config(cfg, 4096, 4096), Catch::Contains("[4096, 2^31], got 4294967296"));
  cfg.ring_size = uint64_t{1} << 31;
  CHECK_NOTHROW(copyrpc::checked_config(cfg, 4096, 4096));
}

TEST_CASE("copyrpc edges: a call whose allowance the peer can never grant is TooLarge, not retryable",
          "[copyrpc][edges]") {
  copyrpc::ContextConfig cfg = small_ring();
  cfg.max_resp_reservation = 64;  // the peer never grants more than 64 bytes: internal_allowance(20)
  Pair p(cfg);
  REQUIRE(copyrpc::internal_allowance(20) == 64);
  REQUIRE(copyrpc::internal_allowance(21) == 96);
  // 21 bytes of allowance need 96 bytes of credit, more than the peer ever holds out.
  for (int round = 0; round < 3; ++round) {
    CHECK(p.a.call(p.ea, pattern(4, 0), 21, 1).status == CallStatus::kTooLarge);
    p.a.poll([](uint64_t, std::span<const std::byte>) {}, no_failed_calls);
    p.b.poll([](uint64_t, std::span<const std::byte>) {}, no_failed_calls);
  }
  // 20 bytes fit the grant: the call goes through and is answered.
  REQUIRE(p.a.call(p.ea, pattern(4, 0), 20, 2).ok());
  // The grant is spent: the next one is retryable (InsufficientCredit), not TooLarge.
  CHECK(p.a.call(p.ea, pattern(4, 0), 20, 3).status == CallStatus::kInsufficientCredit);
}

TEST_CASE("copyrpc edges: ends with different response reservations each call within the other's advertised credit",
          "[copyrpc][edges]") {
  // Each end's initial credit travels in its EndpointInfo (local_info), so a connection
  // between different max_resp_reservation values is consistent: a's calls spend what b
  // advertised (min(1024, ring/4) = 1024) and b's calls what a advertised (64). Were a
  // side to take its own value for the peer's, a's calls of 400 bytes of allowance would
  // wait for credit b never grants (checked: the count of a's calls fails then).
  copyrpc::ContextConfig small = small_ring(), large = small_ring();
  small.max_resp_reservation = 64;
  large.max_resp_reservation = 1024;
  Pair p(small, large);
  REQUIRE(p.a.local_info(p.ea).initial_credit == 64);
  REQUIRE(p.b.local_info(p.eb).initial_credit == 1024);
  // b's calls: at most 20 bytes of allowance (64 bytes of a's credit), never retryable.
  CHECK(p.b.call(p.eb, pattern(4, 0), 21, 1).status == CallStatus::kTooLarge);
  const uint32_t a_allow = 400, b_allow = 20;
  std::map<uint64_t, uint64_t> answered_by;  // token -> reply length
  uint64_t sent[2] = {0, 0}, answered[2] = {0, 0};
  auto on_resp = [&](int side) {
    return [&, side](uint64_t tok, std::span<const std::byte> resp) {
      const std::vector<std::byte> want = pattern(resp.size(), tok);
      CHECK(std::equal(want.begin(), want.end(), resp.begin(), resp.end()));
      CHECK(resp.size() == tok % (side == 0 ? a_allow + 1 : b_allow + 1));
      ++answered[side];
    };
  };
  auto serve = [&](Ctx& c, uint32_t allow) {
    copyrpc::RecvHandle h;
    while (c.recv(h)) {
      uint64_t tok = 0;
      REQUIRE(h.payload().size() == 8);
      std::memcpy(&tok, h.payload().data(), 8);
      REQUIRE(copyrpc::max_reply_payload(h.allowance()) >= allow);
      REQUIRE(c.reply(std::move(h), pattern(tok % (allow + 1), tok)) == CallStatus::kOk);
    }
  };
  for (uint64_t round = 0; round < 3000; ++round) {
    for (int side = 0; side < 2; ++side) {
      Ctx& c = side == 0 ? p.a : p.b;
      const uint32_t ep = side == 0 ? p.ea : p.eb;
      const uint64_t tok = (round << 1) | uint64_t(side);
      std::byte req[8];
      std::memcpy(req, &tok, 8);
      const copyrpc::CallResult r = c.call(ep, req, side == 0 ? a_allow : b_allow, tok);
      if (r.ok()) {
        ++sent[side];
      } else {
        INFO("side " << side << " round " << round);
        REQUIRE((r.status == CallStatus::kInsufficientCredit || r.status == CallStatus::kRingFull));
      }
    }
    p.a.poll(on_resp(0), no_failed_calls);
    p.b.poll(on_resp(1), no_failed_calls);
    serve(p.a, b_allow);
    serve(p.b, a_allow);
    p.a.flush();
    p.b.flush();
  }
  for (int i = 0; i < 8; ++i) {
    p.a.poll(on_resp(0), no_failed_calls);
    p.b.poll(on_resp(1), no_failed_calls);
    serve(p.a, b_allow);
    serve(p.b, a_allow);
  }
  CHECK(p.a.calls_in_flight() == 0);
  CHECK(p.b.calls_in_flight() == 0);
  CHECK(answered[0] == sent[0]);
  CHECK(answered[1] == sent[1]);
  // Both directions carried at least a third of their 3000 attempts.
  CHECK(sent[0] >= 1000);
  CHECK(sent[1] >= 1000);
}

// ---------------------------------------------------------------------------------
// Hostile peer values exactly at each receive-path limit, and one step past it.

namespace {

// The edge tests' peer: each batch written is drained at once, and calls the victim made
// may be failed back when a rule breaks the endpoint.
struct FakePeer : test::HostilePeer {
  FakePeer() : HostilePeer(small_ring(), 64) {}
  EndpointError send(uint32_t len, uint32_t imm) {
    write(len, imm);
    return poll([](uint64_t, EndpointError) {});
  }
};

}  // namespace

TEST_CASE("copyrpc edges: hostile values exactly at each limit pass, one step past is refused by its rule",
          "[copyrpc][edges][hostile]") {
  FakePeer f;
  SECTION("credit return: up to the bytes sent, not one 32-byte unit more") {
    REQUIRE(f.victim.call(f.ep, {}, 0, 1).ok());
    f.victim.flush();  // 64 bytes sent: metadata + one 32-byte message
    f.meta(64, 0, 0);
    CHECK(f.send(32, 1) == EndpointError::kNone);
    f.meta(32, 0, 0);
    CHECK(f.send(32, 1) == EndpointError::kBadCreditReturn);
  }
  SECTION("credit grant: a balance of exactly the ring, not 32 bytes more") {
    f.meta(0, 4096 - 1024, 0);
    CHECK(f.send(32, 1) == EndpointError::kNone);
    f.meta(0, 32, 0);
    CHECK(f.send(32, 1) == EndpointError::kBadCreditGrant);
  }
  SECTION("request allowance: exactly the credit granted, then nothing left") {
    f.meta(0, 0, 1);
    f.header(32, 1, 1024 / 32, 0);  // all of R (ring/4)
    CHECK(f.send(64, 2) == EndpointError::kNone);
    f.meta(0, 0, 1);
    f.header(32, 2, 2, 0);  // 64 more: beyond R
    CHECK(f.send(64, 2) == EndpointError::kBadAllowance);
  }
  SECTION("request allowance below the smallest internal allowance (64)") {
    f.meta(0, 0, 1);
    f.header(32, 1, 1, 0);
    CHECK(f.send(64, 2) == EndpointError::kBadAllowance);
  }
  SECTION("message count: exactly as many 32-byte messages as the batch holds") {
    constexpr uint32_t kMsgs = 7;
    f.meta(0, 0, kMsgs);
    for (uint32_t i = 0; i < kMsgs; ++i) f.header(32 + 32 * i, i, 2, 20);  // 12 + 20 = 32 bytes each
    CHECK(f.send(32 + 32 * kMsgs, 1 + kMsgs) == EndpointError::kNone);
    uint32_t got = 0;
    copyrpc::RecvHandle h;
    while (f.victim.recv(h)) ++got;
    CHECK(got == kMsgs);
  }
  SECTION("message count: one more than the batch holds") {
    f.meta(0, 0, 3);
    f.header(32, 0, 2, 20);
    f.header(64, 1, 2, 20);
    CHECK(f.send(96, 3) == EndpointError::kBadMessageCount);
  }
  SECTION("payload length: filling the batch exactly, and one byte more") {
    f.meta(0, 0, 1);
    f.header(32, 1, 2, 64 - 12);  // header + 52 bytes = 64: the batch is 96 bytes
    CHECK(f.send(96, 3) == EndpointError::kNone);
    f.meta(0, 0, 1);
    f.header(32, 2, 2, 64 - 12 + 1);
    CHECK(f.send(96, 3) == EndpointError::kBadLength);
  }
  SECTION("a wrap marker covering the whole ring from offset 0") {
    f.meta(0, 0, copyrpc::kWrapMessageCount);
    CHECK(f.send(32, 4096 / 32) == EndpointError::kNone);
    CHECK(f.victim.endpoint(f.ep).recv_producer == 4096);
  }
  SECTION("a response naming the call id one past every id the slab has handed out") {
    REQUIRE(f.victim.call(f.ep, {}, 0, 1).ok());  // call id 0: the slab holds one slot
    f.meta(0, 0, 1);
    f.header(32, copyrpc::to_response_id(1), 0, 0);
    CHECK(f.send(64, 2) == EndpointError::kUnknownCallId);
  }
  SECTION("a response naming the largest call id, never made") {
    REQUIRE(f.victim.call(f.ep, {}, 0, 1).ok());
    f.meta(0, 0, 1);
    f.header(32, copyrpc::to_response_id(copyrpc::kMaxCallId), 0, 0);
    CHECK(f.send(64, 2) == EndpointError::kUnknownCallId);
  }
}

// Both kinds of pending-call slab: untimed (real transports: free ids on a list through
// the slots) and timed (the simulator: free ids on a stack of their own).
using UntimedSlab = copyrpc::CallSlab<uint64_t, false>;
using TimedSlab = copyrpc::CallSlab<uint64_t, true>;

// The pending-call slab's id check at its boundary (the test is built with
// _GLIBCXX_ASSERTIONS: an index one past the slab aborts instead of reading on).
TEMPLATE_TEST_CASE("copyrpc call slab: ids up to the last one handed out are found and the next one is not",
                   "[copyrpc]", UntimedSlab, TimedSlab) {
  TestType slab;
  CHECK(slab.find(0) == nullptr);
  CHECK_FALSE(slab.contains(0));
  for (uint64_t t = 0; t < 3; ++t) {
    const uint32_t id = slab.make_free_slot();
    REQUIRE(id == t);
    slab.insert(id, 100 + t, 64);
  }
  REQUIRE(slab.find(2) != nullptr);
  CHECK(*slab.find(2) == 102);
  CHECK(slab.find(3) == nullptr);
  CHECK_FALSE(slab.contains(3));
  CHECK(slab.find(~0u) == nullptr);
  slab.release(2);
  CHECK(slab.find(2) == nullptr);
  CHECK_FALSE(slab.contains(2));
  CHECK(slab.make_free_slot() == 2);  // the freed slot again, the slab not grown
  CHECK(slab.find(3) == nullptr);
  CHECK(slab.size() == 2);
}

// Call ids are reused last-freed first, and the slab grows only when none is free: the
// ids go on the wire, so a simulated run's bytes depend on this order; both kinds keep it.
TEMPLATE_TEST_CASE("copyrpc call slab: the last id freed is the next one taken, and the slab grows only when none is free",
                   "[copyrpc]", UntimedSlab, TimedSlab) {
  TestType slab;
  for (uint64_t t = 0; t < 4; ++t) slab.insert(slab.make_free_slot(), t, 64);
  slab.release(1);
  slab.release(3);
  slab.release(0);
  CHECK(slab.size() == 1);
  uint32_t taken[4];
  for (uint32_t i = 0; i < 4; ++i) {
    taken[i] = slab.make_free_slot();
    CHECK(slab.make_free_slot() == taken[i]);  // asking again takes nothing
    slab.insert(taken[i], 10 + i, 64);
  }
  CHECK(taken[0] == 0);
  CHECK(taken[1] == 3);
  CHECK(taken[2] == 1);
  CHECK(taken[3] == 4);  // none free: grown by one
  CHECK(slab.size() == 5);
  CHECK(*slab.find(3) == 11);
  // take_all frees in id order, so the largest id is on top afterwards
  std::vector<uint64_t> tokens;
  CHECK(slab.take_all([&](uint64_t&& t) { tokens.push_back(t); }) == 5);
  CHECK(tokens == std::vector<uint64_t>{10, 12, 2, 11, 13});
  CHECK(slab.size() == 0);
  CHECK(slab.find(2) == nullptr);
  CHECK(slab.make_free_slot() == 4);
}

// Each slot keeps its call's allowance (the receive path bounds the response by it), in
// the word that marks it pending: the largest allowance is still pending, a freed slot is
// not, and the free ids keep their order whatever allowances the calls had.
TEMPLATE_TEST_CASE("copyrpc call slab: each pending call keeps its own allowance", "[copyrpc]", UntimedSlab,
                   TimedSlab) {
  TestType slab;
  const uint32_t allowances[3] = {64, TestType::kMaxAllowance, 96};
  for (uint64_t t = 0; t < 3; ++t) slab.insert(slab.make_free_slot(), t, allowances[t]);
  for (uint32_t id = 0; id < 3; ++id) {
    REQUIRE(slab.find(id) != nullptr);
    CHECK(slab.allowance(id) == allowances[id]);
  }
  slab.release(1);
  CHECK(slab.find(1) == nullptr);
  CHECK(slab.size() == 2);
  CHECK(slab.make_free_slot() == 1);
  slab.insert(1, 7, 128);
  CHECK(slab.allowance(1) == 128);
  CHECK(slab.allowance(0) == 64);
  CHECK(slab.allowance(2) == 96);
  CHECK(slab.make_free_slot() == 3);  // none free: grown by one
}

// A timed slab (a metering transport's) keeps each call's time in its slot: a response
// is timed from its own call, whichever id it reuses.
TEST_CASE("copyrpc call slab: a timed slab times each call from its own insert", "[copyrpc]") {
  copyrpc::CallSlab<uint64_t, true> slab;
  const uint32_t a = slab.make_free_slot();
  slab.insert(a, 1, 64, 1000);
  const uint32_t b = slab.make_free_slot();
  slab.insert(b, 2, 64, 1500);
  CHECK(slab.elapsed_ns(a, 1700) == 700);
  CHECK(slab.elapsed_ns(b, 1700) == 200);
  slab.release(a);
  CHECK(slab.elapsed_ns(a, 1800) == 800);  // release keeps the time
  const uint32_t c = slab.make_free_slot();
  REQUIRE(c == a);
  slab.insert(c, 3, 64, 2000);
  CHECK(slab.elapsed_ns(c, 2100) == 100);
  CHECK(slab.elapsed_ns(b, 2100) == 600);
  CHECK(*slab.find(b) == 2);
}
