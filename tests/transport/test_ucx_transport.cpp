// The UCX transport against the transport conformance suite (tests/transport/
// conformance.hpp), two workers in one process driven by one thread, over shared memory
// (UCX_TLS=sm,self), plus its own variants over TCP and with rendezvous-sized messages,
// and the validation of incoming messages.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/transport/conformance.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace {

// Hands out transports; `on_destroy` (optional) sees each one before it goes away.
struct UcxHarness {
  using T = bkv::ucx::UcxTransport;
  struct Deleter {
    UcxHarness* h;
    void operator()(T* t) const {
      if (h->on_destroy) h->on_destroy(*t);
      delete t;
    }
  };
  std::string tls;
  std::function<void(const T&)> on_destroy;
  uint32_t shm_fifo_element_size = bkv::ucx::kShmFifoElementSize;
  std::unique_ptr<T, Deleter> make() {
    bkv::ucx::Config c;
    c.tls = tls;
    c.shm_fifo_element_size = shm_fifo_element_size;
    c.send_queue_depth = 64;
    c.srq_capacity = 256;
    return std::unique_ptr<T, Deleter>(new T(c), Deleter{this});
  }
  void reset() { on_destroy = nullptr; }
};

// The conformance suite runs over shared memory. WRITE and READ to an announced region
// are UCX RMA operations, which a target queue pair in the error state cannot stop.
struct UcxSmHarness : UcxHarness {
  static constexpr bool kErroredTargetStopsOneSided = false;
  UcxSmHarness() : UcxHarness{"sm,self", nullptr} {}
};

}  // namespace

using namespace bkv;
using namespace bkv::test;

namespace {

// Posts a signalled WRITE of the first `len` bytes of `local` (registered as `lmr`) to
// the start of `rmr` with id `wr_id` and pumps until one more send completion came: the
// completion returned.
template <class P>
SendCompletion write_and_wait(P& p, const std::vector<std::byte>& local, const MemoryRegion& lmr, uint32_t len,
                              const MemoryRegion& rmr, uint64_t wr_id) {
  const size_t before = p.sends.size();
  REQUIRE(p.qa->post_write(local.data(), len, lmr.lkey, p.remote(rmr), wr_id, true) == PostResult::kOk);
  p.qa->ring_doorbell();
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return p.sends.size() > before; }));
  return p.sends.back();
}

// Pumps until the pair's send completions are as many as `want`, then checks each one's
// (wr_id, status), in order.
template <class P>
void expect_sends(P& p, std::initializer_list<std::pair<uint64_t, WcStatus>> want) {
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return p.sends.size() >= want.size(); }));
  REQUIRE(p.sends.size() == want.size());
  size_t i = 0;
  for (const auto& [wr_id, status] : want) {
    INFO("send completion " << i);
    CHECK(p.sends[i].wr_id == wr_id);
    CHECK(p.sends[i].status == status);
    ++i;
  }
}

}  // namespace

TEST_CASE("ucx: WRITE+IMM order and integrity with rendezvous-sized messages", "[ucx]") {
  UcxHarness h{GENERATE(std::string("sm,self"), std::string("tcp"))};
  uint64_t rndv = 0;
  h.on_destroy = [&](const bkv::ucx::UcxTransport& t) { rndv += t.rendezvous_receives(); };
  check_write_imm_order_and_integrity(h, 120, 300 * 1024);
  h.reset();
  CHECK(rndv > 0);  // the large messages really took the rendezvous path
}

TEST_CASE("ucx: WRITE+IMM order and integrity with UCX's own shared-memory FIFO element size", "[ucx]") {
  UcxHarness h{"sm,self"};
  h.shm_fifo_element_size = 0;  // UCX's 128-byte elements: most messages take the bcopy path
  check_write_imm_order_and_integrity(h, 300, 4 * 1024);
}

TEST_CASE("ucx: WRITE+IMM order and integrity over tcp", "[ucx]") {
  UcxHarness h{"tcp"};
  check_write_imm_order_and_integrity(h, 300, 70 * 1024);
}

BKV_TRANSPORT_CONFORMANCE("ucx", "[ucx][conformance]", UcxSmHarness)

