// What dense_solve_test and gpu_dense_test check of a dense solve's x against LAPACK (test-only).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scheduler/dense_solve.h"
#include "stripe/dense_reference.h"

namespace stripesolve::scheduler {

// The scaled residual of rep.x below max(bound, 10x LAPACK dgesv's), the engine's own residual
// (computed stripe by stripe) equal to it up to the rounding of forming r = b - A x (at most
// about n eps), and x not trivially zero. Returns dgesv's x (empty when LAPACK failed).
inline std::vector<double> expect_solution_near_lapack(const std::vector<double>& a, int64_t n,
                                                       const std::vector<double>& b, int64_t nrhs,
                                                       const SolveReport& rep, double bound,
                                                       const std::string& what) {
  std::vector<double> ref = stripe::lapack_solve(a, n, b, nrhs);
  EXPECT_FALSE(ref.empty()) << what;
  if (ref.empty()) return ref;
  const double res = stripe::scaled_residual(a.data(), n, rep.x.data(), b.data(), nrhs);
  const double ref_res = stripe::scaled_residual(a.data(), n, ref.data(), b.data(), nrhs);
  EXPECT_LT(res, std::max(bound, 10 * ref_res)) << what << " (LAPACK " << ref_res << ")";
  EXPECT_NEAR(rep.residual, res, 1e-3 * res + static_cast<double>(n) * 2.2e-16) << what;
  EXPECT_GT(stripe::max_abs(rep.x), 0.0) << what;
  return ref;
}

}  // namespace stripesolve::scheduler
