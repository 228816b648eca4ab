// Reply batch-hold (docs/design_backends.md §Loop policies): responses returned by copyrpc are held
// instead of being written to the clients' slots at once, and released together when
//   (a) `target` of them are held (target = NP), or
//   (b) the hold time has passed since the first one was held, or
//   (c) nothing else is in flight (no response could come to fill the batch).
// Adaptive toggle: after a release of at least `target` the hold switches off, and back
// on when a loop sees no responses (batches are healthy while big releases keep
// happening). The hold time is fixed here; AdaptiveHoldTime and RttHoldTime change it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/kv/types.hpp"

namespace bkv::backend {

// Hold times the adaptive rules may set.
inline constexpr uint64_t kMinHoldNs = 500;
inline constexpr uint64_t kMaxHoldNs = 100'000;
static_assert(kMinHoldNs < kMaxHoldNs);
inline uint64_t clamp_hold_ns(double ns) noexcept {
  return static_cast<uint64_t>(std::clamp(ns, double(kMinHoldNs), double(kMaxHoldNs)));
}

struct HeldResponse {
  uint32_t client;
  uint32_t slot;
  kv::Response resp;
};

class ResponseHold {
 public:
  // What a release delivered: how many responses, held for how long (from the first).
  struct Release {
    size_t count;
    uint64_t held_ns;
  };

  ResponseHold(uint32_t target, uint64_t hold_ns) : target_(target), hold_ns_(hold_ns) {}

  // Whether a response arriving now is held (false while the toggle is off).
  bool active() const noexcept { return toggle_on_; }
  size_t held_count() const noexcept { return held_.size(); }
  uint64_t hold_ns() const noexcept { return hold_ns_; }
  void set_hold_ns(uint64_t ns) noexcept { hold_ns_ = ns; }

  void hold(const HeldResponse& h, uint64_t now) {
    if (held_.empty()) first_ = now;
    held_.push_back(h);
  }

  // Once per loop: delivers every held response when one of (a)-(c) holds, or when the
  // toggle is off; turns the toggle back on after a loop without responses.
  template <class Deliver>
  std::optional<Release> maybe_release(uint64_t now, bool nothing_in_flight, uint32_t responses_this_loop,
                                       Deliver&& deliver) {
    if (!held_.empty()) {
      const bool full = held_.size() >= target_;
      const bool expired = now - first_ >= hold_ns_;
      if (full || expired || nothing_in_flight || !toggle_on_) {
        const Release r{held_.size(), now - first_};
        for (const HeldResponse& h : held_) deliver(h);
        held_.clear();
        if (r.count >= target_) toggle_on_ = false;  // healthy batch: stop holding
        return r;
      }
    }
    if (!toggle_on_ && responses_this_loop == 0) toggle_on_ = true;
    return std::nullopt;
  }

 private:
  uint32_t target_;
  uint64_t hold_ns_;
  bool toggle_on_ = true;
  uint64_t first_ = 0;
  std::vector<HeldResponse> held_;
};

}  // namespace bkv::backend
