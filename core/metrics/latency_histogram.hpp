// Request latency: a log-linear histogram of nanoseconds (docs/design.md §Metrics and
// traces), and the four a client keeps (get/put x local/remote).
//
// Buckets (the scheme of copyrpc's RTT histogram): a value below kSub = 16 has its own
// bucket; a value v in [2^e, 2^(e+1)), e >= 4, falls into one of kSub equal sub-buckets
// of that power of two:
//
//   bucket(v) = v                                     v < 16
//             = (e - 3) * 16 + ((v >> (e - 4)) & 15)  e = floor(log2 v) >= 4
//
// so a bucket spans 1/16 of its power of two: a percentile read as the bucket's lower
// bound is at most 6.25 % below the value (exact below 32 ns). The powers of two 2^4 to
// 2^63 cover every u64: the last bucket is (63 - 3) * 16 + 15 = 975 < kBuckets.
//
// Computed without a branch: with e' = floor(log2(v | 16)) (= e for v >= 16, 4 below),
// v >> (e' - 4) is 16 + the sub-bucket for v >= 16 and v itself below, so
//
//   bucket(v) = (e' - 4) * 16 + (v >> (e' - 4))
//
// gives both lines above.
//
// Values are nanoseconds, not TSC ticks: the histograms of ranks whose TSCs tick at
// different rates are merged (docs/benchmarks.md §Latency recording in the client).
//
// Fixed size, trivially copyable (gathered over MPI as raw bytes), no allocation:
// record() is an or, a count-leading-zeros, a shift, two adds and a max on the client's
// hot path: three read-modify-writes of memory (the bucket, the sum, the maximum). The
// number of values is not kept apart: it is the sum of the buckets, computed when read
// (a report reads it a few times; a client records every request).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace bkv::metrics {

class LatencyHistogram {
 public:
  static constexpr uint32_t kSub = 16;                    // sub-buckets per power of two
  static constexpr uint32_t kSubBits = 4;                 // log2(kSub)
  static constexpr uint32_t kBuckets = 61 * kSub;         // 0 .. (63 - 3) * 16 + 15 = 975
  static_assert(uint32_t{1} << kSubBits == kSub);
  static_assert((63 - 3) * kSub + (kSub - 1) == kBuckets - 1);

  static constexpr uint32_t bucket(uint64_t ns) noexcept {
    const uint32_t shift = 63 - kSubBits - static_cast<uint32_t>(std::countl_zero(ns | kSub));  // e' - 4
    return shift * kSub + static_cast<uint32_t>(ns >> shift);
  }
  // The smallest value of bucket b (b < kBuckets).
  static constexpr uint64_t lower_bound(uint32_t b) noexcept {
    if (b < kSub) return b;
    const uint32_t e = b / kSub + 3, sub = b % kSub;
    return (uint64_t{1} << e) + (uint64_t{sub} << (e - kSubBits));
  }

  void record(uint64_t ns) noexcept {
    ++counts_[bucket(ns)];
    sum_ns_ += ns;
    max_ns_ = std::max(max_ns_, ns);
  }

  // The number of values recorded (kBuckets adds).
  uint64_t count() const noexcept {
    uint64_t n = 0;
    for (uint64_t c : counts_) n += c;
    return n;
  }
  uint64_t sum_ns() const noexcept { return sum_ns_; }
  uint64_t max_ns() const noexcept { return max_ns_; }
  uint64_t bucket_count(uint32_t b) const noexcept { return counts_[b]; }
  double mean_ns() const noexcept {
    const uint64_t n = count();
    return n ? static_cast<double>(sum_ns_) / static_cast<double>(n) : 0.0;
  }

  // The value below which a fraction p of the recorded values lie: the lower bound of
  // the bucket holding the ceil(p * count)-th smallest value (never above max_ns);
  // p = 1 gives max_ns exactly. 0 when empty.
  uint64_t percentile_ns(double p) const noexcept {
    const uint64_t n = count();
    if (n == 0) return 0;
    if (p >= 1.0) return max_ns_;
    const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(p * static_cast<double>(n))));
    uint64_t seen = 0;
    for (uint32_t b = 0; b < kBuckets; ++b) {
      seen += counts_[b];
      if (seen >= rank) return std::min(lower_bound(b), max_ns_);
    }
    return max_ns_;
  }

  void merge(const LatencyHistogram& o) noexcept {
    for (uint32_t b = 0; b < kBuckets; ++b) counts_[b] += o.counts_[b];
    sum_ns_ += o.sum_ns_;
    max_ns_ = std::max(max_ns_, o.max_ns_);
  }

  // The values recorded after `earlier`, a copy of this histogram taken before, after
  // which restart_max() was called (the maximum is not a difference of snapshots).
  LatencyHistogram since(const LatencyHistogram& earlier) const noexcept {
    LatencyHistogram d;
    for (uint32_t b = 0; b < kBuckets; ++b) d.counts_[b] = counts_[b] - earlier.counts_[b];
    d.sum_ns_ = sum_ns_ - earlier.sum_ns_;
    d.max_ns_ = d.count() ? max_ns_ : 0;
    return d;
  }
  // Starts a new maximum (at a snapshot, by the thread that records).
  void restart_max() noexcept { max_ns_ = 0; }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t sum_ns_ = 0;
  uint64_t max_ns_ = 0;
};
static_assert(std::is_trivially_copyable_v<LatencyHistogram>);
static_assert(LatencyHistogram::bucket(15) == 15 && LatencyHistogram::bucket(16) == 16 &&
              LatencyHistogram::bucket(31) == 31 && LatencyHistogram::bucket(32) == 32 &&
              LatencyHistogram::bucket(34) == 33);
static_assert(LatencyHistogram::lower_bound(LatencyHistogram::bucket(1000)) <= 1000 &&
              LatencyHistogram::lower_bound(LatencyHistogram::bucket(1000) + 1) > 1000);
static_assert(LatencyHistogram::bucket(~uint64_t{0}) == (63 - 3) * LatencyHistogram::kSub + LatencyHistogram::kSub - 1 &&
              LatencyHistogram::bucket(~uint64_t{0}) < LatencyHistogram::kBuckets);

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

// Issue-to-answer latency of one client (or merged over clients), by class.
struct RequestLatency {
  std::array<LatencyHistogram, kLatencyClasses> by_class{};

  LatencyHistogram& operator[](LatencyClass c) noexcept { return by_class[static_cast<size_t>(c)]; }
  const LatencyHistogram& operator[](LatencyClass c) const noexcept { return by_class[static_cast<size_t>(c)]; }
  void merge(const RequestLatency& o) noexcept {
    for (size_t i = 0; i < kLatencyClasses; ++i) by_class[i].merge(o.by_class[i]);
  }
  RequestLatency since(const RequestLatency& earlier) const noexcept {
    RequestLatency d;
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
static_assert(std::is_trivially_copyable_v<RequestLatency>);

}  // namespace bkv::metrics
