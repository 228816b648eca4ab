// copyrpc work-request ids: which of a Context's operations a send completion belongs to
// (docs/design_channels.md §copyrpc signalling). Local to one Context: never on the wire.
//
//    63  62 61                                                              0
//   +------+-----------------------------------------------------------------+
//   | kind | value                                                           |
//   +------+-----------------------------------------------------------------+
//
//   kind           value        the work request
//   kBatch         endpoint id  a batch's or a wrap marker's WRITE+IMM
//   kConsumerRead  endpoint id  the RDMA READ of the peer's consumed-position word
//   kRaw           raw slot     a raw READ or WRITE (post_raw_read / post_raw_write)
//
// Endpoint ids and raw slots are 32-bit, so every value fits below the kind bits and an
// id decodes to the kind and value it was made from.
#pragma once

#include <cstdint>

namespace bkv::copyrpc {

enum class WrKind : uint8_t { kBatch = 0, kConsumerRead = 1, kRaw = 2 };
inline constexpr uint32_t kWrKindCount = 3;

inline constexpr uint32_t kWrKindBits = 2;
inline constexpr uint32_t kWrValueBits = 64 - kWrKindBits;  // the kind sits above the value
inline constexpr uint64_t kWrValueMask = (uint64_t{1} << kWrValueBits) - 1;

static_assert(kWrKindCount <= (1u << kWrKindBits), "every kind fits the kind bits");
static_assert(kWrValueMask >= UINT32_MAX, "every 32-bit value (endpoint id, raw slot) fits the value bits");

constexpr uint64_t encode_wr_id(WrKind kind, uint32_t value) noexcept {
  return (uint64_t{static_cast<uint8_t>(kind)} << kWrValueBits) | value;
}
constexpr WrKind wr_kind(uint64_t wr_id) noexcept { return static_cast<WrKind>(wr_id >> kWrValueBits); }
constexpr uint64_t wr_value(uint64_t wr_id) noexcept { return wr_id & kWrValueMask; }

// Test vectors: the kinds in the top two bits, the value untouched below them.
static_assert(encode_wr_id(WrKind::kBatch, 7) == 0x0000'0000'0000'0007ull);
static_assert(encode_wr_id(WrKind::kConsumerRead, 7) == 0x4000'0000'0000'0007ull);
static_assert(encode_wr_id(WrKind::kRaw, UINT32_MAX) == 0x8000'0000'FFFF'FFFFull);
static_assert(wr_kind(encode_wr_id(WrKind::kConsumerRead, UINT32_MAX)) == WrKind::kConsumerRead &&
              wr_value(encode_wr_id(WrKind::kConsumerRead, UINT32_MAX)) == UINT32_MAX);
static_assert(wr_kind(encode_wr_id(WrKind::kRaw, 0)) == WrKind::kRaw && wr_value(encode_wr_id(WrKind::kRaw, 0)) == 0);

}  // namespace bkv::copyrpc
