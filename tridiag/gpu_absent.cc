// The GPU entry points in a build without CUDA.
#include "tridiag/gpu.h"
#include "tridiag/gpu_part.h"

namespace stripesolve::tridiag {

bool gpu_available() {
  return false;
}

Status solve_gpu_checked(const BatchShape&, const BatchArrays&, const GpuOptions&, SolveReport&,
                         BatchOutcome&, std::span<const int>) {
  return Status::unimplemented(
      "tridiag: this build has no CUDA support (STRIPESOLVE_HAVE_CUDA off)");
}

Result<SolveReport> solve_batch_gpu(const BatchShape& shape, const BatchArrays& arrays,
                                    const GpuOptions& options) {
  SolveReport report;
  BatchOutcome outcome;
  STRIPESOLVE_RETURN_IF_ERROR(solve_gpu_checked(shape, arrays, options, report, outcome));
  return report;
}

}  // namespace stripesolve::tridiag
