// The check's two figures (tridiag.h: solution_quality) and SolveOptions::refuse_non_finite:
// the relative residual against the long-double reference, unchanged by power-of-two scaling
// that takes its squares out of range, the same through the lanes, the one-system paths and
// the fallback; and every non-finite input refused, naming the system, the array and the row.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tridiag/gallery.h"
#include "tridiag/lanes.h"
#include "tridiag/system_solvers.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {
namespace {

// `count` U(-1,1) systems of n rows one after another, every third diagonally dominant.
struct QualityBatch {
  std::size_t n = 0, count = 0;
  std::vector<double> dl, d, du, f, x;

  QualityBatch(std::size_t rows, std::size_t systems, std::uint64_t seed)
      : n(rows), count(systems) {
    for (std::size_t j = 0; j < count; ++j) {
      const TridiagonalMatrix a =
          j % 3 == 2 ? diagonally_dominant_matrix(n, seed + j) : stability_matrix(1, n, seed + j);
      const std::vector<double> rhs = random_vector(n, seed + 500 + j);
      dl.insert(dl.end(), a.dl.begin(), a.dl.end());
      d.insert(d.end(), a.d.begin(), a.d.end());
      du.insert(du.end(), a.du.begin(), a.du.end());
      f.insert(f.end(), rhs.begin(), rhs.end());
    }
    x.assign(n * count, 0.0);
  }
  BatchShape shape() const { return {BatchLayout::kStrided, n, count, {}}; }
  BatchArrays arrays() { return {dl.data(), d.data(), du.data(), f.data(), x.data()}; }
  SolutionQuality quality(std::size_t j) const {
    const std::size_t o = j * n;
    return solution_quality(&dl[o], &d[o], &du[o], &x[o], &f[o], n);
  }
  // The largest of the systems' relative residuals, the first of equals.
  WorstSystem worst_residual() const {
    WorstSystem w;
    for (std::size_t j = 0; j < count; ++j) {
      const double r = quality(j).relative_residual;
      if (r > w.value) w = {r, j};
    }
    return w;
  }
  void scale(int exponent) {
    for (auto* v : {&dl, &d, &du, &f})
      for (double& e : *v) e = std::ldexp(e, exponent);
  }
};

SolveOptions with(Algorithm algorithm) {
  SolveOptions o;
  o.algorithm = algorithm;
  o.threads = 2;
  return o;
}

TEST(SolutionQuality, NearTheLongDoubleResidualAndTheBackwardErrorToTheBit) {
  for (std::size_t n : {1, 2, 3, 50, 1000}) {
    QualityBatch b(n, 3, n);
    ASSERT_TRUE(solve_batch(b.shape(), b.arrays(), with(Algorithm::kGepp)).is_ok());
    for (std::size_t j = 0; j < 3; ++j) {
      const std::size_t o = j * n;
      const SolutionQuality q = b.quality(j);
      EXPECT_EQ(q.backward_error, backward_error(&b.dl[o], &b.d[o], &b.du[o], &b.x[o], &b.f[o], n));
      const double ref = relative_residual(&b.dl[o], &b.d[o], &b.du[o], &b.x[o], &b.f[o], n);
      // Each row's residual in double is off by at most about 3 eps of its terms' magnitudes
      // (|dl x| + |d x| + |du x| + |f|): the difference to the long-double figure.
      double terms = 0.0, norm_f = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        double t = std::abs(b.d[o + i] * b.x[o + i]) + std::abs(b.f[o + i]);
        if (i > 0) t += std::abs(b.dl[o + i] * b.x[o + i - 1]);
        if (i + 1 < n) t += std::abs(b.du[o + i] * b.x[o + i + 1]);
        terms += t * t;
        norm_f += b.f[o + i] * b.f[o + i];
      }
      const double bound = 4 * 2.220446049250313e-16 * std::sqrt(terms / norm_f);
      EXPECT_NEAR(q.relative_residual, ref, bound) << "n=" << n << " system " << j;
      EXPECT_GT(q.relative_residual + ref, 0.0);
    }
  }
}

TEST(SolutionQuality, ScaledByPowersOfTwoTheFiguresStayTheSame) {
  QualityBatch b(200, 2, 3);
  ASSERT_TRUE(solve_batch(b.shape(), b.arrays(), with(Algorithm::kGepp)).is_ok());
  const SolutionQuality want = b.quality(0);
  ASSERT_GT(want.relative_residual, 0.0);
  for (int e : {600, -600, 1000, -1000}) {
    QualityBatch s = b;
    s.scale(e);  // A and f by 2^e: x and both figures unchanged; the squares out of range
    const SolutionQuality q = s.quality(0);
    EXPECT_EQ(q.backward_error, want.backward_error) << e;
    EXPECT_EQ(q.relative_residual, want.relative_residual) << e;
  }
  // f = 0: the residual's norm itself; an x that is not finite: +inf for both.
  QualityBatch z(5, 1, 4);
  std::fill(z.f.begin(), z.f.end(), 0.0);
  z.x = {1, 0, 0, 0, 0};
  const double r0 = std::abs(z.d[0]), r1 = std::abs(z.dl[1]);
  EXPECT_DOUBLE_EQ(z.quality(0).relative_residual, std::sqrt(r0 * r0 + r1 * r1));
  z.x[3] = NAN;
  EXPECT_EQ(z.quality(0).relative_residual, INFINITY);
  EXPECT_EQ(z.quality(0).backward_error, INFINITY);
}

