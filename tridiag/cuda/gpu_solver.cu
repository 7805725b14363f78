// Host entry point of the GPU path (tridiag/gpu.h): device memory, copies, chunking, the
// choice of kAuto and its fallbacks.
#include <cuda_runtime.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "tridiag/cuda/cuda_check.h"
#include "tridiag/cuda/device_solve.h"
#include "tridiag/gpu.h"

namespace stripesolve::tridiag {

namespace {

// Owns one cudaMalloc'd buffer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_ != nullptr) cudaFree(p_);
  }
  Status allocate(std::size_t bytes, const char* what) {
    return gpu::cuda_check(cudaMalloc(&p_, std::max<std::size_t>(bytes, 1)),
                           std::string("cudaMalloc of ") + std::to_string(bytes) + " bytes for " + what);
  }
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }

 private:
  void* p_ = nullptr;
};

Result<std::size_t> budget_of(const GpuOptions& options) {
  if (options.device_memory_budget != 0) return options.device_memory_budget;
  std::size_t free_bytes = 0, total = 0;
  STRIPESOLVE_RETURN_IF_ERROR(gpu::cuda_check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo"));
  return free_bytes / 10 * 9;
}

// One attempt with one algorithm, the whole batch on the device or (SPIKE/Thomas, one system
// or strided) streamed in chunks.
Status run_on_gpu(Algorithm alg, const BatchShape& shape, const BatchArrays& arrays,
                  const GpuOptions& options, std::vector<std::string>& notes) {
  const std::size_t rows = shape.unknowns();
  const std::size_t systems = shape.systems();
  const std::size_t n = shape.layout == BatchLayout::kRagged ? 0 : shape.n;
  const bool ragged = shape.layout == BatchLayout::kRagged;
  STRIPESOLVE_ASSIGN_OR_RETURN(const std::size_t budget, budget_of(options));
  const std::size_t ws_bytes = gpu::workspace_bytes(alg, shape.layout, rows);
  const std::size_t whole = 5 * rows * sizeof(double) + ws_bytes +
                            (ragged ? (systems + 1) * sizeof(std::size_t) : 0);
  cudaStream_t stream = nullptr;
  if (whole <= budget) {
    DeviceBuffer buf[5], ws, offsets;
    const char* names[5] = {"dl", "d", "du", "f", "x"};
    for (int k = 0; k < 5; ++k) STRIPESOLVE_RETURN_IF_ERROR(buf[k].allocate(rows * sizeof(double), names[k]));
    STRIPESOLVE_RETURN_IF_ERROR(ws.allocate(ws_bytes, "the solver workspace"));
    const double* in[4] = {arrays.dl, arrays.d, arrays.du, arrays.f};
    for (int k = 0; k < 4; ++k) {
      STRIPESOLVE_RETURN_IF_ERROR(gpu::cuda_check(
          cudaMemcpy(buf[k].as<double>(), in[k], rows * sizeof(double), cudaMemcpyHostToDevice),
          std::string("copying ") + names[k] + " to the device"));
    }
    if (ragged) {
      std::vector<std::size_t> off(systems + 1, 0);
      for (std::size_t j = 0; j < systems; ++j) off[j + 1] = off[j] + shape.sizes[j];
      STRIPESOLVE_RETURN_IF_ERROR(offsets.allocate(off.size() * sizeof(std::size_t), "ragged offsets"));
      STRIPESOLVE_RETURN_IF_ERROR(gpu::cuda_check(
          cudaMemcpy(offsets.as<void>(), off.data(), off.size() * sizeof(std::size_t), cudaMemcpyHostToDevice),
          "copying ragged offsets"));
      STRIPESOLVE_RETURN_IF_ERROR(gpu::zero_ragged_couplings(buf[0].as<double>(), buf[2].as<double>(),
                                                             offsets.as<std::size_t>(), systems, stream));
    }
    gpu::DeviceBatch b{buf[0].as<double>(), buf[1].as<double>(), buf[2].as<double>(),
                       buf[3].as<double>(), buf[4].as<double>(), rows,
                       shape.layout == BatchLayout::kStrided ? n : 0, systems};
    Status st = gpu::solve_device(alg, shape.layout, b, ws.as<void>(), ws_bytes,
                                  options.solve.pivot_tolerance, stream);
    if (!st.is_ok()) return st;
    return gpu::cuda_check(cudaMemcpy(arrays.x, buf[4].as<double>(), rows * sizeof(double),
                                      cudaMemcpyDeviceToHost),
                           "copying x from the device");
  }
  if (ragged || shape.layout == BatchLayout::kInterleaved ||
      (alg != Algorithm::kSpike && alg != Algorithm::kThomas)) {
    return Status::resource_exhausted(
        "batch of " + std::to_string(rows) + " unknowns needs " + std::to_string(whole) +
        " device bytes, over the budget of " + std::to_string(budget) +
        "; only spike and thomas on one system or a strided batch are solved in chunks");
  }
  const std::size_t ws_chunked = gpu::chunked_workspace_bytes(rows);
  const std::size_t per_row = 5 * sizeof(double);
  if (budget <= ws_chunked + per_row * gpu::kChunkGranularity) {
    return Status::resource_exhausted("device budget of " + std::to_string(budget) +
                                      " bytes cannot hold the reduced systems (" +
                                      std::to_string(ws_chunked) + " bytes) and one chunk");
  }
  std::size_t chunk_rows = (budget - ws_chunked) / per_row / gpu::kChunkGranularity *
                           gpu::kChunkGranularity;
  chunk_rows = std::min(chunk_rows, (rows + gpu::kChunkGranularity - 1) / gpu::kChunkGranularity *
                                        gpu::kChunkGranularity);
  DeviceBuffer buf[5], ws;
  double* chunk[5];
  for (int k = 0; k < 5; ++k) {
    STRIPESOLVE_RETURN_IF_ERROR(buf[k].allocate(chunk_rows * sizeof(double), "a chunk"));
    chunk[k] = buf[k].as<double>();
  }
  STRIPESOLVE_RETURN_IF_ERROR(ws.allocate(ws_chunked, "the chunked solver workspace"));
  notes.push_back("solved in " + std::to_string((rows + chunk_rows - 1) / chunk_rows) +
                  " chunks of " + std::to_string(chunk_rows) + " rows (device budget " +
                  std::to_string(budget) + " bytes)");
  return gpu::solve_host_chunked(alg == Algorithm::kSpike, arrays.dl, arrays.d, arrays.du,
                                 arrays.f, arrays.x, rows, systems > 1 ? n : 0, chunk_rows, chunk,
                                 ws.as<void>(), ws_chunked, options.solve.pivot_tolerance, stream);
}

}  // namespace

