// A batch whole on one device (resident_batch.h): copied in, solved and checked there, refined
// once on the device where the check asks for it and the budget allows.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tridiag/cuda/device_solve.h"
#include "tridiag/cuda/refinement.h"
#include "tridiag/cuda/resident_batch.h"

namespace stripesolve::tridiag {
namespace {

// A backward error in a note ("1.23e-16").
std::string error_text(double e) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", e);
  return text;
}

// The device buffers and launches an attempt on the whole batch shares with its refinement.
struct OnDevice {
  Algorithm algorithm;
  BatchLayout layout;
  gpu::DeviceBatch batch;
  std::size_t systems;
  const std::size_t* offsets;  // ragged: the device prefix sums; else null
  void* workspace;
  std::size_t workspace_bytes;
  void* check_workspace;
  std::size_t check_bytes;
  double pivot_tolerance;
  cudaStream_t stream;
};

// One refinement step (cuda/refinement.h) of the solution in dev.batch.x: residual, a solve
// with the same algorithm, the update, the check again. The refined x is kept when the check
// finds no more suspects and no larger worst error within the tolerance than `check` did (then
// `check` becomes the new check); else the first x is put back. A breakdown of the second solve
// keeps the first x. `notes` says which.
Status refine_on_device(const OnDevice& dev, std::vector<std::string>& notes,
                        gpu::DeviceCheck& check) {
  const std::size_t rows = dev.batch.rows;
  STRIPESOLVE_ASSIGN_OR_RETURN(
      DeviceBuffer r, DeviceBuffer::allocate(rows * sizeof(double), "the refinement's residual"));
  STRIPESOLVE_ASSIGN_OR_RETURN(
      DeviceBuffer dx,
      DeviceBuffer::allocate(rows * sizeof(double), "the refinement's correction"));
  STRIPESOLVE_ASSIGN_OR_RETURN(DeviceBuffer first,
                               DeviceBuffer::allocate(rows * sizeof(double), "the first solution"));
  STRIPESOLVE_RETURN_IF_ERROR(
      gpu::residual_on_device(dev.layout, dev.batch, r.as<double>(), dev.stream));
  gpu::DeviceBatch correction = dev.batch;
  correction.f = r.as<double>();
  correction.x = dx.as<double>();
  const Status solved = gpu::solve_device(dev.algorithm, dev.layout, correction, dev.workspace,
                                          dev.workspace_bytes, dev.pivot_tolerance, dev.stream);
  if (solved.code() == StatusCode::kNumerical) {
    notes.push_back("refinement on the device broke down (" + solved.message() +
                    "); the first solution is kept");
    return Status::ok();
  }
  STRIPESOLVE_RETURN_IF_ERROR(solved);
  STRIPESOLVE_RETURN_IF_ERROR(
      gpu::cuda_check(cudaMemcpyAsync(first.as<double>(), dev.batch.x, rows * sizeof(double),
                                      cudaMemcpyDeviceToDevice, dev.stream),
                      "keeping the first solution"));
  STRIPESOLVE_RETURN_IF_ERROR(gpu::add_on_device(dev.batch.x, dx.as<double>(), rows, dev.stream));
  gpu::DeviceCheck after;
  STRIPESOLVE_RETURN_IF_ERROR(gpu::check_on_device(dev.layout, dev.batch, dev.systems, dev.offsets,
                                                   dev.check_workspace, dev.check_bytes, dev.stream,
                                                   after));
  after.seconds += check.seconds;
  if (after.suspects.size() > check.suspects.size() ||
      after.worst_clean_error > check.worst_clean_error) {
    notes.push_back(
        "refinement on the device did not help (worst backward error within the "
        "tolerance " +
        error_text(check.worst_clean_error) + " -> " + error_text(after.worst_clean_error) + ", " +
        std::to_string(check.suspects.size()) + " -> " + std::to_string(after.suspects.size()) +
        " above it); the first solution is kept");
    check.seconds = after.seconds;
    return gpu::cuda_check(cudaMemcpyAsync(dev.batch.x, first.as<double>(), rows * sizeof(double),
                                           cudaMemcpyDeviceToDevice, dev.stream),
                           "restoring the first solution");
  }
  notes.push_back("refined once on the device: worst backward error within the tolerance " +
                  error_text(check.worst_clean_error) + " -> " +
                  error_text(after.worst_clean_error));
  check = std::move(after);
  return Status::ok();
}

}  // namespace

