// copyrpc Context: targeted behaviour (batching, back-pressure, READ fallback, raw
// RDMA, SRQ reposting, signalling) and hostile input (run under ASan+UBSan in CI).
#include <catch2/catch.hpp>

#include <algorithm>

#include <array>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/copyrpc/hostile_peer.hpp"
#include "tests/copyrpc/instant_cluster.hpp"

using namespace bkv;
using copyrpc::CallStatus;
using copyrpc::EndpointError;

namespace {

std::vector<std::byte> bytes(size_t n, uint8_t fill) { return std::vector<std::byte>(n, std::byte{fill}); }

auto ignore_responses = [](uint64_t, std::span<const std::byte>) {};
// For runs where every endpoint stays healthy: a call failed back is a test failure.
auto no_failed_calls = [](uint64_t, EndpointError e) { FAIL("a call was failed back: " << copyrpc::to_string(e)); };

struct Pair : test::InstantPair {
  using InstantPair::InstantPair;
  // a calls b once per token (8-byte payloads, 20-byte response allowance); b receives
  // every call. Returns b's handles, in call order.
  std::vector<copyrpc::RecvHandle> requests(std::initializer_list<uint64_t> tokens) {
    for (uint64_t tok : tokens) REQUIRE(a.call(ea, bytes(8, 1), 20, tok).ok());
    a.flush();
    b.drain(ignore_responses, no_failed_calls);
    std::vector<copyrpc::RecvHandle> held(tokens.size());
    for (auto& h : held) REQUIRE(b.recv(h));
    return held;
  }
  // b's replies so far, flushed to a: the tokens of the calls they answered, in order.
  std::vector<uint64_t> responses() {
    b.flush();
    std::vector<uint64_t> got;
    a.drain([&](uint64_t tok, std::span<const std::byte>) { got.push_back(tok); }, no_failed_calls);
    return got;
  }
};

}  // namespace

TEST_CASE("calls are batched: one WRITE+IMM and one doorbell per endpoint per flush", "[copyrpc]") {
  Pair p;
  for (uint64_t i = 0; i < 10; ++i) REQUIRE(p.a.call(p.ea, bytes(24, 1), 16, i).ok());
  CHECK(p.a.stats().wqes_posted == 0);  // call() only appends
  p.a.flush();
  CHECK(p.a.stats().wqes_posted == 1);
  CHECK(p.a.stats().doorbells == 1);
  CHECK(p.b.drain(ignore_responses, no_failed_calls) == 1);  // one completion carries all ten
  copyrpc::RecvHandle h;
  int n = 0;
  while (p.b.recv(h)) {
    CHECK(h.payload().size() == 24);
    REQUIRE(p.b.reply(std::move(h), bytes(16, 2)) == CallStatus::kOk);
    ++n;
  }
  CHECK(n == 10);
  p.b.flush();
  std::vector<uint64_t> got;
  p.a.drain([&](uint64_t tok, std::span<const std::byte> pl) {
    CHECK(pl.size() == 16);
    got.push_back(tok);
  }, no_failed_calls);
  CHECK(got.size() == 10);
  CHECK(p.a.calls_in_flight() == 0);
}

TEST_CASE("a reply larger than the caller's allowance is refused, a second reply too", "[copyrpc]") {
  Pair p;
  copyrpc::RecvHandle h = std::move(p.requests({7})[0]);
  CHECK(p.b.reply(std::move(h), bytes(copyrpc::max_reply_payload(h.allowance()) + 1, 0)) == CallStatus::kTooLarge);
  CHECK(p.b.reply(std::move(h), bytes(20, 0)) == CallStatus::kOk);
  CHECK(p.b.reply(std::move(h), bytes(20, 0)) == CallStatus::kInvalidHandle);
}

static_assert(!std::is_copy_constructible_v<copyrpc::RecvHandle> && !std::is_copy_assignable_v<copyrpc::RecvHandle>,
              "a copy of a handle could answer its request a second time");

TEST_CASE("a second reply is refused while other requests of the endpoint are held", "[copyrpc]") {
  Pair p;
  std::vector<copyrpc::RecvHandle> held = p.requests({0, 1, 2});
  // Requests 1 and 2 stay held: their committed credit would cover a second release.
  CHECK(p.b.reply(std::move(held[0]), bytes(20, 0)) == CallStatus::kOk);
  CHECK(held[0].spent());
  CHECK(p.b.reply(std::move(held[0]), bytes(20, 0)) == CallStatus::kInvalidHandle);
  // The caller got one response, and its endpoint is healthy (a duplicate would have
  // stopped it with kUnknownCallId).
  CHECK(p.responses() == std::vector<uint64_t>{0});
  CHECK(p.a.endpoint(p.ea).error == EndpointError::kNone);
  // The held requests keep their credit: both are answered.
  CHECK(p.b.reply(std::move(held[2]), bytes(20, 0)) == CallStatus::kOk);
  CHECK(p.b.reply(std::move(held[1]), bytes(20, 0)) == CallStatus::kOk);
  CHECK(p.responses() == std::vector<uint64_t>{2, 1});
  CHECK(p.a.calls_in_flight() == 0);
}

TEST_CASE("a handle moved from, or never filled, answers nothing", "[copyrpc]") {
  Pair p;
  copyrpc::RecvHandle h = std::move(p.requests({5})[0]);
  copyrpc::RecvHandle never;
  CHECK(never.spent());
  CHECK(p.b.reply(std::move(never), bytes(4, 0)) == CallStatus::kInvalidHandle);
  CHECK_FALSE(h.spent());
  copyrpc::RecvHandle moved = std::move(h);
  CHECK(h.spent());
  CHECK(p.b.reply(std::move(h), bytes(4, 0)) == CallStatus::kInvalidHandle);
  CHECK(p.b.reply(std::move(moved), bytes(4, 0)) == CallStatus::kOk);
  CHECK(p.responses() == std::vector<uint64_t>{5});
  CHECK(p.a.endpoint(p.ea).error == EndpointError::kNone);
}