bool gpu_available() {
  auto count = gpu::device_count();
  return count.is_ok() && *count > 0;
}

Algorithm choose_gpu_algorithm(const BatchShape&, const SolveOptions& options) {
  return options.require_stable ? Algorithm::kSpike : Algorithm::kThomas;
}

Result<SolveReport> solve_batch_gpu(const BatchShape& shape, const BatchArrays& arrays,
                                    const GpuOptions& options) {
  STRIPESOLVE_RETURN_IF_ERROR(validate_batch(shape, arrays));
  STRIPESOLVE_ASSIGN_OR_RETURN(const int devices, gpu::device_count());
  if (devices == 0) return Status::unavailable("no CUDA device present");
  if (options.device < 0 || options.device >= devices) {
    return Status::invalid_argument("tridiag: device " + std::to_string(options.device) + " of " +
                                    std::to_string(devices));
  }
  STRIPESOLVE_RETURN_IF_ERROR(gpu::cuda_check(cudaSetDevice(options.device), "cudaSetDevice"));
  const bool automatic = options.solve.algorithm == Algorithm::kAuto;
  SolveReport report;
  report.algorithm = automatic ? choose_gpu_algorithm(shape, options.solve) : options.solve.algorithm;
  if (automatic) {
    report.notes.push_back("auto chose " + std::string(algorithm_name(report.algorithm)) + " (" +
                           (options.solve.require_stable ? "stable" : "unpivoted") +
                           " requested, GPU)");
  }
  Status st = run_on_gpu(report.algorithm, shape, arrays, options, report.notes);
  if (st.is_ok() || !automatic || st.code() != StatusCode::kNumerical) {
    if (!st.is_ok()) return st;
    return report;
  }
  std::string spike_failure = st.message();
  if (report.algorithm != Algorithm::kSpike) {
    report.notes.push_back(std::string(algorithm_name(report.algorithm)) + " broke down (" +
                           st.message() + "); solved again with spike");
    const Status retry = run_on_gpu(Algorithm::kSpike, shape, arrays, options, report.notes);
    if (retry.is_ok()) return report;
    if (retry.code() != StatusCode::kNumerical) return retry;
    spike_failure = retry.message();
  }
  report.notes.push_back("spike broke down on the GPU (" + spike_failure +
                         "); solved again with gepp on the CPU");
  SolveOptions cpu = options.solve;
  cpu.algorithm = Algorithm::kGepp;
  auto r = solve_batch(shape, arrays, cpu);
  if (!r.is_ok()) return r.status();
  return report;
}

}  // namespace stripesolve::tridiag
