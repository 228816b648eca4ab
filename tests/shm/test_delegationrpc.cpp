// delegationrpc: byte layout (docs/design_shm.md §delegationrpc layout), protocol steps
// (§delegationrpc protocol), holes, flow control,
// validation of attach and of the values the server reads back from shared memory.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/random.hpp"
#include "core/shm/delegationrpc.hpp"
#include "core/shm/segment.hpp"
#include "tests/shm/shm_test_util.hpp"

using namespace bkv::shm;
using namespace shmtest;
using Catch::Matchers::Contains;

namespace {

using Fixture = ServerFixture<DLayout, DServer, DelegationConfig>;

size_t resp_slot_offset(const DelegationConfig& c, uint32_t client, uint32_t slot) {
  return 256 + size_t{c.ring_depth} * 64 + (size_t{client} * c.resp_depth + slot) * 64;
}

// Four calls of client 0 (tokens, seq and values 10..13 in slots 0..3), taken by the
// server and the ring's tail advanced past them: their entries, in slot order.
std::vector<DelegationEntry<Req>> four_calls_taken(Fixture& f, DClient& c) {
  for (uint32_t i = 0; i < 4; ++i) REQUIRE(c.call(Req{0, 0, 10 + i, 10 + i}, 10 + i).resp_slot == i);
  REQUIRE(f.server.poll() == 4);
  std::vector<DelegationEntry<Req>> held;
  while (auto e = f.server.recv()) held.push_back(*e);
  f.server.advance_tail();
  REQUIRE(held.size() == 4);
  return held;
}

// Simulates a client that reserved a position (head.fetch_add) but has not committed.
uint64_t raw_reserve(std::byte* base) {
  const uint64_t pos = load_le<uint64_t>(base, 128);
  store_le<uint64_t>(base, 128, pos + 1);
  return pos;
}
// Simulates the commit of a raw reservation (possibly with bogus ids).
void raw_commit(std::byte* base, uint32_t ring_depth, uint64_t pos, uint32_t client_id, uint32_t slot, const Req& r) {
  const size_t off = 256 + (pos & (ring_depth - 1)) * 64;
  store_le<uint32_t>(base, off + 4, client_id);
  store_le<uint32_t>(base, off + 8, slot);
  std::memcpy(base + off + 24, &r, sizeof r);
  store_le<uint8_t>(base, off, 1);
}
}  // namespace

TEST_CASE("delegationrpc slot sizes and segment size follow the documented layout", "[shm][delegationrpc]") {
  STATIC_REQUIRE(DLayout::kReqSlotSize == 64);   // align_up(24 + 24, 64)
  STATIC_REQUIRE(DLayout::kRespSlotSize == 64);  // align_up(8 + 16, 64)
  STATIC_REQUIRE(DelegationLayout<shmtest::BigReq, shmtest::BigReq>::kReqSlotSize == 128);  // 24 + 56 = 80
  STATIC_REQUIRE(DelegationLayout<shmtest::BigReq, shmtest::BigReq>::kRespSlotSize == 64);  // 8 + 56 = 64
  STATIC_REQUIRE(DelegationLayout<uint64_t[7], uint64_t[8]>::kRespSlotSize == 128);        // 8 + 64 = 72
  const DelegationConfig c{3, 16, 4};
  CHECK(DLayout::segment_size(c) == 256 + 16 * 64 + 3 * 4 * 64 + 3 * 64);  // + one client record per id
}

TEST_CASE("delegationrpc header and a full call/reply round trip at the documented offsets",
          "[shm][delegationrpc]") {
  const DelegationConfig cfg{3, 8, 4};
  Fixture f(cfg);
  std::byte* b = f.base();
  CHECK(load_le<uint64_t>(b, 0) == 0x444C475250435631ull);
  CHECK(std::memcmp(b, "1VCPRGLD", 8) == 0);  // "DLGRPCV1" stored little-endian
  CHECK(load_le<uint32_t>(b, 8) == 2);
  CHECK(load_le<uint32_t>(b, 12) == 3);
  CHECK(load_le<uint32_t>(b, 16) == 8);
  CHECK(load_le<uint32_t>(b, 20) == 4);
  CHECK(load_le<uint32_t>(b, 24) == 0);
  CHECK(load_le<uint8_t>(b, 28) == 1);

  DClient c0 = DClient::connect(f.seg.bytes());
  DClient c1 = DClient::connect(f.seg.bytes());
  REQUIRE(c0.client_id() == 0);
  REQUIRE(c1.client_id() == 1);
  CHECK(load_le<uint32_t>(b, 24) == 2);  // next_client_id
  // Client records after the response slots: 256 + 8 * 64 + 3 * 4 * 64 = 1536, one line each.
  CHECK(load_le<uint32_t>(b, 1536) == static_cast<uint32_t>(::getpid()));       // client 0's pid
  CHECK(load_le<uint32_t>(b, 1536 + 64) == static_cast<uint32_t>(::getpid()));  // client 1's pid
  CHECK(load_le<uint64_t>(b, 1536 + 64 + 8) == 0);  // waiting: no position (the calls below find space)

  const Req r{1, 0, 5, 1234};
  const auto res = c1.call(r, 99);
  REQUIRE(res.status == DelegationCallStatus::kOk);
  REQUIRE(res.resp_slot == 0);
  CHECK(c1.in_flight() == 1);
  CHECK(load_le<uint64_t>(b, 128) == 1);  // head
  CHECK(load_le<uint64_t>(b, 192) == 0);  // tail
  CHECK(load_le<uint8_t>(b, 256) == 1);   // committed
  CHECK(load_le<uint32_t>(b, 260) == 1);  // client_id
  CHECK(load_le<uint32_t>(b, 264) == 0);  // resp_slot_idx
  CHECK(load_le<uint64_t>(b, 256 + 16) == 2);          // claim: position 0's name, 2 * (0 + 1)
  CHECK(load_le<uint64_t>(b, 256 + 24 + 8) == 5);      // payload.seq
  CHECK(load_le<uint64_t>(b, 256 + 24 + 16) == 1234);  // payload.value

  REQUIRE(f.server.poll() == 1);
  auto e = f.server.recv();
  REQUIRE(e.has_value());
  CHECK(e->client_id == 1);
  CHECK(e->resp_slot_idx == 0);
  CHECK(e->payload.value == 1234);
  CHECK(load_le<uint8_t>(b, 256) == 0);  // slot released
  REQUIRE_FALSE(f.server.recv().has_value());
  f.server.advance_tail();
  CHECK(load_le<uint64_t>(b, 192) == 1);

  REQUIRE(f.server.reply(e->client_id, e->resp_slot_idx, Resp{5, 4321}) == DelegationReplyStatus::kOk);
  const size_t rs = resp_slot_offset(cfg, 1, 0);
  CHECK(load_le<uint8_t>(b, rs) == 1);
  CHECK(load_le<uint64_t>(b, rs + 8) == 5);
  CHECK(load_le<uint64_t>(b, rs + 16) == 4321);

  CHECK(c0.poll([](uint64_t, const Resp&) { FAIL("client 0 got client 1's response"); }) == 0);
  const Polled got = poll_answers(c1);
  REQUIRE(got.answers == 1);
  CHECK(got.token == 99);
  CHECK(got.resp.value == 4321);
  CHECK(load_le<uint8_t>(b, rs) == 0);
  CHECK(c1.in_flight() == 0);
}

TEST_CASE("a hole stops the server scan until it is committed", "[shm][delegationrpc]") {
  const DelegationConfig cfg{2, 8, 4};
  Fixture f(cfg);
  DClient a = DClient::connect(f.seg.bytes());
  DClient b = DClient::connect(f.seg.bytes());
  // a reserves position 0 but is slow to commit; b takes position 1 and commits.
  const uint64_t hole = raw_reserve(f.base());
  REQUIRE(hole == 0);
  REQUIRE(b.call(Req{1, 0, 1, 11}).status == DelegationCallStatus::kOk);
  REQUIRE(f.server.poll() == 0);
  REQUIRE_FALSE(f.server.recv().has_value());
  REQUIRE(f.server.cursor() == 0);
  // a commits: both entries are now visible, in position order.
  raw_commit(f.base(), cfg.ring_depth, hole, a.client_id(), 0, Req{0, 0, 0, 10});
  REQUIRE(f.server.poll() == 2);
  auto e0 = f.server.recv();
  auto e1 = f.server.recv();
  REQUIRE(e0.has_value());
  REQUIRE(e1.has_value());
  CHECK(e0->payload.value == 10);
  CHECK(e0->client_id == a.client_id());
  CHECK(e1->payload.value == 11);
  CHECK(e1->client_id == b.client_id());
  REQUIRE_FALSE(f.server.recv().has_value());
}

