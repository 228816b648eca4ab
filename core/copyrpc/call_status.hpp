// copyrpc call status: what call() and reply() answer (docs/design_channels.md §copyrpc).
#pragma once

#include <cstdint>

namespace bkv::copyrpc {

enum class CallStatus : uint8_t {
  kOk = 0,
  kRingFull,            // retry after poll(): the peer has not yet consumed enough
  kInsufficientCredit,  // retry after poll(): the peer has not yet granted enough
  kTooLarge,            // payload or response allowance larger than ring/8, an allowance whose
                        // credit exceeds the peer's whole grant (max_R), or a reply larger
                        // than its allowance
  kEndpointError,       // the endpoint has failed (see Context::error)
  kInvalidHandle,       // reply to a request already answered (or never received)
};

constexpr const char* to_string(CallStatus s) noexcept {
  switch (s) {
    case CallStatus::kOk: return "ok";
    case CallStatus::kRingFull: return "ring full";
    case CallStatus::kInsufficientCredit: return "insufficient credit";
    case CallStatus::kTooLarge: return "message too large";
    case CallStatus::kEndpointError: return "endpoint error";
    case CallStatus::kInvalidHandle: return "invalid receive handle";
  }
  return "unknown";
}

// A refusal that poll() can lift (the peer consumes ring space or grants credit): the
// caller keeps the call and tries it again later. Every other refusal is final.
constexpr bool retry_after_poll(CallStatus s) noexcept {
  return s == CallStatus::kRingFull || s == CallStatus::kInsufficientCredit;
}
static_assert(retry_after_poll(CallStatus::kRingFull) && retry_after_poll(CallStatus::kInsufficientCredit) &&
              !retry_after_poll(CallStatus::kOk) && !retry_after_poll(CallStatus::kTooLarge) &&
              !retry_after_poll(CallStatus::kEndpointError) && !retry_after_poll(CallStatus::kInvalidHandle));

struct CallResult {
  CallStatus status;
  uint32_t call_id;
  bool ok() const noexcept { return status == CallStatus::kOk; }
};

}  // namespace bkv::copyrpc
