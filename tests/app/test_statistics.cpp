// Statistics over repetitions (apps/benchkv/results/statistics.hpp) against values known
// exactly or from tables: Student's t quantiles, a confidence interval by hand, and
// Welch's test on samples whose t, degrees of freedom and p-value are published.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "apps/benchkv/results/statistics.hpp"

using namespace bkv::app;

TEST_CASE("statistics: Student's t quantiles and CDF match the tables", "[bench][statistics]") {
  // t(0.975, df) as SciPy 1.10 gives them (scipy.stats.t.ppf), the tables' values to more digits.
  CHECK(student_t_quantile(0.975, 1) == Approx(12.706205).epsilon(1e-6));
  CHECK(student_t_quantile(0.975, 2) == Approx(4.302653).epsilon(1e-6));
  CHECK(student_t_quantile(0.975, 4) == Approx(2.776445).epsilon(1e-6));
  CHECK(student_t_quantile(0.975, 9) == Approx(2.262157).epsilon(1e-6));
  CHECK(student_t_quantile(0.975, 30) == Approx(2.042272).epsilon(1e-6));
  CHECK(student_t_quantile(0.975, 1e6) == Approx(1.959966).epsilon(1e-6));  // the normal's
  CHECK(student_t_quantile(0.025, 4) == Approx(-2.776445).epsilon(1e-6));
  // df = 1 is Cauchy: CDF(t) = 1/2 + atan(t)/pi, exactly.
  for (double t : {-3.0, -0.5, 0.0, 0.7, 10.0}) CHECK(student_t_cdf(t, 1) == Approx(0.5 + std::atan(t) / M_PI));
  // df = 2: CDF(t) = 1/2 + t / (2 sqrt(2 + t^2)).
  for (double t : {-2.0, 0.3, 5.0}) CHECK(student_t_cdf(t, 2) == Approx(0.5 + t / (2 * std::sqrt(2 + t * t))));
  CHECK_THROWS(student_t_quantile(1.0, 3));
  CHECK_THROWS(student_t_cdf(1.0, 0));
}

TEST_CASE("statistics: mean, standard deviation and 95 % interval of a sample", "[bench][statistics]") {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};  // mean 5, sample variance 32/7
  const Spread s = spread(v);
  CHECK(s.n == 8);
  CHECK(s.mean == 5.0);
  CHECK(s.std_dev == Approx(std::sqrt(32.0 / 7)));
  CHECK(s.min == 2);
  CHECK(s.max == 9);
  const double half = 2.364624 * std::sqrt(32.0 / 7) / std::sqrt(8.0);  // t(0.975, 7) = 2.364624
  CHECK(s.ci95_low == Approx(5 - half).epsilon(1e-6));
  CHECK(s.ci95_high == Approx(5 + half).epsilon(1e-6));
  const Spread one = spread(std::vector<double>{3.5});
  CHECK_FALSE(one.has_interval());
  CHECK(one.std_dev == 0);
  CHECK(one.ci95_low == 3.5);
  CHECK(spread(std::vector<double>{}).n == 0);
}

TEST_CASE("statistics: Welch's t-test on an example checked against SciPy", "[bench][statistics]") {
  // Two samples whose Welch statistics SciPy 1.10 gives (scipy.stats.ttest_ind(b, a,
  // equal_var=False)): t = 2.455356, p = 0.021378; df by the Welch-Satterthwaite formula 24.988529.
  const std::vector<double> a = {27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4};
  const std::vector<double> b = {27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4};
  const WelchTest w = welch_test(spread(a), spread(b));
  CHECK(w.t == Approx(2.455356).epsilon(1e-5));
  CHECK(w.df == Approx(24.988529).epsilon(1e-5));
  CHECK(w.p == Approx(0.021378).epsilon(1e-4));
  // Symmetric: B against A flips the sign only.
  const WelchTest r = welch_test(spread(b), spread(a));
  CHECK(r.t == Approx(-w.t));
  CHECK(r.p == Approx(w.p));
  // Equal samples: no difference; samples without spread: certain.
  CHECK(welch_test(spread(a), spread(a)).p == Approx(1.0));
  CHECK(welch_test(spread(std::vector<double>{1, 1}), spread(std::vector<double>{2, 2})).p == 0.0);
  CHECK_THROWS(welch_test(spread(std::vector<double>{1}), spread(b)));
}

