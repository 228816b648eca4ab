// Workload generator and Zipf sampler (core/kv/workload.hpp). Every statistical check
// uses a fixed seed and a tolerance of several standard deviations.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "core/kv/workload.hpp"

using namespace bkv::kv;

namespace {

WorkloadConfig config(uint32_t np, uint64_t key_range, uint32_t len, Distribution d = Distribution::kUniform,
                      double s = 1.0, double read_ratio = 0.5, uint64_t seed = 1) {
  return {.num_ranks = np, .key_range = key_range, .read_ratio = read_ratio, .distribution = d, .zipf_s = s,
          .seed = seed, .pattern_len = len};
}

size_t equal_entries(const Pattern& a, const Pattern& b) {
  size_t n = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    n += (a[i].key == b[i].key && a[i].rank_and_read == b[i].rank_and_read) ? 1 : 0;
  }
  return n;
}

// Generalized harmonic number sum_{k=1..n} k^-s: exact below 2000 terms, Euler-Maclaurin
// tail beyond (error far below the test tolerances).
double harmonic(uint64_t n, double s) {
  const uint64_t m = std::min<uint64_t>(n, 2000);
  double sum = 0;
  for (uint64_t k = m; k >= 1; --k) sum += std::pow(static_cast<double>(k), -s);
  if (n == m) return sum;
  const double M = static_cast<double>(m), N = static_cast<double>(n);
  const double integral = (s == 1.0) ? std::log(N / M) : (std::pow(M, 1 - s) - std::pow(N, 1 - s)) / (s - 1);
  return sum + integral - std::pow(M, -s) / 2 + std::pow(N, -s) / 2 +
         s / 12 * (std::pow(M, -s - 1) - std::pow(N, -s - 1));
}

// Least-squares slope of log(count[i]) against log(i + 1), i < top.
double rank_frequency_slope(const std::vector<uint64_t>& count, size_t top) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < top; ++i) {
    REQUIRE(count[i] > 0);
    const double x = std::log(static_cast<double>(i + 1));
    const double y = std::log(static_cast<double>(count[i]));
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double n = static_cast<double>(top);
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

}  // namespace

TEST_CASE("same seed, rank and client give the same pattern and values", "[kv][workload]") {
  for (const auto d : {Distribution::kUniform, Distribution::kZipfian}) {
    const auto cfg = config(4, 1024, 4096, d);
    Pattern a(cfg, 2, 5), b(cfg, 2, 5);
    REQUIRE(a.size() == 4096);
    CHECK(equal_entries(a, b) == a.size());
    CHECK(a.value_seed() == b.value_seed());
    for (int i = 0; i < 10000; ++i) REQUIRE(a.next() == b.next());
  }
}

TEST_CASE("different rank, client or seed give different patterns", "[kv][workload]") {
  const auto cfg = config(4, 1024, 4096);
  const Pattern base(cfg, 1, 1);
  // Two independent uniform patterns agree on an entry with probability 1/(4*1024*2).
  CHECK(equal_entries(base, Pattern(cfg, 1, 2)) < 20);
  CHECK(equal_entries(base, Pattern(cfg, 2, 1)) < 20);
  CHECK(equal_entries(base, Pattern(config(4, 1024, 4096, Distribution::kUniform, 1.0, 0.5, 2), 1, 1)) < 20);
  CHECK(base.value_seed() != Pattern(cfg, 1, 2).value_seed());
}

