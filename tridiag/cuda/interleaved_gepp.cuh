// Gaussian elimination with partial pivoting (LAPACK dgtsv's algorithm) for interleaved batches
// on the GPU, a thread a system (interleaved_gepp.cu); internal to tridiag/cuda/.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace stripesolve::tridiag::gpu {

// `count` systems of n rows, row i of system j at i * count + j; x may alias f. pivot_flag gets
// the first row (j * n + i) whose two pivot candidates are both zero (a singular matrix, dgtsv's
// info), x_flag (where not null) the first with a non-finite solution. pivot_rows: device
// workspace of interleaved_gepp_workspace_bytes, where the kernel keeps the pivot rows (or the
// chunks' starting rows) that wait in device memory (null where none do).
struct InterleavedGepp {
  const double *dl, *d, *du, *f;
  double* x;
  std::size_t n, count;
  unsigned long long* pivot_flag;
  unsigned long long* x_flag;
  double* pivot_rows = nullptr;
};

// The kernel's variants: where a thread's rows wait between their read and their elimination,
// and its pivot rows until the substitution. kRowsInRegisters: 16 rows ahead in registers,
// pivot rows in shared memory; kRowsInSharedMemory: 8 rows ahead in shared memory (cp.async,
// whose waits count rows), pivot rows there too; kTailInDeviceMemory: the same ring, the first 32
// rows' pivot rows in shared memory and the later ones in device memory (read back through the
// ring); kPivotRowsInDeviceMemory: every pivot row in device memory. kChoose takes them in that
// order, up to n = kMaxRegisterGeppSystem, kMaxSharedGeppSystem, kMaxTailGeppSystem and above
// (H200, G unknowns/s: 103 / 98 at n = 16 / 32 from registers against 100 / 96; 78 at n = 64 from
// shared memory against 65; with the tail in device memory 54 / 57 / 48 / 51 / 43 / 46 / 46 at
// n = 96 / 128 / 160 / 256 / 384 / 512 / 1024, against 47 / 47 / 24 / 24 with every pivot row on
// chip and 34 / 47 / 34 / 46 / 34 / 44 / 45 with none).
// kRecomputedChunksOf32 / Of64 (for measuring, never chosen yet): the same ring, one chunk of 32
// or 64 steps' pivot rows in shared memory, and only each chunk's starting row in device memory;
// the substitution takes the last chunk's pivot rows as the elimination left them and eliminates
// each earlier chunk again from its start (gepp_rows_solve_chunked, the same bits): the batch
// read about twice, 72 bytes an unknown at most against 88, and no pivot rows written.
// kRecomputedChunksOf16InRegisters: the same with chunks of 16 steps whose pivot rows wait in
// registers, shared memory holding only the ring (more systems an SM).
enum class GeppKernel {
  kChoose,
  kRowsInRegisters,
  kRowsInSharedMemory,
  kPivotRowsInDeviceMemory,
  kTailInDeviceMemory,
  kRecomputedChunksOf32,
  kRecomputedChunksOf64,
  kRecomputedChunksOf16InRegisters
};
GeppKernel choose_gepp_kernel(std::size_t n);
// Device workspace `kernel` (kChoose: the chosen one) needs for `count` systems of n rows: 24
// bytes a row whose pivot row waits in device memory, or a chunk's starting row.
std::size_t interleaved_gepp_workspace_bytes(std::size_t n, std::size_t count,
                                             GeppKernel kernel = GeppKernel::kChoose);
void launch_interleaved_gepp(const InterleavedGepp& a, GeppKernel kernel, void* stream);

// Raises the kernel's dynamic shared memory limit (once per device, device_solve.cu).
cudaError_t set_interleaved_gepp_limits();

}  // namespace stripesolve::tridiag::gpu
