// The queueing stations the NIC model is built from. Each one is a small value type
// with no knowledge of NICs, tested on its own (tests/sim/test_stations.cpp).
//
// Time inside stations is kept in picoseconds (uint64) so that per-byte and per-WQE
// service times well below a nanosecond add up exactly; callers convert to engine
// nanoseconds at event boundaries (ps_to_ns_ceil).
//
// Stations are *computed on arrival*: when a job arrives at time a, the station
// immediately decides when it starts and finishes, from the state left by earlier
// arrivals. That is exact first-come-first-served queueing as long as arrivals are
// presented in time order, which the NIC model guarantees by presenting them from
// engine events (stations that sit right behind another one in the same event accept a
// small reordering; nic_model.hpp lists where).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "sim/engine.hpp"

namespace bkv::sim {

inline constexpr uint64_t kPsPerNs = 1000;
constexpr uint64_t ns_to_ps(Time ns) noexcept { return ns * kPsPerNs; }
constexpr Time ps_to_ns_ceil(uint64_t ps) noexcept { return (ps + kPsPerNs - 1) / kPsPerNs; }

// Serialization time of `bytes` on a link of `gbps` gigabits per second, in ps per byte:
// 8 bits / (gbps * 1e9 bit/s) = 8000 / gbps ps.
constexpr double ps_per_byte_for_gbps(double gbps) noexcept { return gbps > 0.0 ? 8000.0 / gbps : 0.0; }

// Per-station counters. Time-averaged depth uses Little's law: the integral of the
// number of jobs present over time equals the sum of the jobs' sojourn times.
struct StationStats {
  uint64_t jobs = 0;
  uint64_t busy_ps = 0;     // sum of service times (server occupancy)
  uint64_t wait_ps = 0;     // sum of (start - arrival)
  uint64_t sojourn_ps = 0;  // sum of (finish - arrival)
  uint32_t max_depth = 0;   // most jobs present (waiting + in service) seen by an arrival, itself included

  double mean_depth(Time elapsed_ns) const noexcept {
    return elapsed_ns == 0 ? 0.0 : static_cast<double>(sojourn_ps) / static_cast<double>(ns_to_ps(elapsed_ns));
  }
  double utilization(Time elapsed_ns, uint32_t servers) const noexcept {
    if (elapsed_ns == 0 || servers == 0) return 0.0;
    return static_cast<double>(busy_ps) / (static_cast<double>(ns_to_ps(elapsed_ns)) * servers);
  }
  double mean_wait_ns() const noexcept { return jobs == 0 ? 0.0 : static_cast<double>(wait_ps) * 1e-3 / jobs; }
  double mean_sojourn_ns() const noexcept { return jobs == 0 ? 0.0 : static_cast<double>(sojourn_ps) * 1e-3 / jobs; }
};

// Number of jobs present at a station: the finish times of the jobs that arrived so far;
// an arrival drops those finished by its arrival time and counts the rest, itself
// included.
//
// Two layouts hold the same set of finish times and drop exactly the same ones (every
// time <= the arrival), so the depth they return is the same:
//  - ascending: while each finish time is >= the previous one (always so on a one-server
//    FCFS station: a job finishes after the one before it), the times sit in arrival
//    order in a vector; dropping is advancing `head_` past the finished prefix.
//  - heap: the first finish time earlier than the latest one (a multi-server pool, or
//    per-QP constraints) turns the live times into a min-heap, which it stays until the
//    station runs empty. The vectors only grow to the peak depth.
class DepthTracker {
 public:
  uint32_t arrive(uint64_t arrive_ps, uint64_t finish_ps) {
    if (!heap_mode_) {
      while (head_ < times_.size() && times_[head_] <= arrive_ps) ++head_;
      if (head_ == times_.size()) {
        times_.clear();
        head_ = 0;
      } else if (head_ >= kCompactAfter && 2 * head_ >= times_.size()) [[unlikely]] {
        times_.erase(times_.begin(), times_.begin() + static_cast<ptrdiff_t>(head_));
        head_ = 0;
      }
      if (times_.empty() || finish_ps >= times_.back()) {
        times_.push_back(finish_ps);
        return static_cast<uint32_t>(times_.size() - head_);
      }
      // Out of order: the live times become a heap (an ascending range already is one).
      times_.erase(times_.begin(), times_.begin() + static_cast<ptrdiff_t>(head_));
      head_ = 0;
      heap_mode_ = true;
    } else {
      while (!times_.empty() && times_.front() <= arrive_ps) {
        std::pop_heap(times_.begin(), times_.end(), std::greater<>{});
        times_.pop_back();
      }
      if (times_.empty()) {  // the station ran empty: back to the ascending layout
        heap_mode_ = false;
        times_.push_back(finish_ps);
        return 1;
      }
    }
    times_.push_back(finish_ps);
    std::push_heap(times_.begin(), times_.end(), std::greater<>{});
    return static_cast<uint32_t>(times_.size());
  }
  uint32_t depth() const noexcept { return static_cast<uint32_t>(times_.size() - head_); }

