// Bulk-value messages: data_put / data_get (docs/data.md §Protocol). Little-endian.
//
// A value too large for an RPC moves by one-sided RDMA; copyrpc carries only these
// small messages. The requester's buffers live in one registered region split into
// equal slices, one per client; a request names a range of its client's slice.
//
//   RegionAnnouncement (32 B), first message on an endpoint, requester -> owner:
//   +------------------------------------------------+
//   | kind u8 = kAnnounceRegion | reserved u8[3] = 0  |  @0
//   | rkey u32                                        |  @4   rkey of the whole region
//   | addr u64                                        |  @8   address of slice 0
//   | slice_bytes u64                                 |  @16  bytes per slice
//   | slices u32 | reserved u32 = 0                   |  @24  number of slices
//   +------------------------------------------------+
//
//   DataRequest (40 B), requester -> owner (also the client -> daemon #0 slot payload):
//   +------------------------------------------------+
//   | kind u8 (kDataPut / kDataGet) | reserved u8[3]  |  @0
//   | rank u32                                        |  @4   owner node
//   | key u64                                         |  @8
//   | offset u64                                      |  @16  within the slice
//   | length u32                                      |  @24  put: value bytes; get: buffer capacity
//   | slice u32                                       |  @28  the client's slice
//   | rkey u32 | reserved u32 = 0                     |  @32  must equal the announced rkey
//   +------------------------------------------------+
//
//   DataResponse (16 B), owner -> requester:
//   | kind u8 | error u8 | reserved u8[2] = 0 | length u32 | key u64 |
//   length: GetOk -> value bytes written at the request's offset; else 0.
//   key: the request's key (kError: the offending key or 0).
//
// data_put: the owner RDMA-READs [addr + slice * slice_bytes + offset, + length) into its
// store, then answers PutOk. data_get: the owner RDMA-WRITEs the value to that range and
// then answers GetOk (RC order puts the data before the answer), or GetNotFound.
// The owner checks every field against the announcement before the NIC sees an address.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>

namespace bkv::kv {

enum class DataKind : uint8_t { kInvalid = 0, kDataPut = 1, kDataGet = 2, kAnnounceRegion = 3 };

enum class DataResponseKind : uint8_t {
  kInvalid = 0,
  kPutOk = 1,
  kGetOk = 2,
  kGetNotFound = 3,
  kAnnounceOk = 4,
  kError = 5,
};

enum class DataError : uint8_t {
  kNone = 0,
  kMalformedRequest = 1,  // bytes failed valid()
  kKeyOutOfRange = 2,     // key >= key_range of the owner
  kWrongRank = 3,         // the request names another node
  kNoRegion = 4,          // no region was announced on this endpoint
  kBadRkey = 5,           // rkey differs from the announced one
  kOutsideBuffer = 6,     // slice or [offset, offset + length) outside the client's slice
  kValueTooLarge = 7,     // put longer than the owner's largest value
  kBufferTooSmall = 8,    // get: the stored value is longer than the buffer
  kTransferFailed = 9,    // the RDMA READ or WRITE completed with an error
};
inline constexpr uint8_t kMaxDataError = static_cast<uint8_t>(DataError::kTransferFailed);
inline constexpr uint32_t kDataErrorCount = kMaxDataError + 1;

constexpr const char* to_string(DataError e) noexcept {
  switch (e) {
    case DataError::kNone: return "none";
    case DataError::kMalformedRequest: return "malformed request";
    case DataError::kKeyOutOfRange: return "key out of range";
    case DataError::kWrongRank: return "request for another rank";
    case DataError::kNoRegion: return "no buffer region announced";
    case DataError::kBadRkey: return "rkey does not match the announced region";
    case DataError::kOutsideBuffer: return "range outside the client's buffer";
    case DataError::kValueTooLarge: return "value larger than the store's largest value";
    case DataError::kBufferTooSmall: return "value larger than the client's buffer";
    case DataError::kTransferFailed: return "RDMA transfer failed";
  }
  return "unknown data error";
}

struct RegionAnnouncement {
  DataKind kind = DataKind::kAnnounceRegion;
  uint8_t reserved[3] = {0, 0, 0};
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint64_t slice_bytes = 0;
  uint32_t slices = 0;
  uint32_t reserved2 = 0;

  constexpr bool valid() const noexcept {
    return kind == DataKind::kAnnounceRegion && reserved[0] == 0 && reserved[1] == 0 && reserved[2] == 0 &&
           reserved2 == 0 && slice_bytes > 0 && slices > 0 &&
           // the region must fit the address space: addr + slices * slice_bytes without overflow
           slice_bytes <= (~uint64_t{0} - addr) / slices;
  }
};
inline constexpr size_t kRegionAnnouncementSize = 32;
static_assert(sizeof(RegionAnnouncement) == kRegionAnnouncementSize &&
              std::is_trivially_copyable_v<RegionAnnouncement>);
static_assert(offsetof(RegionAnnouncement, rkey) == 4 && offsetof(RegionAnnouncement, addr) == 8 &&
              offsetof(RegionAnnouncement, slice_bytes) == 16 && offsetof(RegionAnnouncement, slices) == 24);

struct DataRequest {
  DataKind kind = DataKind::kInvalid;
  uint8_t reserved[3] = {0, 0, 0};
  uint32_t rank = 0;
  uint64_t key = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
  uint32_t slice = 0;
  uint32_t rkey = 0;
  uint32_t reserved2 = 0;

