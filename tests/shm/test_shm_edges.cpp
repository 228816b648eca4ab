// Shared-memory channel edge cases: the lap stamp of a StampedRing wrapping past 2^32
// laps, and an ipc client that dies in the middle of publishing a request (what the
// server sees, and that the other clients are not disturbed).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/shm/ipc.hpp"
#include "core/shm/segment.hpp"
#include "core/shm/stamped_ring.hpp"
#include "tests/shm/shm_test_util.hpp"

using namespace bkv::shm;
using shmtest::Req;
using shmtest::Resp;

TEST_CASE("stamped ring: slots are reused correctly across the wrap of the 32-bit lap stamp", "[shm][edges]") {
  constexpr uint32_t kDepth = 4;
  alignas(64) std::byte mem[StampedRing<Resp>::bytes(kDepth)] = {};
  StampedRing<Resp> ring(mem, kDepth);
  // Start three laps before the stamp wraps to 0 (lap 2^32 - 1 has stamp 0), so every
  // slot holds an earlier lap's stamp (0xFFFFFFFE, then 0xFFFFFFFF) when the stamp 0
  // comes round: a never-written slot also holds 0, the one case the stamp rule leaves
  // out (stamped_ring.hpp), and a real ring has written every slot 2^32 laps before.
  const uint64_t start = (uint64_t{0xFFFF'FFFF} - 2) * kDepth;
  REQUIRE(lap_stamp(start, 2) == 0xFFFF'FFFEu);
  REQUIRE(lap_stamp(start + 2 * kDepth, 2) == 0u);
  uint64_t produced = start, consumed = start;
  for (uint64_t n = 0; n < 4 * kDepth; ++n) {
    // Before it is published, position `produced` must not look ready: its slot holds
    // the previous lap's stamp (at the wrap: 0xFFFFFFFF, not the new stamp 0).
    INFO("position " << produced << " lap stamp " << lap_stamp(produced, 2));
    CHECK_FALSE(ring.ready(produced));
    ring.publish(produced, static_cast<uint32_t>(n), Resp{produced, n});
    ++produced;
    CHECK(ring.ready(consumed));
    uint32_t tag = 0;
    Resp r{};
    ring.read(consumed, tag, r);
    CHECK(tag == n);
    CHECK(r.seq == consumed);
    CHECK(r.value == n);
    ++consumed;
    // A slot a full lap ahead of the consumer is never ready (it holds this lap's stamp).
    CHECK_FALSE(ring.ready(consumed + kDepth));
  }
  CHECK(produced == start + 4 * kDepth);  // through lap 2^32 - 1 (stamp 0) and lap 2^32 (stamp 1)
}

TEST_CASE("ipc: a client that dies mid-publish leaves nothing the server reads, and the others go on",
          "[shm][edges]") {
  using Layout = IpcLayout<Req, Resp>;
  const IpcConfig cfg{2, 4};
  Segment seg = Segment::create_process(Layout::segment_size(cfg));
  IpcServer<Req, Resp> server(seg.bytes(), cfg);
  auto dead = IpcClient<Req, Resp>::connect(seg.bytes(), 0);
  auto live = IpcClient<Req, Resp>::connect(seg.bytes(), 1);
  // One request of the dying client goes through.
  REQUIRE(dead.call(Req{0, 0, 1, 10}, 100) == IpcCallStatus::kOk);
  REQUIRE(server.poll() == 1);
  auto r = server.recv();
  REQUIRE(r.has_value());
  CHECK(r->payload.value == 10);
  // The next: tag and payload written, the stamp not (the client died between the two).
  // Position 1, slot 1 of client 0's request ring.
  const size_t req_slot = 128 + 64 + 1 * Layout::kReqSlotSize;
  std::byte* base = seg.data();
  shmtest::store_le<uint32_t>(base, req_slot + 4, 1);  // tag
  const Req half{0, 0, 2, 20};
  std::memcpy(base + req_slot + 8, &half, sizeof half);
  for (int i = 0; i < 3; ++i) CHECK(server.poll() == 0);
  CHECK_FALSE(server.recv().has_value());
  // The server may still answer the request it received: the reply lands in the dead
  // client's ring and disturbs nobody.
  CHECK(server.reply(r->handle, Resp{1, 11}) == IpcReplyStatus::kOk);
  // The live client is served as usual.
  for (uint64_t i = 0; i < 10; ++i) {
    REQUIRE(live.call(Req{1, 0, i, 1000 + i}, i) == IpcCallStatus::kOk);
    REQUIRE(server.poll() == 1);
    auto q = server.recv();
    REQUIRE(q.has_value());
    CHECK(q->handle.client == 1);
    CHECK(q->payload.value == 1000 + i);
    REQUIRE(server.reply(q->handle, Resp{i, 2000 + i}) == IpcReplyStatus::kOk);
    uint32_t got = 0;
    live.poll([&](uint64_t tok, const Resp& resp) {
      CHECK(tok == i);
      CHECK(resp.value == 2000 + i);
      ++got;
    });
    CHECK(got == 1);
  }
  CHECK(server.bad_requests() == 0);
  CHECK(server.outstanding(0) == 0);
}