 private:
  // The ascending layout drops its finished prefix once it is this long and at least
  // half the vector.
  static constexpr size_t kCompactAfter = 32;
  std::vector<uint64_t> times_;  // ascending from head_ on, or (heap_mode_) a min-heap
  size_t head_ = 0;              // ascending layout: times before head_ are finished
  bool heap_mode_ = false;
};

// k identical servers in front of one queue (a NIC engine pool, a link when k == 1).
// k == 0 means unlimited servers: a pure delay with no queueing.
//
// Assignment is best-fit: a job that can start at `ready` takes the server that became
// free last but no later than `ready`, so the gaps left by jobs held back by an extra
// constraint (`not_before`, e.g. per-QP serialization) stay usable by later arrivals as
// far as possible; if every server is busy at `ready`, the earliest-free one. With
// not_before == 0 and arrivals in time order this is exact FCFS multi-server queueing.
class ServerPool {
 public:
  struct Slot {
    uint64_t start_ps;
    uint64_t finish_ps;
  };

  explicit ServerPool(uint32_t servers = 1) : servers_(servers), free_ps_(servers > 1 ? servers : 0, 0) {}

  uint32_t servers() const noexcept { return servers_; }

  Slot reserve(uint64_t arrive_ps, uint64_t not_before_ps, uint64_t service_ps) {
    const uint64_t ready = std::max(arrive_ps, not_before_ps);
    uint64_t start = ready;
    if (servers_ == 1) {
      // One server (a port, a PCIe direction): it is the best fit and the earliest.
      start = std::max(ready, one_free_ps_);
      one_free_ps_ = start + service_ps;
    } else if (servers_ > 1) {
      // Ties go to the lowest index, for the best fit and for the earliest.
      const size_t n = free_ps_.size();
      size_t best = n;
      uint64_t best_free = 0;
      size_t earliest = 0;
      uint64_t earliest_free = free_ps_[0];
      for (size_t i = 0; i < n; ++i) {
        const uint64_t f = free_ps_[i];
        if (f <= ready && (best == n || f > best_free)) {
          best = i;
          best_free = f;
        }
        if (f < earliest_free) {
          earliest = i;
          earliest_free = f;
        }
      }
      const size_t pick = best != n ? best : earliest;
      start = std::max(ready, free_ps_[pick]);
      free_ps_[pick] = start + service_ps;
    }
    const uint64_t finish = start + service_ps;
    stats_.jobs += 1;
    stats_.busy_ps += service_ps;
    stats_.wait_ps += start - arrive_ps;
    stats_.sojourn_ps += finish - arrive_ps;
    stats_.max_depth = std::max(stats_.max_depth, depth_.arrive(arrive_ps, finish));
    return Slot{start, finish};
  }

  // Earliest time any server is free.
  uint64_t earliest_free_ps() const noexcept {
    if (servers_ == 1) return one_free_ps_;
    if (free_ps_.empty()) return 0;
    return *std::min_element(free_ps_.begin(), free_ps_.end());
  }

  const StationStats& stats() const noexcept { return stats_; }

 private:
  uint32_t servers_ = 1;
  uint64_t one_free_ps_ = 0;        // servers_ == 1: when the server is free
  std::vector<uint64_t> free_ps_;   // servers_ > 1: when each server is free
  StationStats stats_;
  DepthTracker depth_;
};

// k tokens held for a time that is only known once the job starts (PCIe read tags: a
// read holds its tag until the data is back, which depends on the bus queue it meets).
// Earliest-free assignment from a min-heap: O(log k), exact FCFS for arrivals in time
// order. k == 0 means unlimited tokens.
class TokenPool {
 public:
  explicit TokenPool(uint32_t tokens = 0) : free_ps_(tokens, 0) {}  // all-zero is ascending

  uint32_t tokens() const noexcept { return static_cast<uint32_t>(free_ps_.size()); }

  // When a job arriving at arrive_ps gets a token.
  uint64_t start_time(uint64_t arrive_ps) const noexcept {
    if (free_ps_.empty()) return arrive_ps;
    return std::max(arrive_ps, heap_mode_ ? free_ps_.front() : free_ps_[oldest_]);
  }
  // Takes the earliest-free token for [start_ps, finish_ps) (start_ps from start_time()).
  //
  // The release times are a multiset: take the smallest, add finish_ps. While every
  // finish_ps is >= the largest release time (a read tag released when the data is back
  // over a FIFO bus), they stay ascending in a ring from oldest_: the smallest is
  // replaced in place. The first smaller finish_ps turns them into a min-heap (an
  // ascending array is one) for good. Either way the same multiset: the same start times.
  void hold(uint64_t arrive_ps, uint64_t start_ps, uint64_t finish_ps) {
    if (!free_ps_.empty()) {
      const size_t k = free_ps_.size();
      if (!heap_mode_) {
        const size_t newest = oldest_ == 0 ? k - 1 : oldest_ - 1;
        if (finish_ps >= free_ps_[newest]) {
          free_ps_[oldest_] = finish_ps;
          oldest_ = oldest_ + 1 == k ? 0 : oldest_ + 1;
        } else {
          std::rotate(free_ps_.begin(), free_ps_.begin() + static_cast<ptrdiff_t>(oldest_), free_ps_.end());
          oldest_ = 0;
          heap_mode_ = true;
        }
      }
      if (heap_mode_) {
        std::pop_heap(free_ps_.begin(), free_ps_.end(), std::greater<>{});
        free_ps_.back() = finish_ps;
        std::push_heap(free_ps_.begin(), free_ps_.end(), std::greater<>{});
      }
    }
    stats_.jobs += 1;
    stats_.busy_ps += finish_ps - start_ps;
    stats_.wait_ps += start_ps - arrive_ps;
    stats_.sojourn_ps += finish_ps - arrive_ps;
    stats_.max_depth = std::max(stats_.max_depth, depth_.arrive(arrive_ps, finish_ps));
  }

