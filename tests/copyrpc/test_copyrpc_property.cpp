// copyrpc property test over the instant loopback: >= 100,000 random operations over
// 3 contexts (6 endpoints), payloads 0..ring/8, calls, out-of-order replies and polls.
// Seeded and reproducible; the seed is printed on failure (BKV_SEED overrides it).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <vector>

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

namespace {

// Contexts over the instant loopback, each with its own configuration, fully connected.
struct MixedCluster {
  loopback::InstantFabric fabric;
  std::vector<std::unique_ptr<loopback::InstantTransport>> transports;
  std::vector<std::unique_ptr<test::InstantCtx>> ctxs;
  std::vector<std::vector<test::MeshLink>> links;
  explicit MixedCluster(const std::vector<copyrpc::ContextConfig>& cfgs) {
    for (const auto& cfg : cfgs) {
      transports.push_back(std::make_unique<loopback::InstantTransport>(fabric, uint32_t{4096}, uint32_t{256}));
      ctxs.push_back(std::make_unique<test::InstantCtx>(*transports.back(), cfg));
    }
    links = test::connect_full_mesh(ctxs);
  }
};

}  // namespace

TEST_CASE("copyrpc with one context of little response credit: the consumer-position READ, payloads held until "
          "the flush",
          "[copyrpc][property]") {
  // Context 0 has max_R 64: it reserves little room for its replies in its peers' rings,
  // so its calls may fill them up to their consumed position; RingFull is common and the
  // READ fallback runs. The driver checks after every operation that no payload handed
  // out by recv() changes before its context's next flush.
  const uint64_t seed = seed_from_env(GENERATE(21u, 22u));
  INFO("seed=" << seed << " (rerun with BKV_SEED=" << seed << ")");
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 4096;
  cfg.srq_size = 64;
  copyrpc::ContextConfig little = cfg;
  little.max_resp_reservation = 64;
  MixedCluster cluster({little, cfg, cfg});
  test::PropertyDriver<loopback::InstantTransport> driver(test::raw_pointers(cluster.ctxs), cluster.links, seed,
                                                          [] {});
  const test::PropertyStats st = driver.run(40000);
  CHECK(st.responses == st.calls);
  CHECK(st.wraps > 100);
  CHECK(st.ring_full > 0);
  CHECK(st.reads_posted > 0);
}
