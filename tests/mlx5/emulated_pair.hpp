// Two emulated mlx5 NICs (transports/mlx5/emulator) with one connected QP pair: a
// registered source buffer at A, filled with a known pattern, and a registered target
// buffer at B; the tests of the direct data path against the emulator build on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transports/mlx5/emulator/emulated_transport.hpp"

namespace bkv::test {

// Direct data path options: a send queue of `sq_depth` blocks, an SRQ of `srq_size`
// receives, a send CQ of `send_cq` entries; the rest at their defaults.
inline mlx5::DirectOptions direct_options(uint32_t sq_depth, uint32_t srq_size, uint32_t send_cq) {
  mlx5::DirectOptions o;
  o.sq_depth = sq_depth;
  o.srq_size = srq_size;
  o.send_cq_entries = send_cq;
  return o;
}

// The direct data path's plainest posting: a doorbell only, nothing inline, and a NIC
// without BlueFlame.
inline void doorbell_only_no_inline(mlx5::emu::NodeOptions& nic, mlx5::DirectOptions& dp) {
  dp.doorbell = mlx5::DoorbellMode::kDoorbellOnly;
  dp.max_inline = 0;
  dp.inline_head = 0;
  nic.bf_size = 0;
}

struct EmulatedPair {
  mlx5::emu::Fabric fabric;
  mlx5::emu::EmulatedTransport a;
  mlx5::emu::EmulatedTransport b;
  mlx5::emu::EmulatedTransport::QueuePair& qa;
  mlx5::emu::EmulatedTransport::QueuePair& qb;
  std::vector<std::byte> src, dst;
  MemoryRegion src_mr, dst_mr;

  // Source and target of `bytes` each; source byte i is (i * 13 + 7) mod 256, the target
  // starts zeroed and is registered with `dst_access`.
  EmulatedPair(const mlx5::emu::NodeOptions& na, const mlx5::emu::NodeOptions& nb, const mlx5::DirectOptions& o,
               mlx5::emu::DeliveryMode mode, size_t bytes, uint32_t dst_access)
      : a(fabric, na, o, mode),
        b(fabric, nb, o, mode),
        qa(a.create_queue_pair()),
        qb(b.create_queue_pair()),
        src(bytes),
        dst(bytes) {
    qa.connect(qb.local_info());
    qb.connect(qa.local_info());
    for (size_t i = 0; i < bytes; ++i) src[i] = std::byte(static_cast<uint8_t>(i * 13 + 7));
    src_mr = a.register_memory(src.data(), bytes, kAccessLocalWrite);
    dst_mr = b.register_memory(dst.data(), bytes, dst_access);
  }
  // The target from byte `off` on.
  RemoteBuffer at(uint64_t off) const {
    return RemoteBuffer{reinterpret_cast<uint64_t>(dst.data()) + off, dst_mr.rkey, 0, dst.size() - off};
  }
};

}  // namespace bkv::test