TEST_CASE("ucx: WRITE then READ round trip over tcp", "[ucx]") {
  UcxHarness h{"tcp"};
  check_write_and_read(h);
}

TEST_CASE("ucx: messages from a stranger are dropped and counted", "[ucx]") {
  UcxHarness h{"sm,self"};
  check_stranger_dropped(h);
}

TEST_CASE("ucx: a message with a stale token is dropped and counted", "[ucx]") {
  // The peer re-created its queue pair (new token): a sender still holding the old
  // ConnectInfo must not write into the new incarnation.
  UcxHarness h{"sm,self"};
  LinkedPair<UcxHarness> p(h);
  auto c = h.make();
  auto& qc = c->create_queue_pair();
  bkv::ucx::ConnectInfo stale = p.qb->local_info();
  stale.token ^= 0x10;
  qc.connect(stale);
  std::vector<std::byte> local(64), remote(64, std::byte{0});
  const MemoryRegion lmr = c->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessRemoteWrite);
  p.b->post_receives(2);
  REQUIRE(qc.post_write_imm(local.data(), 8, lmr.lkey, p.remote(rmr), 3, 1, true) == PostResult::kOk);
  qc.ring_doorbell();
  REQUIRE(pump_until([&] {
    c->progress();
    p.pump();
  }, [&] { return p.b->protocol_errors() > 0; }));
  CHECK(p.b->protocol_errors() == 1);
  CHECK(p.recvs.empty());
  for (std::byte x : remote) REQUIRE(x == std::byte{0});
}

TEST_CASE("ucx: bad ConnectInfo is rejected with a message", "[ucx]") {
  UcxHarness h{"sm,self"};
  auto t = h.make();
  auto& qp = t->create_queue_pair();
  bkv::ucx::ConnectInfo info = qp.local_info();
  SECTION("bad magic") {
    info.magic = 0;
    CHECK_THROWS_WITH(qp.connect(info), Catch::Contains("bad magic"));
  }
  SECTION("address too long") {
    info.address_length = bkv::ucx::kMaxWorkerAddress + 1;
    CHECK_THROWS_WITH(qp.connect(info), Catch::Contains("worker address length"));
  }
  SECTION("empty address") {
    info.address_length = 0;
    CHECK_THROWS_WITH(qp.connect(info), Catch::Contains("worker address length"));
  }
  CHECK_FALSE(qp.connected());
}

TEST_CASE("ucx: a bad configuration is rejected with a message", "[ucx]") {
  bkv::ucx::Config c;
  c.tls = "sm,self";
  SECTION("send queue depth not a power of two") {
    c.send_queue_depth = 48;
    CHECK_THROWS_WITH(bkv::ucx::UcxTransport(c), Catch::Contains("power of two"));
  }
  SECTION("empty shared receive queue") {
    c.srq_capacity = 0;
    CHECK_THROWS_WITH(bkv::ucx::UcxTransport(c), Catch::Contains("srq_capacity"));
  }
  SECTION("shared-memory FIFO element too small") {
    c.shm_fifo_element_size = bkv::ucx::kMinShmFifoElementSize - 1;
    CHECK_THROWS_WITH(bkv::ucx::UcxTransport(c), Catch::Contains("shm_fifo_element_size"));
  }
  SECTION("shared-memory FIFO element too large") {
    c.shm_fifo_element_size = bkv::ucx::kMaxShmFifoElementSize + 1;
    CHECK_THROWS_WITH(bkv::ucx::UcxTransport(c), Catch::Contains("shm_fifo_element_size"));
  }
  SECTION("a transport list UCX cannot use") {
    c.tls = "no_such_transport";
    CHECK_THROWS_WITH(bkv::ucx::UcxTransport(c), Catch::Contains("ucp_init failed"));
  }
}