TEST_CASE("the replay loops over the pattern with deterministic put values", "[kv][workload]") {
  const auto cfg = config(3, 100, 16);
  Pattern p(cfg, 0, 0);
  std::vector<Request> first, second;
  for (size_t i = 0; i < p.size(); ++i) first.push_back(p.next());
  for (size_t i = 0; i < p.size(); ++i) second.push_back(p.next());
  CHECK(p.issued() == 32);
  for (size_t i = 0; i < p.size(); ++i) {
    CHECK(first[i].kind == second[i].kind);
    CHECK(first[i].rank == second[i].rank);
    CHECK(first[i].key == second[i].key);
    CHECK(first[i].rank == p[i].rank());
    CHECK(first[i].key == p[i].key);
    CHECK(first[i].is_get() == p[i].is_read());
    CHECK(first[i].valid());
    if (first[i].is_put()) {
      CHECK(first[i].value == put_value(p.value_seed(), i));
      CHECK(second[i].value == put_value(p.value_seed(), i + p.size()));
      CHECK(first[i].value != second[i].value);  // a new value every round
    }
  }
  // peek() does not advance
  const Request r = p.peek();
  CHECK(p.peek() == r);
  CHECK(p.next() == r);
}

TEST_CASE("put values are below 2^63, so never the absent marker", "[kv][workload]") {
  for (uint64_t seed : {0ull, 1ull, ~0ull}) {
    for (uint64_t n = 0; n < 100000; ++n) REQUIRE(put_value(seed, n) < (uint64_t{1} << 63));
  }
}

TEST_CASE("read ratio holds within statistical tolerance", "[kv][workload]") {
  constexpr uint32_t kLen = 200000;
  for (double ratio : {0.0, 0.05, 0.5, 0.95, 1.0}) {
    const Pattern p(config(2, 1024, kLen, Distribution::kUniform, 1.0, ratio), 0, 0);
    size_t reads = 0;
    for (const auto& e : p.entries()) reads += e.is_read() ? 1 : 0;
    const double frac = static_cast<double>(reads) / kLen;
    const double sigma = std::sqrt(ratio * (1 - ratio) / kLen);
    CHECK(std::fabs(frac - ratio) <= 6 * sigma + 1e-12);
  }
}

TEST_CASE("uniform targets cover every rank and key evenly", "[kv][workload]") {
  constexpr uint32_t kRanks = 4, kKeys = 64, kLen = 1u << 20;
  const Pattern p(config(kRanks, kKeys, kLen), 3, 7);
  std::vector<uint64_t> count(kRanks * kKeys, 0);
  for (const auto& e : p.entries()) {
    REQUIRE(e.rank() < kRanks);
    REQUIRE(e.key < kKeys);
    ++count[e.rank() * kKeys + e.key];
  }
  const double expected = static_cast<double>(kLen) / (kRanks * kKeys);  // 4096 per item
  double chi2 = 0;
  for (uint64_t c : count) {
    CHECK(std::fabs(static_cast<double>(c) - expected) < 8 * std::sqrt(expected));
    chi2 += (static_cast<double>(c) - expected) * (static_cast<double>(c) - expected) / expected;
  }
  // 255 degrees of freedom: mean 255, sd ~22.6; 400 is > 6 sd out.
  CHECK(chi2 < 400);
}

TEST_CASE("targets stay in range for every distribution and shape", "[kv][workload]") {
  for (const auto d : {Distribution::kUniform, Distribution::kZipfian}) {
    for (uint32_t np : {1u, 3u, 16u}) {
      for (uint64_t kr : {1ull, 7ull, 1024ull, 1ull << 32}) {
        const Pattern p(config(np, kr, 20000, d, 0.9), np - 1, 3);
        for (const auto& e : p.entries()) {
          REQUIRE(e.rank() < np);
          REQUIRE(e.key < kr);
        }
      }
    }
  }
}

TEST_CASE("ZipfSampler matches the exact distribution (chi-square)", "[kv][workload][zipf]") {
  constexpr uint64_t kN = 10;
  constexpr uint64_t kSamples = 400000;
  for (double s : {0.3, 1.0, 1.0 + 1e-9, 1.7, 4.0}) {
    const ZipfSampler zipf(kN, s);
    bkv::Rng rng(12345);
    std::vector<uint64_t> count(kN, 0);
    for (uint64_t i = 0; i < kSamples; ++i) {
      const uint64_t k = zipf(rng);
      REQUIRE(k < kN);
      ++count[k];
    }
    const double norm = harmonic(kN, s);
    double chi2 = 0;
    for (uint64_t k = 0; k < kN; ++k) {
      const double expected = kSamples * std::pow(static_cast<double>(k + 1), -s) / norm;
      chi2 += (static_cast<double>(count[k]) - expected) * (static_cast<double>(count[k]) - expected) / expected;
    }
    INFO("s = " << s << ", chi2 = " << chi2);
    CHECK(chi2 < 45);  // 9 degrees of freedom: P(chi2 > 45) < 1e-6
  }
}