TEST_CASE("a handle is refused by a Context other than the one that received it", "[copyrpc]") {
  Pair p, q;
  std::vector<copyrpc::RecvHandle> held = p.requests({0, 1, 2});
  copyrpc::RecvHandle other = std::move(q.requests({7})[0]);
  // The same endpoint number and call id as held[0], and p.b's committed credit would
  // cover its allowance: only the Context it came from tells it apart.
  REQUIRE(other.endpoint() == held[0].endpoint());
  REQUIRE(other.call_id() == held[0].call_id());
  CHECK(p.b.reply(std::move(other), bytes(20, 0)) == CallStatus::kInvalidHandle);
  CHECK_FALSE(other.spent());
  for (auto& h : held) CHECK(p.b.reply(std::move(h), bytes(20, 0)) == CallStatus::kOk);
  CHECK(q.b.reply(std::move(other), bytes(20, 0)) == CallStatus::kOk);
  // Each caller got one response per call (a stray one would have stopped p.a's
  // endpoint with kUnknownCallId).
  CHECK(p.responses() == std::vector<uint64_t>{0, 1, 2});
  CHECK(q.responses() == std::vector<uint64_t>{7});
  CHECK(p.a.endpoint(p.ea).error == EndpointError::kNone);
}

TEST_CASE("InsufficientCredit when the peer's grant is spent - credit returns with its replies", "[copyrpc]") {
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 1 << 16;
  Pair p(cfg);
  // Initial credit is ring/4; each call with allowance 1000 reserves align32(padded(1000)+32).
  const uint64_t per_call = copyrpc::internal_allowance(1000);
  const uint64_t fit = (cfg.ring_size / 4) / per_call;
  uint64_t ok = 0;
  for (uint64_t i = 0; i < fit + 5; ++i) {
    auto r = p.a.call(p.ea, bytes(0, 0), 1000, i);
    if (r.ok()) ++ok;
    else CHECK(r.status == CallStatus::kInsufficientCredit);
  }
  CHECK(ok == fit);
  p.a.flush();
  p.b.drain(ignore_responses, no_failed_calls);
  copyrpc::RecvHandle h;
  while (p.b.recv(h)) REQUIRE(p.b.reply(std::move(h), bytes(10, 0)) == CallStatus::kOk);
  p.b.flush();
  p.a.drain(ignore_responses, no_failed_calls);
  CHECK(p.a.call(p.ea, bytes(0, 0), 1000, 99).ok());
}

TEST_CASE("RingFull persists without news from the peer: the consumer position is read by RDMA READ",
          "[copyrpc]") {
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 4096;
  Pair p(cfg);
  // A sends until RingFull; B consumes everything but never replies (so no batch, and no
  // piggybacked consumer position, ever travels from B to A).
  uint64_t tok = 0;
  while (p.a.call(p.ea, bytes(200, 3), 0, tok).ok()) ++tok;
  const uint64_t first_burst = tok;
  REQUIRE(first_burst > 0);
  p.a.flush();
  p.b.drain(ignore_responses, no_failed_calls);
  copyrpc::RecvHandle h;
  std::vector<copyrpc::RecvHandle> unanswered;
  while (p.b.recv(h)) unanswered.push_back(std::move(h));
  CHECK(unanswered.size() == first_burst);
  p.b.flush();  // B's loop goes on: its flush publishes what it consumed (nothing to send)
  CHECK(p.a.call(p.ea, bytes(200, 3), 0, tok).status == CallStatus::kRingFull);
  CHECK(p.a.call(p.ea, bytes(200, 3), 0, tok).status == CallStatus::kRingFull);
  p.a.poll(ignore_responses, no_failed_calls);  // posts the READ; the instant NIC completes it at the doorbell
  p.a.drain(ignore_responses, no_failed_calls);  // reaps the READ completion
  CHECK(p.a.stats().reads_posted == 1);
  CHECK(p.a.endpoint(p.ea).consumer_by_read > 0);
  CHECK(p.a.call(p.ea, bytes(200, 3), 0, tok).ok());
}

TEST_CASE("the shared receive queue is reposted to full when it drops below 2/3", "[copyrpc]") {
  copyrpc::ContextConfig cfg;
  cfg.srq_size = 30;
  Pair p(cfg);
  CHECK(p.tb.srq_posted() == 30);
  for (uint64_t i = 0; i < 10; ++i) {  // ten separate batches = ten receives consumed
    REQUIRE(p.a.call(p.ea, bytes(1, 0), 0, i).ok());
    p.a.flush();
  }
  CHECK(p.tb.srq_posted() == 20);
  p.b.drain(ignore_responses, no_failed_calls);  // 20 >= 2/3 of 30: no repost yet
  CHECK(p.tb.srq_posted() == 20);
  REQUIRE(p.a.call(p.ea, bytes(1, 0), 0, 10).ok());
  p.a.flush();
  p.b.drain(ignore_responses, no_failed_calls);  // 19 < 20: reposted to 30
  CHECK(p.tb.srq_posted() == 30);
}

TEST_CASE("one WQE in 64 is signalled, so the send queue never fills", "[copyrpc]") {
  Pair p;
  copyrpc::RecvHandle h;
  for (uint64_t i = 0; i < 2000; ++i) {  // 2000 flushes >> send queue depth 256
    REQUIRE(p.a.call(p.ea, bytes(4, 0), 0, i).ok());
    p.a.flush();
    p.b.poll(ignore_responses, no_failed_calls);
    while (p.b.recv(h)) REQUIRE(p.b.reply(std::move(h), bytes(0, 0)) == CallStatus::kOk);
    p.b.flush();
    p.a.drain(ignore_responses, no_failed_calls);
  }
  CHECK(p.a.stats().wqes_posted == 2000);
  CHECK(p.a.calls_in_flight() == 0);
}

