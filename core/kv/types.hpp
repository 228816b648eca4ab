// KV request and response messages (docs/design.md §KV and workload).
//
// Both are fixed-size, trivially copyable structs whose bytes travel unchanged through
// the ipc and delegationrpc shared-memory slots, the flux channels and as copyrpc
// payloads (RemoteRequest / RemoteResponse are these same bytes). Layout (little-endian,
// pinned by the static_asserts below):
//
//   Request  (24 bytes): kind u8 @0 | reserved u8[3] @1 (zero) | rank u32 @4 |
//                        key u64 @8 | value u64 @16 (MetaPut only; zero for MetaGet)
//   Response (16 bytes): kind u8 @0 | error u8 @1 (zero unless kind == kError) |
//                        reserved u8[6] @2 (zero) | value u64 @8
//
// Kind 0 is never valid, so zeroed memory is rejected. A receiver copies the bytes into
// a local struct (decode_request / decode_response) and uses it only if valid(): a
// garbage kind, non-zero reserved bytes or a field that must be zero makes the message
// invalid. The meaning of `value` in a Response: GetOk -> the stored value; kError ->
// the offending key (or 0); PutOk / GetNotFound -> 0.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>

namespace bkv::kv {

// The value a store slot holds when no put has reached it ("not found"). A MetaPut
// carrying this value is not representable and therefore invalid (see Request::valid).
inline constexpr uint64_t kAbsentValue = ~uint64_t{0};

enum class RequestKind : uint8_t { kInvalid = 0, kMetaPut = 1, kMetaGet = 2 };

enum class ResponseKind : uint8_t {
  kInvalid = 0,
  kPutOk = 1,
  kGetOk = 2,
  kGetNotFound = 3,
  kError = 4,  // the request could not be executed; `error` says why
};

enum class ErrorCode : uint8_t {
  kNone = 0,
  kMalformedRequest = 1,  // the request bytes failed Request::valid()
  kKeyOutOfRange = 2,     // key >= key_range of the target node
  kWrongRank = 3,         // the request names another node than the one executing it
  kEndpointStopped = 4,   // reported failed: the copyrpc endpoint the request went over (or
                          // would have) stopped before its answer came; it may or may not
                          // have been executed (copyrpc::Context, "failed back")
};
inline constexpr uint8_t kMaxErrorCode = static_cast<uint8_t>(ErrorCode::kEndpointStopped);

constexpr const char* to_string(ErrorCode e) noexcept {
  switch (e) {
    case ErrorCode::kNone: return "none";
    case ErrorCode::kMalformedRequest: return "malformed request";
    case ErrorCode::kKeyOutOfRange: return "key out of range";
    case ErrorCode::kWrongRank: return "request for another rank";
    case ErrorCode::kEndpointStopped: return "endpoint to the target rank stopped";
  }
  return "unknown error code";
}

struct Request {
  RequestKind kind = RequestKind::kInvalid;
  uint8_t reserved[3] = {0, 0, 0};
  uint32_t rank = 0;   // target node
  uint64_t key = 0;    // key within the target node, < key_range
  uint64_t value = 0;  // MetaPut: value to store (!= kAbsentValue); MetaGet: 0

  static constexpr Request meta_put(uint32_t rank, uint64_t key, uint64_t value) noexcept {
    return Request{RequestKind::kMetaPut, {0, 0, 0}, rank, key, value};
  }
  static constexpr Request meta_get(uint32_t rank, uint64_t key) noexcept {
    return Request{RequestKind::kMetaGet, {0, 0, 0}, rank, key, 0};
  }

  constexpr bool is_put() const noexcept { return kind == RequestKind::kMetaPut; }
  constexpr bool is_get() const noexcept { return kind == RequestKind::kMetaGet; }

  // Structural check of bytes received from a peer or shared memory: a known kind,
  // zero reserved bytes, MetaGet with zero value, MetaPut with a representable value.
  // (Range checks of rank and key need the node's configuration: see kv::execute.)
  // The kind and the reserved bytes are read as one 4-byte word (little-endian), which a
  // valid request holds as the kind alone: two compares, where the bytes one by one and
  // a switch took about 12 instructions (three checks a simulated request).
  constexpr bool valid() const noexcept {
    static_assert(std::endian::native == std::endian::little, "the message layouts are little-endian");
    const uint32_t w = std::bit_cast<std::array<uint32_t, 6>>(*this)[0];
    if (w == static_cast<uint8_t>(RequestKind::kMetaGet)) return value == 0;
    return w == static_cast<uint8_t>(RequestKind::kMetaPut) && value != kAbsentValue;
  }

