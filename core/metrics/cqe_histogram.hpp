// Per-daemon loop statistics (docs/design_simulator.md §Metrics and traces; docs/calibration.md §C1):
// a histogram of a count per daemon loop, with the buckets the calibration data uses.
// Daemons keep two: hardware CQEs drained per loop, and RPC completions (responses
// handed to callers) per loop; docs/calibration.md §How the figures were taken (C6) says
// which of the two the measured figure is compared with, and why.
// Header-only and dependency-free: meters and daemons include it on their hot path.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace bkv::metrics {

// Buckets of "CQEs per loop": 0, 1, 2-10, 11-100, >100 (docs/calibration.md §C1).
inline constexpr size_t kCqeBuckets = 5;
inline constexpr std::array<const char*, kCqeBuckets> kCqeBucketNames = {"0", "1", "2-10", "11-100", ">100"};

// Bucket of a loop that drained n completions (the C1 bucket boundaries).
constexpr size_t cqe_bucket(uint64_t n) noexcept {
  if (n == 0) return 0;
  if (n == 1) return 1;
  if (n <= 10) return 2;
  if (n <= 100) return 3;
  return 4;
}
static_assert(cqe_bucket(0) == 0 && cqe_bucket(1) == 1 && cqe_bucket(2) == 2 && cqe_bucket(10) == 2 &&
              cqe_bucket(11) == 3 && cqe_bucket(100) == 3 && cqe_bucket(101) == 4);

struct CqeHistogram {
  std::array<uint64_t, kCqeBuckets> buckets{};
  uint64_t loops = 0;  // loops recorded (= the sum of the buckets)
  uint64_t cqes = 0;   // completions over all recorded loops

  // Records `times` loops that each drained n completions (times > 1: a run of
  // identical idle loops skipped in bulk).
  constexpr void add(uint64_t n, uint64_t times = 1) noexcept {
    buckets[cqe_bucket(n)] += times;
    loops += times;
    cqes += n * times;
  }
  constexpr double average() const noexcept {
    return loops == 0 ? 0.0 : static_cast<double>(cqes) / static_cast<double>(loops);
  }
  // The loops recorded after `earlier` (a snapshot of this histogram).
  constexpr CqeHistogram since(const CqeHistogram& earlier) const noexcept {
    CqeHistogram d;
    for (size_t i = 0; i < kCqeBuckets; ++i) d.buckets[i] = buckets[i] - earlier.buckets[i];
    d.loops = loops - earlier.loops;
    d.cqes = cqes - earlier.cqes;
    return d;
  }
  constexpr void merge(const CqeHistogram& o) noexcept {
    for (size_t i = 0; i < kCqeBuckets; ++i) buckets[i] += o.buckets[i];
    loops += o.loops;
    cqes += o.cqes;
  }
};

}  // namespace bkv::metrics
