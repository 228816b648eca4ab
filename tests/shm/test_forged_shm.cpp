// Regression tests for values forged in shared memory: headers whose sizes overflow or
// exceed the segment, header fields beyond the channel caps, a ring tail beyond head,
// and delegation ring entries that name another client's response slot.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "core/random.hpp"
#include "core/shm/delegationrpc.hpp"
#include "core/shm/flux.hpp"
#include "core/shm/ipc.hpp"
#include "core/shm/segment.hpp"
#include "tests/shm/shm_test_util.hpp"

using namespace bkv::shm;
using namespace shmtest;
using Catch::Matchers::Contains;

namespace {
// A delegationrpc segment of `cfg` in process memory, formatted by its server (whose
// hole limit is `hole_limit` when one is given).
struct DSegment : ServerFixture<DLayout, DServer, DelegationConfig> {
  explicit DSegment(const DelegationConfig& c, std::optional<std::chrono::nanoseconds> hole_limit = std::nullopt)
      : ServerFixture(c) {
    if (hole_limit) server.set_hole_limit(*hole_limit);
  }
};

// Writes a delegationrpc header by hand (as a forger with write access would).
void forge_delegation_header(std::byte* b, uint32_t max_clients, uint32_t ring_depth, uint32_t resp_depth) {
  store_le<uint32_t>(b, 8, kDelegationVersion);
  store_le<uint32_t>(b, 12, max_clients);
  store_le<uint32_t>(b, 16, ring_depth);
  store_le<uint32_t>(b, 20, resp_depth);
  store_le<uint32_t>(b, 24, 0);  // next_client_id
  store_le<uint8_t>(b, 28, 1);   // server_alive
  store_le<uint64_t>(b, 0, kDelegationMagic);
}

void forge_ipc_header(std::byte* b, uint32_t max_clients, uint32_t depth) {
  store_le<uint32_t>(b, 8, 1);  // version
  store_le<uint32_t>(b, 12, max_clients);
  store_le<uint32_t>(b, 16, depth);
  store_le<uint32_t>(b, 20, static_cast<uint32_t>(ILayout::kReqSlotSize));
  store_le<uint32_t>(b, 24, static_cast<uint32_t>(ILayout::kRespSlotSize));
  store_le<uint8_t>(b, 28, 1);  // server_alive
  store_le<uint64_t>(b, 0, kIpcMagic);
}

// A raw ring entry, written as a client with a forged client_id would write it.
void forge_entry(std::byte* base, uint32_t ring_depth, uint32_t client_id, uint32_t slot, const Req& r,
                 uint32_t call_tag = 0) {
  const uint64_t pos = load_le<uint64_t>(base, 128);
  store_le<uint64_t>(base, 128, pos + 1);  // head
  const size_t off = 256 + (pos & (ring_depth - 1)) * 64;
  store_le<uint32_t>(base, off + 4, client_id);
  store_le<uint32_t>(base, off + 8, slot);
  store_le<uint32_t>(base, off + 12, call_tag);
  std::memcpy(base + off + 24, &r, sizeof r);
  store_le<uint8_t>(base, off, 1);  // committed
}

// Runs f() in a child process; returns its exit code, or -1 if it did not finish within
// `limit` (the child is then killed): a spinning call fails the test instead of hanging it.
template <class F>
int run_with_deadline(F&& f, std::chrono::seconds limit) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(f());
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(child, &status, WNOHANG) == child) return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return -1;
}
}  // namespace

// max_clients * resp_depth * 64 = 2^31 * 2^27 * 2^6 = 2^64 wraps to 0, so the old size
// check saw 256 + 16 * 64 = 1280 bytes, the real size: connect accepted the header and
// poll_slot then addressed response slots far outside the segment.
TEST_CASE("delegationrpc attach rejects a header whose size product overflows", "[shm][forged]") {
  Segment seg = Segment::create_process(1280);
  forge_delegation_header(seg.data(), 1u << 31, 16, 1u << 27);
  REQUIRE_THROWS_WITH(DClient::connect(seg.bytes()), Contains("max_clients=2147483648") && Contains("65536"));
}

TEST_CASE("delegationrpc attach of a /dev/shm object with an overflowing header is rejected", "[shm][forged]") {
  const std::string name = shmtest::shm_name("forged_dlg");
  Segment owner = Segment::create_shm(name, 1280, true);
  forge_delegation_header(owner.data(), 1u << 31, 16, 1u << 27);
  Segment mine = Segment::attach_shm(name);
  REQUIRE_THROWS_WITH(DClient::connect(mine.bytes()), Contains("max_clients=2147483648"));
}

// Header fields beyond the caps, with a segment of exactly the declared size: the old
// check accepted them and the client sized its local arrays from them.
TEST_CASE("delegationrpc attach rejects header fields beyond the caps", "[shm][forged]") {
  SECTION("resp_depth") {
    Segment seg = Segment::create_process(256 + 8 * 64 + (size_t{1} << 17) * 64);
    forge_delegation_header(seg.data(), 1, 8, 1u << 17);
    REQUIRE_THROWS_WITH(DClient::connect(seg.bytes()), Contains("resp_depth=131072") && Contains("65536"));
  }
  SECTION("max_clients") {
    Segment seg = Segment::create_process(256 + 8 * 64 + (size_t{1} << 17) * 64);
    forge_delegation_header(seg.data(), 1u << 17, 8, 1);
    REQUIRE_THROWS_WITH(DClient::connect(seg.bytes()), Contains("max_clients=131072") && Contains("65536"));
  }
}

TEST_CASE("delegationrpc attach names the field when the header declares more than the segment holds",
          "[shm][forged]") {
  DSegment d({2, 8, 4});
  SECTION("response area") {
    store_le<uint32_t>(d.seg.data(), 12, 3);  // max_clients 2 -> 3
    REQUIRE_THROWS_WITH(DClient::connect(d.seg.bytes()),
                        Contains("max_clients=3") && Contains("beyond the segment of " + std::to_string(d.seg.size())));
  }
  SECTION("request slots") {
    store_le<uint32_t>(d.seg.data(), 16, 1024);  // ring_depth 8 -> 1024
    REQUIRE_THROWS_WITH(DClient::connect(d.seg.bytes()),
                        Contains("ring_depth=1024") &&
                            Contains("beyond the segment of " + std::to_string(d.seg.size())));
  }
}

