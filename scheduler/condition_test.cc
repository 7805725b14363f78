// The condition estimator against the exact ||A^-1||_1 (LAPACK dgetri), with solves in RAM, and
// the wording of the quality warning.
#include "scheduler/condition.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <lapacke.h>

#include "stripe/dense_reference.h"

namespace stripesolve::scheduler {
namespace {

// Solves with A ('N') and A^T ('T') from LAPACK's LU of A, counted.
struct LapackSolves {
  LapackSolves(const std::vector<double>& a, int64_t n)
      : n(static_cast<lapack_int>(n)), lu(a), ipiv(static_cast<size_t>(n)) {
    EXPECT_EQ(LAPACKE_dgetrf(LAPACK_COL_MAJOR, this->n, this->n, lu.data(), this->n, ipiv.data()),
              0);
  }
  VectorSolve with(char trans) {
    return [this, trans](double* v) {
      ++solves;
      LAPACKE_dgetrs(LAPACK_COL_MAJOR, trans, n, 1, lu.data(), n, ipiv.data(), v, n);
      return Status::ok();
    };
  }
  lapack_int n;
  std::vector<double> lu;
  std::vector<lapack_int> ipiv;
  int solves = 0;
};

// ||A^-1||_1 estimated with LAPACK's LU of A for the two solves.
double estimate(const std::vector<double>& a, int64_t n, int max_unit_solves = 4) {
  LapackSolves lapack(a, n);
  auto est =
      estimate_inverse_norm_1(n, lapack.with('N'), lapack.with('T'), nullptr, max_unit_solves);
  EXPECT_TRUE(est.is_ok());
  return est.is_ok() ? *est : -1;
}

TEST(ConditionEstimate, WithinAFactorTenOfTheExactInverseNorm) {
  for (int64_t n : {1, 2, 17, 120}) {
    std::vector<double> a = stripe::uniform_matrix(n, n, static_cast<uint64_t>(n));
    const double exact = stripe::inverse_norm_1(a, n);
    for (int unit_solves : {4, 1, 0}) {
      const double est = estimate(a, n, unit_solves);
      EXPECT_LE(est, exact * (1 + 1e-10)) << n;  // a lower bound
      EXPECT_GT(est, exact / 10) << n << " with " << unit_solves << " unit solves";
    }
  }
  // Graded rows: condition 1e12.
  const int64_t n = 80;
  std::vector<double> a = stripe::uniform_matrix(n, n, 3);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < n; ++c)
      a[static_cast<size_t>(r + c * n)] *= std::pow(10.0, -12.0 * r / (n - 1));
  }
  const double exact = stripe::inverse_norm_1(a, n);
  EXPECT_GT(estimate(a, n), exact / 10);
  EXPECT_GT(estimate(a, n, 1), exact / 10);
  EXPECT_GT(estimate(a, n, 0), exact / 10);
}

// The two parts one after the other give what one call gives, and sharpen() runs once.
TEST(ConditionEstimate, SharpenedLaterEqualsTheWholeEstimate) {
  const int64_t n = 90;
  std::vector<double> a = stripe::uniform_matrix(n, n, 11);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < n; ++c)
      a[static_cast<size_t>(r + c * n)] *= std::pow(10.0, -8.0 * c / (n - 1));
  }
  LapackSolves lapack(a, n);
  int& solves = lapack.solves;
  auto with = [&](char trans) { return lapack.with(trans); };
  auto first = InverseNormEstimate::start(n, with('N'), with('T'));
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(solves, 3);  // the two fixed vectors and one transposed solve
  const double before = first->value();
  EXPECT_FALSE(first->sharpened());
  ASSERT_TRUE(first->sharpen(with('N'), with('T'), 1).is_ok());
  EXPECT_TRUE(first->sharpened());
  EXPECT_EQ(solves, 4);  // one unit solve
  EXPECT_GE(first->value(), before);
  EXPECT_EQ(first->value(), estimate(a, n, 1));
  ASSERT_TRUE(first->sharpen(with('N'), with('T'), 4).is_ok());
  EXPECT_EQ(solves, 4);
}

