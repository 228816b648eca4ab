#include "apps/benchkv/results/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace bkv::app {

namespace {

// The continued fraction of the regularized incomplete beta function (modified Lentz).
double beta_continued_fraction(double a, double b, double x) {
  constexpr int kMaxIterations = 300;
  constexpr double kEpsilon = 1e-15, kTiny = 1e-300;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1) < kEpsilon) break;
  }
  return h;
}

// I_x(a, b), the regularized incomplete beta function, x in [0, 1].
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
  return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}

// 2 P(T > |t|) for T of Student's t with df degrees of freedom, without the cancellation
// of 1 - cdf.
double two_sided_p(double t, double df) { return std::min(1.0, incomplete_beta(df / 2, 0.5, df / (df + t * t))); }

}  // namespace

double student_t_cdf(double t, double df) {
  if (!(df > 0)) throw std::invalid_argument("student_t_cdf: degrees of freedom must be > 0");
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  const double tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));  // P(T > |t|)
  return t >= 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1)) throw std::invalid_argument("student_t_quantile: p must be in (0, 1)");
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  double lo = 0, hi = 1;
  while (student_t_cdf(hi, df) < p) hi *= 2;  // t(0.975, 1) = 12.7: a few doublings
  for (int i = 0; i < 200 && hi - lo > 1e-12 * std::max(1.0, hi); ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

Spread spread(std::span<const double> values) {
  Spread s;
  s.n = values.size();
  if (values.empty()) return s;
  for (double x : values) s.mean += x;
  s.mean /= double(s.n);
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  // Equal values have no spread: their mean is the value itself, not a sum divided back
  // with a rounding error that a t statistic would divide by a std dev of 1e-16.
  if (s.min == s.max) s.mean = s.min;
  s.ci95_low = s.ci95_high = s.mean;
  if (s.n < 2 || s.min == s.max) return s;
  double ss = 0;
  for (double x : values) ss += (x - s.mean) * (x - s.mean);
  s.std_dev = std::sqrt(ss / double(s.n - 1));
  const double half = student_t_quantile(0.975, double(s.n - 1)) * s.std_dev / std::sqrt(double(s.n));
  s.ci95_low = s.mean - half;
  s.ci95_high = s.mean + half;
  return s;
}

WelchTest welch_test(const Spread& a, const Spread& b) {
  if (a.n < 2 || b.n < 2) throw std::invalid_argument("welch_test: each sample needs at least 2 values");
  WelchTest w;
  const double va = a.std_dev * a.std_dev / double(a.n), vb = b.std_dev * b.std_dev / double(b.n);
  const double se2 = va + vb;
  w.difference = w.ci95_low = w.ci95_high = b.mean - a.mean;
  if (se2 == 0) {
    w.p = a.mean == b.mean ? 1.0 : 0.0;
    w.t = a.mean == b.mean ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), b.mean - a.mean);
    w.df = double(a.n + b.n - 2);
    return w;
  }
  w.t = (b.mean - a.mean) / std::sqrt(se2);
  w.df = se2 * se2 / (va * va / double(a.n - 1) + vb * vb / double(b.n - 1));
  w.p = two_sided_p(w.t, w.df);
  const double half = student_t_quantile(0.975, w.df) * std::sqrt(se2);
  w.ci95_low = w.difference - half;
  w.ci95_high = w.difference + half;
  return w;
}

PairedTest paired_test(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size()) throw std::invalid_argument("paired_test: the two samples must be of one size");
  if (a.size() < 2) throw std::invalid_argument("paired_test: at least 2 pairs are needed");
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = b[i] - a[i];
  const Spread s = spread(d);
  PairedTest p;
  p.n = s.n;
  p.difference = s.mean;
  p.std_dev = s.std_dev;
  p.df = double(s.n - 1);
  p.ci95_low = s.ci95_low;  // mean -+ t(0.975, n - 1) sd / sqrt(n): the one-sample interval
  p.ci95_high = s.ci95_high;
  if (s.std_dev == 0) {
    p.p = s.mean == 0 ? 1.0 : 0.0;
    p.t = s.mean == 0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), s.mean);
    return p;
  }
  p.t = s.mean / (s.std_dev / std::sqrt(double(s.n)));
  p.p = two_sided_p(p.t, p.df);
  return p;
}

}  // namespace bkv::app
