// What the conformance harnesses of the direct mlx5 data path (on the NIC emulator and
// on hardware) share: their traits and their options.
#pragma once

#include "transports/mlx5/direct_transport.hpp"

namespace bkv::test {

struct DirectHarnessTraits {
  // Send-queue room is counted in building blocks, a post before connect() is refused,
  // and the responder's queue pair does not learn of a NAK it sent.
  static constexpr bool kSlotsAreWqes = false;
  static constexpr bool kPostBeforeConnectThrows = true;
  static constexpr bool kResponderEntersError = false;

  // Payloads are not inlined, so that the lkey of every request is checked (inline data
  // is copied by the CPU and carries no key, as on a NIC).
  static mlx5::DirectOptions options() {
    mlx5::DirectOptions o;
    o.sq_depth = 64;
    o.srq_size = 256;
    o.max_inline = 0;
    o.inline_head = 0;
    o.send_cq_entries = 1024;
    return o;
  }
};

}  // namespace bkv::test