TEST_CASE("ZipfSampler handles huge n: head probabilities and tail reach", "[kv][workload][zipf]") {
  constexpr uint64_t kN = uint64_t{1} << 44;
  constexpr uint64_t kSamples = 1000000;
  const double s = 1.2;
  const ZipfSampler zipf(kN, s);
  bkv::Rng rng(99);
  std::map<uint64_t, uint64_t> head;
  uint64_t beyond_million = 0;
  for (uint64_t i = 0; i < kSamples; ++i) {
    const uint64_t k = zipf(rng);
    REQUIRE(k < kN);
    if (k < 3) ++head[k];
    if (k >= 1000000) ++beyond_million;
  }
  const double norm = harmonic(kN, s);
  for (uint64_t k = 0; k < 3; ++k) {
    const double p = std::pow(static_cast<double>(k + 1), -s) / norm;
    const double sigma = std::sqrt(kSamples * p * (1 - p));
    CHECK(std::fabs(static_cast<double>(head[k]) - kSamples * p) < 6 * sigma);
  }
  // P(k >= 10^6) = (H(n) - H(10^6)) / H(n)
  const double p_tail = (norm - harmonic(1000000, s)) / norm;
  const double sigma = std::sqrt(kSamples * p_tail * (1 - p_tail));
  CHECK(std::fabs(static_cast<double>(beyond_million) - kSamples * p_tail) < 6 * sigma);
}

TEST_CASE("zipfian rank-frequency slope is close to -s", "[kv][workload][zipf]") {
  constexpr uint32_t kRanks = 2, kKeys = 1024, kLen = 1u << 22;
  for (double s : {0.7, 1.0, 1.3}) {
    const Pattern p(config(kRanks, kKeys, kLen, Distribution::kZipfian, s), 0, 0);
    std::vector<uint64_t> count(kRanks * kKeys, 0);
    for (const auto& e : p.entries()) ++count[e.key * kRanks + e.rank()];  // item index: interleaved mapping
    const double slope = rank_frequency_slope(count, 100);
    INFO("s = " << s << ", fitted slope = " << slope);
    CHECK(std::fabs(slope + s) < 0.05);
    // the hottest item is (rank 0, key 0), the next (rank 1, key 0)
    CHECK(count[0] > count[1]);
    CHECK(count[1] > count[2]);
  }
}

