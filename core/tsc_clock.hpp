// The clock of real threads (NullMeter::now_ns, core/meter.hpp): nanoseconds on the
// steady clock's scale, read from the processor's time-stamp counter (TSC) where that
// is a clock, else from the steady clock (docs/design_simulator.md §Metrics and traces).
//
// Why: a client reads the clock once per step to time its requests; the steady clock
// (clock_gettime through the vDSO) costs about 24 ns a read on the development VM, a
// plain RDTSC about 9.5 ns, and the conversion below a multiply and a shift.
//
// When the TSC is a clock: x86-64, and /proc/cpuinfo says it ticks at one rate in every
// P-state (flag constant_tsc) and keeps ticking in deep C-states (flag nonstop_tsc).
// Anything else (another architecture, a flag missing, cpuinfo unreadable, a calibrated
// rate outside kMinTscHz..kMaxTscHz) selects the steady clock.
//
// Calibration, once per process at the first read (real runs call scale() before their
// threads start): pairs (tsc, steady ns) at the start
// and after kCalibrationNs of steady time; each steady read is bracketed by two TSC reads
// and paired with their midpoint; of kPairAttempts such reads the narrowest bracket is
// kept, and it must be at most kMaxBracketTicks (else the thread was interrupted every
// time, and the steady clock is used). Then
//
//   ns(tsc) = ns0 + ((tsc - tsc0) * mult + 2^(kShift-1)) >> kShift,   mult = round(2^kShift * dns / dtsc)
//
// with a 128-bit product (no overflow for any tsc - tsc0 < 2^64 while mult < 2^64).
// The rate error is at most a bracket over the window's ticks (kMaxBracketTicks / 2e7 =
// 1e-4 at 2 GHz; about 90 / 2.6e7 = 3.5e-6 on the development VM); readings are meant for
// differences taken on one thread (a request's issue and answer, a hold's start and end),
// as the TSCs of different cores are only as synchronized as the platform keeps them.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace bkv::tsc_clock {

inline constexpr uint32_t kShift = 32;                       // fixed-point bits of mult
inline constexpr uint64_t kCalibrationNs = 10'000'000;       // 10 ms of steady time
inline constexpr uint64_t kMaxBracketTicks = 2'000;          // a steady read takes ~90 ticks
inline constexpr int kPairAttempts = 8;                      // the narrowest bracket of these is kept
inline constexpr uint64_t kMinTscHz = 100'000'000;           // 100 MHz
inline constexpr uint64_t kMaxTscHz = 20'000'000'000;        // 20 GHz
static_assert(kMinTscHz < kMaxTscHz);
// mult = 2^kShift * 1e9 / hz stays below 2^64 for every accepted rate (largest at kMinTscHz).
static_assert(1'000'000'000 % kMinTscHz == 0 &&
              (uint64_t{1} << kShift) * (1'000'000'000 / kMinTscHz) < (uint64_t{1} << 63));

inline uint64_t steady_ns() noexcept {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// True when the first "flags" line of a /proc/cpuinfo text lists both constant_tsc and
// nonstop_tsc (each a whole word).
inline bool cpuinfo_says_invariant(const std::string& cpuinfo) {
  std::istringstream lines(cpuinfo);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    bool constant = false, nonstop = false;
    for (std::string w; words >> w;) {
      constant = constant || w == "constant_tsc";
      nonstop = nonstop || w == "nonstop_tsc";
    }
    return constant && nonstop;
  }
  return false;
}

__extension__ typedef unsigned __int128 U128;  // (GCC and Clang; __extension__: not ISO C++)

// The conversion from TSC ticks to steady nanoseconds (usable = false: use the steady clock).
struct Scale {
  bool usable = false;
  uint64_t tsc0 = 0;
  uint64_t ns0 = 0;
  uint64_t mult = 0;  // ns per tick << kShift
  static constexpr uint64_t kHalf = uint64_t{1} << (kShift - 1);  // rounds to the nearest ns
  double tsc_hz() const noexcept { return usable ? 1e9 * static_cast<double>(uint64_t{1} << kShift) / static_cast<double>(mult) : 0.0; }
  uint64_t to_ns(uint64_t tsc) const noexcept {
    return ns0 + static_cast<uint64_t>((static_cast<U128>(tsc - tsc0) * mult + kHalf) >> kShift);
  }
};

#if defined(__x86_64__)
inline uint64_t read_tsc() noexcept { return __rdtsc(); }

// One (tsc, steady ns) pair: the steady read between two TSC reads close together.
struct Pair {
  uint64_t tsc, ns;
};
inline bool take_pair(Pair& p) noexcept {
  uint64_t best = kMaxBracketTicks + 1;
  for (int attempt = 0; attempt < kPairAttempts; ++attempt) {
    const uint64_t before = read_tsc();
    const uint64_t ns = steady_ns();
    const uint64_t after = read_tsc();
    if (after >= before && after - before < best) {
      best = after - before;
      p = Pair{before + best / 2, ns};
    }
  }
  return best <= kMaxBracketTicks;
}

// The scale from two pairs (the rate check included).
inline Scale scale_from(const Pair& a, const Pair& b) noexcept {
  if (b.tsc <= a.tsc || b.ns <= a.ns) return {};
  const long double hz = static_cast<long double>(b.tsc - a.tsc) * 1e9L / static_cast<long double>(b.ns - a.ns);
  if (hz < static_cast<long double>(kMinTscHz) || hz > static_cast<long double>(kMaxTscHz)) return {};
  const long double mult = static_cast<long double>(uint64_t{1} << kShift) * 1e9L / hz;
  return Scale{true, a.tsc, a.ns, static_cast<uint64_t>(mult + 0.5L)};
}

inline Scale calibrate() noexcept {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  if (!cpuinfo_says_invariant(text.str())) return {};
  Pair a{}, b{};
  if (!take_pair(a)) return {};
  while (steady_ns() - a.ns < kCalibrationNs) {
  }
  if (!take_pair(b)) return {};
  return scale_from(a, b);
}
#else
inline uint64_t read_tsc() noexcept { return 0; }
inline Scale calibrate() noexcept { return {}; }
#endif

// The process's scale, calibrated at the first call (thread-safe).
inline const Scale& scale() noexcept {
  static const Scale s = calibrate();
  return s;
}

// Which clock now_ns() reads, for a result's provenance: "TSC, 2596.1 MHz" or "steady clock".
inline std::string describe() {
  const Scale& s = scale();
  if (!s.usable) return "steady clock";
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  o << "TSC, " << s.tsc_hz() / 1e6 << " MHz";
  return o.str();
}

// The clock: TSC-derived where usable, the steady clock otherwise.
inline uint64_t now_ns() noexcept {
  const Scale& s = scale();
  if (s.usable) [[likely]] return s.to_ns(read_tsc());
  return steady_ns();
}

}  // namespace bkv::tsc_clock
