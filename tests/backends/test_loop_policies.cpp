// The loop policies of Delegation daemon #0 (backends/policies/), each on its own.
#include <catch2/catch.hpp>

#include <vector>

#include "backends/policies/loop_policy.hpp"

using namespace bkv;
using namespace bkv::backend;

TEST_CASE("PollBudget: up to N polls, stopping once N responses came", "[policy]") {
  const PollBudget one(1);
  CHECK(one.polls() == 1);
  CHECK_FALSE(one.poll_again(1, 0, 0));
  const PollBudget four(4);
  CHECK(four.poll_again(1, 0, 0));
  CHECK(four.poll_again(3, 9, 3));      // CQEs do not count, responses do
  CHECK_FALSE(four.poll_again(2, 4, 4));  // N responses: stop early
  CHECK_FALSE(four.poll_again(4, 0, 0));  // N polls: stop
  CHECK_THROWS_AS(PollBudget(0), std::invalid_argument);
}

TEST_CASE("AdaptivePollBudget: raises u when loops are empty, with hysteresis, and lowers it when busy", "[policy]") {
  AdaptivePollBudget b;
  CHECK(b.polls() == 1);
  CHECK_FALSE(b.poll_again(1, 0, 0));
  // Empty loops: the empty-ratio EWMA (alpha 0.05) passes 0.9 at the 45th loop while the
  // batch EWMA is 0: collapse recovery, u += 2.
  for (int i = 0; i < 44; ++i) b.end_of_loop(0);
  CHECK(b.extra_polls() == 0);
  b.end_of_loop(0);
  CHECK(b.extra_polls() == 2);
  CHECK(b.poll_again(2, 0, 0));       // up to u+1 = 3 polls ...
  CHECK_FALSE(b.poll_again(2, 1, 0));  // ... stopping at the first CQE
  CHECK_FALSE(b.poll_again(3, 0, 0));
  // Hold-off: no change for kHoldMin loops, then the next boost.
  for (uint32_t i = 0; i < AdaptivePollBudget::kHoldMin; ++i) b.end_of_loop(0);
  CHECK(b.extra_polls() == 2);
  b.end_of_loop(0);
  CHECK(b.extra_polls() == 4);
  // Never above kMax.
  for (int i = 0; i < 10000; ++i) b.end_of_loop(0);
  CHECK(b.extra_polls() == AdaptivePollBudget::kMax);
  // Busy loops bring it back down to 0.
  for (int i = 0; i < 20000; ++i) b.end_of_loop(5);
  CHECK(b.extra_polls() == 0);
}

TEST_CASE("ResponseHold: releases on the batch target, the hold time or idleness, toggles off after a full batch",
          "[policy]") {
  ResponseHold h(3, 1000);
  std::vector<uint32_t> out;
  auto deliver = [&](const HeldResponse& r) { out.push_back(r.client); };
  REQUIRE(h.active());
  h.hold({1, 0, {}}, 0);
  h.hold({2, 0, {}}, 400);
  CHECK_FALSE(h.maybe_release(999, false, 2, deliver).has_value());  // 2 < 3, not expired
  CHECK(out.empty());
  const auto r = h.maybe_release(1000, false, 0, deliver);  // expired (from the first)
  REQUIRE(r.has_value());
  CHECK(r->count == 2);
  CHECK(r->held_ns == 1000);
  CHECK(out == std::vector<uint32_t>{1, 2});
  CHECK(h.active());  // below the target: keeps holding

  h.hold({3, 0, {}}, 2000);
  CHECK(h.maybe_release(2001, /*nothing_in_flight=*/true, 1, deliver).has_value());  // idle
  CHECK(h.held_count() == 0);

  for (uint32_t c = 4; c < 7; ++c) h.hold({c, 0, {}}, 3000);
  CHECK(h.maybe_release(3000, false, 3, deliver)->count == 3);  // full batch
  CHECK_FALSE(h.active());  // healthy batch: stop holding
  CHECK_FALSE(h.maybe_release(3100, false, 2, deliver).has_value());
  CHECK_FALSE(h.active());  // responses this loop: stays off
  h.maybe_release(3200, false, 0, deliver);
  CHECK(h.active());  // a loop without responses: on again
}

TEST_CASE("AdaptiveHoldTime: target over the EWMA of the release rate, clamped", "[policy]") {
  CHECK(AdaptiveHoldTime::start_ns(0) == AdaptiveHoldTime::kDefaultStartNs);
  CHECK(AdaptiveHoldTime::start_ns(2000) == 2000);
  AdaptiveHoldTime a(4);
  CHECK(a.after_release(4, 4000) == 4000);  // 4 per 4000 ns -> 4 / 0.001
  // EWMA: 0.875 * 0.001 + 0.125 * 0.01 = 0.002125 per ns -> 4 / 0.002125 = 1882.35
  CHECK(a.after_release(4, 400) == 1882);
  AdaptiveHoldTime slow(4);
  CHECK(slow.after_release(1, 10'000'000) == kMaxHoldNs);
  AdaptiveHoldTime fast(4);
  CHECK(fast.after_release(1000, 0) == kMinHoldNs);  // a zero duration counts as 1 ns
}

TEST_CASE("RttHoldTime: m times the EWMA of the delay from a flush to the first CQE after it", "[policy]") {
  RttHoldTime r(2.0);
  CHECK_FALSE(r.on_cqes(50).has_value());  // no flush yet
  r.on_flush(100);
  r.on_flush(150);  // only the first flush since the last sample counts
  CHECK(r.on_cqes(1100) == 2000u);
  CHECK_FALSE(r.on_cqes(1200).has_value());  // not the first CQE after a flush
  r.on_flush(2000);
  CHECK(r.on_cqes(2400) == 1850u);  // 2 * (0.875 * 1000 + 0.125 * 400)
  RttHoldTime tiny(0.1);
  tiny.on_flush(0);
  CHECK(tiny.on_cqes(10) == kMinHoldNs);
  CHECK_THROWS_AS(RttHoldTime(0), std::invalid_argument);
}

TEST_CASE("LoopPolicies: the knobs select the policies", "[policy]") {
  const LoopPolicies none(LoopPolicySettings{}, 4);
  CHECK(none.polls() == 1);
  CHECK_FALSE(none.hold_enabled());
  CHECK_FALSE(none.holding());
  CHECK_FALSE(none.needs_clock());

  LoopPolicySettings p;
  p.poll_budget = 3;
  p.batch_hold_us = 2;
  LoopPolicies fixed(p, 2);
  CHECK(fixed.polls() == 3);
  CHECK(fixed.holding());
  std::vector<uint32_t> out;
  fixed.hold({7, 1, {}}, 0);
  fixed.release(1999, false, 1, [&](const HeldResponse& h) { out.push_back(h.client); });
  CHECK(out.empty());  // 2 us not yet passed
  fixed.release(2000, false, 0, [&](const HeldResponse& h) { out.push_back(h.client); });
  CHECK(out == std::vector<uint32_t>{7});

  LoopPolicySettings rtt;
  rtt.hold_rtt_multiplier = 1.5;
  rtt.adaptive_poll_budget = true;
  LoopPolicies r(rtt, 2);
  CHECK(r.hold_enabled());  // an RTT hold is a hold
  CHECK(r.needs_clock());
  CHECK(r.polls() == 1);  // the adaptive budget starts at u = 0
}
