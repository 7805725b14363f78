// The condition estimate on the device (GpuElimination::substitute_transposed): where the factors
// stay on the device, its solves with A and A^T run there, whether or not the factors are also
// stored; on the CUDA device and on the host engine (gpu_dense_fixture.h).
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scheduler/condition.h"
#include "scheduler/gpu_dense_fixture.h"
#include "stripe/dense_reference.h"

namespace stripesolve::scheduler {
namespace {

// ||A||_1 ||A^-1||_1 inverted, from LAPACK's inverse.
double exact_rcond(const std::vector<double>& a, int64_t n) {
  return 1.0 / (stripe::norm_1(a, n) * stripe::inverse_norm_1(a, n));
}

// A solve whose factors are not kept (they live on the device only) still reports rcond: a lower
// bound of ||A^-1||_1 within 10x, for every pivot mode (each mode's swaps enter the transposed
// passes: kRow's column swaps over U, kLocal's row swaps over L). The store sees A once, for the
// load: nothing of the factors is written or read. With the factors stored, the estimate made on
// the device equals the host's from the same factors (a solve that reuses them: the same
// estimator's steps on the stored factors, read by the host's passes).
TEST_P(GpuDenseTest, TheConditionEstimateSolvesWithTheFactorsOnTheDevice) {
  const int64_t n = 600;
  std::vector<double> a = stripe::uniform_matrix(n, n, 12);
  for (int64_t r = 0; r < n; ++r) a[static_cast<size_t>(r + r * n)] += 4.0;  // safe for none
  store_values("A", n, 64, a);
  const auto b = random_rhs(n, 2);
  EngineConfig c = gpu_engine(false);
  c.meta_stripes = 1;
  c.elim_j_workers = 0;
  const double exact = exact_rcond(a, n);
  for (const PivotMode p : {PivotMode::kRow, PivotMode::kLocal, PivotMode::kNone}) {
    const std::string mode(backend::pivot_mode_name(p));
    DenseSolveOptions o = throwaway_factors();
    o.pivot = p;
    auto rep = solve("A", b, 2, o, c);
    ASSERT_TRUE(rep.is_ok()) << mode << ": " << rep.status().to_string();
    ASSERT_TRUE(rep->plan.device_resident) << mode;
    expect_matches_lapack(a, n, b, 2, *rep, 1e-12, mode);
    EXPECT_GE(rep->rcond, exact * (1 - 1e-6)) << mode;
    EXPECT_LT(rep->rcond, 10 * exact) << mode;
    EXPECT_GT(rep->condition_seconds, 0.0) << mode;
    EXPECT_EQ(rep->io_written_bytes, 0u) << mode;
    EXPECT_LT(rep->io_read_bytes, 8ull * n * n * 3 / 2) << mode << ": A once, for the load";

    o.store_factors = true;
    auto on_device = solve("A", b, 2, o, c);
    ASSERT_TRUE(on_device.is_ok()) << mode << ": " << on_device.status().to_string();
    o.reuse_factors = true;
    auto on_host = solve("A", b, 2, o, c);
    ASSERT_TRUE(on_host.is_ok()) << mode << ": " << on_host.status().to_string();
    ASSERT_TRUE(on_host->reused_factors) << mode;
    EXPECT_GT(on_device->rcond, 0.0) << mode;
    EXPECT_NEAR(on_device->rcond, on_host->rcond, 1e-9 * on_host->rcond) << mode;
  }
}

// An ill-conditioned matrix (columns graded from 1 to 1e-10, rcond about 1e-14) gets the
// sharpened estimate on the device too: a unit solve and a transposed solve after the residual
// pass, with the factors there and nowhere else.
TEST_P(GpuDenseTest, AnIllConditionedMatrixIsSharpenedOnTheDevice) {
  const int64_t n = 600;
  std::vector<double> a = stripe::uniform_matrix(n, n, 8);
  for (int64_t col = 0; col < n; ++col) {
    const double scale = std::pow(10.0, -10.0 * static_cast<double>(col) / (n - 1));
    for (int64_t row = 0; row < n; ++row) a[static_cast<size_t>(row + col * n)] *= scale;
  }
  store_values("G", n, 64, a);
  const auto b = random_rhs(n, 1);
  EngineConfig c = gpu_engine(false);
  auto rep = solve("G", b, 1, throwaway_factors(), c);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  ASSERT_TRUE(rep->plan.device_resident);
  const double exact = exact_rcond(a, n);
  EXPECT_LT(rep->rcond, kSharpenRcondBelow);
  EXPECT_GE(rep->rcond, exact * (1 - 1e-6));
  EXPECT_LT(rep->rcond, 10 * exact);
  EXPECT_EQ(rep->io_written_bytes, 0u);
}

// A matrix singular to working precision (its last column the difference of the first two)
// says so from the device's estimate, as from the host's.
TEST_P(GpuDenseTest, ASingularMatrixIsNamedFromTheDevicesEstimate) {
  const int64_t n = 300;
  std::vector<double> a = stripe::uniform_matrix(n, n, 3);
  for (int64_t r = 0; r < n; ++r) {
    a[static_cast<size_t>(r + (n - 1) * n)] =
        a[static_cast<size_t>(r)] - a[static_cast<size_t>(r + n)];
  }
  store_values("S", n, 64, a);
  const auto b = random_rhs(n, 1);
  auto rep = solve("S", b, 1, throwaway_factors(), gpu_engine(false));
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();  // its last pivot rounds to about 1e-16
  ASSERT_TRUE(rep->plan.device_resident);
  EXPECT_GT(rep->rcond, 0.0);
  EXPECT_LT(rep->rcond, 1e-15);
  EXPECT_NE(rep->warning.find("singular"), std::string::npos) << rep->warning;
}

}  // namespace
}  // namespace stripesolve::scheduler
