// copyrpc wire format (docs/design_channels.md §copyrpc wire format). Little-endian.
//
// One RDMA WRITE-with-immediate carries one batch into the peer's receive ring:
//
//   +-----------------------------------------+  <- 32-byte aligned ring position
//   | FlowMetadata (32 B)                     |
//   |   ring_credit_return u64                |  receive-ring bytes consumed since the
//   |                                         |  previous notification
//   |   credit_grant       u64                |  new response credit for the peer (bytes)
//   |   message_count      u32                |  0xFFFFFFFF = wrap marker
//   |   zero               12 B               |
//   +-----------------------------------------+
//   | MessageHeader (12 B) + payload + pad    |  padded to 32 bytes
//   | ...                                     |
//   +-----------------------------------------+
//
// imm = batch bytes / 32. A wrap marker's imm covers the bytes from the marker to the
// ring end, so the receiver's producer lands exactly on the next cycle.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace bkv::copyrpc {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian and is written with plain stores");

inline constexpr uint32_t kAlignment = 32;
inline constexpr uint32_t kHeaderSize = 12;
inline constexpr uint32_t kFlowMetadataSize = 32;
inline constexpr uint32_t kResponseFlag = 0x8000'0000u;
inline constexpr uint32_t kWrapMessageCount = 0xFFFF'FFFFu;
inline constexpr uint32_t kSignalInterval = 64;  // one signalled WQE in 64
inline constexpr uint64_t kDefaultRingSize = 1ull << 20;
inline constexpr uint32_t kDefaultSrqSize = 1024;
inline constexpr uint32_t kMaxCallId = 0x7FFF'FFFFu;

static_assert(std::has_single_bit(kAlignment));
static_assert(kFlowMetadataSize % kAlignment == 0);
static_assert(kHeaderSize < kAlignment);

struct MessageHeader {
  uint32_t call_id;                   // MSB set = response
  uint32_t response_allowance_units;  // requests: response allowance in 32-byte units; responses: 0
  uint32_t payload_len;               // payload bytes following the header
};
static_assert(sizeof(MessageHeader) == kHeaderSize && std::is_trivially_copyable_v<MessageHeader>);
static_assert(offsetof(MessageHeader, call_id) == 0 && offsetof(MessageHeader, response_allowance_units) == 4 &&
              offsetof(MessageHeader, payload_len) == 8);

struct FlowMetadata {
  uint64_t ring_credit_return;
  uint64_t credit_grant;
  uint32_t message_count;
  uint8_t zero[12];
};
static_assert(sizeof(FlowMetadata) == kFlowMetadataSize && std::is_trivially_copyable_v<FlowMetadata>);
static_assert(offsetof(FlowMetadata, ring_credit_return) == 0 &&
              offsetof(FlowMetadata, credit_grant) == 8 && offsetof(FlowMetadata, message_count) == 16 &&
              offsetof(FlowMetadata, zero) == 20);

constexpr uint64_t align_up(uint64_t v, uint64_t a = kAlignment) noexcept { return (v + a - 1) & ~(a - 1); }
constexpr uint64_t align_down(uint64_t v, uint64_t a = kAlignment) noexcept { return v & ~(a - 1); }

// Bytes a message with this payload occupies in a ring: header + payload, padded to 32.
constexpr uint64_t padded_message_size(uint64_t payload_len) noexcept {
  return align_up(kHeaderSize + payload_len);
}
static_assert(padded_message_size(0) == 32 && padded_message_size(20) == 32 &&
              padded_message_size(21) == 64 && padded_message_size(52) == 64);

// Credit a call reserves at the peer for the peer's response: the padded response plus
// a flow-metadata block (the responder may have to open a batch or emit a wrap marker).
constexpr uint64_t internal_allowance(uint64_t response_allowance) noexcept {
  return align_up(padded_message_size(response_allowance) + kFlowMetadataSize);
}
static_assert(internal_allowance(0) == 64 && internal_allowance(20) == 64 && internal_allowance(21) == 96);