// Peer failure: over TCP UCX reports a failed peer (UCP_ERR_HANDLING_MODE_PEER), so a
// queue pair whose peer is gone fails its requests instead of waiting for them forever;
// over shared memory UCX 1.13 has no such mode. Asked for where shared memory could be
// chosen (UCX's default list), it would make UCX pick TCP between two workers of one
// host, where the ucx-am baseline gets shared memory: there the queue pair asks for none.
TEST_CASE("ucx: queue pairs use peer error handling only where shared memory is ruled out", "[ucx][faults]") {
  UcxHarness sm{"sm,self"};
  LinkedPair<UcxHarness> over_sm(sm);
  CHECK_FALSE(over_sm.qa->peer_error_handling());
  UcxHarness tcp{"tcp"};
  LinkedPair<UcxHarness> over_tcp(tcp);
  CHECK(over_tcp.qa->peer_error_handling());
  // UCX's default transports (no UCX_TLS): shared memory carries the messages, not TCP.
  if (std::getenv("UCX_TLS") == nullptr) {
    UcxHarness dflt{""};
    LinkedPair<UcxHarness> over_default(dflt);
    CHECK_FALSE(over_default.qa->peer_error_handling());
    std::string described;
    for (const std::string& d : over_default.a->endpoint_descriptions()) described += d;
    INFO(described);
    CHECK_FALSE(described.empty());
    CHECK_THAT(described, !Catch::Contains("tcp/"));
  }
  std::string described_tcp;
  for (const std::string& d : over_tcp.a->endpoint_descriptions()) described_tcp += d;
  CHECK_THAT(described_tcp, Catch::Contains("tcp/"));
}

TEST_CASE("ucx: over tcp, requests to a peer that is gone complete with an error", "[ucx][faults]") {
  UcxHarness h{"tcp"};
  LinkedPair<UcxHarness> p(h);
  std::vector<std::byte> local(256, std::byte{1}), remote(256);
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessLocalWrite | kAccessRemoteWrite);
  REQUIRE(write_and_wait(p, local, lmr, 64, rmr, 1).status == WcStatus::kSuccess);
  p.sends.clear();
  p.b.reset();  // the peer goes away (its worker and sockets closed)
  const auto t0 = std::chrono::steady_clock::now();
  bool failed = false;
  uint64_t id = 2;
  while (!failed && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    if (p.qa->post_write(local.data(), 64, lmr.lkey, p.remote(rmr), id++, true) == PostResult::kOk) p.qa->ring_doorbell();
    p.a->poll_send([&](const SendCompletion& c) { failed |= c.status != WcStatus::kSuccess; }, 64);
    progress(*p.a);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(failed);
  CHECK(p.qa->in_error());
}

// ---------------------------------------------------------------- RMA (ucx_rma.hpp)
// READ and WRITE to a region the peer announced go through ucp_get_nbx / ucp_put_nbx;
// the counters say which path each request took.

namespace {

// Pumps until `t` has accepted `n` announcements in total.
template <class P>
void await_announcements(P& p, bkv::ucx::UcxTransport& t, uint64_t n) {
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return t.rma_counters().announcements_accepted >= n; }));
}

uint8_t byte_at(uint64_t seed, uint64_t i) { return static_cast<uint8_t>(seed * 131 + i * 7 + (i >> 8)); }

}  // namespace

