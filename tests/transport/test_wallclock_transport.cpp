// The wall-clock threaded loopback transport: the transport conformance suite
// (tests/transport/conformance.hpp; one thread driving every node), its own variants with
// injected delay and tiny channels, the injected delay as a lower
// bound on delivery and completion, and a multi-threaded stress test (every node a
// thread, all-to-all WRITE+IMM and READ traffic) that ThreadSanitizer checks in CI.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "tests/transport/conformance.hpp"
#include "transports/loopback/wallclock.hpp"

using namespace bkv;
using namespace bkv::test;
using loopback::WallclockFabric;
using loopback::WallclockTransport;

namespace {

struct WallclockHarness {
  using T = WallclockTransport;
  WallclockFabric fabric;
  explicit WallclockHarness(uint64_t delay_ns = 0, uint32_t channel_capacity = 4096)
      : fabric(loopback::WallclockConfig{delay_ns, channel_capacity}) {}
  std::unique_ptr<T> make() { return std::make_unique<T>(fabric, 256, 64); }
};

struct PlainWallclockHarness : WallclockHarness {
  PlainWallclockHarness() : WallclockHarness(0, 4096) {}
};

}  // namespace

BKV_TRANSPORT_CONFORMANCE("wallclock", "[wallclock][conformance]", PlainWallclockHarness)

TEST_CASE("wallclock: WRITE+IMM order and integrity", "[wallclock]") {
  SECTION("with delay") {
    WallclockHarness h(20'000);
    check_write_imm_order_and_integrity(h, 300, 4096);
  }
  SECTION("tiny channels: requests wait for channel space") {
    WallclockHarness h(0, 4);
    check_write_imm_order_and_integrity(h, 500, 512);
  }
}

TEST_CASE("wallclock: records from a stranger are dropped and counted", "[wallclock]") {
  WallclockHarness h;
  check_stranger_dropped(h);
}

TEST_CASE("wallclock: connect validates the peer", "[wallclock]") {
  WallclockHarness h, other;
  auto a = h.make();
  auto b = other.make();
  auto& qa = a->create_queue_pair();
  auto& qb = b->create_queue_pair();
  CHECK_THROWS_WITH(qa.connect(qb.local_info()), Catch::Contains("another fabric"));
  WallclockTransport::ConnectInfo bogus = qa.local_info();
  bogus.qp_num += 5;
  CHECK_THROWS_WITH(qa.connect(bogus), Catch::Contains("unknown queue pair"));
  CHECK_FALSE(qa.connected());
  CHECK_THROWS_WITH(WallclockFabric(loopback::WallclockConfig{0, 1000}), Catch::Contains("power of two"));
}

TEST_CASE("wallclock: the injected one-way delay bounds delivery and completion from below", "[wallclock]") {
  constexpr uint64_t kDelay = 3'000'000;  // 3 ms
  WallclockHarness h(kDelay);
  LinkedPair<WallclockHarness> p(h);
  std::vector<std::byte> local(64, std::byte{9}), remote(64);
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessRemoteWrite);
  p.b->post_receives(8);
  for (int round = 0; round < 3; ++round) {
    p.recvs.clear();
    p.sends.clear();
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(p.qa->post_write_imm(local.data(), 16, lmr.lkey, p.remote(rmr), 7, 1, true) == PostResult::kOk);
    p.qa->ring_doorbell();
    std::chrono::steady_clock::time_point t_recv{}, t_send{};
    REQUIRE(pump_until([&] {
      p.pump();
      if (!p.recvs.empty() && t_recv == std::chrono::steady_clock::time_point{}) t_recv = std::chrono::steady_clock::now();
      if (!p.sends.empty() && t_send == std::chrono::steady_clock::time_point{}) t_send = std::chrono::steady_clock::now();
    }, [&] { return !p.recvs.empty() && !p.sends.empty(); }));
    // Lower bounds only (guaranteed by construction), never an upper bound.
    CHECK(std::chrono::duration_cast<std::chrono::nanoseconds>(t_recv - t0).count() >= static_cast<int64_t>(kDelay));
    CHECK(std::chrono::duration_cast<std::chrono::nanoseconds>(t_send - t0).count() >=
          static_cast<int64_t>(2 * kDelay));
  }
}

