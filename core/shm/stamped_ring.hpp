// The SPSC ring used by ipc and flux: FastForward style (a ready flag inside each slot,
// no shared head/tail indices), with lap-stamped flags so that the consumer never
// writes the producer's lines.
//
// Slot layout: {seq atomic u32 @0, tag u32 @4, payload @8}, align_up(8 + sizeof(T), 64)
// bytes, so a slot is its own cache line(s) and one message moves one line.
//
// Rule: the producer writes tag and payload, then seq = lap_stamp(pos) with release;
// the consumer at position pos waits for seq == lap_stamp(pos) (acquire), then reads.
// A slot left over from the previous lap carries lap_stamp(pos - depth) != expected, and
// a never-written slot carries 0, which no lap stamp equals (stamps start at 1; after
// 2^32 laps the stamp 0 recurs, but by then every slot holds the previous lap's stamp).
//
// Why FastForward and not Lamport: a Lamport ring shares its head and tail indices, so
// every push and pop moves the index lines between the cores in addition to the data
// (docs/calibration.md §C4: Lamport 47.6 Mops/s vs FastForward 90.2 Mops/s). Why lap stamps
// instead of the consumer clearing the flag: in an RPC channel the producer already
// knows a slot is free from the protocol's in-flight bound (ipc: a client never has more
// than depth requests in flight; flux: capacity >= 2 * max_inflight), so the consumer
// need not tell it, and a request/response round trip costs exactly two line transfers,
// as a raw cache-line ping-pong does. The ring itself does NOT check for space: the
// caller's protocol guarantees it (each user documents its argument).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/shm/common.hpp"

namespace bkv::shm {

struct StampedSlotHeader {
  uint32_t seq;  // atomic: lap stamp of the position last written here
  uint32_t tag;  // user field (ipc: request slot token; flux: kind + slot id)
};
static_assert(std::is_standard_layout_v<StampedSlotHeader> && sizeof(StampedSlotHeader) == 8);
static_assert(offsetof(StampedSlotHeader, seq) == 0 && offsetof(StampedSlotHeader, tag) == 4);
inline constexpr size_t kStampedPayloadOffset = 8;

template <class T>
inline constexpr size_t stamped_slot_size = align_up(kStampedPayloadOffset + sizeof(T), kCacheLine);

// Stamp of virtual position pos in a ring of 2^log2_depth slots: lap number + 1.
constexpr uint32_t lap_stamp(uint64_t pos, uint32_t log2_depth) noexcept {
  return static_cast<uint32_t>(pos >> log2_depth) + 1u;
}
static_assert(lap_stamp(0, 3) == 1 && lap_stamp(7, 3) == 1 && lap_stamp(8, 3) == 2);

// A view of one ring (depth slots of T starting at base); positions are kept by the
// producer and the consumer themselves.
template <class T>
class StampedRing {
 public:
  static_assert(std::is_trivially_copyable_v<T>, "ring payloads are copied byte-wise");
  static constexpr size_t kSlotSize = stamped_slot_size<T>;
  // depth < 2^32 and a slot below 2^31 bytes: bytes(depth) < 2^63 cannot wrap.
  static_assert(kSlotSize < (size_t{1} << 31));

  StampedRing() = default;
  // depth is a power of two (the users validate it): positions map to pos & (depth - 1).
  StampedRing(std::byte* base, uint32_t depth) noexcept
      : base_(base), mask_(depth - 1), log2_depth_(log2_pow2(depth)) {
    assert(is_pow2(depth));
  }

  static constexpr size_t bytes(uint32_t depth) noexcept { return size_t{depth} * kSlotSize; }

  // Producer: the caller guarantees position pos - depth has been consumed.
  void publish(uint64_t pos, uint32_t tag, const T& value) const noexcept {
    std::byte* s = slot(pos);
    auto& h = *reinterpret_cast<StampedSlotHeader*>(s);
    h.tag = tag;
    std::memcpy(s + kStampedPayloadOffset, &value, sizeof(T));
    atomic_field(h.seq).store(lap_stamp(pos, log2_depth_), std::memory_order_release);
  }

  // Consumer: has position pos been published?
  bool ready(uint64_t pos) const noexcept {
    auto& h = *reinterpret_cast<StampedSlotHeader*>(slot(pos));
    return atomic_field(h.seq).load(std::memory_order_acquire) == lap_stamp(pos, log2_depth_);
  }

  // Consumer, after ready(pos) returned true: copies the entry out.
  void read(uint64_t pos, uint32_t& tag, T& value) const noexcept {
    const std::byte* s = slot(pos);
    tag = reinterpret_cast<const StampedSlotHeader*>(s)->tag;
    std::memcpy(&value, s + kStampedPayloadOffset, sizeof(T));
  }

  // Consumer, after ready(pos) returned true: the tag alone.
  uint32_t tag(uint64_t pos) const noexcept { return reinterpret_cast<const StampedSlotHeader*>(slot(pos))->tag; }

  uint32_t depth() const noexcept { return mask_ + 1; }
  // Where position pos's slot lies (a cache hint's address: ready(pos) reads its first line).
  const void* slot_address(uint64_t pos) const noexcept { return slot(pos); }

 private:
  std::byte* slot(uint64_t pos) const noexcept { return base_ + (pos & mask_) * kSlotSize; }

  std::byte* base_ = nullptr;
  uint32_t mask_ = 0;
  uint32_t log2_depth_ = 0;
};

}  // namespace bkv::shm