TEST_CASE("has_unread: the head snapshot lies beyond the cursor, holes and forged heads included",
          "[shm][delegationrpc]") {
  const DelegationConfig cfg{1, 8, 8};
  Fixture f(cfg);
  DClient c = DClient::connect(f.seg.bytes());
  f.server.snapshot_head();
  CHECK_FALSE(f.server.has_unread());  // empty ring
  REQUIRE(c.call(Req{0, 0, 0, 1}).status == DelegationCallStatus::kOk);
  CHECK_FALSE(f.server.has_unread());  // not snapshotted yet
  f.server.snapshot_head();
  REQUIRE(f.server.has_unread());
  REQUIRE(f.server.recv()->payload.value == 1);
  CHECK_FALSE(f.server.has_unread());  // consumed up to the snapshot
  // A reserved position not yet committed: unread (recv() then stops at the hole).
  const uint64_t hole = raw_reserve(f.base());
  f.server.snapshot_head();
  REQUIRE(f.server.has_unread());
  REQUIRE_FALSE(f.server.recv().has_value());
  raw_commit(f.base(), cfg.ring_depth, hole, c.client_id(), 1, Req{0, 0, 1, 2});
  REQUIRE(f.server.recv()->payload.value == 2);
  CHECK_FALSE(f.server.has_unread());
  // A head forged below the cursor reads as nothing to read.
  store_le<uint64_t>(f.base(), 128, 0);
  f.server.snapshot_head();
  CHECK_FALSE(f.server.has_unread());
  REQUIRE_FALSE(f.server.recv().has_value());
}

TEST_CASE("a hole in the middle: poll counts only the committed prefix", "[shm][delegationrpc]") {
  const DelegationConfig cfg{1, 8, 8};
  Fixture f(cfg);
  DClient c = DClient::connect(f.seg.bytes());
  REQUIRE(c.call(Req{0, 0, 0, 1}).status == DelegationCallStatus::kOk);
  REQUIRE(c.call(Req{0, 0, 1, 2}).status == DelegationCallStatus::kOk);
  const uint64_t hole = raw_reserve(f.base());
  REQUIRE(c.call(Req{0, 0, 3, 4}).status == DelegationCallStatus::kOk);
  REQUIRE(f.server.poll() == 2);
  REQUIRE(f.server.recv()->payload.value == 1);
  REQUIRE(f.server.recv()->payload.value == 2);
  REQUIRE_FALSE(f.server.recv().has_value());
  raw_commit(f.base(), cfg.ring_depth, hole, 0, 7, Req{0, 0, 2, 3});
  REQUIRE(f.server.poll() == 2);
  REQUIRE(f.server.recv()->payload.value == 3);
  REQUIRE(f.server.recv()->payload.value == 4);
}

TEST_CASE("try_call reports Full without reserving - tail releases space", "[shm][delegationrpc]") {
  const DelegationConfig cfg{1, 4, 8};
  Fixture f(cfg);
  DClient c = DClient::connect(f.seg.bytes());
  for (uint64_t i = 0; i < 4; ++i) REQUIRE(c.try_call(Req{0, 0, i, i}).status == DelegationCallStatus::kOk);
  REQUIRE(c.try_call(Req{0, 0, 4, 4}).status == DelegationCallStatus::kFull);
  CHECK(load_le<uint64_t>(f.base(), 128) == 4);  // head not advanced by the refused call
  CHECK(c.in_flight() == 4);
  // Consuming without advance_tail does not free space yet.
  REQUIRE(f.server.poll() == 4);
  REQUIRE(f.server.recv().has_value());
  REQUIRE(c.try_call(Req{0, 0, 4, 4}).status == DelegationCallStatus::kFull);
  f.server.advance_tail();
  const auto ok = c.try_call(Req{0, 0, 4, 4});
  REQUIRE(ok.status == DelegationCallStatus::kOk);
  CHECK(ok.resp_slot == 4);  // refused calls did not move the response-slot cursor
  REQUIRE(c.try_call(Req{0, 0, 5, 5}).status == DelegationCallStatus::kFull);
  // The entry at position 4 reused slot 0 and is seen after the remaining three.
  REQUIRE(f.server.poll() == 4);
  for (uint64_t want = 1; want <= 4; ++want) REQUIRE(f.server.recv()->payload.seq == want);
}

TEST_CASE("response slots: round-robin skipping busy slots, kNoFreeSlot, poll_slot", "[shm][delegationrpc]") {
  const DelegationConfig cfg{1, 16, 2};
  Fixture f(cfg);
  DClient c = DClient::connect(f.seg.bytes());
  REQUIRE(c.call(Req{0, 0, 0, 0}, 100).resp_slot == 0);
  REQUIRE(c.call(Req{0, 0, 1, 1}, 101).resp_slot == 1);
  REQUIRE(c.call(Req{0, 0, 2, 2}, 102).status == DelegationCallStatus::kNoFreeSlot);
  REQUIRE(f.server.poll() == 2);
  auto e0 = *f.server.recv();
  auto e1 = *f.server.recv();
  f.server.advance_tail();
  // Reply out of order: slot 1 first.
  REQUIRE(f.server.reply(e1.client_id, e1.resp_slot_idx, Resp{1, 1}) == DelegationReplyStatus::kOk);
  std::vector<uint64_t> tokens;
  auto collect = [&](uint64_t t, const Resp&) { tokens.push_back(t); };
  CHECK_FALSE(c.poll_slot(0, collect));  // slot 0 still waits
  CHECK_FALSE(c.poll_slot(7, collect));  // out of range: ignored
  REQUIRE(c.poll_slot(1, collect));
  REQUIRE(tokens == std::vector<uint64_t>{101});
  // Next slot in round-robin order is 0, which is busy: the call takes slot 1.
  const auto r = c.call(Req{0, 0, 3, 3}, 103);
  REQUIRE(r.status == DelegationCallStatus::kOk);
  CHECK(r.resp_slot == 1);
  REQUIRE(f.server.reply(e0.client_id, e0.resp_slot_idx, Resp{0, 0}) == DelegationReplyStatus::kOk);
  REQUIRE(c.poll(collect) == 1);
  REQUIRE(tokens == std::vector<uint64_t>{101, 100});
}

TEST_CASE("a poll callback may call again: the freed slot is reused, the other answers arrive in slot order",
          "[shm][delegationrpc]") {
  const DelegationConfig cfg{1, 16, 4};
  Fixture f(cfg);
  DClient c = DClient::connect(f.seg.bytes());
  const std::vector<DelegationEntry<Req>> held = four_calls_taken(f, c);
  for (const uint32_t s : {3u, 1u, 0u})
    REQUIRE(f.server.reply(0, s, Resp{held[s].payload.seq, held[s].payload.value}) == DelegationReplyStatus::kOk);
  std::vector<uint64_t> tokens;
  DelegationCallResult again{};
  const uint32_t n = c.poll([&](uint64_t t, const Resp& r) {
    CHECK(r.seq == t);
    tokens.push_back(t);
    if (t == 10) again = c.try_call(Req{0, 0, 20, 20}, 20);  // slot 0 is free again: the cursor is on it
  });
  CHECK(n == 3);
  CHECK(tokens == std::vector<uint64_t>{10, 11, 13});
  REQUIRE(again.status == DelegationCallStatus::kOk);
  CHECK(again.resp_slot == 0);
  CHECK(c.slot_busy(0));
  CHECK(c.slot_busy(2));
  CHECK_FALSE(c.slot_busy(1));
  CHECK(c.in_flight() == 2);
  // The call made in the callback is answered with its own tag like any other.
  REQUIRE(f.server.poll() == 1);
  const auto e = f.server.recv();
  REQUIRE(e.has_value());
  CHECK(e->resp_slot_idx == 0);
  REQUIRE(f.server.reply(0, 0, Resp{20, 20}) == DelegationReplyStatus::kOk);
  REQUIRE(f.server.reply(0, 2, Resp{12, 12}) == DelegationReplyStatus::kOk);
  tokens.clear();
  CHECK(c.poll([&](uint64_t t, const Resp& r) {
    CHECK(r.seq == t);
    tokens.push_back(t);
  }) == 2);
  CHECK(tokens == std::vector<uint64_t>{20, 12});
  CHECK(c.mismatched_responses() == 0);
  CHECK(c.in_flight() == 0);
}