Result<std::size_t> budget_of(const GpuOptions& options) {
  if (options.device_memory_budget != 0) return options.device_memory_budget;
  std::size_t free_bytes = 0, total = 0;
  STRIPESOLVE_RETURN_IF_ERROR(
      gpu::cuda_check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo"));
  return free_bytes / 10 * 9;
}

Status copy_rows(double* dst, const double* src, const BatchShape& shape, const HostColumns& cols,
                 cudaMemcpyKind kind, const std::string& what) {
  if (cols.pitch == 0) {
    return gpu::cuda_check(cudaMemcpy(dst, src, shape.unknowns() * sizeof(double), kind), what);
  }
  const std::size_t width = shape.count * sizeof(double), pitch = cols.pitch * sizeof(double);
  if (kind == cudaMemcpyHostToDevice) {
    return gpu::cuda_check(cudaMemcpy2D(dst, width, src + cols.first, pitch, width, shape.n, kind),
                           what);
  }
  return gpu::cuda_check(cudaMemcpy2D(dst + cols.first, pitch, src, width, width, shape.n, kind),
                         what);
}

std::size_t whole_bytes(Algorithm alg, const BatchShape& shape) {
  const std::size_t rows = shape.unknowns(), systems = shape.systems();
  return 5 * rows * sizeof(double) + gpu::workspace_bytes(alg, shape.layout, rows, shape.n) +
         gpu::check_workspace_bytes(shape.layout, systems) +
         (shape.layout == BatchLayout::kRagged ? (systems + 1) * sizeof(std::size_t) : 0);
}

Status solve_resident(Algorithm alg, const BatchShape& shape, const BatchArrays& arrays,
                      const HostColumns& cols, std::size_t budget, double pivot_tolerance,
                      bool past_breakdown, bool refine, Resident& res,
                      std::vector<std::string>& notes, Attempt& attempt) {
  const std::size_t rows = shape.unknowns();
  const std::size_t systems = shape.systems();
  const bool ragged = shape.layout == BatchLayout::kRagged;
  const std::size_t ws_bytes = gpu::workspace_bytes(alg, shape.layout, rows, shape.n);
  const std::size_t check_bytes = gpu::check_workspace_bytes(shape.layout, systems);
  cudaStream_t stream = nullptr;
  const char* names[5] = {"dl", "d", "du", "f", "x"};
  for (int k = 0; k < 5; ++k) {
    STRIPESOLVE_ASSIGN_OR_RETURN(res.buf[k],
                                 DeviceBuffer::allocate(rows * sizeof(double), names[k]));
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(res.ws, DeviceBuffer::allocate(ws_bytes, "the solver workspace"));
  STRIPESOLVE_ASSIGN_OR_RETURN(res.check, DeviceBuffer::allocate(check_bytes, "the quality check"));
  const double* in[4] = {arrays.dl, arrays.d, arrays.du, arrays.f};
  for (int k = 0; k < 4; ++k) {
    STRIPESOLVE_RETURN_IF_ERROR(copy_rows(res.buf[k].as<double>(), in[k], shape, cols,
                                          cudaMemcpyHostToDevice,
                                          std::string("copying ") + names[k] + " to the device"));
  }
  if (ragged) {
    std::vector<std::size_t> off(systems + 1, 0);
    for (std::size_t j = 0; j < systems; ++j) off[j + 1] = off[j] + shape.sizes[j];
    STRIPESOLVE_ASSIGN_OR_RETURN(
        res.offsets, DeviceBuffer::allocate(off.size() * sizeof(std::size_t), "ragged offsets"));
    STRIPESOLVE_RETURN_IF_ERROR(
        gpu::cuda_check(cudaMemcpy(res.offsets.as<void>(), off.data(),
                                   off.size() * sizeof(std::size_t), cudaMemcpyHostToDevice),
                        "copying ragged offsets"));
    STRIPESOLVE_RETURN_IF_ERROR(
        gpu::zero_ragged_couplings(res.buf[0].as<double>(), res.buf[2].as<double>(),
                                   res.offsets.as<std::size_t>(), systems, stream));
  }
  gpu::DeviceBatch b{{res.buf[0].as<double>(), res.buf[1].as<double>(), res.buf[2].as<double>(),
                      res.buf[3].as<double>(), res.x()},
                     rows,
                     shape.layout == BatchLayout::kStrided ? shape.n : 0,
                     systems};
  // The one-pass kernels check the systems as they solve them: the check's state first.
  STRIPESOLVE_ASSIGN_OR_RETURN(
      gpu::CheckTarget target,
      gpu::prepare_check(shape.layout, systems, ragged ? 0 : rows / systems, res.check.as<void>(),
                         check_bytes, stream));
  const Status st = gpu::solve_device(alg, shape.layout, b, res.ws.as<void>(), ws_bytes,
                                      pivot_tolerance, stream, &target);
  if (!st.is_ok() && !(past_breakdown && st.code() == StatusCode::kNumerical)) return st;
  const OnDevice dev{alg,
                     shape.layout,
                     b,
                     systems,
                     ragged ? res.offsets.as<std::size_t>() : nullptr,
                     res.ws.as<void>(),
                     ws_bytes,
                     res.check.as<void>(),
                     check_bytes,
                     pivot_tolerance,
                     stream};
  STRIPESOLVE_RETURN_IF_ERROR(gpu::check_on_device(shape.layout, b, systems, dev.offsets,
                                                   res.check.as<void>(), check_bytes, stream,
                                                   attempt.check, &target));
  attempt.checked_on_device = true;
  constexpr double kEps = 2.220446049250313e-16;
  if (refine && st.is_ok() && attempt.check.worst_clean_error > gpu::kRefineAboveEps * kEps) {
    if (whole_bytes(alg, shape) + 3 * rows * sizeof(double) <= budget) {
      STRIPESOLVE_RETURN_IF_ERROR(refine_on_device(dev, notes, attempt.check));
    } else {
      notes.push_back("not refined: the device budget holds the batch but not the refinement");
    }
  }
  return st;
}

}  // namespace stripesolve::tridiag