  static constexpr DataRequest put(uint32_t rank, uint64_t key, uint64_t offset, uint32_t length) noexcept {
    DataRequest r;
    r.kind = DataKind::kDataPut;
    r.rank = rank, r.key = key, r.offset = offset, r.length = length;
    return r;
  }
  static constexpr DataRequest get(uint32_t rank, uint64_t key, uint64_t offset, uint32_t capacity) noexcept {
    DataRequest r = put(rank, key, offset, capacity);
    r.kind = DataKind::kDataGet;
    return r;
  }
  constexpr bool is_put() const noexcept { return kind == DataKind::kDataPut; }

  // Structure only: a put or get kind, zero reserved bytes, a non-empty range.
  // Ranges against the slice need the announcement (range_in_slice).
  constexpr bool valid() const noexcept {
    return (kind == DataKind::kDataPut || kind == DataKind::kDataGet) && reserved[0] == 0 && reserved[1] == 0 &&
           reserved[2] == 0 && reserved2 == 0 && length > 0;
  }
  friend constexpr bool operator==(const DataRequest&, const DataRequest&) = default;
};
inline constexpr size_t kDataRequestSize = 40;
static_assert(sizeof(DataRequest) == kDataRequestSize && std::is_trivially_copyable_v<DataRequest>);
static_assert(offsetof(DataRequest, rank) == 4 && offsetof(DataRequest, key) == 8 &&
              offsetof(DataRequest, offset) == 16 && offsetof(DataRequest, length) == 24 &&
              offsetof(DataRequest, slice) == 28 && offsetof(DataRequest, rkey) == 32);
static_assert(kDataRequestSize != kRegionAnnouncementSize, "the two requester messages differ by size");

struct DataResponse {
  DataResponseKind kind = DataResponseKind::kInvalid;
  DataError error = DataError::kNone;
  uint8_t reserved[2] = {0, 0};
  uint32_t length = 0;
  uint64_t key = 0;

  static constexpr DataResponse make(DataResponseKind k, uint64_t key, uint32_t length = 0) noexcept {
    DataResponse r;
    r.kind = k, r.key = key, r.length = length;
    return r;
  }
  static constexpr DataResponse failure(DataError e, uint64_t key) noexcept {
    DataResponse r = make(DataResponseKind::kError, key);
    r.error = e;
    return r;
  }
  constexpr bool valid() const noexcept {
    if (reserved[0] != 0 || reserved[1] != 0) return false;
    switch (kind) {
      case DataResponseKind::kPutOk:
      case DataResponseKind::kGetNotFound:
      case DataResponseKind::kAnnounceOk: return error == DataError::kNone && length == 0;
      case DataResponseKind::kGetOk: return error == DataError::kNone && length > 0;
      case DataResponseKind::kError: {
        const auto code = static_cast<uint8_t>(error);
        return code >= 1 && code <= kMaxDataError && length == 0;
      }
      case DataResponseKind::kInvalid: return false;
    }
    return false;
  }
  friend constexpr bool operator==(const DataResponse&, const DataResponse&) = default;
};
inline constexpr size_t kDataResponseSize = 16;
static_assert(sizeof(DataResponse) == kDataResponseSize && std::is_trivially_copyable_v<DataResponse>);
static_assert(offsetof(DataResponse, error) == 1 && offsetof(DataResponse, length) == 4 &&
              offsetof(DataResponse, key) == 8);

// [offset, offset + length) inside a slice of slice_bytes, without overflow.
constexpr bool range_in_slice(uint64_t offset, uint64_t length, uint64_t slice_bytes) noexcept {
  return offset <= slice_bytes && length <= slice_bytes - offset;
}
static_assert(range_in_slice(0, 64, 64) && !range_in_slice(1, 64, 64) && !range_in_slice(65, 0, 64) &&
              !range_in_slice(~uint64_t{0}, 2, 64));

// Received bytes -> a local copy, used only if valid(); nullopt means reject.
template <class M>
std::optional<M> decode_data(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() != sizeof(M)) return std::nullopt;
  M m;
  std::memcpy(&m, bytes.data(), sizeof m);
  if (!m.valid()) return std::nullopt;
  return m;
}

template <class M>
std::span<const std::byte, sizeof(M)> data_bytes(const M& m) noexcept {
  return std::span<const std::byte, sizeof(M)>(reinterpret_cast<const std::byte*>(&m), sizeof m);
}

}  // namespace bkv::kv
