// A batch whole on one device, the GPU path's usual case (gpu_solver.cu): its arrays (or, for a
// part of an interleaved batch spread over devices, its columns of them) copied in, solved with
// one algorithm and checked on the device (the one-pass kernels as they solve), refined once there
// where the check asks for it, x left on the device for the caller to copy back. Internal to
// tridiag/cuda/; host code.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "base/status.h"
#include "gpu/cuda/device_buffer.h"
#include "tridiag/cuda/cuda_check.h"
#include "tridiag/cuda/quality_check.h"
#include "tridiag/gpu.h"

namespace stripesolve::tridiag {

using DeviceBuffer = ::stripesolve::gpu::DeviceBuffer;  // one cudaMalloc'd block (gpu/cuda/)

// What an attempt leaves for the check: the device check's findings while the batch was on
// the device, and f where x aliases it and the fallback may need it.
struct Attempt {
  bool checked_on_device = false;
  gpu::DeviceCheck check;
  std::vector<double> f_kept;
};

// Where a batch on one device lies in the host arrays: the whole batch, one block per array; or,
// for a part of an interleaved batch spread over devices, the columns [first, first + count) of
// its n rows, `pitch` systems apart.
struct HostColumns {
  std::size_t first = 0;
  std::size_t pitch = 0;  // 0: the whole batch
};

// A batch whole on one device, from its copy in to the copy of x back (the buffers are freed on
// the device that is current then).
struct Resident {
  DeviceBuffer buf[5], ws, check, offsets;
  double* x() const { return buf[4].as<double>(); }
};

// The device budget of an attempt: GpuOptions::device_memory_budget, else 90% of the current
// device's free memory.
Result<std::size_t> budget_of(const GpuOptions& options);

// Copies one array of the batch between the host (the batch's columns `cols` there) and the
// device (the batch alone, contiguous), `kind` saying which way.
Status copy_rows(double* dst, const double* src, const BatchShape& shape, const HostColumns& cols,
                 cudaMemcpyKind kind, const std::string& what);

// Device bytes of a batch whole on the device: its five arrays, the solver's and the check's
// workspaces, a ragged batch's offsets.
std::size_t whole_bytes(Algorithm alg, const BatchShape& shape);

// Copies the batch (its columns `cols` of the host arrays) to the current device, solves it with
// `alg` and checks it there, refined once where `refine` and the check ask for it (`budget`
// bytes permitting). x stays on the device. Returns the solve's status: a breakdown (kNumerical)
// is returned at once unless `past_breakdown`, which checks past it.
Status solve_resident(Algorithm alg, const BatchShape& shape, const BatchArrays& arrays,
                      const HostColumns& cols, std::size_t budget, double pivot_tolerance,
                      bool past_breakdown, bool refine, Resident& res,
                      std::vector<std::string>& notes, Attempt& attempt);

}  // namespace stripesolve::tridiag
