// Workload generator (docs/design.md §KV and workload).
//
// Every client pre-generates a pattern of (rank, key, is_read) tuples before the
// benchmark starts and replays it in a loop for every epoch and run. The pattern of
// client `c` on rank `r` is a pure function of (config seed, r, c): its generator is
// bkv::Rng(bkv::derive_seed(seed, {r, c})).
//
//  - is_read: Bernoulli(read_ratio) per entry.
//  - uniform: rank uniform over [0, np), key uniform over [0, key_range).
//  - zipfian: one item index i over the np * key_range items with P(i) proportional to
//    1 / (i + 1)^s (i = 0 is the most popular), mapped to rank = i % np,
//    key = i / np. The interleaved mapping spreads the hottest items over all ranks
//    (item 0 on rank 0, item 1 on rank 1, ...) and, inside a node, makes keys 0, 1, 2...
//    the hot ones, which key % D spreads over the daemons. Every client uses the same
//    mapping, so all clients agree on which items are hot.
//
// Put values are deterministic: the value of the n-th request a client issues (counting
// from 0 over the whole replay) is put_value(value_seed, n), where value_seed is drawn
// from the same generator after the pattern. Values are < 2^63, never kAbsentValue.
//
// Storage (WorkloadConfig::storage): a stored pattern holds its entries, generated before the run
// (8 bytes each: the original's clients, and the real runs, replay a table, so that no
// random draw falls inside the timed loop). An on-demand pattern draws each entry from the
// same generator when the replay reaches it and starts the generator again at every
// wrap: the same sequence, in no memory. The simulator uses it (its clients' CPU time is
// the cost model's, not the host's): np * clients stored patterns of C1 at NP=32 would
// take 32 x 46 x 10,000 x 8 bytes = 118 MB, written before the first event.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "core/kv/types.hpp"
#include "core/random.hpp"

namespace bkv::kv {

enum class Distribution : uint8_t { kUniform = 0, kZipfian = 1 };

constexpr const char* to_string(Distribution d) noexcept {
  return d == Distribution::kUniform ? "uniform" : "zipfian";
}

// Limits of a workload (and of the options that feed it).
inline constexpr uint64_t kMaxRanks = uint64_t{1} << 20;
inline constexpr uint64_t kMaxKeyRange = uint64_t{1} << 32;  // keys fit a u32 in the pattern
inline constexpr uint64_t kMaxPatternLen = uint64_t{1} << 24;  // positions fit a u32 in the pattern
inline constexpr uint64_t kDefaultPatternLen = 4096;
// The zipf sampler works on doubles: every item index must be exact in a double.
static_assert(kMaxRanks * kMaxKeyRange <= (uint64_t{1} << 53));

struct WorkloadConfig {
  uint32_t num_ranks = 2;
  uint64_t key_range = 1024;
  double read_ratio = 0.5;
  Distribution distribution = Distribution::kUniform;
  double zipf_s = 1.0;
  uint64_t seed = 1;
  uint32_t pattern_len = kDefaultPatternLen;
  // How each client's Pattern holds it (below): not part of the workload, the sequence is
  // the same either way.
  enum class Storage : uint8_t { kStored = 0, kOnDemand } storage = Storage::kStored;
};
using PatternStorage = WorkloadConfig::Storage;

// Throws std::invalid_argument naming the field and the bad value.
void validate(const WorkloadConfig& cfg);

// One pattern tuple packed in 8 bytes: key (< kMaxKeyRange) and rank with the read flag
// in the top bit.
struct PatternEntry {
  uint32_t key = 0;
  uint32_t rank_and_read = 0;

  static constexpr uint32_t kReadBit = 0x8000'0000u;
  static_assert(kMaxRanks <= kReadBit);

  static constexpr PatternEntry make(uint32_t rank, uint64_t key, bool is_read) noexcept {
    return PatternEntry{static_cast<uint32_t>(key), rank | (is_read ? kReadBit : 0u)};
  }
  constexpr uint32_t rank() const noexcept { return rank_and_read & ~kReadBit; }
  constexpr bool is_read() const noexcept { return (rank_and_read & kReadBit) != 0; }
};
static_assert(sizeof(PatternEntry) == 8);

// Exact sampler of the Zipf distribution P(k) proportional to k^-s, k = 1..n, for any
// s > 0 and any n <= 2^53, by rejection-inversion (Hoermann & Derflinger, 1996): invert
// the integral of the hat x^-s over [1/2, n + 1/2], round to the nearest integer and
// accept when the point falls under the histogram bar of k. Expected O(1) draws per
// sample (the acceptance rate is high for every s); setup is O(1).
// Uses std::exp/std::log (libm): bit-identical results on the same platform.
class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double s);

  // A 0-based item index in [0, n): 0 is the most popular item.
  uint64_t operator()(Rng& rng) const noexcept;

  uint64_t n() const noexcept { return n_; }
  double s() const noexcept { return s_; }

 private:
  double h(double x) const noexcept;        // hat density x^-s
  double H(double x) const noexcept;        // its integral (x^(1-s) - 1) / (1 - s)
  double H_inv(double y) const noexcept;    // inverse of H

  uint64_t n_;
  double s_;
  double h_integral_x1_;  // H(1.5) - h(1): lower end of the uniform range
  double h_integral_n_;   // H(n + 0.5): upper end
  double squeeze_;        // accept at once when k - x <= squeeze_ (from the k = 2 bar)
};

