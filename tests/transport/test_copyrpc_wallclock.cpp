// copyrpc end to end over the wall-clock threaded loopback: the property driver of
// tests/copyrpc/property_driver.hpp (random call/recv/reply/poll interleavings, one
// thread driving every context, with and without injected delay) and a run with every
// context on its own thread (checked by ThreadSanitizer in CI).
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "tests/copyrpc/property_driver.hpp"
#include "tests/transport/copyrpc_threads.hpp"
#include "transports/loopback/wallclock.hpp"

using namespace bkv;
using loopback::WallclockFabric;
using loopback::WallclockTransport;

namespace {

struct WallclockCluster {
  using Ctx = copyrpc::Context<WallclockTransport, uint64_t>;
  WallclockFabric fabric;
  std::vector<std::unique_ptr<WallclockTransport>> transports;
  std::vector<std::unique_ptr<Ctx>> ctxs;
  std::vector<std::vector<test::PropertyDriver<WallclockTransport>::Link>> links;

  WallclockCluster(uint32_t nodes, copyrpc::ContextConfig cfg, uint64_t delay_ns)
      : fabric(loopback::WallclockConfig{delay_ns, 4096}) {
    for (uint32_t i = 0; i < nodes; ++i) {
      transports.push_back(std::make_unique<WallclockTransport>(fabric, 4096, 256));
      ctxs.push_back(std::make_unique<Ctx>(*transports.back(), cfg));
    }
    links = test::connect_full_mesh(ctxs);
  }
  std::vector<Ctx*> ctx_ptrs() { return test::raw_pointers(ctxs); }
  void pump() {
    for (auto& t : transports) t->progress();
  }
};

}  // namespace

TEST_CASE("copyrpc over wallclock: random interleavings, exactly-once answers, wraps", "[copyrpc][wallclock]") {
  const uint64_t delay = GENERATE(uint64_t{0}, uint64_t{2000});
  INFO("one-way delay " << delay << " ns");
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 4096;  // wraps every few dozen messages
  cfg.srq_size = 64;
  WallclockCluster cluster(3, cfg, delay);
  test::PropertyDriver<WallclockTransport> driver(cluster.ctx_ptrs(), cluster.links, 7 + delay, [&] { cluster.pump(); });
  const test::PropertyStats st = driver.run(15000);
  CHECK(st.calls > 1000);
  CHECK(st.responses == st.calls);
  CHECK(st.replies == st.calls);
  CHECK(st.wraps > 20);
  CHECK(st.ring_full + st.no_credit > 0);
  for (auto& t : cluster.transports) CHECK(t->protocol_errors() == 0);
}

TEST_CASE("copyrpc over wallclock: every context on its own thread", "[copyrpc][wallclock][threads]") {
  const uint64_t delay = GENERATE(uint64_t{0}, uint64_t{20'000});
  INFO("one-way delay " << delay << " ns");
  WallclockFabric fabric(loopback::WallclockConfig{delay, 1024});
  std::vector<std::unique_ptr<WallclockTransport>> ts;
  std::vector<WallclockTransport*> ptrs;
  for (int i = 0; i < 3; ++i) {
    ts.push_back(std::make_unique<WallclockTransport>(fabric, 1024, 256));
    ptrs.push_back(ts.back().get());
  }
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 8192;
  cfg.srq_size = 128;
  const uint64_t calls = delay ? 2000 : 8000;
  const test::ThreadedCopyrpcResult r = test::run_copyrpc_threads(ptrs, cfg, calls, 16);
  test::check_every_call_answered(r, ts, calls);
}
