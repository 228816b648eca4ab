// RTT hold time (docs/design_backends.md §Loop policies): hold = m x EWMA (alpha 1/8) of the delay
// from a flush to the first CQE seen after it, clamped to [kMinHoldNs, kMaxHoldNs]. Only
// the first flush since the last sample counts.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>

#include "backends/policies/response_hold.hpp"

namespace bkv::backend {

class RttHoldTime {
 public:
  static constexpr double kAlpha = 0.125;

  explicit RttHoldTime(double multiplier) : m_(multiplier) {
    if (!(multiplier > 0)) throw std::invalid_argument("rtt hold: the multiplier must be > 0");
  }

  void on_flush(uint64_t now) noexcept {
    if (!flush_pending_) {
      last_flush_ = now;
      flush_pending_ = true;
    }
  }
  // A poll that found CQEs, started at `now`: the new hold time, if this is the first
  // CQE after a flush.
  std::optional<uint64_t> on_cqes(uint64_t now) noexcept {
    if (!flush_pending_) return std::nullopt;
    flush_pending_ = false;
    const double sample = static_cast<double>(now - last_flush_);
    rtt_ewma_ = rtt_ewma_ == 0 ? sample : (1 - kAlpha) * rtt_ewma_ + kAlpha * sample;
    return clamp_hold_ns(m_ * rtt_ewma_);
  }

 private:
  double m_;
  double rtt_ewma_ = 0;
  uint64_t last_flush_ = 0;
  bool flush_pending_ = false;
};

}  // namespace bkv::backend