// solve_batch's report: the largest relative residual over the systems, as solution_quality
// gives it on the kept x, through the lanes (scaled runs go to the one-system path), one system
// at a time (ragged, spike), interleaved, and where systems fell back to gepp.
TEST(SolutionQuality, TheReportHasTheLargestResidualOfTheKeptSolutions) {
  for (int e : {0, 700}) {
    for (Algorithm alg : {Algorithm::kGepp, Algorithm::kThomas, Algorithm::kSpike}) {
      SCOPED_TRACE(std::string(algorithm_name(alg)) + " scaled by 2^" + std::to_string(e));
      QualityBatch b(65, 24, 9);
      b.scale(e);
      b.d[5 * b.n] = 0.0;  // thomas breaks down on system 5 and falls back
      SolveOptions o = with(alg);
      o.fallback = true;
      auto r = solve_batch(b.shape(), b.arrays(), o);
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      if (alg == Algorithm::kThomas) {
        EXPECT_NE(std::find(r->fell_back.begin(), r->fell_back.end(), 5), r->fell_back.end());
      }
      ASSERT_TRUE(r->relative_residual.has_value());
      const WorstSystem want = b.worst_residual();
      EXPECT_GT(want.value, 0.0);
      EXPECT_EQ(r->relative_residual->value, want.value);
      EXPECT_EQ(r->relative_residual->system, want.system);
    }
  }
}

// A non-finite value in a lane's inputs, the ignored dl[0] and du[n - 1] included, is found;
// huge finite values whose sums overflow are not.
TEST(RefuseNonFinite, TheLanesFindEveryNonFiniteInput) {
  const std::size_t n = 30;
  QualityBatch b(n, 8, 5);
  b.dl[1 * n] = NAN;               // ignored by the solve
  b.du[2 * n + n - 1] = INFINITY;  // ignored too
  b.d[3 * n + 7] = -INFINITY;
  b.f[6 * n + 29] = NAN;
  b.d[7 * n + 4] = b.du[7 * n + 4] = 1e308;  // finite, |row| overflows
  LaneWork w;
  LaneChecks c;
  (void)solve_gepp_lanes({b.arrays(), n, 8, 1, n}, w, c);
  EXPECT_EQ(c.non_finite_input, (1u << 1) | (1u << 2) | (1u << 3) | (1u << 6));
}

TEST(RefuseNonFinite, TheFirstSystemWithOneIsRefusedNamingItsArrayAndRow) {
  struct Case {
    Algorithm algorithm;
    BatchLayout layout;
  };
  for (const Case c : {Case{Algorithm::kGepp, BatchLayout::kStrided},
                       Case{Algorithm::kThomas, BatchLayout::kInterleaved},
                       Case{Algorithm::kPcr, BatchLayout::kStrided},
                       Case{Algorithm::kGepp, BatchLayout::kRagged}}) {
    SCOPED_TRACE(algorithm_name(c.algorithm));
    const std::size_t n = 40, count = 32;
    QualityBatch b(n, count, 7);
    const std::vector<std::size_t> sizes(count, n);
    BatchShape shape = b.shape();
    shape.layout = c.layout;
    if (c.layout == BatchLayout::kRagged) shape.sizes = sizes;
    // System 21's dl[0] (ignored by every solver) and system 27's f at row 3; interleaved, the
    // same flat positions are other systems' (row i of system j at i * count + j).
    b.dl[21 * n] = NAN;
    b.f[27 * n + 3] = INFINITY;
    SolveOptions o = with(c.algorithm);
    const auto plain = solve_batch(shape, b.arrays(), o);
    o.refuse_non_finite = true;
    const auto refused = solve_batch(shape, b.arrays(), o);
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    if (c.layout == BatchLayout::kInterleaved) {
      // flat 21 * 40 = 840 = row 26 of system 8; 27 * 40 + 3 = 1083 = row 33 of system 27.
      EXPECT_EQ(refused.status().message(), "system 8: non-finite input: dl is nan at row 26");
    } else {
      EXPECT_EQ(refused.status().message(), "system 21: non-finite input: dl is nan at row 0");
      // Without the option the values are not scanned: gepp and pcr never read dl[0], and
      // system 27's x is not finite.
      ASSERT_FALSE(plain.is_ok());
      EXPECT_EQ(plain.status().code(), StatusCode::kNumerical) << plain.status().to_string();
    }
  }
}

}  // namespace
}  // namespace stripesolve::tridiag
