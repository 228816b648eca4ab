// The discrete-event transport (sim/des_transport.hpp over the NIC model) against the
// transport conformance suite, with the default NIC and with heavy wire jitter (which
// must never reorder one queue pair).
#include <catch2/catch.hpp>

#include <memory>

#include "sim/distributions.hpp"
#include "tests/sim/sim_cluster.hpp"
#include "tests/transport/conformance.hpp"

namespace {

struct NoDelete {
  void operator()(bkv::sim::DesTransport*) const noexcept {}
};

// Three simulated nodes (the suite's third is the owner of a foreign key), handed out in
// turn; the cluster owns the transports.
struct DesHarness {
  using T = bkv::sim::DesTransport;
  bkv::test::SimCluster cluster;
  uint32_t next = 0;
  explicit DesHarness(const bkv::sim::NicConfig& nic = bkv::sim::NicConfig{})
      : cluster(3, nic, 1, bkv::sim::DeviceContextConfig{256, 64, 0}) {}
  std::unique_ptr<T, NoDelete> make() { return std::unique_ptr<T, NoDelete>(cluster.t[next++ % 3]); }
};

struct JitteryDesHarness : DesHarness {
  static bkv::sim::NicConfig jittery_nic() {
    bkv::sim::NicConfig n;
    n.latency.jitter = bkv::sim::Distribution::exponential(2000);
    return n;
  }
  JitteryDesHarness() : DesHarness(jittery_nic()) {}
};

}  // namespace

BKV_TRANSPORT_CONFORMANCE("des", "[des][conformance]", DesHarness)
BKV_TRANSPORT_CONFORMANCE("des with heavy jitter", "[des][conformance]", JitteryDesHarness)

TEST_CASE("des: a request to a QP connected to another QP is discarded there", "[des]") {
  DesHarness h;
  bkv::test::check_stranger_dropped(h);
}
