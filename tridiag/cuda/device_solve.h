// Device-side tridiagonal solvers (CUDA), behind plain pointers: no CUDA type in this header.
// Internal to tridiag/ (used by gpu_solver.cc-side code in cuda/ and by the GPU benchmark).
//
// Layout of a device batch: `rows` unknowns stored one system after another (strided or ragged,
// the SPIKE path) or interleaved (element i of system j at i*count + j, the one-thread-per-system
// path). Strided batches give system_size so the kernels ignore dl/du across system boundaries;
// ragged batches must have dl[first row] = du[last row] = 0 in the device copy (the host wrapper
// zeroes them) and pass system_size = 0.
// Errors: CUDA failures are kInternal/kResourceExhausted with the call and cudaGetErrorString;
// breakdown is kNumerical with the first failing row (numbered in the batch; a row of a reduced
// system is named by the separator row it stands for).
// Threading: every call is asynchronous on `stream` except the final read of the breakdown
// flags, which synchronises that stream.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "tridiag/cuda/kernel_limits.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag::gpu {

// The batch's arrays in device memory, each of `rows` doubles.
struct DeviceBatch : BatchArrays {
  std::size_t rows;         // unknowns in all
  std::size_t system_size;  // strided: n; ragged or one system: 0
  std::size_t count;        // interleaved: number of systems (rows = n * count)
};

// GPU algorithms: kSpike and kThomas on strided/ragged batches (SPIKE partitions with diagonal
// pivoting, or with Thomas: 000 §II "SPIKE-Thomas"), kSpike and kThomas on interleaved batches
// (the same kernels, reading and writing the interleaved rows in place), and kCr, kPcr, kCrPcr,
// kPcrThomas, kCrPcrThomas on strided batches of n <= kMaxReductionSystem (kernel_limits.h; a warp
// a system up to 256 rows, a block of 2, 4, 8 or 16 warps above (8 for pcr and pcr_thomas above
// 1024 rows), the rows in registers: warp_reduction.cu, reduction_kernels.cu, pcr_shuffle_steps.cu,
// pcr_level_groups.cu; the map is docs/tridiag-kernels.md), and kGepp on interleaved batches of
// every n (a thread a system: interleaved_gepp.cu). Others:
// kUnimplemented. choose_kernel (kernel_choice.h) decides.

// Where a check's verdicts go on the device: plain device pointers into the check's workspace
// (quality_check.h: prepare_check), for the one-pass kernels that check their rows as they write x.
struct CheckTarget {
  unsigned long long* header = nullptr;  // the worst error's bits, its system, suspects, spare
  double* errors = nullptr;              // per system: its backward error; -1 for a suspect
  unsigned long long* suspect_system = nullptr;
  double* suspect_error = nullptr;
  double tolerance = 0.0;     // backward_error_tolerance_of(n) of the batch's systems
  bool rows_checked = false;  // set by solve_device where the solve kernels checked every row
};

// Bytes of device workspace solve_device needs for a batch of `rows` unknowns in systems of n
// rows (n matters only to gepp on interleaved batches, whose larger systems keep pivot rows
// there: interleaved_gepp_workspace_bytes).
std::size_t workspace_bytes(Algorithm algorithm, BatchLayout layout, std::size_t rows,
                            std::size_t n = 0);

// `check` (optional): prepare_check's target; where a strided batch goes through the one-pass
// kernels (n <= kMaxGroupSystem), or gepp solves an interleaved batch of systems above n = 64, or
// of kMinRecomputedGeppSystems but at 32 < n <= 64 (interleaved_gepp.cuh: choose_gepp_kernel),
// the kernels check every system as they go and set check->rows_checked (other interleaved
// batches are checked apart).
Status solve_device(Algorithm algorithm, BatchLayout layout, const DeviceBatch& batch,
                    void* workspace, std::size_t workspace_size, double pivot_tolerance,
                    void* stream, CheckTarget* check = nullptr);

// Level 0 of SPIKE streamed from host memory (000 §IV-B) for one system or a strided batch
// larger than the device budget: chunks of chunk_rows rows (a multiple of
// kChunkGranularity) go through the device buffers `chunk` (5 arrays of chunk_rows doubles:
// dl, d, du, f, x): pass 1 per chunk, the reduced system on the device, pass 2 per chunk.
std::size_t chunked_workspace_bytes(std::size_t rows);
Status solve_host_chunked(bool pivoting, const double* dl, const double* d, const double* du,
                          const double* f, double* x, std::size_t rows, std::size_t system_size,
                          std::size_t chunk_rows, double* const chunk[5], void* workspace,
                          std::size_t workspace_size, double pivot_tolerance, void* stream);

// Zeroes dl at the first and du at the last row of each ragged system (offsets: count + 1
// device-side prefix sums) in device arrays.
Status zero_ragged_couplings(double* dl, double* du, const std::size_t* offsets, std::size_t count,
                             void* stream);

// Number of CUDA devices; an error when the runtime reports one.
Result<int> device_count();

}  // namespace stripesolve::tridiag::gpu
