// The stability suite (000 Table III) as a test: the default solver stays within 10x of LAPACK
// dgtsv's relative residual on every type where LAPACK's result is finite, at n = 512 and at a
// large n. The full table for every algorithm is written by bench/tridiag/stability_table.
#include "tridiag/gallery.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "tridiag/lapack_reference.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {
namespace {

TEST(GalleryTest, KmsInverseIsTheInverseOfKms) {
  const std::size_t n = 9;
  TridiagonalMatrix t = stability_matrix(7, n, 1);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double s = t.d[i] * std::pow(0.5, std::abs(double(i) - double(j)));
      if (i > 0) s += t.dl[i] * std::pow(0.5, std::abs(double(i - 1) - double(j)));
      if (i + 1 < n) s += t.du[i] * std::pow(0.5, std::abs(double(i + 1) - double(j)));
      EXPECT_NEAR(s, i == j ? 1.0 : 0.0, 1e-14) << i << "," << j;
    }
  }
}

TEST(GalleryTest, RandsvdKeepsTheSingularValuesTrace) {
  // Two-sided orthogonal transforms keep the Frobenius norm: sum of sigma_i^2.
  const std::size_t n = 64;
  TridiagonalMatrix t = stability_matrix(11, n, 3);  // arithmetic: 1 - i/(n-1) (1 - 1e-15)
  double fro = 0, expect = 0;
  for (std::size_t i = 0; i < n; ++i) {
    fro += t.d[i] * t.d[i] + t.dl[i] * t.dl[i] + t.du[i] * t.du[i];
    const double s = 1.0 - double(i) / double(n - 1) * (1.0 - 1e-15);
    expect += s * s;
  }
  EXPECT_NEAR(fro, expect, 1e-10 * expect);
  EXPECT_EQ(stability_matrix(15, 4, 0).dl[1], 3.0);  // clement(4, 0): sub-diagonal 3, 2, 1
  EXPECT_EQ(stability_matrix(15, 4, 0).du[2], 3.0);  // super-diagonal 1, 2, 3
}

TEST(GalleryTest, NearSingularLastPivotAndToeplitz) {
  for (std::size_t n : {1u, 2u, 3u, 8u, 100u}) {
    SCOPED_TRACE(n);
    TridiagonalMatrix m = near_singular_matrix(n, n);
    long double pivot = m.d[0];
    for (std::size_t i = 1; i < n; ++i)
      pivot = m.d[i] - static_cast<long double>(m.dl[i]) * m.du[i - 1] / pivot;
    const double scale = std::max({std::abs(m.dl[n - 1]), std::abs(m.du[n - 1]), 1.0});
    // d[n-1] is rounded to double: its rounding (~eps |d|) is a small part of 1e-13.
    EXPECT_NEAR(static_cast<double>(pivot), 1e-13 * scale, 1e-14 * scale);
  }
  TridiagonalMatrix t = toeplitz_matrix(3, 1.0, 1e-8, 2.0);
  EXPECT_EQ(t.dl, (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(t.d, (std::vector<double>{1e-8, 1e-8, 1e-8}));
  EXPECT_EQ(t.du, (std::vector<double>{2, 2, 0}));
}

void expect_default_within_ten_times_lapack(std::size_t n) {
  for (int type = 1; type <= kStabilityTypes; ++type) {
    SCOPED_TRACE("type " + std::to_string(type) + " n=" + std::to_string(n));
    TridiagonalMatrix a = stability_matrix(type, n, 1000 + type);
    std::vector<double> f = random_vector(n, 77 + type), ref, x(n);
    const int info = lapack_dgtsv(a.dl.data(), a.d.data(), a.du.data(), f.data(), n, ref);
    const double ref_res =
        info == 0 ? relative_residual(a.dl.data(), a.d.data(), a.du.data(), ref.data(), f.data(), n)
                  : INFINITY;
    BatchShape shape{BatchLayout::kStrided, n, 1, {}};
    auto r = solve_batch(shape, {a.dl.data(), a.d.data(), a.du.data(), f.data(), x.data()});
    if (!std::isfinite(ref_res)) continue;  // LAPACK itself fails (type 16): no bound
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const double res =
        relative_residual(a.dl.data(), a.d.data(), a.du.data(), x.data(), f.data(), n);
    EXPECT_LE(res, 10 * ref_res) << "LAPACK " << ref_res;
  }
}

TEST(GalleryTest, DefaultSolverWithinTenTimesLapackAt512) {
  expect_default_within_ten_times_lapack(512);
}

TEST(GalleryTest, DefaultSolverWithinTenTimesLapackAtOneMillion) {
  expect_default_within_ten_times_lapack(std::size_t{1} << 20);
}

}  // namespace
}  // namespace stripesolve::tridiag