TEST_CASE("reply hints: a callback that calls again, and only slots reply() answered are read",
          "[shm][delegationrpc]") {
  const DelegationConfig cfg{2, 16, 4};
  Fixture f(cfg);
  DClient other = DClient::connect(f.seg.bytes());
  DClient c = DClient::connect(f.seg.bytes());
  CHECK(f.server.reply_hints(c.client_id()) == nullptr);  // not kept yet
  f.server.keep_reply_hints();
  REQUIRE(f.server.hint_words() == 1);
  uint64_t* hints = f.server.reply_hints(c.client_id());
  REQUIRE(hints != nullptr);
  CHECK(f.server.reply_hints(2) == nullptr);  // beyond max_clients
  c.use_reply_hints(hints);
  for (uint32_t i = 0; i < 4; ++i) REQUIRE(c.call(Req{1, 0, 10 + i, 10 + i}, 10 + i).resp_slot == i);
  REQUIRE(other.call(Req{0, 0, 99, 99}, 99).status == DelegationCallStatus::kOk);
  REQUIRE(f.server.poll() == 5);
  std::vector<DelegationEntry<Req>> held;
  while (auto e = f.server.recv()) held.push_back(*e);
  f.server.advance_tail();
  REQUIRE(held.size() == 5);
  for (const uint32_t s : {3u, 1u, 0u})
    REQUIRE(f.server.reply(1, s, Resp{held[s].payload.seq, held[s].payload.value}) == DelegationReplyStatus::kOk);
  REQUIRE(f.server.reply(0, 0, Resp{99, 99}) == DelegationReplyStatus::kOk);  // the other client's words
  CHECK(*hints == 0b1011);
  std::vector<uint64_t> tokens;
  DelegationCallResult again{};
  CHECK(c.poll_hinted([&](uint64_t t, const Resp& r) {
    CHECK(r.seq == t);
    tokens.push_back(t);
    if (t == 10) again = c.try_call(Req{1, 0, 20, 20}, 20);  // slot 0 again, no bit: not read in this poll
  }) == 3);
  CHECK(tokens == std::vector<uint64_t>{10, 11, 13});
  REQUIRE(again.status == DelegationCallStatus::kOk);
  CHECK(again.resp_slot == 0);
  CHECK(*hints == 0);  // every bit read
  // A response written around reply() (as a forged writer would) has no bit: a hinted
  // poll does not see it, poll() and a client without hints do. Hence hints only where
  // reply() is the only writer.
  auto forge_response_in_slot_2 = [&] {
    const size_t off = resp_slot_offset(cfg, 1, 2);
    store_le<uint32_t>(f.base(), off + 4, c.call_tag(2));
    store_le<uint64_t>(f.base(), off + 8, held[2].payload.seq);
    store_le<uint64_t>(f.base(), off + 16, held[2].payload.value);
    store_le<uint8_t>(f.base(), off, 1);
  };
#ifdef NDEBUG
  forge_response_in_slot_2();
  CHECK(c.poll_hinted([](uint64_t, const Resp&) {}) == 0);
  CHECK(c.slot_busy(2));
  c.use_reply_hints(nullptr);
#else
  // With assertions on, poll_hinted asserts the invariant such a write breaks (a busy
  // slot without a bit holds no response) and aborts: the forged response comes after
  // the hints are off.
  c.use_reply_hints(nullptr);
  forge_response_in_slot_2();
#endif
  CHECK_FALSE(c.uses_reply_hints());
  tokens.clear();
  CHECK(c.poll_hinted([&](uint64_t t, const Resp&) { tokens.push_back(t); }) == 1);  // poll() without hints
  CHECK(tokens == std::vector<uint64_t>{12});
  // poll() with hints on: reads every busy slot and leaves the bits.
  REQUIRE(f.server.poll() == 1);
  const auto e20 = f.server.recv();
  REQUIRE(e20.has_value());
  CHECK(e20->resp_slot_idx == 0);
  REQUIRE(f.server.reply(1, 0, Resp{20, 20}) == DelegationReplyStatus::kOk);
  c.use_reply_hints(hints);
  CHECK(*hints == 0b0001);
  CHECK(c.poll([](uint64_t, const Resp&) {}) == 1);
  CHECK(*hints == 0b0001);
  // The stale bit of a slot awaiting nothing stays: no response can hide behind it.
  CHECK(c.poll_hinted([](uint64_t, const Resp&) {}) == 0);
  CHECK(*hints == 0b0001);
  CHECK(c.in_flight() == 0);
}

// The cache hints of a client (shm::DelegationClient::next_call_lines, StepHint), for a
// caller that prefetches a call's lines before it: each address is the one the call or
// poll then reads, whichever client of the ring calls in between.
TEST_CASE("a client's cache hints name the claim word, response slot and call record its next call and poll use",
          "[shm][delegationrpc]") {
  const DelegationConfig cfg{2, 8, 4};
  Fixture f(cfg);
  DClient other = DClient::connect(f.seg.bytes());
  DClient c = DClient::connect(f.seg.bytes());
  f.server.keep_reply_hints();
  c.use_reply_hints(f.server.reply_hints(c.client_id()));
  const DClient::StepHint hint = c.step_hint();  // taken once: it reads the segment, not the client
  std::vector<const void*> call_of_slot(cfg.resp_depth, nullptr);
  uint64_t value = 0;
  for (uint32_t i = 0; i < 3 * cfg.ring_depth; ++i) {  // around the ring and the response slots
    const void* claim = hint.claim_line();
    const auto next = c.next_call_lines();
    DClient& caller = i % 3 == 2 ? other : c;
    const uint64_t pos = load_le<uint64_t>(f.base(), 128);
    const DelegationCallResult r = caller.call(Req{0, 0, value, value}, value);
    ++value;
    REQUIRE(r.status == DelegationCallStatus::kOk);
    // The claim word of the slot the call took, holding its position's name.
    const std::byte* claim_word = f.base() + 256 + (pos & (cfg.ring_depth - 1)) * 64 + 16;
    CHECK(claim == claim_word);
    CHECK(load_le<uint64_t>(claim_word, 0) == delegation_position_name(pos));
    if (&caller == &c) {
      CHECK(next.response_slot == f.base() + resp_slot_offset(cfg, c.client_id(), r.resp_slot));
      call_of_slot[r.resp_slot] = next.call;
    }
    // Served and answered at once: the hint lists the answered slot until a poll reads it.
    REQUIRE(f.server.poll() == 1);
    const auto e = f.server.recv();
    REQUIRE(e.has_value());
    f.server.advance_tail();
    REQUIRE(f.server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, e->payload.value}) ==
            DelegationReplyStatus::kOk);
    std::vector<std::pair<const void*, const void*>> listed;
    hint.for_each_reply([&](const void* slot, const void* call) { listed.emplace_back(slot, call); });
    if (&caller == &c) {
      REQUIRE(listed.size() == 1);
      CHECK(listed[0].first == f.base() + resp_slot_offset(cfg, c.client_id(), r.resp_slot));
      CHECK(listed[0].second == call_of_slot[r.resp_slot]);
      CHECK(c.poll_hinted([](uint64_t, const Resp&) {}) == 1);
    } else {
      CHECK(listed.empty());  // another client's answer
      CHECK(other.poll([](uint64_t, const Resp&) {}) == 1);
    }
    size_t after_poll = 0;
    hint.for_each_reply([&](const void*, const void*) { ++after_poll; });
    CHECK(after_poll == 0);
  }
  // The call records are the client's own, one per slot, 16 bytes apart.
  for (uint32_t s = 1; s < cfg.resp_depth; ++s)
    CHECK(static_cast<const std::byte*>(call_of_slot[s]) - static_cast<const std::byte*>(call_of_slot[0]) == 16 * s);
  // A bit of the hint word above the client's response slots (resp_depth 4 here) names
  // no slot: it is not listed, so no line beyond the slots is named.
  uint64_t* words = f.server.reply_hints(c.client_id());
  *words = (uint64_t{1} << 63) | (uint64_t{1} << cfg.resp_depth) | 0b10;
  std::vector<const void*> masked;
  hint.for_each_reply([&](const void* slot, const void*) { masked.push_back(slot); });
  REQUIRE(masked.size() == 1);
  CHECK(masked[0] == f.base() + resp_slot_offset(cfg, c.client_id(), 1));
  *words = 0;
  // Without reply hints there is nothing to list.
  DClient::StepHint no_hints = hint;
  no_hints.replies = nullptr;
  size_t listed = 0;
  no_hints.for_each_reply([&](const void*, const void*) { ++listed; });
  CHECK(listed == 0);
}

