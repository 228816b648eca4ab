// Loop policies of Delegation daemon #0 (docs/design.md §Loop policies).
//
// HoldPolicy — reply batch-hold. Responses returned by copyrpc are held instead of being
// written to the clients' slots at once, and released together when
//   (a) NP of them are held (batch_target = NP), or
//   (b) the hold time has passed since the first one was held, or
//   (c) nothing else is in flight (no response could come to fill the batch).
// Adaptive toggle: after a release of at least NP the hold switches off, and back on when
// a loop sees no responses (batches are healthy while big releases keep happening).
// The hold time is
//   fixed:               batch_hold_us;
//   adaptive_hold:       NP / EWMA(released / held duration), alpha 1/8, clamped to
//                        [0.5 us, 100 us], starting from batch_hold_us;
//   hold_rtt_multiplier: m * EWMA(delay from a flush to the first CQE after it).
//
// AdaptiveBudget — the original design's adaptive poll budget: polls at the top of step C up to
// u+1 times until a CQE arrives, with u raised when the loop is mostly empty (empty-loop
// EWMA above a threshold for `low_need` loops) and lowered when loops are busy, with a
// hold-off between changes (hysteresis) and a collapse-recovery boost.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/common.hpp"

namespace bkv::backend {

struct HeldResponse {
  uint32_t client;
  uint32_t slot;
  Response resp;
};

class HoldPolicy {
 public:
  static constexpr double kAlpha = 0.125;
  static constexpr uint64_t kMinHoldNs = 500;
  static constexpr uint64_t kMaxHoldNs = 100'000;
  static constexpr uint64_t kDefaultAdaptiveStartNs = 5'000;  // when batch_hold_us is 0

  HoldPolicy(const LoopPolicy& p, uint32_t np) : p_(p), target_(np) {
    enabled_ = p.batch_hold_us > 0 || p.adaptive_hold || p.hold_rtt_multiplier > 0;
    hold_ns_ = static_cast<uint64_t>(p.batch_hold_us * 1000.0);
    if (p.adaptive_hold && hold_ns_ == 0) hold_ns_ = kDefaultAdaptiveStartNs;
  }

  bool enabled() const noexcept { return enabled_; }
  bool active() const noexcept { return enabled_ && toggle_on_; }
  bool needs_clock() const noexcept { return p_.hold_rtt_multiplier > 0; }
  size_t held_count() const noexcept { return held_.size(); }
  uint64_t hold_ns() const noexcept { return hold_ns_; }

  void hold(const HeldResponse& h, uint64_t now) {
    if (held_.empty()) first_ = now;
    held_.push_back(h);
  }

  template <class Deliver>
  void maybe_release(uint64_t now, bool nothing_in_flight, uint32_t responses_this_loop, Deliver&& deliver) {
    if (!held_.empty()) {
      const bool full = held_.size() >= target_;
      const bool expired = now - first_ >= hold_ns_;
      if (full || expired || nothing_in_flight || !toggle_on_) {
        const size_t n = held_.size();
        for (const HeldResponse& h : held_) deliver(h);
        held_.clear();
        if (p_.adaptive_hold) {
          const double dur = static_cast<double>(std::max<uint64_t>(now - first_, 1));
          const double rate = static_cast<double>(n) / dur;  // responses per ns
          rate_ewma_ = rate_ewma_ == 0 ? rate : (1 - kAlpha) * rate_ewma_ + kAlpha * rate;
          hold_ns_ = clamp_hold(static_cast<double>(target_) / rate_ewma_);
        }
        if (n >= target_) toggle_on_ = false;  // healthy batch: stop holding
        return;
      }
    }
    if (!toggle_on_ && responses_this_loop == 0) toggle_on_ = true;
  }

  // hold_rtt_multiplier: delay from a flush to the first CQE seen after it.
  void on_flush(uint64_t now) noexcept {
    if (!flush_pending_) {
      last_flush_ = now;
      flush_pending_ = true;
    }
  }
  void on_first_cqe(uint64_t now) noexcept {
    if (!flush_pending_ || p_.hold_rtt_multiplier <= 0) return;
    flush_pending_ = false;
    const double sample = static_cast<double>(now - last_flush_);
    rtt_ewma_ = rtt_ewma_ == 0 ? sample : (1 - kAlpha) * rtt_ewma_ + kAlpha * sample;
    hold_ns_ = clamp_hold(p_.hold_rtt_multiplier * rtt_ewma_);
  }

 private:
  static uint64_t clamp_hold(double ns) noexcept {
    return static_cast<uint64_t>(std::clamp(ns, double(kMinHoldNs), double(kMaxHoldNs)));
  }

  LoopPolicy p_;
  uint32_t target_;
  bool enabled_ = false;
  bool toggle_on_ = true;
  uint64_t hold_ns_ = 0;
  uint64_t first_ = 0;
  double rate_ewma_ = 0;
  double rtt_ewma_ = 0;
  uint64_t last_flush_ = 0;
  bool flush_pending_ = false;
  std::vector<HeldResponse> held_;
};

class AdaptiveBudget {
 public:
  // Constants of the original design's controller (docs/design.md §Loop policies).
  static constexpr double kAlpha = 0.05;
  static constexpr double kEmptyHigh = 0.75, kEmptyLow = 0.40;
  static constexpr uint32_t kLowNeed = 64, kHighNeed = 128, kHoldMin = 32;
  static constexpr uint32_t kStepUp = 1, kStepDown = 2, kMax = 64;

  explicit AdaptiveBudget(const LoopPolicy& p) : enabled_(p.adaptive_poll_budget) {}

  // Polls allowed in step C: the fixed poll_budget, or u+1 under the controller.
  uint32_t current(uint32_t fixed) const noexcept { return enabled_ ? u_ + 1 : fixed; }
  uint32_t u() const noexcept { return u_; }

  void observe(uint32_t cqes) noexcept {
    if (!enabled_) return;
    const double empty = cqes == 0 ? 1.0 : 0.0;
    b_ema_ = (1 - kAlpha) * b_ema_ + kAlpha * cqes;
    e_ema_ = (1 - kAlpha) * e_ema_ + kAlpha * empty;
    if (hold_ > 0) {
      --hold_;
      return;
    }
    if (e_ema_ > kEmptyHigh) {
      high_ = 0;
      if (++low_ >= kLowNeed) {
        u_ = std::min(u_ + kStepUp, kMax);
        low_ = 0;
        hold_ = kHoldMin;
      }
    } else if (e_ema_ < kEmptyLow) {
      low_ = 0;
      if (++high_ >= kHighNeed) {
        u_ = u_ > kStepDown ? u_ - kStepDown : 0;
        high_ = 0;
        hold_ = kHoldMin;
      }
    } else {
      low_ = high_ = 0;
    }
    if (b_ema_ < 1.0 && e_ema_ > 0.9) {  // collapse recovery
      u_ = std::min(u_ + 2 * kStepUp, kMax);
      hold_ = kHoldMin;
    }
  }

 private:
  bool enabled_;
  uint32_t u_ = 0;
  double b_ema_ = 0, e_ema_ = 0;
  uint32_t low_ = 0, high_ = 0, hold_ = 0;
};

}  // namespace bkv::backend
