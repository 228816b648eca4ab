// The transport conformance suite on a real RDMA device: the portable verbs transport
// ("verbs") and the direct mlx5 data path with the hardware control path ("mlx5").
// Both are compiled on every machine that has the rdma-core headers; they run only when
// a device is present. Usage: test_conformance_rdma verbs|mlx5 [Catch2 options]
// Exit status 77 (reported by ctest as skipped, SKIP_RETURN_CODE) when the machine has
// no RDMA device, or (mlx5) none driven by the mlx5 provider; the line printed says which.
// BKV_RDMA_DEVICE names the device to use (default: the first one).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "tests/transport/conformance.hpp"
#include "tests/transport/direct_harness.hpp"
#include "transports/mlx5/device.hpp"
#include "transports/mlx5/direct_transport.hpp"
#include "transports/mlx5/hw_provider.hpp"
#include "transports/mlx5/verbs_transport.hpp"

namespace {

constexpr int kSkipped = 77;  // ctest SKIP_RETURN_CODE (tests/transport.cmake)

std::string device_name() {
  const char* env = std::getenv("BKV_RDMA_DEVICE");
  return env != nullptr ? env : "";
}

// One device per harness; the transports are two (or three) contexts on it, connected
// through the port's loopback.
struct VerbsHarness {
  using T = bkv::mlx5::VerbsTransport;
  static constexpr bool kPostBeforeConnectThrows = true;
  static constexpr bool kResponderEntersError = false;
  bkv::mlx5::Device dev = bkv::mlx5::open_device(device_name());
  std::unique_ptr<T> make() {
    bkv::mlx5::VerbsOptions o;
    o.sq_depth = 64;
    o.srq_size = 256;
    o.max_inline = 0;  // every request's lkey is checked
    return std::make_unique<T>(dev, o);
  }
};

struct NoDelete {
  void operator()(bkv::mlx5::DirectTransport<bkv::mlx5::HwProvider>*) const noexcept {}
};

struct Mlx5HwHarness : bkv::test::DirectHarnessTraits {
  using T = bkv::mlx5::DirectTransport<bkv::mlx5::HwProvider>;
  bkv::mlx5::Device dev = bkv::mlx5::open_device(device_name());
  std::deque<bkv::mlx5::HwProvider> providers;
  std::deque<T> transports;
  std::unique_ptr<T, NoDelete> make() {
    return std::unique_ptr<T, NoDelete>(&transports.emplace_back(providers.emplace_back(dev), options()));
  }
};

}  // namespace

BKV_TRANSPORT_CONFORMANCE("verbs", "[verbs]", VerbsHarness)
BKV_TRANSPORT_CONFORMANCE("mlx5 hardware", "[mlx5hw]", Mlx5HwHarness)

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "";
  if (which != "verbs" && which != "mlx5") {
    std::fprintf(stderr, "usage: %s verbs|mlx5 [Catch2 options]\n", argv[0]);
    return 2;
  }
  const std::vector<std::string> devices = bkv::mlx5::list_devices();
  if (devices.empty()) {
    std::printf("SKIPPED: no RDMA device on this machine: the %s transport conformance suite did not run\n",
                which.c_str());
    return kSkipped;
  }
  if (which == "mlx5") {
    const bkv::mlx5::Device dev = bkv::mlx5::open_device(device_name());
    if (!dev.is_mlx5()) {
      std::printf("SKIPPED: RDMA device %s is not driven by the mlx5 provider: the mlx5 hardware conformance "
                  "suite did not run\n",
                  dev.name().c_str());
      return kSkipped;
    }
  }
  std::vector<char*> args{argv[0]};
  std::string tag = which == "verbs" ? "[verbs]" : "[mlx5hw]";
  args.push_back(tag.data());
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  return Catch::Session().run(static_cast<int>(args.size()), args.data());
}
