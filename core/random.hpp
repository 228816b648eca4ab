// Seeded pseudo-random streams. Deterministic across platforms and standard libraries:
// no std::*_distribution (their algorithms are implementation-defined), only integer
// arithmetic and IEEE doubles built from the top 53 bits.
//
//  - SplitMix64 turns a (seed, stream ids...) tuple into well-mixed 64-bit seeds;
//  - Xoshiro256** is the per-entity generator (one per client, per NIC, per link...).
#pragma once

#include <cstdint>
#include <initializer_list>

namespace bkv {

__extension__ using uint128 = unsigned __int128;  // GCC/Clang builtin; __extension__ keeps -Wpedantic quiet

// One SplitMix64 step: advances state and returns a mixed value.
constexpr uint64_t splitmix64(uint64_t& state) noexcept {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Seed of an entity's stream: f(config seed, ids...). Different id tuples give
// independent-looking streams; the same tuple always gives the same stream.
constexpr uint64_t derive_seed(uint64_t seed, std::initializer_list<uint64_t> ids) noexcept {
  uint64_t s = seed;
  uint64_t out = splitmix64(s);
  for (uint64_t id : ids) {
    s ^= id + 0x632BE59BD9B4E019ull + (out << 6) + (out >> 2);
    out = splitmix64(s);
  }
  return out;
}

class Rng {
 public:
  explicit constexpr Rng(uint64_t seed = 0) noexcept {
    uint64_t s = seed;
    for (auto& w : s_) w = splitmix64(s);
  }

  // xoshiro256**: 64 random bits.
  constexpr uint64_t next() noexcept {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform double in [0, 1) from the top 53 bits.
  constexpr double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), n > 0, without modulo bias (Lemire's multiply-shift
  // with rejection).
  constexpr uint64_t below(uint64_t n) noexcept {
    uint64_t x = next();
    uint128 m = static_cast<uint128>(x) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        x = next();
        m = static_cast<uint128>(x) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  constexpr bool bernoulli(double p) noexcept { return uniform() < p; }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4]{};
};

}  // namespace bkv
