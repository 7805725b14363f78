// The relative residual's choice between its plain sums and its scaled second pass (tridiag.h:
// solution_quality), shared by the one-system check (backward_error.cc) and the lanes (lanes.cc)
// so that both take the same way for a system and give the same bits. Internal to tridiag/.
#pragma once

namespace stripesolve::tridiag {

// Whether the plain sums of squares serve: the largest |residual| and |f| are 0 or within
// [2^-480, 2^480], so that no square of them overflows and none that matters underflows.
bool squares_in_range(double largest_residual, double largest_f);

// sqrt(r2 / f2) from the plain sums, sqrt(r2) where f is 0 (largest_f == 0).
double relative_residual_of_sums(double r2, double f2, double largest_f);

}  // namespace stripesolve::tridiag
