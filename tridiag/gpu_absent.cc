// The GPU entry points in a build without CUDA.
#include "tridiag/gpu.h"

namespace stripesolve::tridiag {

bool gpu_available() { return false; }

Algorithm choose_gpu_algorithm(const BatchShape&, const SolveOptions& options) {
  return options.require_stable ? Algorithm::kSpike : Algorithm::kThomas;
}

Result<SolveReport> solve_batch_gpu(const BatchShape&, const BatchArrays&, const GpuOptions&) {
  return Status::unimplemented("tridiag: this build has no CUDA support (STRIPESOLVE_HAVE_CUDA off)");
}

}  // namespace stripesolve::tridiag
