// copyrpc property test over the instant loopback: >= 100,000 random operations over
// 3 contexts (6 endpoints), payloads 0..ring/8, calls, out-of-order replies and polls.
// Seeded and reproducible; the seed is printed on failure (BKV_SEED overrides it).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "tests/copyrpc/instant_cluster.hpp"

using namespace bkv;

static uint64_t seed_from_env(uint64_t fallback) {
  const char* s = std::getenv("BKV_SEED");
  return s ? std::strtoull(s, nullptr, 0) : fallback;
}

TEST_CASE("copyrpc random interleavings: exactly-once answers, credit invariant, wraps", "[copyrpc][property]") {
  const uint64_t seed = seed_from_env(GENERATE(1u, 2u, 3u));
  INFO("seed=" << seed << " (rerun with BKV_SEED=" << seed << ")");
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 4096;  // small ring: wraps every few dozen messages
  cfg.srq_size = 64;
  test::InstantCluster cluster(3, cfg);
  test::PropertyDriver<loopback::InstantTransport> driver(cluster.ctx_ptrs(), cluster.links, seed, [] {});
  const test::PropertyStats st = driver.run(40000);
  CHECK(st.calls > 5000);
  CHECK(st.responses == st.calls);
  CHECK(st.replies == st.calls);
  CHECK(st.wraps > 100);           // the rings wrapped many times
  CHECK(st.exact_boundary > 0);    // including messages that would end exactly at the ring end
  CHECK(st.ring_full + st.no_credit > 0);  // back-pressure was exercised
}

TEST_CASE("copyrpc with a larger ring and four contexts", "[copyrpc][property]") {
  const uint64_t seed = seed_from_env(11);
  INFO("seed=" << seed);
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 16384;
  cfg.srq_size = 32;
  test::InstantCluster cluster(4, cfg);
  test::PropertyDriver<loopback::InstantTransport> driver(cluster.ctx_ptrs(), cluster.links, seed, [] {});
  const test::PropertyStats st = driver.run(30000);
  CHECK(st.responses == st.calls);
  CHECK(st.wraps > 10);
}