  friend constexpr bool operator==(const Request&, const Request&) = default;
};

inline constexpr size_t kRequestSize = 24;
static_assert(sizeof(Request) == kRequestSize);
static_assert(alignof(Request) == 8);
static_assert(std::is_trivially_copyable_v<Request> && std::is_standard_layout_v<Request>);
static_assert(offsetof(Request, kind) == 0);
static_assert(offsetof(Request, reserved) == 1);
static_assert(offsetof(Request, rank) == 4);
static_assert(offsetof(Request, key) == 8);
static_assert(offsetof(Request, value) == 16);

struct Response {
  ResponseKind kind = ResponseKind::kInvalid;
  ErrorCode error = ErrorCode::kNone;
  uint8_t reserved[6] = {0, 0, 0, 0, 0, 0};
  uint64_t value = 0;

  static constexpr Response put_ok() noexcept { return make(ResponseKind::kPutOk, ErrorCode::kNone, 0); }
  static constexpr Response get_ok(uint64_t v) noexcept { return make(ResponseKind::kGetOk, ErrorCode::kNone, v); }
  static constexpr Response get_not_found() noexcept {
    return make(ResponseKind::kGetNotFound, ErrorCode::kNone, 0);
  }
  static constexpr Response failure(ErrorCode e, uint64_t key = 0) noexcept {
    return make(ResponseKind::kError, e, key);
  }

  constexpr bool is_error() const noexcept { return kind == ResponseKind::kError; }

  // Structural check: a known kind, an error code exactly when kind == kError, zero
  // reserved bytes, zero value where the kind carries none, GetOk never kAbsentValue.
  // Read as the first 8-byte word, kind | error << 8 | reserved << 16 (little-endian),
  // every client answer and every response a daemon receives pass here: a valid
  // non-error word is one of three values, an error word one of kMaxErrorCode (inlined,
  // a few compares, where a switch on the kind was a call of its own).
  [[gnu::always_inline]] constexpr bool valid() const noexcept {
    constexpr auto word = [](ResponseKind k) { return uint64_t{static_cast<uint8_t>(k)}; };  // no error, reserved zero
    static_assert((word(ResponseKind::kPutOk) | 2) == 3 && (word(ResponseKind::kGetNotFound) | 2) == 3 &&
                  word(ResponseKind::kGetOk) == 2);
    const uint64_t w = first_word();
    if (w == word(ResponseKind::kGetOk)) return value != kAbsentValue;
    if ((w | 2) == 3) return value == 0;  // kPutOk or kGetNotFound
    // kError with a code in [1, kMaxErrorCode]: w - (kError | 1 << 8) in [0, (kMaxErrorCode - 1) << 8], kind byte kError.
    constexpr uint64_t first_error = word(ResponseKind::kError) | uint64_t{1} << 8;
    return w - first_error <= uint64_t{kMaxErrorCode - 1} << 8 && (w & 0xff) == word(ResponseKind::kError);
  }

  friend constexpr bool operator==(const Response&, const Response&) = default;

 private:
  // Kind, error and the reserved bytes 2..7 in one word (the layout is little-endian):
  // valid() compares it whole, where a check byte by byte takes eight.
  constexpr uint64_t first_word() const noexcept {
    static_assert(std::endian::native == std::endian::little, "the message layouts are little-endian");
    return std::bit_cast<std::array<uint64_t, 2>>(*this)[0];
  }
  static constexpr Response make(ResponseKind k, ErrorCode e, uint64_t v) noexcept {
    return Response{k, e, {0, 0, 0, 0, 0, 0}, v};
  }
};

inline constexpr size_t kResponseSize = 16;
static_assert(sizeof(Response) == kResponseSize);
static_assert(alignof(Response) == 8);
static_assert(std::is_trivially_copyable_v<Response> && std::is_standard_layout_v<Response>);
static_assert(offsetof(Response, kind) == 0);
static_assert(offsetof(Response, error) == 1);
static_assert(offsetof(Response, reserved) == 2);
static_assert(offsetof(Response, value) == 8);

// Decoding of received bytes: exactly sizeof(T) bytes, copied out (no aliasing of the
// peer's memory), then checked with valid(). nullopt means "reject".
inline std::optional<Request> decode_request(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() != sizeof(Request)) return std::nullopt;
  Request r;
  std::memcpy(&r, bytes.data(), sizeof r);
  if (!r.valid()) return std::nullopt;
  return r;
}

inline std::optional<Response> decode_response(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() != sizeof(Response)) return std::nullopt;
  Response r;
  std::memcpy(&r, bytes.data(), sizeof r);
  if (!r.valid()) return std::nullopt;
  return r;
}

// The bytes to send (for copyrpc call()/reply(), shared-memory slots).
inline std::span<const std::byte, sizeof(Request)> as_bytes(const Request& r) noexcept {
  return std::span<const std::byte, sizeof(Request)>(reinterpret_cast<const std::byte*>(&r), sizeof r);
}
inline std::span<const std::byte, sizeof(Response)> as_bytes(const Response& r) noexcept {
  return std::span<const std::byte, sizeof(Response)>(reinterpret_cast<const std::byte*>(&r), sizeof r);
}

}  // namespace bkv::kv
