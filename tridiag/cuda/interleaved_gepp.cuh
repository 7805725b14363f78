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

// Where a thread's rows wait between their read and their elimination: 16 rows in registers,
// or 8 in shared memory (cp.async, the wait counting rows); kChoose takes registers up to
// n = 32 and shared memory above (H200: 103 / 98 G unknowns/s at n = 16 / 32 against 100 / 96;
// 78 / 47 at n = 64 / 128 against 65 / 40). The others are for measuring.
enum class RowsAhead { kChoose, kRegisters, kSharedMemory };
void launch_interleaved_gepp(const InterleavedGepp& a, RowsAhead ahead, void* stream);

// Raises the kernel's dynamic shared memory limit (once per device, device_solve.cu).
cudaError_t set_interleaved_gepp_limits();

}  // namespace stripesolve::tridiag::gpu
