// Stripe geometry of a stored matrix (002 §3, Eq 3): pure arithmetic, no I/O.
//
// A matrix of order n (float64) is cut into N = ceil(n / S) row stripes; stripe I holds rows
// [I*n/N, (I+1)*n/N), so heights differ by at most one and never exceed S. Stripe I is stored
// column-major with leading dimension h_I: element (r, c), r in stripe I, is at stripe-local byte
// offset 8 * ((r - row_begin(I)) + c * h_I). The part of stripe I from column c0 to n is therefore
// one contiguous byte run [8*h_I*c0, 8*h_I*n) (002 §7.1), and so is any column range [c0, c1).
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <limits>

#include "base/status.h"

namespace stripesolve::storage {

inline constexpr uint64_t kElementBytes = 8;  // float64

// The end column of a part that runs through column n (the parts the elimination moves); a part
// that ends earlier (the forward passes read columns [0, row_end(I)) only) names its end.
inline constexpr int64_t kThroughN = std::numeric_limits<int64_t>::max();

struct StripeGeometry {
  int64_t n = 0;            // matrix order (rows = cols = n)
  int64_t stripe_rows = 0;  // S, the nominal stripe height
  int64_t stripes = 0;      // N = ceil(n / S)

  // 002 Eq 3: stripe I holds rows [I*n/N, (I+1)*n/N).
  int64_t row_begin(int64_t I) const { return I * n / stripes; }
  int64_t row_end(int64_t I) const { return (I + 1) * n / stripes; }
  int64_t rows(int64_t I) const { return row_end(I) - row_begin(I); }
  int64_t stripe_of_row(int64_t row) const;
  // Bytes of stripe I as data (8 * h_I * n), without any alignment padding.
  uint64_t stripe_bytes(int64_t I) const {
    return kElementBytes * static_cast<uint64_t>(rows(I)) * static_cast<uint64_t>(n);
  }
  // Stripe-local byte offset of element (row, col); row must lie in stripe I.
  uint64_t element_offset(int64_t I, int64_t row, int64_t col) const {
    return kElementBytes * static_cast<uint64_t>((row - row_begin(I)) + col * rows(I));
  }

  friend bool operator==(const StripeGeometry&, const StripeGeometry&) = default;
};

// Checks 1 <= n <= 2^30 and S >= 1 (S > n is allowed and gives one stripe).
Result<StripeGeometry> make_geometry(int64_t n, int64_t stripe_rows);

}  // namespace stripesolve::storage