TEST_CASE("response slots at depths up to several busy words: slot choice and answer order match a model",
          "[shm][delegationrpc]") {
  // Also with reply hints (the simulator's poll): the same answers in the same order.
  for (const bool hinted : {false, true})
  for (const uint32_t depth : {1u, 4u, 64u, 128u, 256u}) {
    CAPTURE(hinted, depth);
    const DelegationConfig cfg{1, 1024, depth};
    Fixture f(cfg);
    DClient c = DClient::connect(f.seg.bytes());
    if (hinted) {
      f.server.keep_reply_hints();
      c.use_reply_hints(f.server.reply_hints(c.client_id()));
      REQUIRE(c.uses_reply_hints());
    }
    bkv::Rng rng(bkv::derive_seed(7, {depth}));
    // Model: the slot of each awaiting call (by slot: its token), the round-robin cursor.
    std::vector<int64_t> model_token(depth, -1);
    uint32_t model_cursor = 0;
    std::vector<DelegationEntry<Req>> held;
    std::vector<uint32_t> answered_slots;  // replied, not yet polled
    uint64_t next_token = 0, completed = 0;
    for (int step = 0; step < 4000; ++step) {
      const uint64_t op = rng.below(8);
      if (op < 4) {
        int expect = -1;
        for (uint32_t k = 0; k < depth && expect < 0; ++k)
          if (model_token[(model_cursor + k) % depth] < 0) expect = static_cast<int>((model_cursor + k) % depth);
        const uint64_t t = next_token;
        const auto r = c.try_call(Req{0, 0, t, t}, t);
        if (expect < 0) {
          REQUIRE(r.status == DelegationCallStatus::kNoFreeSlot);
          continue;
        }
        REQUIRE(r.status == DelegationCallStatus::kOk);
        REQUIRE(r.resp_slot == static_cast<uint32_t>(expect));
        model_token[r.resp_slot] = static_cast<int64_t>(t);
        model_cursor = (r.resp_slot + 1) % depth;
        ++next_token;
        f.server.poll();
        while (auto e = f.server.recv()) held.push_back(*e);
        f.server.advance_tail();
      } else if (op < 6 && !held.empty()) {
        const size_t k = rng.below(held.size());  // reply in random order
        const auto e = held[k];
        held.erase(held.begin() + static_cast<long>(k));
        REQUIRE(f.server.reply(0, e.resp_slot_idx, Resp{e.payload.seq, e.payload.value}) == DelegationReplyStatus::kOk);
        answered_slots.push_back(e.resp_slot_idx);
      } else {
        std::sort(answered_slots.begin(), answered_slots.end());
        std::vector<uint64_t> expect_tokens;
        for (const uint32_t s : answered_slots) {
          expect_tokens.push_back(static_cast<uint64_t>(model_token[s]));
          model_token[s] = -1;
        }
        std::vector<uint64_t> tokens;
        const auto take = [&](uint64_t t, const Resp& r) {
          CHECK(r.seq == t);
          tokens.push_back(t);
        };
        const uint32_t n = hinted ? c.poll_hinted(take) : c.poll(take);
        REQUIRE(n == answered_slots.size());
        REQUIRE(tokens == expect_tokens);  // ascending slot order
        completed += n;
        answered_slots.clear();
      }
      bool busy_as_model = true;
      for (uint32_t s = 0; s < depth; ++s) busy_as_model = busy_as_model && c.slot_busy(s) == (model_token[s] >= 0);
      REQUIRE(busy_as_model);
    }
    CHECK(completed > depth);  // the run wrapped the slots more than once
    CHECK(c.mismatched_responses() == 0);
    CHECK(c.stray_responses() == 0);
    CHECK_FALSE(c.slot_busy(depth));
  }
}

TEST_CASE("recv rejects out-of-range ids written by a buggy client and nothing is written", "[shm][delegationrpc]") {
  const DelegationConfig cfg{2, 8, 4};
  Fixture f(cfg);
  DClient c = DClient::connect(f.seg.bytes());
  // A buggy client commits entries with ids beyond the configured bounds.
  raw_commit(f.base(), cfg.ring_depth, raw_reserve(f.base()), 2, 0, Req{});
  raw_commit(f.base(), cfg.ring_depth, raw_reserve(f.base()), 0xFFFFFFFFu, 0, Req{});
  raw_commit(f.base(), cfg.ring_depth, raw_reserve(f.base()), 0, 4, Req{});
  raw_commit(f.base(), cfg.ring_depth, raw_reserve(f.base()), 1, 0xFFFFFFFFu, Req{});
  REQUIRE(f.server.poll() == 4);
  const std::vector<std::byte> before(f.seg.data(), f.seg.data() + f.seg.size());
  // The cache hint skips ids out of range; it changes nothing.
  for (const auto& [client, slot] : {std::pair{2u, 0u}, {0xFFFFFFFFu, 0u}, {0u, 4u}, {1u, 0xFFFFFFFFu}, {0u, 0u}})
    f.server.prefetch_reply(client, slot);
  REQUIRE(f.server.cursor() == 0);
  REQUIRE(std::vector<std::byte>(f.seg.data(), f.seg.data() + f.seg.size()) == before);
  REQUIRE(f.server.poll() == 4);
  REQUIRE_FALSE(f.server.recv().has_value());  // all four consumed and rejected
  CHECK(f.server.cursor() == 4);
  CHECK(f.server.rejected(DelegationReject::kBadClientId) == 2);
  CHECK(f.server.rejected(DelegationReject::kBadSlot) == 2);
  CHECK(f.server.rejected_total() == 4);
  // reply() itself refuses the same values (a caller may pass anything).
  CHECK(f.server.reply(2, 0, Resp{1, 2}) == DelegationReplyStatus::kBadClientId);
  CHECK(f.server.reply(0xFFFFFFFFu, 0, Resp{1, 2}) == DelegationReplyStatus::kBadClientId);
  CHECK(f.server.reply(0, 4, Resp{1, 2}) == DelegationReplyStatus::kBadSlot);
  CHECK(f.server.reply(0, 0, Resp{1, 2}) == DelegationReplyStatus::kNotAwaited);  // in range, never received
  // recv() cleared the four committed bytes; nothing else changed.
  std::vector<std::byte> after(f.seg.data(), f.seg.data() + f.seg.size());
  for (size_t pos = 0; pos < 4; ++pos) {
    REQUIRE(after[256 + pos * 64] == std::byte{0});
    after[256 + pos * 64] = before[256 + pos * 64];
  }
  REQUIRE(after == before);
  // A request is answered once: a second reply to it is refused and writes nothing.
  REQUIRE(c.call(Req{}, 1).status == DelegationCallStatus::kOk);
  REQUIRE(f.server.poll() == 1);
  const auto e = f.server.recv();
  REQUIRE(e.has_value());
  REQUIRE(f.server.reply(e->client_id, e->resp_slot_idx, Resp{1, 1}) == DelegationReplyStatus::kOk);
  REQUIRE(f.server.reply(e->client_id, e->resp_slot_idx, Resp{2, 2}) == DelegationReplyStatus::kNotAwaited);
  uint64_t v = 0;
  REQUIRE(c.poll([&](uint64_t, const Resp& r) { v = r.value; }) == 1);
  CHECK(v == 1);
}