TEST_CASE("delegationrpc layout refuses configs beyond the caps instead of wrapping", "[shm][forged]") {
  REQUIRE_THROWS_WITH(DLayout::segment_size(DelegationConfig{1u << 31, 16, 1u << 27}), Contains("max_clients"));
  REQUIRE_THROWS_WITH(DLayout::segment_size(DelegationConfig{1, 1u << 31, 1}), Contains("ring_depth"));
  REQUIRE_THROWS_WITH(DLayout::segment_size(DelegationConfig{1, 8, 1u << 31}), Contains("resp_depth"));
}

TEST_CASE("ipc attach rejects header fields beyond the caps", "[shm][forged]") {
  SECTION("depth") {
    Segment seg = Segment::create_process(128 + 64 + (size_t{1} << 17) * 128);
    forge_ipc_header(seg.data(), 1, 1u << 17);
    REQUIRE_THROWS_WITH(IClient::connect(seg.bytes()), Contains("depth 131072") && Contains("65536"));
  }
  SECTION("max_clients") {
    Segment seg = Segment::create_process(128 + (size_t{1} << 17) * (64 + 2 * 64));
    forge_ipc_header(seg.data(), 1u << 17, 1);
    REQUIRE_THROWS_WITH(IClient::connect(seg.bytes()), Contains("max_clients=131072") && Contains("65536"));
  }
  SECTION("declared size beyond the segment") {
    Segment seg = Segment::create_process(ILayout::segment_size(IpcConfig{2, 4}));
    forge_ipc_header(seg.data(), 3, 4);
    REQUIRE_THROWS_WITH(IClient::connect(seg.bytes()),
                        Contains("max_clients=3") && Contains("beyond the segment of " + std::to_string(seg.size())));
  }
}

TEST_CASE("ipc layout refuses configs whose size would overflow", "[shm][forged]") {
  REQUIRE_THROWS_WITH(ILayout::segment_size(IpcConfig{0xFFFFFFFFu, 1u << 30}), Contains("max_clients"));
}

TEST_CASE("flux refuses a node count beyond the cap before allocating", "[shm][forged]") {
  REQUIRE_THROWS_WITH((FluxNetwork<Req>(1u << 17)), Contains("num_nodes") && Contains("65536"));
}

// A forged tail beyond head: the client's pos - tail wrapped around and call() waited
// for ring space forever.
TEST_CASE("delegationrpc call with a forged tail beyond head returns instead of spinning", "[shm][forged]") {
  DSegment d({1, 8, 4});
  DClient c = DClient::connect(d.seg.bytes());
  store_le<uint64_t>(d.seg.data(), 192, 100);  // tail = 100 > head = 0
  const int rc = run_with_deadline([&] { return static_cast<int>(c.call(Req{}, 1).status); }, std::chrono::seconds(10));
  REQUIRE(rc >= 0);  // finished
  CHECK(rc == static_cast<int>(DelegationCallStatus::kRingCorrupted));
  // try_call must not report a full ring forever either (callers retry kFull); it
  // detects the forged tail before reserving a position.
  CHECK(c.try_call(Req{}, 2).status == DelegationCallStatus::kRingCorrupted);
  CHECK(load_le<uint64_t>(d.seg.data(), 128) == 0);  // head unchanged
  CHECK(c.in_flight() == 0);
}

// A request naming another client's response slot while that client awaits its own
// answer there: the server must not hand it out (the victim would receive the forged
// request's answer and its own would be refused as kSlotBusy).
TEST_CASE("delegationrpc server rejects an entry naming a response slot that already awaits a reply",
          "[shm][forged]") {
  DSegment d({2, 8, 2});
  DClient victim = DClient::connect(d.seg.bytes());
  DClient forger = DClient::connect(d.seg.bytes());
  REQUIRE(victim.call(Req{0, 0, 7, 70}, 7).resp_slot == 0);
  forge_entry(d.seg.data(), d.cfg.ring_depth, victim.client_id(), 0, Req{1, 0, 99, 990});
  REQUIRE(d.server.poll() == 2);
  std::vector<DelegationEntry<Req>> got;
  while (auto e = d.server.recv()) got.push_back(*e);
  d.server.advance_tail();
  REQUIRE(got.size() == 1);
  CHECK(got[0].payload.value == 70);
  // Replies in the "wrong" order: the forged one first, as a remote answer may overtake.
  for (auto it = got.rbegin(); it != got.rend(); ++it)
    d.server.reply(it->client_id, it->resp_slot_idx, Resp{it->payload.seq, it->payload.value + 1});
  const Polled polled = poll_answers(victim);
  REQUIRE(polled.answers == 1);
  CHECK(polled.token == 7);
  CHECK(polled.resp.value == 71);
  CHECK(victim.in_flight() == 0);
  CHECK(d.server.rejected(DelegationReject::kSlotAwaitingReply) == 1);
  CHECK(d.server.rejected_total() == 1);
  CHECK(forger.in_flight() == 0);
}