TEST_CASE("raw RDMA WRITE and READ complete apart from RPC traffic - a bad rkey is an error", "[copyrpc]") {
  Pair p;
  std::array<uint8_t, 256> src{}, dst{}, back{};
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 3);
  const MemoryRegion src_mr = p.ta.register_memory(src.data(), src.size(), kAccessLocalWrite);
  const MemoryRegion back_mr = p.ta.register_memory(back.data(), back.size(), kAccessLocalWrite);
  const MemoryRegion dst_mr = p.tb.register_memory(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
  const RemoteBuffer remote{reinterpret_cast<uint64_t>(dst.data()), dst_mr.rkey, 0, dst.size()};
  REQUIRE(p.a.post_raw_write(p.ea, src.data(), 256, src_mr.lkey, remote, 41) == PostResult::kOk);
  REQUIRE(p.a.post_raw_read(p.ea, back.data(), 256, back_mr.lkey, remote, 42) == PostResult::kOk);
  std::vector<std::pair<uint64_t, WcStatus>> done;
  p.a.poll_raw([&](uint64_t id, WcStatus st) { done.push_back({id, st}); });
  REQUIRE(done.size() == 2);
  CHECK(done[0] == std::make_pair(uint64_t{41}, WcStatus::kSuccess));
  CHECK(done[1] == std::make_pair(uint64_t{42}, WcStatus::kSuccess));
  CHECK(dst == src);
  CHECK(back == src);
  CHECK(p.b.drain(ignore_responses, no_failed_calls) == 0);  // raw writes make no receive completions
  const RemoteBuffer bad{remote.addr, remote.rkey + 1000, 0, 256};
  REQUIRE(p.a.post_raw_write(p.ea, src.data(), 256, src_mr.lkey, bad, 43) == PostResult::kOk);
  done.clear();
  p.a.poll_raw([&](uint64_t id, WcStatus st) { done.push_back({id, st}); });
  REQUIRE(done.size() == 1);
  CHECK(done[0].second == WcStatus::kRemoteAccessError);
}

// ---------------------------------------------------------------------------------
// Hostile input: a peer that writes arbitrary bytes into our receive ring.

namespace {

struct Attack : test::HostilePeer {
  Attack() : HostilePeer(cfg(), 16) {}
  static copyrpc::ContextConfig cfg() {
    copyrpc::ContextConfig c;
    c.ring_size = 4096;
    c.srq_size = 16;
    return c;
  }
  void send(uint32_t len, uint32_t imm) { write(len, imm); }
  EndpointError poll() { return HostilePeer::poll(no_failed_calls); }
};

}  // namespace

TEST_CASE("a well-formed batch from the fake peer is accepted (control case)", "[copyrpc][hostile]") {
  Attack a;
  a.meta(0, 0, 1);
  a.header(32, 5, 2, 10);  // request, allowance 64 bytes
  a.send(64, 2);
  CHECK(a.poll() == EndpointError::kNone);
  copyrpc::RecvHandle h;
  REQUIRE(a.victim.recv(h));
  CHECK(h.call_id() == 5);
  CHECK(h.payload().size() == 10);
}

TEST_CASE("hostile batches are rejected with the rule they break, without out-of-bounds access",
          "[copyrpc][hostile]") {
  Attack a;
  SECTION("message_count larger than the batch can hold") {
    a.meta(0, 0, 5);
    a.header(32, 1, 2, 0);
    a.send(64, 2);
    CHECK(a.poll() == EndpointError::kBadMessageCount);
  }
  SECTION("a length past the batch") {
    a.meta(0, 0, 1);
    a.header(32, 1, 2, 1000);
    a.send(64, 2);
    CHECK(a.poll() == EndpointError::kBadLength);
  }
  SECTION("a length past the ring") {
    a.meta(0, 0, 1);
    a.header(32, 1, 2, 0xFFFFFFF0u);
    a.send(64, 2);
    CHECK(a.poll() == EndpointError::kBadLength);
  }
  SECTION("a response to an unknown call id") {
    a.meta(0, 0, 1);
    a.header(32, copyrpc::to_response_id(12345), 0, 4);
    a.send(64, 2);
    CHECK(a.poll() == EndpointError::kUnknownCallId);
  }
  SECTION("a wrap marker that does not reach the ring end") {
    a.meta(0, 0, copyrpc::kWrapMessageCount);
    a.send(32, 2);
    CHECK(a.poll() == EndpointError::kBadWrapMarker);
  }
  SECTION("an immediate larger than the ring") {
    a.meta(0, 0, 0);
    a.send(32, 4096 / 32 + 1);
    CHECK(a.poll() == EndpointError::kBadImmediate);
  }
  SECTION("a zero immediate") {
    a.send(32, 0);
    CHECK(a.poll() == EndpointError::kBadImmediate);
  }
  SECTION("a batch crossing the ring end") {
    a.meta(0, 0, 0);
    a.send(32, 1);  // valid metadata-only batch, consumer now at 32
    REQUIRE(a.poll() == EndpointError::kNone);
    a.meta(0, 0, 0);
    a.send(32, 4096 / 32);  // 32 + 4096 > ring
    CHECK(a.poll() == EndpointError::kBadLength);
  }
  SECTION("a batch overrunning unconsumed bytes") {
    a.meta(0, 0, 1);
    a.header(32, 1, 2, 0);
    a.send(64, 2);  // a request the victim holds (not taken by recv)
    REQUIRE(a.poll() == EndpointError::kNone);
    a.meta(0, 0, copyrpc::kWrapMessageCount);
    a.send(32, (4096 - 64) / 32);  // valid wrap to the end
    REQUIRE(a.poll() == EndpointError::kNone);
    a.meta(0, 0, 0);
    a.send(32, 2);  // would overwrite the held request's bytes at offset 0..63
    CHECK(a.poll() == EndpointError::kRingOverrun);
  }
  SECTION("a credit return beyond the bytes ever sent") {
    a.meta(1u << 20, 0, 0);
    a.send(32, 1);
    CHECK(a.poll() == EndpointError::kBadCreditReturn);
  }
  SECTION("an unaligned or oversized credit grant") {
    a.meta(0, 33, 0);
    a.send(32, 1);
    CHECK(a.poll() == EndpointError::kBadCreditGrant);
  }
  SECTION("a request whose allowance exceeds the credit granted") {
    a.meta(0, 0, 1);
    a.header(32, 1, 4096 / 32, 0);  // allowance = whole ring, granted was ring/4
    a.send(64, 2);
    CHECK(a.poll() == EndpointError::kBadAllowance);
  }
  SECTION("zero messages but bytes left over") {
    a.meta(0, 0, 0);
    a.send(64, 2);
    CHECK(a.poll() == EndpointError::kBadMessageCount);
  }
  // After any violation the endpoint refuses new calls.
  if (a.victim.error(a.ep) != EndpointError::kNone)
    CHECK(a.victim.call(a.ep, {}, 0, 1).status == CallStatus::kEndpointError);
}