  const StationStats& stats() const noexcept { return stats_; }

 private:
  std::vector<uint64_t> free_ps_;  // release times: an ascending ring from oldest_, or a min-heap
  size_t oldest_ = 0;
  bool heap_mode_ = false;
  StationStats stats_;
  DepthTracker depth_;
};

// A transfer channel with a bandwidth and a fixed latency (a PCIe direction, a link
// port): transfers serialize at the bandwidth in FIFO order, each one then takes the
// fixed latency to arrive. `overhead_bytes` are added per `unit_bytes` chunk (TLP headers
// per max-payload chunk on PCIe, packet headers per MTU on a link).
class Channel {
 public:
  Channel() = default;
  Channel(double gbps, uint64_t latency_ps, uint32_t unit_bytes, uint32_t overhead_bytes)
      : ps_per_byte_(ps_per_byte_for_gbps(gbps)),
        latency_ps_(latency_ps),
        unit_bytes_(unit_bytes),
        overhead_bytes_(overhead_bytes),
        port_(1) {}

  // Bytes on the wire for a payload of `bytes` (at least one unit of overhead).
  uint64_t wire_bytes(uint64_t bytes) const noexcept {
    const uint64_t units = unit_bytes_ == 0 ? 1 : std::max<uint64_t>(1, (bytes + unit_bytes_ - 1) / unit_bytes_);
    return bytes + units * overhead_bytes_;
  }
  uint64_t serialization_ps(uint64_t bytes) const noexcept {
    return static_cast<uint64_t>(static_cast<double>(wire_bytes(bytes)) * ps_per_byte_ + 0.5);
  }

  // Returns the arrival time at the far end (serialization done + latency).
  uint64_t send(uint64_t arrive_ps, uint64_t bytes) {
    const ServerPool::Slot s = port_.reserve(arrive_ps, 0, serialization_ps(bytes));
    bytes_ += bytes;
    return s.finish_ps + latency_ps_;
  }

  uint64_t latency_ps() const noexcept { return latency_ps_; }
  uint64_t bytes() const noexcept { return bytes_; }
  const StationStats& stats() const noexcept { return port_.stats(); }

 private:
  double ps_per_byte_ = 0.0;
  uint64_t latency_ps_ = 0;
  uint32_t unit_bytes_ = 0;
  uint32_t overhead_bytes_ = 0;
  ServerPool port_{1};
  uint64_t bytes_ = 0;
};

// A set-associative cache with LRU replacement inside each set: the shape of a NIC's
// on-chip caches of ICM (QP contexts, memory translation entries). access(key) returns
// true on a hit and installs the key on a miss. entries == 0 disables the cache (every
// access hits: the working set is assumed to fit).
class SetAssocCache {
 public:
  SetAssocCache() = default;
  SetAssocCache(uint32_t entries, uint32_t ways) {
    if (entries == 0) return;
    if (ways == 0 || entries % ways != 0)
      throw std::invalid_argument("SetAssocCache: entries must be a multiple of ways");
    ways_ = ways;
    sets_ = entries / ways;
    tags_.assign(entries, kEmpty);
    stamps_.assign(entries, 0);
  }

  bool enabled() const noexcept { return sets_ != 0; }

  bool access(uint64_t key) noexcept {
    if (sets_ == 0) return true;
    const uint64_t h = mix(key);
    const size_t base = static_cast<size_t>(h % sets_) * ways_;
    ++clock_;
    size_t victim = base;
    for (size_t i = base; i < base + ways_; ++i) {
      if (tags_[i] == key) {
        stamps_[i] = clock_;
        ++hits_;
        return true;
      }
      if (stamps_[i] < stamps_[victim]) victim = i;
    }
    tags_[victim] = key;
    stamps_[victim] = clock_;
    ++misses_;
    return false;
  }

  uint64_t hits() const noexcept { return hits_; }
  uint64_t misses() const noexcept { return misses_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  // Set index hash (SplitMix64 finalizer): spreads sequential keys over the sets.
  static constexpr uint64_t mix(uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  uint32_t ways_ = 0;
  uint64_t sets_ = 0;
  std::vector<uint64_t> tags_;
  std::vector<uint64_t> stamps_;
  uint64_t clock_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace bkv::sim
