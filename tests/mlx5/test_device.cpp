// Device selection errors of the ibverbs control path. No RDMA device is needed: on a
// machine without one every request must fail with NoDeviceError saying so and how to
// choose a device; on a machine with devices, a bad name or index must list them.
#include <catch2/catch.hpp>
#include <string>

#include "transports/mlx5/device.hpp"
#include "transports/mlx5/direct_transport.hpp"
#include "transports/mlx5/hw_provider.hpp"
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
