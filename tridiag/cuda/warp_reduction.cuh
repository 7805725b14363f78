// CR, PCR and the hybrids for strided batches of systems of up to kMaxWarpSystem rows, one
// warp a system (warp_reduction.cu). Internal to tridiag/cuda/.
#pragma once

#include <cstddef>

#include "tridiag/cuda/kernel_limits.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag::gpu {

void launch_warp_reduction(Algorithm algorithm, const double* dl, const double* d, const double* du,
                           const double* f, double* x, std::size_t n, std::size_t count, double tol,
                           unsigned long long* flags, void* stream);

}  // namespace stripesolve::tridiag::gpu