// Rule 4: the victim's response was written but not yet consumed when a forged entry
// naming that slot arrives. Accepting it would block the victim's next call on the
// slot (its request would find the forged one awaiting a reply).
TEST_CASE("delegationrpc server rejects an entry naming a slot that holds an unconsumed response",
          "[shm][forged]") {
  DSegment d({1, 8, 1});
  DClient victim = DClient::connect(d.seg.bytes());
  auto serve = [&] {
    d.server.poll();
    uint32_t n = 0;
    while (auto e = d.server.recv()) {
      REQUIRE(d.server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, e->payload.value + 1}) ==
              DelegationReplyStatus::kOk);
      ++n;
    }
    d.server.advance_tail();
    return n;
  };
  REQUIRE(victim.call(Req{0, 0, 1, 10}, 1).status == DelegationCallStatus::kOk);
  REQUIRE(serve() == 1);
  forge_entry(d.seg.data(), d.cfg.ring_depth, victim.client_id(), 0, Req{0, 0, 99, 990});
  CHECK(serve() == 0);
  CHECK(d.server.rejected(DelegationReject::kSlotHoldsResponse) == 1);
  std::vector<uint64_t> values;
  auto collect = [&](uint64_t, const Resp& r) { values.push_back(r.value); };
  REQUIRE(victim.poll(collect) == 1);
  REQUIRE(victim.call(Req{0, 0, 2, 20}, 2).status == DelegationCallStatus::kOk);
  REQUIRE(serve() == 1);
  REQUIRE(victim.poll(collect) == 1);
  CHECK(values == std::vector<uint64_t>{11, 21});
  CHECK(victim.stray_responses() == 0);
}

// A forged entry for an idle slot of the victim is answered into that slot (the
// server cannot tell who wrote an entry); the victim's next call on that slot must
// still get its own answer, not the stray one, and its request must not be refused.
TEST_CASE("delegationrpc client discards a stray response left in an idle slot", "[shm][forged]") {
  DSegment d({2, 8, 1});
  DClient victim = DClient::connect(d.seg.bytes());
  forge_entry(d.seg.data(), d.cfg.ring_depth, victim.client_id(), 0, Req{1, 0, 99, 990});
  REQUIRE(d.server.poll() == 1);
  auto f = d.server.recv();
  REQUIRE(f.has_value());
  d.server.advance_tail();
  REQUIRE(d.server.reply(f->client_id, f->resp_slot_idx, Resp{99, 991}) == DelegationReplyStatus::kOk);
  // The victim, not awaiting anything, calls on its only slot.
  REQUIRE(victim.call(Req{0, 0, 5, 50}, 5).status == DelegationCallStatus::kOk);
  CHECK(victim.poll([](uint64_t, const Resp&) { FAIL("the stray response was delivered"); }) == 0);
  REQUIRE(d.server.poll() == 1);
  auto e = d.server.recv();
  REQUIRE(e.has_value());
  CHECK(e->payload.value == 50);
  REQUIRE(d.server.reply(e->client_id, e->resp_slot_idx, Resp{5, 51}) == DelegationReplyStatus::kOk);
  const Polled polled = poll_answers(victim);
  REQUIRE(polled.answers == 1);
  CHECK(polled.token == 5);
  CHECK(polled.resp.value == 51);
  CHECK(victim.stray_responses() == 1);
  CHECK(d.server.rejected_total() == 0);
}

// A victim whose server keeps reply hints and who uses them (the simulator's clients).
struct HintedVictim {
  DSegment d{{2, 8, 2}};
  DClient victim = DClient::connect(d.seg.bytes());
  uint64_t* hints = nullptr;
  HintedVictim() {
    d.server.keep_reply_hints();
    hints = d.server.reply_hints(victim.client_id());
    victim.use_reply_hints(hints);
  }
  // The server takes the one entry in the ring and answers it with `value`.
  void answer_one(uint64_t value) {
    REQUIRE(d.server.poll() == 1);
    const auto e = d.server.recv();
    REQUIRE(e.has_value());
    d.server.advance_tail();
    REQUIRE(d.server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, value}) == DelegationReplyStatus::kOk);
  }
  // The values of the answers a hinted poll ends calls with.
  std::vector<uint64_t> poll_values() {
    std::vector<uint64_t> values;
    victim.poll_hinted([&](uint64_t, const Resp& r) { values.push_back(r.value); }, [](uint64_t) {});
    return values;
  }
  uint8_t* next_slot_valid_byte() const {
    return static_cast<uint8_t*>(const_cast<void*>(victim.next_call_lines().response_slot));
  }
};

// The same with reply hints: the stray answer, written by reply(), has its slot's bit,
// so the slot is read and cleared at its reuse as without hints; a slot without its bit
// is not read there (a response written around reply(), which breaks the hints'
// contract, is left where it is).
TEST_CASE("delegationrpc client with reply hints discards a stray response reply() wrote, reads no slot without a bit",
          "[shm][forged]") {
  HintedVictim h;
  forge_entry(h.d.seg.data(), h.d.cfg.ring_depth, h.victim.client_id(), 0, Req{1, 0, 99, 990});
  h.answer_one(991);
  CHECK(*h.hints == 0b01);
  REQUIRE(h.victim.call(Req{0, 0, 5, 50}, 5).resp_slot == 0);
  CHECK(h.victim.stray_responses() == 1);
  CHECK(*h.hints == 0b01);  // the bit stays (a stale bit hides nothing); the slot holds nothing
  h.answer_one(51);
  CHECK(h.poll_values() == std::vector<uint64_t>{51});
  CHECK(h.d.server.rejected_total() == 0);
#ifdef NDEBUG
  // Slot 1, never answered, no bit: a valid byte set around reply() is not read at the
  // slot's reuse (with assertions on, the skip asserts the slot is empty and aborts).
  uint8_t* slot1 = h.next_slot_valid_byte();
  *slot1 = 1;
  REQUIRE(h.victim.call(Req{0, 0, 6, 60}, 6).resp_slot == 1);
  CHECK(h.victim.stray_responses() == 1);
  CHECK(*slot1 == 1);
#endif
}