// The transposed solve first (its U^T pass may run during the factorization): the same lower
// bound within 10x, with no solve waiting for another's result.
TEST(ConditionEstimate, TransposedFirstIsWithinAFactorTen) {
  auto check = [](const std::vector<double>& a, int64_t n, const std::string& what) {
    LapackSolves lapack(a, n);
    int& solves = lapack.solves;
    auto with = [&](char trans) { return lapack.with(trans); };
    std::vector<double> z = estimator_transposed_start(n);
    ASSERT_EQ(z.size(), static_cast<size_t>(n));
    for (double v : z) ASSERT_EQ(std::fabs(v), 1.0);
    ASSERT_TRUE(with('T')(z.data()).is_ok());
    const int64_t j = estimator_unit_column(z);
    std::vector<double> solved = estimator_fixed_vectors(n);
    solved.resize(static_cast<size_t>(3 * n), 0.0);
    solved[static_cast<size_t>(2 * n + j)] = 1.0;
    for (int c = 0; c < 3; ++c) ASSERT_TRUE(with('N')(solved.data() + c * n).is_ok());
    solves = 0;
    InverseNormEstimate e = InverseNormEstimate::from_transposed(n, z, solved.data());
    const double exact = stripe::inverse_norm_1(a, n);
    EXPECT_LE(e.value(), exact * (1 + 1e-10)) << what;
    EXPECT_GT(e.value(), exact / 10) << what;
    const double first = e.value();
    ASSERT_TRUE(e.sharpen(with('N'), with('T'), 1).is_ok());  // the unit solve is made
    EXPECT_EQ(solves, 0) << what;
    EXPECT_TRUE(e.sharpened());
    EXPECT_EQ(e.value(), first) << what;
  };
  for (int64_t n : {1, 2, 17, 120}) {
    check(stripe::uniform_matrix(n, n, static_cast<uint64_t>(n)), n,
          "uniform n = " + std::to_string(n));
  }
  for (const double decades : {8.0, 12.0}) {  // graded rows, then graded columns
    const int64_t n = 80;
    std::vector<double> rows = stripe::uniform_matrix(n, n, 3);
    std::vector<double> cols = rows;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        rows[static_cast<size_t>(r + c * n)] *= std::pow(10.0, -decades * r / (n - 1));
        cols[static_cast<size_t>(r + c * n)] *= std::pow(10.0, -decades * c / (n - 1));
      }
    }
    check(rows, n, "graded rows");
    check(cols, n, "graded columns");
  }
  // Nearly singular: the last column nearly the sum of the first two.
  const int64_t n = 60;
  std::vector<double> a = stripe::uniform_matrix(n, n, 9);
  for (int64_t r = 0; r < n; ++r) {
    a[static_cast<size_t>(r + (n - 1) * n)] =
        a[static_cast<size_t>(r)] + a[static_cast<size_t>(r + n)] + 1e-12 * (r % 3 - 1.0);
  }
  check(a, n, "nearly singular");
}

TEST(QualityWarning, NamesTheCause) {
  const double eps = std::numeric_limits<double>::epsilon();
  EXPECT_EQ(quality_warning({.n = 100, .backward_error = 1e-17, .rcond = 0.1, .growth = 3}), "");
  EXPECT_EQ(quality_warning({.n = 100, .backward_error = 1e-17, .rcond = -1, .growth = -1}), "");
  const std::string singular =
      quality_warning({.n = 100, .backward_error = 1e-17, .rcond = 1e-20, .growth = 3});
  EXPECT_NE(singular.find("singular to working precision (rcond 1.00e-20)"), std::string::npos)
      << singular;
  const std::string unstable = quality_warning({.n = 60,
                                                .backward_error = 1e-2,
                                                .rcond = 0.05,
                                                .growth = 5.8e17,
                                                .pivot = stripe::PivotMode::kRow});
  EXPECT_NE(unstable.find("unstable pivoting (growth 5.80e+17"), std::string::npos) << unstable;
  EXPECT_NE(unstable.find("--pivot gepp"), std::string::npos) << unstable;
  // Grown factors estimate a tiny rcond for a well-conditioned matrix: not called singular.
  const std::string grown = quality_warning({.n = 160,
                                             .backward_error = 1e-2,
                                             .rcond = 6e-32,
                                             .growth = 7.3e47,
                                             .pivot = stripe::PivotMode::kRow});
  EXPECT_EQ(grown.find("singular"), std::string::npos) << grown;
  EXPECT_NE(grown.find("unstable pivoting (growth 7.30e+47"), std::string::npos) << grown;
  const std::string ill = quality_warning({.n = 60,
                                           .backward_error = 1e-10,
                                           .rcond = 1e-13,
                                           .growth = 2,
                                           .pivot = stripe::PivotMode::kNone});
  EXPECT_NE(ill.find("ill-conditioned (rcond 1.00e-13)"), std::string::npos) << ill;
  EXPECT_NE(ill.find("--pivot row"), std::string::npos) << ill;
  const std::string gepp = quality_warning({.n = 60,
                                            .backward_error = 1e-2,
                                            .rcond = 0.05,
                                            .growth = 5.8e17,
                                            .pivot = stripe::PivotMode::kGepp});
  EXPECT_NE(gepp.find("--pivot row"), std::string::npos) << gepp;
  EXPECT_GT(backward_error_tolerance(1'000'000), backward_error_tolerance(100));
  EXPECT_EQ(backward_error_tolerance(4), 2 * eps);
  EXPECT_EQ(backward_error_tolerance(4096), 16 * eps);
  EXPECT_EQ(backward_error_tolerance(65536), 64 * eps);
}

// The auto switch to gepp blames the pivoting on growth, or on a miss of a matrix whose rcond is
// fine; never on an ill-conditioned or singular one, nor on a solve within the tolerance.
TEST(QualityWarning, PivotingToBlame) {
  EXPECT_FALSE(
      pivoting_to_blame({.n = 100, .backward_error = 1e-17, .rcond = 0.1, .growth = 1e60}));
  EXPECT_TRUE(
      pivoting_to_blame({.n = 160, .backward_error = 1e-2, .rcond = 6e-32, .growth = 7e47}));
  EXPECT_TRUE(pivoting_to_blame({.n = 100, .backward_error = 1e-10, .rcond = 0.01, .growth = 1e5}));
  EXPECT_FALSE(pivoting_to_blame({.n = 100, .backward_error = 1e-10, .rcond = 1e-13, .growth = 3}));
  EXPECT_FALSE(pivoting_to_blame({.n = 100, .backward_error = 1e-10, .rcond = 1e-20, .growth = 3}));
  EXPECT_FALSE(pivoting_to_blame({.n = 100, .backward_error = 1e-10, .rcond = -1, .growth = -1}));
}

}  // namespace
}  // namespace stripesolve::scheduler