TEST_CASE("a batch longer than the WRITE that placed it is refused: past the write the ring holds an earlier "
          "cycle's request, which would be served again",
          "[copyrpc][hostile]") {
  Attack a;
  a.meta(0, 0, 1);
  a.header(32, 5, 2, 10);  // a request, call id 5, at ring offset 32
  a.send(64, 2);
  REQUIRE(a.poll() == EndpointError::kNone);
  copyrpc::RecvHandle h;
  REQUIRE(a.victim.recv(h));
  REQUIRE(h.call_id() == 5);
  REQUIRE(a.victim.reply(std::move(h), {}) == CallStatus::kOk);
  a.meta(0, 0, copyrpc::kWrapMessageCount);
  a.send(32, (4096 - 64) / 32);  // a wrap marker to the ring end: the next cycle starts at offset 0
  REQUIRE(a.poll() == EndpointError::kNone);
  SECTION("a batch: 32 bytes written, 64 announced") {
    a.meta(0, 0, 1);  // one message, whose bytes the WRITE does not carry
    a.header(32, 6, 2, 10);
    a.send(32, 2);
    CHECK(a.poll() == EndpointError::kBadWriteLength);
    CHECK_FALSE(a.victim.recv(h));  // call 5 of the last cycle is not served again
  }
  SECTION("a wrap marker's WRITE carries its metadata only") {
    a.meta(0, 0, copyrpc::kWrapMessageCount);
    a.send(64, 4096 / 32);
    CHECK(a.poll() == EndpointError::kBadWriteLength);
  }
  SECTION("control: the same batch written whole") {
    a.meta(0, 0, 1);
    a.header(32, 6, 2, 10);
    a.send(64, 2);
    CHECK(a.poll() == EndpointError::kNone);
    REQUIRE(a.victim.recv(h));
    CHECK(h.call_id() == 6);
  }
}

// The peer answers the victim's own calls. reply() never sends more than
// max_reply_payload(allowance) for a call; a peer that does (a bug, or forged) stops the
// endpoint before the response is handed to anyone: the call is failed back instead.
TEST_CASE("a response longer than its call's allowance admits is refused: the call is failed back, not answered",
          "[copyrpc][hostile]") {
  Attack a;
  std::vector<std::pair<uint64_t, size_t>> answered;  // token, payload size
  std::vector<std::pair<uint64_t, EndpointError>> failed;
  auto poll = [&] {
    a.victim.drain([&](uint64_t tok, std::span<const std::byte> p) { answered.push_back({tok, p.size()}); },
                   [&](uint64_t tok, EndpointError e) { failed.push_back({tok, e}); });
    return a.victim.error(a.ep);
  };
  // A batch of one response to call `id`, `len` payload bytes.
  auto respond = [&](uint32_t id, uint32_t len) {
    const uint32_t msg = static_cast<uint32_t>(copyrpc::padded_message_size(len));
    a.meta(0, 0, 1);
    a.header(32, copyrpc::to_response_id(id), 0, len);
    a.send(32 + msg, (32 + msg) / 32);
  };
  // An empty reply's allowance (64 bytes of credit) admits 20 payload bytes; a 40-byte
  // one's (96) admits 52: the bound is what reply() would send, not the 40 asked for.
  const auto empty = a.victim.call(a.ep, {}, 0, 7);
  const auto forty = a.victim.call(a.ep, {}, 40, 8);
  REQUIRE(empty.ok());
  REQUIRE(forty.ok());
  // The endpoint stopped, on_response never saw the long response, and both calls were
  // failed back with the rule's error.
  auto refused = [&] {
    CHECK(poll() == EndpointError::kBadResponseLength);
    CHECK(answered.empty());
    CHECK(failed == std::vector<std::pair<uint64_t, EndpointError>>{{7, EndpointError::kBadResponseLength},
                                                                    {8, EndpointError::kBadResponseLength}});
  };
  SECTION("an empty reply's call answered with 21 bytes") {
    respond(empty.call_id, 21);
    refused();
  }
  SECTION("an empty reply's call answered with a whole 1 KiB batch") {
    respond(empty.call_id, 1024 - 32 - 12);
    refused();
  }
  SECTION("a 40-byte reply's call answered with 53 bytes") {
    respond(forty.call_id, 53);
    refused();
  }
  SECTION("control: each call answered with exactly what its allowance admits") {
    respond(empty.call_id, 20);
    REQUIRE(poll() == EndpointError::kNone);
    respond(forty.call_id, 52);
    CHECK(poll() == EndpointError::kNone);
    CHECK(answered == std::vector<std::pair<uint64_t, size_t>>{{7, 20}, {8, 52}});
    CHECK(failed.empty());
  }
}