// Rule 4 with reply hints kept (the simulator's server): an entry naming a slot whose
// response reply() wrote and the client has not read (its bit set) is refused as
// without hints; the slot of a bit the client's read cleared is not read (a valid byte
// set around reply(), which breaks the hints' contract, is not seen).
TEST_CASE("delegationrpc server with reply hints refuses an entry for a slot holding a response, reads no slot without a bit",
          "[shm][forged]") {
  HintedVictim h;
  uint8_t* slot0 = h.next_slot_valid_byte();
  REQUIRE(h.victim.call(Req{0, 0, 1, 10}, 1).resp_slot == 0);
  h.answer_one(11);
  CHECK(*h.hints == 0b01);
  // Unread response in slot 0, bit set: a forged entry naming it is refused.
  forge_entry(h.d.seg.data(), h.d.cfg.ring_depth, h.victim.client_id(), 0, Req{0, 0, 99, 990});
  REQUIRE(h.d.server.poll() == 1);
  CHECK_FALSE(h.d.server.recv().has_value());
  h.d.server.advance_tail();
  CHECK(h.d.server.rejected(DelegationReject::kSlotHoldsResponse) == 1);
  CHECK(h.poll_values() == std::vector<uint64_t>{11});
  CHECK(*h.hints == 0);
#ifdef NDEBUG
  // Read, bit cleared: a valid byte set around reply() is not read when an entry names
  // the slot (with assertions on, the skip asserts the slot is empty and aborts).
  *slot0 = 1;
  forge_entry(h.d.seg.data(), h.d.cfg.ring_depth, h.victim.client_id(), 0, Req{0, 0, 98, 980});
  REQUIRE(h.d.server.poll() == 1);
  CHECK(h.d.server.recv().has_value());
  CHECK(h.d.server.rejected(DelegationReject::kSlotHoldsResponse) == 1);
#else
  (void)slot0;
#endif
}

// Call tags: a forged entry naming the victim's (client, slot) reaches the server before
// the victim's own request on that slot, so the server accepts the forged one and
// refuses the victim's (rule 3). Without the tags the victim took the forged request's
// answer for its own; with them its call ends failed, once, and its next call on the
// slot gets its own answer.
TEST_CASE("delegationrpc client fails a call whose slot received another call's answer (forged client_id)",
          "[shm][forged]") {
  DSegment d({2, 8, 1});
  DClient victim = DClient::connect(d.seg.bytes(), 0x1234u);
  DClient other = DClient::connect(d.seg.bytes(), 0x5678u);  // the forger: a registered client
  auto serve = [&] {
    d.server.poll();
    std::vector<DelegationEntry<Req>> got;
    while (auto e = d.server.recv()) got.push_back(*e);
    d.server.advance_tail();
    for (const auto& e : got)
      REQUIRE(d.server.reply(e.client_id, e.resp_slot_idx, Resp{e.payload.seq, e.payload.value + 1}) ==
              DelegationReplyStatus::kOk);
    return got.size();
  };
  forge_entry(d.seg.data(), d.cfg.ring_depth, victim.client_id(), 0, Req{1, 0, 98, 980}, 0xDEADBEEFu);
  REQUIRE(victim.call(Req{0, 0, 6, 60}, 6).status == DelegationCallStatus::kOk);
  REQUIRE(victim.call_tag(0) != 0xDEADBEEFu);
  CHECK(serve() == 1);
  CHECK(d.server.rejected(DelegationReject::kSlotAwaitingReply) == 1);
  std::vector<uint64_t> answered, failed;
  auto on_answer = [&](uint64_t t, const Resp&) { answered.push_back(t); };
  auto on_failed = [&](uint64_t t) { failed.push_back(t); };
  REQUIRE(victim.poll(on_answer, on_failed) == 1);
  CHECK(answered.empty());
  CHECK(failed == std::vector<uint64_t>{6});
  CHECK(victim.in_flight() == 0);
  CHECK(victim.mismatched_responses() == 1);
  CHECK(victim.poll(on_answer, on_failed) == 0);  // ended once
  // The slot works again: the next call gets its own answer.
  REQUIRE(victim.call(Req{0, 0, 7, 70}, 7).status == DelegationCallStatus::kOk);
  CHECK(serve() == 1);
  const Polled polled = poll_answers(victim, on_failed);
  REQUIRE(polled.answers == 1);
  CHECK(polled.token == 7);
  CHECK(polled.resp.value == 71);
  CHECK(failed.size() == 1);
  CHECK(other.in_flight() == 0);
}

// A response written straight into an awaited slot (valid set, no request behind it)
// carries no tag of the victim's call: the call fails instead of taking it.
TEST_CASE("delegationrpc client fails a call on a response forged into its slot", "[shm][forged]") {
  DSegment d({1, 8, 2});
  DClient victim = DClient::connect(d.seg.bytes(), 77u);
  const auto r = victim.call(Req{0, 0, 1, 10}, 1);
  REQUIRE(r.status == DelegationCallStatus::kOk);
  const size_t resp_area = DLayout::resp_area_offset(d.cfg.ring_depth);
  const size_t off = resp_area + r.resp_slot * DLayout::kRespSlotSize;
  store_le<uint32_t>(d.seg.data(), off + 4, victim.call_tag(r.resp_slot) + 1);
  const Resp forged{1, 555};
  std::memcpy(d.seg.data() + off + 8, &forged, sizeof forged);
  store_le<uint8_t>(d.seg.data(), off, 1);  // valid
  uint64_t failed = 0;
  CHECK(victim.poll([](uint64_t, const Resp&) { FAIL("a forged response was delivered"); },
                    [&](uint64_t t) { failed = t; }) == 1);
  CHECK(failed == 1);
  CHECK(victim.mismatched_responses() == 1);
}

// An entry naming a client id that never registered (below max_clients) is rejected:
// its answer would sit in a slot that a later client inherits.
TEST_CASE("delegationrpc server rejects an entry from an unregistered client id", "[shm][forged]") {
  DSegment d({4, 8, 2});
  DClient c = DClient::connect(d.seg.bytes());
  forge_entry(d.seg.data(), d.cfg.ring_depth, 3, 0, Req{});
  REQUIRE(c.call(Req{0, 0, 1, 10}, 1).status == DelegationCallStatus::kOk);
  REQUIRE(d.server.poll() == 2);
  auto e = d.server.recv();
  REQUIRE(e.has_value());
  CHECK(e->client_id == c.client_id());
  CHECK_FALSE(d.server.recv().has_value());
  CHECK(d.server.rejected(DelegationReject::kUnregisteredClient) == 1);
  CHECK(d.server.cursor() == 2);
}

