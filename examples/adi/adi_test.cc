// The ADI half steps (examples/adi/adi.h) with an in-process Thomas solve: the iterates converge
// to the discrete solution, whose error against e^(x+2y) is below the bound and shrinks as h^2.
#include "examples/adi/adi.h"

#include <cmath>

#include <gtest/gtest.h>

namespace stripesolve::examples::adi {
namespace {

// Thomas on each system of the batch, in the batch's layout (the systems are diagonally dominant).
std::vector<double> thomas(const TridiagBatch& b) {
  std::vector<double> x(b.rhs.size());
  const auto at = [&](int64_t s, int64_t i) {
    return static_cast<size_t>(b.interleaved ? i * b.systems + s : s * b.n + i);
  };
  std::vector<double> c(static_cast<size_t>(b.n)), z(static_cast<size_t>(b.n));
  for (int64_t s = 0; s < b.systems; ++s) {
    for (int64_t i = 0; i < b.n; ++i) {
      const size_t k = at(s, i);
      const double lo = i > 0 ? b.dl[k] : 0.0;
      const double denom = b.d[k] - (i > 0 ? lo * c[static_cast<size_t>(i - 1)] : 0.0);
      c[static_cast<size_t>(i)] = b.du[k] / denom;
      z[static_cast<size_t>(i)] =
          (b.rhs[k] - (i > 0 ? lo * z[static_cast<size_t>(i - 1)] : 0.0)) / denom;
    }
    for (int64_t i = b.n - 1; i >= 0; --i) {
      const double next = i + 1 < b.n ? x[at(s, i + 1)] : 0.0;
      x[at(s, i)] =
          z[static_cast<size_t>(i)] - (i + 1 < b.n ? c[static_cast<size_t>(i)] * next : 0.0);
    }
  }
  return x;
}

double run(PoissonAdi& adi, int64_t steps) {
  double change = 0;
  for (int64_t k = 0; k < steps; ++k) {
    const std::vector<double> u_star = thomas(adi.row_half_step(k));
    change = adi.finish_step(thomas(adi.column_half_step(k, u_star)));
  }
  return change;
}

TEST(PoissonAdi, ConvergesBelowTheDiscretizationBound) {
  PoissonAdi adi(48, 6);
  const double initial = adi.max_error();
  EXPECT_GT(initial, 1.0);  // the inner cells start at zero, the solution is e^(x+2y) >= 1
  const double change = run(adi, 24);
  EXPECT_LT(change, 1e-5);  // against an error of about 2e-4
  EXPECT_GT(adi.max_error(), 0);
  EXPECT_LE(adi.max_error(), adi.error_bound());
}

TEST(PoissonAdi, ErrorShrinksAsHSquared) {
  PoissonAdi coarse(24, 6), fine(48, 6);
  run(coarse, 40);
  run(fine, 40);
  const double ratio = coarse.max_error() / fine.max_error();
  // h halves (1/25 -> 1/49): the error of a second-order scheme falls about (49/25)^2 = 3.8x.
  EXPECT_GT(ratio, 3.3);
  EXPECT_LT(ratio, 4.3);
}

TEST(PoissonAdi, FewStepsAreNotConverged) {
  // The check of the example has teeth: two steps leave the error far above the bound.
  PoissonAdi adi(48, 6);
  run(adi, 2);
  EXPECT_GT(adi.max_error(), 10 * adi.error_bound());
}

TEST(PoissonAdi, FixedAlphaAsThePaper) {
  PoissonAdi adi(16, 1, 0.3);
  EXPECT_DOUBLE_EQ(adi.alpha(0), 0.3);
  EXPECT_DOUBLE_EQ(adi.alpha(7), 0.3);
  run(adi, 200);
  EXPECT_LE(adi.max_error(), adi.error_bound());
}

}  // namespace
}  // namespace stripesolve::examples::adi