TEST_CASE("ucx rma: WRITE then READ of an announced region go through ucp_put and ucp_get, up to 1 MiB", "[ucx][rma]") {
  const uint32_t size = GENERATE(1u, 4095u, 65536u, 1u << 20);
  UcxHarness h{"sm,self"};
  LinkedPair<UcxHarness> p(h);
  std::vector<std::byte> local(size), back(size, std::byte{0}), remote((2u << 20) + 64, std::byte{0});
  for (uint32_t i = 0; i < size; ++i) local[i] = std::byte{byte_at(size, i)};
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion bmr = p.a->register_memory(back.data(), back.size(), kAccessLocalWrite);
  const MemoryRegion rmr =
      p.b->register_memory(remote.data(), remote.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
  await_announcements(p, *p.a, 1);
  REQUIRE(p.qa->post_write(local.data(), size, lmr.lkey, p.remote(rmr, 32), 1, true) == PostResult::kOk);
  REQUIRE(p.qa->post_read(back.data(), size, bmr.lkey, p.remote(rmr, 32), 2, true) == PostResult::kOk);
  p.qa->ring_doorbell();
  expect_sends(p, {{1, WcStatus::kSuccess}, {2, WcStatus::kSuccess}});
  CHECK(std::memcmp(remote.data() + 32, local.data(), size) == 0);
  CHECK(std::memcmp(back.data(), local.data(), size) == 0);
  CHECK(remote[31] == std::byte{0});
  CHECK(remote[32 + size] == std::byte{0});
  const bkv::ucx::RmaCounters c = p.a->rma_counters();
  CHECK(c.puts == 1);
  CHECK(c.gets == 1);
  CHECK(c.flushes >= 1);
  CHECK(c.am_not_announced + c.am_outside_region + c.am_behind_am + c.am_zero_length == 0);
  CHECK(p.b->rendezvous_receives() == 0);  // no byte travelled as an active message
  CHECK(p.a->protocol_errors() + p.b->protocol_errors() == 0);
}

TEST_CASE("ucx rma: a range outside the announced region fails with kRemoteAccessError and writes nothing", "[ucx][rma]") {
  enum class Case { kPastEnd, kBeforeStart, kReadWithoutRemoteRead, kWriteWithoutRemoteWrite };
  const Case v = GENERATE(Case::kPastEnd, Case::kBeforeStart, Case::kReadWithoutRemoteRead, Case::kWriteWithoutRemoteWrite);
  UcxHarness h{"sm,self"};
  LinkedPair<UcxHarness> p(h);
  std::vector<std::byte> local(512, std::byte{0x5A}), remote(8192, std::byte{0});
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const uint32_t access = v == Case::kReadWithoutRemoteRead    ? kAccessRemoteWrite
                          : v == Case::kWriteWithoutRemoteWrite ? kAccessRemoteRead
                                                                : (kAccessRemoteRead | kAccessRemoteWrite);
  // The region is the middle of the buffer: bytes around it must stay zero too.
  const MemoryRegion rmr = p.b->register_memory(remote.data() + 1024, 4096, kAccessLocalWrite | access);
  await_announcements(p, *p.a, 1);
  RemoteBuffer dst = p.remote(rmr);
  bool read = false;
  switch (v) {
    case Case::kPastEnd: dst.addr += 4000; break;  // 4000 + 200 > 4096
    case Case::kBeforeStart: dst.addr -= 8; break;
    case Case::kReadWithoutRemoteRead: read = true; break;
    case Case::kWriteWithoutRemoteWrite: break;
  }
  const PostResult r = read ? p.qa->post_read(local.data(), 200, lmr.lkey, dst, 10, false)
                            : p.qa->post_write(local.data(), 200, lmr.lkey, dst, 10, false);
  REQUIRE(r == PostResult::kOk);
  REQUIRE(p.qa->post_write(local.data(), 8, lmr.lkey, p.remote(rmr), 11, true) == PostResult::kOk);
  p.qa->ring_doorbell();
  expect_sends(p, {{10, WcStatus::kRemoteAccessError}, {11, WcStatus::kWrFlushError}});
  CHECK(p.qa->in_error());
  CHECK(p.qb->in_error());
  for (std::byte x : remote) REQUIRE(x == std::byte{0});
  for (std::byte x : local) REQUIRE(x == std::byte{0x5A});
  const bkv::ucx::RmaCounters c = p.a->rma_counters();
  // Refused by the initiator's check and NAKed by the peer; without remote write on the
  // region the second WRITE is outside it as well.
  CHECK(c.am_outside_region == (v == Case::kWriteWithoutRemoteWrite ? 2u : 1u));
  CHECK(c.puts + c.gets == 0);
}

TEST_CASE("ucx rma: forged or garbled region announcements are rejected and counted", "[ucx][rma]") {
  UcxHarness h{"sm,self"};
  LinkedPair<UcxHarness> p(h);
  std::vector<std::byte> remote(4096, std::byte{0}), local(64, std::byte{0x77});
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessLocalWrite | kAccessRemoteWrite);
  await_announcements(p, *p.a, 1);
  REQUIRE(p.a->rma_counters().announcements_rejected == 0);
  bkv::ucx::RegionAnnouncementHeader good{};
  good.magic = bkv::ucx::kRegionMagic;
  good.dst_qp = p.qa->qp_num();
  good.src_qp = p.qb->qp_num();
  good.dst_token = p.qa->local_info().token;
  good.src_token = p.qb->local_info().token;
  good.base = 0x10000;
  good.length = 4096;
  good.rkey = rmr.rkey + 100;  // not a key b handed out
  good.access = kAccessRemoteWrite;
  good.packed_length = 16;
  std::vector<std::byte> packed(16, std::byte{0});
  struct Forgery {
    const char* what;
    void (*edit)(bkv::ucx::RegionAnnouncementHeader&);
  };
  const Forgery forgeries[] = {
      {"bad magic", [](auto& x) { x.magic ^= 1; }},
      {"unknown queue pair", [](auto& x) { x.dst_qp += 7; }},
      {"wrong token of the receiver", [](auto& x) { x.dst_token ^= 2; }},
      {"a stranger's queue pair", [](auto& x) { x.src_qp += 1; }},
      {"a stranger's token", [](auto& x) { x.src_token ^= 4; }},
      {"packed length differs from the payload", [](auto& x) { x.packed_length = 15; }},
      {"empty region", [](auto& x) { x.length = 0; }},
      {"base + length overflows", [](auto& x) { x.base = ~uint64_t{0} - 100; }},
      {"no access", [](auto& x) { x.access = 0; }},
      {"local access bits", [](auto& x) { x.access = kAccessLocalWrite | kAccessRemoteWrite; }},
      {"reserved not zero", [](auto& x) { x.reserved = 1; }},
      {"rkey 0", [](auto& x) { x.rkey = 0; }},
  };
  uint64_t rejected = 0;
  for (const Forgery& f : forgeries) {
    INFO(f.what);
    bkv::ucx::RegionAnnouncementHeader x = good;
    f.edit(x);
    p.a->rma()->inject_announcement(&x, sizeof x, packed.data(), packed.size());
    CHECK(p.a->rma_counters().announcements_rejected == ++rejected);
  }
  // Wrong header size, and the real rkey announced a second time (a larger region).
  p.a->rma()->inject_announcement(&good, sizeof good - 1, packed.data(), packed.size());
  CHECK(p.a->rma_counters().announcements_rejected == ++rejected);
  bkv::ucx::RegionAnnouncementHeader again = good;
  again.rkey = rmr.rkey;
  again.length = 1u << 30;
  p.a->rma()->inject_announcement(&again, sizeof again, packed.data(), packed.size());
  CHECK(p.a->rma_counters().announcements_rejected == ++rejected);
  CHECK(p.a->rma_counters().announcements_accepted == 1);  // only b's real one
  // The real region keeps its real bounds: past its end is still refused, nothing written.
  REQUIRE(p.qa->post_write(local.data(), 64, lmr.lkey, RemoteBuffer{reinterpret_cast<uint64_t>(remote.data()) + 4090,
                                                                     rmr.rkey, 0, 64}, 1, true) == PostResult::kOk);
  p.qa->ring_doorbell();
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return !p.sends.empty(); }));
  CHECK(p.sends[0].status == WcStatus::kRemoteAccessError);
  for (std::byte x : remote) REQUIRE(x == std::byte{0});
  CHECK(p.a->rma_counters().am_outside_region == 1);
}

