// copyrpc end to end over the UCX transport in one process (UCX_TLS=sm,self and tcp):
// the property driver (tests/copyrpc/property_driver.hpp) with one thread driving every
// worker, and a run with every context (and its worker) on its own thread.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tests/copyrpc/property_driver.hpp"
#include "tests/transport/copyrpc_threads.hpp"
#include "transports/ucx/ucx_transport.hpp"

using namespace bkv;
using ucx::UcxTransport;

namespace {

std::unique_ptr<UcxTransport> make_ucx(const std::string& tls) {
  ucx::Config c;
  c.tls = tls;
  c.send_queue_depth = 256;
  c.srq_capacity = 1024;
  return std::make_unique<UcxTransport>(c);
}

struct UcxCluster {
  using Ctx = copyrpc::Context<UcxTransport, uint64_t>;
  std::vector<std::unique_ptr<UcxTransport>> transports;
  std::vector<std::unique_ptr<Ctx>> ctxs;
  std::vector<std::vector<test::PropertyDriver<UcxTransport>::Link>> links;

  UcxCluster(uint32_t nodes, copyrpc::ContextConfig cfg, const std::string& tls) {
    for (uint32_t i = 0; i < nodes; ++i) {
      transports.push_back(make_ucx(tls));
      ctxs.push_back(std::make_unique<Ctx>(*transports.back(), cfg));
    }
    links = test::connect_full_mesh(ctxs);
  }
  ~UcxCluster() { ctxs.clear(); }  // contexts go before their transports
  std::vector<Ctx*> ctx_ptrs() { return test::raw_pointers(ctxs); }
  void pump() {
    for (auto& t : transports) t->progress();
  }
};

}  // namespace

TEST_CASE("copyrpc over UCX: random interleavings, exactly-once answers, wraps", "[copyrpc][ucx]") {
  const std::string tls = GENERATE(std::string("sm,self"), std::string("tcp"));
  INFO("UCX_TLS=" << tls);
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 4096;
  cfg.srq_size = 64;
  UcxCluster cluster(3, cfg, tls);
  test::PropertyDriver<UcxTransport> driver(cluster.ctx_ptrs(), cluster.links, 21, [&] { cluster.pump(); });
  const test::PropertyStats st = driver.run(tls == "tcp" ? 6000 : 15000);
  CHECK(st.calls > 500);
  CHECK(st.responses == st.calls);
  CHECK(st.replies == st.calls);
  CHECK(st.wraps > 10);
  for (auto& t : cluster.transports) CHECK(t->protocol_errors() == 0);
}

TEST_CASE("copyrpc over UCX: large rings with rendezvous-sized batches", "[copyrpc][ucx]") {
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 1u << 20;  // payloads up to 128 KiB: batches cross UCX's rendezvous threshold
  cfg.srq_size = 256;
  UcxCluster cluster(2, cfg, "sm,self");
  test::PropertyDriver<UcxTransport> driver(cluster.ctx_ptrs(), cluster.links, 5, [&] { cluster.pump(); });
  const test::PropertyStats st = driver.run(3000);
  CHECK(st.responses == st.calls);
  uint64_t rndv = 0;
  for (auto& t : cluster.transports) {
    CHECK(t->protocol_errors() == 0);
    rndv += t->rendezvous_receives();
  }
  CHECK(rndv > 0);
}

TEST_CASE("copyrpc over UCX: every context and worker on its own thread", "[copyrpc][ucx][threads]") {
  const std::string tls = GENERATE(std::string("sm,self"), std::string("tcp"));
  INFO("UCX_TLS=" << tls);
  std::vector<std::unique_ptr<UcxTransport>> ts;
  std::vector<UcxTransport*> ptrs;
  for (int i = 0; i < 3; ++i) {
    ts.push_back(make_ucx(tls));
    ptrs.push_back(ts.back().get());
  }
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 16384;
  cfg.srq_size = 128;
  const uint64_t calls = 10000;
  const test::ThreadedCopyrpcResult r = test::run_copyrpc_threads(ptrs, cfg, calls, 16);
  test::check_every_call_answered(r, ts, calls);
}
