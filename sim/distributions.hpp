// Deterministic random variates on top of bkv::Rng (core/random.hpp).
//
// No std::*_distribution anywhere (their algorithms differ between standard libraries):
// every shape below is written out from the uniform doubles of Rng, so one seed gives
// one sequence of samples. A Distribution is a small value (kind + three parameters) that
// configs carry around; sample(rng) draws one value in the distribution's own unit
// (nanoseconds for latencies, a fraction for relative jitter).
//
// Shapes offered (JSON keys in parentheses, see distributions.cpp):
//   constant    (value)                       always `value`
//   uniform     (min, max)                    flat on [min, max)
//   exponential (mean)                        memoryless tail, e.g. rare queueing bursts
//   normal      (mean, stddev, [min])         Gaussian; samples below `min` are redrawn
//                                             (a truncated normal; min <= mean required)
//   lognormal   (mean, stddev)                right-skewed, given by its own mean/stddev
//   pareto      (scale, shape)                heavy tail: P(X > x) = (scale/x)^shape
//   spike       (probability, value)          `value` with probability p, else 0: rare
//                                             fixed stalls (e.g. a missed cache line, an
//                                             NIC-internal hiccup)
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/random.hpp"

namespace bkv::sim {

enum class DistKind : uint8_t { kConstant = 0, kUniform, kExponential, kNormal, kLognormal, kPareto, kSpike };

// Exponential with the given mean, by inversion: -mean * ln(1 - U), U in [0,1).
inline double sample_exponential(Rng& rng, double mean) noexcept { return -mean * std::log1p(-rng.uniform()); }

// Standard normal by the Marsaglia polar method (rejection inside the unit disc; uses
// only sqrt and log, and draws a fresh pair each call so the stream position depends
// on nothing but the number of calls).
inline double sample_standard_normal(Rng& rng) noexcept {
  for (;;) {
    const double u = 2.0 * rng.uniform() - 1.0;
    const double v = 2.0 * rng.uniform() - 1.0;
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) return u * std::sqrt(-2.0 * std::log(s) / s);
  }
}

struct Distribution {
  DistKind kind = DistKind::kConstant;
  double a = 0.0;  // constant: value; uniform: min; exponential: mean; normal/lognormal: mean;
                   // pareto: scale; spike: probability
  double b = 0.0;  // uniform: max; normal/lognormal: stddev; pareto: shape; spike: value
  double c = 0.0;  // normal: lower bound (min); lognormal: derived mu
  double d = 0.0;  // lognormal: derived sigma

  static Distribution constant(double v) { return {DistKind::kConstant, v, 0, 0, 0}; }
  static Distribution uniform(double lo, double hi) { return {DistKind::kUniform, lo, hi, 0, 0}; }
  static Distribution exponential(double mean) { return {DistKind::kExponential, mean, 0, 0, 0}; }
  static Distribution normal(double mean, double stddev,
                             double min = -std::numeric_limits<double>::infinity()) {
    return {DistKind::kNormal, mean, stddev, min, 0};
  }
  // Lognormal given the mean m and standard deviation s of the variate itself:
  // sigma^2 = ln(1 + s^2/m^2), mu = ln(m) - sigma^2/2.
  static Distribution lognormal(double mean, double stddev) {
    const double s2 = std::log1p((stddev * stddev) / (mean * mean));
    return {DistKind::kLognormal, mean, stddev, std::log(mean) - 0.5 * s2, std::sqrt(s2)};
  }
  static Distribution pareto(double scale, double shape) { return {DistKind::kPareto, scale, shape, 0, 0}; }
  static Distribution spike(double probability, double value) { return {DistKind::kSpike, probability, value, 0, 0}; }

  bool is_zero() const noexcept {
    return (kind == DistKind::kConstant && a == 0.0) || (kind == DistKind::kSpike && (a == 0.0 || b == 0.0));
  }

  double sample(Rng& rng) const noexcept {
    switch (kind) {
      case DistKind::kConstant: return a;
      case DistKind::kUniform: return a + (b - a) * rng.uniform();
      case DistKind::kExponential: return sample_exponential(rng, a);
      case DistKind::kNormal:
        for (;;) {
          const double x = a + b * sample_standard_normal(rng);
          if (x >= c) return x;
        }
      case DistKind::kLognormal: return std::exp(c + d * sample_standard_normal(rng));
      case DistKind::kPareto: return a / std::pow(1.0 - rng.uniform(), 1.0 / b);
      case DistKind::kSpike: return rng.uniform() < a ? b : 0.0;
    }
    return 0.0;
  }

  // Mean of the distribution (exact where finite; the truncated normal reports its
  // untruncated mean; pareto with shape <= 1 reports infinity).
  double mean() const noexcept {
    switch (kind) {
      case DistKind::kConstant: return a;
      case DistKind::kUniform: return 0.5 * (a + b);
      case DistKind::kExponential: return a;
      case DistKind::kNormal: return a;
      case DistKind::kLognormal: return a;
      case DistKind::kPareto: return b > 1.0 ? a * b / (b - 1.0) : std::numeric_limits<double>::infinity();
      case DistKind::kSpike: return a * b;
    }
    return 0.0;
  }

  // Smallest value the distribution can produce.
  double lower_bound() const noexcept {
    switch (kind) {
      case DistKind::kConstant: return a;
      case DistKind::kUniform: return a;
      case DistKind::kExponential: return 0.0;
      case DistKind::kNormal: return c;
      case DistKind::kLognormal: return 0.0;
      case DistKind::kPareto: return a;
      case DistKind::kSpike: return b < 0.0 ? b : 0.0;
    }
    return 0.0;
  }
};

const char* to_string(DistKind k) noexcept;

// JSON form: {"kind": "...", <parameters>}. Unknown keys, missing parameters and invalid
// values throw std::invalid_argument naming `path` (e.g. "nic.latency.jitter.mean").
// `min_support`: the smallest value a sample may take (e.g. 0 for a delay added to a
// latency); a distribution that can go below it is rejected with a message.
Distribution distribution_from_json(const nlohmann::json& j, const std::string& path,
                                    double min_support = -std::numeric_limits<double>::infinity());
nlohmann::json distribution_to_json(const Distribution& d);

}  // namespace bkv::sim