TEST_CASE("reply does not overwrite a response that someone else wrote into an awaited slot",
          "[shm][delegationrpc]") {
  const DelegationConfig cfg{1, 8, 4};
  Fixture f(cfg);
  DClient c = DClient::connect(f.seg.bytes());
  REQUIRE(c.call(Req{}, 1).status == DelegationCallStatus::kOk);
  REQUIRE(f.server.poll() == 1);
  const auto e = f.server.recv();
  REQUIRE(e.has_value());
  const size_t rs = resp_slot_offset(cfg, 0, 0);
  store_le<uint8_t>(f.base(), rs, 1);  // a forger sets valid directly
  store_le<uint64_t>(f.base(), rs + 16, 777);
  REQUIRE(f.server.reply(e->client_id, e->resp_slot_idx, Resp{1, 1}) == DelegationReplyStatus::kSlotBusy);
  CHECK(load_le<uint64_t>(f.base(), rs + 16) == 777);
  // The request is dropped: the slot no longer awaits a reply.
  CHECK(f.server.reply(e->client_id, e->resp_slot_idx, Resp{1, 1}) == DelegationReplyStatus::kNotAwaited);
}

TEST_CASE("ServerDisconnected after shutdown", "[shm][delegationrpc]") {
  Fixture f(DelegationConfig{2, 8, 4});
  DClient c = DClient::connect(f.seg.bytes());
  REQUIRE(c.call(Req{}).status == DelegationCallStatus::kOk);
  f.server.shutdown();
  CHECK(load_le<uint8_t>(f.base(), 28) == 0);
  CHECK_FALSE(c.server_alive());
  CHECK(c.call(Req{}).status == DelegationCallStatus::kServerDisconnected);
  CHECK(c.try_call(Req{}).status == DelegationCallStatus::kServerDisconnected);
  CHECK(c.in_flight() == 1);
  REQUIRE_THROWS_WITH(DClient::connect(f.seg.bytes()), Contains("shut down"));
}

TEST_CASE("registration refuses clients beyond max_clients", "[shm][delegationrpc]") {
  Fixture f(DelegationConfig{2, 8, 4});
  DClient a = DClient::connect(f.seg.bytes());
  DClient b = DClient::connect(f.seg.bytes());
  CHECK(a.client_id() == 0);
  CHECK(b.client_id() == 1);
  REQUIRE_THROWS_WITH(DClient::connect(f.seg.bytes()), Contains("all 2 client ids are taken"));
  CHECK(load_le<uint32_t>(f.base(), 24) == 2);
}

TEST_CASE("attach refuses wrong magic, version, size or payload types", "[shm][delegationrpc]") {
  const DelegationConfig cfg{2, 8, 4};
  SECTION("magic") {
    Fixture f(cfg);
    store_le<uint8_t>(f.base(), 7, 0x45);
    REQUIRE_THROWS_WITH(DClient::connect(f.seg.bytes()), Contains("bad magic 0x454C475250435631"));
  }
  SECTION("zeroed segment") {
    Segment s = Segment::create_process(DLayout::segment_size(cfg));
    REQUIRE_THROWS_WITH(DClient::connect(s.bytes()), Contains("bad magic"));
  }
  SECTION("version") {
    Fixture f(cfg);
    store_le<uint32_t>(f.base(), 8, 3);
    REQUIRE_THROWS_WITH(DClient::connect(f.seg.bytes()), Contains("unsupported version 3"));
  }
  SECTION("segment larger than the header says") {
    Segment big = Segment::create_process(DLayout::segment_size(cfg) + 64);
    DServer s(std::span<std::byte>(big.data(), DLayout::segment_size(cfg)), cfg);
    REQUIRE_THROWS_WITH(DClient::connect(big.bytes()), Contains("does not match the header"));
  }
  SECTION("header depth corrupted") {
    Fixture f(cfg);
    store_le<uint32_t>(f.base(), 16, 16);
    REQUIRE_THROWS_WITH(DClient::connect(f.seg.bytes()), Contains("does not match the header"));
    store_le<uint32_t>(f.base(), 16, 12);
    REQUIRE_THROWS_WITH(DClient::connect(f.seg.bytes()), Contains("ring_depth=12 is not a power of two"));
  }
  SECTION("different request type") {
    Fixture f(cfg);
    using BigClient = DelegationClient<shmtest::BigReq, Resp>;
    REQUIRE_THROWS_WITH(BigClient::connect(f.seg.bytes()), Contains("does not match the header"));
  }
  SECTION("too small for the header") {
    Segment s = Segment::create_process(128);
    REQUIRE_THROWS_WITH(DClient::connect(s.bytes()), Contains("smaller than the 256-byte header"));
  }
  SECTION("create-time checks") {
    Segment s = Segment::create_process(DLayout::segment_size(cfg));
    REQUIRE_THROWS_WITH(DServer(s.bytes(), DelegationConfig{2, 6, 4}), Contains("ring_depth=6"));
    REQUIRE_THROWS_WITH(DServer(s.bytes(), DelegationConfig{2, 8, 3}), Contains("resp_depth=3"));
    REQUIRE_THROWS_WITH(DServer(s.bytes(), DelegationConfig{0, 8, 4}), Contains("max_clients"));
    REQUIRE_THROWS_WITH(DServer(s.bytes(), DelegationConfig{3, 8, 4}), Contains("layout needs"));
  }
}

TEST_CASE("random interleavings over many laps: every call answered exactly once", "[shm][delegationrpc]") {
  const DelegationConfig cfg{3, 8, 4};
  Fixture f(cfg);
  std::vector<DClient> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(DClient::connect(f.seg.bytes()));
  bkv::Rng rng(bkv::derive_seed(1, {42}));
  std::vector<uint64_t> next_seq(3, 0), answered(3, 0), last_seen_at_server(3, 0);
  std::vector<DelegationEntry<Req>> held;
  uint64_t calls = 0;
  while (calls < 3000 || !held.empty() || f.server.poll() != 0) {
    const uint64_t op = rng.below(10);
    if (op < 4 && calls < 3000) {
      const uint32_t i = static_cast<uint32_t>(rng.below(3));
      const Req r{i, 0, next_seq[i], next_seq[i] * 3};
      const auto res = clients[i].try_call(r, next_seq[i]);
      if (res.status == DelegationCallStatus::kOk) {
        ++next_seq[i];
        ++calls;
      } else {
        REQUIRE((res.status == DelegationCallStatus::kFull || res.status == DelegationCallStatus::kNoFreeSlot));
      }
    } else if (op < 6) {
      f.server.poll();
      while (auto e = f.server.recv()) {
        REQUIRE(e->client_id == e->payload.client);
        REQUIRE(e->payload.seq == last_seen_at_server[e->client_id]);  // per-client order, no gap
        ++last_seen_at_server[e->client_id];
        held.push_back(*e);
      }
      if (rng.below(2) == 0) f.server.advance_tail();
    } else if (op < 8 && !held.empty()) {
      const size_t k = rng.below(held.size());  // reply in random order
      const auto e = held[k];
      held.erase(held.begin() + static_cast<long>(k));
      REQUIRE(f.server.reply(e.client_id, e.resp_slot_idx, Resp{e.payload.seq, shmtest::answer(e.payload.value)}) ==
              DelegationReplyStatus::kOk);
    } else {
      const uint32_t i = static_cast<uint32_t>(rng.below(3));
      clients[i].poll([&](uint64_t token, const Resp& r) {
        REQUIRE(token == r.seq);
        REQUIRE(r.value == shmtest::answer(r.seq * 3));
        ++answered[i];
      });
    }
    if (calls >= 3000) f.server.advance_tail();
  }
  for (uint32_t i = 0; i < 3; ++i) {
    clients[i].poll([&](uint64_t, const Resp&) { ++answered[i]; });
    CHECK(answered[i] == next_seq[i]);
    CHECK(clients[i].in_flight() == 0);
  }
  CHECK(f.server.cursor() == calls);
}