TEST_CASE("a failed endpoint does not disturb the others", "[copyrpc][hostile]") {
  Attack a;
  // A healthy second peer of the victim.
  loopback::InstantTransport good_t{a.fabric};
  test::InstantCtx good(good_t, Attack::cfg());
  const uint32_t vg = a.victim.create_endpoint();
  const uint32_t gv = good.create_endpoint();
  a.victim.connect(vg, good.local_info(gv));
  good.connect(gv, a.victim.local_info(vg));
  a.meta(0, 0, 9);
  a.send(32, 1);
  CHECK(a.poll() == EndpointError::kBadMessageCount);
  REQUIRE(good.call(gv, bytes(5, 1), 8, 77).ok());
  good.flush();
  a.victim.drain(ignore_responses, no_failed_calls);
  copyrpc::RecvHandle h;
  REQUIRE(a.victim.recv(h));
  REQUIRE(a.victim.reply(std::move(h), bytes(8, 9)) == CallStatus::kOk);
  a.victim.flush();
  bool got = false;
  good.drain([&](uint64_t tok, std::span<const std::byte> pl) {
    got = tok == 77 && pl.size() == 8;
  }, no_failed_calls);
  CHECK(got);
}

TEST_CASE("with the send queue full, the open batch keeps growing and goes out when room returns",
          "[copyrpc]") {
  loopback::InstantFabric fabric;
  loopback::InstantTransport ta{fabric, 4096, 128}, tb{fabric, 4096, 128};  // the smallest queue copyrpc accepts (2 x 64)
  test::InstantCtx a(ta, {}), b(tb, {});
  const uint32_t ea = a.create_endpoint(), eb = b.create_endpoint();
  a.connect(ea, b.local_info(eb));
  b.connect(eb, a.local_info(ea));
  // Flush after every call but never reap send completions: the queue fills at 128.
  for (uint64_t i = 0; i < 300; ++i) {
    REQUIRE(a.call(ea, bytes(8, 1), 0, i).ok());
    a.flush();
  }
  CHECK(a.stats().wqes_posted == 128);
  CHECK(a.has_unflushed());
  a.drain(ignore_responses, no_failed_calls);  // reaps the signalled completions: slots free again
  a.flush();
  CHECK(a.stats().wqes_posted == 129);  // the other 172 calls went out as ONE batch
  CHECK_FALSE(a.has_unflushed());
  b.drain(ignore_responses, no_failed_calls);
  copyrpc::RecvHandle h;
  uint64_t n = 0;
  while (b.recv(h)) ++n;
  CHECK(n == 300);
}

// ---------------------------------------------------------------------------------
// Calls pending on an endpoint that stops are failed back to their callers, once.

TEST_CASE("a stopped endpoint fails back each of its N pending calls once, and later responses complete nothing",
          "[copyrpc][failed_calls]") {
  Pair p;
  constexpr uint64_t kCalls = 7;
  for (uint64_t i = 0; i < kCalls; ++i) REQUIRE(p.a.call(p.ea, bytes(24, 1), 16, 100 + i).ok());
  p.a.flush();
  p.b.drain(ignore_responses, no_failed_calls);
  copyrpc::RecvHandle h;
  uint32_t answered = 0;
  while (p.b.recv(h)) {
    REQUIRE(p.b.reply(std::move(h), bytes(16, 2)) == CallStatus::kOk);
    ++answered;
  }
  REQUIRE(answered == kCalls);  // the answers wait in b's send ring (not flushed yet)
  REQUIRE(p.a.calls_in_flight(p.ea) == kCalls);

  p.a.stop_endpoint(p.ea);
  CHECK(p.a.error(p.ea) == EndpointError::kStoppedByOwner);
  CHECK(p.a.calls_in_flight() == 0);  // taken out at once: nothing can complete them now
  std::vector<uint64_t> failed;
  auto count_responses = [&](uint64_t tok, std::span<const std::byte>) { FAIL("response delivered: token " << tok); };
  p.a.drain(count_responses, [&](uint64_t tok, EndpointError e) {
    CHECK(e == EndpointError::kStoppedByOwner);
    failed.push_back(tok);
  });
  REQUIRE(failed.size() == kCalls);
  for (uint64_t i = 0; i < kCalls; ++i) CHECK(failed[i] == 100 + i);  // call-id order
  CHECK(p.a.stats().failed_calls == kCalls);

  // The answers arrive after the stop: the stopped endpoint completes nothing, fails
  // nothing a second time.
  p.b.flush();
  p.a.drain(count_responses, [&](uint64_t tok, EndpointError) { FAIL("failed twice: token " << tok); });
  p.a.drain(count_responses, [&](uint64_t tok, EndpointError) { FAIL("failed twice: token " << tok); });
  CHECK(p.a.call(p.ea, bytes(8, 1), 16, 999).status == CallStatus::kEndpointError);
  // Stopping again keeps the first reason and fails nothing more.
  p.a.stop_endpoint(p.ea);
  p.a.drain(count_responses, [&](uint64_t tok, EndpointError) { FAIL("failed twice: token " << tok); });
  CHECK(p.a.stats().failed_calls == kCalls);
}

TEST_CASE("a hostile batch stops the endpoint: responses before the broken message complete, the rest fail back",
          "[copyrpc][failed_calls][hostile]") {
  Attack a;
  // Three calls from the victim: call ids 0, 1, 2 with tokens 10, 11, 12.
  for (uint64_t i = 0; i < 3; ++i) REQUIRE(a.victim.call(a.ep, bytes(8, 1), 16, 10 + i).ok());
  // One batch: the response to call 1, then a message whose length runs past the batch.
  a.meta(0, 0, 2);
  a.header(32, copyrpc::to_response_id(1), 0, 4);
  a.header(64, copyrpc::to_response_id(2), 0, 1000);
  a.send(96, 3);
  std::vector<uint64_t> completed, failed;
  a.victim.drain([&](uint64_t tok, std::span<const std::byte>) { completed.push_back(tok); },
                 [&](uint64_t tok, EndpointError e) {
                   CHECK(e == EndpointError::kBadLength);
                   failed.push_back(tok);
                 });
  CHECK(a.victim.error(a.ep) == EndpointError::kBadLength);
  CHECK(completed == std::vector<uint64_t>{11});
  CHECK(failed == std::vector<uint64_t>{10, 12});  // never both, never lost
  CHECK(a.victim.calls_in_flight() == 0);
}