// RC order across the two paths: a WRITE+IMM posted after RMA WRITEs is delivered only
// when their bytes are in place (the AM waits for the WRITEs' flush).
TEST_CASE("ucx rma: a WRITE+IMM after RMA WRITEs arrives after their data", "[ucx][rma]") {
  UcxHarness h{"sm,self"};
  LinkedPair<UcxHarness> p(h);
  constexpr uint32_t kSize = 256 * 1024;
  std::vector<std::byte> local(kSize), flag(8), remote(kSize, std::byte{0}), ring(64);
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion fmr = p.a->register_memory(flag.data(), flag.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessLocalWrite | kAccessRemoteWrite);
  const MemoryRegion ringmr = p.b->register_memory(ring.data(), ring.size(), kAccessLocalWrite | kAccessRemoteWrite);
  await_announcements(p, *p.a, 2);
  p.b->post_receives(40);
  for (uint32_t round = 0; round < 40; ++round) {
    for (uint32_t i = 0; i < kSize; ++i) local[i] = std::byte{byte_at(round, i)};
    REQUIRE(p.qa->post_write(local.data(), kSize / 2, lmr.lkey, p.remote(rmr), 1, false) == PostResult::kOk);
    REQUIRE(p.qa->post_write(local.data() + kSize / 2, kSize / 2, lmr.lkey, p.remote(rmr, kSize / 2), 2, false) ==
            PostResult::kOk);
    REQUIRE(p.qa->post_write_imm(flag.data(), 8, fmr.lkey, p.remote(ringmr), round, 3, true) == PostResult::kOk);
    p.qa->ring_doorbell();
    const size_t want = p.recvs.size() + 1;
    bool intact = false;
    REQUIRE(pump_until([&] {
      p.pump();
      if (p.recvs.size() == want) {  // checked at the moment the receive completion is seen
        intact = true;
        for (uint32_t i = 0; i < kSize; i += 509) intact &= remote[i] == std::byte{byte_at(round, i)};
        intact &= remote[kSize - 1] == std::byte{byte_at(round, kSize - 1)};
      }
    }, [&] { return p.recvs.size() >= want; }));
    REQUIRE(intact);
    REQUIRE(p.recvs.back().imm == round);
    REQUIRE(pump_until([&] { p.pump(); }, [&] { return p.sends.size() >= round + 1; }));
    REQUIRE(p.sends.back().status == WcStatus::kSuccess);
  }
  CHECK(p.a->rma_counters().puts == 80);
  CHECK(p.a->rma_counters().am_not_announced == 0);
}