TEST_CASE("delegationrpc over /dev/shm between two processes", "[shm][delegationrpc][process]") {
  const DelegationConfig cfg{2, 8, 4};
  const std::string name = shmtest::shm_name("dlg_proc");
  Segment seg = Segment::create_shm(name, DLayout::segment_size(cfg), true);
  DServer server(seg.bytes(), cfg);
  constexpr uint64_t kCalls = 500;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int rc = 0;
    try {
      Segment mine = Segment::attach_shm(name);
      DClient c = DClient::connect(mine.bytes());
      uint64_t sent = 0, got = 0;
      while (got < kCalls) {
        if (sent < kCalls && c.call(Req{c.client_id(), 0, sent, sent}, sent).status == DelegationCallStatus::kOk) ++sent;
        c.poll([&](uint64_t t, const Resp& r) {
          if (r.seq != t || r.value != shmtest::answer(t)) rc = 3;
          ++got;
        });
      }
    } catch (...) {
      rc = 2;
    }
    ::_exit(rc);
  }
  uint64_t served = 0;
  int status = 0;
  bool exited = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // hang guard only
  while (!exited && std::chrono::steady_clock::now() < deadline) {
    server.poll();
    while (auto e = server.recv()) {
      REQUIRE(server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, shmtest::answer(e->payload.value)}) ==
              DelegationReplyStatus::kOk);
      ++served;
    }
    server.advance_tail();
    exited = ::waitpid(child, &status, WNOHANG) == child;
  }
  if (!exited) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    FAIL("child process did not finish");
  }
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(served == kCalls);
}

// ---- abandoned positions (header comment of delegationrpc.hpp) ---------------------

namespace {
constexpr size_t records_offset(const DelegationConfig& c) {
  return 256 + size_t{c.ring_depth} * 64 + size_t{c.max_clients} * c.resp_depth * 64;
}

// Serves every committed entry up to the cursor's first hole once (recv() counts the
// hole's sightings and may skip it). Returns the entries answered.
uint32_t serve_once(DServer& server) {
  uint32_t n = 0;
  server.snapshot_head();
  while (auto e = server.recv()) {
    REQUIRE(server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, shmtest::answer(e->payload.value)}) ==
            DelegationReplyStatus::kOk);
    ++n;
  }
  server.advance_tail();
  return n;
}

// A ring of depth 2 filled by client 0 (positions 0 and 1, not yet served) and a child
// process connected as client 1 whose call() reserved position 2 and waits for ring
// space (its record names the position). The child's own wait never gives up.
struct StuckReserver {
  static constexpr DelegationConfig kCfg{2, 2, 4};
  std::string name = shmtest::shm_name("dlg_hole");
  Segment seg = Segment::create_shm(name, DLayout::segment_size(kCfg), true);
  DServer server{seg.bytes(), kCfg};
  DClient a = DClient::connect(seg.bytes(), 1);
  pid_t child = -1;

  StuckReserver() {
    REQUIRE(a.call(Req{0, 0, 0, 0}, 0).status == DelegationCallStatus::kOk);
    REQUIRE(a.call(Req{0, 0, 1, 1}, 1).status == DelegationCallStatus::kOk);
    child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      int rc = 0;
      try {
        Segment mine = Segment::attach_shm(name);
        DClient b = DClient::connect(mine.bytes(), 2);
        b.set_wait_limit(std::chrono::hours(1));
        // Reserves position 2 and waits for space; answered: exit 0 with the right answer.
        if (b.call(Req{1, 0, 7, 70}, 7).status != DelegationCallStatus::kOk) ::_exit(4);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        bool got = false;
        while (!got && std::chrono::steady_clock::now() < deadline)
          b.poll([&](uint64_t t, const Resp& r) {
            got = true;
            if (t != 7 || r.seq != 7 || r.value != shmtest::answer(70)) rc = 3;
          });
        if (!got) rc = 5;
      } catch (...) {
        rc = 2;
      }
      ::_exit(rc);
    }
    // The child's record (client 1) names position 2: 2 * (2 + 1) = 6.
    const size_t waiting = records_offset(kCfg) + 64 + 8;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (load_le<uint64_t>(seg.data(), waiting) != 6 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(load_le<uint64_t>(seg.data(), waiting) == 6);
    CHECK(load_le<uint32_t>(seg.data(), records_offset(kCfg) + 64) == static_cast<uint32_t>(child));  // its pid
  }
  ~StuckReserver() {
    if (child > 0) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
    }
  }
};
}  // namespace

TEST_CASE("delegationrpc skips a position whose reserving process was killed before its commit",
          "[shm][delegationrpc][process]") {
  StuckReserver t;
  t.server.set_hole_limit(std::chrono::milliseconds(1));
  REQUIRE(::kill(t.child, SIGKILL) == 0);
  REQUIRE(::waitpid(t.child, nullptr, 0) == t.child);
  t.child = -1;
  // Client 0's next call (position 3) needs the server past the dead client's hole.
  std::vector<uint64_t> answered;
  bool called = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // hang guard only
  while (answered.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    serve_once(t.server);
    t.a.poll([&](uint64_t tok, const Resp& r) {
      CHECK(r.value == shmtest::answer(tok));
      answered.push_back(tok);
    });
    if (!called && answered.size() == 2) {
      REQUIRE(t.a.call(Req{0, 0, 3, 3}, 3).status == DelegationCallStatus::kOk);
      called = true;
    }
  }
  REQUIRE(answered == std::vector<uint64_t>{0, 1, 3});
  CHECK(t.server.skipped(DelegationSkip::kReserverGone) == 1);
  CHECK(t.server.skipped_total() == 1);
  CHECK(t.server.cursor() == 4);
  // The skipped position's claim word says abandoned: 2 * (2 + 1) | 1.
  CHECK(load_le<uint64_t>(t.seg.data(), 256 + 0 * 64 + 16) == 7);
}

