// Loop policies of Delegation daemon #0 (docs/design_backends.md §Loop policies): the knobs
// (LoopPolicySettings, defaults = calibration runs) and the policies they select (LoopPolicies),
// which the daemon consults at fixed points of its loop:
//   poll phase    poll_again(polls, cqes, responses); on_cqes(start of the poll)
//   responses     holding() -> hold(...) instead of delivering
//   flush phase   on_flush(now)
//   release held  release(now, idle, responses, deliver)
//   loop end      end_of_loop(cqes)
// A policy that fits these points is added here and in its own file; the daemon does not
// change.
#pragma once

#include <cstdint>
#include <optional>

#include "backends/policies/adaptive_hold.hpp"
#include "backends/policies/adaptive_poll_budget.hpp"
#include "backends/policies/poll_budget.hpp"
#include "backends/policies/response_hold.hpp"
#include "backends/policies/rtt_hold.hpp"

namespace bkv::backend {

// Where daemon #0's replies and calls leave (docs/design_backends.md §Delegation daemon loop).
// Both orders are loops of the original system: poll (drain the CQ, responses to the
// clients, the poll's flush), answer, backlog retry, delegation ring -> calls, then
//   kOriginal   a flush: the loop's replies and calls leave together, one WRITE per
//               endpoint per loop (the loop that ran C1 and C5; the default);
//   kNextPoll   no flush: replies and calls leave at the next loop's poll (the older
//               loop the poll-budget measurements ran);
// then the ipc rings (local requests), flux and the held responses.
enum class LoopOrder : uint8_t {
  kOriginal = 0,
  kNextPoll,
};

struct LoopPolicySettings {
  uint32_t poll_budget = 1;          // PollBudget: up to N polls, stops at N responses
  double batch_hold_us = 0;          // ResponseHold with this hold time; 0 = off
  bool adaptive_hold = false;        // AdaptiveHoldTime
  double hold_rtt_multiplier = 0;    // RttHoldTime; 0 = off
  bool adaptive_poll_budget = false; // AdaptivePollBudget instead of PollBudget
  LoopOrder order = LoopOrder::kOriginal;
  friend bool operator==(const LoopPolicySettings&, const LoopPolicySettings&) = default;
};

class LoopPolicies {
 public:
  // np: the hold's batch target.
  LoopPolicies(const LoopPolicySettings& p, uint32_t np) : budget_(p.poll_budget), order_(p.order) {
    if (p.adaptive_poll_budget) adaptive_budget_.emplace();
    if (p.adaptive_hold) adaptive_hold_.emplace(np);
    if (p.hold_rtt_multiplier > 0) rtt_hold_.emplace(p.hold_rtt_multiplier);
    if (p.batch_hold_us > 0 || adaptive_hold_ || rtt_hold_) {
      const auto configured = static_cast<uint64_t>(p.batch_hold_us * 1000.0);
      hold_.emplace(np, adaptive_hold_ ? AdaptiveHoldTime::start_ns(configured) : configured);
    }
  }

  LoopOrder order() const noexcept { return order_; }

  // ---- poll phase
  uint32_t polls() const noexcept { return adaptive_budget_ ? adaptive_budget_->polls() : budget_.polls(); }
  bool poll_again(uint32_t polls, uint32_t cqes, uint32_t responses) const noexcept {
    return adaptive_budget_ ? adaptive_budget_->poll_again(polls, cqes, responses)
                            : budget_.poll_again(polls, cqes, responses);
  }
  // Whether on_cqes/on_flush need the time (reading the clock only when they do).
  bool needs_clock() const noexcept { return rtt_hold_.has_value(); }
  void on_cqes(uint64_t poll_start) noexcept {
    if (!rtt_hold_) return;
    if (const auto ns = rtt_hold_->on_cqes(poll_start)) hold_->set_hold_ns(*ns);
  }

  // ---- responses
  bool hold_enabled() const noexcept { return hold_.has_value(); }
  bool holding() const noexcept { return hold_ && hold_->active(); }
  void hold(const HeldResponse& h, uint64_t now) { hold_->hold(h, now); }
  size_t held_count() const noexcept { return hold_ ? hold_->held_count() : 0; }

  // ---- flush phase, release, loop end
  void on_flush(uint64_t now) noexcept {
    if (rtt_hold_) rtt_hold_->on_flush(now);
  }
  template <class Deliver>
  void release(uint64_t now, bool nothing_in_flight, uint32_t responses_this_loop, Deliver&& deliver) {
    const auto r = hold_->maybe_release(now, nothing_in_flight, responses_this_loop, deliver);
    if (r && adaptive_hold_) hold_->set_hold_ns(adaptive_hold_->after_release(r->count, r->held_ns));
  }
  void end_of_loop(uint32_t cqes) noexcept {
    if (adaptive_budget_) adaptive_budget_->end_of_loop(cqes);
  }

 private:
  PollBudget budget_;
  LoopOrder order_;
  std::optional<AdaptivePollBudget> adaptive_budget_;
  std::optional<ResponseHold> hold_;
  std::optional<AdaptiveHoldTime> adaptive_hold_;
  std::optional<RttHoldTime> rtt_hold_;
};

}  // namespace bkv::backend
