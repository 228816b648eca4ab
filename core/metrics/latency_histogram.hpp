// Request latency: a log-linear histogram of nanoseconds (docs/design_simulator.md §Metrics and
// traces), and the four a client keeps (get/put x local/remote).
//
// Buckets (the scheme of HdrHistogram with 64 sub-buckets per power of two): a value
// below 128 has its own bucket; a value v in [2^e, 2^(e+1)), 7 <= e <= 36, falls into one
// of 64 equal sub-buckets of that power of two, each 2^(e-6) wide:
//
//   bucket(v) = v                                        v < 128
//             = (e - 6) * 64 + (v >> (e - 6))            e = floor(log2 v), 7 <= e <= 36
//             = kOverflow = 2048                         v >= 2^37 ns (137 s)
//
// Computed without a branch: with e' = floor(log2(v | 64)) (= e for v >= 64, 6 below),
// v >> (e' - 6) is in [64, 128) for v >= 64 and v itself below, so
// bucket(v) = min((e' - 6) * 64 + (v >> (e' - 6)), kOverflow) gives every line above.
//
// A percentile is read as its bucket's midpoint (exact below 128 ns), kept within the
// smallest and the largest value recorded: a bucket of width w starts at L >= 64 w, so
// the midpoint is within w / 2 <= L / 128 of any value in it, a relative error of at most
// 1/128 = 0.78 % from 1 ns to 2^37 ns (137 s, beyond the 100 s asked for); a single
// value, recorded any number of times, reads exactly. Values of 2^37 ns and more share
// the overflow bucket, read as the maximum. The minimum, the maximum and the sum (so the
// mean) are exact.
//
// Values are nanoseconds, not TSC ticks: the histograms of ranks whose TSCs tick at
// different rates are merged (docs/benchmarks.md §Latency recording in the client).
//
// Two widths, one scheme:
//  - LatencyRecorder (32-bit counts, 8.2 KB): what a client records into, on its hot
//    path: record() is an or, a count-leading-zeros, a shift, a min, a saturating add,
//    an add, a max and a min (four read-modify-writes of memory: the bucket, the sum,
//    the maximum, the minimum). A bucket that reaches 2^32 - 1 stays there (saturates) instead of
//    wrapping (`saturated`: 4.3 x 10^9 values in one bucket of a recorder, a real client
//    thread's own, the simulator's clients' shared: docs/outputs.md §The summary JSON);
//  - LatencyHistogram (64-bit counts, 16.4 KB): merged histograms, what reports read.
// Both are fixed size, trivially copyable (gathered over MPI as raw bytes) and allocate
// nothing. The number of values is not kept apart: it is the sum of the buckets,
// computed when read (a report reads it a few times; a client records every request).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace bkv::metrics {

// The bucket scheme (header comment), shared by both widths.
struct LatencyBuckets {
  static constexpr uint32_t kSubBits = 6;
  static constexpr uint32_t kSub = 1u << kSubBits;   // sub-buckets per power of two
  static constexpr uint32_t kExactBelow = 2 * kSub;  // 128: one bucket per value below
  static constexpr uint32_t kTopExponent = 37;       // regular buckets hold [0, 2^37) ns
  static constexpr uint64_t kOverflowNs = uint64_t{1} << kTopExponent;
  static constexpr uint32_t kOverflow = (kTopExponent - kSubBits + 1) * kSub;  // 2048: values >= 2^37 ns
  static constexpr uint32_t kBuckets = kOverflow + 1;

  static constexpr uint32_t bucket(uint64_t ns) noexcept {
    const uint32_t shift = 63 - kSubBits - static_cast<uint32_t>(std::countl_zero(ns | kSub));  // e' - 6
    const uint64_t b = uint64_t{shift} * kSub + (ns >> shift);
    return static_cast<uint32_t>(std::min<uint64_t>(b, kOverflow));
  }
  // The smallest value of bucket b (b < kBuckets; the overflow bucket's is 2^37).
  static constexpr uint64_t lower_bound(uint32_t b) noexcept {
    if (b < kExactBelow) return b;
    const uint32_t shift = b / kSub - 1, sub = b % kSub;
    return (uint64_t{kSub} + sub) << shift;
  }
  // The number of values bucket b holds (1 below 128; the overflow bucket: unbounded, 0).
  static constexpr uint64_t width(uint32_t b) noexcept {
    if (b >= kOverflow) return 0;
    return b < kExactBelow ? 1 : uint64_t{1} << (b / kSub - 1);
  }
  // The value a percentile falling into bucket b is read as: its midpoint, rounded down
  // (the overflow bucket has none: the caller reads the maximum).
  static constexpr uint64_t midpoint(uint32_t b) noexcept {
    return b >= kOverflow ? lower_bound(b) : lower_bound(b) + (width(b) - 1) / 2;
  }
};
static_assert(LatencyBuckets::kOverflow == 2048);
static_assert(LatencyBuckets::bucket(127) == 127 && LatencyBuckets::bucket(128) == 128 &&
              LatencyBuckets::bucket(129) == 128 && LatencyBuckets::bucket(130) == 129);
