// Device selection errors of the ibverbs control path. No RDMA device is needed: on a
// machine without one every request must fail with NoDeviceError saying so and how to
// choose a device; on a machine with devices, a bad name or index must list them.
#include <catch2/catch.hpp>
#include <string>

#include "transports/mlx5/device.hpp"
#include "transports/mlx5/direct_transport.hpp"
#include "transports/mlx5/hw_provider.hpp"
#include "transports/mlx5/verbs_common.hpp"
#include "transports/mlx5/verbs_transport.hpp"

using namespace bkv;
using namespace bkv::mlx5;

static_assert(Transport<DirectTransport<HwProvider>>);
static_assert(Transport<VerbsTransport>);

TEST_CASE("open_device without a matching RDMA device throws NoDeviceError with a useful message") {
  const auto devices = list_devices();
  if (devices.empty()) {
    for (const auto& [name, index] : {std::pair<std::string, int>{"", -1}, {"mlx5_7", -1}, {"", 3}}) {
      try {
        open_device(name, index);
        FAIL("open_device succeeded without any RDMA device");
      } catch (const NoDeviceError& e) {
        const std::string msg = e.what();
        CHECK_THAT(msg, Catch::Contains("no RDMA device found"));
        CHECK_THAT(msg, Catch::Contains("--device NAME"));
        CHECK_THAT(msg, Catch::Contains("--device-index N"));
        if (!name.empty()) CHECK_THAT(msg, Catch::Contains(name));
        if (index >= 0) CHECK_THAT(msg, Catch::Contains(std::to_string(index)));
      }
    }
  } else {
    try {
      open_device("no_such_rdma_device_zz", -1);
      FAIL("open_device accepted an unknown device name");
    } catch (const NoDeviceError& e) {
      const std::string msg = e.what();
      CHECK_THAT(msg, Catch::Contains("no_such_rdma_device_zz"));
      CHECK_THAT(msg, Catch::Contains(devices.front()));
    }
    CHECK_THROWS_AS(open_device("", static_cast<int>(devices.size()) + 5), NoDeviceError);
  }
}

TEST_CASE("a peer's connection blob is checked field by field before it reaches the device") {
  PortInfo ib{};
  ib.lid = 3;
  ib.link_layer = IBV_LINK_LAYER_INFINIBAND;
  ib.active_mtu = IBV_MTU_4096;
  ConnectInfo good{};
  good.qpn = 0x123;
  good.psn = 0xFFFFFF;  // the largest 24-bit PSN
  good.lid = 7;
  good.mtu = IBV_MTU_2048;
  good.link_layer = IBV_LINK_LAYER_INFINIBAND;
  CHECK_NOTHROW(verbs::check_remote_info(ib, 0x45, good));

  auto rejected = [&](ConnectInfo bad, const std::string& why) {
    try {
      verbs::check_remote_info(ib, 0x45, bad);
      FAIL("accepted a blob with " << why);
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains("QP 69 -> remote QP "));
      CHECK_THAT(e.what(), Catch::Contains(why));
    }
  };
  ConnectInfo c = good;
  c.psn = 0x1000000;  // one past 24 bits: ibv_modify_qp would truncate it to 0
  rejected(c, "remote PSN 16777216 is not a 24-bit value");
  c = good;
  c.qpn = 0x1000000;
  rejected(c, "invalid remote QP number");
  c.qpn = 0;
  rejected(c, "invalid remote QP number");
  c = good;
  c.mtu = IBV_MTU_4096 + 1;
  rejected(c, "invalid remote MTU code 6");
  c = good;
  c.link_layer = IBV_LINK_LAYER_ETHERNET;
  rejected(c, "remote link layer 2 differs from the local one 1");
  c = good;
  c.lid = 0;
  rejected(c, "remote LID is 0");
}