TEST_CASE("delegationrpc does not skip a position whose reserving process is alive but stopped",
          "[shm][delegationrpc][process]") {
  StuckReserver t;
  t.server.set_hole_limit(std::chrono::milliseconds(1));
  REQUIRE(::kill(t.child, SIGSTOP) == 0);
  // Serve positions 0 and 1; client 0 commits position 3 behind the stopped client's hole.
  std::vector<uint64_t> answered;
  auto serve_and_poll = [&] {
    serve_once(t.server);
    t.a.poll([&](uint64_t tok, const Resp&) { answered.push_back(tok); });
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // hang guard only
  while (answered.size() < 2 && std::chrono::steady_clock::now() < deadline) serve_and_poll();
  REQUIRE(answered.size() == 2);
  REQUIRE(t.a.call(Req{0, 0, 3, 3}, 3).status == DelegationCallStatus::kOk);
  // The server looks at the stuck position's reserver several times and keeps the hole.
  while (t.server.hole_checks() < 3 && t.server.skipped_total() == 0 && std::chrono::steady_clock::now() < deadline)
    serve_and_poll();
  REQUIRE(t.server.skipped_total() == 0);
  REQUIRE(t.server.hole_checks() >= 3);
  CHECK(t.server.cursor() == 2);
  CHECK(answered.size() == 2);
  // Resumed, the child claims and commits its position; both calls are answered.
  REQUIRE(::kill(t.child, SIGCONT) == 0);
  int status = -1;
  bool exited = false;
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((!exited || answered.size() < 3) && std::chrono::steady_clock::now() < deadline) {
    serve_and_poll();
    if (!exited) exited = ::waitpid(t.child, &status, WNOHANG) == t.child;
  }
  REQUIRE(exited);
  t.child = -1;
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(answered == std::vector<uint64_t>{0, 1, 3});
  CHECK(t.server.skipped_total() == 0);
  CHECK(t.server.cursor() == 4);
}

TEST_CASE("delegationrpc skips the position of a call that gave up waiting and the client calls again",
          "[shm][delegationrpc]") {
  const DelegationConfig cfg{2, 2, 4};
  Fixture f(cfg);
  f.server.set_hole_limit(std::chrono::milliseconds(0));
  DClient a = DClient::connect(f.seg.bytes(), 1);
  DClient b = DClient::connect(f.seg.bytes(), 2);
  REQUIRE(a.call(Req{0, 0, 0, 0}, 0).status == DelegationCallStatus::kOk);
  REQUIRE(a.call(Req{0, 0, 1, 1}, 1).status == DelegationCallStatus::kOk);
  b.set_wait_limit(std::chrono::milliseconds(20));
  // Position 2: the ring is full and the server does not run, so the call gives up.
  REQUIRE(b.call(Req{1, 0, 2, 2}, 2).status == DelegationCallStatus::kServerUnresponsive);
  CHECK(load_le<uint64_t>(f.base(), records_offset(cfg) + 64 + 8) == (6 | 1));  // names position 2, given up
  // Until the server has passed position 2, a new call of b reserves nothing.
  CHECK(b.try_call(Req{1, 0, 3, 3}, 3).status == DelegationCallStatus::kFull);
  CHECK(b.call(Req{1, 0, 3, 3}, 3).status == DelegationCallStatus::kServerUnresponsive);
  CHECK(load_le<uint64_t>(f.base(), 128) == 3);  // head: only position 2 was reserved
  std::vector<uint64_t> answered;
  auto serve_and_poll = [&] {
    serve_once(f.server);
    auto got = [&](uint64_t tok, const Resp& r) {
      CHECK(r.value == shmtest::answer(tok));
      answered.push_back(tok);
    };
    a.poll(got);
    b.poll(got);
  };
  serve_and_poll();
  REQUIRE(answered == std::vector<uint64_t>{0, 1});
  REQUIRE(a.call(Req{0, 0, 4, 4}, 4).status == DelegationCallStatus::kOk);  // position 3, behind the hole
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // hang guard only
  while (answered.size() < 3 && std::chrono::steady_clock::now() < deadline) serve_and_poll();
  REQUIRE(answered == std::vector<uint64_t>{0, 1, 4});
  CHECK(f.server.skipped(DelegationSkip::kReserverGaveUp) == 1);
  CHECK(f.server.skipped_total() == 1);
  // The server passed position 2: b calls again (position 4).
  REQUIRE(b.call(Req{1, 0, 5, 5}, 5).status == DelegationCallStatus::kOk);
  while (answered.size() < 4 && std::chrono::steady_clock::now() < deadline) serve_and_poll();
  CHECK(answered == std::vector<uint64_t>{0, 1, 4, 5});
  CHECK(f.server.cursor() == 5);
}

TEST_CASE("delegationrpc hole limit: a negative one is refused with its value", "[shm][delegationrpc]") {
  Fixture f(DelegationConfig{1, 2, 1});
  CHECK(f.server.hole_limit() == kDelegationDefaultHoleLimit);
  REQUIRE_THROWS_WITH(f.server.set_hole_limit(std::chrono::nanoseconds(-5)), Contains("hole limit -5 ns is negative"));
  CHECK(f.server.hole_limit() == kDelegationDefaultHoleLimit);
}

TEST_CASE("delegationrpc: a call that finds its position marked abandoned writes nothing and gives it up",
          "[shm][delegationrpc]") {
  const DelegationConfig cfg{1, 4, 4};
  Fixture f(cfg);
  f.server.set_hole_limit(std::chrono::milliseconds(0));
  DClient a = DClient::connect(f.seg.bytes(), 1);
  // Position 0's claim word already says abandoned (2 * (0 + 1) | 1): the server marked
  // it before this call could claim it.
  store_le<uint64_t>(f.base(), 256 + 16, 3);
  CHECK(a.call(Req{0, 0, 9, 9}, 9).status == DelegationCallStatus::kAbandoned);
  CHECK(load_le<uint8_t>(f.base(), 256) == 0);           // not committed
  CHECK(load_le<uint64_t>(f.base(), 256 + 24 + 8) == 0);  // payload not written
  CHECK(load_le<uint64_t>(f.base(), 256 + 16) == 3);      // claim word unchanged
  CHECK(load_le<uint64_t>(f.base(), records_offset(cfg) + 8) == 3);  // the record gives position 0 up
  CHECK(a.in_flight() == 0);
  CHECK(a.try_call(Req{0, 0, 10, 10}, 10).status == DelegationCallStatus::kFull);  // until the server passes it
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // hang guard only
  while (f.server.skipped_total() == 0 && std::chrono::steady_clock::now() < deadline) serve_once(f.server);
  CHECK(f.server.skipped(DelegationSkip::kReserverGaveUp) == 1);
  REQUIRE(a.call(Req{0, 0, 11, 11}, 11).status == DelegationCallStatus::kOk);  // position 1
  CHECK(serve_once(f.server) == 1);
  uint64_t got = 0;
  CHECK(a.poll([&](uint64_t tok, const Resp&) { got = tok; }) == 1);
  CHECK(got == 11);
}

TEST_CASE("delegationrpc never skips a claimed position whatever its reserver's record says",
          "[shm][delegationrpc]") {
  // The writer of position 0 claimed its slot and has not committed yet (it is slow, or
  // died between its claim and its commit): its record saying it gave the position up,
  // or naming a process that is gone, must not make the server skip it, since the writer
  // may still be writing the slot.
  const DelegationConfig cfg{1, 4, 4};
  Fixture f(cfg);
  f.server.set_hole_limit(std::chrono::nanoseconds(0));
  DClient a = DClient::connect(f.seg.bytes(), 1);  // client 0: registered, its record is scanned
  const size_t rec = records_offset(cfg);
  REQUIRE(raw_reserve(f.base()) == 0);
  store_le<uint64_t>(f.base(), 256 + 16, 2);  // claim word: position 0's name, claimed
  const pid_t gone = ::fork();
  REQUIRE(gone >= 0);
  if (gone == 0) ::_exit(0);
  REQUIRE(::waitpid(gone, nullptr, 0) == gone);
  for (const auto& [pid, waiting] : {std::pair<int32_t, uint64_t>{::getpid(), 2 | 1},  // given up
                                     std::pair<int32_t, uint64_t>{gone, 2}}) {         // waiting, process gone
    store_le<int32_t>(f.base(), rec, pid);
    store_le<uint64_t>(f.base(), rec + 8, waiting);
    const uint64_t checks = f.server.hole_checks();
    for (uint32_t i = 0; i < 4 * DServer::kHoleSightingsPerClockRead; ++i) CHECK(serve_once(f.server) == 0);
    CHECK(f.server.hole_checks() > checks);  // the server did look at the hole
    CHECK(f.server.skipped_total() == 0);
    CHECK(f.server.cursor() == 0);
    CHECK(load_le<uint64_t>(f.base(), 256 + 16) == 2);  // claim word untouched
  }
  // The writer commits: the entry is read and answered.
  raw_commit(f.base(), cfg.ring_depth, 0, 0, 0, Req{0, 0, 5, 50});
  CHECK(serve_once(f.server) == 1);
  CHECK(f.server.cursor() == 1);
}

TEST_CASE("delegationrpc: a call whose slot a later lap has claimed writes nothing and gives its position up",
          "[shm][delegationrpc]") {
  // Position 0's slot holds the claim of position 4 (0 + ring_depth): position 0 was
  // skipped and the slot reused while this call was slow to claim it.
  const DelegationConfig cfg{1, 4, 4};
  Fixture f(cfg);
  DClient a = DClient::connect(f.seg.bytes(), 1);
  store_le<uint64_t>(f.base(), 256 + 16, 10);  // 2 * (4 + 1)
  CHECK(a.call(Req{0, 0, 9, 9}, 9).status == DelegationCallStatus::kAbandoned);
  CHECK(load_le<uint8_t>(f.base(), 256) == 0);            // not committed
  CHECK(load_le<uint32_t>(f.base(), 256 + 12) == 0);      // no call tag written
  CHECK(load_le<uint64_t>(f.base(), 256 + 24 + 8) == 0);  // payload not written
  CHECK(load_le<uint64_t>(f.base(), 256 + 16) == 10);     // the later lap's claim stays
  CHECK(load_le<uint64_t>(f.base(), records_offset(cfg) + 8) == 3);  // the record gives position 0 up
  CHECK(a.in_flight() == 0);
}

TEST_CASE("delegationrpc: a waiting call whose position was skipped and whose slot a later lap reused ends kAbandoned",
          "[shm][delegationrpc][process]") {
  // A child process connected as client 1 waits for ring space at position 2 and is
  // stopped there; its record is made to name a process that is gone (as a pid from
  // another pid namespace would), so the server skips position 2, and client 0's
  // position 4 reuses the slot. Resumed, the child finds tail beyond its position and
  // a later lap's claim in its slot: its position was abandoned, not a forged tail.
  constexpr DelegationConfig kCfg{2, 2, 4};
  const std::string name = shmtest::shm_name("dlg_lap");
  Segment seg = Segment::create_shm(name, DLayout::segment_size(kCfg), true);
  DServer server(seg.bytes(), kCfg);
  server.set_hole_limit(std::chrono::nanoseconds(0));
  DClient a = DClient::connect(seg.bytes(), 1);
  REQUIRE(a.call(Req{0, 0, 0, 0}, 0).status == DelegationCallStatus::kOk);  // positions 0 and 1 fill the ring
  REQUIRE(a.call(Req{0, 0, 1, 1}, 1).status == DelegationCallStatus::kOk);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int rc = 2;
    try {
      Segment mine = Segment::attach_shm(name);
      DClient b = DClient::connect(mine.bytes(), 2);
      b.set_wait_limit(std::chrono::hours(1));
      rc = 10 + static_cast<int>(b.call(Req{1, 0, 7, 70}, 7).status);  // position 2
    } catch (...) {
    }
    ::_exit(rc);
  }
  const size_t rec_b = records_offset(kCfg) + 64;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // hang guard only
  while (load_le<uint64_t>(seg.data(), rec_b + 8) != 6 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(load_le<uint64_t>(seg.data(), rec_b + 8) == 6);  // waiting at position 2 (tail is 0: no space)
  REQUIRE(::kill(child, SIGSTOP) == 0);
  int status = -1;
  REQUIRE(::waitpid(child, &status, WUNTRACED) == child);
  REQUIRE(WIFSTOPPED(status));
  const pid_t gone = ::fork();
  REQUIRE(gone >= 0);
  if (gone == 0) ::_exit(0);
  REQUIRE(::waitpid(gone, nullptr, 0) == gone);
  store_le<int32_t>(seg.data(), rec_b, static_cast<int32_t>(gone));
  std::vector<uint64_t> answered;
  auto serve_and_poll = [&] {
    serve_once(server);
    a.poll([&](uint64_t tok, const Resp&) { answered.push_back(tok); });
  };
  while (answered.size() < 2 && std::chrono::steady_clock::now() < deadline) serve_and_poll();
  REQUIRE(answered.size() == 2);
  while (server.skipped_total() == 0 && std::chrono::steady_clock::now() < deadline) serve_and_poll();
  REQUIRE(server.skipped(DelegationSkip::kReserverGone) == 1);
  REQUIRE(a.call(Req{0, 0, 3, 3}, 3).status == DelegationCallStatus::kOk);  // position 3
  REQUIRE(a.call(Req{0, 0, 4, 4}, 4).status == DelegationCallStatus::kOk);  // position 4: position 2's slot
  CHECK(load_le<uint64_t>(seg.data(), 256 + 16) == 10);  // claimed by position 4: 2 * (4 + 1)
  while (answered.size() < 4 && std::chrono::steady_clock::now() < deadline) serve_and_poll();
  REQUIRE(answered == std::vector<uint64_t>{0, 1, 3, 4});
  REQUIRE(::kill(child, SIGCONT) == 0);
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 10 + static_cast<int>(DelegationCallStatus::kAbandoned));
  CHECK(load_le<uint64_t>(seg.data(), rec_b + 8) == (6 | 1));  // the record gives position 2 up
  CHECK(server.cursor() == 5);
}

