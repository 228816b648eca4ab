// Adaptive poll budget (docs/design_backends.md §Loop policies): the poll phase polls up to u+1
// times, stopping at the first CQE. A controller over u keeps EWMAs of the CQEs per loop
// and of the empty-loop ratio: u rises when loops are mostly empty for kLowNeed loops,
// falls when they are busy for kHighNeed loops, holds still for kHoldMin loops after a
// change (hysteresis), and gets a boost when the loop collapses (few CQEs, almost all
// loops empty).
#pragma once

#include <algorithm>
#include <cstdint>

namespace bkv::backend {

class AdaptivePollBudget {
 public:
  static constexpr double kAlpha = 0.05;
  static constexpr double kEmptyHigh = 0.75, kEmptyLow = 0.40;
  static constexpr uint32_t kLowNeed = 64, kHighNeed = 128, kHoldMin = 32;
  static constexpr uint32_t kStepUp = 1, kStepDown = 2, kMax = 64;
  static constexpr double kCollapseBatch = 1.0, kCollapseEmpty = 0.9;
  static_assert(kEmptyLow < kEmptyHigh && kEmptyHigh < kCollapseEmpty);

  uint32_t polls() const noexcept { return u_ + 1; }
  uint32_t extra_polls() const noexcept { return u_; }
  bool poll_again(uint32_t polls, uint32_t cqes, uint32_t /*responses*/) const noexcept {
    return polls < u_ + 1 && cqes == 0;
  }

  // Once per loop, with the CQEs the loop's poll phase saw.
  void end_of_loop(uint32_t cqes) noexcept {
    const double empty = cqes == 0 ? 1.0 : 0.0;
    batch_ewma_ = (1 - kAlpha) * batch_ewma_ + kAlpha * cqes;
    empty_ewma_ = (1 - kAlpha) * empty_ewma_ + kAlpha * empty;
    if (hold_ > 0) {
      --hold_;
      return;
    }
    if (empty_ewma_ > kEmptyHigh) {
      busy_run_ = 0;
      if (++empty_run_ >= kLowNeed) {
        u_ = std::min(u_ + kStepUp, kMax);
        empty_run_ = 0;
        hold_ = kHoldMin;
      }
    } else if (empty_ewma_ < kEmptyLow) {
      empty_run_ = 0;
      if (++busy_run_ >= kHighNeed) {
        u_ = u_ > kStepDown ? u_ - kStepDown : 0;
        busy_run_ = 0;
        hold_ = kHoldMin;
      }
    } else {
      empty_run_ = busy_run_ = 0;
    }
    if (batch_ewma_ < kCollapseBatch && empty_ewma_ > kCollapseEmpty) {
      u_ = std::min(u_ + 2 * kStepUp, kMax);
      hold_ = kHoldMin;
    }
  }

 private:
  uint32_t u_ = 0;
  double batch_ewma_ = 0, empty_ewma_ = 0;
  uint32_t empty_run_ = 0, busy_run_ = 0, hold_ = 0;
};

}  // namespace bkv::backend
