// Gaussian elimination with partial pivoting (LAPACK dgtsv's algorithm) for interleaved batches
// on the GPU, a thread a system (interleaved_gepp.cu); internal to tridiag/cuda/.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "tridiag/cuda/device_solve.h"

namespace stripesolve::tridiag::gpu {

// `count` systems of n rows, row i of system j at i * count + j; x may alias f. pivot_flag gets
// the first row (j * n + i) whose two pivot candidates are both zero (a singular matrix, dgtsv's
// info), x_flag (where not null) the first with a non-finite solution. pivot_rows: device
// workspace of interleaved_gepp_workspace_bytes, where the kernel keeps the pivot rows (or the
// chunks' starting rows) that wait in device memory (null where none do). check: where its
// errors are set (prepare_check's target) and x is apart from f, kernels that can give each
// system its verdict as they solve do (launch_interleaved_gepp says whether it did).
struct InterleavedGepp {
  const double *dl, *d, *du, *f;
  double* x;
  std::size_t n, count;
  unsigned long long* pivot_flag;
  unsigned long long* x_flag;
  double* pivot_rows = nullptr;
  CheckTarget check{};
};

// The kernel's variants: where a thread's rows wait between their read and their elimination,
// and its pivot rows until the substitution. kRowsInRegisters: 16 rows ahead in registers,
// pivot rows in shared memory; kRowsInSharedMemory: 8 rows ahead in shared memory (cp.async,
// whose waits count rows), pivot rows there too; kTailInDeviceMemory: the same ring, the first 32
// rows' pivot rows in shared memory and the later ones in device memory (read back through the
// ring); kPivotRowsInDeviceMemory: every pivot row in device memory.
// kRecomputedChunksOf32LastOf48: the same ring, one chunk's pivot rows on chip, and only each
// chunk's starting row in device memory; the substitution takes the last chunk's pivot rows as
// the elimination left them and eliminates each earlier chunk again from its start
// (gepp_rows_solve_chunked, the same bits): the batch read about twice, 72 bytes an unknown at
// most against 88, and no pivot rows written, for twice the arithmetic. Chunks of 32 steps, their
// pivot rows in shared memory, but the last, of 48, its last 16 in registers (three blocks an SM
// still: shared memory bounds them), so that fewer rows are read again (79 of 128 at n = 128
// against 96 with a last chunk of 32). kRecomputedChunksOf16InRegisters: the same with chunks of
// 16 steps whose pivot rows wait in registers, shared memory holding only the ring (five blocks
// of 64 threads an SM against three). kTwistedChunksOf32LastOf48: two threads a system, from
// both ends (gepp_rows_solve_twisted: partial pivoting in another order, not dgtsv's bits), each
// half as kRecomputedChunksOf32LastOf48 takes a whole system, a warp the upper halves of 32
// systems and a warp their lower halves; the halves meet in a 2 x 2 step through shared memory.
// Each half keeps as many rows on chip as a whole system does in the variant it is built on, so
// that fewer rows are read again (at n = 256, 79 of 128 a half against 207 of 256), with the
// same threads an SM; systems past the last whole group of 32 go to
// kRecomputedChunksOf32LastOf48.
//
// choose_gepp_kernel (kChoose) takes the first two up to n = kMaxRegisterGeppSystem and
// kMaxSharedGeppSystem; above, where the batch has kMinRecomputedGeppSystems systems or more
// (enough threads to fill the device: memory bound), the recomputing variants: from both ends
// where twisted_gepp_serves(n) and the batch is not checked inside (kernel_limits.h), chunks of
// 32 (the last of 48) up to kMaxSharedChunkGeppSystem and of 16 in registers above; with fewer
// systems each thread's chain of steps bounds the time, and the variants that eliminate once win:
// the tail's up to kMaxTailGeppSystem in batches of kMinTailGeppSystems or more, every pivot row in
// device memory above and in smaller batches (2^20-2^24 unknowns: the tail's 2-6% quicker with
// 16384 systems of 256 or 1024, every pivot row in device memory 5-17% with 2048-8192 systems of
// 128-1024; results/h200_interleaved_gepp_small_batches_2026-11-30.txt). H200, G unknowns/s, 2^26
// unknowns: 103 / 98 at n = 16 / 32 from registers against 100 / 96; 78 at n = 64 from shared
// memory against 65; at n = 96 / 128 / 160 / 192 / 256 / 384 / 512, chunks of 32 with the last of
// 48 64.6 / 62.5 / 58.3 / 56.3 / 55.7 / 52.6 / 50.5 against 60.3 / 59.1 / 56.4 / 54.5 / 55.2 / 52.0
// / 50.6 with the last of 32 (a variant since dropped) and 57.4 / 56.4 / 54.2 / 53.5 / 54.5 / 49.6
// / 54.4 for chunks of 16 in registers; at 1024 / 2048 chunks of 16 54 / 55, the tail in device
// memory 46 / 39, none on chip 45 / 44; with 8192 systems of n = 512 (2^22 unknowns) 22
// recomputed against 31 with none on chip (docs/performance.md).
enum class GeppKernel {
  kChoose,
  kRowsInRegisters,
  kRowsInSharedMemory,
  kPivotRowsInDeviceMemory,
  kTailInDeviceMemory,
  kRecomputedChunksOf32LastOf48,
  kRecomputedChunksOf16InRegisters,
  kTwistedChunksOf32LastOf48
};
// `checked`: the batch is to be checked as it is solved. Batches of kMinRecomputedGeppSystems
// or more take kRecomputedChunksOf16InRegisters, which checks in its second elimination, but at
// 32 < n <= 64; smaller ones above n = 64 the tail's or every pivot row in device memory,
// checked in the substitution; the others the unchecked choice, checked by the separate pass
// (the shared-memory variant's own check costs more). H200, a checked batch's G unknowns/s, 2^26
// unknowns: 68-73 / 52-53 at n = 16 / 32 against 49 / 49 checked apart, 43-44 against 45 at
// n = 64 (three runs);
// 16384 systems of 4096 34 (the tail's) against 30; 2^22 unknowns, 8192 / 4096 systems of 512 /
// 1024: 19 / 11 (the tail's) against 17 / 11.
GeppKernel choose_gepp_kernel(std::size_t n, std::size_t count, bool checked = false);
// Device workspace `kernel` needs for `count` systems of n rows: 24 bytes a row whose pivot row
// waits in device memory, or a chunk's starting row (kChoose: the most either choice, checked
// or not, needs).
std::size_t interleaved_gepp_workspace_bytes(std::size_t n, std::size_t count,
                                             GeppKernel kernel = GeppKernel::kChoose);
// Returns whether the kernel gave every system its verdict (a.check set, x apart from f):
// kRecomputedChunksOf16InRegisters, kTailInDeviceMemory and kPivotRowsInDeviceMemory (whose
// substitution's ring then brings each row as given beside its pivot row), and
// kRowsInSharedMemory where named (for measuring: at n = 32 / 64 its check costs +112% / +216%
// against +94% / +74% apart).
bool launch_interleaved_gepp(const InterleavedGepp& a, GeppKernel kernel, void* stream);

// Raises the kernel's dynamic shared memory limit (once per device, device_solve.cu).
cudaError_t set_interleaved_gepp_limits();

}  // namespace stripesolve::tridiag::gpu
