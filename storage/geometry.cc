#include "storage/geometry.h"

#include <string>

namespace stripesolve::storage {

int64_t StripeGeometry::stripe_of_row(int64_t row) const {
  // Start from the estimate row*N/n, then correct for the floor in Eq 3 (at most one step).
  int64_t I = row * stripes / n;
  while (I + 1 < stripes && row_begin(I + 1) <= row) ++I;
  while (I > 0 && row_begin(I) > row) --I;
  return I;
}

Result<StripeGeometry> make_geometry(int64_t n, int64_t stripe_rows) {
  // 2^30 rows would already be 8 EiB of matrix; the bound keeps I*n and 8*h*n in int64 range.
  constexpr int64_t kMaxOrder = int64_t{1} << 30;
  if (n < 1 || n > kMaxOrder) {
    return Status::invalid_argument("matrix order n=" + std::to_string(n) + " out of range [1, " +
                                    std::to_string(kMaxOrder) + "]");
  }
  if (stripe_rows < 1) {
    return Status::invalid_argument("stripe_rows=" + std::to_string(stripe_rows) +
                                    " must be at least 1");
  }
  StripeGeometry g;
  g.n = n;
  g.stripe_rows = stripe_rows;
  g.stripes = (n + g.stripe_rows - 1) / g.stripe_rows;  // 002 Eq 3
  return g;
}

}  // namespace stripesolve::storage