// Property: with forged entries naming random (client, slot) pairs mixed into the ring,
// every legitimate call still ends exactly once (no client waits forever), never with
// another request's answer (call tags), failed only when a forged entry was accepted.
TEST_CASE("delegationrpc random forged entries: every call ends exactly once, with its own answer or failed",
          "[shm][forged]") {
  DSegment d({4, 8, 2});
  std::vector<DClient> clients;
  for (uint32_t i = 0; i < 3; ++i) clients.push_back(DClient::connect(d.seg.bytes(), 100 + i));  // id 3 never registers
  bkv::Rng rng(bkv::derive_seed(7, {11}));
  std::vector<uint64_t> calls(3, 0), answers(3, 0);
  uint64_t failed = 0;
  uint64_t wrong = 0, forged = 0, accepted = 0, accepted_forged = 0;
  std::vector<DelegationEntry<Req>> held;
  auto drained = [&] { return held.empty() && d.server.cursor() == load_le<uint64_t>(d.seg.data(), 128); };
  // Client i collects its answers: each its own (else `wrong`), or its call failed.
  auto poll_client = [&](uint32_t i) {
    clients[i].poll(
        [&](uint64_t token, const Resp& r) {
          ++answers[i];
          if (r.seq != token || r.value != token * 2 + 1) ++wrong;
        },
        [&](uint64_t) {
          ++answers[i];
          ++failed;
        });
  };
  for (int step = 0; step < 20000 || !drained(); ++step) {
    const uint64_t op = step < 20000 ? rng.below(10) : 5;
    if (op < 3) {
      const uint32_t i = static_cast<uint32_t>(rng.below(3));
      const uint64_t seq = calls[i];
      if (clients[i].try_call(Req{i, 0, seq, seq * 2}, seq).status == DelegationCallStatus::kOk) ++calls[i];
    } else if (op < 4) {
      const uint64_t head = load_le<uint64_t>(d.seg.data(), 128), tail = load_le<uint64_t>(d.seg.data(), 192);
      if (head - tail < d.cfg.ring_depth) {  // a forger that respects ring space (else it overwrites entries)
        forge_entry(d.seg.data(), d.cfg.ring_depth, static_cast<uint32_t>(rng.below(5)),
                    static_cast<uint32_t>(rng.below(3)), Req{0xF0F0u, 0, ~uint64_t{0}, 0});
        ++forged;
      }
    } else if (op < 6) {
      d.server.poll();
      while (auto e = d.server.recv()) {
        held.push_back(*e);
        ++accepted;
        if (e->payload.client == 0xF0F0u) ++accepted_forged;
      }
      d.server.advance_tail();
      if (!held.empty()) {
        const size_t k = rng.below(held.size());  // reply in random order
        const auto e = held[k];
        held.erase(held.begin() + static_cast<long>(k));
        REQUIRE(d.server.reply(e.client_id, e.resp_slot_idx, Resp{e.payload.seq, e.payload.value + 1}) ==
                DelegationReplyStatus::kOk);
      }
    } else {
      poll_client(static_cast<uint32_t>(rng.below(3)));
    }
  }
  uint64_t legit_calls = 0;
  for (uint32_t i = 0; i < 3; ++i) {
    poll_client(i);
    CHECK(clients[i].in_flight() == 0);
    CHECK(answers[i] == calls[i]);
    legit_calls += calls[i];
  }
  CHECK(forged > 1000);
  CHECK(accepted_forged > 0);
  CHECK(d.server.rejected_total() > 0);
  CHECK(accepted + d.server.rejected_total() == legit_calls + forged);
  // No call takes a forged request's answer; a call fails only on the answer of an
  // accepted forged request.
  CHECK(wrong == 0);
  CHECK(failed > 0);
  CHECK(failed <= accepted_forged);
  uint64_t mismatched = 0;
  for (const DClient& c : clients) mismatched += c.mismatched_responses();
  CHECK(mismatched == failed);
  INFO("forged " << forged << ", accepted forged " << accepted_forged << ", rejected " << d.server.rejected_total()
                 << ", wrong answers " << wrong << ", failed " << failed << ", stray discarded "
                 << clients[0].stray_responses() + clients[1].stray_responses() + clients[2].stray_responses());
}

// A server that stopped (or died without clearing server_alive) never moves tail: a
// client waiting for ring space used to spin forever.
TEST_CASE("delegationrpc call on a full ring whose server makes no progress gives up after its wait limit",
          "[shm][forged][faults]") {
  DSegment d({1, 1, 4});  // alive, but never polled
  DClient c = DClient::connect(d.seg.bytes());
  c.set_wait_limit(std::chrono::milliseconds(50));
  REQUIRE(c.call(Req{}, 1).status == DelegationCallStatus::kOk);  // fills the one-slot ring
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = run_with_deadline([&] { return static_cast<int>(c.call(Req{}, 2).status); }, std::chrono::seconds(10));
  const auto waited = std::chrono::steady_clock::now() - t0;
  REQUIRE(rc >= 0);  // finished
  CHECK(rc == static_cast<int>(DelegationCallStatus::kServerUnresponsive));
  CHECK(waited >= std::chrono::milliseconds(50));
  CHECK(c.in_flight() == 1);  // only the first call is awaited (the run above was a child process)
}