TEST_CASE("a poll visits a slot a callback made busy above the one just ended, as a loop over every slot would",
          "[shm][delegationrpc]") {
  const DelegationConfig cfg{1, 16, 8};
  Fixture f(cfg);
  DClient c = DClient::connect(f.seg.bytes());
  four_calls_taken(f, c);  // slots 0..3 out; only slot 0 is answered below
  REQUIRE(f.server.reply(0, 0, Resp{10, 10}) == DelegationReplyStatus::kOk);
  std::vector<uint64_t> tokens;
  const uint32_t n = c.poll([&](uint64_t t, const Resp& r) {
    CHECK(r.seq == t);
    tokens.push_back(t);
    if (t != 10) return;
    // A call from the callback takes the cursor's slot, 4, and is answered before the
    // poll moves on: the poll reaches slot 4 after slot 0 and ends it too.
    const DelegationCallResult again = c.try_call(Req{0, 0, 20, 20}, 20);
    REQUIRE(again.status == DelegationCallStatus::kOk);
    REQUIRE(again.resp_slot == 4);
    REQUIRE(f.server.poll() == 1);
    const auto e = f.server.recv();
    REQUIRE(e.has_value());
    f.server.advance_tail();
    REQUIRE(f.server.reply(0, 4, Resp{20, 20}) == DelegationReplyStatus::kOk);
  });
  CHECK(n == 2);
  CHECK(tokens == std::vector<uint64_t>{10, 20});
  CHECK(c.in_flight() == 3);
  CHECK_FALSE(c.slot_busy(4));
}

TEST_CASE("each call of a client draws a new tag: a replayed response of an earlier call in the reused slot fails the "
          "call", "[shm][delegationrpc]") {
  const DelegationConfig cfg{1, 16, 2};
  Fixture f(cfg);
  DClient c = DClient::connect(f.seg.bytes(), 7);
  auto serve = [&](uint32_t slot, uint64_t seq) {
    REQUIRE(f.server.poll() == 1);
    REQUIRE(f.server.recv().has_value());
    f.server.advance_tail();
    REQUIRE(f.server.reply(0, slot, Resp{seq, seq}) == DelegationReplyStatus::kOk);
  };
  std::vector<uint32_t> tags;
  REQUIRE(c.call(Req{0, 0, 1, 1}, 1).resp_slot == 0);
  tags.push_back(c.call_tag(0));
  serve(0, 1);
  std::vector<uint64_t> answered, failed;
  auto on_response = [&](uint64_t t, const Resp&) { answered.push_back(t); };
  auto on_failed = [&](uint64_t t) { failed.push_back(t); };
  REQUIRE(c.poll(on_response, on_failed) == 1);
  REQUIRE(c.call(Req{0, 0, 2, 2}, 2).resp_slot == 1);
  tags.push_back(c.call_tag(1));
  REQUIRE(c.call(Req{0, 0, 3, 3}, 3).resp_slot == 0);
  tags.push_back(c.call_tag(0));
  std::vector<uint32_t> sorted = tags;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());  // three calls, three tags
  // The first call's response again in slot 0 (a writer that kept it), where the third
  // call waits: its tag is the first call's, so the third call fails.
  const size_t off = resp_slot_offset(cfg, 0, 0);
  store_le<uint32_t>(f.base(), off + 4, tags[0]);
  store_le<uint64_t>(f.base(), off + 8, 1);
  store_le<uint64_t>(f.base(), off + 16, 1);
  store_le<uint8_t>(f.base(), off, 1);
  CHECK(c.poll(on_response, on_failed) == 1);
  CHECK(answered == std::vector<uint64_t>{1});
  CHECK(failed == std::vector<uint64_t>{3});
  CHECK(c.mismatched_responses() == 1);
  CHECK(c.in_flight() == 1);
}