TEST_CASE("an error completion stops the endpoint and fails back its pending calls", "[copyrpc][failed_calls]") {
  Pair p;
  for (uint64_t i = 0; i < 4; ++i) REQUIRE(p.a.call(p.ea, bytes(8, 1), 16, 20 + i).ok());
  // A raw WRITE with a wrong rkey: a remote access error puts the queue pair in error,
  // so the batch carrying the four calls completes with a flush error.
  std::array<uint8_t, 64> src{}, dst{};
  const MemoryRegion src_mr = p.ta.register_memory(src.data(), src.size(), kAccessLocalWrite);
  const MemoryRegion dst_mr = p.tb.register_memory(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite);
  const RemoteBuffer bad{reinterpret_cast<uint64_t>(dst.data()), dst_mr.rkey + 1000, 0, dst.size()};
  REQUIRE(p.a.post_raw_write(p.ea, src.data(), 64, src_mr.lkey, bad, 1) == PostResult::kOk);
  p.a.poll_raw([](uint64_t, WcStatus st) { CHECK(st == WcStatus::kRemoteAccessError); });
  p.a.flush();
  std::vector<uint64_t> failed;
  p.a.drain(ignore_responses, [&](uint64_t tok, EndpointError e) {
    CHECK(e == EndpointError::kCompletionError);
    failed.push_back(tok);
  });
  CHECK(p.a.error(p.ea) == EndpointError::kCompletionError);
  CHECK(failed == std::vector<uint64_t>{20, 21, 22, 23});
  CHECK(p.a.calls_in_flight() == 0);
}

namespace {

copyrpc::ContextConfig ring_4k() {
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 4096;
  return cfg;
}

// a calls b until RingFull; b takes every request and never replies, so no batch (and
// no piggybacked consumer position) travels back. Returns the calls made.
uint64_t fill_until_ring_full(test::InstantPair& p, std::vector<copyrpc::RecvHandle>& held) {
  uint64_t tok = 0;
  while (p.a.call(p.ea, bytes(200, 3), 0, tok).ok()) ++tok;
  p.a.flush();
  p.b.drain(ignore_responses, no_failed_calls);
  copyrpc::RecvHandle h;
  while (p.b.recv(h)) held.push_back(std::move(h));
  REQUIRE(held.size() == tok);
  // Two RingFulls with no news from b: the next flush posts the READ of b's word.
  REQUIRE(p.a.call(p.ea, bytes(200, 3), 0, tok).status == CallStatus::kRingFull);
  REQUIRE(p.a.call(p.ea, bytes(200, 3), 0, tok).status == CallStatus::kRingFull);
  return tok;
}

// Overwrites b's published consumed-position word, as a peer with a bug (or a forged
// one) could: a reads it with its next RDMA READ.
void forge_consumed_word(test::InstantPair& p, uint64_t value) {
  auto* word = reinterpret_cast<uint64_t*>(p.b.local_info(p.eb).consumer_addr);
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

}  // namespace

TEST_CASE("copyrpc bounds: a consumed position read by RDMA READ may equal our producer, never pass it",
          "[copyrpc][bounds]") {
  test::InstantPair p(ring_4k());
  std::vector<copyrpc::RecvHandle> held;
  const uint64_t calls = fill_until_ring_full(p, held);
  const uint64_t producer = p.a.endpoint(p.ea).producer;
  REQUIRE(producer > 0);

  SECTION("exactly the producer: every byte consumed, the READ is taken and calls go on") {
    forge_consumed_word(p, producer);
    p.a.poll(ignore_responses, no_failed_calls);   // posts the READ (the instant NIC runs it at the doorbell)
    p.a.drain(ignore_responses, no_failed_calls);  // reaps its completion
    REQUIRE(p.a.stats().reads_posted == 1);
    CHECK(p.a.error(p.ea) == EndpointError::kNone);
    CHECK(p.a.endpoint(p.ea).consumer_by_read == producer);
    CHECK(p.a.call(p.ea, bytes(200, 3), 0, calls).ok());
  }
  SECTION("one 32-byte unit past the producer: the endpoint stops with kBadConsumerRead, its calls fail back") {
    forge_consumed_word(p, producer + 32);
    std::vector<uint64_t> failed;
    auto on_failed = [&](uint64_t tok, EndpointError e) {
      CHECK(e == EndpointError::kBadConsumerRead);
      failed.push_back(tok);
    };
    p.a.poll(ignore_responses, on_failed);
    p.a.drain(ignore_responses, on_failed);
    REQUIRE(p.a.stats().reads_posted == 1);
    CHECK(p.a.error(p.ea) == EndpointError::kBadConsumerRead);
    CHECK(p.a.endpoint(p.ea).consumer_by_read == 0);  // the forged value was never taken
    CHECK(failed.size() == calls);
    CHECK(p.a.call(p.ea, bytes(8, 1), 0, calls).status == CallStatus::kEndpointError);
  }
}

TEST_CASE("copyrpc bounds: the published consumed-position word follows consumption at every drain and flush, "
          "never at recv()",
          "[copyrpc][bounds]") {
  // The word the peer's RDMA READ fetches (the fallback when RingFull persists) must
  // follow consumption: after each batch, each wrap marker (drained one completion at a
  // time, so a marker is the last thing processed) and each flush after recv() unpinned
  // a batch; recv() itself leaves it (the payload stays valid until the next flush).
  // a calls b with payloads that wrap both 4 KiB rings many times; b takes each round's
  // requests one by one and replies to them all.
  test::InstantPair p(ring_4k());
  const auto* word_a = reinterpret_cast<const uint64_t*>(p.a.local_info(p.ea).consumer_addr);
  const auto* word_b = reinterpret_cast<const uint64_t*>(p.b.local_info(p.eb).consumer_addr);
  auto published_a = [&] { return __atomic_load_n(word_a, __ATOMIC_ACQUIRE); };
  auto published_b = [&] { return __atomic_load_n(word_b, __ATOMIC_ACQUIRE); };
  uint64_t answered = 0, tok = 0;
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 3; ++i) {
      if (!p.a.call(p.ea, bytes(40 + 8 * (round % 7), 1), 64, tok).ok()) break;
      ++tok;
    }
    p.a.flush();
    while (p.b.drain(ignore_responses, no_failed_calls, 1) != 0) {
      INFO("round " << round);
      if (!p.b.endpoint(p.eb).has_queued_requests()) CHECK(published_b() == p.b.endpoint(p.eb).consumed());
    }
    copyrpc::RecvHandle h;
    std::vector<copyrpc::RecvHandle> held;
    const uint64_t before_recv = published_b();
    while (p.b.recv(h)) {
      held.push_back(std::move(h));
      INFO("round " << round << ", request " << held.size());
      CHECK(published_b() == before_recv);
    }
    for (auto& r : held) REQUIRE(p.b.reply(std::move(r), bytes(24 + 8 * (round % 5), 2)) == CallStatus::kOk);
    p.b.flush();
    INFO("round " << round);
    CHECK(published_b() == p.b.endpoint(p.eb).consumed());
    while (p.a.drain([&](uint64_t, std::span<const std::byte>) { ++answered; }, no_failed_calls, 1) != 0) {
      INFO("round " << round);
      CHECK(published_a() == p.a.endpoint(p.ea).consumed());
    }
  }
  CHECK(answered == tok);
  CHECK(p.a.stats().wraps > 10);
  CHECK(p.b.stats().wraps > 10);
}