// Client records and claim words are shared memory too: a forged pid or position may
// keep a hole or end a live client's waiting call, never crash, index outside the
// records, or make the server skip a committed entry.
TEST_CASE("delegationrpc forged client records: pids <= 0 keep a hole and a committed entry is never skipped",
          "[shm][forged]") {
  DSegment d({2, 4, 4}, /*hole_limit=*/std::chrono::nanoseconds(0));
  std::byte* base = d.seg.data();
  DClient c = DClient::connect(d.seg.bytes(), 1);  // client 0
  const size_t rec0 = DLayout::records_offset(d.cfg);
  auto serve = [&](int rounds) {
    uint32_t n = 0;
    for (int i = 0; i < rounds; ++i) {
      d.server.poll();
      while (auto e = d.server.recv()) {
        ++n;
        REQUIRE(d.server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, 0}) == DelegationReplyStatus::kOk);
      }
      d.server.advance_tail();
    }
    return n;
  };
  // Position 0 reserved by nobody's call (a raw head bump), named by client 0's record
  // with pids that name no single process, and by a record beyond max_clients.
  store_le<uint64_t>(base, 128, 1);
  store_le<uint32_t>(base, 24, 0xFFFFFFFFu);  // next_client_id: the scan stays within max_clients
  for (const int32_t pid : {0, -1, INT32_MIN}) {
    store_le<int32_t>(base, rec0, pid);
    store_le<uint64_t>(base, rec0 + 8, 2);  // waiting on position 0
    const uint64_t checks = d.server.hole_checks();
    CHECK(serve(4 * static_cast<int>(DServer::kHoleSightingsPerClockRead)) == 0);
    CHECK(d.server.hole_checks() > checks);
    CHECK(d.server.skipped_total() == 0);
    CHECK(d.server.cursor() == 0);
  }
  // A pid of no process, and position 0's claim word forged "abandoned", while an entry
  // is committed there: the server reads the entry, the records are not looked at.
  const pid_t gone = ::fork();
  REQUIRE(gone >= 0);
  if (gone == 0) ::_exit(0);
  REQUIRE(::waitpid(gone, nullptr, 0) == gone);
  store_le<int32_t>(base, rec0, static_cast<int32_t>(gone));
  store_le<uint64_t>(base, 256 + 16, 3);
  store_le<uint32_t>(base, 24, 1);
  store_le<uint32_t>(base, 256 + 4, 0);   // client 0
  store_le<uint32_t>(base, 256 + 8, 0);   // response slot 0
  store_le<uint8_t>(base, 256, 1);        // committed
  CHECK(serve(1) == 1);
  CHECK(d.server.skipped_total() == 0);
  CHECK(d.server.cursor() == 1);
  // The same record now names position 1, a hole: the gone pid makes the server skip it
  // (a call of client 0 that had reserved it would lose its claim and write nothing).
  store_le<uint64_t>(base, 128, 2);
  store_le<uint64_t>(base, rec0 + 8, 4);
  CHECK(serve(4 * static_cast<int>(DServer::kHoleSightingsPerClockRead)) == 0);
  CHECK(d.server.skipped(DelegationSkip::kReserverGone) == 1);
  CHECK(d.server.cursor() == 2);
  CHECK(load_le<uint64_t>(base, 256 + 64 + 16) == (4 | 1));  // position 1's claim word: abandoned
}

// A call that gave its position up must keep it named in its record until the server
// has really passed it (only then does the server no longer need the record): a tail
// forged beyond the position must not let the client's next call overwrite the record,
// or the server, once it reaches the position, finds nobody naming it and stays there.
TEST_CASE("delegationrpc forged tail: a given-up position stays named until the server has passed it",
          "[shm][forged]") {
  DSegment d({2, 2, 4}, /*hole_limit=*/std::chrono::nanoseconds(0));
  std::byte* base = d.seg.data();
  DClient a = DClient::connect(d.seg.bytes(), 1);  // client 0
  DClient b = DClient::connect(d.seg.bytes(), 2);  // client 1
  const size_t rec_b = DLayout::records_offset(d.cfg) + 64;
  REQUIRE(a.call(Req{0, 0, 0, 0}, 0).status == DelegationCallStatus::kOk);  // positions 0 and 1 fill the ring
  REQUIRE(a.call(Req{0, 0, 1, 1}, 1).status == DelegationCallStatus::kOk);
  b.set_wait_limit(std::chrono::milliseconds(20));
  store_le<uint64_t>(base, 192, 10);  // tail forged beyond head
  // Position 2: the tail beyond it was not the server's (position 2 is not marked abandoned).
  REQUIRE(b.call(Req{1, 0, 2, 2}, 2).status == DelegationCallStatus::kRingCorrupted);
  CHECK(load_le<uint64_t>(base, rec_b + 8) == (6 | 1));  // names position 2, given up
  // The forged tail is still there: b's next call reserves nothing, its record stays.
  CHECK(b.try_call(Req{1, 0, 3, 3}, 3).status == DelegationCallStatus::kFull);
  CHECK(b.call(Req{1, 0, 3, 3}, 3).status == DelegationCallStatus::kServerUnresponsive);
  CHECK(load_le<uint64_t>(base, 128) == 3);  // head: only position 2 was reserved
  CHECK(load_le<uint64_t>(base, rec_b + 8) == (6 | 1));
  // The server (its tail store replaces the forged one) serves positions 0 and 1 and
  // skips position 2, which b gave up.
  std::vector<uint64_t> answered;
  auto got = [&](uint64_t tok, const Resp&) { answered.push_back(tok); };
  for (uint32_t i = 0; i < 4 * DServer::kHoleSightingsPerClockRead; ++i) {
    d.server.snapshot_head();
    while (auto e = d.server.recv())
      REQUIRE(d.server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, 0}) == DelegationReplyStatus::kOk);
    d.server.advance_tail();
    a.poll(got);
  }
  CHECK(answered == std::vector<uint64_t>{0, 1});
  CHECK(d.server.skipped(DelegationSkip::kReserverGaveUp) == 1);
  CHECK(d.server.cursor() == 3);
  // Passed for real: b calls again (position 3) and is answered.
  REQUIRE(b.call(Req{1, 0, 4, 4}, 4).status == DelegationCallStatus::kOk);
  d.server.snapshot_head();
  while (auto e = d.server.recv())
    REQUIRE(d.server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, 0}) == DelegationReplyStatus::kOk);
  d.server.advance_tail();
  b.poll(got);
  CHECK(answered == std::vector<uint64_t>{0, 1, 4});
}

