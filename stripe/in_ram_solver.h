// The in-RAM reference driver of the stripe algorithm: every stripe held in memory, stripes
// eliminated in the sequential order of 002 Fig 5 (for I = 0..N-1: eliminate I, then update every
// J > I by I), then forward and backward substitution stripe by stripe. It proves the stripe
// operations before the out-of-core scheduler drives them in its own orders, and is the
// comparison point of bench/dense.
//
// Ownership: the solver owns a copy of A in stripe layout (8 n^2 bytes) that becomes its factors.
// Threading: factor() and solve() run in the calling thread (the backend may use its own threads);
// solve() may run concurrently with other solve() calls on the same solver.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "stripe/geometry.h"
#include "stripe/stripe_ops.h"

namespace stripesolve::stripe {

struct InRamOptions {
  int64_t stripe_rows = 512;    // S
  int64_t substripe_rows = 64;  // S'
  PivotMode pivot = PivotMode::kRow;
};

class InRamSolver {
 public:
  // Factors A (n x n, column-major, lda >= n). Numerical error (naming the row) for a zero or
  // non-finite pivot; InvalidArgument for bad sizes.
  static Result<InRamSolver> factor(backend::Backend& backend, const double* a, int64_t lda,
                                    int64_t n, const InRamOptions& options);

  // Solves A X = B in place (B: n x nrhs, column-major, ldb >= n) with the stored factors.
  Status solve(backend::Backend& backend, double* b, int64_t ldb, int64_t nrhs) const;

  int64_t n() const { return n_; }
  const EvenPartition& stripes() const { return stripes_; }
  const StripePivots& pivots(int64_t stripe) const { return pivots_[stripe]; }

 private:
  StripePart part(int64_t stripe) const;

  int64_t n_ = 0;
  EvenPartition stripes_;
  std::vector<std::vector<double>> data_;  // stripe I: rows(I) x n, column-major, from column 0
  std::vector<StripePivots> pivots_;
};

}  // namespace stripesolve::stripe
