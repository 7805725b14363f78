// The GPU path of tridiag/ (CUDA), for host arrays: copies in, solves, copies back, and solves
// systems larger than the device budget in chunks (000 §IV-B). No CUDA type here; in a build
// without CUDA gpu_available() is false and solve_batch_gpu returns kUnimplemented.
//
// Algorithms on the GPU: spike (SPIKE + diagonal pivoting, the stable default) and thomas
// (SPIKE partitions solved by Thomas, 000's "SPIKE-Thomas") for strided and ragged batches and
// single systems of any size (systems of n <= 4608 in one pass, larger ones in two passes of
// the same kernel around the system of their 288-row warps' separators, cuda/group_spike.cu;
// systems beyond the device budget in chunks, cuda/spike_kernels.cu); spike and thomas for
// interleaved batches (the same kernels, reading the interleaved rows in place); cr, pcr, cr_pcr,
// pcr_thomas, cr_pcr_thomas for strided batches of n <= 4096 (a warp a system up to 256 rows, a
// block a system above, rows in registers; docs/tridiag-kernels.md maps each size to its kernel).
// gepp (LAPACK dgtsv's partial pivoting) for interleaved batches, a thread a system
// (cuda/interleaved_gepp.cu: each row read once, the pivot rows in shared memory up to n = 64;
// above, in batches of 32768 systems or more, one chunk's on chip and the earlier chunks
// eliminated again for the substitution; in smaller ones the first 32 on chip and the rest in
// device memory up to 1024, all in device memory above); otherwise gepp runs on the CPU only (its
// row interchanges are what diagonal pivoting avoids in SPIKE's partitions), and bondeli too (its
// structure is SPIKE's). kAuto: when stable is required, gepp for interleaved batches (but a few
// large systems) and spike otherwise; else thomas. On breakdown it falls back to spike, and when
// spike fails to CPU gepp, with a note. Quality check (tridiag.h, issue 17): every solve is checked
// like a CPU one, on the device while the batch is there (cuda/quality_check.h: each system's
// backward error against backward_error_tolerance, one more read of the five arrays; only the
// systems above the tolerance come back to the host). Under kAuto, spike or SolveOptions::fallback
// those systems alone are solved again with gepp on the CPU from the host arrays (a breakdown of an
// explicit spike, or of an algorithm with the fallback allowed, is checked past and redone the same
// way); otherwise the report carries the CPU path's warning. A batch solved in chunks is checked on
// the CPU. SolveReport::check_seconds says what the check took.
// Chunking: when the batch and workspace exceed device_memory_budget, strided batches and single
// systems are streamed through the GPU in chunks of whole 1152-row tiles: pass 1 per chunk,
// the reduced system on the device, pass 2 per chunk (two uploads of the input, one download).
// Threading: calls are serialised per process by the CUDA runtime's default stream use; each
// call allocates and frees its own device memory.
#pragma once

#include <cstddef>
#include <span>

#include "base/status.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag {

struct GpuOptions {
  SolveOptions solve;
  // Device bytes a call may allocate; 0 = 90% of the free device memory.
  std::size_t device_memory_budget = 0;
  // The CUDA device the call runs on (it becomes the calling thread's current device).
  int device = 0;
  // Where the result promises stability (auto, spike, or a fallback asked for) and the batch is
  // whole on the device: one step of iterative refinement on the device when a system's
  // backward error is above 1.25 eps though within its tolerance (cuda/refinement.h), kept
  // only if the check finds it no worse. A note says when it ran.
  bool refine = true;
};

// Whether this build has CUDA and a device is present (cudaGetDeviceCount succeeds and is > 0).
bool gpu_available();

// What kAuto runs on the GPU: when options.require_stable, gepp for interleaved batches of
// n <= 128 or of at least 4096 systems (a thread a system, faster at every n measured;
// solve_batch_gpu takes spike where gepp's pivot rows alone would break the device budget) and
// spike otherwise; else thomas. Defined once for the builds with and without CUDA
// (cuda/kernel_choice.cc).
Algorithm choose_gpu_algorithm(const BatchShape& shape, const SolveOptions& options);

Result<SolveReport> solve_batch_gpu(const BatchShape& shape, const BatchArrays& arrays,
                                    const GpuOptions& options = {});

// The batch over `devices` (CUDA ordinals, as gpu::choose_devices gives them) at once (issue
// 19): a strided or ragged batch is cut into one run of whole systems of about equal unknowns
// per device, each solved by solve_batch_gpu
// on its device (device_memory_budget per device) on a thread of its own; the report's notes
// are those of every part. An interleaved batch is cut into runs of systems too, each device
// copying its systems' columns of every row (cudaMemcpy2D) and solving them as an interleaved
// batch of its own; its check's findings come back numbered in the batch, and the fallbacks run
// once for the whole batch. A batch of fewer systems than devices runs on the first device
// alone (so does one device; no device: options.device). The first part that fails fails the
// call.
Result<SolveReport> solve_batch_gpus(const BatchShape& shape, const BatchArrays& arrays,
                                     const GpuOptions& options, std::span<const int> devices);

}  // namespace stripesolve::tridiag