TEST_CASE("a held request's payload is not overwritten before the holder's next flush, though the caller reads "
          "the consumed position",
          "[copyrpc][bounds]") {
  // A's responses have little room in B's ring (max_R 64), so A's 480-byte calls fill it
  // in 7. B takes every request and holds it, without a flush. A, at RingFull twice with
  // no news, reads B's consumed-position word: it must not show the held batches free
  // yet, or A writes its next calls over them. B's next flush frees them, and the same
  // READ fallback then lets A's one-directional stream go on.
  copyrpc::ContextConfig ca, cb;
  ca.ring_size = cb.ring_size = 4096;
  ca.max_resp_reservation = 64;
  test::InstantPair p(ca, cb);
  uint64_t calls = 0;
  for (; p.a.call(p.ea, bytes(480, static_cast<uint8_t>(0x11 + calls)), 0, calls).ok(); ++calls) p.a.flush();
  REQUIRE(calls == 7);
  p.b.drain(ignore_responses, no_failed_calls);
  std::vector<copyrpc::RecvHandle> held;
  std::vector<std::vector<std::byte>> copies;
  copyrpc::RecvHandle h;
  while (p.b.recv(h)) {
    copies.emplace_back(h.payload().begin(), h.payload().end());
    held.push_back(std::move(h));
  }
  REQUIRE(held.size() == calls);
  auto read_consumed_word = [&] {
    REQUIRE(p.a.call(p.ea, bytes(480, 0xEE), 0, 100).status == CallStatus::kRingFull);
    REQUIRE(p.a.call(p.ea, bytes(480, 0xEE), 0, 101).status == CallStatus::kRingFull);
    const uint64_t reads = p.a.stats().reads_posted;
    p.a.flush();                                   // posts the READ (the instant NIC runs it at the doorbell)
    p.a.drain(ignore_responses, no_failed_calls);  // reaps its completion
    REQUIRE(p.a.stats().reads_posted == reads + 1);
  };
  auto calls_accepted = [&] {
    uint64_t more = 0;
    for (; p.a.call(p.ea, bytes(480, 0xEE), 0, 200 + more).ok(); ++more) p.a.flush();
    return more;
  };
  read_consumed_word();
  CHECK(calls_accepted() == 0);
  for (size_t i = 0; i < held.size(); ++i) {
    INFO("request " << i << " (first byte 0x" << std::hex << unsigned(held[i].payload()[0]) << ")");
    CHECK(std::equal(held[i].payload().begin(), held[i].payload().end(), copies[i].begin(), copies[i].end()));
  }
  p.b.flush();  // the holder's next flush: the held payloads may go
  read_consumed_word();
  CHECK(calls_accepted() > 0);
}

TEST_CASE("a request taken by recv() is not published consumed by a drain before the holder's next flush",
          "[copyrpc][bounds]") {
  // The word the peer may READ at any time stays where it was until b's flush, whether
  // the requests were taken in b's response callback (the batch's own end of walk) or
  // before a later drain of a batch with no request.
  test::InstantPair p(ring_4k());
  const auto* word_b = reinterpret_cast<const uint64_t*>(p.b.local_info(p.eb).consumer_addr);
  auto published_b = [&] { return __atomic_load_n(word_b, __ATOMIC_ACQUIRE); };
  // b calls a once; a takes the request (a reply for later).
  REQUIRE(p.b.call(p.eb, bytes(8, 1), 20, 7).ok());
  p.b.flush();
  p.a.drain(ignore_responses, no_failed_calls);
  copyrpc::RecvHandle for_b;
  REQUIRE(p.a.recv(for_b));
  std::vector<copyrpc::RecvHandle> held;
  copyrpc::RecvHandle h;
  SECTION("taken in the response callback of the batch that carried them") {
    // One batch from a: three requests, then the response to b's call.
    for (uint64_t tok = 0; tok < 3; ++tok) REQUIRE(p.a.call(p.ea, bytes(100, 0x21), 0, tok).ok());
    REQUIRE(p.a.reply(std::move(for_b), bytes(8, 2)) == CallStatus::kOk);
    p.a.flush();
    const uint64_t before = published_b();
    p.b.drain(
        [&](uint64_t tok, std::span<const std::byte>) {
          CHECK(tok == 7);
          while (p.b.recv(h)) held.push_back(std::move(h));
        },
        no_failed_calls);
    REQUIRE(held.size() == 3);
    CHECK(published_b() == before);
  }
  SECTION("taken before a drain of a batch that carries only a response") {
    for (uint64_t tok = 0; tok < 3; ++tok) REQUIRE(p.a.call(p.ea, bytes(100, 0x21), 0, tok).ok());
    p.a.flush();
    const uint64_t before = published_b();
    p.b.drain(ignore_responses, no_failed_calls);
    while (p.b.recv(h)) held.push_back(std::move(h));
    REQUIRE(held.size() == 3);
    CHECK(published_b() == before);
    REQUIRE(p.a.reply(std::move(for_b), bytes(8, 2)) == CallStatus::kOk);
    p.a.flush();
    REQUIRE(p.b.drain(ignore_responses, no_failed_calls) == 1);
    CHECK(published_b() == before);
  }
  p.b.flush();
  CHECK(published_b() == p.b.endpoint(p.eb).consumed());
  CHECK(published_b() == p.b.endpoint(p.eb).parsed);
  CHECK(published_b() > 0);
}

