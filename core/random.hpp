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

  // Jump-ahead by any number of steps. The state transition of xoshiro256 is linear over
  // GF(2): with M its 256x256 matrix and P its characteristic polynomial (degree 256,
  // primitive: the generator's period is 2^256 - 1), M^k = J(M) for J = x^k mod P
  // (Cayley-Hamilton), so the state k steps ahead is the sum (XOR) of the states
  // M^i s for the coefficients i of J that are 1: 256 steps whatever k is.
  // Jump{k} is J for k steps (computed once; reusable for any number of generators);
  // jump(j) moves the generator as k calls of next() would.
  struct Jump {
    uint64_t poly[4]{};  // J's coefficients: bit i of the 256 is that of x^i
    explicit Jump(uint64_t steps) noexcept;
  };
  void jump(const Jump& j) noexcept {
    uint64_t t[4]{};
    for (int w = 0; w < 4; ++w)
      for (int b = 0; b < 64; ++b) {
        if ((j.poly[w] >> b) & 1u)
          for (int i = 0; i < 4; ++i) t[i] ^= s_[i];
        next();
      }
    for (int i = 0; i < 4; ++i) s_[i] = t[i];
  }

 private:
  // P without its x^256 term (bit i: the coefficient of x^i), found once by
  // Berlekamp-Massey from 512 bits of one state bit's sequence: for a primitive P, the
  // shortest linear recurrence of any nonzero such sequence is P itself.
  static const uint64_t* characteristic_low() noexcept;
  static constexpr uint64_t rotl(uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4]{};
};

inline const uint64_t* Rng::characteristic_low() noexcept {
  struct Low {
    uint64_t w[4]{};
    Low() noexcept {
      constexpr int kN = 512;
      uint8_t seq[kN];
      Rng r(1);
      for (int i = 0; i < kN; ++i) {
        seq[i] = static_cast<uint8_t>(r.s_[0] & 1u);
        r.next();
      }
      // Berlekamp-Massey over GF(2): c is the connection polynomial (c[0] = 1).
      uint8_t c[kN + 1]{}, b[kN + 1]{}, t[kN + 1];
      c[0] = b[0] = 1;
      int len = 0, m = -1;
      for (int n = 0; n < kN; ++n) {
        uint8_t d = seq[n];
        for (int i = 1; i <= len; ++i) d ^= static_cast<uint8_t>(c[i] & seq[n - i]);
        if (d == 0) continue;
        for (int i = 0; i <= kN; ++i) t[i] = c[i];
        for (int i = 0; i + n - m <= kN; ++i) c[i + n - m] ^= b[i];
        if (2 * len <= n) {
          len = n + 1 - len;
          m = n;
          for (int i = 0; i <= kN; ++i) b[i] = t[i];
        }
      }
      // len == 256. The recurrence s[n] = sum_{i=1..len} c[i] s[n-i] has characteristic
      // polynomial x^len + sum c[i] x^(len-i): the coefficient of x^j (j < len) is c[len-j].
      for (int j = 0; j < 256 && len == 256; ++j)
        if (c[256 - j]) w[j / 64] |= uint64_t{1} << (j % 64);
    }
  };
  static const Low low;
  return low.w;
}

inline Rng::Jump::Jump(uint64_t steps) noexcept {
  const uint64_t* p = characteristic_low();
  // a * b mod P, polynomials of degree < 256 (Horner over a's coefficients).
  auto mulmod = [p](const uint64_t* a, const uint64_t* b, uint64_t* out) {
    uint64_t r[4]{};
    for (int i = 255; i >= 0; --i) {
      const uint64_t carry = r[3] >> 63;  // r * x: the x^256 term folds back as P's low part
      r[3] = (r[3] << 1) | (r[2] >> 63);
      r[2] = (r[2] << 1) | (r[1] >> 63);
      r[1] = (r[1] << 1) | (r[0] >> 63);
      r[0] <<= 1;
      if (carry)
        for (int w = 0; w < 4; ++w) r[w] ^= p[w];
      if ((a[i / 64] >> (i % 64)) & 1u)
        for (int w = 0; w < 4; ++w) r[w] ^= b[w];
    }
    for (int w = 0; w < 4; ++w) out[w] = r[w];
  };
  // x^steps by square-and-multiply from the top bit.
  uint64_t r[4] = {1, 0, 0, 0};
  const uint64_t x[4] = {2, 0, 0, 0};
  for (int bit = 63; bit >= 0; --bit) {
    mulmod(r, r, r);
    if ((steps >> bit) & 1u) mulmod(r, x, r);
  }
  for (int w = 0; w < 4; ++w) poly[w] = r[w];
}

}  // namespace bkv