// A writer that raises head without reserving through a client (head forged up by the
// ring depth) leaves holes no client record names: the ring stays full, every try_call
// returns kFull. The server skips such a hole at its kDelegationUnnamedHoleLooks-th look
// in a row, with the unnamed positions reserved behind it when it was met, by winning
// each claim word; a live late writer of a skipped position then writes nothing.
namespace {
struct ForgedHeadRig {
  DelegationConfig cfg{2, 8, 4};
  Segment seg = Segment::create_process(DLayout::segment_size(cfg));
  DServer server{seg.bytes(), cfg};
  std::vector<uint64_t> answered;
  ForgedHeadRig() { server.set_hole_limit(std::chrono::nanoseconds(0)); }
  std::byte* base() { return seg.data(); }
  uint64_t head() { return load_le<uint64_t>(base(), 128); }
  uint64_t tail() { return load_le<uint64_t>(base(), 192); }
  uint64_t claim(uint64_t pos) { return load_le<uint64_t>(base(), 256 + (pos & (cfg.ring_depth - 1)) * 64 + 16); }
  // One server round: every entry it can read answered, then the tail advanced.
  void round() {
    server.snapshot_head();
    while (auto e = server.recv())
      if (server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, 0}) != DelegationReplyStatus::kOk)
        FAIL("reply refused");
    server.advance_tail();
  }
  // Rounds until the server has looked at the hole once more (or skipped something).
  void until_next_look() {
    const uint64_t looks = server.hole_checks(), skipped = server.skipped_total();
    for (uint32_t i = 0; i < 8 * DServer::kHoleSightingsPerClockRead; ++i) {
      round();
      if (server.hole_checks() > looks || server.skipped_total() > skipped) return;
    }
    FAIL("the server never looked at the hole");
  }
};
}  // namespace

TEST_CASE("delegationrpc forged head raised by the ring depth: the unnamed holes are skipped and the ring works again",
          "[shm][forged]") {
  ForgedHeadRig r;
  DClient a = DClient::connect(r.seg.bytes(), 1);
  auto got = [&](uint64_t tok, const Resp&) { r.answered.push_back(tok); };
  REQUIRE(a.call(Req{0, 0, 0, 0}, 0).status == DelegationCallStatus::kOk);  // position 0
  r.round();
  a.poll(got);
  REQUIRE(r.answered == std::vector<uint64_t>{0});
  store_le<uint64_t>(r.base(), 128, r.head() + r.cfg.ring_depth);  // positions 1..8: nobody's
  CHECK(a.try_call(Req{0, 0, 1, 1}, 1).status == DelegationCallStatus::kFull);
  // Three looks find nobody naming position 1: it stays.
  for (uint32_t look = 1; look < kDelegationUnnamedHoleLooks; ++look) {
    r.until_next_look();
    CHECK(r.server.skipped_total() == 0);
    CHECK(r.server.cursor() == 1);
  }
  // The fourth: position 1 and the 7 unnamed ones behind it are skipped, each marked
  // abandoned in its claim word.
  r.until_next_look();
  CHECK(r.server.hole_checks() == kDelegationUnnamedHoleLooks);
  CHECK(r.server.skipped(DelegationSkip::kUnnamed) == r.cfg.ring_depth);
  CHECK(r.server.skipped_total() == r.cfg.ring_depth);
  CHECK(r.server.cursor() == 9);
  CHECK(r.tail() == 9);
  for (uint64_t p = 1; p <= 8; ++p) CHECK(r.claim(p) == (delegation_position_name(p) | kDelegationAbandonedMark));
  // The ring works again.
  REQUIRE(a.try_call(Req{0, 0, 1, 1}, 1).status == DelegationCallStatus::kOk);  // position 9
  r.round();
  a.poll(got);
  CHECK(r.answered == std::vector<uint64_t>{0, 1});
}

TEST_CASE("delegationrpc: a live late writer of a skipped unnamed position writes nothing", "[shm][forged]") {
  ForgedHeadRig r;
  DClient a = DClient::connect(r.seg.bytes(), 1);
  store_le<uint64_t>(r.base(), 128, 3);  // positions 0..2 reserved, nobody names them
  for (uint32_t look = 0; look < kDelegationUnnamedHoleLooks; ++look) r.until_next_look();
  REQUIRE(r.server.skipped(DelegationSkip::kUnnamed) == 3);
  REQUIRE(r.server.cursor() == 3);
  // The reserver of position 1 was only slow (stopped between head.fetch_add and its
  // claim): it goes on now. Played by a real call whose fetch_add returns 1.
  store_le<uint64_t>(r.base(), 128, 1);
  CHECK(a.call(Req{0, 0, 5, 5}, 5).status == DelegationCallStatus::kAbandoned);
  CHECK(load_le<uint8_t>(r.base(), 256 + 64) == 0);           // position 1's slot: not committed
  CHECK(load_le<uint64_t>(r.base(), 256 + 64 + 24 + 8) == 0);  // nor written
  CHECK(r.claim(1) == (delegation_position_name(1) | kDelegationAbandonedMark));
  CHECK(a.in_flight() == 0);
  store_le<uint64_t>(r.base(), 128, 3);  // head as it was
  // The server passed position 1 for real (tail beyond it, its claim word marked): the
  // client calls again at position 3 and is answered.
  REQUIRE(a.call(Req{0, 0, 6, 6}, 6).status == DelegationCallStatus::kOk);
  r.round();
  CHECK(a.poll([&](uint64_t tok, const Resp&) { r.answered.push_back(tok); }) == 1);
  CHECK(r.answered == std::vector<uint64_t>{6});
}

TEST_CASE("delegationrpc: an unnamed hole its writer claims is never skipped", "[shm][forged]") {
  ForgedHeadRig r;
  store_le<uint64_t>(r.base(), 128, 1);  // position 0 reserved, unnamed...
  r.until_next_look();
  store_le<uint64_t>(r.base(), 256 + 16, delegation_position_name(0));  // ...and claimed by its writer
  for (uint32_t look = 0; look < 2 * kDelegationUnnamedHoleLooks; ++look) r.until_next_look();
  CHECK(r.server.skipped_total() == 0);
  CHECK(r.server.cursor() == 0);
  // It commits: the entry is read (client id 0 never registered: rejected, but read).
  store_le<uint8_t>(r.base(), 256, 1);
  r.round();
  CHECK(r.server.cursor() == 1);
  CHECK(r.server.rejected(DelegationReject::kUnregisteredClient) == 1);
}