namespace {
// A response prefetch hint that records the tokens it is given and how many responses
// had been handed to the caller when each came.
struct HintLog {
  std::vector<uint64_t> tokens;
  std::vector<size_t> responses_before;
  const std::vector<uint64_t>* responses = nullptr;
  static void hint(void* ctx, const uint64_t& tok) {
    auto& log = *static_cast<HintLog*>(ctx);
    log.tokens.push_back(tok);
    log.responses_before.push_back(log.responses->size());
  }
};
}  // namespace

TEST_CASE("the response prefetch hint gets a batch's pending responses in order before the first is handed over",
          "[copyrpc]") {
  Pair p;
  std::vector<uint64_t> got;
  HintLog log{.responses = &got};
  p.a.set_response_prefetch(&HintLog::hint, &log);
  std::vector<copyrpc::RecvHandle> held = p.requests({20, 21, 22, 23});
  // One batch from b: the answers to 22, 20, 23, then a request of b's own (not a response:
  // not hinted). 21 stays unanswered.
  for (size_t i : {2u, 0u, 3u}) REQUIRE(p.b.reply(std::move(held[i]), bytes(16, 3)) == CallStatus::kOk);
  REQUIRE(p.b.call(p.eb, bytes(8, 4), 16, 99).ok());
  p.b.flush();
  uint32_t requests = 0;
  p.a.drain([&](uint64_t tok, std::span<const std::byte>) { got.push_back(tok); }, no_failed_calls);
  copyrpc::RecvHandle h;
  while (p.a.recv(h)) ++requests;
  CHECK(log.tokens == std::vector<uint64_t>{22, 20, 23});
  CHECK(log.responses_before == std::vector<size_t>{0, 0, 0});
  CHECK(got == std::vector<uint64_t>{22, 20, 23});  // the walk hands them over as without a hint
  CHECK(requests == 1);
  // Turned off: no more hints.
  p.a.set_response_prefetch(nullptr, nullptr);
  REQUIRE(p.b.reply(std::move(held[1]), bytes(16, 3)) == CallStatus::kOk);
  p.b.flush();
  p.a.drain([&](uint64_t tok, std::span<const std::byte>) { got.push_back(tok); }, no_failed_calls);
  CHECK(log.tokens.size() == 3);
  CHECK(got.back() == 21);
}

TEST_CASE("the response prefetch hint gets the first 64 responses of a larger batch, the walk hands over all",
          "[copyrpc]") {
  Pair p;
  std::vector<uint64_t> got;
  HintLog log{.responses = &got};
  p.a.set_response_prefetch(&HintLog::hint, &log);
  constexpr uint64_t kCalls = 70;
  for (uint64_t tok = 0; tok < kCalls; ++tok) REQUIRE(p.a.call(p.ea, bytes(8, 1), 20, 100 + tok).ok());
  p.a.flush();
  p.b.drain(ignore_responses, no_failed_calls);
  copyrpc::RecvHandle h;
  for (uint64_t i = 0; i < kCalls; ++i) {
    REQUIRE(p.b.recv(h));
    REQUIRE(p.b.reply(std::move(h), bytes(16, 3)) == CallStatus::kOk);
  }
  p.b.flush();  // one batch of 70 responses
  p.a.drain([&](uint64_t tok, std::span<const std::byte>) { got.push_back(tok); }, no_failed_calls);
  std::vector<uint64_t> first64(64), all(kCalls);
  for (uint64_t i = 0; i < kCalls; ++i) all[i] = 100 + i;
  std::copy_n(all.begin(), 64, first64.begin());
  CHECK(log.tokens == first64);
  CHECK(log.responses_before == std::vector<size_t>(64, 0));
  CHECK(got == all);
}

TEST_CASE("the response prefetch hint stops at a broken message and skips ids of no pending call",
          "[copyrpc][hostile]") {
  Attack a;
  HintLog log;
  std::vector<uint64_t> completed;
  log.responses = &completed;
  a.victim.set_response_prefetch(&HintLog::hint, &log);
  for (uint64_t i = 0; i < 3; ++i) REQUIRE(a.victim.call(a.ep, bytes(8, 1), 16, 10 + i).ok());
  // The response to call 1, one to call id 7 (none pending), then one to call 2 whose
  // length runs past the batch: the walk stops the endpoint at the second message.
  a.meta(0, 0, 3);
  a.header(32, copyrpc::to_response_id(1), 0, 4);
  a.header(64, copyrpc::to_response_id(7), 0, 4);
  a.header(96, copyrpc::to_response_id(2), 0, 1000);
  a.send(128, 4);
  a.victim.drain([&](uint64_t tok, std::span<const std::byte>) { completed.push_back(tok); },
                 [](uint64_t, EndpointError) {});
  CHECK(log.tokens == std::vector<uint64_t>{11});
  CHECK(a.victim.error(a.ep) == EndpointError::kUnknownCallId);
  CHECK(completed == std::vector<uint64_t>{11});
}