static_assert(LatencyBuckets::bucket(LatencyBuckets::kOverflowNs - 1) == LatencyBuckets::kOverflow - 1 &&
              LatencyBuckets::bucket(LatencyBuckets::kOverflowNs) == LatencyBuckets::kOverflow &&
              LatencyBuckets::bucket(~uint64_t{0}) == LatencyBuckets::kOverflow);
static_assert(LatencyBuckets::lower_bound(LatencyBuckets::bucket(1000)) <= 1000 &&
              LatencyBuckets::lower_bound(LatencyBuckets::bucket(1000) + 1) > 1000);
static_assert(LatencyBuckets::lower_bound(LatencyBuckets::kOverflow) == LatencyBuckets::kOverflowNs);

template <class Count>
class BasicLatencyHistogram : public LatencyBuckets {
  static_assert(std::is_same_v<Count, uint32_t> || std::is_same_v<Count, uint64_t>);
  static constexpr Count kFull = std::numeric_limits<Count>::max();

 public:
  BasicLatencyHistogram() = default;
  // A recorder's values in a 64-bit histogram (widening only).
  template <class Other>
    requires(sizeof(Other) < sizeof(Count))
  BasicLatencyHistogram(const BasicLatencyHistogram<Other>& o) noexcept {  // NOLINT: implicit widening
    merge(o);
  }

  void record(uint64_t ns) noexcept {
    Count& c = counts_[bucket(ns)];
    if constexpr (sizeof(Count) < sizeof(uint64_t)) {
      c += static_cast<Count>(c != kFull);  // saturates (header comment)
    } else {
      ++c;
    }
    sum_ns_ += ns;
    max_ns_ = std::max(max_ns_, ns);
    min_ns_ = std::min(min_ns_, ns);
  }

  // The number of values recorded (kBuckets adds).
  uint64_t count() const noexcept {
    uint64_t n = 0;
    for (Count c : counts_) n += c;
    return n;
  }
  uint64_t sum_ns() const noexcept { return sum_ns_; }
  uint64_t max_ns() const noexcept { return max_ns_; }
  uint64_t min_ns() const noexcept { return min_ns_ == kNone ? 0 : min_ns_; }  // 0 when empty
  uint64_t bucket_count(uint32_t b) const noexcept { return counts_[b]; }
  double mean_ns() const noexcept {
    const uint64_t n = count();
    return n ? static_cast<double>(sum_ns_) / static_cast<double>(n) : 0.0;
  }
  // Some bucket of a recorder merged into this one was full: its counts are lower bounds.
  bool saturated() const noexcept {
    if constexpr (sizeof(Count) < sizeof(uint64_t)) {
      for (Count c : counts_)
        if (c == kFull) return true;
    }
    return saturated_;
  }

