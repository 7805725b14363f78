// The backward-error tolerance of tridiag.h's quality check as an inline function that compiles
// for the host and the device, so that the CPU check (backward_error.cc) and the GPU's
// (cuda/quality_check.cu) hold a system to the same figure. Internal to tridiag/; callers
// outside it use backward_error_tolerance() of tridiag.h.
#pragma once

#include <cmath>
#include <cstddef>

#if defined(__CUDACC__)
#define STRIPESOLVE_TOLERANCE_HD __host__ __device__
#else
#define STRIPESOLVE_TOLERANCE_HD
#endif

namespace stripesolve::tridiag {

// max(2, log2(n) / 2) eps (tridiag.h: backward_error_tolerance says why).
STRIPESOLVE_TOLERANCE_HD inline double backward_error_tolerance_of(std::size_t n) {
  constexpr double kEps = 2.220446049250313e-16;
  const double half_log = ::log2(static_cast<double>(n > 1 ? n : 1)) / 2.0;
  return (half_log > 2.0 ? half_log : 2.0) * kEps;
}

}  // namespace stripesolve::tridiag
