// RamOriginal (ram_original.h) on its own: stripes copied in pieces on several threads land
// where the residual reads them, and its r = b - A x matches a plain product.
#include "scheduler/ram_original.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "scheduler/progress.h"
#include "stripe/dense_reference.h"

namespace stripesolve::scheduler {
namespace {

TEST(RamOriginalTest, StripesCopiedInPiecesGiveTheResidualOfAPlainProduct) {
  // Stripes of 533-534 rows, 6.5 MiB: pieces of 2 MiB on four threads, the last one short.
  const int64_t n = 1600;
  const storage::StripeGeometry g{n, 534, 3};
  const std::vector<double> a = stripe::uniform_matrix(n, n, 3);  // column-major, ld n
  cache::StripeCache cache(3 * 8ull * n * n);
  auto copy = RamOriginal::reserve(cache, g, 8ull * n * n);
  ASSERT_NE(copy, nullptr);
  for (int64_t i = 0; i < g.stripes; ++i) {
    EXPECT_FALSE(copy->complete());
    std::vector<double> rows(static_cast<size_t>(g.rows(i) * n));  // h x n, ld h
    for (int64_t c = 0; c < n; ++c) {
      for (int64_t q = 0; q < g.rows(i); ++q) {
        rows[static_cast<size_t>(q + c * g.rows(i))] =
            a[static_cast<size_t>(g.row_begin(i) + q + c * n)];
      }
    }
    copy->keep(i, rows.data(), 4);
  }
  EXPECT_TRUE(copy->complete());
  const std::vector<double> x = stripe::uniform_matrix(n, 1, 4),
                            b = stripe::uniform_matrix(n, 1, 5);
  auto backend = backend::make_cpu_backend();
  ProgressMeter progress{nullptr, 1.0};
  CancelToken cancel;
  EngineContext ctx{*backend, cache, progress, cancel, nullptr, 1.0};
  std::vector<double> r(static_cast<size_t>(n));
  const ResidualResult res = copy->residual(ctx, b.data(), x.data(), 1, r.data(), 3);
  double worst = 0, r_max = 0;
  for (int64_t q = 0; q < n; ++q) {
    double want = b[static_cast<size_t>(q)];
    for (int64_t c = 0; c < n; ++c)
      want -= a[static_cast<size_t>(q + c * n)] * x[static_cast<size_t>(c)];
    worst = std::max(worst, std::fabs(r[static_cast<size_t>(q)] - want));
    r_max = std::max(r_max, std::fabs(want));
  }
  EXPECT_GT(r_max, 1.0);
  EXPECT_LT(worst, 1e-10 * r_max);
  EXPECT_NEAR(res.r_norm_inf, r_max, 1e-10 * r_max);
  EXPECT_NEAR(res.a_norm_1, stripe::norm_1(a, n), 1e-9 * res.a_norm_1);
}

}  // namespace
}  // namespace stripesolve::scheduler
