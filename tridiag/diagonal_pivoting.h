// Diagonal pivoting for one tridiagonal system (000 §III, after Erway et al.): A = L B M^T with
// 1x1 or 2x2 pivot blocks chosen by the asymmetric Bunch-Kaufman test
//   |b1| * sigma1 >= kappa * |a2 c1|, sigma1 = max(|a2|, |a3|, |b2|, |c1|, |c2|),
//   kappa = (sqrt(5) - 1) / 2,
// and the Schur complement update of Eq 12. No row interchanges, so the factor is two arrays:
// the current diagonal at each pivot (piv) and the block kind of each row.
// Cost: factor about 5n flops, each solve about 7n. Internal to tridiag/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace stripesolve::tridiag {

inline constexpr double kBunchKaufmanKappa = 0.6180339887498949;  // (sqrt(5) - 1) / 2

// kinds[k]: 1 = 1x1 pivot at k, 2 = first row of a 2x2 pivot, 0 = its second row.
// Fails "singular or non-finite pivot <v> at row <k>" (kNumerical) on an exactly zero pivot.
// Rows in messages are numbered from row_offset (the partition's first row in its system).
Status dp_factor(const double* dl, const double* d, const double* du, std::size_t n, double* piv,
                 std::uint8_t* kinds, std::size_t row_offset = 0);
// x holds f on entry and the solution on return.
void dp_solve(const double* dl, const double* du, const double* piv, const std::uint8_t* kinds,
              std::size_t n, double* x);

}  // namespace stripesolve::tridiag
