// CR, PCR and the hybrids for strided batches of systems of up to kMaxWarpSystem rows, one
// warp a system (warp_reduction.cu). Internal to tridiag/cuda/.
#pragma once

#include <cstddef>

#include "tridiag/cuda/kernel_limits.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag::gpu {

// rows_per_lane: M = 1, 2, 4 or 8, choose_kernel's width (n <= 32 M).
void launch_warp_reduction(Algorithm algorithm, int rows_per_lane, const double* dl,
                           const double* d, const double* du, const double* f, double* x,
                           std::size_t n, std::size_t count, double tol, unsigned long long* flags,
                           void* stream);

}  // namespace stripesolve::tridiag::gpu