// The value a client puts with its n-th request (n counts from 0 over the replay).
constexpr uint64_t put_value(uint64_t value_seed, uint64_t n) noexcept {
  uint64_t state = value_seed ^ n;
  return splitmix64(state) >> 1;  // < 2^63, so never kAbsentValue
}

class Pattern {
 public:
  // The pattern of client `client` on rank `my_rank`, stored or on demand as cfg.storage
  // says (validates cfg).
  Pattern(const WorkloadConfig& cfg, uint32_t my_rank, uint32_t client);

  size_t size() const noexcept { return len_; }
  PatternStorage storage() const noexcept { return on_demand_ ? PatternStorage::kOnDemand : PatternStorage::kStored; }
  // The entries of a stored pattern (an on-demand one holds none: entries() is empty,
  // and operator[] throws std::logic_error).
  const PatternEntry& operator[](size_t i) const {
    if (on_demand_) throw std::logic_error("Pattern: an on-demand pattern holds no entries");
    return entries_[i];
  }
  std::span<const PatternEntry> entries() const noexcept { return entries_; }
  uint64_t value_seed() const noexcept { return value_seed_; }

  // Replay. peek() is the next request to issue (a client that cannot post it yet keeps
  // it and retries), advance() moves to the following one, next() does both.
  Request peek() const noexcept {
    const PatternEntry e = on_demand_ ? current_ : entries_[cursor_];
    return e.is_read() ? Request::meta_get(e.rank(), e.key)
                       : Request::meta_put(e.rank(), e.key, put_value(value_seed_, issued_));
  }
  // peek().rank without building the request (a put's value).
  uint32_t peek_rank() const noexcept { return on_demand_ ? current_.rank() : entries_[cursor_].rank(); }
  void advance() noexcept {
    ++issued_;
    if (++cursor_ == len_) {
      cursor_ = 0;
      if (on_demand_) gen_.rng = start_;  // the replay starts over: so does the generator
    }
    if (on_demand_) current_ = gen_.next();
  }
  Request next() noexcept {
    const Request r = peek();
    advance();
    return r;
  }
  uint64_t issued() const noexcept { return issued_; }  // requests taken so far

 private:
  // Draws entries in the pattern's order: rank, key, then the read flag (uniform), or
  // the item, then the read flag (zipfian).
  struct Generator {
    Rng rng;
    uint64_t key_range = 1;
    double read_ratio = 0;
    uint32_t num_ranks = 1;
    bool zipfian = false;             // zipf holds a sampler (read by next(), beside the draws' state)
    std::optional<ZipfSampler> zipf;  // zipfian only
    // Whether every next() makes exactly three draws of rng: uniform targets over
    // power-of-two ranges, where Rng::below never rejects (its threshold 2^64 mod n is 0).
    bool fixed_draws() const noexcept {
      return !zipf && std::has_single_bit(uint64_t{num_ranks}) && std::has_single_bit(key_range);
    }
    PatternEntry next() noexcept {
      if (!zipfian) {
        const auto rank = static_cast<uint32_t>(rng.below(num_ranks));
        const uint64_t key = rng.below(key_range);
        return PatternEntry::make(rank, key, rng.bernoulli(read_ratio));
      }
      const uint64_t item = (*zipf)(rng);
      const auto rank = static_cast<uint32_t>(item % num_ranks);  // interleaved mapping
      const uint64_t key = item / num_ranks;
      return PatternEntry::make(rank, key, rng.bernoulli(read_ratio));
    }
  };

  // What every request reads (peek, advance) first, in 93 bytes: the replay state, then
  // the generator's (its draws' state, then the zipfian sampler in its last field), the
  // rest last. A simulation replays thousands of patterns in turn, and each request finds
  // none of its pattern's lines in the cache: backend::Client places these bytes so that
  // they end its third line.
  PatternEntry current_;  // on demand: the entry at cursor_
  uint32_t cursor_ = 0;   // < len_ <= kMaxPatternLen
  uint32_t len_ = 0;
  uint64_t issued_ = 0;
  uint64_t value_seed_ = 0;
  bool on_demand_ = false;
  Generator gen_;                      // on demand: draws the entry after current_
  std::vector<PatternEntry> entries_;  // stored
  Rng start_;                          // on demand: the generator at the pattern's start
};

}  // namespace bkv::kv
