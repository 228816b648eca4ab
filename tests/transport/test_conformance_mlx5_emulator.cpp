// The direct mlx5 data path (DirectTransport) on the software NIC emulator against the
// transport conformance suite (options and traits: direct_harness.hpp).
#include <catch2/catch.hpp>

#include <deque>
#include <memory>

#include "tests/transport/conformance.hpp"
#include "tests/transport/direct_harness.hpp"
#include "transports/mlx5/emulator/emulated_transport.hpp"

namespace {

struct NoDelete {
  void operator()(bkv::mlx5::emu::EmulatedTransport*) const noexcept {}
};

struct EmulatorHarness : bkv::test::DirectHarnessTraits {
  using T = bkv::mlx5::emu::EmulatedTransport;
  bkv::mlx5::emu::Fabric fabric;
  std::deque<T> transports;
  std::unique_ptr<T, NoDelete> make() {
    return std::unique_ptr<T, NoDelete>(&transports.emplace_back(
        fabric, bkv::mlx5::emu::NodeOptions{}, options(), bkv::mlx5::emu::DeliveryMode::kEager));
  }
};

}  // namespace

BKV_TRANSPORT_CONFORMANCE("mlx5 emulator", "[mlx5][conformance]", EmulatorHarness)

TEST_CASE("mlx5 emulator: a request to a QP connected to another QP is discarded there", "[mlx5]") {
  EmulatorHarness h;
  bkv::test::check_stranger_dropped(h);
}