namespace {

// All-to-all on real threads. Node i writes messages to every peer j into the ring j
// set aside for i (slot k % kRing); message k from i to j has imm = k, its length and
// bytes are a function of (i, j, k). Every 5th request is a READ of j's constant table. Each
// receiver checks order (imm = expected k per queue pair), length and bytes of every
// message; each sender checks every signalled completion and every READ's bytes.
struct StressNode {
  std::unique_ptr<WallclockTransport> t;
  std::vector<WallclockTransport::QueuePair*> qp;  // by peer node (nullptr for self)
  std::vector<std::vector<std::byte>> inbox;       // by sender
  std::vector<MemoryRegion> inbox_mr;
  std::vector<std::byte> outbox;                   // one source slot per peer
  MemoryRegion outbox_mr{};
  std::vector<std::byte> table;                    // constant, read remotely
  MemoryRegion table_mr{};
  std::vector<std::byte> read_back;                // one READ destination per peer
  MemoryRegion read_back_mr{};
};

constexpr uint32_t kSlot = 256;
// Requests in flight per (sender, peer); source and READ-destination slots rotate over
// kWindow, so a slot is rewritten only after its previous request completed.
constexpr uint32_t kWindow = 8;
// Inbox slots per sender. A sender has at most kWindow requests in flight per peer and
// the receiver holds at most srq_capacity unpolled receive completions, so by the time
// message k is sent, message k - kRing has been polled and checked: its slot may be reused.
constexpr uint32_t kRing = 1024;
constexpr uint32_t kSrq = 512;
static_assert(kRing > kSrq + kWindow);

uint32_t stress_len(uint32_t from, uint32_t to, uint64_t k) { return static_cast<uint32_t>((from * 31 + to * 7 + k * 13) % kSlot); }
uint8_t stress_byte(uint32_t from, uint32_t to, uint64_t k, uint32_t i) {
  return static_cast<uint8_t>(from * 17 + to * 5 + k * 3 + i);
}
uint8_t table_byte(uint32_t node, uint32_t i) { return static_cast<uint8_t>(node * 41 + i * 11 + 3); }

void run_stress(uint32_t nodes, uint64_t per_peer, uint64_t delay_ns) {
  WallclockFabric fabric(loopback::WallclockConfig{delay_ns, 64});
  std::vector<StressNode> n(nodes);
  for (uint32_t i = 0; i < nodes; ++i) {
    n[i].t = std::make_unique<WallclockTransport>(fabric, kSrq, 32);
    n[i].qp.assign(nodes, nullptr);
    n[i].inbox.assign(nodes, std::vector<std::byte>(kSlot * kRing));
    for (uint32_t j = 0; j < nodes; ++j)
      n[i].inbox_mr.push_back(
          n[i].t->register_memory(n[i].inbox[j].data(), kSlot * kRing, kAccessLocalWrite | kAccessRemoteWrite));
    n[i].outbox.resize(kSlot * kWindow * nodes);
    n[i].outbox_mr = n[i].t->register_memory(n[i].outbox.data(), n[i].outbox.size(), kAccessLocalWrite);
    n[i].table.resize(kSlot);
    for (uint32_t k = 0; k < kSlot; ++k) n[i].table[k] = std::byte{table_byte(i, k)};
    n[i].table_mr = n[i].t->register_memory(n[i].table.data(), kSlot, kAccessRemoteRead);
    n[i].read_back.resize(kSlot * kWindow * nodes);
    n[i].read_back_mr = n[i].t->register_memory(n[i].read_back.data(), n[i].read_back.size(), kAccessLocalWrite);
  }
  for (uint32_t i = 0; i < nodes; ++i)
    for (uint32_t j = i + 1; j < nodes; ++j) {
      n[i].qp[j] = &n[i].t->create_queue_pair();
      n[j].qp[i] = &n[j].t->create_queue_pair();
      n[i].qp[j]->connect(n[j].qp[i]->local_info());
      n[j].qp[i]->connect(n[i].qp[j]->local_info());
    }
  std::atomic<uint32_t> finished{0};
  std::atomic<bool> abort_all{false};
  std::vector<std::string> failures(nodes);
  std::vector<uint64_t> writes_received(nodes, 0), reads_completed(nodes, 0);
  auto body = [&](uint32_t me) {
    StressNode& s = n[me];
    WallclockTransport& t = *s.t;
    // Every request signalled; at most kWindow in flight per peer (see kRing).
    std::vector<uint64_t> sent(nodes, 0), acked(nodes, 0), received(nodes, 0);
    std::vector<uint64_t> reads_done(nodes, 0);
    std::string& fail = failures[me];
    t.post_receives(t.srq_capacity());
    bool done_counted = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (finished.load(std::memory_order_acquire) < nodes) {
      if (abort_all.load()) return;
      if (std::chrono::steady_clock::now() > deadline) {
        fail = "timed out";
        abort_all.store(true);
        return;
      }
      uint32_t work = 0;
      for (uint32_t j = 0; j < nodes; ++j) {
        if (j == me || sent[j] - acked[j] == kWindow || sent[j] == per_peer || s.qp[j]->send_queue_free() == 0)
          continue;
        const uint64_t k = sent[j];
        const uint64_t slot = (uint64_t{j} * kWindow + k % kWindow) * kSlot;
        if (k % 5 == 4) {
          // (No Catch macros on these threads: Catch is not thread-safe.)
          const RemoteBuffer table{reinterpret_cast<uint64_t>(n[j].table.data()), n[j].table_mr.rkey, 0, kSlot};
          if (s.qp[j]->post_read(s.read_back.data() + slot, kSlot, s.read_back_mr.lkey, table, (uint64_t{j} << 32) | k,
                                 true) != PostResult::kOk)
            fail = "post_read refused";
        } else {
          const uint32_t len = stress_len(me, j, k);
          std::byte* src = s.outbox.data() + slot;
          for (uint32_t b = 0; b < len; ++b) src[b] = std::byte{stress_byte(me, j, k, b)};
          const PostResult pr = s.qp[j]->post_write_imm(src, len, s.outbox_mr.lkey,
                                  RemoteBuffer{reinterpret_cast<uint64_t>(n[j].inbox[me].data() + (k % kRing) * kSlot),
                                               n[j].inbox_mr[me].rkey, 0, kSlot},
                                  static_cast<uint32_t>(k), (uint64_t{j} << 32) | k, true);
          if (pr != PostResult::kOk) fail = "post_write_imm refused";
        }
        s.qp[j]->ring_doorbell();
        ++sent[j];
        ++work;
      }
      t.poll_send([&](const SendCompletion& c) {
        const uint32_t j = static_cast<uint32_t>(c.wr_id >> 32);
        const uint64_t k = c.wr_id & 0xFFFFFFFFu;
        if (c.status != WcStatus::kSuccess || j >= nodes || k != acked[j]) {
          fail = "bad send completion";
          return;
        }
        if (c.opcode == WcOpcode::kRdmaRead) {
          const uint64_t slot = (uint64_t{j} * kWindow + k % kWindow) * kSlot;
          for (uint32_t b = 0; b < kSlot; ++b)
            if (s.read_back[slot + b] != std::byte{table_byte(j, b)}) fail = "READ returned wrong bytes";
          ++reads_done[j];
        }
        ++acked[j];
        ++work;
      }, 16);
      uint32_t got = 0;
      t.poll_recv([&](const RecvCompletion& c) {
        ++got;
        uint32_t from = nodes;
        for (uint32_t j = 0; j < nodes; ++j)
          if (j != me && s.qp[j]->qp_num() == c.qp_num) from = j;
        if (from == nodes) {
          fail = "completion for an unknown queue pair";
          return;
        }
        uint64_t k = received[from];
        while (k % 5 == 4) ++k;  // READs produce no receive completion
        if (c.imm != k || c.byte_len != stress_len(from, me, k)) {
          fail = "out of order or wrong length";
          return;
        }
        const std::byte* slot = s.inbox[from].data() + (k % kRing) * kSlot;
        for (uint32_t b = 0; b < c.byte_len; ++b)
          if (slot[b] != std::byte{stress_byte(from, me, k, b)}) fail = "wrong bytes";
        received[from] = k + 1;
      }, 16);
      if (got > 0) t.post_receives(got);
      if (got == 0 && work == 0) std::this_thread::yield();  // 2-core CI: let the peers run
      if (!fail.empty()) {
        abort_all.store(true);
        return;
      }
      if (!done_counted) {
        bool all = true;
        for (uint32_t j = 0; j < nodes; ++j) {
          if (j == me) continue;
          uint64_t expect_recv = per_peer;
          while (expect_recv > 0 && (expect_recv - 1) % 5 == 4) --expect_recv;
          if (acked[j] != per_peer || received[j] < expect_recv) all = false;
        }
        if (all) {
          done_counted = true;
          finished.fetch_add(1, std::memory_order_acq_rel);
        }
      }
    }
    for (uint32_t j = 0; j < nodes; ++j) {
      writes_received[me] += received[j] - received[j] / 5;  // k < received[j], minus the READ numbers
      reads_completed[me] += reads_done[j];
    }
  };
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < nodes; ++i) threads.emplace_back(body, i);
  for (auto& th : threads) th.join();
  for (uint32_t i = 0; i < nodes; ++i) {
    INFO("node " << i);
    CHECK(failures[i].empty());
    CHECK(failures[i] == "");
    CHECK(n[i].t->protocol_errors() == 0);
    CHECK(writes_received[i] == (nodes - 1) * (per_peer - per_peer / 5));
    CHECK(reads_completed[i] == (nodes - 1) * (per_peer / 5));
  }
}

}  // namespace

TEST_CASE("wallclock: all-to-all on real threads keeps order and data", "[wallclock][threads]") {
  SECTION("4 nodes, no delay") { run_stress(4, 2000, 0); }
  SECTION("3 nodes, 50 us one-way delay") { run_stress(3, 400, 50'000); }
}