  // The value below which a fraction p of the recorded values lie: the midpoint of the
  // bucket holding the ceil(p * count)-th smallest value (nearest rank; at least the
  // first), kept within [minimum, maximum]; p >= 1, and a rank in the overflow bucket,
  // give the maximum exactly. 0 when empty.
  uint64_t percentile_ns(double p) const noexcept {
    const uint64_t n = count();
    if (n == 0) return 0;
    if (p >= 1.0) return max_ns_;
    const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(p * static_cast<double>(n))));
    uint64_t seen = 0;
    for (uint32_t b = 0; b < kOverflow; ++b) {
      seen += counts_[b];
      if (seen >= rank) return std::clamp(midpoint(b), std::min(min_ns_, max_ns_), max_ns_);
    }
    return max_ns_;
  }

  template <class Other>
  void merge(const BasicLatencyHistogram<Other>& o) noexcept {
    static_assert(std::is_same_v<Count, uint64_t>, "merge into a 64-bit histogram (a recorder only records)");
    for (uint32_t b = 0; b < kBuckets; ++b) counts_[b] += o.counts_[b];
    saturated_ = saturated_ || o.saturated();
    sum_ns_ += o.sum_ns_;
    max_ns_ = std::max(max_ns_, o.max_ns_);
    min_ns_ = std::min(min_ns_, o.min_ns_);
  }

  // The values recorded after `earlier`, a copy of this histogram taken before, after
  // which restart_max() was called (the extremes are not differences of snapshots).
  BasicLatencyHistogram since(const BasicLatencyHistogram& earlier) const noexcept {
    BasicLatencyHistogram d;
    for (uint32_t b = 0; b < kBuckets; ++b) d.counts_[b] = counts_[b] - earlier.counts_[b];
    d.sum_ns_ = sum_ns_ - earlier.sum_ns_;
    const bool any = d.count() != 0;
    d.max_ns_ = any ? max_ns_ : 0;
    d.min_ns_ = any ? min_ns_ : kNone;
    d.saturated_ = saturated();
    return d;
  }
  // Starts a new maximum, and a new minimum (at a snapshot, by the thread that records).
  void restart_max() noexcept {
    max_ns_ = 0;
    min_ns_ = kNone;
  }

 private:
  template <class>
  friend class BasicLatencyHistogram;

  static constexpr uint64_t kNone = ~uint64_t{0};  // the minimum of no value

  std::array<Count, kBuckets> counts_{};
  uint64_t sum_ns_ = 0;
  uint64_t max_ns_ = 0;
  uint64_t min_ns_ = kNone;
  bool saturated_ = false;  // a merged recorder had a full bucket
};

using LatencyRecorder = BasicLatencyHistogram<uint32_t>;   // a client's (hot path)
using LatencyHistogram = BasicLatencyHistogram<uint64_t>;  // merged; what reports read
static_assert(std::is_trivially_copyable_v<LatencyRecorder> && std::is_trivially_copyable_v<LatencyHistogram>);
static_assert(sizeof(LatencyRecorder) <= 8232 && sizeof(LatencyHistogram) <= 16424);

// The request kinds latency is kept for: op type x path.
enum class LatencyClass : uint8_t { kGetLocal = 0, kGetRemote, kPutLocal, kPutRemote, kCount };
inline constexpr size_t kLatencyClasses = static_cast<size_t>(LatencyClass::kCount);
inline constexpr std::array<const char*, kLatencyClasses> kLatencyClassNames = {"get_local", "get_remote",
                                                                               "put_local", "put_remote"};
constexpr LatencyClass latency_class(bool is_get, bool is_local) noexcept {
  return static_cast<LatencyClass>((is_get ? 0 : 2) + (is_local ? 0 : 1));
}
static_assert(latency_class(true, true) == LatencyClass::kGetLocal &&
              latency_class(true, false) == LatencyClass::kGetRemote &&
              latency_class(false, true) == LatencyClass::kPutLocal &&
              latency_class(false, false) == LatencyClass::kPutRemote);

// Issue-to-answer latency by class: RequestLatency is one client's (recorders),
// MergedRequestLatency several clients' or runs' (what reports read).
template <class Count>
struct BasicRequestLatency {
  using Histogram = BasicLatencyHistogram<Count>;
  std::array<Histogram, kLatencyClasses> by_class{};

  Histogram& operator[](LatencyClass c) noexcept { return by_class[static_cast<size_t>(c)]; }
  const Histogram& operator[](LatencyClass c) const noexcept { return by_class[static_cast<size_t>(c)]; }
  template <class Other>
  void merge(const BasicRequestLatency<Other>& o) noexcept {
    for (size_t i = 0; i < kLatencyClasses; ++i) by_class[i].merge(o.by_class[i]);
  }
  BasicRequestLatency since(const BasicRequestLatency& earlier) const noexcept {
    BasicRequestLatency d;
    for (size_t i = 0; i < kLatencyClasses; ++i) d.by_class[i] = by_class[i].since(earlier.by_class[i]);
    return d;
  }
  void restart_max() noexcept {
    for (auto& h : by_class) h.restart_max();
  }
  LatencyHistogram all() const noexcept {
    LatencyHistogram h;
    for (const auto& c : by_class) h.merge(c);
    return h;
  }
};
using RequestLatency = BasicRequestLatency<uint32_t>;
using MergedRequestLatency = BasicRequestLatency<uint64_t>;
static_assert(std::is_trivially_copyable_v<RequestLatency> && std::is_trivially_copyable_v<MergedRequestLatency>);

}  // namespace bkv::metrics