TEST_CASE("statistics: the paired t-test over per-seed differences, by hand", "[bench][statistics]") {
  // Three seeds whose figures spread far (10, 20, 30) while B - A stays near 0.5: the
  // differences 0.5, 0.6, 0.4 have mean 0.5 and sample std dev 0.1, so t = 0.5 / (0.1 /
  // sqrt(3)) = 5 sqrt(3) = 8.660254 with df = 2, whose two-sided p is, from the df = 2
  // CDF in closed form, 1 - t / sqrt(2 + t^2) = 1 - 8.660254 / sqrt(77) = 0.013072; the
  // interval 0.5 -+ t(0.975, 2) x 0.1 / sqrt(3) = 0.5 -+ 4.302653 x 0.057735.
  const std::vector<double> a = {10, 20, 30}, b = {10.5, 20.6, 30.4};
  const PairedTest p = paired_test(a, b);
  CHECK(p.n == 3);
  CHECK(p.difference == Approx(0.5).epsilon(1e-12));
  CHECK(p.std_dev == Approx(0.1).epsilon(1e-9));
  CHECK(p.t == Approx(5 * std::sqrt(3.0)).epsilon(1e-9));
  CHECK(p.df == 2);
  CHECK(p.p == Approx(1 - 5 * std::sqrt(3.0) / std::sqrt(77.0)).epsilon(1e-6));
  CHECK(p.p == Approx(0.013072).epsilon(1e-4));
  CHECK(p.ci95_low == Approx(0.5 - 4.302653 * 0.1 / std::sqrt(3.0)).epsilon(1e-6));
  CHECK(p.ci95_high == Approx(0.5 + 4.302653 * 0.1 / std::sqrt(3.0)).epsilon(1e-6));
  // The same samples read as independent: the spread between seeds (sd 10) hides the
  // difference. t = 0.5 / sqrt((100 + 99.01) / 3).
  const WelchTest w = welch_test(spread(a), spread(b));
  CHECK(w.t == Approx(0.5 / std::sqrt(199.01 / 3)).epsilon(1e-9));
  CHECK(w.p > 0.9);
  CHECK(w.difference == Approx(0.5).epsilon(1e-12));
  CHECK(w.ci95_low == Approx(0.5 - student_t_quantile(0.975, w.df) * std::sqrt(199.01 / 3)).epsilon(1e-9));
  CHECK(w.ci95_low < 0);
  CHECK(w.ci95_high > 0);
  // The pairs are matched by position: B against A flips the sign only.
  const PairedTest r = paired_test(b, a);
  CHECK(r.t == Approx(-p.t));
  CHECK(r.p == Approx(p.p));
  CHECK(r.ci95_high == Approx(-p.ci95_low));
  // One seed's figures equal on both sides: no difference, and the interval is 0 alone.
  const PairedTest same = paired_test(a, a);
  CHECK(same.difference == 0);
  CHECK(same.t == 0);
  CHECK(same.p == 1.0);
  CHECK(same.ci95_low == 0);
  CHECK(same.ci95_high == 0);
  // A constant shift: certain.
  const std::vector<double> shifted = {11, 21, 31};
  CHECK(paired_test(a, shifted).p == 0.0);
  CHECK(paired_test(a, shifted).ci95_low == 1.0);
  CHECK_THROWS(paired_test(std::vector<double>{1, 2}, std::vector<double>{1, 2, 3}));
  CHECK_THROWS(paired_test(std::vector<double>{1}, std::vector<double>{2}));
}

TEST_CASE("statistics: equal values have no spread, exactly", "[bench][statistics]") {
  // 2.056 - 1.152 three times sums to a value that divided by 3 is one unit in the last
  // place off, so deviations of 1e-16: a paired test of two constant samples (a
  // deterministic figure, the same for every seed) read t = 1e16 from them instead of a
  // difference without spread.
  const double d = 2.056 - 1.152;
  REQUIRE((d + d + d) / 3 != d);  // what the rule is for
  const Spread s = spread(std::vector<double>{d, d, d});
  CHECK(s.mean == d);
  CHECK(s.std_dev == 0);
  CHECK(s.ci95_low == d);
  CHECK(s.ci95_high == d);
  const PairedTest p = paired_test(std::vector<double>{1.152, 1.152, 1.152}, std::vector<double>{2.056, 2.056, 2.056});
  CHECK(p.difference == d);
  CHECK(p.std_dev == 0);
  CHECK(std::isinf(p.t));
  CHECK(p.p == 0.0);
  CHECK(p.ci95_low == d);
}
