// The normwise backward error of a computed solution: the check behind every CPU solve's
// fallback and warning (tridiag.h says how it is used).
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "tridiag/tolerance.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {

namespace {

// The maxima of the rows' |residual|, |A| row sums, |x| and |f|.
struct Maxima {
  double r = 0.0, a = 0.0, x = 0.0, f = 0.0;
  // std::max drops a NaN: a non-finite x shows up here through its residual.
  bool non_finite = false;

  void add(double left, double diag, double right, double x_left, double x_mid, double x_right,
           double rhs) {
    const double res = std::abs(rhs - (left * x_left + diag * x_mid + right * x_right));
    non_finite |= !(res <= DBL_MAX);
    r = std::max(r, res);
    a = std::max(a, std::abs(left) + std::abs(diag) + std::abs(right));
    x = std::max(x, std::abs(x_mid));
    f = std::max(f, std::abs(rhs));
  }
};

}  // namespace

// One pass, ~10n flops (5n for the residual, the rest for the three norms), in double: the
// residual of a backward-stable solve is ~eps ||A|| ||x||, far above the rounding of this sum.
// The first and last rows are taken apart so that the interior loop has no branch. Measured on
// one core (2^20 unknowns): ~450 M rows/s in cache, 15-20% of a Thomas solve's time and 9-12%
// of gepp's; without -ffast-math the max reductions stay scalar.
double backward_error(const double* dl, const double* d, const double* du, const double* x,
                      const double* f, std::size_t n) {
  Maxima m;
  if (n == 1) {
    m.add(0.0, d[0], 0.0, 0.0, x[0], 0.0, f[0]);
  } else {
    m.add(0.0, d[0], du[0], 0.0, x[0], x[1], f[0]);
    for (std::size_t i = 1; i + 1 < n; ++i) {
      m.add(dl[i], d[i], du[i], x[i - 1], x[i], x[i + 1], f[i]);
    }
    m.add(dl[n - 1], d[n - 1], 0.0, x[n - 2], x[n - 1], 0.0, f[n - 1]);
  }
  if (m.non_finite || !std::isfinite(m.x)) return INFINITY;
  const double den = m.a * m.x + m.f;
  if (den == 0.0) return m.r == 0.0 ? 0.0 : INFINITY;
  return m.r / den;
}

double backward_error_tolerance(std::size_t n) {
  return backward_error_tolerance_of(n);
}

}  // namespace stripesolve::tridiag
