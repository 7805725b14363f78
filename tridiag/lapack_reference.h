// LAPACK dgtsv as the reference for tests and benchmarks (links LAPACKE; not part of the
// tridiag library). Arrays in tridiag's convention (length n, dl[0] and du[n-1] ignored).
#pragma once

#include <cstddef>
#include <vector>

#include <lapacke.h>

namespace stripesolve::tridiag {

// Returns LAPACK's info (0 = solved) and writes x.
inline int lapack_dgtsv(const double* dl, const double* d, const double* du, const double* f,
                        std::size_t n, std::vector<double>& x) {
  std::vector<double> l(dl + 1, dl + n), dd(d, d + n), u(du, du + (n > 0 ? n - 1 : 0));
  x.assign(f, f + n);
  if (n == 1) {
    if (d[0] == 0.0) return 1;
    x[0] = f[0] / d[0];
    return 0;
  }
  return LAPACKE_dgtsv(LAPACK_COL_MAJOR, static_cast<lapack_int>(n), 1, l.data(), dd.data(),
                       u.data(), x.data(), static_cast<lapack_int>(n));
}

}  // namespace stripesolve::tridiag
