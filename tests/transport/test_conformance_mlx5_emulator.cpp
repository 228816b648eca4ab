// The direct mlx5 data path (DirectTransport) on the software NIC emulator against the
// transport conformance suite. Payloads are not inlined here, so that the lkey of every
// request is checked (inline data is copied by the CPU and carries no key, as on a NIC).
#include <catch2/catch.hpp>

#include <deque>
#include <memory>

#include "tests/transport/conformance.hpp"
#include "transports/mlx5/emulator/emulated_transport.hpp"

namespace {

struct NoDelete {
  void operator()(bkv::mlx5::emu::EmulatedTransport*) const noexcept {}
};

struct EmulatorHarness {
  using T = bkv::mlx5::emu::EmulatedTransport;
  // Send-queue room is counted in building blocks, a post before connect() is refused,
  // and the responder's queue pair does not learn of a NAK it sent.
  static constexpr bool kSlotsAreWqes = false;
  static constexpr bool kPostBeforeConnectThrows = true;
  static constexpr bool kResponderEntersError = false;
  bkv::mlx5::emu::Fabric fabric;
  std::deque<T> transports;
  std::unique_ptr<T, NoDelete> make() {
    bkv::mlx5::DirectOptions o;
    o.sq_depth = 64;
    o.srq_size = 256;
    o.max_inline = 0;
    o.inline_head = 0;
    o.send_cq_entries = 1024;
    return std::unique_ptr<T, NoDelete>(
        &transports.emplace_back(fabric, bkv::mlx5::emu::NodeOptions{}, o, bkv::mlx5::emu::DeliveryMode::kEager));
  }
};

}  // namespace

BKV_TRANSPORT_CONFORMANCE("mlx5 emulator", "[mlx5][conformance]", EmulatorHarness)
