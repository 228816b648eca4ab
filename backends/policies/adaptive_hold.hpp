// Adaptive hold time (docs/design_backends.md §Loop policies): at each release, rate = released /
// held duration (at least 1 ns); EWMA with alpha 1/8; hold = target / rate_ewma, clamped
// to [kMinHoldNs, kMaxHoldNs]. Starts from batch_hold_us, or kDefaultStartNs if that is 0.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/policies/response_hold.hpp"

namespace bkv::backend {

class AdaptiveHoldTime {
 public:
  static constexpr double kAlpha = 0.125;
  static constexpr uint64_t kDefaultStartNs = 5'000;

  explicit AdaptiveHoldTime(uint32_t target) : target_(target) {}

  static uint64_t start_ns(uint64_t configured_ns) noexcept {
    return configured_ns == 0 ? kDefaultStartNs : configured_ns;
  }
  // The hold time after a release of `count` responses held for `held_ns`.
  uint64_t after_release(size_t count, uint64_t held_ns) noexcept {
    const double dur = static_cast<double>(std::max<uint64_t>(held_ns, 1));
    const double rate = static_cast<double>(count) / dur;  // responses per ns
    rate_ewma_ = rate_ewma_ == 0 ? rate : (1 - kAlpha) * rate_ewma_ + kAlpha * rate;
    return clamp_hold_ns(static_cast<double>(target_) / rate_ewma_);
  }

 private:
  uint32_t target_;
  double rate_ewma_ = 0;
};

}  // namespace bkv::backend