TEST_CASE("invalid workload configurations are rejected with the field named", "[kv][workload]") {
  const auto expect_error = [](WorkloadConfig c, const char* field) {
    CHECK_THROWS_WITH(validate(c), Catch::Contains(field));
  };
  auto c = config(2, 1024, 16);
  validate(c);
  auto bad = c;
  bad.num_ranks = 0;
  expect_error(bad, "num_ranks");
  bad = c;
  bad.key_range = 0;
  expect_error(bad, "key_range");
  bad = c;
  bad.key_range = (uint64_t{1} << 32) + 1;
  expect_error(bad, "key_range");
  bad = c;
  bad.read_ratio = 1.5;
  expect_error(bad, "read_ratio");
  bad = c;
  bad.read_ratio = std::nan("");
  expect_error(bad, "read_ratio");
  bad = c;
  bad.zipf_s = 0;
  expect_error(bad, "zipf_s");
  bad = c;
  bad.pattern_len = 0;
  expect_error(bad, "pattern_len");
  CHECK_THROWS_WITH(Pattern(c, 2, 0), Catch::Contains("rank 2"));
  CHECK_THROWS_AS(ZipfSampler(0, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(ZipfSampler(10, -1.0), std::invalid_argument);
}

TEST_CASE("an on-demand pattern replays the stored pattern's requests and values, wraps included", "[kv][workload]") {
  for (const auto d : {Distribution::kUniform, Distribution::kZipfian}) {
    // Ranges that are not powers of two (the uniform draws may reject), and a read ratio
    // that is neither 0 nor 1.
    auto cfg = config(5, 1000, 97, d, 0.9, 0.3, 7);
    const Pattern stored(cfg, 3, 11);
    cfg.storage = PatternStorage::kOnDemand;
    Pattern a(cfg, 3, 11), b(cfg, 3, 11);
    Pattern s = stored;
    CHECK(stored.storage() == PatternStorage::kStored);
    CHECK(a.storage() == PatternStorage::kOnDemand);
    CHECK(a.size() == 97);
    CHECK(a.entries().empty());
    CHECK_THROWS_AS(a[0], std::logic_error);
    CHECK(a.value_seed() == stored.value_seed());
    size_t puts = 0;
    for (int i = 0; i < 97 * 5 / 2; ++i) {  // two and a half rounds
      const Request x = s.next();
      REQUIRE(a.peek() == x);
      REQUIRE(a.next() == x);
      puts += x.is_put() ? 1 : 0;
    }
    CHECK(puts > 0);
    CHECK(a.issued() == s.issued());
    CHECK(b.next() == stored.peek());  // another on-demand copy starts at the beginning
  }
}

TEST_CASE("Rng::jump moves a generator as that many calls of next() do", "[kv][workload][rng]") {
  for (const uint64_t seed : {uint64_t{1}, uint64_t{0xDEADBEEF}, ~uint64_t{0}}) {
    for (const uint64_t k : {0ull, 1ull, 2ull, 63ull, 255ull, 256ull, 257ull, 1000ull, 30000ull, 123457ull}) {
      bkv::Rng stepped(seed), jumped(seed);
      for (uint64_t i = 0; i < k; ++i) stepped.next();
      jumped.jump(bkv::Rng::Jump(k));
      for (int i = 0; i < 4; ++i) REQUIRE(jumped.next() == stepped.next());
    }
  }
  // One Jump serves any number of generators.
  const bkv::Rng::Jump j(777);
  for (uint64_t seed = 0; seed < 5; ++seed) {
    bkv::Rng stepped(seed), jumped(seed);
    for (int i = 0; i < 777; ++i) stepped.next();
    jumped.jump(j);
    CHECK(jumped.next() == stepped.next());
  }
}

TEST_CASE("an on-demand pattern over power-of-two ranges (its set-up jumps) matches the stored one", "[kv][workload]") {
  for (const uint32_t np : {1u, 2u, 16u, 64u}) {
    for (const uint32_t len : {1u, 97u, 10000u}) {
      auto cfg = config(np, 1024, len, Distribution::kUniform, 1.0, 0.5, 3);
      const Pattern stored(cfg, 0, 5);
      cfg.storage = PatternStorage::kOnDemand;
      Pattern a(cfg, 0, 5);
      REQUIRE(a.value_seed() == stored.value_seed());
      Pattern s = stored;
      for (uint32_t i = 0; i < std::min(len * 2 + 3, 500u); ++i) REQUIRE(a.next() == s.next());
    }
  }
}

TEST_CASE("pattern_len: 2^24 is the longest pattern accepted (cursor and length are packed in 32 bits)",
          "[kv][workload]") {
  auto c = config(2, 64, 1);
  c.pattern_len = static_cast<uint32_t>(kMaxPatternLen);
  CHECK_NOTHROW(validate(c));
  c.pattern_len = static_cast<uint32_t>(kMaxPatternLen) + 1;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("pattern_len") && Catch::Contains("2^24"));
}