TEST_CASE("delegationrpc: the run of unnamed positions skipped with a hole ends at a committed one and at the head "
          "seen when the hole was met", "[shm][forged]") {
  ForgedHeadRig r;
  DClient a = DClient::connect(r.seg.bytes(), 1);
  SECTION("the head seen when the hole was met") {
    store_le<uint64_t>(r.base(), 128, 2);  // positions 0 and 1, nobody's
    r.until_next_look();                   // the server met the hole at 0 with head 2...
    store_le<uint64_t>(r.base(), 128, 3);  // ...position 2 is reserved after that
    for (uint32_t look = 1; look < kDelegationUnnamedHoleLooks; ++look) r.until_next_look();
    CHECK(r.server.skipped(DelegationSkip::kUnnamed) == 2);
    CHECK(r.server.cursor() == 2);
    CHECK(r.claim(2) == 0);
    r.round();
    CHECK(r.server.cursor() == 2);  // a hole of its own now
    CHECK(r.server.skipped(DelegationSkip::kUnnamed) == 2);
    return;
  }
  store_le<uint64_t>(r.base(), 128, 4);  // positions 0..3, nobody's
  // A forged entry committed at position 2 (naming client 0, slot 0).
  store_le<uint32_t>(r.base(), 256 + 2 * 64 + 4, 0);
  store_le<uint32_t>(r.base(), 256 + 2 * 64 + 8, 0);
  store_le<uint8_t>(r.base(), 256 + 2 * 64, 1);
  r.until_next_look();  // the server met the hole at 0 with head 4...
  store_le<uint64_t>(r.base(), 128, 5);  // ...position 4 is reserved after that
  for (uint32_t look = 1; look < kDelegationUnnamedHoleLooks; ++look) r.until_next_look();
  // Positions 0 and 1 skipped; the committed position 2 is read in the next round, and
  // position 3 is a new hole: it needs looks of its own, as does position 4.
  CHECK(r.server.skipped(DelegationSkip::kUnnamed) == 2);
  CHECK(r.server.cursor() == 2);
  r.round();
  CHECK(r.server.cursor() == 3);
  CHECK(r.claim(2) == 0);  // the committed entry's claim word was not touched
  for (uint32_t look = 1; look < kDelegationUnnamedHoleLooks; ++look) {
    r.until_next_look();
    CHECK(r.server.cursor() == 3);
  }
  r.until_next_look();
  // Position 3 skipped with the run up to the head seen when the server met it (5).
  CHECK(r.server.skipped(DelegationSkip::kUnnamed) == 4);
  CHECK(r.server.cursor() == 5);
  (void)a;
}

// Bounds checks at their exact boundary.
TEST_CASE("delegationrpc server rejects an entry naming exactly the next client id to register", "[shm][forged]") {
  DSegment d({4, 8, 2});
  DClient c0 = DClient::connect(d.seg.bytes(), 1);
  DClient c1 = DClient::connect(d.seg.bytes(), 2);  // next_client_id is 2 now
  REQUIRE(load_le<uint32_t>(d.seg.data(), 24) == 2);
  REQUIRE(c1.call(Req{1, 0, 1, 10}, 1).status == DelegationCallStatus::kOk);  // the server learns of id 1
  forge_entry(d.seg.data(), d.cfg.ring_depth, 2, 0, Req{});                        // id 2: not registered
  forge_entry(d.seg.data(), d.cfg.ring_depth, 1, 1, Req{});                        // id 1, another slot: fine
  REQUIRE(d.server.poll() == 3);
  auto e = d.server.recv();
  REQUIRE(e.has_value());
  CHECK(e->client_id == 1);
  auto f = d.server.recv();
  REQUIRE(f.has_value());
  CHECK(f->client_id == 1);
  CHECK(f->resp_slot_idx == 1);
  CHECK_FALSE(d.server.recv().has_value());
  CHECK(d.server.rejected(DelegationReject::kUnregisteredClient) == 1);
  CHECK(d.server.rejected_total() == 1);
  // Registered now: the same id is accepted.
  DClient c2 = DClient::connect(d.seg.bytes(), 3);
  forge_entry(d.seg.data(), d.cfg.ring_depth, 2, 0, Req{});
  d.server.poll();
  auto g = d.server.recv();
  REQUIRE(g.has_value());
  CHECK(g->client_id == 2);
  (void)c0;
}

TEST_CASE("delegationrpc poll counts at most ring_depth entries past the cursor whatever head says", "[shm][forged]") {
  DSegment d({1, 8, 2});
  std::byte* base = d.seg.data();
  for (uint32_t i = 0; i < d.cfg.ring_depth; ++i) store_le<uint8_t>(base, 256 + i * 64, 1);  // every slot committed
  for (const uint64_t head : {uint64_t{7}, uint64_t{8}, uint64_t{9}, uint64_t{3 * 8}, ~uint64_t{0}}) {
    CAPTURE(head);
    store_le<uint64_t>(base, 128, head);
    CHECK(d.server.poll() == std::min<uint64_t>(head, d.cfg.ring_depth));
  }
  // With the cursor moved on, the bound moves with it.
  store_le<uint64_t>(base, 128, 3);
  d.server.poll();
  for (int i = 0; i < 3; ++i) REQUIRE(d.server.recv().has_value() == false);  // client id 0 unregistered: rejected
  CHECK(d.server.cursor() == 3);
  for (uint32_t i = 0; i < d.cfg.ring_depth; ++i) store_le<uint8_t>(base, 256 + i * 64, 1);
  store_le<uint64_t>(base, 128, 100);
  CHECK(d.server.poll() == d.cfg.ring_depth);
}
