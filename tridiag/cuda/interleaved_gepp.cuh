// Gaussian elimination with partial pivoting (LAPACK dgtsv's algorithm) for interleaved batches
// of small systems on the GPU, a thread a system (interleaved_gepp.cu); internal to
// tridiag/cuda/.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace stripesolve::tridiag::gpu {

// `count` systems of n rows, row i of system j at i * count + j; x may alias f. pivot_flag gets
// the first row (j * n + i) whose two pivot candidates are both zero (a singular matrix, dgtsv's
// info), x_flag (where not null) the first with a non-finite solution.
struct InterleavedGepp {
  const double *dl, *d, *du, *f;
  double* x;
  std::size_t n, count;
  unsigned long long* pivot_flag;
  unsigned long long* x_flag;
};

// Rows a thread reads ahead of its elimination: 4, 8 or 16; 0 takes 16, the fastest at every n
// (H200, n = 16 to 256; 4 and 8 are kept for measuring).
void launch_interleaved_gepp(const InterleavedGepp& a, int ahead, void* stream);

// Raises the kernel's dynamic shared memory limit (once per device, device_solve.cu).
cudaError_t set_interleaved_gepp_limits();

}  // namespace stripesolve::tridiag::gpu
