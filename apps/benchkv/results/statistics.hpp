// Statistics over independent repetitions (--repeat N: one figure per seed): the mean,
// the sample standard deviation, Student's t 95 % confidence interval of the mean, and
// the two tests `benchkv compare` judges a difference by: Welch's two-sample t-test
// (unequal variances) for independent samples, and the paired t-test for samples
// matched by seed (common random numbers). Pure functions, no I/O.
#pragma once

#include <cstddef>
#include <span>

namespace bkv::app {

struct Spread {
  size_t n = 0;
  double mean = 0, std_dev = 0;  // sample standard deviation (n - 1); 0 for n < 2 and for equal values
  double min = 0, max = 0;
  // The 95 % confidence interval of the mean, mean -+ t(0.975, n - 1) x std_dev / sqrt(n);
  // equal to the mean for n < 2 (no interval: has_interval() is false).
  double ci95_low = 0, ci95_high = 0;
  bool has_interval() const noexcept { return n >= 2; }
};
Spread spread(std::span<const double> values);

// Student's t distribution with `df` > 0 degrees of freedom (fractional allowed, as
// Welch's df is): the CDF, and the quantile (inverse CDF) for p in (0, 1).
double student_t_cdf(double t, double df);
double student_t_quantile(double p, double df);

// Welch's t-test of the means of two samples given by their spread (n >= 2 each):
// t = (b.mean - a.mean) / sqrt(a.sd^2 / a.n + b.sd^2 / b.n), df by Welch-Satterthwaite,
// p the two-sided p-value. Two samples without variance: p = 0 if the means differ, else 1.
// The 95 % confidence interval of the difference of the means b - a is
// (b.mean - a.mean) -+ t(0.975, df) x sqrt(a.sd^2 / a.n + b.sd^2 / b.n).
struct WelchTest {
  double t = 0, df = 0, p = 1;
  double difference = 0, ci95_low = 0, ci95_high = 0;  // of b.mean - a.mean
};
WelchTest welch_test(const Spread& a, const Spread& b);

// The paired t-test of two samples matched element by element (a[i] and b[i] made with one
// seed): the differences d[i] = b[i] - a[i] are one sample of n = a.size() values (n >= 2,
// a and b of one size, else std::invalid_argument); t = mean(d) / (sd(d) / sqrt(n)),
// df = n - 1, p two-sided; the 95 % interval of the mean difference is
// mean(d) -+ t(0.975, n - 1) x sd(d) / sqrt(n). Differences without spread: p = 0 if
// their mean is not 0, else 1 (as welch_test), and the interval is the mean alone.
struct PairedTest {
  size_t n = 0;
  double difference = 0, std_dev = 0;  // the mean and the sample std dev of the differences
  double t = 0, df = 0, p = 1;
  double ci95_low = 0, ci95_high = 0;
};
PairedTest paired_test(std::span<const double> a, std::span<const double> b);

}  // namespace bkv::app