// A region the requester has not heard of yet: the WRITE takes the AM path (counted) and
// still lands; once the announcement is in, the next one is a ucp_put.
TEST_CASE("ucx rma: a WRITE to a region not announced yet goes as an active message and is counted", "[ucx][rma]") {
  UcxHarness h{"sm,self"};
  LinkedPair<UcxHarness> p(h);
  std::vector<std::byte> local(512, std::byte{0x21}), remote(512, std::byte{0});
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessLocalWrite | kAccessRemoteWrite);
  // Posted before a's worker progressed: b's announcement has not been received.
  CHECK(write_and_wait(p, local, lmr, 256, rmr, 1).status == WcStatus::kSuccess);
  CHECK(remote[255] == std::byte{0x21});
  CHECK(remote[256] == std::byte{0});
  CHECK(p.a->rma_counters().am_not_announced == 1);
  CHECK(p.a->rma_counters().puts == 0);
  await_announcements(p, *p.a, 1);
  CHECK(write_and_wait(p, local, lmr, 512, rmr, 2).status == WcStatus::kSuccess);
  CHECK(remote[511] == std::byte{0x21});
  CHECK(p.a->rma_counters().puts == 1);
  CHECK(p.a->rma_counters().am_not_announced == 1);
}

namespace {

struct AmOnly : UcxHarness {
  std::unique_ptr<T, Deleter> make() {
    bkv::ucx::Config c;
    c.tls = "sm,self";
    c.rma = false;
    return std::unique_ptr<T, Deleter>(new T(c), Deleter{this});
  }
};

}  // namespace

TEST_CASE("ucx rma: with rma off READ and WRITE stay active messages", "[ucx][rma]") {
  AmOnly h;
  check_write_and_read(h);
  LinkedPair<AmOnly> p(h);
  CHECK(p.a->rma() == nullptr);
  CHECK(p.a->rma_counters().announcements_sent == 0);
}

TEST_CASE("ucx: with rma off a queue pair in the error state discards WRITE and READ too", "[ucx][rma]") {
  // (The conformance suite, where WRITE and READ are RMA operations, checks WRITE+IMM.)
  const WcOpcode op = GENERATE(WcOpcode::kRdmaWrite, WcOpcode::kRdmaRead);
  AmOnly h;
  check_request_to_errored_target(h, op);
}
