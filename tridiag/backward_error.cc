// The normwise backward error of a computed solution: the check behind every CPU solve's
// fallback and warning (tridiag.h says how it is used).
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {

// One pass, ~10n flops (5n for the residual, the rest for the three norms), in double: the
// residual of a backward-stable solve is ~eps ||A|| ||x||, far above the rounding of this sum.
double backward_error(const double* dl, const double* d, const double* du, const double* x,
                      const double* f, std::size_t n) {
  double r_max = 0.0, a_max = 0.0, x_max = 0.0, f_max = 0.0;
  bool non_finite = false;  // std::max drops a NaN: a non-finite x shows in its residual
  for (std::size_t i = 0; i < n; ++i) {
    const double left = i > 0 ? dl[i] : 0.0;
    const double right = i + 1 < n ? du[i] : 0.0;
    const double x_left = i > 0 ? x[i - 1] : 0.0;
    const double x_right = i + 1 < n ? x[i + 1] : 0.0;
    const double r = f[i] - (left * x_left + d[i] * x[i] + right * x_right);
    non_finite |= !(std::abs(r) <= DBL_MAX);
    r_max = std::max(r_max, std::abs(r));
    a_max = std::max(a_max, std::abs(left) + std::abs(d[i]) + std::abs(right));
    x_max = std::max(x_max, std::abs(x[i]));
    f_max = std::max(f_max, std::abs(f[i]));
  }
  if (non_finite || !std::isfinite(x_max)) return INFINITY;
  const double den = a_max * x_max + f_max;
  if (den == 0.0) return r_max == 0.0 ? 0.0 : INFINITY;
  return r_max / den;
}

double backward_error_tolerance(std::size_t n) {
  constexpr double kEps = 2.220446049250313e-16;
  return std::max(2.0, std::log2(static_cast<double>(std::max<std::size_t>(n, 1))) / 2.0) * kEps;
}

}  // namespace stripesolve::tridiag