// The largest reply payload an allowance (in bytes, as carried by the header) admits.
constexpr uint64_t max_reply_payload(uint64_t allowance_bytes) noexcept {
  return allowance_bytes < kFlowMetadataSize + kAlignment
             ? 0
             : allowance_bytes - kFlowMetadataSize - kHeaderSize;
}

constexpr uint32_t encode_imm(uint64_t delta_bytes) noexcept {
  return static_cast<uint32_t>(delta_bytes / kAlignment);
}
constexpr uint64_t decode_imm(uint32_t imm) noexcept { return uint64_t{imm} * kAlignment; }
static_assert(decode_imm(encode_imm(96)) == 96);
// The smallest non-zero immediate covers exactly one flow-metadata block: a batch is
// never shorter than its metadata (the receiver checks imm != 0, nothing more).
static_assert(decode_imm(1) == kFlowMetadataSize);

constexpr bool is_response(uint32_t call_id) noexcept { return (call_id & kResponseFlag) != 0; }
constexpr uint32_t to_response_id(uint32_t call_id) noexcept { return call_id | kResponseFlag; }
constexpr uint32_t from_response_id(uint32_t call_id) noexcept { return call_id & ~kResponseFlag; }

// Copies a payload into a ring. Payloads are mostly a few dozen bytes: fixed-size,
// possibly overlapping moves (compiled to a couple of vector loads/stores, no libc call)
// cover up to 64 bytes without reading past the source; longer ones go to memcpy.
inline void copy_payload(std::byte* dst, const std::byte* src, size_t n) noexcept {
  if (n > 64) {
    std::memcpy(dst, src, n);
  } else if (n > 32) {
    std::memcpy(dst, src, 32);
    std::memcpy(dst + n - 32, src + n - 32, 32);
  } else if (n > 16) {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n == 16) {
    std::memcpy(dst, src, 16);
  } else if (n >= 8) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

// Loads and stores through memcpy: ring memory is written by a NIC and carries no C++
// objects, so it is read and written as bytes.
// Headers go field by field, so the fields land in registers (a whole-struct copy
// makes the compiler bounce them through the stack).
inline MessageHeader load_header(const std::byte* p) noexcept {
  MessageHeader h;
  std::memcpy(&h.call_id, p + offsetof(MessageHeader, call_id), sizeof h.call_id);
  std::memcpy(&h.response_allowance_units, p + offsetof(MessageHeader, response_allowance_units),
              sizeof h.response_allowance_units);
  std::memcpy(&h.payload_len, p + offsetof(MessageHeader, payload_len), sizeof h.payload_len);
  return h;
}
inline void store_header(std::byte* p, const MessageHeader& h) noexcept {
  std::memcpy(p + offsetof(MessageHeader, call_id), &h.call_id, sizeof h.call_id);
  std::memcpy(p + offsetof(MessageHeader, response_allowance_units), &h.response_allowance_units,
              sizeof h.response_allowance_units);
  std::memcpy(p + offsetof(MessageHeader, payload_len), &h.payload_len, sizeof h.payload_len);
}
// Only the fields are loaded (the receiver does not look at the zero bytes), one by one
// for the same reason as the header's.
inline FlowMetadata load_metadata(const std::byte* p) noexcept {
  FlowMetadata m{};
  std::memcpy(&m.ring_credit_return, p + offsetof(FlowMetadata, ring_credit_return), sizeof m.ring_credit_return);
  std::memcpy(&m.credit_grant, p + offsetof(FlowMetadata, credit_grant), sizeof m.credit_grant);
  std::memcpy(&m.message_count, p + offsetof(FlowMetadata, message_count), sizeof m.message_count);
  return m;
}
// Stored field by field as well (a whole block built first goes through the stack).
inline void store_metadata(std::byte* p, uint64_t credit_return, uint64_t grant, uint32_t count) noexcept {
  std::memcpy(p + offsetof(FlowMetadata, ring_credit_return), &credit_return, sizeof credit_return);
  std::memcpy(p + offsetof(FlowMetadata, credit_grant), &grant, sizeof grant);
  std::memcpy(p + offsetof(FlowMetadata, message_count), &count, sizeof count);
  std::memset(p + offsetof(FlowMetadata, zero), 0, sizeof FlowMetadata::zero);
}

}  // namespace bkv::copyrpc
