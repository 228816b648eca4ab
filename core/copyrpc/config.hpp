// copyrpc ContextConfig: a Context's settings, the checks they pass when the Context is
// made, and the checks a peer's settings pass at connect (docs/design_channels.md §copyrpc).
// Each check throws std::invalid_argument naming the setting and its value.
#pragma once

#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/copyrpc/wire.hpp"

namespace bkv::copyrpc {

struct ContextConfig {
  uint64_t ring_size = kDefaultRingSize;  // per endpoint, send and receive; power of two
  uint32_t srq_size = kDefaultSrqSize;    // zero-length receives kept posted
  uint64_t max_resp_reservation = 0;      // 0 = ring_size / 4
  uint32_t cq_poll_batch = 64;            // completions fetched per transport poll call
};

inline constexpr uint64_t kMinRingSize = 4096;
// A batch lies within one ring cycle (batch_rules.hpp, batch_before_ring_end) and goes out as
// one RDMA WRITE, whose length the verbs and the mlx5 data segment cap at 2^31 bytes and
// copyrpc keeps in 32 bits (PendingEmit::write_len): so a ring is at most 2^31 bytes.
inline constexpr uint64_t kMaxRingSize = uint64_t{1} << 31;
inline constexpr uint64_t kMaxRdmaMessage = uint64_t{1} << 31;
static_assert(std::has_single_bit(kMinRingSize) && std::has_single_bit(kMaxRingSize) && kMinRingSize <= kMaxRingSize);
static_assert(kMaxRingSize <= kMaxRdmaMessage && kMaxRingSize <= uint64_t{UINT32_MAX} + 1);

// `c` checked, with its defaults filled in (max_resp_reservation 0 -> ring_size / 4),
// for a transport whose SRQ holds `srq_capacity` receives and whose send queue holds
// `send_queue_depth` WQEs.
inline ContextConfig checked_config(ContextConfig c, uint64_t srq_capacity, uint64_t send_queue_depth) {
  if (!std::has_single_bit(c.ring_size) || c.ring_size < kMinRingSize || c.ring_size > kMaxRingSize)
    throw std::invalid_argument("copyrpc: ring_size must be a power of two in [4096, 2^31], got " +
                                std::to_string(c.ring_size));
  if (c.max_resp_reservation == 0) c.max_resp_reservation = c.ring_size / 4;
  // Below internal_allowance(0) not even a call with an empty reply could be granted.
  if (c.max_resp_reservation % kAlignment != 0 || c.max_resp_reservation > c.ring_size / 4 ||
      c.max_resp_reservation < internal_allowance(0))
    throw std::invalid_argument("copyrpc: max_resp_reservation must be 32-aligned, >= 64 and <= ring_size/4, got " +
                                std::to_string(c.max_resp_reservation));
  if (c.srq_size == 0 || c.srq_size > srq_capacity)
    throw std::invalid_argument("copyrpc: srq_size must be in [1, transport SRQ capacity]");
  // Signalling one WQE in kSignalInterval needs room for two intervals in the send
  // queue, or the queue fills before the signalled completion can free it.
  if (send_queue_depth < 2 * kSignalInterval)
    throw std::invalid_argument("copyrpc: transport send queue must hold >= 2*64 WQEs");
  if (c.cq_poll_batch == 0) throw std::invalid_argument("copyrpc: cq_poll_batch must be >= 1");
  return c;
}

// A peer's settings as its EndpointInfo gives them (the size of its receive ring, the
// credit it grants at connect), checked against ours at connect: both sides must use one
// ring size, and the peer's initial credit must be one a Context of that ring can grant.
inline void check_peer_settings(const ContextConfig& ours, uint64_t peer_ring_size, uint64_t peer_initial_credit) {
  if (peer_ring_size != ours.ring_size)
    throw std::invalid_argument("copyrpc: peer ring size " + std::to_string(peer_ring_size) +
                                " differs from ours " + std::to_string(ours.ring_size));
  if (peer_initial_credit > ours.ring_size / 4 || peer_initial_credit % kAlignment != 0)
    throw std::invalid_argument("copyrpc: peer initial credit out of range");
}

}  // namespace bkv::copyrpc
