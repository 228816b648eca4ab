// core/tsc_clock.hpp: when the TSC is taken for a clock, the tick-to-ns conversion, and
// the process's clock against the steady clock.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "core/meter.hpp"
#include "core/tsc_clock.hpp"

using namespace bkv;

TEST_CASE("tsc clock: invariant only with both flags on the flags line", "[clock]") {
  const std::string head = "processor\t: 0\nvendor_id\t: AuthenticAMD\n";
  CHECK(tsc_clock::cpuinfo_says_invariant(head + "flags\t\t: fpu tsc constant_tsc rep_good nonstop_tsc cpuid\n"));
  CHECK(tsc_clock::cpuinfo_says_invariant("flags\t\t: nonstop_tsc constant_tsc"));  // first line, no newline
  CHECK_FALSE(tsc_clock::cpuinfo_says_invariant(head + "flags\t\t: fpu tsc constant_tsc rep_good\n"));
  CHECK_FALSE(tsc_clock::cpuinfo_says_invariant(head + "flags\t\t: fpu tsc nonstop_tsc\n"));
  // Whole words only, and the flags line only.
  CHECK_FALSE(tsc_clock::cpuinfo_says_invariant(head + "flags\t\t: constant_tsc_x nonstop_tsc\n"));
  CHECK_FALSE(tsc_clock::cpuinfo_says_invariant(head + "bugs\t\t: constant_tsc nonstop_tsc\nflags\t: fpu\n"));
  CHECK_FALSE(tsc_clock::cpuinfo_says_invariant(""));
}

#if defined(__x86_64__)
TEST_CASE("tsc clock: the scale from two pairs converts ticks to steady nanoseconds", "[clock]") {
  // 3 GHz: 3e7 ticks in 10 ms.
  const tsc_clock::Scale s = tsc_clock::scale_from({1'000'000, 5'000}, {31'000'000, 10'005'000});
  REQUIRE(s.usable);
  CHECK(s.tsc_hz() == Approx(3e9).epsilon(1e-9));
  CHECK(s.to_ns(1'000'000) == 5'000);
  CHECK(s.to_ns(31'000'000) == 10'005'000);
  CHECK(s.to_ns(1'000'000 + 3'000) == 5'000 + 1'000);
  // An hour of ticks later, still within a nanosecond per second of the exact value.
  const uint64_t hour_ticks = 3'000'000'000ull * 3600;
  const uint64_t hour_ns = 3'600'000'000'000ull;
  const uint64_t got = s.to_ns(1'000'000 + hour_ticks) - 5'000;
  CHECK(got >= hour_ns - 3600);
  CHECK(got <= hour_ns + 3600);
  // Rates outside 100 MHz .. 20 GHz, and pairs that do not advance, are no clock.
  CHECK_FALSE(tsc_clock::scale_from({0, 0}, {999'999, 10'000'000}).usable);         // 99.99 MHz
  CHECK(tsc_clock::scale_from({0, 0}, {1'000'000, 10'000'000}).usable);             // 100 MHz
  CHECK_FALSE(tsc_clock::scale_from({0, 0}, {200'000'001, 10'000'000}).usable);     // > 20 GHz
  CHECK_FALSE(tsc_clock::scale_from({5, 0}, {5, 10'000'000}).usable);
  CHECK_FALSE(tsc_clock::scale_from({0, 7}, {30'000'000, 7}).usable);
}
#endif

TEST_CASE("tsc clock: the meter's clock lies between steady reads taken around it", "[clock]") {
  const tsc_clock::Scale& s = tsc_clock::scale();
  INFO("TSC clock " << (s.usable ? "in use" : "not in use") << ", " << s.tsc_hz() / 1e6 << " MHz");
  NullMeter meter;
  // A 2 ms gap between the checks lets a rate error show. Allowed: 20 us of offset (the
  // calibration pairs' brackets) plus 1e-4 of the time since calibration.
  for (int i = 0; i < 5; ++i) {
    const uint64_t before = tsc_clock::steady_ns();
    const uint64_t now = meter.now_ns();
    const uint64_t after = tsc_clock::steady_ns();
    const uint64_t slack = 20'000 + (after - s.ns0) / 10'000;
    CHECK(now + slack >= before);
    CHECK(now <= after + slack);
    const uint64_t until = after + 2'000'000;
    while (tsc_clock::steady_ns() < until) {
    }
  }
  // Monotonic on one thread.
  uint64_t last = meter.now_ns();
  for (int i = 0; i < 100000; ++i) {
    const uint64_t t = meter.now_ns();
    REQUIRE(t >= last);
    last = t;
  }
}
