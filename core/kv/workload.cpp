#include "core/kv/workload.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace bkv::kv {

namespace {

[[noreturn]] void bad(const char* field, const std::string& value, const char* rule) {
  throw std::invalid_argument(std::string("workload ") + field + ": " + value + " " + rule);
}

// expm1(y) / y, continuous at y = 0 (value 1): keeps H(x) accurate for s close to 1.
double expm1_over_x(double y) noexcept {
  if (std::fabs(y) > 1e-8) return std::expm1(y) / y;
  return 1.0 + y * 0.5 * (1.0 + y / 3.0 * (1.0 + y * 0.25));
}

// log1p(z) / z, continuous at z = 0 (value 1): keeps H^-1(y) accurate for s close to 1.
double log1p_over_x(double z) noexcept {
  if (std::fabs(z) > 1e-8) return std::log1p(z) / z;
  return 1.0 - z * (0.5 - z * (1.0 / 3.0 - z * 0.25));
}

}  // namespace

void validate(const WorkloadConfig& cfg) {
  if (cfg.num_ranks < 1 || cfg.num_ranks > kMaxRanks) {
    bad("num_ranks", std::to_string(cfg.num_ranks), "must be in [1, 2^20]");
  }
  if (cfg.key_range < 1 || cfg.key_range > kMaxKeyRange) {
    bad("key_range", std::to_string(cfg.key_range), "must be in [1, 2^32]");
  }
  if (!(cfg.read_ratio >= 0.0 && cfg.read_ratio <= 1.0)) {
    bad("read_ratio", std::to_string(cfg.read_ratio), "must be in [0, 1]");
  }
  if (cfg.distribution != Distribution::kUniform && cfg.distribution != Distribution::kZipfian) {
    bad("distribution", std::to_string(static_cast<int>(cfg.distribution)), "is not uniform or zipfian");
  }
  if (!(cfg.zipf_s > 0.0 && std::isfinite(cfg.zipf_s))) {
    bad("zipf_s", std::to_string(cfg.zipf_s), "must be a finite number > 0");
  }
  if (cfg.pattern_len < 1 || cfg.pattern_len > kMaxPatternLen) {
    bad("pattern_len", std::to_string(cfg.pattern_len), "must be in [1, 2^24]");
  }
}

// ---------------------------------------------------------------------------------------
// ZipfSampler: rejection-inversion.
//
// Target: P(k) = k^-s / sum_{j=1..n} j^-s. Hat: the decreasing, convex density h(x) = x^-s,
// whose integral H over [k - 1/2, k + 1/2] is >= h(k) (convexity), so every bar of height
// h(k) and width 1 fits under the hat once the k = 1 interval is shortened to
// [H(1.5) - h(1), H(1.5)] in integral space. Draw u uniform in (H(1.5) - h(1), H(n + 1/2)],
// x = H^-1(u), k = round(x). u in [H(k + 1/2) - h(k), H(k + 1/2)) is exactly the part of
// the interval of k whose mass equals h(k): accepting only there gives P(k) proportional
// to h(k). The squeeze: for every k >= 2 the accepted part covers at least
// [k - squeeze, k + 1/2) in x, with squeeze computed from the k = 2 bar.
// ---------------------------------------------------------------------------------------

ZipfSampler::ZipfSampler(uint64_t n, double s) : n_(n), s_(s) {
  if (n < 1 || n > (uint64_t{1} << 53)) {
    throw std::invalid_argument("ZipfSampler: n = " + std::to_string(n) + " must be in [1, 2^53]");
  }
  if (!(s > 0.0 && std::isfinite(s))) {
    throw std::invalid_argument("ZipfSampler: s = " + std::to_string(s) + " must be a finite number > 0");
  }
  h_integral_x1_ = H(1.5) - 1.0;  // h(1) = 1
  h_integral_n_ = H(static_cast<double>(n) + 0.5);
  squeeze_ = 2.0 - H_inv(H(2.5) - h(2.0));
}

double ZipfSampler::h(double x) const noexcept { return std::exp(-s_ * std::log(x)); }

double ZipfSampler::H(double x) const noexcept {
  const double log_x = std::log(x);
  return expm1_over_x((1.0 - s_) * log_x) * log_x;
}

double ZipfSampler::H_inv(double y) const noexcept {
  double t = y * (1.0 - s_);
  if (t < -1.0) t = -1.0;  // rounding guard: the exact argument is > -1 on the whole range
  return std::exp(log1p_over_x(t) * y);
}

uint64_t ZipfSampler::operator()(Rng& rng) const noexcept {
  const double n = static_cast<double>(n_);
  for (;;) {
    const double u = h_integral_n_ + rng.uniform() * (h_integral_x1_ - h_integral_n_);
    const double x = H_inv(u);
    double k = std::floor(x + 0.5);
    // Rounding guards only: mathematically x lies in [0.5, n + 0.5].
    if (k < 1.0) k = 1.0;
    if (k > n) k = n;
    if (k - x <= squeeze_ || u >= H(k + 0.5) - h(k)) return static_cast<uint64_t>(k) - 1;
  }
}

// ---------------------------------------------------------------------------------------
// Pattern
// ---------------------------------------------------------------------------------------

Pattern::Pattern(const WorkloadConfig& cfg, uint32_t my_rank, uint32_t client)
    : len_(cfg.pattern_len), on_demand_(cfg.storage == PatternStorage::kOnDemand) {
  validate(cfg);
  if (my_rank >= cfg.num_ranks) {
    throw std::invalid_argument("Pattern: rank " + std::to_string(my_rank) + " >= num_ranks " +
                                std::to_string(cfg.num_ranks));
  }
  gen_.rng = Rng(derive_seed(cfg.seed, {my_rank, client}));
  gen_.num_ranks = cfg.num_ranks;
  gen_.key_range = cfg.key_range;
  gen_.read_ratio = cfg.read_ratio;
  if (cfg.distribution == Distribution::kZipfian) {
    gen_.zipf.emplace(uint64_t{cfg.num_ranks} * cfg.key_range, cfg.zipf_s);
    gen_.zipfian = true;
  }
  start_ = gen_.rng;
  // The value seed is drawn after the whole pattern: an on-demand pattern makes the same
  // draws here without keeping the entries, or, when every entry takes three draws, jumps
  // over them (a few thousand instructions instead of ~85 per entry: the set-up of a
  // simulation drew every client's whole pattern twice).
  if (on_demand_) {
    if (gen_.fixed_draws()) {
      // Three draws per entry, whatever they are: jump over them (the same state).
      thread_local uint64_t steps = 0;
      thread_local std::optional<Rng::Jump> jump;
      if (!jump || steps != uint64_t{3} * cfg.pattern_len) {
        steps = uint64_t{3} * cfg.pattern_len;
        jump.emplace(steps);
      }
      gen_.rng.jump(*jump);
    } else {
      for (uint32_t i = 0; i < cfg.pattern_len; ++i) gen_.next();
    }
  } else {
    entries_.reserve(cfg.pattern_len);
    for (uint32_t i = 0; i < cfg.pattern_len; ++i) entries_.push_back(gen_.next());
  }
  value_seed_ = gen_.rng.next();
  if (on_demand_) {
    gen_.rng = start_;
    current_ = gen_.next();
  }
}

}  // namespace bkv::kv
