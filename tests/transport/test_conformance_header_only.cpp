// The header-only transports against the transport conformance suite: the instant
// loopback, and a new header-only transport with its harness and one
// BKV_TRANSPORT_CONFORMANCE line here (this file is registered already). A transport with
// a library of its own has its own test file, registered in tests/transport.cmake under
// its library's condition. And the software NIC's completion queue, which they all use.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>

#include "tests/transport/conformance.hpp"
#include "transports/loopback/instant.hpp"
#include "transports/software_nic/completion_queue.hpp"

namespace {

struct InstantHarness {
  using T = bkv::loopback::InstantTransport;
  bkv::loopback::InstantFabric fabric;
  std::unique_ptr<T> make() { return std::make_unique<T>(fabric, 256, 64); }
};

}  // namespace

BKV_TRANSPORT_CONFORMANCE("instant", "[instant][conformance]", InstantHarness)

// The completion ring every software transport and the discrete-event NIC queue their
// completions in.
TEST_CASE("software NIC completion queue: FIFO across growth, unbounded by default, bounded at a power of two",
          "[software_nic]") {
  bkv::software_nic::CompletionQueue<uint32_t> q;
  CHECK(q.bound() == 0);
  uint32_t next_in = 0, next_out = 0;
  for (uint32_t round = 0; round < 5; ++round) {  // grows while the head is mid-ring
    for (uint32_t i = 0; i < 100; ++i) q.push(next_in++);
    for (uint32_t i = 0; i < 30; ++i, q.pop()) REQUIRE(q.front() == next_out++);
  }
  CHECK(q.size() == 350);
  CHECK_FALSE(q.full());
  while (!q.empty()) {
    REQUIRE(q.front() == next_out++);
    q.pop();
  }
  CHECK(next_out == next_in);

  bkv::software_nic::CompletionQueue<uint32_t> b;
  b.bound_at_least(5);
  CHECK(b.bound() == 8);
  b.bound_at_least(3);  // a smaller bound leaves it
  CHECK(b.bound() == 8);
  for (uint32_t i = 0; i < 8; ++i) {
    CHECK_FALSE(b.full());
    b.push(i);
  }
  CHECK(b.full());
  b.pop();
  CHECK_FALSE(b.full());
  b.bound_at_least(9);
  CHECK(b.bound() == 16);
}
