// The UCX transport against the transport conformance suite (tests/transport/
// conformance.hpp), two workers in one process driven by one thread, over shared memory
// (UCX_TLS=sm,self), plus its own variants over TCP and with rendezvous-sized messages,
// and the validation of incoming messages.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
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

// The conformance suite runs over shared memory.
struct UcxSmHarness : UcxHarness {
  UcxSmHarness() : UcxHarness{"sm,self", nullptr} {}
};

}  // namespace

using namespace bkv;
using namespace bkv::test;

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
// over shared memory UCX 1.13 has no such mode and the queue pair falls back to none.
TEST_CASE("ucx: queue pairs use peer error handling where UCX offers it", "[ucx][faults]") {
  UcxHarness sm{"sm,self"};
  LinkedPair<UcxHarness> over_sm(sm);
  CHECK_FALSE(over_sm.qa->peer_error_handling());
  UcxHarness tcp{"tcp"};
  LinkedPair<UcxHarness> over_tcp(tcp);
  CHECK(over_tcp.qa->peer_error_handling());
}

TEST_CASE("ucx: over tcp, requests to a peer that is gone complete with an error", "[ucx][faults]") {
  UcxHarness h{"tcp"};
  LinkedPair<UcxHarness> p(h);
  std::vector<std::byte> local(256, std::byte{1}), remote(256);
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessLocalWrite | kAccessRemoteWrite);
  REQUIRE(p.qa->post_write(local.data(), 64, lmr.lkey, p.remote(rmr), 1, true) == PostResult::kOk);
  p.qa->ring_doorbell();
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return !p.sends.empty(); }));
  REQUIRE(p.sends[0].status == WcStatus::kSuccess);
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
