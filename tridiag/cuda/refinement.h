// One step of iterative refinement on the device (issue 17): r = f - A x, A d = r with the same
// solver, x = x + d. The GPU default's SPIKE partitions can leave a large system's backward
// error a few eps above gepp's (n = 2^20, types 5 and 10 of the stability suite: relative
// residuals 18-60x LAPACK's); one step in working precision brings them to LAPACK's level
// (docs/tridiag-stability.md). gpu_solver.cu runs it when the device check finds a system above
// kRefineAbove. Internal to tridiag/, no CUDA type here.
// Threading: asynchronous on `stream`.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "tridiag/cuda/device_solve.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag::gpu {

// A batch is refined when a system's backward error within its tolerance is above this many
// eps: gepp lands below about eps, and SPIKE's worst systems that miss LAPACK's residual by
// more than 10x sit at 1.6-3.1 eps, the others at or below 1.1 eps (refine_probe, H200).
inline constexpr double kRefineAboveEps = 1.25;

// r <- f - A x for every system of the batch (its layout; batch.x read, batch.f the
// right-hand side), with fused multiply-adds. For ragged batches dl of a first row and du of a
// last row are zero (zero_ragged_couplings) and skipped.
Status residual_on_device(BatchLayout layout, const DeviceBatch& batch, double* r, void* stream);

// x <- x + dx over `rows` entries.
Status add_on_device(double* x, const double* dx, std::size_t rows, void* stream);

}  // namespace stripesolve::tridiag::gpu
